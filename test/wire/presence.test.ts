/**
 * Presence, orphaned-run aborts and metrics on the real wire: the simulator tracks each agent's
 * connections, reports first-connected and last-disconnected with the typed reason, aborts the
 * agent's runs when its last connection ends, and serves /metrics and the admin API, read here
 * with a real HTTP client.
 */
import { get, request } from 'node:http'
import { setTimeout as pace } from 'node:timers/promises'
import { afterEach, describe, expect, it } from 'vitest'
import { Counter, Gauge, Registry } from 'prom-client'
import WebSocket from 'ws'
import { linkMetrics } from '../../src/node/metrics.js'
import { MAX_STREAM_BUFFER_BYTES, startSimulator, type PlatformSimulator } from '../../src/node/server/index.js'
import { RunSupervisor } from '../../src/runs.js'
import { next, untilState, useWorld } from '../support/wire.js'

const world = useWorld()

/** `GET path` (with `headers`, if given): its status, content type and body. */
function fetchText(sim: PlatformSimulator, path: string, headers: Record<string, string> = {}): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    get({ host: '127.0.0.1', port: sim.port, path, headers }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => (body += c))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body }))
    }).on('error', reject)
  })
}

/** Parses Prometheus text into `name{labels}` -> value. */
function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>()
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const space = line.lastIndexOf(' ')
    out.set(line.slice(0, space), Number(line.slice(space + 1)))
  }
  return out
}

/**
 * A reader of the simulator's `GET /admin/events`, connected: `text()` is what it read so far;
 * `until(part)` resolves once that holds `part` (rejects after 4 s, saying what it read);
 * `close()` ends it.
 */
async function eventsReader(sim: PlatformSimulator): Promise<{ text(): string; until(part: string): Promise<void>; close(): void }> {
  let read = ''
  const waiting = new Set<() => void>()
  const req = get({ host: '127.0.0.1', port: sim.port, path: '/admin/events' })
  await new Promise<void>((resolve, reject) => {
    req.on('response', (res) => {
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        read += chunk
        for (const look of [...waiting]) look()
      })
      res.on('error', () => {})
      resolve()
    })
    req.on('error', reject)
  })
  return {
    text: () => read,
    until: (part) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiting.delete(look)
          reject(new Error(`no ${JSON.stringify(part)} in the events read: ${JSON.stringify(read)}`))
        }, 4000)
        const look = () => {
          if (!read.includes(part)) return
          clearTimeout(timer)
          waiting.delete(look)
          resolve()
        }
        waiting.add(look)
        look()
      }),
    close: () => void req.destroy(),
  }
}

const crossings = (sim: PlatformSimulator, principal = 'agent-1') => sim.presence.filter((p) => p.principal === principal).map((p) => `${p.kind}${p.reason ? `:${p.reason.kind}` : ''}`)

/**
 * A client on a bare TCP socket: the upgrade, then a masked close frame with `code` (or a text
 * frame) whose TCP end it holds back until `end()` (a client between its close frame and its FIN).
 */
async function closingClient(sim: PlatformSimulator, agent: string, key: string, code: number): Promise<{ sendClose(): void; sendText(text: string): void; end(): void; destroy(): void; closeFrames(): number[] }> {
  const { connect } = await import('node:net')
  const { randomBytes } = await import('node:crypto')
  const socket = connect({ port: sim.port, host: '127.0.0.1', allowHalfOpen: true })
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject))
  let wire = Buffer.alloc(0)
  socket.on('data', (d: Buffer) => (wire = Buffer.concat([wire, d])))
  socket.write(`GET /socket/websocket?vsn=2.0.0&agent_id=${agent}&api_key=${key} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`)
  return {
    sendClose() {
      const mask = randomBytes(4)
      const body = Buffer.from([code >> 8, code & 0xff]).map((b, i) => b ^ mask[i % 4]!)
      socket.write(Buffer.concat([Buffer.from([0x88, 0x80 | 2]), mask, body]))
    },
    sendText(text: string) {
      const mask = randomBytes(4)
      const body = Buffer.from(text).map((b, i) => b ^ mask[i % 4]!)
      const length = body.length < 126 ? Buffer.from([0x80 | body.length]) : Buffer.from([0x80 | 126, body.length >> 8, body.length & 0xff])
      socket.write(Buffer.concat([Buffer.from([0x81]), length, mask, body]))
    },
    end: () => void socket.end(),
    destroy: () => void socket.destroy(),
    closeFrames() {
      const codes: number[] = []
      let rest = wire.subarray(wire.indexOf('\r\n\r\n') + 4)
      while (rest.length >= 2) {
        const length = rest[1]! & 0x7f
        if ((rest[0]! & 0xf) === 8) codes.push(rest.readUInt16BE(2))
        rest = rest.subarray(2 + length)
      }
      return codes
    },
  }
}

