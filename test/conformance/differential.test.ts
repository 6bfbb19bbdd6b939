/**
 * Differential tests: the official `phoenix` client (1.8.16, ws as transport) runs one protocol
 * script against the simulator and against real Phoenix, and what it observes (every frame,
 * the close code, and what a refused upgrade looks like on the wire) must agree, server
 * generated ids normalised. Each transcript is also checked against the protocol facts the
 * reference peer showed (docs/field-notes.md "Real Phoenix"), so the simulator is held to them
 * even where no real server can run.
 */
import { beforeAll, describe, expect, it } from 'vitest'
import { Serializer, Socket } from 'phoenix'
import { connect } from 'node:net'
import WebSocket from 'isomorphic-ws'
import { controlTopic, type Payload } from '../../src/protocol.js'
import { rawUpgrade, type RawRefusal } from '../support/raw-http.js'
import { banditClosedFirst } from './harness.js'
import { realPeer, simulatorPeer, type Agent, type Peer, type PeerFactory } from './peer.js'

type RawFrame = [string | null, string | null, string, string, Payload]

const NEVER = 2 ** 31 - 1

/** The official client on one socket, recording every frame it receives. */
class Client {
  readonly frames: RawFrame[] = []
  readonly socket: Socket
  readonly closed: Promise<{ code: number; reason: string }>
  private readonly waiters = new Set<() => void>()
  private barriers = 0

  constructor(peer: Peer, agent: Agent) {
    let onClose!: (e: { code: number; reason: string }) => void
    this.closed = new Promise((resolve) => (onClose = resolve))
    this.socket = new Socket(peer.url, {
      transport: WebSocket as never,
      params: { agent_id: agent.id, api_key: agent.key },
      heartbeatIntervalMs: NEVER,
      reconnectAfterMs: () => NEVER,
      rejoinAfterMs: () => NEVER,
      decode: (raw: string, callback: (message: unknown) => void) => {
        this.frames.push(JSON.parse(raw) as RawFrame)
        for (const wake of [...this.waiters]) wake()
        Serializer.decode(raw, callback)
      },
    } as never)
    this.socket.onClose((e: { code: number; reason: string }) => onClose({ code: e.code, reason: e.reason }))
  }

  /** Sends one frame as is (phoenix.js encodes it). */
  send(joinRef: string | null, ref: string | null, topic: string, event: string, payload: Payload = {}): void {
    ;(this.socket as unknown as { push(m: object): void }).push({ join_ref: joinRef, ref, topic, event, payload })
  }

