/**
 * Bad input on the wire: every malformed or unexpected inbound frame gets a typed outcome (an
 * `ignored` event with the reason, or a typed disconnect), never a crash, never a silent drop.
 * Both directions: a misbehaving server against the link, a misbehaving client against the
 * simulator.
 */
import { runInNewContext } from 'node:vm'
import { describe, expect, it, vi } from 'vitest'
import WebSocket, { WebSocketServer } from 'ws'
import { once } from 'node:events'
import { connect } from 'node:net'
import { createLink } from '../../src/link.js'
import { DisconnectReason } from '../../src/reasons.js'
import { controlTopic, encodeBinaryToClient } from '../../src/protocol.js'
import { framesIn, next, untilState, useWorld } from '../support/wire.js'

const world = useWorld()

describe('a misbehaving server against the link', () => {
  const cases: Array<[string, (conn: { sendRaw(d: string | Uint8Array): void; send(f: never): void }, joinRef: string) => void, RegExp]> = [
    ['non-JSON text', (c) => c.sendRaw('this is not json'), /not-json/],
    ['a JSON object instead of an array', (c) => c.sendRaw('{"event":"x"}'), /not-array/],
    ['an array of the wrong arity', (c) => c.sendRaw('[null,null,"agent_control:agent-1","x"]'), /wrong-arity/],
    ['wrong element types', (c) => c.sendRaw('[1,2,3,4,5]'), /wrong-types/],
    ['an agent.control payload that is not an object', (c, ref) => c.sendRaw(JSON.stringify([ref, null, 'agent_control:agent-1', 'agent.control', 'stop'])), /agent\.control payload ignored/],
    ['a phx_reply to a ref nothing waits for', (c, ref) => c.sendRaw(JSON.stringify([ref, '9999', 'agent_control:agent-1', 'phx_reply', { status: 'ok', response: {} }])), /no push of this link waits for/],
    ['a reserved event name (phx_custom)', (c, ref) => c.sendRaw(JSON.stringify([ref, null, 'agent_control:agent-1', 'phx_custom', {}])), /phoenix reserves/],
    ['a reserved event name (chan_reply_7)', (c, ref) => c.sendRaw(JSON.stringify([ref, null, 'agent_control:agent-1', 'chan_reply_7', {}])), /phoenix reserves/],
    ['a push on the heartbeat topic', (c) => c.sendRaw(JSON.stringify([null, null, 'phoenix', 'news', {}])), /heartbeat topic/],
    ['a heartbeat reply to an unknown ref', (c) => c.sendRaw(JSON.stringify([null, '424242', 'phoenix', 'phx_reply', { status: 'ok', response: {} }])), /answers no pending heartbeat/],
    ['a phx_reply without a status', (c) => c.sendRaw('[null,"99","agent_control:agent-1","phx_reply",{"response":{}}]'), /bad-reply/],
    ['a binary frame with sizes past its end', (c) => c.sendRaw(new Uint8Array([0, 200, 200, 200, 1])), /bad-binary/],
    ['a binary frame of an unknown kind', (c) => c.sendRaw(new Uint8Array([7, 1, 2, 3])), /bad-binary/],
    [
      'an unknown event on the control channel',
      (c, ref) => c.sendRaw(JSON.stringify([ref, null, controlTopic('agent-1'), 'surprise', {}])),
      /unknown event "surprise"/,
    ],
    [
      'a malformed agent.control payload',
      (c, ref) => c.sendRaw(JSON.stringify([ref, null, controlTopic('agent-1'), 'agent.control', { mode: 'pause', scope: 7 }])),
      /agent\.control payload ignored: .*mode/,
    ],
    ['a push to a topic the link never joined', (c) => c.sendRaw(JSON.stringify([null, null, 'elsewhere:1', 'news', {}])), /has not joined/],
    [
      'a binary broadcast to a topic the link never joined',
      (c) => c.sendRaw(encodeBinaryToClient({ kind: 'broadcast', topic: 'elsewhere:2', event: 'blob', payload: new Uint8Array([1]) })),
      /has not joined/,
    ],
  ]
  for (const [name, send, detail] of cases) {
    it(`${name}: reported as ignored with its reason; still connected`, async () => {
      const sim = await world().sim()
      const link = world().link(sim)
      await link.connect()
      const conn = sim.live('agent-1')[0]!
      const ignored = next(link, 'ignored')
      send(conn as never, conn.channels.get(controlTopic('agent-1'))!.joinRef as string)
      expect((await ignored).detail).toMatch(detail)
      // Still healthy: a control signal after the bad frame is delivered.
      const control = next(link, 'control')
      sim.control('agent-1', { mode: 'interrupt', correlation_id: 'after' })
      expect((await control).signal.correlationId).toBe('after')
      expect(link.state).toBe('connected')
      expect(sim.accepted('agent-1')).toHaveLength(1)
    })
  }

  it('a message on an app channel with no handler is reported, not dropped silently', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    link.channel('room:1')
    await next(link, 'channel', { filter: (e) => e.status === 'joined' })
    const ignored = next(link, 'ignored')
    sim.push({ agent: 'agent-1' }, 'room:1', 'unheard', {})
    expect((await ignored).detail).toMatch(/no handler for "unheard" on room:1/)
  })

  it('a message on an app channel whose payload is not an object (null, text, an array, a number) is reported, never handed to a handler', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    const handled: unknown[] = []
    const delivered = new Promise<void>((resolve) =>
      room.on('msg', (payload) => {
        handled.push(payload)
        resolve()
      }),
    )
    await next(link, 'channel', { filter: (e) => e.status === 'joined' })
    const joinRef = sim.live('agent-1')[0]!.channels.get('room:1')!.joinRef
    const details: string[] = []
    const four = new Promise<void>((resolve) =>
      link.on('ignored', (e) => {
        if (e.event === 'channel.message') details.push(e.detail)
        if (details.length === 4) resolve()
      }),
    )
    for (const payload of [null, 'text', [1, 2], 7]) sim.live('agent-1')[0]!.sendRaw(JSON.stringify([joinRef, null, 'room:1', 'msg', payload]))
    sim.push({ agent: 'agent-1' }, 'room:1', 'msg', { ok: 1 })
    await Promise.all([four, delivered])
    expect(details).toEqual(['null', 'a string', 'an array', 'a number'].map((kind) => `"msg" on room:1 with a payload that is ${kind}, not an object: not delivered`))
    // The object payload sent last was the first (and only) one a handler got.
    expect(handled).toEqual([{ ok: 1 }])
  })

  it('a message whose last handler was removed is reported again, not dropped silently', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await next(link, 'channel', { filter: (e) => e.status === 'joined' })
    const heard: unknown[] = []
    let first!: () => void
    const arrived = new Promise<void>((resolve) => (first = resolve))
    const off = room.on('news', (payload) => {
      heard.push(payload)
      first()
    })
    sim.push({ agent: 'agent-1' }, 'room:1', 'news', { n: 1 })
    await arrived
    off()
    const ignored = next(link, 'ignored')
    sim.push({ agent: 'agent-1' }, 'room:1', 'news', { n: 2 })
    expect((await ignored).detail).toMatch(/no handler for "news" on room:1/)
    expect(heard).toEqual([{ n: 1 }])
  })

  it('an unsubscribe called again after a new handler of the same event was added leaves the new one', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await next(link, 'channel', { filter: (e) => e.status === 'joined' })
    const off = room.on('news', () => {})
    off()
    let arrived!: (payload: unknown) => void
    const heard = new Promise<unknown>((resolve) => (arrived = resolve))
    room.on('news', (payload) => arrived(payload))
    off()
    sim.push({ agent: 'agent-1' }, 'room:1', 'news', { n: 1 })
    expect(await heard).toEqual({ n: 1 })
  })

  it('removing one of two handlers keeps the other: it still gets every message', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await next(link, 'channel', { filter: (e) => e.status === 'joined' })
    const kept: unknown[] = []
    let arrived!: () => void
    const second = new Promise<void>((resolve) => (arrived = resolve))
    const off = room.on('news', () => {})
    room.on('news', (payload) => {
      kept.push(payload)
      if (kept.length === 1) arrived()
    })
    off()
    sim.push({ agent: 'agent-1' }, 'room:1', 'news', { n: 1 })
    await second
    expect(kept).toEqual([{ n: 1 }])
    expect(world().captured.get(link)!.events.filter((e) => e.type === 'ignored')).toEqual([])
  })

  it('binary pushes on an app channel reach the handler as an ArrayBuffer', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await next(link, 'channel', { filter: (e) => e.status === 'joined' })
    const got = new Promise<ArrayBuffer>((resolve) => room.on('blob', (p) => resolve(p as ArrayBuffer)))
    const joinRef = sim.live('agent-1')[0]!.channels.get('room:1')!.joinRef as string
    sim.sendRaw({ agent: 'agent-1' }, encodeBinaryToClient({ kind: 'push', join_ref: joinRef, topic: 'room:1', event: 'blob', payload: new Uint8Array([9, 8, 7]) }))
    expect(new Uint8Array(await got)).toEqual(new Uint8Array([9, 8, 7]))
  })

  it('a supersede sent as a binary frame ends the session superseded with a reason that parses and survives JSON: its bytes as base64, its length', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const joinRef = sim.live('agent-1')[0]!.channels.get(controlTopic('agent-1'))!.joinRef as string
    const ended = untilState(link, 'terminated')
    const bytes = new Uint8Array(400).map((_, i) => i % 256)
    sim.sendRaw({ agent: 'agent-1' }, encodeBinaryToClient({ kind: 'push', join_ref: joinRef, topic: controlTopic('agent-1'), event: 'supersede', payload: bytes }))
    await ended
    const reason = link.lastDisconnectReason!
    expect(DisconnectReason.parse(reason)).toEqual(reason)
    expect(reason).toMatchObject({ kind: 'superseded', cause: 'unknown', raw: { bytes: 400 } })
    const raw = (reason as unknown as { raw: { binary: string } }).raw
    expect([...Buffer.from(raw.binary, 'base64')]).toEqual([...bytes.subarray(0, 150)])
    expect(JSON.parse(JSON.stringify(reason))).toEqual(reason)
  })

  it("a supersede's megabyte reason and message are cut in the reason and in every log line", async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const ended = untilState(link, 'terminated')
    sim.supersede('agent-1', { payload: { reason: `session.${'r'.repeat(1_000_000)}`, message: 'm '.repeat(500_000), correlation_id: 'c'.repeat(1_000_000), target_socket_id: 't'.repeat(1_000_000) } })
    await ended
    const reason = link.lastDisconnectReason as { cause: string; message: string; correlationId: string | null; targetSocketId: string | null }
    for (const text of [reason.cause, reason.message, reason.correlationId ?? '', reason.targetSocketId ?? '']) expect(text.length).toBeLessThanOrEqual(200)
    expect(reason.message.length).toBeGreaterThan(100)
    for (const line of world().captured.get(link)!.lines) expect(JSON.stringify(line).length).toBeLessThan(4000)
  })

  it('a heartbeat answered with a status other than ok counts as an answer (no timeout), and each is reported', async () => {
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0 })
    await once(server, 'listening')
    let heartbeats = 0
    server.on('connection', (ws) => {
      ws.on('message', (data) => {
        const [joinRef, ref, topic, event] = JSON.parse(String(data)) as [string | null, string, string, string]
        if (event === 'phx_join') ws.send(JSON.stringify([joinRef, ref, topic, 'phx_reply', { status: 'ok', response: {} }]))
        else if (topic === 'phoenix' && event === 'heartbeat') {
          heartbeats++
          ws.send(JSON.stringify([null, ref, 'phoenix', 'phx_reply', { status: 'error', response: {} }]))
        }
      })
    })
    const link = createLink({ url: `ws://127.0.0.1:${(server.address() as { port: number }).port}/socket`, agentId: 'agent-1', apiKey: 'key-1', policy: { transport: { heartbeatIntervalMs: 40 } } })
    const ignored: string[] = []
    link.on('ignored', (e) => void ignored.push(e.detail))
    const lost: string[] = []
    link.on('disconnected', (e) => void lost.push(e.reason.kind))
    try {
      await link.connect()
      // Four intervals, each answered error: with no answer the second would have timed out.
      // Each reply reported: the count of reports catches up with the replies sent.
      await vi.waitFor(
        () => {
          expect(heartbeats).toBeGreaterThanOrEqual(4)
          expect(ignored).toHaveLength(heartbeats)
        },
        { timeout: 3000 },
      )
      expect(lost).toEqual([])
      expect(link.state).toBe('connected')
      expect(new Set(ignored)).toEqual(new Set(['heartbeat reply with status "error", not ok: counted as an answer (the peer is alive)']))
    } finally {
      await link.disconnect()
      for (const client of server.clients) client.terminate()
      await new Promise((resolve) => server.close(resolve))
    }
  })

  it('a listener that throws is logged; the link goes on', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    link.on('connected', () => {
      throw new Error('listener bug')
    })
    await link.connect()
    await untilState(link, 'connected')
    const logged = world().captured.get(link)!.lines.filter((l) => l.level === 'error' && l.message.includes('listener threw'))
    // The line names the event and what the listener threw.
    expect(logged).toEqual([{ level: 'error', message: 'a link event listener threw', fields: { event: 'connected', error: 'listener bug' } }])
  })

  it('a listener or handler that throws a value no String() can print is logged as such; the link goes on', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    link.on('connected', () => {
      throw Object.create(null)
    })
    await link.connect()
    const room = link.channel('room:1')
    room.on('tick', () => {
      throw Object.create(null)
    })
    await room.joined()
    const after = new Promise<void>((resolve) => room.on('tock', () => resolve()))
    sim.push({ agent: 'agent-1' }, 'room:1', 'tick', {})
    sim.push({ agent: 'agent-1' }, 'room:1', 'tock', {})
    await after
    const logged = world().captured.get(link)!.lines.filter((l) => l.level === 'error')
    expect(logged.map((l) => [l.message, (l.fields as { error: string }).error])).toEqual([
      ['a link event listener threw', 'an unprintable object'],
      ['handler of tick on room:1 threw', 'an unprintable object'],
    ])
    expect(link.state).toBe('connected')
  })
})