describe('presence on the simulator', () => {
  for (const after of ['close', 'stop'] as const) {
    it(`a client's close 1000 is the close that ended its socket, though the server is told to ${after === 'close' ? 'close it 4000' : 'stop'} before the TCP connection ends`, async () => {
      const sim = await world().sim()
      const client = await closingClient(sim, 'agent-1', 'key-1', 1000)
      try {
        await sim.waitFor(() => sim.live('agent-1').length === 1, { what: 'the upgrade' })
        const [c] = sim.accepted('agent-1')
        client.sendClose()
        // Read, so the socket is no longer live: a waiter hears it before the TCP connection ends.
        await sim.waitFor(() => sim.live('agent-1').length === 0, { what: "the client's close frame to be read", timeoutMs: 2000 })
        expect(c!.clientClosed).toEqual({ code: 1000, reason: '' })
        expect(c!.state).toBe('closing')
        const stopped = after === 'stop' ? sim.stop() : null
        if (after === 'close') sim.close({ socket: c!.id }, 4000)
        client.end()
        await (stopped ?? sim.waitFor(() => c!.state === 'closed', { what: 'the TCP end' }))
        expect(c!.state).toBe('closed')
        // Only the answer to the client's close went on the wire, and the presence says graceful.
        expect(client.closeFrames()).toEqual([1000])
        expect(c!.closeSent).toBeNull()
        expect(c!.aborted).toBe(false)
        expect(crossings(sim)).toEqual(['first-connected', 'last-disconnected:graceful'])
      } finally {
        client.destroy()
      }
    })
  }

  it('the presence crossing is told before the abort reports it causes, runs in flight or none; a runs option without a clock keeps the simulator\'s', async () => {
    const sim = await world().sim({ runs: { hookTimeoutMs: 1000, now: undefined }, recordLimit: Number.POSITIVE_INFINITY })
    const order: string[] = []
    sim.on('presence', (p) => order.push(`${p.principal} ${p.kind}`))
    sim.on('agent-aborted', (a) => order.push(`${a.principal} ${a.outcome}`))
    const idle = world().link(sim)
    await idle.connect()
    await idle.disconnect()
    const busy = world().link(sim, { agentId: 'agent-2', apiKey: 'key-2' })
    await busy.connect()
    sim.runs.startRun('agent-2', 'r')
    await busy.disconnect()
    await sim.waitFor(() => sim.aborts.length === 2, { what: 'both abort reports' })
    expect(order).toEqual([
      'agent-1 first-connected',
      'agent-1 last-disconnected',
      'agent-1 nothing-to-abort',
      'agent-2 first-connected',
      'agent-2 last-disconnected',
      'agent-2 aborted',
    ])
    for (const report of sim.aborts) expect(report.at).toBeLessThanOrEqual(sim.now())
  })

  it('first-connected on connect; last-disconnected (graceful) on disconnect, which aborts the agent\'s runs', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    expect(crossings(sim)).toEqual(['first-connected'])
    const aborted: string[] = []
    const signal = sim.runs.startRun('agent-1', 'run-1', { onAbort: () => void aborted.push('hook') })
    await link.disconnect()
    await sim.waitFor(() => sim.aborts.length === 1)
    expect(crossings(sim)).toEqual(['first-connected', 'last-disconnected:graceful'])
    expect(signal.aborted).toBe(true)
    expect(aborted).toEqual(['hook'])
    expect(sim.aborts[0]).toMatchObject({ principal: 'agent-1', runId: 'run-1', outcome: 'aborted', reason: { kind: 'graceful' } })
  })

  it('a supersede hands the presence to the newer socket: no crossing until the last one closes', async () => {
    const sim = await world().sim()
    const first = world().link(sim)
    await first.connect()
    const second = world().link(sim)
    await second.connect()
    await untilState(first, 'terminated')
    await sim.waitFor(() => sim.live('agent-1').length === 1)
    expect(crossings(sim)).toEqual(['first-connected'])
    await second.disconnect()
    await sim.waitFor(() => sim.aborts.length === 1)
    expect(crossings(sim)).toEqual(['first-connected', 'last-disconnected:graceful'])
    expect(sim.aborts[0]!.outcome).toBe('nothing-to-abort')
  })

  it('presence ends as a socket stops being live, not at its TCP end: a superseded socket that never answers the close and a client that sends its close and hangs hold nothing up', async () => {
    // The server cuts a connection it closed whole a second after its close frame when the client
    // never ends it (connection.ts endAfterCloseFrame): presence must not wait for that.
    const sim = await world().sim({ agents: 'any', idleTimeoutMs: null })
    const opened: WebSocket[] = []
    const open = async (agent: string) => {
      const ws = new WebSocket(`${sim.url}/websocket?agent_id=${agent}&vsn=2.0.0`, { headers: { 'x-api-key': 'k' } })
      opened.push(ws)
      await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject))
      return ws
    }
    const hang = (ws: WebSocket) => (ws as unknown as { _socket: { pause(): void } })._socket.pause()
    try {
      // The older instance hangs (never reads the supersede close); the newer one supersedes it, then leaves with 1000.
      const older = await open('agent-h')
      hang(older)
      const newer = await open('agent-h')
      await sim.waitFor(() => sim.accepted('agent-h')[0]!.state === 'closing', { what: 'the superseded socket to be closing' })
      expect(crossings(sim, 'agent-h')).toEqual(['first-connected'])
      sim.runs.startRun('agent-h', 'run-h', {})
      newer.close(1000)
      await sim.waitFor(() => crossings(sim, 'agent-h').length === 2, { timeoutMs: 5000, what: 'last-disconnected of agent-h' })
      // The close that ended the principal's last live socket decides the reason, graceful: had
      // presence waited for the superseded socket's TCP end, that end (superseded) would decide it.
      expect(crossings(sim, 'agent-h')).toEqual(['first-connected', 'last-disconnected:graceful'])
      await sim.waitFor(() => sim.aborts.some((a) => a.runId === 'run-h'), { timeoutMs: 5000, what: 'the run of agent-h aborted' })
      // A client that sends its close and stops reading: its presence ends as its close is read.
      const closer = await open('agent-c')
      closer.close(1000)
      hang(closer)
      await sim.waitFor(() => crossings(sim, 'agent-c').length === 2, { timeoutMs: 5000, what: 'last-disconnected of agent-c' })
      expect(crossings(sim, 'agent-c')).toEqual(['first-connected', 'last-disconnected:graceful'])
    } finally {
      // ws clears a client's close timer as its socket ends: awaited, so no timer outlives the test.
      await Promise.all(opened.map((ws) => (ws.readyState === WebSocket.CLOSED ? undefined : new Promise((resolve) => ws.once('close', resolve).terminate()))))
      await sim.stop()
    }
  })

  it('each way a connection ends reaches last-disconnected with its reason kind', async () => {
    const sim = await world().sim({ idleTimeoutMs: 300, agents: 'any' })
    const cases: Array<[string, (agent: string) => unknown, string]> = [
      ['superseded', (agent) => void sim.supersede(agent, { close: null }), 'superseded'],
      ['closed', (agent) => sim.close({ agent }, 1011), 'closed'],
      ['rejected', (agent) => sim.close({ agent }, 1008), 'rejected'],
      ['dropped', (agent) => sim.abort({ agent }), 'dropped'],
      ['timed-out', () => {}, 'timed-out'],
    ]
    for (const [name, end, kind] of cases) {
      const agent = `agent-${name}`
      const link = world().link(sim, { agentId: agent, apiKey: 'k', policy: name === 'timed-out' ? { transport: { heartbeatIntervalMs: 60_000 } } : {} })
      await link.connect()
      const last = new Promise<void>((resolve) => sim.on('presence', (p) => p.principal === agent && p.kind === 'last-disconnected' && resolve()))
      await end(agent)
      await last
      expect(crossings(sim, agent)[1], name).toBe(`last-disconnected:${kind}`)
      await link.disconnect()
    }
  })

  it('a grace window hides a reconnect: one first-connected, no last-disconnected', async () => {
    const sim = await world().sim({ presence: { graceWindowMs: 2_000 } })
    const link = world().link(sim)
    await link.connect()
    const back = next(link, 'reconnected')
    sim.close({ agent: 'agent-1' }, 1001)
    await back
    expect(crossings(sim)).toEqual(['first-connected'])
  })

  it('waitFor hears a last-disconnected that a grace window ends (a timer, no socket event), without waiting for a slow abort hook; each abort is reported as its hook settles; records share the time base', async () => {
    const sim = await world().sim({ presence: { graceWindowMs: 100 } })
    const link = world().link(sim)
    await link.connect()
    let releaseSlow!: () => void
    const slowHook = new Promise<void>((resolve) => (releaseSlow = resolve))
    sim.runs.startRun('agent-1', 'r-slow', { onAbort: () => slowHook })
    sim.runs.startRun('agent-1', 'r-fast')
    await link.disconnect()
    // Resolves on the crossing itself: the slow hook is still pending (and would be for 5 s).
    await sim.waitFor(() => sim.presence.some((p) => p.kind === 'last-disconnected'), { timeoutMs: 2_000, what: 'last-disconnected' })
    await sim.waitFor(() => sim.aborts.some((a) => a.runId === 'r-fast'), { timeoutMs: 2_000, what: 'the fast run\'s report' })
    expect(sim.aborts.map((a) => a.runId)).toEqual(['r-fast'])
    releaseSlow()
    await sim.waitFor(() => sim.aborts.length === 2, { what: 'the slow run\'s report' })
    // Every record's at is milliseconds since the simulator started, on one clock.
    const opened = sim.accepted('agent-1')[0]!.openedAt
    const [first, last] = sim.presence
    expect(first!.at).toBeGreaterThanOrEqual(opened)
    expect(last!.at).toBeGreaterThanOrEqual(first!.at)
    expect(last!.at).toBeLessThanOrEqual(sim.now())
    for (const report of sim.aborts) {
      expect(report.at).toBeGreaterThanOrEqual(last!.at)
      expect(report.at).toBeLessThanOrEqual(sim.now())
    }
  })

  it('stopping the simulator ends an open grace window: last-disconnected reported, runs aborted, metric counted', async () => {
    const sim = await startSimulator({ agents: { 'agent-1': 'key-1' }, presence: { graceWindowMs: 60_000 } })
    const link = world().link(sim)
    await link.connect()
    const signal = sim.runs.startRun('agent-1', 'run-x')
    await link.disconnect()
    expect(crossings(sim)).toEqual(['first-connected']) // the grace window is open
    await sim.stop()
    expect(crossings(sim)).toEqual(['first-connected', 'last-disconnected:graceful'])
    expect(signal.aborted).toBe(true)
    expect(sim.aborts.map((a) => a.outcome)).toEqual(['aborted'])
    expect(parseMetrics(await sim.metrics.registry.metrics()).get('phoenix_link_principal_disconnects_total{reason="graceful"}')).toBe(1)
  })

  it('each control of target sockets returns how many it acted on: 0 for an agent between sockets', async () => {
    const sim = await world().sim({ agents: 'any' })
    const link = world().link(sim, { agentId: 'counted', apiKey: 'k' })
    await link.connect()
    const room = link.channel('room:1')
    await room.joined()
    expect(sim.channelError({ agent: 'counted' }, 'room:none')).toBe(0)
    const rejoined = next(link, 'channel', { filter: (e) => e.topic === 'room:1' && e.status === 'joined' })
    expect(sim.channelError({ agent: 'counted' }, 'room:1')).toBe(1)
    await rejoined
    expect(sim.channelClose('all', 'room:1')).toBe(1)
    expect(sim.stall({ agent: 'nobody' })).toBe(0)
    const lost = next(link, 'disconnected')
    expect(sim.close({ agent: 'counted' }, 1000)).toBe(1)
    await lost
    // Between sockets (the link reconnecting): nothing to close, abort or disconnect.
    expect([sim.close({ agent: 'counted' }, 1000), sim.abort({ agent: 'counted' }), sim.disconnect({ agent: 'counted' })]).toEqual([0, 0, 0])
    await untilState(link, 'connected')
    expect(sim.disconnect('all')).toBe(1)
  })

  it('stopping the simulator aborts runs started while their agent had no connection (before it connected, or after its last-disconnected), reason null', async () => {
    const sim = await startSimulator({ agents: { 'agent-1': 'key-1' } })
    const early = sim.runs.startRun('agent-9', 'never-connected')
    const link = world().link(sim)
    await link.connect()
    await link.disconnect()
    await sim.waitFor(() => sim.aborts.length === 1) // agent-1's last-disconnected: nothing to abort
    const late = sim.runs.startRun('agent-1', 'after-it-left')
    expect([early.aborted, late.aborted]).toEqual([false, false])
    await sim.stop()
    expect([early.aborted, late.aborted]).toEqual([true, true])
    expect(sim.aborts.map((a) => [a.principal, a.runId, a.outcome, a.reason])).toEqual([
      ['agent-1', null, 'nothing-to-abort', { kind: 'graceful', retryable: false, generation: 0, at: expect.any(Number) }],
      ['agent-9', 'never-connected', 'aborted', null],
      ['agent-1', 'after-it-left', 'aborted', null],
    ])
    expect(sim.runs.principals()).toEqual([])
  })

  it('an abort hook that rejects with a value no String() can print is reported failed: the abort is recorded and counted, and stop() still tears everything down', async () => {
    const sim = await startSimulator({ agents: { 'agent-1': 'key-1' } })
    const link = world().link(sim)
    await link.connect()
    sim.runs.startRun('agent-1', 'run-z', { onAbort: () => Promise.reject(Object.create(null)) })
    sim.abort({ agent: 'agent-1' })
    await sim.waitFor(() => sim.aborts.length === 1)
    expect(sim.aborts[0]).toMatchObject({ runId: 'run-z', outcome: 'failed', error: 'an unprintable object' })
    expect(parseMetrics(await sim.metrics.registry.metrics()).get('phoenix_link_agent_aborts_total{outcome="failed"}')).toBe(1)
    await link.disconnect()
    await sim.stop()
    const served = await new Promise<boolean>((resolve) => get({ host: '127.0.0.1', port: sim.port, path: '/metrics' }, () => resolve(true)).on('error', () => resolve(false)))
    expect(served).toBe(false)
  })

  it("link.runSignal(): a hook that rejects with a value no String() can print is reported failed when the session ends, and nothing escapes", async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const reported = new Promise<unknown>((resolve) => link.runs.onAborted(resolve))
    const signal = link.runSignal('run-u', { onAbort: () => Promise.reject(Object.create(null)) })
    await link.disconnect()
    expect(signal.aborted).toBe(true)
    expect(await reported).toMatchObject({ runId: 'run-u', outcome: 'failed', error: 'an unprintable object' })
  })

  it('a frame ws refuses is answered with its close (1009) alone: the socket is closing at once, and nothing scripted after it sends another', async () => {
    const sim = await world().sim({ maxFrameBytes: 1024 })
    const client = await closingClient(sim, 'agent-1', 'key-1', 1000)
    try {
      await sim.waitFor(() => sim.live('agent-1').length === 1, { what: 'the upgrade' })
      const [c] = sim.accepted('agent-1')
      client.sendText('a'.repeat(2000))
      await sim.waitFor(() => sim.live('agent-1').length === 0, { what: 'the oversize frame to be refused', timeoutMs: 2000 })
      expect([c!.state, c!.closeSent, c!.closeCause]).toEqual(['closing', { code: 1009, reason: '' }, 'protocol'])
      sim.close({ socket: c!.id }, 4000)
      const stopped = sim.stop()
      client.end()
      await stopped
      expect(client.closeFrames()).toEqual([1009])
      expect(c!.closeSent).toEqual({ code: 1009, reason: '' })
    } finally {
      client.destroy()
    }
  })

  it("a socket that sends only WebSocket pings is not idle (as Bandit and Cowboy keep it); silent, it is closed at the idle timeout", async () => {
    const sim = await world().sim({ idleTimeoutMs: 300 })
    const ws = new WebSocket(`${sim.url}/websocket?vsn=2.0.0&agent_id=agent-1&api_key=key-1`)
    try {
      await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject))
      const [c] = sim.accepted('agent-1')
      // Pings every 100 ms for 900 ms: three idle timeouts pass with no data frame.
      for (let i = 0; i < 9; i++) {
        await new Promise<void>((resolve) => ws.ping(undefined, undefined, () => setTimeout(resolve, 100)))
        expect(c!.state).toBe('open')
      }
      const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)))
      expect(await closed).toBe(1000)
      expect(c!.closeCause).toBe('idle')
    } finally {
      ws.terminate()
    }
  })

  it('a socket sending one message in fragments 100 ms apart is not idle (any bytes received count, as on Bandit and Cowboy): the message is answered after three idle timeouts', async () => {
    const sim = await world().sim({ idleTimeoutMs: 300 })
    const ws = new WebSocket(`${sim.url}/websocket?vsn=2.0.0&agent_id=agent-1&api_key=key-1`)
    try {
      await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject))
      const [c] = sim.accepted('agent-1')
      const replied = new Promise<unknown>((resolve) => ws.once('message', (data: Buffer) => resolve(JSON.parse(data.toString()))))
      // A heartbeat in 10 fragments, 100 ms apart: 900 ms with no whole message received.
      const parts = ['["1","1","phoenix","heartbeat"', ...Array<string>(8).fill(' '), ',{}]']
      for (const [i, part] of parts.entries()) {
        // The stimulus's own pace (a fragment every 100 ms), not a wait for the server.
        if (i > 0) await pace(100)
        ws.send(part, { fin: i === parts.length - 1 })
        expect(c!.state).toBe('open')
      }
      expect(await replied).toEqual([null, '1', 'phoenix', 'phx_reply', { response: {}, status: 'ok' }])
      expect(c!.state).toBe('open')
      expect(c!.closeCause).toBeNull()
    } finally {
      ws.terminate()
    }
  })

  it("a silent client the server sends to every 100 ms: Bandit's idle timeout counts what it sends and keeps it open; Cowboy's counts only what it receives and closes it (1000)", async () => {
    for (const flavor of ['bandit', 'cowboy'] as const) {
      const sim = await world().sim({ idleTimeoutMs: 300, flavor })
      const ws = new WebSocket(`${sim.url}/websocket?vsn=2.0.0&agent_id=agent-1&api_key=key-1`)
      try {
        const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)))
        await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject))
        const [c] = sim.accepted('agent-1')
        // A server frame every 100 ms, 9 of them: three idle timeouts pass with nothing received.
        let ticker: NodeJS.Timeout | undefined
        let sent = 0
        await new Promise<void>((resolve) => {
          const tick = () => {
            if (c!.state !== 'open' || sent === 9) return resolve()
            c!.send({ join_ref: null, ref: null, topic: 'room:news', event: 'tick', payload: { i: sent++ } })
          }
          tick()
          ticker = setInterval(tick, 100)
        }).finally(() => clearInterval(ticker))
        if (flavor === 'bandit') {
          expect(c!.state, flavor).toBe('open')
          expect(c!.frames.filter((f) => f.dir === 'out')).toHaveLength(9)
        } else {
          expect(await closed, flavor).toBe(1000)
          expect(c!.closeCause, flavor).toBe('idle')
        }
      } finally {
        ws.terminate()
      }
    }
  })

  it('simulators given one registry share its metrics: one started again after a stop counts on; a foreign metric of the name is refused', async () => {
    const registry = new Registry()
    const first = await world().sim({ metrics: { registry } })
    const a = world().link(first)
    await a.connect()
    await a.disconnect()
    await first.stop()
    const second = await world().sim({ metrics: { registry } })
    const third = await world().sim({ metrics: { registry } })
    await world().link(second).connect()
    await world().link(third, { agentId: 'agent-2', apiKey: 'key-2' }).connect()
    const parsed = parseMetrics(await registry.metrics())
    // Both running simulators' sockets; the first's disconnect still counted.
    expect(parsed.get('phoenix_link_active_connections')).toBe(2)
    expect(parsed.get('phoenix_link_principal_disconnects_total{reason="graceful"}')).toBe(1)
    const clash = new Registry()
    new Counter({ name: 'phoenix_link_active_connections', help: 'not the simulator\'s', registers: [clash] })
    await expect(startSimulator({ metrics: { registry: clash } })).rejects.toThrow(
      "the metrics registry already holds phoenix_link_active_connections, not as the simulator's gauge: give the simulator another registry or prefix",
    )
  })

  for (const graceWindowMs of [0, 60_000]) {
    it(`stopping the simulator under a client that never answers the close frame still ends its presence and aborts its runs (grace ${graceWindowMs} ms)`, async () => {
      const sim = await startSimulator({ agents: { 'agent-1': 'key-1' }, presence: { graceWindowMs } })
      const client = new WebSocket(`${sim.url}/websocket?agent_id=agent-1&vsn=2.0.0`, { headers: { 'x-api-key': 'key-1' } })
      client.on('error', () => {})
      try {
        await new Promise((resolve) => client.once('open', resolve))
        const signal = sim.runs.startRun('agent-1', 'run-x')
        // The client stops reading: the close frame is never answered, so stop() cuts it off.
        ;(client as unknown as { _socket: { pause(): void } })._socket.pause()
        await sim.stop()
        expect(crossings(sim)).toEqual(['first-connected', 'last-disconnected:dropped'])
        expect(signal.aborted).toBe(true)
        expect(sim.runs.inFlight('agent-1')).toEqual([])
        expect(parseMetrics(await sim.metrics.registry.metrics()).get('phoenix_link_principal_disconnects_total{reason="dropped"}')).toBe(1)
      } finally {
        client.terminate()
      }
    })
  }

  it('a host logger or presence listener that throws stops neither the abort nor the metrics', async () => {
    const sim = await world().sim({
      logger: {
        info: () => {
          throw new Error('logger bug')
        },
        warn: () => {
          throw new Error('logger bug')
        },
      },
    })
    sim.on('presence', () => {
      throw new Error('listener bug')
    })
    const link = world().link(sim)
    await link.connect()
    const signal = sim.runs.startRun('agent-1', 'run-y')
    const aborted = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()))
    sim.abort({ agent: 'agent-1' })
    await aborted
    await sim.waitFor(() => sim.aborts.length === 1)
    expect(sim.aborts[0]!.outcome).toBe('aborted')
    expect(parseMetrics(await sim.metrics.registry.metrics()).get('phoenix_link_principal_disconnects_total{reason="dropped"}')).toBe(1)
    await link.disconnect()
  })
})