  /** Resolves with the first frame from `from` on that matches. */
  async frame(from: number, match: (f: RawFrame) => boolean, what: string, timeoutMs = 4000): Promise<RawFrame> {
    const deadline = performance.now() + timeoutMs
    for (;;) {
      const found = this.frames.slice(from).find(match)
      if (found) return found
      const left = deadline - performance.now()
      if (left <= 0) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; got ${JSON.stringify(this.frames.slice(from))}`)
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer)
          this.waiters.delete(wake)
          resolve()
        }
        const timer = setTimeout(wake, left)
        this.waiters.add(wake)
      })
    }
  }

  /**
   * A heartbeat round trip: the socket process answers it itself, after what the socket itself
   * answered of the frames sent before (a refusal, "unmatched topic", a join). A joined channel's
   * own process answers its pushes and leaves, and that reply may come after this one (on Phoenix
   * about half the time, on the simulator always when both came in one read: docs/field-notes.md),
   * so a step that expects a channel's reply waits for that frame first (`until`). Its reply is
   * not kept.
   */
  async barrier(): Promise<void> {
    const ref = `barrier-${++this.barriers}`
    const from = this.frames.length
    this.send(null, ref, 'phoenix', 'heartbeat')
    await this.frame(from, (f) => f[1] === ref, 'the barrier heartbeat reply')
    const at = this.frames.findIndex((f, i) => i >= from && f[1] === ref)
    this.frames.splice(at, 1)
  }
}

/** One step of the script: what the client or the server does, and the frame that shows it was handled. */
interface Step {
  name: string
  run(c: Client, peer: Peer, agent: Agent): Promise<void> | void
  /** The frame the step waits for; none: the barrier alone (a step that must get no answer). */
  until?: (f: RawFrame) => boolean
}

/** The protocol script, the same for every peer. Refs are the client's, so they agree across peers. */
function script(agent: Agent): Step[] {
  const control = controlTopic(agent.id)
  const room = `room:${agent.id}`
  return [
    { name: 'join the control channel', run: (c) => c.send('1', '1', control, 'phx_join'), until: (f) => f[1] === '1' },
    { name: 'join a room', run: (c) => c.send('2', '2', room, 'phx_join', { hello: 1 }), until: (f) => f[1] === '2' },
    { name: 'push to the room', run: (c) => c.send('2', '3', room, 'say', { text: 'hi' }), until: (f) => f[1] === '3' },
    { name: 'push on the control channel', run: (c) => c.send('1', '4', control, 'status', { busy: false }), until: (f) => f[1] === '4' },
    { name: 'a heartbeat', run: (c) => c.send(null, '5', 'phoenix', 'heartbeat'), until: (f) => f[1] === '5' },
    { name: 'a server push on the room', run: (_c, peer) => void peer.push(agent, room, 'news', { n: 1 }), until: (f) => f[3] === 'news' },
    { name: 'a control signal through the channel', run: (_c, peer) => void peer.control(agent, { n: 1, via: 'push', tag: 'p' }), until: (f) => f[3] === 'agent.control' },
    { name: 'a control signal as a broadcast', run: (_c, peer) => void peer.control(agent, { n: 1, via: 'broadcast', tag: 'b' }), until: (f) => f[3] === 'agent.control' },
    { name: 'a duplicate join of the room', run: (c) => c.send('6', '6', room, 'phx_join'), until: (f) => f[3] === 'phx_close' },
    { name: 'a push that still carries the old join_ref', run: (c) => c.send('2', '7', room, 'say', { old: true }), until: (f) => f[1] === '7' },
    { name: 'a push to a topic not joined', run: (c) => c.send('8', '8', 'room:nowhere', 'say'), until: (f) => f[1] === '8' },
    { name: 'a leave of a topic not joined', run: (c) => c.send('77', '9', 'room:elsewhere', 'phx_leave'), until: (f) => f[1] === '9' },
    { name: 'a leave that carries a stale join_ref', run: (c) => c.send('2', '10', room, 'phx_leave') },
    {
      name: 'a join the server refuses',
      run: async (c, peer) => {
        await peer.joinOutcome(`${room}-no`, 'error', { reason: 'nope' }, 1)
        c.send('11', '11', `${room}-no`, 'phx_join')
      },
      until: (f) => f[1] === '11',
    },
    { name: 'join a second room', run: (c) => c.send('12', '12', `${room}-b`, 'phx_join'), until: (f) => f[1] === '12' },
    { name: 'leave the second room', run: (c) => c.send('12', '13', `${room}-b`, 'phx_leave'), until: (f) => f[3] === 'phx_close' },
    { name: 'join a third room', run: (c) => c.send('14', '14', `${room}-c`, 'phx_join'), until: (f) => f[1] === '14' },
    { name: 'the server closes the third room', run: (_c, peer) => void peer.channelClose(agent, `${room}-c`), until: (f) => f[3] === 'phx_close' },
    { name: 'the room crashes', run: (_c, peer) => void peer.channelError(agent, room), until: (f) => f[3] === 'phx_error' },
    { name: 'a push to the crashed room', run: (c) => c.send('6', '15', room, 'say'), until: (f) => f[1] === '15' },
    { name: 'a join of a topic no channel route matches', run: (c) => c.send('16', '16', `task:${agent.id}`, 'phx_join', { x: 1 }), until: (f) => f[1] === '16' },
    { name: 'a push to the topic of that join', run: (c) => c.send('16', '17', `task:${agent.id}`, 'say'), until: (f) => f[1] === '17' },
  ]
}

/** What the official client observed on one peer. */
interface Transcript {
  steps: Array<{ step: string; frames: RawFrame[] }>
  close: { code: number; reason: string }
}

async function observe(peer: Peer): Promise<Transcript> {
  const agent = peer.agent()
  const client = new Client(peer, agent)
  const opened = new Promise<void>((resolve) => client.socket.onOpen(() => resolve()))
  client.socket.connect()
  try {
    await opened
    const steps: Transcript['steps'] = []
    for (const step of script(agent)) {
      const from = client.frames.length
      await step.run(client, peer, agent)
      if (step.until) await client.frame(from, step.until, `the frame of "${step.name}"`)
      await client.barrier()
      steps.push({ step: step.name, frames: client.frames.slice(from).map(normalise) })
    }
    await peer.disconnect(agent)
    return { steps, close: await client.closed }
  } finally {
    await new Promise<void>((resolve) => client.socket.disconnect(() => resolve(), 1000))
  }
}

/** Server-generated ids: the platform's request ids. Everything else is compared as sent. */
function normalise(frame: RawFrame): RawFrame {
  return JSON.parse(JSON.stringify(frame).replace(/req-[0-9a-f]{16}/g, 'req-<id>')) as RawFrame
}

const refusalCases: Array<{ name: string; setup?: (peer: Peer) => Promise<void>; query: (agent: Agent) => Record<string, string>; needsLive?: boolean }> = [
  { name: 'a wrong key (connect/3 returns :error)', query: (a) => ({ agent_id: a.id, api_key: 'wrong', vsn: '2.0.0' }) },
  { name: 'an unknown on_conflict (400)', query: (a) => ({ agent_id: a.id, api_key: a.key, vsn: '2.0.0', on_conflict: 'bogus' }) },
  { name: 'on_conflict=reject while a socket is live (409)', needsLive: true, query: (a) => ({ agent_id: a.id, api_key: a.key, vsn: '2.0.0', on_conflict: 'reject' }) },
  { name: 'a queued 429 with the platform body and Retry-After', setup: (p) => p.refuse({ status: 429, body: 'platform', retryAfterS: 3 }), query: (a) => ({ agent_id: a.id, api_key: a.key, vsn: '2.0.0' }) },
  { name: 'a queued 503 with Connection: close', setup: (p) => p.refuse({ status: 503, connectionClose: true }), query: (a) => ({ agent_id: a.id, api_key: a.key, vsn: '2.0.0' }) },
]

/** What of a refusal must agree: everything but the date. */
function comparable(r: RawRefusal): RawRefusal {
  return { ...r, headers: r.headers.map(([k, v]): [string, string] => [k, k === 'date' ? '<date>' : v]), body: r.body.replace(/req-[0-9a-f]{16}/g, 'req-<id>') }
}

/**
 * Resolves once a socket of `agent` is live on `peer`. Phoenix subscribes a socket to its id a
 * moment after its 101 (Phoenix.Socket's `__init__`, lib/phoenix/socket.ex): until then a
 * broadcast to it reaches no one and `on_conflict=reject` does not see it (docs/field-notes.md).
 *
 * @throws {Error} (rejects) after 2000 ms.
 */
function untilLive(peer: Peer, agent: Agent): Promise<void> {
  return peer.until(async () => (await peer.live(agent)).length > 0, `a socket of ${agent.id} live`, 2000)
}

async function refusals(peer: Peer): Promise<Record<string, RawRefusal>> {
  const out: Record<string, RawRefusal> = {}
  for (const c of refusalCases) {
    const agent = peer.agent()
    let holder: Client | null = null
    try {
      if (c.needsLive) {
        holder = new Client(peer, agent)
        const opened = new Promise<void>((resolve) => holder!.socket.onOpen(() => resolve()))
        holder.socket.connect()
        await opened
        // Until it is live, on_conflict=reject sees no socket of the agent and accepts the upgrade.
        await untilLive(peer, agent)
      }
      await c.setup?.(peer)
      out[c.name] = comparable(await rawUpgrade(peer.port, c.query(agent)))
    } finally {
      if (holder) await new Promise<void>((resolve) => holder!.socket.disconnect(() => resolve(), 1000))
    }
  }
  return out
}

async function malformed(peer: Peer): Promise<{ code: number; reason: string }> {
  const agent = peer.agent()
  const ws = new WebSocket(`${peer.url}/websocket?agent_id=${agent.id}&api_key=${agent.key}&vsn=2.0.0`)
  await new Promise((resolve, reject) => {
    ws.once('open', resolve)
    ws.once('error', reject)
  })
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.once('close', (code: number, reason: Buffer) => resolve({ code, reason: reason.toString() })))
  ws.send('this is not JSON')
  return closed
}

/** What a raw client saw of the frames and paths no phoenix.js client sends (a breaker's probes, 2026-12-06). */
interface Edges {
  /** A client's own phx_reply: on a topic not joined, then on its joined control topic. */
  clientReply: RawFrame[] | string
  /** A binary heartbeat whose join_ref and ref have no bytes: the reply. */
  emptyRefs: RawFrame | string
  /** A frame holding a number beyond a double's range: the close. */
  outOfRange: { code: number; reason: string } | string
  /** A heartbeat whose ref is a number beyond a double's range: the close. */
  outOfRangeRef: { code: number; reason: string } | string
  /** A heartbeat with a sixth element beyond a double's range: the close. */
  outOfRangeExtra: { code: number; reason: string } | string
  /** A frame holding an integer of 310 digits (beyond a double's range too, but an integer): the reply. */
  bigInteger: RawFrame | string
  /** Upgrades to the socket's path written with an empty segment: whether each opened. */
  paths: Record<string, boolean>
  /** The head of an accepted upgrade's 101, its date normalised. */
  head101: string
  /** An upgrade naming two agents (`agent_id=A&api_key=<B's key>&agent_id=B`): whether it opened. */
  duplicateParam: boolean | string
  /** What each {@link SIZED} request was answered with. */
  sizes: Record<string, string>
  /** Milliseconds from the server's close frame to its end of the TCP connection, the client never answering. */
  closeTail: number | string
  /**
   * Channels joined with a null join_ref (the control topic with ref "5", `room:nj` with "6"): the
   * envelope `[join_ref, ref, topic, event]` of each frame the server sent, in order: the two join
   * replies, the reply to a push on the room, its leave's reply and phx_close, then the supersede a
   * newer socket of the agent brought (the control topic written `ctl`).
   */
  nullJoinRef: Array<[string | null, string | null, string, string]> | string
  /**
   * A socket upgraded with `vsn=1.0.0` (Phoenix's V1 JSON serializer: a frame is an object), one
   * frame at a time: each frame the server sent, as its keys in order and its value (the supersede's
   * ids written `<id>`): the control join's reply, a heartbeat's, a room join's, a room push's with
   * and without a join_ref, a server push on the room, "unmatched topic", the room leave's reply
   * and phx_close, then the supersede a newer (V2) socket of the agent brought.
   */
  v1: Array<[string[] | 'array', unknown]> | string
  /** An upgrade with no `vsn` param: the reply to a V1 heartbeat, as {@link Edges.v1} has it. */
  noVsn: Array<[string[] | 'array', unknown]> | string
  /** A V2 frame (an array) on a V1 socket: the close. */
  arrayOnV1: { code: number; reason: string } | string
  /** The status line (and content-length of a refusal) an upgrade with each `vsn` value got, the key right unless the name says otherwise. */
  vsns: Record<string, string>
  /**
   * Frames whose join_ref and ref are JSON numbers or booleans (as a client in another language
   * may send them), one at a time: each frame sent and every frame it brought (the control topic
   * written `ctl`): joins, heartbeats, a room push (one with the join_ref as a string), "unmatched
   * topic", an array of 7 elements, the room's leave, a join_ref `true`, then a server push on the
   * room joined again.
   */
  scalarRefs: Array<[unknown, unknown[]]> | string
}

/**
 * Upgrade requests around the web servers' size limits (src/node/server/request-limits.ts), each
 * with a request line of exactly `line` bytes and `extra` headers after the five an upgrade
 * needs. The key is wrong, so a request the server reads gets the platform's 403 and opens nothing.
 */
const SIZED: Array<{ name: string; line: number; extra: Array<[string, string]> }> = [
  { name: 'request line 8,758 bytes', line: 8_758, extra: [] },
  { name: 'request line 8,759 bytes', line: 8_759, extra: [] },
  { name: 'request line 9,998 bytes', line: 9_998, extra: [] },
  { name: 'request line 9,999 bytes', line: 9_999, extra: [] },
  { name: 'a header value of 4,139 bytes after a 100-byte request line', line: 100, extra: [['x-pad', 'v'.repeat(4_139)]] },
  { name: 'a header value of 4,140 bytes after a 100-byte request line', line: 100, extra: [['x-pad', 'v'.repeat(4_140)]] },
  { name: 'a header line of 10,000 bytes with its CRLF', line: 100, extra: [['x-pad', 'v'.repeat(9_991)]] },
  { name: 'a header line of 10,001 bytes with its CRLF', line: 100, extra: [['x-pad', 'v'.repeat(9_992)]] },
  { name: '50 headers', line: 100, extra: Array.from({ length: 45 }, (_, i): [string, string] => [`x-h${i}`, 'v']) },
  { name: '51 headers', line: 100, extra: Array.from({ length: 46 }, (_, i): [string, string] => [`x-h${i}`, 'v']) },
  { name: '100 header names', line: 100, extra: Array.from({ length: 95 }, (_, i): [string, string] => [`x-h${i}`, 'v']) },
  { name: '101 header names', line: 100, extra: Array.from({ length: 96 }, (_, i): [string, string] => [`x-h${i}`, 'v']) },
]

/** The five header lines every upgrade request here carries after its request line. */
const UPGRADE_HEADERS = ['host: 127.0.0.1', 'upgrade: websocket', 'connection: Upgrade', 'sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==', 'sec-websocket-version: 13']

/** An upgrade request of a fresh agent with its key, as one string. */
function upgradeOf(agent: Agent): string {
  return [`GET /socket/websocket?agent_id=${agent.id}&api_key=${agent.key}&vsn=2.0.0 HTTP/1.1`, ...UPGRADE_HEADERS].join('\r\n') + '\r\n\r\n'
}

/**
 * Writes `request` at once on a fresh connection and resolves with the head of the answer (up to
 * its blank line), or with why there is none (no answer in 3 s, the connection closed first);
 * the connection is then cut.
 */
function answerHead(port: number, request: string): Promise<string> {
  const socket = connect(port, '127.0.0.1')
  return new Promise<string>((resolve) => {
    let text = ''
    const done = (answer: string) => {
      clearTimeout(timer)
      socket.destroy()
      resolve(answer)
    }
    const timer = setTimeout(() => done(`no answer within 3000 ms; got ${JSON.stringify(text)}`), 3000)
    socket.on('error', () => {})
    socket.once('connect', () => socket.write(request))
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1')
      const at = text.indexOf('\r\n\r\n')
      if (at >= 0) done(text.slice(0, at))
    })
    socket.once('close', () => done(`closed with ${JSON.stringify(text)}`))
  })
}