describe('a misbehaving host of the simulator', () => {
  it('a push handler that throws null crashes that channel (phx_error), as a channel process would; the simulator serves on', async () => {
    const sim = await world().sim()
    sim.onPush(() => {
      throw null
    })
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await room.joined()
    const errored = next(link, 'channel', { filter: (e) => e.topic === 'room:1' && e.status === 'errored' })
    void room.push('work', {}).catch(() => {})
    await errored
    expect(sim.live('agent-1')[0]!.problems).toContain('handler error on room:1 work: null')
    await room.joined()
  })

  it('simulator event listeners are each on their own: one that throws or rejects is logged, the ones after it still hear the event', async () => {
    const warnings: string[] = []
    // A pino-style logger, called `(fields, message)`.
    const warn = (...line: unknown[]) => void warnings.push(`${String(line[1])}: ${String((line[0] as { error?: string } | undefined)?.error)}`)
    const sim = await world().sim({ logger: { info: () => {}, warn } })
    sim.on('presence', () => {
      throw Object.create(null)
    })
    sim.on('presence', async () => {
      await Promise.resolve()
      throw new Error('async listener bug')
    })
    const heard = new Promise<string>((resolve) => sim.once('presence', (p: { kind: string }) => resolve(p.kind)))
    const link = world().link(sim)
    await link.connect()
    expect(await heard).toBe('first-connected')
    await vi.waitFor(() => expect(warnings).toHaveLength(2), { timeout: 2000 })
    expect(warnings).toEqual(['a simulator event listener threw: an unprintable object', 'a simulator event listener threw: async listener bug'])
  })
  it("a 'change' listener that throws is logged too: the socket still closes, presence crosses, the run is aborted, and the gauge falls", async () => {
    const warnings: string[] = []
    const warn = (...line: unknown[]) => void warnings.push(`${String(line[1])}: ${String((line[0] as { error?: string } | undefined)?.error)}`)
    const sim = await world().sim({ logger: { info: () => {}, warn } })
    const link = world().link(sim)
    await link.connect()
    sim.runs.startRun('agent-1', 'run-1')
    let thrown = 0
    sim.on('change', () => {
      if (thrown++ === 0) throw new Error('host change listener threw once')
    })
    await link.disconnect()
    await sim.waitFor(() => sim.presence.some((p) => p.kind === 'last-disconnected'), { what: 'last-disconnected' })
    await sim.waitFor(() => sim.aborts.length === 1, { what: 'the run aborted' })
    expect(sim.accepted('agent-1')[0]!.state).toBe('closed')
    expect(sim.aborts[0]).toMatchObject({ runId: 'run-1', outcome: 'aborted', reason: { kind: 'graceful' } })
    expect(await sim.metrics.registry.metrics()).toMatch(/^phoenix_link_active_connections 0$/m)
    expect(thrown).toBeGreaterThan(1)
    expect(warnings).toContain('a simulator event listener threw: host change listener threw once')
  })
})

