/**
 * link.ping(): check the open socket now (a network change the link cannot see, such as the
 * browser's `online` event over a half-open socket), on the real wire against the simulator.
 * Each asserts what the host gets and what the server saw (heartbeats read, upgrades).
 */
import { afterEach, describe, expect, it, vi } from 'vitest'
import { Socket } from 'phoenix'
import { ConfigurationError, DEFAULT_PING_TIMEOUT_MS, type PingResult } from '../../src/index.js'
import { framesIn, next, untilState, useWorld } from '../support/wire.js'
import type { Link } from '../../src/link.js'
import type { PlatformSimulator, SimConnection } from '../../src/node/server/index.js'

const world = useWorld()

/** A simulator and a link to it, connected, with the simulator's socket of that link. */
async function connected(options: Parameters<ReturnType<typeof world>['link']>[1] = {}): Promise<{ sim: PlatformSimulator; link: Link; conn: SimConnection }> {
  const sim = await world().sim()
  const link = world().link(sim, options)
  await link.connect()
  return { sim, link, conn: sim.live('agent-1')[0]! }
}

describe('ping() of a live socket', () => {
  it('sends one heartbeat now (not at the 30 s interval) and resolves alive with its round trip; the link stays on the same socket', async () => {
    const { sim, link, conn } = await connected()
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

  it('each ping sends a heartbeat of its own, with its own bound, and each is answered', async () => {
    const { link, conn } = await connected()
    const results = await Promise.all([link.ping(), link.ping({ timeoutMs: 2_000 }), link.ping(null)])
    expect(results.map((r) => r.outcome)).toEqual(['alive', 'alive', 'alive'])
    expect(conn!.heartbeats).toBe(3)
    expect(world().captured.get(link)!.events.filter((e) => e.type === 'ignored')).toEqual([])
  })

  it("an answered ping is forgotten: the server's second reply to its heartbeat answers nothing and is reported as ignored", async () => {
    const { link, conn } = await connected()
    expect(await link.ping()).toMatchObject({ outcome: 'alive' })
    const heartbeats = framesIn(conn, 'heartbeat', 'phoenix')
    expect(heartbeats).toHaveLength(1)
    const ref = (heartbeats[0] as unknown as { ref: string }).ref
    const ignored = next(link, 'ignored')
    conn.sendRaw(JSON.stringify([null, ref, 'phoenix', 'phx_reply', { status: 'ok', response: {} }]))
    expect((await ignored).detail).toBe(`"phx_reply" on the heartbeat topic with ref "${ref}", which answers no pending heartbeat`)
    expect(link.state).toBe('connected')
    // A second ping is answered by its own heartbeat, not by anything of the first.
    expect(await link.ping()).toMatchObject({ outcome: 'alive', generation: 1 })
  })

  it('called from inside the charts\' processing (a chart subscriber) as a close is read: it decides on the state after it, not the socket just lost', async () => {
    const { sim, link } = await connected({ policy: { reconnect: { initialDelayMs: 60_000, maxDelayMs: 60_000 } } })
    let pinged: Promise<PingResult> | null = null
    let armed = false
    const subscription = link.actor.subscribe(() => {
      if (armed && pinged === null) pinged = link.ping()
    })
    try {
      armed = true
      const waiting = untilState(link, 'reconnecting')
      sim.close({ agent: 'agent-1' }, 1000, 'bye')
      await waiting
      expect(pinged).not.toBeNull()
      expect(await pinged).toEqual({ outcome: 'not-connected', state: 'reconnecting' })
    } finally {
      subscription.unsubscribe()
    }
  })

  it('answers while the control channel rejoins after a crash (state joining): the socket is open', async () => {
    // A rejoin delay long enough that the ping runs while the control channel waits to rejoin.
    const { sim, link } = await connected({ policy: { channel: { rejoinInitialDelayMs: 2_000, rejoinMaxDelayMs: 2_000 } } })
    const joining = untilState(link, 'joining')
    sim.channelError({ agent: 'agent-1' }, 'agent_control:agent-1')
    await joining
    expect(await link.ping()).toMatchObject({ outcome: 'alive', generation: 1 })
    expect(sim.upgradeCounts('agent-1').upgrades).toBe(1)
  })
})

describe("ping() beside phoenix.js's own heartbeat", () => {
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

  it("a reply to phoenix.js's pending heartbeat, still in flight when the ping is made, does not answer it: only the ping's own heartbeat does", async () => {
    const { sim, link, conn } = await connected({ policy: { transport: { heartbeatIntervalMs: 300 } } })
    // Just after the server writes its reply to phoenix.js's regular heartbeat (before the link
    // reads it), it stops reading and answering, and the host pings.
    let pinged!: Promise<PingResult>
    const made = new Promise<void>((resolve) => {
      const send = conn.send.bind(conn)
      conn.send = (frame) => {
        send(frame)
        if (frame.topic !== 'phoenix') return
        conn.send = send
        sim.stall(conn)
        pinged = link.ping({ timeoutMs: 200 })
        resolve()
      }
    })
    await made
    expect(await pinged).toMatchObject({ outcome: 'lost', disconnected: 'reconnect', reason: { kind: 'timed-out', phase: 'heartbeat' } })
    // The late reply answered phoenix.js's heartbeat, as ever: nothing reported stray.
    expect(world().captured.get(link)!.events.filter((e) => e.type === 'ignored')).toEqual([])
  })

  it("phoenix.js's heartbeat cycle runs on beside a ping: its regular heartbeat goes out on time, and its bound ends a stalled socket before the ping's", async () => {
    const heartbeats = spyHeartbeats()
    const { sim, link } = await connected({ policy: { transport: { heartbeatIntervalMs: 500 } } })
    sim.stall({ agent: 'agent-1' })
    // Made before the regular heartbeat is due (500 ms after the open).
    const ping = link.ping({ timeoutMs: 60_000 })
    expect(heartbeats.calls()).toBe(0)
    await heartbeats.sent(1)
    const result = await ping
    expect(result).toMatchObject({ outcome: 'lost', reason: { kind: 'timed-out', phase: 'heartbeat' } })
    expect(heartbeats.calls()).toBe(1)
  })

  it("unanswered, the pending heartbeat's own bound still ends the socket (a ping never extends it)", async () => {
    const heartbeats = spyHeartbeats()
    const { sim, link } = await connected({ policy: { transport: { heartbeatIntervalMs: 500 } } })
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
    const { sim, link, conn: stale } = await connected()
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
    const { sim, link } = await connected()
    sim.stall({ agent: 'agent-1' })
    const ping = link.ping({ timeoutMs: 60_000 })
    await link.disconnect()
    expect(await ping).toMatchObject({ outcome: 'lost', disconnected: 'stopped', reason: { kind: 'graceful' } })
    expect(link.state).toBe('stopped')
  })

  it('a server close while a ping waits: the ping resolves lost with that close', async () => {
    const { sim, link } = await connected()
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
    const { link, conn } = await connected()
    for (const options of [{ timeoutMs: 0 }, { timeoutMs: 1.5 }, { timeoutMs: -1 }, { timeoutMs: 2 ** 31 }, { timeoutMs: '100' }, { timeout: 100 }, 5, 'fast']) {
      await expect(link.ping(options as never), JSON.stringify(options)).rejects.toBeInstanceOf(ConfigurationError)
    }
    await expect(link.ping({ timeout: 100 } as never)).rejects.toThrow(/unknown option "timeout"/)
    expect(conn!.heartbeats).toBe(0)
    expect(DEFAULT_PING_TIMEOUT_MS).toBe(5_000)
  })
})
