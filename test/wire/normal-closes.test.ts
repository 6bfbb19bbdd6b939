/**
 * SCENARIOS 1-8 on the real wire: a peer close of any non-refusal code, a drop, or a
 * client-started close reconnects and rejoins; only disconnect() stops.
 */
import { describe, expect, it } from 'vitest'
import { framesIn, next, untilState, useWorld } from '../support/wire.js'
import { chartsOf } from '../../src/chart-of.js'
import { DisconnectReason } from '../../src/reasons.js'

const world = useWorld()

describe('rule: a normal close reconnects (scenarios 1-4)', () => {
  for (const code of [1000, 1001, 1011, 4001]) {
    it(`close ${code} -> reconnect with backoff, control and app channels rejoined with fresh join_refs`, async () => {
      const sim = await world().sim()
      const link = world().link(sim)
      await link.connect()
      const room = link.channel('room:1')
      await next(link, 'channel', { filter: (e) => e.status === 'joined' })
      const first = sim.live('agent-1')[0]!
      const disconnected = next(link, 'disconnected')
      const reconnected = next(link, 'reconnected')
      const rejoined = next(link, 'channel', { filter: (e) => e.status === 'joined' })
      // The client's backoff starts when its close frame arrives, after this: the server's
      // closedAt can come later still (the closing handshake ends under load), so time from here.
      const closeSentAt = sim.now()
      sim.close({ agent: 'agent-1' }, code, 'server says bye')
      const d = await disconnected
      expect(d).toMatchObject({ terminal: false, reason: { kind: 'closed', closeCode: code, retryable: true } })
      // With backoff: the first delay is drawn below the first ceiling (FAST: 20 ms), raised to the
      // going-away range for 1001 (FAST: 0-30 ms), and the reconnect waited it out.
      expect(d.nextDelayMs).toBeGreaterThanOrEqual(0)
      expect(d.nextDelayMs).toBeLessThanOrEqual(code === 1001 ? 30 : 20)
      expect(d.attempt).toBe(1)
      await reconnected
      const reopenedAt = sim.accepted('agent-1')[1]!.openedAt
      // Records are whole milliseconds: 1 ms of rounding.
      expect(reopenedAt - closeSentAt).toBeGreaterThanOrEqual(d.nextDelayMs! - 1)
      await rejoined
      expect(link.state).toBe('connected')
      expect(room.status).toBe('joined')
      expect(sim.accepted('agent-1')).toHaveLength(2)
      const second = sim.live('agent-1')[0]!
      const oldRefs = framesIn(first, 'phx_join').map((f) => f.join_ref)
      const newRefs = framesIn(second, 'phx_join').map((f) => f.join_ref)
      expect(framesIn(second, 'phx_join').map((f) => f.topic).sort()).toEqual(['agent_control:agent-1', 'room:1'])
      expect(newRefs.some((r) => oldRefs.includes(r))).toBe(false)
      expect(link.lastDisconnectReason).toMatchObject({ kind: 'closed', closeCode: code })
    })
  }

  it('close 1012 waits at least the service-restart floor; 1013 at least its floor', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    for (const [code, floor] of [
      [1012, 150],
      [1013, 250],
    ] as const) {
      const d = next(link, 'disconnected')
      const r = next(link, 'reconnected')
      sim.close({ agent: 'agent-1' }, code)
      expect((await d).nextDelayMs).toBeGreaterThanOrEqual(floor)
      const { downtimeMs } = await r
      expect(downtimeMs).toBeGreaterThanOrEqual(floor)
    }
    const upgrades = sim.upgrades.map((u) => u.at)
    expect(upgrades[1]! - sim.connections[0]!.closedAt!).toBeGreaterThanOrEqual(150 - 5)
  })

  it('an abrupt drop (no close frame) is dropped and reconnects (scenario 3)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const d = next(link, 'disconnected')
    const r = next(link, 'reconnected')
    sim.abort({ agent: 'agent-1' })
    expect((await d).reason).toMatchObject({ kind: 'dropped', source: 'socket' })
    await r
    expect(sim.accepted('agent-1')).toHaveLength(2)
  })

  it('the "disconnect" broadcast of each server flavor reconnects (1001 Phoenix, 1000 Cowboy, 1011 Bandit)', async () => {
    for (const flavor of ['phoenix', 'cowboy', 'bandit'] as const) {
      const sim = await world().sim({ flavor })
      const link = world().link(sim)
      await link.connect()
      const d = next(link, 'disconnected')
      const r = next(link, 'reconnected')
      sim.disconnect({ agent: 'agent-1' })
      expect((await d).reason).toMatchObject({ kind: 'closed', closeCode: sim.flavor.disconnect })
      await r
    }
  })

  it('a client-started close of the transport (not disconnect()) reconnects (scenario 4)', async () => {
    // An inbound frame over maxFrameBytes: the link's own socket closes itself with 1009.
    const sim = await world().sim()
    const link = world().link(sim, { policy: { transport: { maxFrameBytes: 1024 } } })
    await link.connect()
    const d = next(link, 'disconnected')
    const r = next(link, 'reconnected')
    sim.control('agent-1', { mode: 'interrupt', reason: 'x'.repeat(4096) })
    const { reason } = await d
    // Typed as the close the link sent: an alert on closeCode 1009 sees it.
    expect(reason).toMatchObject({ kind: 'closed', closeCode: 1009, closeName: 'message too big', retryable: true })
    expect(JSON.stringify(reason)).toMatch(/exceeded maxFrameBytes \(1024 bytes\).*1009/)
    await r
    expect(sim.accepted('agent-1')).toHaveLength(2)
    expect(sim.accepted('agent-1')[0]!.closeSeen?.code).toBe(1009)
  })
})