/** The request of one {@link SIZED} case, written at once as a client writes it; the answer's status line, and a refusal's whole head. */
async function sizedUpgrade(port: number, c: (typeof SIZED)[number]): Promise<string> {
  const start = 'GET /socket/websocket?agent_id=c1&api_key=wrong&vsn=2.0.0&pad='
  const end = ' HTTP/1.1'
  const requestLine = `${start}${'p'.repeat(c.line - start.length - end.length)}${end}`
  const head = await answerHead(port, `${[requestLine, ...UPGRADE_HEADERS, ...c.extra.map(([k, v]) => `${k}: ${v}`)].join('\r\n')}\r\n\r\n`)
  const status = head.split('\r\n')[0]!
  return / (414|431) /.test(status) ? head : status
}

/**
 * How long after the "disconnect" broadcast's close frame the server ended the TCP connection of
 * a client that never answers it (a raw upgrade that then only reads), in milliseconds, or why
 * there is no figure.
 */
async function closeTail(peer: Peer): Promise<number | string> {
  const agent = peer.agent()
  const socket = connect(peer.port, '127.0.0.1')
  socket.on('error', () => {})
  try {
    return await new Promise<number | string>((resolve) => {
      let text = ''
      let upgraded = false
      let closeFrameAt: number | null = null
      const timer = setTimeout(() => resolve(`the connection stayed open 5000 ms${closeFrameAt === null ? ', no close frame came' : ' after the close frame'}`), 5000)
      socket.once('connect', () => socket.write(upgradeOf(agent)))
      socket.on('data', (chunk: Buffer) => {
        if (!upgraded) {
          text += chunk.toString('latin1')
          const at = text.indexOf('\r\n\r\n')
          if (at < 0) return
          upgraded = true
          if (!text.startsWith('HTTP/1.1 101')) {
            clearTimeout(timer)
            resolve(`not upgraded: ${text.slice(0, text.indexOf('\r\n'))}`)
            return
          }
          // A broadcast sent before the socket is live reaches no one.
          untilLive(peer, agent)
            .then(() => peer.disconnect(agent))
            .catch((error: Error) => resolve(`disconnect failed: ${error.message}`))
          chunk = Buffer.from(text.slice(at + 4), 'latin1')
        }
        // A server frame's first byte: 0x88 is a close frame (FIN, opcode 8).
        if (closeFrameAt === null && chunk.includes(0x88)) closeFrameAt = performance.now()
      })
      socket.once('end', () => {
        clearTimeout(timer)
        resolve(closeFrameAt === null ? 'ended with no close frame' : Math.round(performance.now() - closeFrameAt))
      })
    })
  } finally {
    socket.destroy()
  }
}