/**
 * While a freeze holds every upgrade: links of `free-1` and `held-1` (which a test's hold of
 * /^held-/ holds past the thaw) start connecting; resolves once the server holds both upgrades.
 */
async function twoHeldUpgrades(sim: PlatformSimulator): Promise<{ freeConnected: Promise<void>; releasedByTest: (release: () => void) => Promise<void> }> {
  const free = world().link(sim, { agentId: 'free-1', apiKey: 'k' })
  const held = world().link(sim, { agentId: 'held-1', apiKey: 'k' })
  const freeConnected = free.connect()
  let connected = false
  const heldConnect = held.connect().then(() => (connected = true))
  await sim.waitFor(() => sim.heldUpgrades === 2, { what: 'both upgrades held' })
  /** After the thaw: held-1's upgrade is still held, until the test's own `release`. */
  const releasedByTest = async (release: () => void) => {
    expect(sim.heldUpgradesOf('held-1')).toBe(1)
    expect(connected).toBe(false)
    release()
    await heldConnect
    expect(sim.heldUpgrades).toBe(0)
  }
  return { freeConnected, releasedByTest }
}

describe('the simulator as a test scripts it', () => {
  it('freeze() and its thaw leave what the test set up: a socket it stalled stays stalled, upgrades its own hold holds stay held; the ones the freeze held are answered', async () => {
    const sim = await world().sim({ agents: 'any' })
    const stalledLink = world().link(sim, { agentId: 'stalled-1', apiKey: 'k' })
    await stalledLink.connect()
    const stalled = sim.live('stalled-1')[0]!
    sim.stall(stalled)
    const release = sim.holdUpgrades(/^held-/)
    const thaw = sim.freeze()
    const { freeConnected, releasedByTest } = await twoHeldUpgrades(sim)
    thaw()
    await freeConnected
    expect(stalled.stalled).toBe(true)
    // The test's own hold ends when the test says so.
    await releasedByTest(release)
    stalled.resume()
  })

  it('what the test scripts while frozen is kept at the thaw: a hold set then stays, a socket stalled then stays stalled, and a hold released then waits for the thaw', async () => {
    const sim = await world().sim({ agents: 'any' })
    const stalledLink = world().link(sim, { agentId: 'stalled-1', apiKey: 'k' })
    const otherLink = world().link(sim, { agentId: 'other-1', apiKey: 'k' })
    await Promise.all([stalledLink.connect(), otherLink.connect()])
    const [stalled, other] = [sim.live('stalled-1')[0]!, sim.live('other-1')[0]!]
    const thaw = sim.freeze()
    // Set while frozen: a hold of held-*, a stall, and a hold released before the thaw.
    const release = sim.holdUpgrades(/^held-/)
    sim.stall(stalled)
    const { freeConnected, releasedByTest } = await twoHeldUpgrades(sim)
    const releaseEarly = sim.holdUpgrades(/^never-/)
    releaseEarly()
    // Released while frozen: the freeze still holds both, and the test's first hold is gone.
    expect(sim.heldUpgrades).toBe(2)
    sim.holdUpgrades(/^held-/)
    thaw()
    thaw() // a second call does nothing
    await freeConnected
    expect([stalled.stalled, other.stalled]).toEqual([true, false])
    await releasedByTest(release)
    stalled.resume()
  })

  it('freezes nest (sockets stay stalled and upgrades held until the last thaw), and a socket the test stalled and resumed before a freeze is resumed by its thaw', async () => {
    const sim = await world().sim({ agents: 'any' })
    const link = world().link(sim, { agentId: 'nested-1', apiKey: 'k' })
    const plain = world().link(sim, { agentId: 'plain-1', apiKey: 'k' })
    await Promise.all([link.connect(), plain.connect()])
    const socket = sim.live('nested-1')[0]!
    const untouched = sim.live('plain-1')[0]!
    sim.stall(socket)
    socket.resume()
    const thawA = sim.freeze()
    const thawB = sim.freeze()
    const late = world().link(sim, { agentId: 'late-1', apiKey: 'k' })
    const lateConnected = late.connect()
    await sim.waitFor(() => sim.heldUpgrades === 1, { what: 'the upgrade held' })
    thawA()
    expect([socket.stalled, untouched.stalled]).toEqual([true, true])
    // Held past the first thaw's turn too: the second freeze still holds it.
    await new Promise<void>((resolve) => setImmediate(resolve))
    expect(sim.heldUpgrades).toBe(1)
    thawB()
    await lateConnected
    expect([socket.stalled, untouched.stalled]).toEqual([false, false])
    expect(sim.heldUpgrades).toBe(0)
  })

  it("a payload JSON cannot carry (a BigInt, a getter that throws, a cycle) is refused with a TypeError by supersede(), push(), broadcast() and control() before anything is sent or marked, on a socket whose control channel is not joined too: it stays live, its principal present, its runs running, an /admin/events reader served", async () => {
    const sim = await world().sim()
    // An events reader, so every crossing is serialized for it.
    const events = await eventsReader(sim)
    try {
      // A socket that never joins its control channel (Phoenix would push it no supersede, only close it).
      const raw = new WebSocket(`${sim.url}/websocket?vsn=2.0.0&agent_id=agent-1&api_key=key-1`)
      raw.on('error', () => {})
      await new Promise((resolve) => raw.once('open', resolve))
      await sim.waitFor(() => sim.live('agent-1').length === 1, { what: 'the raw socket accepted' })
      const run = sim.runs.startRun('agent-1', 'run-1')
      const cycle: Record<string, unknown> = {}
      cycle.self = cycle
      const bad: Array<[string, Record<string, unknown>]> = [
        ['a BigInt', { n: 1n }],
        ['a getter that throws', { get reason(): string { throw new Error('no reason to give') } }],
        ['a cycle', cycle],
      ]
      for (const [what, payload] of bad) {
        expect(() => sim.supersede('agent-1', { payload }), what).toThrow(TypeError)
        expect(() => sim.push({ agent: 'agent-1' }, 'agent_control:agent-1', 'notice', payload), what).toThrow(TypeError)
        expect(() => sim.broadcast('agent_control:agent-1', 'notice', payload), what).toThrow(TypeError)
        // The signal holds the payload's own properties as they are (a spread would read the getter here).
        const signal = Object.defineProperties({ mode: 'pause' }, Object.getOwnPropertyDescriptors(payload))
        expect(() => sim.control('agent-1', signal), what).toThrow(TypeError)
      }
      expect(() => sim.supersede('agent-1', { payload: { n: 1n } })).toThrow('simulator: supersede() payload cannot be sent as JSON: Do not know how to serialize a BigInt')
      expect(sim.live('agent-1')).toHaveLength(1)
      expect(crossings(sim)).toEqual(['first-connected'])
      expect(run.aborted).toBe(false)
      expect(sim.accepted('agent-1')[0]!.frames.filter((f) => f.dir === 'out')).toEqual([])
      // A payload JSON carries goes out as JSON carries it: its toJSON read once, here.
      const lost = new Promise((resolve) => raw.once('close', resolve))
      expect(sim.supersede('agent-1', { payload: { reason: 'session.already_connected', at: new Date(0) } })).toBe(1)
      await lost
      await sim.waitFor(() => run.aborted, { what: 'the run aborted' })
      expect(crossings(sim)).toEqual(['first-connected', 'last-disconnected:superseded'])
      const reason = sim.presence[1]!.reason as { raw?: unknown }
      expect(reason.raw).toEqual({ reason: 'session.already_connected', at: '1970-01-01T00:00:00.000Z' })
      await events.until('"last-disconnected"')
    } finally {
      events.close()
    }
  })

  it("an abort report JSON cannot carry (a host's own reason given to sim.runs.abortPrincipal() with a BigInt in it) reaches an /admin/events reader as an unserializable event naming it, and the simulator's listeners and waits still hear the report", async () => {
    const sim = await world().sim()
    const events = await eventsReader(sim)
    try {
      const heard: string[] = []
      sim.on('agent-aborted', (report) => heard.push(`${report.runId}:${report.outcome}`))
      const run = sim.runs.startRun('agent-1', 'run-1')
      const reason = { kind: 'other', retryable: true, detail: 'the host stopped it', generation: 0, at: 0, cost: 1n }
      const reports = await sim.runs.abortPrincipal('agent-1', reason as never)
      expect(reports.map((r) => r.outcome)).toEqual(['aborted'])
      expect(run.aborted).toBe(true)
      await sim.waitFor(() => sim.aborts.length === 1, { what: 'the abort recorded' })
      expect(heard).toEqual(['run-1:aborted'])
      await events.until('event: unserializable\ndata: ')
      await events.until('}\n\n')
      const data = events.text().split('event: unserializable\ndata: ')[1]!.split('\n')[0]!
      expect(JSON.parse(data)).toEqual({ event: 'agent-aborted', error: 'Do not know how to serialize a BigInt' })
    } finally {
      events.close()
    }
  })

  it("control() sends the signal's own members over its defaults as given: a scope left undefined leaves the frame without one, as JSON carries it", async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    expect(sim.control('agent-1', { mode: 'pause', scope: undefined as unknown as string, correlation_id: 'c-1' })).toBe(1)
    await sim.waitFor(() => sim.accepted('agent-1')[0]!.frames.some((f) => f.dir === 'out' && f.frame?.event === 'agent.control'), { what: 'the signal sent' })
    const sent = sim.accepted('agent-1')[0]!.frames.find((f) => f.dir === 'out' && f.frame?.event === 'agent.control')!
    expect(sent.frame!.payload).toEqual({ agent_id: 'agent-1', mode: 'pause', correlation_id: 'c-1' })
  })

  it('a global or sticky RegExp given to holdUpgrades() or onJoin() matches every time (RegExp.test() of such a pattern resumes at its lastIndex)', async () => {
    const sim = await world().sim({ agents: 'any' })
    sim.onJoin(/^room:/g, { reply: 'error', response: { reason: 'closed' } })
    const link = world().link(sim, { agentId: 'agent-7', apiKey: 'k' })
    await link.connect()
    for (const topic of ['room:a', 'room:b', 'room:c']) {
      const room = link.channel(topic)
      await expect(room.joined(), topic).rejects.toThrow()
    }
    const release = sim.holdUpgrades(/^held-/y)
    const clients = ['held-1', 'held-1', 'held-2'].map((agent) => {
      const ws = new WebSocket(`${sim.url}/websocket?vsn=2.0.0&agent_id=${agent}&api_key=k`)
      ws.on('error', () => {})
      return ws
    })
    try {
      await sim.waitFor(() => sim.heldUpgrades === 3, { what: 'three upgrades held', timeoutMs: 2000 })
      expect(sim.accepted('held-1')).toHaveLength(0)
    } finally {
      release()
      await Promise.all(clients.map((ws) => new Promise((resolve) => (ws.readyState === WebSocket.CLOSED ? resolve(null) : (ws.once('close', resolve), ws.terminate())))))
    }
  })

  it("a presence listener that closes a principal's new socket on first-connected ends its presence with that close, as a close from a connection listener does (Bandit's 1000: reading on after it)", async () => {
    const sim = await world().sim({ flavor: 'bandit' })
    sim.on('presence', (crossing) => {
      if (crossing.kind === 'first-connected') sim.close({ agent: crossing.principal }, 1000)
    })
    // A client that never answers the close frame and keeps its end open.
    const client = await closingClient(sim, 'agent-1', 'key-1', 1000)
    try {
      await sim.waitFor(() => crossings(sim).length === 2, { what: 'last-disconnected with the close', timeoutMs: 500 })
      expect(crossings(sim)).toEqual(['first-connected', 'last-disconnected:closed'])
      const [socket] = sim.accepted('agent-1')
      expect(socket!.closeSent).toEqual({ code: 1000, reason: '' })
      // Bandit reads on after its 1000: the connection stays until the client ends it (or ws's close timeout).
      expect(socket!.state).toBe('closing')
    } finally {
      client.destroy()
    }
  })

  it("a supersede whose payload is any object (a class instance, a symbol key) still aborts the principal's runs, and stop() resolves", async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    sim.runs.startRun('agent-1', 'run-1')
    class SupersedeNotice {
      reason = 'session.already_connected'
    }
    const notice = Object.assign(new SupersedeNotice(), { [Symbol('trace')]: 1 })
    const ended = untilState(link, 'terminated')
    sim.supersede('agent-1', { payload: notice as never })
    await ended
    await sim.waitFor(() => sim.aborts.length === 1, { what: 'the run aborted' })
    expect(sim.aborts.map((a) => `${a.runId}:${a.outcome}:${a.reason?.kind}`)).toEqual(['run-1:aborted:superseded'])
    await sim.stop()
  })

  it('the joins count of /admin/wait counts every phx_join received, whatever recordLimit keeps', async () => {
    const sim = await world().sim({ recordLimit: 0 })
    const link = world().link(sim)
    await link.connect()
    await link.channel('room:1').joined()
    const http = sim.url.replace(/^ws/, 'http').replace(/\/socket$/, '')
    const response = await fetch(`${http}/admin/wait`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ until: 'joins', agent: 'agent-1', atLeast: 2, timeoutMs: 1000 }) })
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ count: 2 })
    expect(sim.accepted('agent-1')[0]!.frames).toEqual([])
    expect(sim.accepted('agent-1')[0]!.joins).toBe(2)
  })

  it('historyLimit keeps the most recent closed sockets, upgrades, presence crossings and abort reports; an open socket is always kept', async () => {
    const sim = await world().sim({ historyLimit: 2 })
    const link = world().link(sim)
    const held = world().link(sim, { agentId: 'agent-2', apiKey: 'key-2' })
    await held.connect()
    for (let round = 1; round <= 4; round++) {
      await link.connect()
      sim.runs.startRun('agent-1', `run-${round}`)
      await link.disconnect()
      await sim.waitFor(() => sim.aborts.some((a) => a.runId === `run-${round}`))
    }
    await sim.waitFor(() => sim.connections.every((c) => c.agentId !== 'agent-1' || c.state === 'closed'))
    // agent-2's socket, the oldest, is open: kept; of agent-1's four closed sockets, the last two.
    expect(sim.connections.map((c) => `${c.agentId} ${c.state}`)).toEqual(['agent-2 open', 'agent-1 closed', 'agent-1 closed'])
    expect(sim.connections.map((c) => c.id)).toEqual(['sock-1', 'sock-4', 'sock-5'])
    expect(sim.upgrades).toHaveLength(2)
    expect(sim.presence.map((p) => p.kind)).toEqual(['first-connected', 'last-disconnected'])
    expect(sim.aborts.map((a) => a.runId)).toEqual(['run-3', 'run-4'])
  })

  it('historyLimit keeps the unanswered-upgrade counts of the agents whose upgrade went unanswered most recently', async () => {
    const sim = await world().sim({ historyLimit: 2, agents: 'any' })
    sim.holdUpgrades()
    const dropOne = async (agent: string) => {
      const ws = new WebSocket(`${sim.url}/websocket?agent_id=${agent}&vsn=2.0.0`, { headers: { 'x-api-key': 'k' } })
      const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()))
      ws.once('error', () => {})
      await sim.waitFor(() => sim.heldUpgradesOf(agent) === 1, { what: `the held upgrade of ${agent}` })
      expect(sim.answerHeldUpgrade('drop', agent)).toBe(true)
      await closed
    }
    await dropOne('agent-a')
    await dropOne('agent-b')
    await dropOne('agent-a')
    expect([sim.unansweredUpgradesOf('agent-a'), sim.unansweredUpgradesOf('agent-b')]).toEqual([2, 1])
    // A third agent: the one unanswered least recently (agent-b) is forgotten, not agent-a, counted again since.
    await dropOne('agent-c')
    expect([sim.unansweredUpgradesOf('agent-a'), sim.unansweredUpgradesOf('agent-b'), sim.unansweredUpgradesOf('agent-c')]).toEqual([2, 0, 1])
    expect(sim.unansweredUpgradesOf()).toBe(3)
  })

  it('a join held on a socket that closes is forgotten with it, so held joins pin no closed socket past historyLimit', async () => {
    const sim = await world().sim({ historyLimit: 1 })
    sim.onJoin(/^room:/, { reply: 'hold' })
    const link = world().link(sim)
    for (let round = 1; round <= 3; round++) {
      await link.connect()
      link.channel(`room:${round}`)
      await sim.waitFor(() => sim.heldJoins.length === 1, { what: 'the held join' })
      await link.disconnect()
      await sim.waitFor(() => sim.live('agent-1').length === 0)
    }
    expect(sim.connections).toHaveLength(1)
    // Internal, read on purpose: what the simulator still holds of the closed sockets' joins.
    expect((sim as unknown as { heldJoinFrames: unknown[] }).heldJoinFrames).toEqual([])
  })

  it('options that would misbehave silently are refused, naming the option; so are a waitFor timeout a timer cannot take and a run supervisor clock that is not a function', async () => {
    for (const [options, message] of [
      [{ eventStreamKeepAliveMs: 0 }, /eventStreamKeepAliveMs must be a whole number in \[1, 2\^31-1\], got 0/],
      [{ eventStreamKeepAliveMs: Number.NaN }, /eventStreamKeepAliveMs must be a whole number/],
      [{ recordLimit: 'x' }, /recordLimit must be a whole number in \[0, /],
      [{ historyLimit: -1 }, /historyLimit must be a whole number in \[0, /],
      [{ host: '' }, /host must be an interface name or address such as '127\.0\.0\.1' \(an empty one would listen on every interface\), got ""/],
      [{ path: 'socket' }, /path must start with '\/' and hold no spaces, '\?' or '#', such as '\/socket'; got "socket"/],
      [{ path: 7 }, /path must start with '\/'/],
      [{ supersedeCooldownMs: -1 }, /supersedeCooldownMs must be a whole number/],
      [{ maxFrameBytes: 0 }, /maxFrameBytes must be a whole number in \[1, /],
      [{ port: '80' }, /^port must be a whole number in \[0, 65535\], got 80$/],
      [{ port: 70_000 }, /^port must be a whole number in \[0, 65535\], got 70000$/],
      [{ channels: 'room:*' }, /^channels must be an array of topic patterns such as \['room:\*', 'lobby'\], got "room:\*"$/],
      [{ channels: ['room:*', 7] }, /^channels must be an array of topic patterns such as \['room:\*', 'lobby'\], got 7 at index 1$/],
      // A hole of a sparse array is not a pattern either (every() would skip it).
      [{ channels: [, 'room:*'] }, /^channels must be an array of topic patterns such as \['room:\*', 'lobby'\], got undefined at index 0$/],
      [{ channels: ['ro*om:'] }, /^channels: "ro\*om:" holds a \* before its end; a pattern is an exact topic or a prefix ending in \*/],
      [{ channels: ['room:**'] }, /^channels: "room:\*\*" holds a \* before its end/],
      [{ routes: 5 }, /^routes must be a function \(req, res\) => boolean \(true: it answered the request\), got 5$/],
      [{ supersedeRetryAfterS: Number.POSITIVE_INFINITY }, /supersedeRetryAfterS must be a finite number of seconds >= 0/],
      [{ metrics: null }, /metrics must be an object of options, got null/],
      [{ runs: { now: 'Date.now' } }, /RunSupervisor now must be a function/],
      // A typo is an error, not a default kept (a grace window of 0, unbounded records).
      [{ histroyLimit: 10 }, /^unknown simulator option "histroyLimit"; known: host, port, path, agents, /],
      [{ presence: { graceWindowMz: 5 } }, /^unknown simulator option "presence.graceWindowMz"; known: graceWindowMs$/],
      [{ runs: { hookTimeoutMz: 5 } }, /^unknown simulator option "runs.hookTimeoutMz"; known: hookTimeoutMs, now$/],
      [{ metrics: { prefx: 'a_' } }, /^unknown simulator option "metrics.prefx"; known: registry, prefix$/],
      [{ metrics: { registry: {} } }, /^metrics.registry must be a prom-client Registry$/],
    ] as const) {
      await expect(startSimulator(options as never)).rejects.toThrow(message)
    }
    expect(() => new RunSupervisor(null as never)).toThrow(new TypeError('RunSupervisor options must be an object, got null'))
    const sim = await world().sim()
    for (const timeoutMs of [Number.POSITIVE_INFINITY, 2 ** 31, -1, Number.NaN, 1.5]) {
      await expect(sim.waitFor(() => false, { timeoutMs })).rejects.toThrow(/waitFor timeoutMs must be a whole number of milliseconds in \[0, 2\^31-1\]/)
    }
  })
})

describe('the simulator\'s metrics and admin API', () => {
  it('GET /metrics: Prometheus text after a scripted scenario', async () => {
    const sim = await world().sim({ metrics: { prefix: 'sim_' } })
    const link = world().link(sim)
    await link.connect()
    sim.runs.startRun('agent-1', 'r')
    let metrics = parseMetrics((await fetchText(sim, '/metrics')).body)
    expect(metrics.get('sim_active_connections')).toBe(1)
    await link.disconnect()
    await sim.waitFor(() => sim.aborts.length === 1)
    const other = world().link(sim, { agentId: 'agent-2', apiKey: 'key-2' })
    await other.connect()
    sim.abort({ agent: 'agent-2' })
    await sim.waitFor(() => sim.aborts.length === 2)
    await other.disconnect()
    const response = await fetchText(sim, '/metrics')
    expect(response.status).toBe(200)
    expect(response.type).toMatch(/^text\/plain/)
    metrics = parseMetrics(response.body)
    expect(metrics.get('sim_principal_disconnects_total{reason="graceful"}')).toBeGreaterThanOrEqual(1)
    expect(metrics.get('sim_principal_disconnects_total{reason="dropped"}')).toBe(1)
    expect(metrics.get('sim_agent_aborts_total{outcome="aborted"}')).toBe(1)
    expect(metrics.get('sim_agent_aborts_total{outcome="nothing-to-abort"}')).toBeGreaterThanOrEqual(1)
    expect(metrics.get('sim_agent_aborts_total{outcome="failed"}')).toBe(0)
    expect(response.body).not.toMatch(/agent-1|agent-2/) // no principal label
    // A collector that throws is a 500 with the error, not a hung or dropped request.
    new Gauge({ name: 'sim_broken', help: 'a collector that throws', registers: [sim.metrics.registry], collect: () => { throw new Error('collector broke') } })
    const failed = await fetchText(sim, '/metrics')
    expect([failed.status, JSON.parse(failed.body)]).toEqual([500, { error: { code: 'metrics_failed', message: 'collector broke' } }])
  })

  it('a POST to a GET route of the admin API is answered 405 with Allow: GET, an unknown route 404, each with an error body', async () => {
    const sim = await world().sim()
    const answer = await new Promise<{ status: number; type: string; body: string; allow: string | undefined }>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: sim.port, path: '/admin/connections', method: 'POST', headers: { 'content-type': 'application/json' }, agent: false }, (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (c: string) => (body += c))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body, allow: res.headers.allow }))
      })
      req.on('error', reject)
      req.end()
    })
    expect(answer.status).toBe(405)
    expect(answer.type).toBe('application/json')
    const unknown = await fetchText(sim, '/admin/nope')
    expect(unknown.status).toBe(404)
    expect(JSON.parse(unknown.body)).toEqual({ error: { code: 'not_found', message: 'no route GET /admin/nope' } })
    expect(JSON.parse(answer.body)).toEqual({ error: { code: 'method_not_allowed', message: '/admin/connections takes GET' } })
    expect(answer.allow).toBe('GET')
  })

  it('with historyLimit 0 nothing is kept, and events still go out live, with their ids; a resume finds them missed', async () => {
    const sim = await world().sim({ historyLimit: 0 })
    const live = await readEvents(sim, '/admin/events', {}, 0)
    const two = live.next(2)
    const link = world().link(sim)
    await link.connect()
    sim.runs.startRun('agent-1', 'r')
    await link.disconnect()
    const sent = await two
    expect(sent.map((f) => [f.id?.split('.')[1], f.event, (f.data as { kind: string }).kind])).toEqual([
      ['1', 'principal-presence', 'first-connected'],
      ['2', 'principal-presence', 'last-disconnected'],
    ])
    expect((await live.next(1))[0]!.event).toBe('agent-aborted')
    const resumed = await readEvents(sim, '/admin/events?after=0', {}, 1)
    expect(resumed.frames[0]!.data).toMatchObject({ after: 0, lastSeq: 3, replayed: 0, missed: 3 })
  })

  it('a replay larger than 1 MiB (40 MB of kept events) reaches a reader that resumes after 0, whole and in order, then the live events (it was cut off before its status line)', async () => {
    const sim = await world().sim()
    const admin = (sim as unknown as { admin: { publish(event: string, data: unknown): void } }).admin
    const big = 'x'.repeat(100_000)
    for (let i = 1; i <= 400; i++) admin.publish('principal-presence', { principal: big, i })
    const reader = await readEvents(sim, '/admin/events?after=0', {}, 401)
    expect(reader.frames[0]!.data).toMatchObject({ after: 0, lastSeq: 400, replayed: 400, missed: 0 })
    expect(reader.frames.slice(1).map((f) => (f.data as { i: number }).i)).toEqual(Array.from({ length: 400 }, (_, k) => k + 1))
    const live = reader.next(1)
    admin.publish('agent-aborted', { i: 401 })
    expect((await live).map((f) => [f.id?.split('.')[1], f.event])).toEqual([['401', 'agent-aborted']])
  })

  it('an event sent again is the event sent live, though host code changed the record after (a listener of the simulator sees the same object)', async () => {
    const sim = await world().sim()
    const scribble = (crossing: { principal: string }) => void (crossing.principal = 'changed by a host listener')
    sim.on('presence', scribble)
    try {
      const live = await readEvents(sim, '/admin/events', {}, 0)
      const first = live.next(1)
      const link = world().link(sim)
      await link.connect()
      const [sent] = await first
      expect(sim.presence[0]!.principal).toBe('changed by a host listener')
      const again = await readEvents(sim, '/admin/events?after=0', {}, 2)
      expect(again.frames[1]).toEqual(sent)
      expect((sent!.data as { principal: string }).principal).toBe('agent-1')
    } finally {
      sim.off('presence', scribble)
    }
  })

  for (const historyLimit of [Number.POSITIVE_INFINITY, 50]) {
    it(`an /admin/events reader that stops reading holds at most 1 MiB unsent; read again, it gets every event in order, once, from the kept ones (historyLimit ${historyLimit}: ${historyLimit === 50 ? 'those no longer kept behind a missed event' : 'all of them'})`, async () => {
      const sim = await world().sim({ historyLimit })
      const admin = (sim as unknown as { admin: { publish(event: string, data: unknown): void; streams: Set<{ res: { writableLength: number } }> } }).admin
      const reader = await readEvents(sim, '/admin/events', {}, 0)
      reader.pause() // it reads nothing more
      // What the simulator publishes to its streams (a presence crossing per principal), 100 KB
      // each: 40 MB in all, far more than the kernel's socket buffers hold.
      const big = 'x'.repeat(100_000)
      let most = 0
      for (let i = 1; i <= 400; i++) {
        admin.publish('principal-presence', { principal: big, i })
        for (const stream of admin.streams) most = Math.max(most, stream.res.writableLength)
      }
      expect(admin.streams.size).toBe(1)
      expect(most).toBeLessThanOrEqual(MAX_STREAM_BUFFER_BYTES + 200_000)
      reader.resume()
      const rest = await reader.next(historyLimit === 50 ? 0 : 400, (frames) => frames.some((f) => (f.data as { i?: number }).i === 400))
      const got = rest.filter((f) => f.event === 'principal-presence').map((f) => (f.data as { i: number }).i)
      // In order, once each, ids matching.
      expect(got).toEqual([...got].sort((a, b) => a - b))
      expect(new Set(got).size).toBe(got.length)
      expect(rest.filter((f) => f.event === 'principal-presence').every((f) => f.id!.endsWith(`.${(f.data as { i: number }).i}`))).toBe(true)
      const missed = rest.filter((f) => f.event === 'missed')
      if (historyLimit === 50) {
        // The events no longer kept are said once, between those written before the pause and the 50 kept.
        expect(missed).toHaveLength(1)
        const { after, missed: count } = missed[0]!.data as { after: number; missed: number }
        expect(got.slice(-50)).toEqual(Array.from({ length: 50 }, (_, k) => 351 + k))
        expect(got.length + count).toBe(400)
        expect(got).toContain(after)
        expect(got).not.toContain(after + 1)
      } else {
        expect(missed).toEqual([])
        expect(got).toEqual(Array.from({ length: 400 }, (_, k) => k + 1))
      }
    })
  }

  it('GET /admin/connections lists who is attached; GET /admin/events streams presence and aborts, with keep-alive comments', async () => {
    const sim = await world().sim({ eventStreamKeepAliveMs: 20 })
    const events: Array<{ event: string; data: { kind?: string; outcome?: string } }> = []
    let raw = ''
    let streamHeaders!: import('node:http').IncomingHttpHeaders
    let stream!: import('node:http').IncomingMessage
    const seen = (check: () => boolean) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`events so far: ${JSON.stringify(events)}`)), 4000)
        const look = () => {
          if (check()) {
            clearTimeout(timer)
            stream.off('data', look)
            resolve()
          }
        }
        stream.on('data', look)
        look()
      })
    await new Promise<void>((resolve) =>
      get({ host: '127.0.0.1', port: sim.port, path: '/admin/events' }, (res) => {
        stream = res
        streamHeaders = res.headers
        let buffer = ''
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => {
          raw += chunk
          buffer += chunk
          const frames = buffer.split('\n\n')
          buffer = frames.pop()!
          for (const frame of frames) {
            const event = /^event: (.*)$/m.exec(frame)?.[1]
            const data = /^data: (.*)$/m.exec(frame)?.[1]
            if (event && data) events.push({ event, data: JSON.parse(data) })
          }
        })
        resolve()
      }),
    )
    // Comments an event-stream client skips: the opening line, then one every keep-alive interval.
    await seen(() => raw.includes(': keep-alive\n\n'))
    expect(raw.startsWith(': phoenix-link simulator events (principal-presence, agent-aborted)\n\n')).toBe(true)
    expect(streamHeaders).toMatchObject({ 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    const link = world().link(sim)
    await link.connect()
    const listed = JSON.parse((await fetchText(sim, '/admin/connections')).body) as { connections: Array<{ principal: string; state: string; since: string; channels: string[] }> }
    expect(listed.connections).toHaveLength(1)
    expect(listed.connections[0]).toMatchObject({ principal: 'agent-1', state: 'open', channels: ['agent_control:agent-1'] })
    expect(Number.isNaN(Date.parse(listed.connections[0]!.since))).toBe(false)
    sim.runs.startRun('agent-1', 'r')
    await seen(() => events.some((e) => e.event === 'principal-presence' && e.data.kind === 'first-connected'))
    await link.disconnect()
    await seen(() => events.some((e) => e.event === 'agent-aborted' && e.data.outcome === 'aborted'))
    expect(events.map((e) => e.event)).toEqual(['principal-presence', 'principal-presence', 'agent-aborted'])
    expect(JSON.parse((await fetchText(sim, '/admin/connections')).body)).toEqual({ connections: [] })
    expect((await fetchText(sim, '/nope')).status).toBe(404)
    stream.destroy()
  })
  it('GET /admin/events resumes: ?after= and Last-Event-ID send the kept events after it first, behind a replay event; an id of another run replays all; past historyLimit the lost ones are counted; a bad one is a 400', async () => {
    const sim = await world().sim({ historyLimit: 3 })
    const link = world().link(sim)
    // Every event the feed publishes: a crossing, or an abort report (a last-disconnected is
    // followed by one, "nothing to abort" here).
    let published = 0
    const count = () => published++
    sim.on('presence', count)
    sim.on('agent-aborted', count)
    try {
      // Six events before any reader: connected, disconnected, its report; twice.
      for (let i = 0; i < 2; i++) {
        await link.connect()
        await link.disconnect()
      }
      await sim.waitFor(() => published === 6)
      const first = await readEvents(sim, '/admin/events?after=0', {}, 4)
      // historyLimit 3 keeps the last three: the first three are counted as missed, not replayed.
      expect(first.frames[0]).toEqual({ id: null, event: 'replay', data: { run: expect.stringMatching(/^[0-9a-f]{8}$/), after: 0, lastSeq: 6, replayed: 3, missed: 3 } })
      expect(first.frames.slice(1).map((f) => [f.id?.split('.')[1], f.event, (f.data as { kind?: string; outcome?: string }).kind ?? (f.data as { outcome: string }).outcome])).toEqual([
        ['4', 'principal-presence', 'first-connected'],
        ['5', 'principal-presence', 'last-disconnected'],
        ['6', 'agent-aborted', 'nothing-to-abort'],
      ])
      const run = first.frames[1]!.id!.split('.')[0]!
      // The replay event names the run of every id, so a reader resuming with ?after= can tell a simulator started again.
      expect((first.frames[0]!.data as { run: string }).run).toBe(run)
      // A reconnecting EventSource sends the id of the last event it got: only later ones come
      // again, and its header wins over the URL's `after` (the page's first).
      await link.connect()
      await sim.waitFor(() => published === 7)
      const resumed = await readEvents(sim, '/admin/events?after=0', { 'last-event-id': `${run}.5` }, 3)
      expect(resumed.frames.map((f) => [f.id, f.event])).toEqual([
        [null, 'replay'],
        [`${run}.6`, 'agent-aborted'],
        [`${run}.7`, 'principal-presence'],
      ])
      expect(resumed.frames[0]!.data).toEqual({ run, after: 5, lastSeq: 7, replayed: 2, missed: 0 })
      // Then live events, once each: the replay and the live feed meet with nothing lost or doubled.
      const live = resumed.next(2)
      await link.disconnect()
      expect((await live).map((f) => [f.id, f.event])).toEqual([
        [`${run}.8`, 'principal-presence'],
        [`${run}.9`, 'agent-aborted'],
      ])
      // An id of another run (a simulator started again on the port): every event kept, from the start.
      const other = await readEvents(sim, '/admin/events', { 'last-event-id': 'ffffffff.5' }, 4)
      expect(other.frames[0]!.data).toEqual({ run, after: 0, lastSeq: 9, replayed: 3, missed: 6 })
      expect(other.frames.slice(1).map((f) => f.id)).toEqual([`${run}.7`, `${run}.8`, `${run}.9`])
      // `after` takes an id as sent too (the run told apart, as the header's), or its seq alone.
      expect((await readEvents(sim, `/admin/events?after=${run}.8`, {}, 2)).frames.map((f) => f.id)).toEqual([null, `${run}.9`])
      expect((await readEvents(sim, '/admin/events?after=ffffffff.8', {}, 1)).frames[0]!.data).toMatchObject({ after: 0, replayed: 3 })
      expect((await readEvents(sim, '/admin/events?after=8', {}, 2)).frames.map((f) => f.id)).toEqual([null, `${run}.9`])
      // Caught up: an empty replay. Past the last seq (a seq of an earlier run): from 0, every event kept.
      expect((await readEvents(sim, '/admin/events?after=9', {}, 1)).frames).toEqual([{ id: null, event: 'replay', data: { run, after: 9, lastSeq: 9, replayed: 0, missed: 0 } }])
      expect((await readEvents(sim, '/admin/events?after=99', {}, 4)).frames[0]!.data).toEqual({ run, after: 0, lastSeq: 9, replayed: 3, missed: 6 })
      for (const [path, headers, message] of [
        ['/admin/events?after=-1', {}, /after must be the id of the last event read \(<run>.<seq>\) or its seq/],
        ['/admin/events?after=1e3', {}, /after must be the id/],
        ['/admin/events?after=.5', {}, /after must be the id/],
        ['/admin/events?after=9007199254740992', {}, /a whole number from 0 to 2\^53 - 1/],
        ['/admin/events?after=x', { 'last-event-id': `${run}.5` }, /after must be the id/],
        ['/admin/events?after=1&after=2', {}, /given 2 times/],
        ['/admin/events?since=1', {}, /unknown query parameter "since"; this route reads after/],
        ['/admin/events', { 'last-event-id': '7' }, /Last-Event-ID must be an id this feed sent/],
        ['/admin/events', { 'last-event-id': `${run}.x` }, /Last-Event-ID must be an id this feed sent/],
        ['/admin/events', { 'last-event-id': '.5' }, /Last-Event-ID must be an id this feed sent/],
      ] as const) {
        const answer = await fetchText(sim, path, headers)
        expect([path, answer.status]).toEqual([path, 400])
        expect(JSON.parse(answer.body).error).toEqual({ code: 'bad_request', message: expect.stringMatching(message) })
      }
    } finally {
      sim.off('presence', count)
      sim.off('agent-aborted', count)
    }
  })
})

