/**
 * link.ping(): check the open socket now (a network change the link cannot see, such as the
 * browser's `online` event over a half-open socket), on the real wire against the simulator.
 * Each asserts what the host gets and what the server saw (heartbeats read, upgrades).
 */
import { afterEach, describe, expect, it, vi } from 'vitest'
import { Socket } from 'phoenix'
import { ConfigurationError, DEFAULT_PING_TIMEOUT_MS, type PingResult } from '../../src/index.js'
import { next, untilState, useWorld } from '../support/wire.js'

const world = useWorld()

describe('ping() of a live socket', () => {
  it('sends one heartbeat now (not at the 30 s interval) and resolves alive with its round trip; the link stays on the same socket', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const [conn] = sim.live('agent-1')
    expect(conn!.heartbeats).toBe(0)
    const started = performance.now()
    const result = await link.ping()
    const elapsed = performance.now() - started
    expect(result).toMatchObject({ outcome: 'alive', generation: 1 })
    const { rttMs } = result as Extract<PingResult, { outcome: 'alive' }>
    expect(rttMs).toBeGreaterThanOrEqual(0)
    expect(rttMs).toBeLessThanOrEqual(elapsed + 1)
    // The server read it before it answered.
    expect(conn!.heartbeats).toBe(1)
    expect(link.state).toBe('connected')
    expect(sim.live('agent-1')).toEqual([conn])
    expect(sim.upgradeCounts('agent-1')).toEqual({ upgrades: 1, refused: 0 })
  })

  it('pings made together share one heartbeat, and each is answered', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const [conn] = sim.live('agent-1')
    const results = await Promise.all([link.ping(), link.ping({ timeoutMs: 2_000 }), link.ping(null)])
    expect(results.map((r) => r.outcome)).toEqual(['alive', 'alive', 'alive'])
    expect(conn!.heartbeats).toBe(1)
    // The heartbeat cycle restarted from the ping: the next ping sends the next heartbeat.
    expect(await link.ping()).toMatchObject({ outcome: 'alive' })
    expect(conn!.heartbeats).toBe(2)
  })

  it('answers while the control channel rejoins after a crash (state joining): the socket is open', async () => {
    const sim = await world().sim()
    // A rejoin delay long enough that the ping runs while the control channel waits to rejoin.
    const link = world().link(sim, { policy: { channel: { rejoinInitialDelayMs: 2_000, rejoinMaxDelayMs: 2_000 } } })
    await link.connect()
    const joining = untilState(link, 'joining')
    sim.channelError({ agent: 'agent-1' }, 'agent_control:agent-1')
    await joining
    expect(await link.ping()).toMatchObject({ outcome: 'alive', generation: 1 })
    expect(sim.upgradeCounts('agent-1').upgrades).toBe(1)
  })
})

describe("ping() while phoenix.js's own heartbeat waits for its reply", () => {
  afterEach(() => void vi.restoreAllMocks())

  /** A spy on every heartbeat a socket sends (phoenix.js socket.js sendHeartbeat), resolving `sent(n)` at the n-th. */
  function spyHeartbeats(): { calls: () => number; sent: (n: number) => Promise<void> } {
    const original = Socket.prototype.sendHeartbeat
    let count = 0
    const waiting: Array<{ n: number; resolve: () => void }> = []
    vi.spyOn(Socket.prototype, 'sendHeartbeat').mockImplementation(function (this: Socket) {
      original.call(this)
      count++
      for (const w of waiting.filter((w) => w.n <= count)) w.resolve()
    })
    return {
      calls: () => count,
      sent: (n) => (count >= n ? Promise.resolve() : new Promise<void>((resolve) => waiting.push({ n, resolve }))),
    }
  }

  it('the pending heartbeat serves the ping (no second heartbeat); its reply, read late, answers it and is not reported as stray', async () => {
    const heartbeats = spyHeartbeats()
    const sim = await world().sim()
    const link = world().link(sim, { policy: { transport: { heartbeatIntervalMs: 500 } } })
    await link.connect()
    const [conn] = sim.live('agent-1')
    // The server stops reading; phoenix.js's regular heartbeat goes out and waits (its bound: 500 ms more).
    sim.stall(conn!)
    await heartbeats.sent(1)
    const ping = link.ping({ timeoutMs: 5_000 })
    expect(heartbeats.calls()).toBe(1)
    // The server reads again: it answers the pending heartbeat, which answers the ping.
    conn!.resume()
    expect(await ping).toMatchObject({ outcome: 'alive', generation: 1 })
    expect(heartbeats.calls()).toBe(1)
    expect(conn!.heartbeats).toBe(1)
    expect(link.state).toBe('connected')
    expect(world().captured.get(link)!.events.filter((e) => e.type === 'ignored')).toEqual([])
  })

  it("a ping's heartbeat restarts phoenix.js's cycle: the regular heartbeat due meanwhile does not replace it", async () => {
    const heartbeats = spyHeartbeats()
    const sim = await world().sim()
    const link = world().link(sim, { policy: { transport: { heartbeatIntervalMs: 500 } } })
    await link.connect()
    sim.stall({ agent: 'agent-1' })
    // Sent just after the connect, before the regular heartbeat (due 500 ms after the open); left
    // running, that one would replace the ping's as the pending heartbeat, before the ping's bound.
    const result = await link.ping({ timeoutMs: 60_000 })
    expect(result).toMatchObject({ outcome: 'lost', reason: { kind: 'timed-out', phase: 'heartbeat' } })
    expect(heartbeats.calls()).toBe(1)
  })

  it("unanswered, the pending heartbeat's own bound still ends the socket (a ping never extends it)", async () => {
    const heartbeats = spyHeartbeats()
    const sim = await world().sim()
    const link = world().link(sim, { policy: { transport: { heartbeatIntervalMs: 500 } } })
    await link.connect()
    sim.stall({ agent: 'agent-1' })
    await heartbeats.sent(1)
    const started = performance.now()
    const result = await link.ping({ timeoutMs: 60_000 })
    expect(result).toMatchObject({ outcome: 'lost', disconnected: 'reconnect', reason: { kind: 'timed-out', phase: 'heartbeat' } })
    // Within the heartbeat's interval of its sending, not the ping's 60 s.
    expect(performance.now() - started).toBeLessThan(2_000)
    expect(heartbeats.calls()).toBe(1)
  })
})