describe('host stop (scenario 5)', () => {
  it('disconnect(): leave the control channel, close 1000, stopped with graceful, one connection ever', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    await link.disconnect()
    expect(link.state).toBe('stopped')
    expect(link.lastDisconnectReason).toMatchObject({ kind: 'graceful' })
    const [conn] = sim.accepted('agent-1')
    expect(framesIn(conn!, 'phx_leave', 'agent_control:agent-1')).toHaveLength(1)
    await sim.waitFor(() => conn!.state === 'closed')
    expect(conn!.closeSeen).toEqual({ code: 1000, reason: 'client closing' })
    expect(sim.accepted('agent-1')).toHaveLength(1)
  })

  it("disconnect() counts the control channel left once its phx_leave is sent, as phoenix.js 1.8.16 does: stopped without the server's reply, and the server reads the leave, then the close 1000", async () => {
    const sim = await world().sim()
    // A leave timeout far longer than the test: a stop that waited for the reply would show.
    const link = world().link(sim, { policy: { connection: { leaveTimeoutMs: 60_000 } } })
    await link.connect()
    const conn = sim.live('agent-1')[0]!
    // The server stops reading: the leave's reply can never come.
    sim.stall(conn)
    const states: string[] = []
    link.on('state', ({ state }) => void states.push(state))
    await link.disconnect()
    // phoenix.js's channel.leave() answers its own leave push 'ok' at once (it sets the channel
    // `leaving` before checking canPush, which needs `joined`: channel.js leave; the fix in phoenix PR
    // #6792 was closed), so the chart's leave timeout is never what ends the stop.
    expect(states).toEqual(['stopping', 'stopped'])
    expect(link.lastDisconnectReason).toMatchObject({ kind: 'graceful' })
    // The server reads again: the phx_leave, then the client's close 1000, in that order.
    conn.resume()
    await sim.waitFor(() => conn.state === 'closed', { what: 'the stalled socket to close' })
    expect(framesIn(conn, 'phx_leave', 'agent_control:agent-1')).toHaveLength(1)
    expect(conn.closeSeen).toEqual({ code: 1000, reason: 'client closing' })
  })
})