/** The head of the 101 a raw upgrade of a fresh agent gets, its date as `<date>`; the connection is then cut. */
async function upgradeHead(peer: Peer): Promise<string> {
  return (await answerHead(peer.port, upgradeOf(peer.agent()))).replace(/^date: .*$/m, 'date: <date>')
}

/** One raw socket of a fresh agent, open. */
async function rawSocket(peer: Peer, path = '/websocket'): Promise<WebSocket> {
  const agent = peer.agent()
  const ws = new WebSocket(`${peer.url}${path}?agent_id=${agent.id}&api_key=${agent.key}&vsn=2.0.0`)
  await new Promise((resolve, reject) => {
    ws.once('open', resolve)
    ws.once('error', reject)
  })
  return ws
}

/** One raw socket of `agent` with `vsn` (null: no vsn param), open. */
async function rawSocketOf(peer: Peer, agent: Agent, vsn: string | null): Promise<WebSocket> {
  const ws = new WebSocket(`${peer.url}/websocket?agent_id=${agent.id}&api_key=${agent.key}${vsn === null ? '' : `&vsn=${vsn}`}`)
  await new Promise((resolve, reject) => {
    ws.once('open', resolve)
    ws.once('error', reject)
  })
  return ws
}

/** The next `count` texts `ws` receives, each as its keys in order (`array` for an array) and its value, the supersede's volatile ids written `<id>`. */
function nextShapes(ws: WebSocket, count: number): Promise<Array<[string[] | 'array', unknown]>> {
  return new Promise((resolve, reject) => {
    const got: Array<[string[] | 'array', unknown]> = []
    const timer = setTimeout(() => {
      ws.off('message', onMessage)
      reject(new Error(`timed out waiting for ${count} frame(s); got ${JSON.stringify(got)}`))
    }, 4000)
    const onMessage = (data: Buffer) => {
      const value = JSON.parse(data.toString()) as unknown
      const payload = (value as { payload?: Record<string, unknown> }).payload
      if (payload && typeof payload === 'object' && 'correlation_id' in payload) {
        // The ids, and the platform app's own text and cooldown (the reference peer's and the simulator's differ).
        payload.correlation_id = '<id>'
        payload.target_socket_id = '<id>'
        payload.message = '<message>'
        payload.retry_after = '<seconds>'
      }
      got.push([Array.isArray(value) ? 'array' : Object.keys(value as object), value])
      if (got.length < count) return
      clearTimeout(timer)
      ws.off('message', onMessage)
      resolve(got)
    }
    ws.on('message', onMessage)
  })
}

/** Runs one probe on a socket of a fresh agent upgraded with `vsn`; a probe that fails is recorded as its error's text. */
async function probeVsn<T>(peer: Peer, vsn: string | null, run: (ws: WebSocket, agent: Agent, closed: Promise<{ code: number; reason: string }>) => Promise<T>): Promise<T | string> {
  let ws: WebSocket | null = null
  try {
    const agent = peer.agent()
    ws = await rawSocketOf(peer, agent, vsn)
    const socket = ws
    const closed = new Promise<{ code: number; reason: string }>((resolve) => socket.once('close', (code: number, reason: Buffer) => resolve({ code, reason: reason.toString() })))
    return await run(ws, agent, closed)
  } catch (error) {
    return `probe failed: ${(error as Error).message}`
  } finally {
    ws?.terminate()
  }
}

/** `vsn` values an upgrade may carry (Phoenix matches `~> 1.0.0` to V1 and `~> 2.0.0` to V2; no vsn is read as 1.0.0). */
const VSNS = ['1.0.0', '1.0.7', '2.0.0', '2.0.1', '2.0.0+build.5', '2.0.1-rc.1', '2', '', '2.9.9', '1.1.0', '3.0.0', '2.0.0-rc.1', '02.0.0']

/** The status line an upgrade with `query` got, and a refusal's content-length. */
async function upgradeStatus(port: number, query: string): Promise<string> {
  const head = await answerHead(port, [`GET /socket/websocket?${query} HTTP/1.1`, ...UPGRADE_HEADERS].join('\r\n') + '\r\n\r\n')
  const lines = head.split('\r\n')
  const length = lines.find((l) => l.toLowerCase().startsWith('content-length:'))
  return [lines[0], ...(length === undefined ? [] : [length.toLowerCase()])].join(', ')
}

/** The next `count` frames `ws` receives, parsed. */
function nextFrames(ws: WebSocket, count: number): Promise<RawFrame[]> {
  const got: RawFrame[] = []
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      ws.off('message', onMessage)
      reject(new Error(`timed out waiting for ${count} frame(s); got ${JSON.stringify(got)}`))
    }, 4000)
    const onMessage = (data: Buffer) => {
      got.push(JSON.parse(data.toString()) as RawFrame)
      if (got.length < count) return
      clearTimeout(timer)
      ws.off('message', onMessage)
      resolve(got)
    }
    ws.on('message', onMessage)
  })
}

/** The close of a probe's socket, or a rejection once it stayed open 4 s. */
async function untilClosed(closed: Promise<{ code: number; reason: string }>): Promise<{ code: number; reason: string }> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([closed, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('the socket stayed open 4000 ms')), 4000)))])
  } finally {
    clearTimeout(timer)
  }
}

/** Runs one probe on a socket of its own; a probe that fails is recorded as its error's text, so each fact fails alone. */
async function probe<T>(peer: Peer, run: (ws: WebSocket, closed: Promise<{ code: number; reason: string }>, agentId: string) => Promise<T>): Promise<T | string> {
  let ws: WebSocket | null = null
  try {
    ws = await rawSocket(peer)
    const socket = ws
    const closed = new Promise<{ code: number; reason: string }>((resolve) => socket.once('close', (code: number, reason: Buffer) => resolve({ code, reason: reason.toString() })))
    return await run(ws, closed, new URL(ws.url).searchParams.get('agent_id')!)
  } catch (error) {
    return `probe failed: ${(error as Error).message}`
  } finally {
    ws?.terminate()
  }
}