/** The event streams readEvents() opened: each test's end closes them. */
const openStreams = new Set<import('node:http').IncomingMessage>()
afterEach(() => {
  for (const res of openStreams) res.destroy()
  openStreams.clear()
})

/** An event of `GET /admin/events` as read: its id (null without one), name and data (parsed JSON). */
interface ReadEvent {
  id: string | null
  event: string
  data: unknown
}

/**
 * Opens `GET path` with `headers` and resolves once `count` events have come (rejects after 4 s,
 * saying what came): `frames` those events; `next(n)` resolves with the next `n` (`next(0, done)`:
 * with those that come until `done` holds of them); `pause()` stops reading, `resume()` reads on.
 * The test's end closes it (before anything can fail, it is in {@link openStreams}).
 */
async function readEvents(sim: PlatformSimulator, path: string, headers: Record<string, string>, count: number) {
  const frames: ReadEvent[] = []
  let buffer = ''
  const waiting = new Set<() => void>()
  const res = await new Promise<import('node:http').IncomingMessage>((resolve, reject) => get({ host: '127.0.0.1', port: sim.port, path, headers }, resolve).on('error', reject))
  openStreams.add(res)
  expect(res.statusCode).toBe(200)
  res.setEncoding('utf8')
  res.on('data', (chunk: string) => {
    buffer += chunk
    const parts = buffer.split('\n\n')
    buffer = parts.pop()!
    for (const part of parts) {
      const event = /^event: (.*)$/m.exec(part)?.[1]
      if (event === undefined) continue // a comment
      frames.push({ id: /^id: (.*)$/m.exec(part)?.[1] ?? null, event, data: JSON.parse(/^data: (.*)$/m.exec(part)![1]!) })
    }
    for (const look of [...waiting]) look()
  })
  let from = 0
  // The next `n` events (or, with `done`, those that come until it holds of them), from the last read.
  const until = (n: number, done?: (frames: ReadEvent[]) => boolean) =>
    new Promise<ReadEvent[]>((resolve, reject) => {
      const timer = setTimeout(() => {
        waiting.delete(look)
        reject(new Error(`${n} more event(s) did not come on ${path}; read: ${JSON.stringify(frames).slice(-2000)}`))
      }, 10_000)
      const look = () => {
        const got = frames.slice(from)
        if (done ? !done(got) : got.length < n) return
        clearTimeout(timer)
        waiting.delete(look)
        from = done ? frames.length : from + n
        resolve(done ? got : got.slice(0, n))
      }
      waiting.add(look)
      look()
    })
  await until(count)
  return { frames: frames.slice(0, count), next: until, pause: () => res.pause(), resume: () => res.resume() }
}