/** A masked client text frame (RFC 6455 section 5.2; mask key 0 keeps the bytes as they are). */
const masked = (text: string) => Buffer.concat([Buffer.from([0x81, 0x80 | Buffer.byteLength(text), 0, 0, 0, 0]), Buffer.from(text)])

/** A WebSocket upgrade request of agent-1, written by hand. */
const UPGRADE_REQUEST = 'GET /socket/websocket?agent_id=agent-1&api_key=key-1&vsn=2.0.0 HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n'

/** A raw TCP client of the simulator: what it received so far (latin1), and a bounded wait on it. */
function rawClient(port: number) {
  const socket = connect(port, '127.0.0.1')
  let text = ''
  const wakers = new Set<() => void>()
  socket.on('data', (chunk: Buffer) => {
    text += chunk.toString('latin1')
    for (const wake of [...wakers]) wake()
  })
  const connected = new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject))
  const until = (check: () => boolean, what: string) =>
    new Promise<void>((resolve, reject) => {
      if (check()) return resolve()
      const timer = setTimeout(() => (wakers.delete(wake), reject(new Error(`no ${what} within 4000 ms; got ${text}`))), 4000)
      const wake = () => {
        if (!check()) return
        clearTimeout(timer)
        wakers.delete(wake)
        resolve()
      }
      wakers.add(wake)
    })
  return { socket, connected, until, received: () => text }
}