async function edges(peer: Peer): Promise<Edges> {
  const clientReply = await probe(peer, async (ws, _closed, agentId) => {
    ws.send(JSON.stringify(['1', '1', controlTopic(agentId), 'phx_join', {}]))
    await nextFrames(ws, 1)
    // One at a time: Phoenix answers a joined topic from its channel process, and may answer a
    // later frame to another topic first.
    ws.send(JSON.stringify(['9', '2', 'room:none', 'phx_reply', {}]))
    const first = await nextFrames(ws, 1)
    ws.send(JSON.stringify(['1', '3', controlTopic(agentId), 'phx_reply', {}]))
    return [...first, ...(await nextFrames(ws, 1))]
  })
  const emptyRefs = await probe(peer, async (ws) => {
    // Kind 0 (push), sizes 0, 0, 7, 9: join_ref and ref empty, topic "phoenix", event "heartbeat", payload {}.
    ws.send(Buffer.concat([Buffer.from([0, 0, 0, 7, 9]), Buffer.from('phoenixheartbeat{}')]))
    return (await nextFrames(ws, 1))[0]!
  })
  const outOfRange = await probe(peer, async (ws, closed) => {
    ws.send('[null,"4","phoenix","heartbeat",{"n":1e309}]')
    return untilClosed(closed)
  })
  const outOfRangeRef = await probe(peer, async (ws, closed) => {
    ws.send('[null,1e309,"phoenix","heartbeat",{}]')
    return untilClosed(closed)
  })
  const outOfRangeExtra = await probe(peer, async (ws, closed) => {
    ws.send('[null,"1","phoenix","heartbeat",{},1e309]')
    return untilClosed(closed)
  })
  const bigInteger = await probe(peer, async (ws) => {
    ws.send(`[null,"6","phoenix","heartbeat",{"n":1${'0'.repeat(309)}}]`)
    return (await nextFrames(ws, 1))[0]!
  })
  const paths: Record<string, boolean> = {}
  for (const path of ['//websocket', '/websocket/']) {
    try {
      const other = await rawSocket(peer, path)
      const otherClosed = new Promise((resolve) => other.once('close', resolve))
      other.close(1000)
      await otherClosed
      paths[path] = true
    } catch {
      paths[path] = false
    }
  }
  let duplicateParam: boolean | string
  {
    const [first, second] = [peer.agent(), peer.agent()]
    const ws = new WebSocket(`${peer.url}/websocket?agent_id=${first.id}&api_key=${second.key}&agent_id=${second.id}&vsn=2.0.0`)
    ws.on('error', () => {})
    duplicateParam = await new Promise<boolean | string>((resolve) => {
      ws.once('open', () => resolve(true))
      ws.once('unexpected-response', (_req: unknown, res: { statusCode?: number }) => resolve(`refused ${res.statusCode}`))
      ws.once('close', () => resolve('closed'))
    })
    if (ws.readyState === WebSocket.OPEN) {
      const closed = new Promise((resolve) => ws.once('close', resolve))
      ws.close(1000)
      await closed
    } else ws.terminate()
  }
  const sizes: Record<string, string> = {}
  for (const c of SIZED) sizes[c.name] = await sizedUpgrade(peer.port, c)
  const nullJoinRef = await probe(peer, async (ws, _closed, agentId) => {
    const ctl = controlTopic(agentId)
    const seen: RawFrame[] = []
    // One frame at a time, each answer awaited: a joined topic's frames are answered by its channel's process.
    const send = async (frame: unknown[], answers: number) => {
      ws.send(JSON.stringify(frame))
      seen.push(...(await nextFrames(ws, answers)))
    }
    await send([null, '5', ctl, 'phx_join', {}], 1)
    await send([null, '6', 'room:nj', 'phx_join', {}], 1)
    await send([null, '7', 'room:nj', 'ping', { n: 1 }], 1)
    await send([null, '8', 'room:nj', 'phx_leave', {}], 2)
    const pushed = nextFrames(ws, 1)
    // A newer socket of the same agent (the same URL: its id and key) supersedes this one.
    const newer = new WebSocket(ws.url)
    newer.on('error', () => {})
    try {
      seen.push(...(await pushed))
    } finally {
      newer.terminate()
    }
    return seen.map(([joinRef, ref, topic, event]) => [joinRef, ref, topic === ctl ? 'ctl' : topic, event] as [string | null, string | null, string, string])
  })
  const v1 = await probeVsn(peer, '1.0.0', async (ws, agent) => {
    const ctl = controlTopic(agent.id)
    const seen: Array<[string[] | 'array', unknown]> = []
    // One frame at a time, each answer awaited: a joined topic's frames are answered by its channel's process.
    const send = async (frame: object, answers: number) => {
      ws.send(JSON.stringify(frame))
      seen.push(...(await nextShapes(ws, answers)))
    }
    await send({ topic: ctl, event: 'phx_join', payload: {}, ref: '1', join_ref: '1' }, 1)
    await send({ topic: 'phoenix', event: 'heartbeat', payload: {}, ref: '2' }, 1)
    await send({ topic: 'room:v1', event: 'phx_join', payload: {}, ref: '3', join_ref: '3' }, 1)
    await send({ topic: 'room:v1', event: 'say', payload: { n: 1 }, ref: '4', join_ref: '3' }, 1)
    await send({ topic: 'room:v1', event: 'say', payload: { n: 2 }, ref: '5' }, 1)
    const news = nextShapes(ws, 1)
    await peer.push(agent, 'room:v1', 'news', { n: 3 })
    seen.push(...(await news))
    await send({ topic: 'room:nowhere', event: 'say', payload: {}, ref: '6' }, 1)
    await send({ topic: 'room:v1', event: 'phx_leave', payload: {}, ref: '7', join_ref: '3' }, 2)
    const pushed = nextShapes(ws, 1)
    const newer = new WebSocket(`${peer.url}/websocket?agent_id=${agent.id}&api_key=${agent.key}&vsn=2.0.0`)
    newer.on('error', () => {})
    try {
      seen.push(...(await pushed))
    } finally {
      newer.terminate()
    }
    return seen.map(([keys, value]): [string[] | 'array', unknown] => [keys, JSON.parse(JSON.stringify(value).replaceAll(ctl, 'ctl'))])
  })
  const noVsn = await probeVsn(peer, null, async (ws) => {
    const reply = nextShapes(ws, 1)
    ws.send(JSON.stringify({ topic: 'phoenix', event: 'heartbeat', payload: {}, ref: '1' }))
    return reply
  })
  const arrayOnV1 = await probeVsn(peer, '1.0.0', async (ws, _agent, closed) => {
    ws.send(JSON.stringify([null, '1', 'phoenix', 'heartbeat', {}]))
    return untilClosed(closed)
  })
  const vsns: Record<string, string> = {}
  for (const vsn of VSNS) {
    const agent = peer.agent()
    vsns[`vsn=${vsn}`] = await upgradeStatus(peer.port, `agent_id=${agent.id}&api_key=${agent.key}&vsn=${encodeURIComponent(vsn)}`)
  }
  {
    const agent = peer.agent()
    vsns['no vsn'] = await upgradeStatus(peer.port, `agent_id=${agent.id}&api_key=${agent.key}`)
    vsns['vsn=2 and a wrong key'] = await upgradeStatus(peer.port, `agent_id=${agent.id}&api_key=wrong&vsn=2`)
    vsns['vsn=2.0.0&vsn=1.0.0 (the last wins)'] = await upgradeStatus(peer.port, `agent_id=${agent.id}&api_key=${agent.key}&vsn=2.0.0&vsn=1.0.0`)
  }
  const scalarRefs = await probeVsn(peer, '2.0.0', async (ws, agent) => {
    const ctl = controlTopic(agent.id)
    const seen: Array<[unknown, unknown[]]> = []
    // One frame at a time, each answer awaited: a joined topic's frames are answered by its channel's process.
    const send = async (frame: unknown[], answers: number) => {
      ws.send(JSON.stringify(frame))
      seen.push([frame, await nextFrames(ws, answers)])
    }
    await send([1, 2, ctl, 'phx_join', {}], 1)
    await send([null, 3, 'phoenix', 'heartbeat', {}], 1)
    await send([null, 3.5, 'phoenix', 'heartbeat', {}], 1)
    await send([4, 4, 'room:n', 'phx_join', {}], 1)
    await send([4, 5, 'room:n', 'ping', { n: 1 }], 1)
    await send(['4', 6, 'room:n', 'ping', { n: 2 }], 1)
    await send([null, 7, 'phoenix', 'heartbeat', {}, 'extra', 9], 1)
    await send([null, -8, 'room:none', 'say', {}], 1)
    await send([4, 9, 'room:n', 'phx_leave', {}], 2)
    await send([true, false, 'room:b', 'phx_join', {}], 1)
    await send([null, 1e20, 'phoenix', 'heartbeat', {}], 1)
    await send([false, 11, 'room:f', 'phx_join', {}], 1)
    await send([false, 12, 'room:f', 'ping', { n: 3 }], 1)
    await send([10, 10, 'room:n', 'phx_join', {}], 1)
    const news = nextFrames(ws, 1)
    await peer.push(agent, 'room:n', 'news', { n: 3 })
    seen.push(['server push', await news])
    return JSON.parse(JSON.stringify(seen).replaceAll(ctl, 'ctl')) as Array<[unknown, unknown[]]>
  })
  return { clientReply, emptyRefs, outOfRange, outOfRangeRef, outOfRangeExtra, bigInteger, paths, head101: await upgradeHead(peer), duplicateParam, sizes, closeTail: await closeTail(peer), nullJoinRef, v1, noVsn, arrayOnV1, vsns, scalarRefs }
}