describe('ping() of a socket that no longer answers', () => {
  it('a stalled server: lost within the ping\'s timeout as timed-out(heartbeat), long before the heartbeat\'s own bound; the link reconnects on a new socket', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const [stale] = sim.live('agent-1')
    sim.stall({ agent: 'agent-1' })
    const lost = next(link, 'disconnected')
    const started = performance.now()
    const result = await link.ping({ timeoutMs: 200 })
    const elapsed = performance.now() - started
    expect(result).toMatchObject({ outcome: 'lost', disconnected: 'reconnect', generation: 1, reason: { kind: 'timed-out', phase: 'heartbeat', generation: 1 } })
    // The ping's bound, not the heartbeat's (30 s by default, two intervals to find a dead peer).
    expect(elapsed).toBeGreaterThanOrEqual(195)
    expect(elapsed).toBeLessThan(2_000)
    // The same loss the host's listeners read.
    expect((await lost).reason).toEqual((result as Extract<PingResult, { outcome: 'lost' }>).reason)
    await untilState(link, 'connected')
    expect(sim.upgradeCounts('agent-1').upgrades).toBe(2)
    expect(sim.live('agent-1').filter((c) => c !== stale)).toHaveLength(1)
  })

  it('disconnect() while a ping waits: the ping resolves lost with the stop, and nothing of it is left (its timer cleared)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    sim.stall({ agent: 'agent-1' })
    const ping = link.ping({ timeoutMs: 60_000 })
    await link.disconnect()
    expect(await ping).toMatchObject({ outcome: 'lost', disconnected: 'stopped', reason: { kind: 'graceful' } })
    expect(link.state).toBe('stopped')
  })

  it('a server close while a ping waits: the ping resolves lost with that close', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    // Held: the heartbeat is read but not answered until the close.
    sim.stall({ agent: 'agent-1' })
    const ping = link.ping({ timeoutMs: 60_000 })
    sim.close({ agent: 'agent-1' }, 1001, 'going away')
    // A stalled socket still closes when told to (the server's close frame goes out).
    expect(await ping).toMatchObject({ outcome: 'lost', disconnected: 'reconnect', reason: { kind: 'closed', closeCode: 1001 } })
  })
})

describe('ping() with no open socket', () => {
  it('not-connected, nothing sent: idle, waiting out a backoff (reconnect() is the call then), stopped, terminated', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { policy: { reconnect: { initialDelayMs: 60_000, maxDelayMs: 60_000 } } })
    expect(await link.ping()).toEqual({ outcome: 'not-connected', state: 'idle' })
    await link.connect()
    const [first] = sim.live('agent-1')
    const waiting = untilState(link, 'reconnecting')
    sim.close({ agent: 'agent-1' }, 1000, 'bye')
    await waiting
    expect(await link.ping()).toEqual({ outcome: 'not-connected', state: 'reconnecting' })
    expect(first!.heartbeats).toBe(0)
    expect(link.reconnect()).toBe(true)
    await untilState(link, 'connected')
    await link.disconnect()
    expect(await link.ping()).toEqual({ outcome: 'not-connected', state: 'stopped' })
    await link.connect()
    const ended = untilState(link, 'terminated')
    sim.supersede('agent-1')
    await ended
    expect(await link.ping()).toEqual({ outcome: 'not-connected', state: 'terminated' })
    expect(sim.accepted('agent-1').every((c) => c.heartbeats === 0)).toBe(true)
  })

  it('bad options reject ConfigurationError and send nothing', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const [conn] = sim.live('agent-1')
    for (const options of [{ timeoutMs: 0 }, { timeoutMs: 1.5 }, { timeoutMs: -1 }, { timeoutMs: 2 ** 31 }, { timeoutMs: '100' }, { timeout: 100 }, 5, 'fast']) {
      await expect(link.ping(options as never), JSON.stringify(options)).rejects.toBeInstanceOf(ConfigurationError)
    }
    await expect(link.ping({ timeout: 100 } as never)).rejects.toThrow(/unknown option "timeout"/)
    expect(conn!.heartbeats).toBe(0)
    expect(DEFAULT_PING_TIMEOUT_MS).toBe(5_000)
  })
})