describe('the link\'s metrics and run signals', () => {
  it('connected seconds are measured on the link\'s own monotonic clock (env.monotonic) when no clock is passed', async () => {
    const sim = await world().sim()
    let t = 1_000_000
    const link = world().link(sim, { env: { monotonic: () => t } })
    const registry = new Registry()
    const metrics = linkMetrics(link, { registry })
    await link.connect()
    t += 7_000
    expect(parseMetrics(await registry.metrics()).get('phoenix_link_link_connected_seconds_total{link="agent-1"}')).toBeCloseTo(7, 5)
    metrics.stop()
  })

  it('link_state one-hot, reconnects by reason, connected seconds', async () => {
    const sim = await world().sim()
    let t = 0
    const link = world().link(sim)
    const registry = new Registry()
    const metrics = linkMetrics(link, { registry, now: () => t })
    await link.connect()
    t += 1_500
    const back = next(link, 'reconnected')
    sim.close({ agent: 'agent-1' }, 1001)
    await back
    t += 500
    const text = await registry.metrics()
    const parsed = parseMetrics(text)
    expect(parsed.get('phoenix_link_link_state{link="agent-1",state="connected"}')).toBe(1)
    expect(parsed.get('phoenix_link_link_state{link="agent-1",state="stopped"}')).toBe(0)
    expect(parsed.get('phoenix_link_link_reconnects_total{link="agent-1",reason="closed"}')).toBe(1)
    expect(parsed.get('phoenix_link_link_connected_seconds_total{link="agent-1"}')).toBeCloseTo(2, 5)
    metrics.stop()
    // After stop the connected time no longer grows, though the link stays connected.
    t += 5_000
    expect(parseMetrics(await registry.metrics()).get('phoenix_link_link_connected_seconds_total{link="agent-1"}')).toBeCloseTo(2, 5)
    expect(() => linkMetrics(link, { prefix: '9bad' })).toThrow(/prefix/)
  })

  it('a registry cleared (a test teardown) exports the links followed after the clear; stop({ forget: true }) removes a link\'s series', async () => {
    const sim = await world().sim()
    const registry = new Registry()
    const a = world().link(sim)
    linkMetrics(a, { registry }).stop()
    registry.clear()
    const b = world().link(sim, { agentId: 'agent-2', apiKey: 'key-2' })
    const mb = linkMetrics(b, { registry })
    await b.connect()
    const back = next(b, 'reconnected')
    sim.close({ agent: 'agent-2' }, 1011)
    await back
    let parsed = parseMetrics(await registry.metrics())
    expect(parsed.get('phoenix_link_link_state{link="agent-2",state="connected"}')).toBe(1)
    expect(parsed.get('phoenix_link_link_reconnects_total{link="agent-2",reason="closed"}')).toBe(1)
    expect(parsed.has('phoenix_link_link_connected_seconds_total{link="agent-2"}')).toBe(true)
    mb.stop({ forget: true })
    parsed = parseMetrics(await registry.metrics())
    expect([...parsed.keys()].filter((key) => key.includes('agent-2'))).toEqual([])
    // Followed again, it starts from nothing.
    const again = linkMetrics(b, { registry })
    parsed = parseMetrics(await registry.metrics())
    expect(parsed.get('phoenix_link_link_state{link="agent-2",state="connected"}')).toBe(1)
    expect(parsed.has('phoenix_link_link_reconnects_total{link="agent-2",reason="closed"}')).toBe(false)
    // Stopped (kept) and followed once more, it continues; the older handle owns nothing of the new follow.
    again.stop()
    const third = linkMetrics(b, { registry })
    again.stop({ forget: true })
    const lostAgain = next(b, 'reconnected')
    sim.close({ agent: 'agent-2' }, 1011)
    await lostAgain
    parsed = parseMetrics(await registry.metrics())
    expect(parsed.get('phoenix_link_link_reconnects_total{link="agent-2",reason="closed"}')).toBe(1)
    expect(parsed.get('phoenix_link_link_state{link="agent-2",state="connected"}')).toBe(1)
    third.stop({ forget: true })
    expect([...parseMetrics(await registry.metrics()).keys()].filter((key) => key.includes('agent-2'))).toEqual([])
  })

  it('following links again after each registry.clear() leaves no listener behind on the link: the links followed before the clear stop listening', async () => {
    const sim = await world().sim()
    const registry = new Registry()
    const link = world().link(sim)
    const listeners = () => (link as unknown as { emitter: { listenerCount(): number } }).emitter.listenerCount()
    const before = listeners()
    for (let i = 0; i < 50; i++) {
      linkMetrics(link, { registry })
      registry.clear()
    }
    const last = linkMetrics(link, { registry })
    // The last follow's two listeners (state, losses); the 50 cleared ones are gone.
    expect(listeners() - before).toBe(2)
    await link.connect()
    expect(parseMetrics(await registry.metrics()).get('phoenix_link_link_state{link="agent-1",state="connected"}')).toBe(1)
    last.stop()
    expect(listeners()).toBe(before)
  })

  it('linkMetrics refuses an unknown option and a label holding half a character (two such labels would export as one series)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    expect(() => linkMetrics(link, { lable: 'mine' } as never)).toThrow(new RangeError('unknown linkMetrics option "lable"; known: registry, prefix, now, label'))
    expect(() => linkMetrics(link, { label: 'x\uD800' })).toThrow(/^linkMetrics label cannot be exported: it holds a lone UTF-16 surrogate/)
  })

  it("a simulator's metrics come back, with their counts, at its /metrics after a registry.clear(), and a simulator started after the clear shares them", async () => {
    const registry = new Registry()
    const sim = await world().sim({ metrics: { registry }, agents: 'any' })
    const open = (s: PlatformSimulator, agent: string) => world().link(s, { agentId: agent, apiKey: 'k' }).connect()
    await open(sim, 'a')
    registry.clear()
    await open(sim, 'b')
    const scrape = async (s: PlatformSimulator) => parseMetrics(await (await fetch(`http://127.0.0.1:${s.port}/metrics`)).text())
    expect((await scrape(sim)).get('phoenix_link_active_connections')).toBe(2)
    registry.clear()
    const second = await world().sim({ metrics: { registry }, agents: 'any' })
    await open(second, 'c')
    expect((await scrape(second)).get('phoenix_link_active_connections')).toBe(3)
    expect((await scrape(sim)).get('phoenix_link_active_connections')).toBe(3)
    // Once no simulator on it runs, a clear is a fresh start (a test's teardown): nothing carries over.
    await Promise.all([sim.stop(), second.stop()])
    expect((await registry.getSingleMetricAsString('phoenix_link_principal_disconnects_total'))).toMatch(/ 3$/m)
    registry.clear()
    const third = await world().sim({ metrics: { registry }, agents: 'any' })
    const after = await scrape(third)
    expect([after.get('phoenix_link_active_connections'), [...after.keys()].filter((k) => k.startsWith('phoenix_link_principal_disconnects_total'))]).toEqual([0, []])
  })

  it('several links share one registry, each under its own link label; a label in use is refused', async () => {
    const sim = await world().sim()
    const registry = new Registry()
    const a = world().link(sim)
    const b = world().link(sim, { agentId: 'agent-2', apiKey: 'key-2' })
    const ma = linkMetrics(a, { registry })
    const mb = linkMetrics(b, { registry })
    expect(() => linkMetrics(a, { registry })).toThrow(/already followed/)
    await a.connect()
    const parsed = parseMetrics(await registry.metrics())
    expect(parsed.get('phoenix_link_link_state{link="agent-1",state="connected"}')).toBe(1)
    expect(parsed.get('phoenix_link_link_state{link="agent-2",state="idle"}')).toBe(1)
    ma.stop()
    const again = linkMetrics(a, { registry })
    expect(parseMetrics(await registry.metrics()).get('phoenix_link_link_state{link="agent-1",state="connected"}')).toBe(1)
    again.stop()
    mb.stop()
  })

  it('link.runSignal() aborts when disconnect() stops the session (graceful), so no later session can abort it with its own reason', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    const reports: string[] = []
    link.runs.onAborted((report) => reports.push(`${report.runId}:${report.reason?.kind}`))
    // A session with no run in flight ends with no abort report.
    await link.connect()
    await link.disconnect()
    expect(reports).toEqual([])
    await link.connect()
    const signal = link.runSignal('work-1')
    await link.disconnect()
    await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve())))
    expect(signal.reason).toMatchObject({ kind: 'graceful' })
    expect(link.runs.inFlight('agent-1')).toEqual([])
    // The next session: its supersede aborts only its own run, and the id is free again.
    await link.connect()
    const second = link.runSignal('work-1')
    const ended = untilState(link, 'terminated')
    sim.supersede('agent-1')
    await ended
    await new Promise<void>((resolve) => (second.aborted ? resolve() : second.addEventListener('abort', () => resolve())))
    expect(reports).toEqual(['work-1:graceful', 'work-1:superseded'])
  })

  it("disconnect() resolves once the abort hooks of the runs its stop aborted have settled: a hook that never settles is reported failed at runs.hookTimeoutMs, and no timer is left", async () => {
    const sim = await world().sim()
    // Longer than a stop takes here (about 150 ms), so the hook is still pending when the socket has closed.
    const link = world().link(sim, { runs: { hookTimeoutMs: 1000 } })
    const seen: string[] = []
    link.runs.onAborted((report) => seen.push(`${report.runId}:${report.outcome}:${report.error}`))
    await link.connect()
    let released = false
    const signal = link.runSignal('hangs', { onAbort: () => new Promise<void>(() => {}) })
    link.runSignal('settles', { onAbort: () => Promise.resolve().then(() => void (released = true)) })
    await link.disconnect()
    expect(signal.aborted).toBe(true)
    expect(released).toBe(true)
    expect(seen.sort()).toEqual(['hangs:failed:the abort hook did not settle within 1000 ms', 'settles:aborted:null'])
  })

  it('disconnect() of a link a supersede ended waits for the abort round that ending started', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { runs: { hookTimeoutMs: 1000 } })
    const seen: string[] = []
    link.runs.onAborted((report) => seen.push(`${report.runId}:${report.outcome}:${report.reason?.kind}`))
    await link.connect()
    link.runSignal('hangs', { onAbort: () => new Promise<void>(() => {}) })
    const ended = untilState(link, 'terminated')
    sim.supersede('agent-1')
    await ended
    expect(seen).toEqual([])
    await link.disconnect()
    expect(seen).toEqual(['hangs:failed:superseded'])
  })

  it('disconnect() waits for every abort round still pending: an earlier session\'s round, when a later session\'s round settled first', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { runs: { hookTimeoutMs: 1500 } })
    const seen: string[] = []
    let shortReported!: () => void
    const short = new Promise<void>((resolve) => (shortReported = resolve))
    link.runs.onAborted((report) => {
      seen.push(`${report.runId}:${report.outcome}`)
      if (report.runId === 'short') shortReported()
    })
    await link.connect()
    link.runSignal('long', { onAbort: () => new Promise<void>(() => {}) })
    let ended = untilState(link, 'terminated')
    sim.supersede('agent-1')
    await ended
    await link.connect()
    let release!: () => void
    const hookCalled = new Promise<void>((called) =>
      link.runSignal('short', {
        onAbort: () =>
          new Promise<void>((resolve) => {
            release = resolve
            called()
          }),
      }),
    )
    ended = untilState(link, 'terminated')
    sim.supersede('agent-1')
    await ended
    // The later round settles while the earlier one still waits for its hook (bounded at 1500 ms).
    await hookCalled
    release()
    await short
    expect(seen).toEqual(['short:aborted'])
    await link.disconnect()
    expect(seen).toEqual(['short:aborted', 'long:failed'])
  })

  it('an onAbort hook that calls disconnect() itself is not waited for by that call: no cycle, the hook settles and is reported aborted, after a supersede and during a stop', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { runs: { hookTimeoutMs: 2000 } })
    const seen: string[] = []
    link.runs.onAborted((report) => seen.push(`${report.runId}:${report.outcome}:${report.reason?.kind}`))
    await link.connect()
    // A hook that awaits disconnect() inside it: the session ended for good, so it tears the link down.
    link.runSignal('tears-down', { onAbort: async () => void (await link.disconnect()) })
    const ended = untilState(link, 'terminated')
    sim.supersede('agent-1')
    await ended
    const started = performance.now()
    await link.disconnect()
    expect(seen).toEqual(['tears-down:aborted:superseded'])
    // Well within the hook's bound: the hook's own disconnect() did not wait for the hook.
    expect(performance.now() - started).toBeLessThan(1000)
    await link.connect()
    link.runSignal('stops-too', { onAbort: () => link.disconnect() })
    const stopStarted = performance.now()
    await link.disconnect()
    expect(seen).toEqual(['tears-down:aborted:superseded', 'stops-too:aborted:graceful'])
    expect(performance.now() - stopStarted).toBeLessThan(1000)
  })

  it('createLink() refuses a runs.hookTimeoutMs that is not a whole number of milliseconds in [0, 2^31-1]', async () => {
    const sim = await world().sim()
    for (const bad of [-1, 1.5, 2 ** 31, Number.NaN, '40']) {
      expect(() => world().link(sim, { runs: { hookTimeoutMs: bad as number } })).toThrow(/^runs\.hookTimeoutMs: .*whole number of milliseconds/)
    }
    expect(() => world().link(sim, { runs: { hookTimeout: 40 } as never })).toThrow(/unknown option "hookTimeout"|runs/)
  })

  it('link.runSignal() aborts when the session ends for good, not on a reconnect', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const signal = link.runSignal('work-1')
    // Made-up ids skip one the host chose: run-1 is in flight, so the next made-up id is run-2.
    link.runSignal('run-1')
    const made = link.runSignal()
    expect(link.runs.inFlight('agent-1')).toEqual(['work-1', 'run-1', 'run-2'])
    expect(() => link.runSignal('run-1')).toThrow(/already in flight/)
    // A run whose id the link chose ends by its signal; a signal of no run of this link ends nothing.
    link.endRun(made)
    link.endRun(new AbortController().signal)
    link.endRun(made)
    expect(link.runs.inFlight('agent-1')).toEqual(['work-1', 'run-1'])
    const back = next(link, 'reconnected')
    sim.close({ agent: 'agent-1' }, 1000)
    await back
    expect(signal.aborted).toBe(false)
    const ended = untilState(link, 'terminated')
    sim.supersede('agent-1')
    await ended
    await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve())))
    expect(signal.reason).toMatchObject({ kind: 'superseded' })
    expect(link.runSignal().aborted).toBe(true)
  })
})