/** What a drain (SIGTERM) did to a socket that joined no channel and to one that did. */
interface Drained {
  bare: { code: number; reason: string; afterMs: number }
  joined: { code: number; reason: string }
}

async function drained(peer: Peer): Promise<Drained> {
  const open = (agent: Agent) => new WebSocket(`${peer.url}/websocket?agent_id=${agent.id}&api_key=${agent.key}&vsn=2.0.0`)
  const bare = open(peer.agent())
  const joined = open(peer.agent())
  await Promise.all([bare, joined].map((w) => new Promise((resolve, reject) => (w.once('open', resolve), w.once('error', reject)))))
  joined.send(JSON.stringify(['1', '1', 'room:drain', 'phx_join', {}]))
  await new Promise((resolve) => joined.once('message', resolve))
  bare.on('error', () => {})
  const started = performance.now()
  const closeOf = (w: WebSocket) => new Promise<{ code: number; reason: string; afterMs: number }>((resolve) => w.once('close', (code: number, reason: Buffer) => resolve({ code, reason: reason.toString(), afterMs: performance.now() - started })))
  const closes = Promise.all([closeOf(bare), closeOf(joined)])
  await peer.drain()
  const [b, j] = await closes
  return { bare: b, joined: { code: j.code, reason: j.reason } }
}

/** Everything the official client and a bare HTTP client saw on one peer. */
interface Observed {
  transcript: Transcript
  refusals: Record<string, RawRefusal>
  malformed: { code: number; reason: string }
  drained: Drained
  edges: Edges
}

function observeAll(factory: PeerFactory): () => Promise<Observed> {
  let cached: Promise<Observed> | null = null
  return () =>
    (cached ??= (async () => {
      const peer = await factory.open()
      try {
        return { transcript: await observe(peer), refusals: await refusals(peer), malformed: await malformed(peer), edges: await edges(peer), drained: await drained(peer) }
      } finally {
        await peer.close()
      }
    })())
}

const frames = (o: Observed, step: string) => o.transcript.steps.find((s) => s.step === step)!.frames