describe('reconnect policy on the wire (scenarios 6-8)', () => {
  it('a server that accepts then closes at once: suspended after ten, then one attempt per cooldown, and back to connected once the server holds the socket (scenario 6)', async () => {
    const sim = await world().sim()
    let flapping = true
    sim.on('connection', (c) => flapping && c.close(1000))
    const link = world().link(sim, {
      policy: { reconnect: { rapidLimit: 10, initialDelayMs: 5, maxDelayMs: 10, suspendInitialDelayMs: 200, suspendMaxDelayMs: 400 } },
    })
    const log: string[] = []
    link.on('state', (e) => log.push(`state ${e.state}`))
    link.on('disconnected', (e) => log.push(`disconnected ${e.reason.kind}`))
    // What host code inside the processing reads (a chart subscriber): the state before the loss
    // until the decision is in, never reconnecting on the way to suspended.
    const readings: string[] = []
    const reading = link.actor.subscribe(() => readings.push(link.state))
    let ended: unknown = null
    void link.runForever().catch((e: unknown) => (ended = e))
    const first = await next(link, 'disconnected', { filter: (e) => e.reason.kind === 'suppressed' })
    expect(first).toMatchObject({ outcome: 'reconnect', terminal: false, reason: { kind: 'suppressed', cause: 'rapid-disconnects', attempts: 10, retryable: true } })
    // The tenth loss is reported as suppressed, its own close kept in the reason.
    expect(first.reason).toMatchObject({ generation: 10, lastLoss: { kind: 'closed', closeCode: 1000, generation: 10 } })
    expect(DisconnectReason.parse(first.reason)).toEqual(first.reason)
    expect(first.nextDelayMs).toBeGreaterThanOrEqual(100)
    expect(first.nextDelayMs).toBeLessThanOrEqual(200)
    expect(link.state).toBe('suspended')
    // The state changes once the reconnect decision is in, after the event that says why: each
    // loss is a disconnected event, then reconnecting (or suspended: never first reconnecting).
    expect(log.filter((entry) => entry.startsWith('disconnected'))).toHaveLength(10)
    log.forEach((entry, i) => {
      if (entry === 'state reconnecting' || entry === 'state suspended') expect(log[i - 1]).toMatch(/^disconnected /)
    })
    expect(log.slice(-3)).toEqual(['state joining', 'disconnected suppressed', 'state suspended'])
    reading.unsubscribe()
    const suspendedAt = readings.indexOf('suspended')
    expect(suspendedAt).toBeGreaterThan(0)
    expect(readings[suspendedAt - 1]).toBe('joining')
    expect(sim.accepted('agent-1')).toHaveLength(10)
    // One attempt per cooldown, each longer: the next two are suspended again.
    const second = await next(link, 'disconnected', { filter: (e) => e.reason.kind === 'suppressed' })
    expect(second.nextDelayMs).toBeGreaterThanOrEqual(200)
    expect(second.nextDelayMs).toBeLessThanOrEqual(400)
    const upgrades = sim.upgrades.map((u) => u.at)
    expect(upgrades).toHaveLength(11)
    expect(upgrades[10]! - upgrades[9]!).toBeGreaterThanOrEqual(first.nextDelayMs! - 5)
    // The server is fixed: the next attempt after the cooldown stays connected.
    flapping = false
    // The first time this session's control channel joins: `connected`, not `reconnected`.
    await next(link, 'connected', { timeoutMs: 2000 })
    expect(link.state).toBe('connected')
    expect(ended).toBeNull()
    expect(sim.live('agent-1')).toHaveLength(1)
  })

  it("with onRapidLimit 'give-up', ten rapid connections in a row end the session suppressed, and no attempt follows", async () => {
    const sim = await world().sim()
    sim.on('connection', (c) => c.close(1000))
    const link = world().link(sim, { policy: { reconnect: { rapidLimit: 10, initialDelayMs: 5, maxDelayMs: 10, onRapidLimit: 'give-up' } } })
    const log: string[] = []
    link.on('state', (e) => log.push(`state ${e.state}`))
    link.on('disconnected', (e) => log.push(`disconnected ${e.reason.kind}`))
    const result = link.runForever().catch((e: unknown) => e)
    const error = (await result) as { code: string; reason: { kind: string; cause: string } }
    expect(error.code).toBe('AGENT_DISCONNECTED')
    expect(error.reason).toMatchObject({ kind: 'suppressed', cause: 'rapid-disconnects', attempts: 10, retryable: false, lastLoss: { kind: 'closed', closeCode: 1000, generation: 10 } })
    expect(link.state).toBe('terminated')
    // Why, then where it led: the give-up goes from joining to terminated, not through reconnecting.
    if (log.at(-1) !== 'state terminated') await next(link, 'state', { filter: (e) => e.state === 'terminated' })
    expect(log.slice(-3)).toEqual(['state joining', 'disconnected suppressed', 'state terminated'])
    expect(sim.accepted('agent-1')).toHaveLength(10)
  })

  it('the attempt counter starts again after stableAfterMs connected', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { policy: { reconnect: { stableAfterMs: 200, rapidWindowMs: 100 } } })
    await link.connect()
    const attempts: Array<number | null> = []
    link.on('disconnected', (e) => attempts.push(e.attempt))
    for (let i = 0; i < 3; i++) {
      const r = next(link, 'reconnected')
      sim.close({ agent: 'agent-1' }, 1000)
      await r
    }
    expect(attempts).toEqual([1, 2, 3])
    // Stay connected past stableAfterMs: wait for the reconnect chart to reach its stable state.
    await new Promise<void>((resolve, reject) => {
      const reconnect = () => chartsOf(link).reconnect!
      const timer = setTimeout(() => reject(new Error('never stable')), 2000)
      const sub = reconnect().subscribe((s) => {
        if (JSON.stringify((s as { value?: unknown }).value).includes('"stable"')) {
          clearTimeout(timer)
          sub.unsubscribe()
          resolve()
        }
      })
    })
    const r = next(link, 'disconnected')
    sim.close({ agent: 'agent-1' }, 1000)
    expect((await r).attempt).toBe(1)
  })

  it('503 twice, then accepted: connected, the Retry-After respected', async () => {
    const sim = await world().sim()
    sim.refuseUpgrades({ status: 503, retryAfter: '1' }, { status: 503 })
    const link = world().link(sim)
    const delays: Array<number | null> = []
    link.on('disconnected', (e) => delays.push(e.nextDelayMs))
    await link.connect()
    expect(sim.upgrades.map((u) => u.status)).toEqual([503, 503, 101])
    expect(delays[0]).toBeGreaterThanOrEqual(1000)
    expect(sim.upgrades[1]!.at - sim.upgrades[0]!.at).toBeGreaterThanOrEqual(1000 - 5)
    expect(link.lastDisconnectReason).toMatchObject({ kind: 'rejected', cause: 'unavailable', status: 503 })
  })
})

describe('stalled peer (scenario 36)', () => {
  it('times out on the heartbeat within two intervals and reconnects', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { policy: { transport: { heartbeatIntervalMs: 100, closeTimeoutMs: 100 } } })
    await link.connect()
    const d = next(link, 'disconnected')
    const started = performance.now()
    sim.stall({ agent: 'agent-1' })
    const { reason } = await d
    const took = performance.now() - started
    expect(reason).toMatchObject({ kind: 'timed-out', phase: 'heartbeat' })
    expect(took).toBeLessThanOrEqual(2 * 100 + 100)
    await untilState(link, 'connected')
    expect(sim.accepted('agent-1')).toHaveLength(2)
  })
})