describe('a misbehaving client against the simulator', () => {
  it("channel frames are handled on the channel's turn, as Phoenix's channel processes do: a heartbeat written with a push has its reply first; a push written with its topic's phx_leave gets no answer", async () => {
    const sim = await world().sim()
    const raw = rawClient(sim.port)
    try {
      await raw.connected
      raw.socket.write(UPGRADE_REQUEST)
      await raw.until(() => raw.received().includes('101 Switching Protocols'), 'upgrade')
      const topic = controlTopic('agent-1')
      raw.socket.write(masked(JSON.stringify(['1', '1', topic, 'phx_join', {}])))
      await raw.until(() => raw.received().includes('"1","1"'), 'join reply')
      // One write, so one read: the push, then the heartbeat.
      raw.socket.write(Buffer.concat([masked(JSON.stringify(['1', 'p1', topic, 'status', {}])), masked('[null,"h1","phoenix","heartbeat",{}]')]))
      await raw.until(() => raw.received().includes('"p1"') && raw.received().includes('"h1"'), 'both replies')
      expect(raw.received().indexOf('"h1"')).toBeLessThan(raw.received().indexOf('"p1"'))
      // One write: the leave, then a push on the topic it leaves.
      raw.socket.write(Buffer.concat([masked(JSON.stringify(['1', 'l1', topic, 'phx_leave', {}])), masked(JSON.stringify(['1', 'p2', topic, 'status', {}]))]))
      await raw.until(() => raw.received().includes('"phx_close"'), 'phx_close of the left channel')
      const [c] = sim.accepted('agent-1')
      expect(c!.frames.filter((f) => f.dir === 'out').map((f) => f.frame!.ref)).toEqual(['1', 'h1', 'p1', 'l1', '1'])
    } finally {
      raw.socket.destroy()
    }
  })

  it("a push read just before a freeze is answered after the thaw, not while the server is frozen (its channel's turn waits)", async () => {
    const sim = await world().sim()
    const ws = new WebSocket(`${sim.url}/websocket?agent_id=agent-1&api_key=key-1&vsn=2.0.0`)
    try {
      await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject))
      const topic = controlTopic('agent-1')
      const joined = new Promise((resolve) => ws.once('message', resolve))
      ws.send(JSON.stringify(['1', '1', topic, 'phx_join', {}]))
      await joined
      const [c] = sim.accepted('agent-1')
      const replied = () => c!.frames.some((f) => f.dir === 'out' && f.frame?.ref === 'p1')
      // Frozen in the same turn as the push is read, before its channel's turn.
      const frozen = new Promise<() => void>((resolve) => {
        const onChange = () => {
          if (!c!.frames.some((f) => f.dir === 'in' && f.frame?.ref === 'p1')) return
          sim.off('change', onChange)
          resolve(sim.freeze())
        }
        sim.on('change', onChange)
      })
      ws.send(JSON.stringify(['1', 'p1', topic, 'status', {}]))
      const thaw = await frozen
      // Two turns: the channel's turn has come and gone.
      await new Promise((resolve) => setImmediate(resolve))
      await new Promise((resolve) => setImmediate(resolve))
      expect(replied()).toBe(false)
      const reply = new Promise<string>((resolve) => ws.once('message', (data) => resolve(String(data))))
      thaw()
      expect(JSON.parse(await reply)).toEqual(['1', 'p1', topic, 'phx_reply', { response: {}, status: 'ok' }])
    } finally {
      ws.terminate()
    }
  })

  it('frames written with the upgrade request in one TCP write: the cowboy flavor answers them, the bandit flavor drops them and reads on from the next (as Bandit does)', async () => {
    for (const flavor of ['cowboy', 'bandit'] as const) {
      const sim = await world().sim({ flavor })
      const raw = rawClient(sim.port)
      try {
        const heard = (ref: string) => raw.received().includes(`"${ref}","phoenix","phx_reply"`)
        await raw.connected
        raw.socket.write(Buffer.concat([Buffer.from(UPGRADE_REQUEST), masked('[null,"h1","phoenix","heartbeat",{}]')]))
        await raw.until(() => raw.received().includes('101 Switching Protocols'), `${flavor}: upgrade`)
        raw.socket.write(masked('[null,"h2","phoenix","heartbeat",{}]'))
        await raw.until(() => heard('h2'), `${flavor}: reply to the second heartbeat`)
        expect(heard('h1'), flavor).toBe(flavor === 'cowboy')
        expect(sim.accepted('agent-1')[0]!.heartbeats, flavor).toBe(flavor === 'cowboy' ? 2 : 1)
      } finally {
        raw.socket.destroy()
      }
    }
  })

  it('closes a socket that sends an undecodable frame with 1011 as a crashed Phoenix socket process does, records the problem, and keeps serving others', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { agentId: 'agent-2', apiKey: 'key-2' })
    await link.connect()
    // The last: a well-formed frame but for half a character (a lone surrogate escape), which Jason refuses.
    for (const [i, bad] of ['garbage', '[1,2]', '{"a":1}', '[1,2,3,4,5]', JSON.stringify(['1', '1', 'room:1', 'say', { text: '😀'.slice(0, 1) }])].entries()) {
      const ws = new WebSocket(`${sim.url}/websocket?agent_id=agent-1&vsn=2.0.0`, { headers: { 'x-api-key': 'key-1' } })
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve())
        ws.once('error', reject)
      })
      const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)))
      ws.send(bad)
      expect(await closed).toBe(1011)
      const conn = sim.accepted('agent-1')[i]!
      expect(conn.problems.length).toBeGreaterThan(0)
    }
    expect(link.state).toBe('connected')
    expect(sim.live('agent-2')).toHaveLength(1)
    // A whole character written as two escapes (as Python's json.dumps writes it) is served.
    const ws = new WebSocket(`${sim.url}/websocket?agent_id=agent-1&vsn=2.0.0`, { headers: { 'x-api-key': 'key-1' } })
    await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject))
    const reply = new Promise<string>((resolve) => ws.once('message', (data) => resolve(String(data))))
    ws.send('["1","1","room:emoji","phx_join",{"name":"\\ud83d\\ude00"}]')
    expect(JSON.parse(await reply)).toMatchObject(['1', '1', 'room:emoji', 'phx_reply', { status: 'ok' }])
    const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()))
    ws.close()
    await closed
  })

  it('channel params from a function holding half a character are an errored join attempt, never sent (the server would close the socket 1011)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:half', () => ({ name: '😀'.slice(1) }))
    const errored = new Promise<string>((resolve) => room.onStatus((status, reason) => status === 'errored' && resolve(`${reason?.kind}: ${(reason as { detail?: string } | null)?.detail}`)))
    expect(await errored).toMatch(/^other: .*lone UTF-16 surrogate/)
    expect(framesIn(sim.live('agent-1')[0]!, 'phx_join', 'room:half')).toEqual([])
    expect(link.state).toBe('connected')
    // A topic holding half a character could never be joined: refused at once.
    expect(() => link.channel(`room:${'😀'.slice(0, 1)}`)).toThrow(/lone UTF-16 surrogate/)
  })

  it('an event name holding half a character is PUSH_INVALID for a binary push as for a JSON one: nothing is sent (TextEncoder would send U+FFFD, a name never used)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:bin')
    await room.joined()
    const bytes = new Uint8Array([1, 2, 3]).buffer
    for (const payload of [bytes, { a: 1 }]) {
      await expect(room.push('typing\uD83D', payload)).rejects.toMatchObject({ code: 'PUSH_INVALID', message: expect.stringContaining('lone UTF-16 surrogate') })
    }
    // A whole character in an event name goes, in both frames.
    expect(await room.push('typing😀', bytes)).toEqual({})
    const [conn] = sim.live('agent-1')
    const events = conn!.frames.filter((f) => f.dir === 'in' && f.frame?.topic === 'room:bin').map((f) => f.frame!.event)
    expect(events).toEqual(['phx_join', 'typing😀'])
    expect(link.state).toBe('connected')
  })

  it('channel params that JSON would send as something else (a Map, a Date, a typed array, a class instance) are refused, given at once or by a function: never sent changed', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    class Token {
      constructor(readonly value: string) {}
    }
    const odd: Array<[string, object, string]> = [
      ['room:map', new Map([['token', 'secret']]), 'a Map'],
      ['room:date', new Date(0), 'a Date'],
      ['room:typed', new Uint8Array([1, 2]), 'a Uint8Array'],
      ['room:class', new Token('secret'), 'a Token'],
    ]
    for (const [topic, params, what] of odd) {
      expect(() => link.channel(topic, params)).toThrow(`channel ${topic}: params must be a plain object or a function returning one, got ${what}`)
    }
    const room = link.channel('room:fn-map', () => new Map([['token', 'secret']]))
    const errored = new Promise<string>((resolve) => room.onStatus((status, reason) => status === 'errored' && resolve(`${reason?.kind}: ${(reason as { detail?: string } | null)?.detail}`)))
    expect(await errored).toBe('other: the join params of channel room:fn-map: expected a plain object, got a Map')
    expect(framesIn(sim.live('agent-1')[0]!, 'phx_join', 'room:fn-map')).toEqual([])
    // A null-prototype object and a plain object of another realm are plain: they join.
    const bare = Object.assign(Object.create(null) as object, { token: 'a' })
    await link.channel('room:bare', bare).joined()
    expect(framesIn(sim.live('agent-1')[0]!, 'phx_join', 'room:bare')[0]).toMatchObject({ payload: { token: 'a' } })
    await link.channel('room:realm', runInNewContext('({ token: "b" })') as object).joined()
    expect(framesIn(sim.live('agent-1')[0]!, 'phx_join', 'room:realm')[0]).toMatchObject({ payload: { token: 'b' } })
    expect(link.state).toBe('connected')
  })

  it('refuses unauthenticated sockets (403) and joins of another agent\'s control channel', async () => {
    const sim = await world().sim()
    const noKey = new WebSocket(`${sim.url}/websocket?agent_id=agent-1&vsn=2.0.0`)
    const status = await new Promise<number>((resolve) => {
      noKey.once('unexpected-response', (_req, res) => {
        resolve(res.statusCode ?? 0)
        noKey.terminate()
      })
      noKey.once('error', () => {})
    })
    expect(status).toBe(403)
    await new Promise<void>((resolve) => (noKey.readyState === WebSocket.CLOSED ? resolve() : noKey.once('close', () => resolve())))
    const ws = new WebSocket(`${sim.url}/websocket?agent_id=agent-1&vsn=2.0.0`, { headers: { 'x-api-key': 'key-1' } })
    const reply = new Promise<unknown>((resolve) => ws.on('message', (data) => resolve(JSON.parse(String(data)))))
    await new Promise<void>((resolve) => ws.once('open', () => resolve()))
    ws.send(JSON.stringify(['50', '50', controlTopic('agent-2'), 'phx_join', {}]))
    expect(await reply).toEqual(['50', '50', controlTopic('agent-2'), 'phx_reply', { status: 'error', response: { reason: 'unauthorized' } }])
    const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()))
    ws.close(1000)
    await closed
  })
  it('refuses an on_conflict it does not know (400) and records what each upgrade asked, as sent (the last of two, which decides, as Plug reads a param given twice)', async () => {
    const sim = await world().sim({ rejectMode: 'json' })
    const statusOf = async (query: string) => {
      const ws = new WebSocket(`${sim.url}/websocket?agent_id=agent-1&vsn=2.0.0${query}`, { headers: { 'x-api-key': 'key-1' } })
      ws.once('error', () => {})
      const status = await new Promise<number>((resolve) => {
        ws.once('open', () => resolve(101))
        ws.once('unexpected-response', (_req, res) => {
          resolve(res.statusCode ?? 0)
          ws.terminate()
        })
      })
      const closed = new Promise<void>((resolve) => (ws.readyState === WebSocket.CLOSED ? resolve() : ws.once('close', () => resolve())))
      if (status === 101) ws.close(1000)
      await closed
      return status
    }
    expect(await statusOf('&on_conflict=evict')).toBe(400)
    expect(await statusOf('&on_conflict=reject')).toBe(101)
    await sim.settled('agent-1')
    expect(await statusOf('')).toBe(101)
    await sim.settled('agent-1')
    // Given twice, the last decides, and the record says the one that decided.
    expect(await statusOf('&on_conflict=supersede&on_conflict=bogus')).toBe(400)
    expect(await statusOf('&on_conflict=bogus&on_conflict=supersede')).toBe(101)
    expect(sim.upgrades.map((u) => [u.status, u.onConflict])).toEqual([[400, 'evict'], [101, 'reject'], [101, null], [400, 'bogus'], [101, 'supersede']])
  })
})