/** The facts the reference peer showed, checked on any peer. */
function facts(name: string, observed: () => Promise<Observed>, disconnectCode: number): void {
  describe(`${name}: the protocol facts of real Phoenix`, () => {
    let o: Observed
    beforeAll(async () => {
      // Two server starts (the drain restarts it) and Cowboy's 5 s drain wait, on a loaded machine.
      o = await observed()
    }, 120_000)

    it('a push to a topic not joined: "unmatched topic" with join_ref null', () => {
      expect(frames(o, 'a push to a topic not joined')).toEqual([[null, '8', 'room:nowhere', 'phx_reply', { response: { reason: 'unmatched topic' }, status: 'error' }]])
    })
    it('a join of a topic no channel route matches: "unmatched topic" with join_ref null, and no channel joined (a push there gets the same)', () => {
      const [topic] = frames(o, 'a join of a topic no channel route matches').map((f) => f[2])
      expect(topic).toMatch(/^task:/)
      expect(frames(o, 'a join of a topic no channel route matches')).toEqual([[null, '16', topic, 'phx_reply', { response: { reason: 'unmatched topic' }, status: 'error' }]])
      expect(frames(o, 'a push to the topic of that join')).toEqual([[null, '17', topic, 'phx_reply', { response: { reason: 'unmatched topic' }, status: 'error' }]])
    })
    it('a leave of a topic not joined: ok {}, echoing its join_ref', () => {
      expect(frames(o, 'a leave of a topic not joined')).toEqual([['77', '9', 'room:elsewhere', 'phx_reply', { response: {}, status: 'ok' }]])
    })
    it('a duplicate join: the reply to the new join, then phx_close with the OLD join_ref', () => {
      const room = frames(o, 'a duplicate join of the room')
      expect(room.map((f) => [f[0], f[1], f[3]])).toEqual([
        ['6', '6', 'phx_reply'],
        ['2', '2', 'phx_close'],
      ])
    })
    it('after a duplicate join, a push with the old join_ref is routed by topic and answered with the new join_ref', () => {
      expect(frames(o, 'a push that still carries the old join_ref').map((f) => [f[0], f[1], f[3], (f[4] as { status?: string }).status])).toEqual([['6', '7', 'phx_reply', 'ok']])
    })
    it('a leave that carries a stale join_ref raced a server close: no answer', () => {
      expect(frames(o, 'a leave that carries a stale join_ref')).toEqual([])
    })
    it('a heartbeat reply has join_ref null; replies come as {response, status}', () => {
      expect(frames(o, 'a heartbeat')).toEqual([[null, '5', 'phoenix', 'phx_reply', { response: {}, status: 'ok' }]])
    })
    it('a channel push carries its join_ref; a broadcast carries join_ref null', () => {
      expect(frames(o, 'a control signal through the channel')[0]![0]).toBe('1')
      expect(frames(o, 'a control signal as a broadcast')[0]![0]).toBeNull()
    })
    it('a channel crash: phx_error with the join_ref as join_ref and ref, payload {}', () => {
      expect(frames(o, 'the room crashes')).toEqual([['6', '6', expect.stringMatching(/^room:/), 'phx_error', {}]])
    })
    it('a leave: ok, then phx_close with the join_ref', () => {
      expect(frames(o, 'leave the second room').map((f) => [f[0], f[1], f[3]])).toEqual([
        ['12', '13', 'phx_reply'],
        ['12', '12', 'phx_close'],
      ])
    })
    it(`the "disconnect" broadcast closes with ${disconnectCode} and no reason text`, () => {
      expect(o.transcript.close).toEqual({ code: disconnectCode, reason: '' })
    })
    it('a frame that is not JSON crashes the socket: close 1011, no reason text', () => {
      expect(o.malformed).toEqual({ code: 1011, reason: '' })
    })
    it(`a drain (SIGTERM): 1012 to a socket with a channel${disconnectCode === 1011 ? ' (or 1000 when Bandit closes it first)' : ''}; one with none ${disconnectCode === 1011 ? 'closed 1000 at once (Bandit)' : 'cut with no close frame after 5 s (Cowboy)'}`, () => {
      const { code, reason } = o.drained.joined
      expect({ code: banditClosedFirst(name, code) ? 1012 : code, reason }).toEqual({ code: 1012, reason: '' })
      if (disconnectCode === 1011) {
        expect(o.drained.bare).toMatchObject({ code: 1000, reason: '' })
        // Well before Cowboy's 5 s wait; the time also holds the peer's event-log read and the SIGTERM.
        expect(o.drained.bare.afterMs).toBeLessThan(2500)
      } else {
        expect(o.drained.bare).toMatchObject({ code: 1006 })
        expect(o.drained.bare.afterMs).toBeGreaterThanOrEqual(4500)
      }
    })
    it("a client's own phx_reply is routed like any event: \"unmatched topic\" on a topic not joined, ok on a joined one", () => {
      expect(o.edges.clientReply).toEqual([
        [null, '2', 'room:none', 'phx_reply', { response: { reason: 'unmatched topic' }, status: 'error' }],
        ['1', '3', expect.stringMatching(/^agent_control:/), 'phx_reply', { response: {}, status: 'ok' }],
      ])
    })
    it("channels joined with a null join_ref: what a channel's process sends carries the join's ref as join_ref (the push's and the leave's replies, the supersede push), the join reply and phx_close carry null", () => {
      expect(o.edges.nullJoinRef).toEqual([
        [null, '5', 'ctl', 'phx_reply'],
        [null, '6', 'room:nj', 'phx_reply'],
        ['6', '7', 'room:nj', 'phx_reply'],
        ['6', '8', 'room:nj', 'phx_reply'],
        [null, null, 'room:nj', 'phx_close'],
        ['5', null, 'ctl', 'supersede'],
      ])
    })
    it('join_refs and refs that are numbers or booleans are served and echoed as they came (a longer array too, the rest ignored); a channel answers with its own join_ref, whatever the push carried', () => {
      const ok = (response: object = {}) => ({ response, status: 'ok' })
      expect(o.edges.scalarRefs).toEqual([
        [[1, 2, 'ctl', 'phx_join', {}], [[1, 2, 'ctl', 'phx_reply', ok()]]],
        [[null, 3, 'phoenix', 'heartbeat', {}], [[null, 3, 'phoenix', 'phx_reply', ok()]]],
        [[null, 3.5, 'phoenix', 'heartbeat', {}], [[null, 3.5, 'phoenix', 'phx_reply', ok()]]],
        [[4, 4, 'room:n', 'phx_join', {}], [[4, 4, 'room:n', 'phx_reply', ok({ joined: 'room:n' })]]],
        [[4, 5, 'room:n', 'ping', { n: 1 }], [[4, 5, 'room:n', 'phx_reply', ok({ echo: { n: 1 }, event: 'ping' })]]],
        [['4', 6, 'room:n', 'ping', { n: 2 }], [[4, 6, 'room:n', 'phx_reply', ok({ echo: { n: 2 }, event: 'ping' })]]],
        [[null, 7, 'phoenix', 'heartbeat', {}, 'extra', 9], [[null, 7, 'phoenix', 'phx_reply', ok()]]],
        [[null, -8, 'room:none', 'say', {}], [[null, -8, 'room:none', 'phx_reply', { response: { reason: 'unmatched topic' }, status: 'error' }]]],
        [[4, 9, 'room:n', 'phx_leave', {}], [[4, 9, 'room:n', 'phx_reply', ok()], [4, 4, 'room:n', 'phx_close', {}]]],
        [[true, false, 'room:b', 'phx_join', {}], [[true, false, 'room:b', 'phx_reply', ok({ joined: 'room:b' })]]],
        [[null, 1e20, 'phoenix', 'heartbeat', {}], [[null, 1e20, 'phoenix', 'phx_reply', ok()]]],
        // Phoenix's channel takes `join_ref || ref`: false is as empty as null, so its replies carry the join's ref.
        [[false, 11, 'room:f', 'phx_join', {}], [[false, 11, 'room:f', 'phx_reply', ok({ joined: 'room:f' })]]],
        [[false, 12, 'room:f', 'ping', { n: 3 }], [[11, 12, 'room:f', 'phx_reply', ok({ echo: { n: 3 }, event: 'ping' })]]],
        [[10, 10, 'room:n', 'phx_join', {}], [[10, 10, 'room:n', 'phx_reply', ok({ joined: 'room:n' })]]],
        ['server push', [[10, null, 'room:n', 'news', { n: 3 }]]],
      ])
    })
    it('a binary frame whose join_ref and ref have no bytes: they are "", echoed as such', () => {
      expect(o.edges.emptyRefs).toEqual([null, '', 'phoenix', 'phx_reply', { response: {}, status: 'ok' }])
    })
    it("a number beyond a double's range (1e309) crashes the socket: close 1011, no reason text; as a ref, or past the fifth element, too", () => {
      expect(o.edges.outOfRange).toEqual({ code: 1011, reason: '' })
      expect(o.edges.outOfRangeRef).toEqual({ code: 1011, reason: '' })
      expect(o.edges.outOfRangeExtra).toEqual({ code: 1011, reason: '' })
    })
    it('an integer of 310 digits is served (Jason reads it exactly), where a float beyond the range is not', () => {
      expect(o.edges.bigInteger).toEqual([null, '6', 'phoenix', 'phx_reply', { response: {}, status: 'ok' }])
    })
    it('an empty path segment is dropped: //socket/websocket and /socket/websocket/ reach the socket', () => {
      expect(o.edges.paths).toEqual({ '//websocket': true, '/websocket/': true })
    })
    it(`an accepted upgrade's 101: ${disconnectCode === 1011 ? 'date first, the WebSocket headers, then cache-control (Bandit)' : 'date, cache-control and server: Cowboy among the WebSocket headers, sorted (Cowboy)'}, names in lower case`, () => {
      const accept = 'sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo='
      const cache = 'cache-control: max-age=0, private, must-revalidate'
      expect(o.edges.head101.split('\r\n')).toEqual(
        disconnectCode === 1011
          ? ['HTTP/1.1 101 Switching Protocols', 'date: <date>', 'upgrade: websocket', 'connection: Upgrade', accept, cache]
          : ['HTTP/1.1 101 Switching Protocols', cache, 'connection: Upgrade', 'date: <date>', accept, 'server: Cowboy', 'upgrade: websocket'],
      )
    })
    it('a query param given twice is read as its last value, as Plug reads it: agent_id=A&api_key=<B\'s key>&agent_id=B opens as B', () => {
      expect(o.edges.duplicateParam).toBe(true)
    })
    it(`requests past the web server's size limits: ${disconnectCode === 1011 ? 'Bandit counts whole lines (10,000 bytes with the CRLF) and 50 headers, and answers HTTP/1.0' : 'Cowboy checks what it has read of a line (8,000 bytes of request line, 4,096 of a header value, in reads of 1,460 bytes) and 100 header names'}`, () => {
      const forbidden = 'HTTP/1.1 403 Forbidden'
      const bandit = disconnectCode === 1011
      const uri = bandit ? 'HTTP/1.0 414 Request-URI Too Long\r\nconnection: close' : 'HTTP/1.1 414 Request-URI Too Long\r\nconnection: close\r\ncontent-length: 0'
      const header = bandit ? 'HTTP/1.0 431 Request Header Fields Too Large\r\nconnection: close' : 'HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0'
      expect(o.edges.sizes).toEqual({
        'request line 8,758 bytes': forbidden,
        'request line 8,759 bytes': bandit ? forbidden : uri,
        'request line 9,998 bytes': bandit ? forbidden : uri,
        'request line 9,999 bytes': uri,
        'a header value of 4,139 bytes after a 100-byte request line': forbidden,
        'a header value of 4,140 bytes after a 100-byte request line': bandit ? forbidden : header,
        'a header line of 10,000 bytes with its CRLF': bandit ? forbidden : header,
        'a header line of 10,001 bytes with its CRLF': header,
        '50 headers': forbidden,
        '51 headers': bandit ? header : forbidden,
        '100 header names': bandit ? header : forbidden,
        '101 header names': header,
      })
    })
    it('the server ends the TCP connection right after its close frame, without waiting for the client to answer it', () => {
      expect(o.edges.closeTail).toBeTypeOf('number')
      // A server that waited for the client's close frame would keep it open (the probe gives up at 5 s).
      expect(o.edges.closeTail).toBeLessThan(2500)
    })
    it('vsn=1.0.0 (or none) speaks V1: objects of event, payload, ref and topic in that order, no join_ref; phx_close carries the join_ref as ref; an array crashes the socket (1011)', () => {
      const v1 = o.edges.v1 as Array<[string[] | 'array', { event: string; ref: string | null; topic: string }]>
      expect(v1.map(([keys]) => keys)).toEqual(Array(10).fill(['event', 'payload', 'ref', 'topic']))
      expect(v1.map(([, f]) => [f.ref, f.topic, f.event])).toEqual([
        ['1', 'ctl', 'phx_reply'],
        ['2', 'phoenix', 'phx_reply'],
        ['3', 'room:v1', 'phx_reply'],
        ['4', 'room:v1', 'phx_reply'],
        ['5', 'room:v1', 'phx_reply'],
        [null, 'room:v1', 'news'],
        ['6', 'room:nowhere', 'phx_reply'],
        ['7', 'room:v1', 'phx_reply'],
        ['3', 'room:v1', 'phx_close'],
        [null, 'ctl', 'supersede'],
      ])
      expect(o.edges.noVsn).toEqual([[['event', 'payload', 'ref', 'topic'], { event: 'phx_reply', payload: { response: {}, status: 'ok' }, ref: '1', topic: 'phoenix' }]])
      expect(o.edges.arrayOnV1).toEqual({ code: 1011, reason: '' })
    })
    it('the vsn picks the serializer (~> 1.0.0 V1, ~> 2.0.0 V2, none read as 1.0.0, the last of two); any other is refused 403 with no body, whatever the key', () => {
      const upgraded = 'HTTP/1.1 101 Switching Protocols'
      const refused = 'HTTP/1.1 403 Forbidden, content-length: 0'
      expect(o.edges.vsns).toEqual({
        'vsn=1.0.0': upgraded,
        'vsn=1.0.7': upgraded,
        'vsn=2.0.0': upgraded,
        'vsn=2.0.1': upgraded,
        'vsn=2.0.0+build.5': upgraded,
        'vsn=2.0.1-rc.1': upgraded,
        'vsn=2': refused,
        'vsn=': refused,
        'vsn=2.9.9': refused,
        'vsn=1.1.0': refused,
        'vsn=3.0.0': refused,
        'vsn=2.0.0-rc.1': refused,
        'vsn=02.0.0': refused,
        'no vsn': upgraded,
        'vsn=2 and a wrong key': refused,
        'vsn=2.0.0&vsn=1.0.0 (the last wins)': upgraded,
      })
    })
    it('a refused upgrade: 403, content-length 0, no body, and the connection serves a next request', () => {
      const r = o.refusals['a wrong key (connect/3 returns :error)']!
      expect(r.statusLine).toBe('HTTP/1.1 403 Forbidden')
      expect(r.headers).toContainEqual(['content-length', '0'])
      expect(r.body).toBe('')
      expect(r.afterward).toBe('answered')
    })
  })
}

const pairs: Array<[ReturnType<typeof simulatorPeer>, PeerFactory]> = [
  [simulatorPeer('bandit'), realPeer('bandit')],
  [simulatorPeer('cowboy'), realPeer('cowboy')],
]

for (const [sim, real] of pairs) {
  const simObserved = observeAll(sim)
  const realObserved = observeAll(real)
  const code = sim.name.includes('bandit') ? 1011 : 1000
  facts(sim.name, simObserved, code)
  if (real.unavailable === null) facts(real.name, realObserved, code)

  describe.skipIf(real.unavailable !== null)(`${sim.name} against real Phoenix on ${real.name}: what the official client sees`, () => {
    let s: Observed
    let r: Observed
    beforeAll(async () => {
      ;[s, r] = await Promise.all([simObserved(), realObserved()])
    }, 150_000)

    for (const step of script({ id: 'c1', key: '' }).map((x) => x.name)) {
      it(`the same frames: ${step}`, () => {
        expect(frames(s, step)).toEqual(frames(r, step))
      })
    }
    it('the same close code and reason after the "disconnect" broadcast', () => {
      expect(s.transcript.close).toEqual(r.transcript.close)
    })
    it('the same drain: the close of a socket with a channel and of one without', () => {
      // The simulator sends what Phoenix's drainer sends; real Bandit's own 1000 counts as it.
      const joined = banditClosedFirst(real.name, r.drained.joined.code) ? { ...r.drained.joined, code: 1012 } : r.drained.joined
      expect({ bare: { code: s.drained.bare.code, reason: s.drained.bare.reason }, joined: s.drained.joined }).toEqual({
        bare: { code: r.drained.bare.code, reason: r.drained.bare.reason },
        joined,
      })
    })
    it('the same close after a malformed frame', () => {
      expect(s.malformed).toEqual(r.malformed)
    })
    it("the same answers, byte for byte, to requests around the web server's size limits", () => {
      expect(s.edges.sizes).toEqual(r.edges.sizes)
    })
    it('the same V1 socket (vsn=1.0.0): every frame the server sent, its keys in order', () => {
      expect(s.edges.v1).toEqual(r.edges.v1)
      expect(s.edges.noVsn).toEqual(r.edges.noVsn)
      expect(s.edges.arrayOnV1).toEqual(r.edges.arrayOnV1)
    })
    it('the same answer to each vsn value', () => {
      expect(s.edges.vsns).toEqual(r.edges.vsns)
    })
    it('the same frames for join_refs and refs that are numbers or booleans', () => {
      expect(s.edges.scalarRefs).toEqual(r.edges.scalarRefs)
    })
    for (const c of refusalCases) {
      it(`the same refusal on the wire: ${c.name}`, () => {
        expect(s.refusals[c.name]).toEqual(r.refusals[c.name])
      })
    }
  })
}
