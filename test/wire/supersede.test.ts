/**
 * SCENARIOS 9-16 on the real wire: a supersede ends the session for good, whatever close
 * follows, wherever it lands in the lifecycle.
 */
import { describe, expect, it, vi } from 'vitest'
import { AgentDisconnectedError } from '../../src/errors/agent-disconnected.js'
import { CONTROL_EVENT, SUPERSEDE_EVENT, controlTopic } from '../../src/protocol.js'
import { chartOf, waitForChart } from '../../src/chart-of.js'
import { rawUpgrade } from '../support/raw-http.js'
import type { PlatformSimulator, SimConnection } from '../../src/node/server/index.js'
import { framesIn, gatedControl, newerInstanceSupersedes, next, OWN_SUPERSEDE_IGNORED, settle, untilState, useWorld } from '../support/wire.js'

const world = useWorld()

/**
 * The supersede's close ended the lost socket's TCP connection as Phoenix does, without waiting
 * for a close of the client's that a stalled server would never read (connection.ts endAfterCloseFrame).
 */
async function endedBySupersede(sim: PlatformSimulator, socket: SimConnection): Promise<void> {
  await sim.waitFor(() => socket.state === 'closed', { what: 'the superseded socket ended' })
  expect(socket.closeSent).toEqual({ code: sim.flavor.supersede, reason: '' })
}

/** Upgrades the server holds until the connect timeout (600 ms), a probe's 409 past a short window (100 ms), 400 ms backoffs. */
const UNANSWERED_PROBE = {
  transport: { heartbeatIntervalMs: 100, closeTimeoutMs: 8_000 },
  connection: { connectTimeoutMs: 600, conflictRetryWindowMs: 100 },
  reconnect: { initialDelayMs: 400, maxDelayMs: 400 },
}

describe('rule: supersede is terminal', () => {
  for (const flavor of ['phoenix', 'cowboy', 'bandit'] as const) {
    it(`a supersede pushed and closed in one tick reaches an instance that is busy pushing (${flavor}): the server's end of the connection resets nothing it has not read yet, so the older ends superseded and the newer is never evicted`, async () => {
      const sim = await world().sim({ flavor })
      const older = world().link(sim)
      await older.connect()
      const room = older.channel('room:busy')
      await room.joined()
      // The older instance writes as fast as it can: its latest frames are always unread at the server.
      let pumping = true
      const pump = (async () => {
        while (pumping) {
          for (let i = 0; i < 20; i++) room.push('echo', { blob: 'x'.repeat(10_000) }, { timeoutMs: 2_000 }).catch(() => {})
          await new Promise((resolve) => setImmediate(resolve))
        }
      })()
      const newer = world().link(sim)
      try {
        const ended = next(older, 'disconnected')
        await newer.connect()
        expect((await ended).reason.kind).toBe('superseded')
      } finally {
        pumping = false
        await pump
      }
      expect(older.state).toBe('terminated')
      expect(newer.state).toBe('connected')
      expect(sim.upgrades.map((u) => u.status)).toEqual([101, 101])
    })
  }

  for (const code of [1000, 1001, 1011]) {
    it(`supersede push then close ${code} -> terminated, superseded with the payload fields, no new connection (scenario 9)`, async () => {
      const sim = await world().sim()
      const link = world().link(sim)
      await link.connect()
      const run = settle(link.runForever())
      sim.supersede('agent-1', {
        close: code,
        payload: { reason: 'session.already_connected', message: 'newer', retryable: false, retry_after: 30, target_socket_id: 'sock-1', correlation_id: 'corr-9' },
      })
      const result = await run
      expect(result.ok).toBe(false)
      const error = (result as { error: AgentDisconnectedError }).error
      expect(error).toBeInstanceOf(AgentDisconnectedError)
      expect(error.reason).toMatchObject({
        kind: 'superseded',
        cause: 'session.already_connected',
        message: 'newer',
        retryAfterMs: 30_000,
        targetSocketId: 'sock-1',
        correlationId: 'corr-9',
      })
      expect(link.state).toBe('terminated')
      // No timer is left that could reconnect: disconnect() settles everything, then the count holds.
      await link.disconnect()
      expect(sim.accepted('agent-1')).toHaveLength(1)
    })
  }

  it('supersede push with no close following: the link ends the transport itself (scenario 10)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const ended = next(link, 'disconnected')
    sim.supersede('agent-1', { close: null })
    expect((await ended).reason.kind).toBe('superseded')
    const [conn] = sim.accepted('agent-1')
    await sim.waitFor(() => conn!.state === 'closed', { what: 'the client to close the superseded socket' })
    expect(conn!.closeSent).toBeNull()
    expect(conn!.closeSeen?.code).toBe(1000)
    expect(sim.accepted('agent-1')).toHaveLength(1)
  })

  it('supersede in the same read just before the join reply: connect() rejects, never connected (scenario 11)', async () => {
    const sim = await world().sim()
    sim.onJoin(controlTopic('agent-1'), {
      reply: 'ok',
      before: (c) => c.send({ join_ref: null, ref: null, topic: controlTopic('agent-1'), event: SUPERSEDE_EVENT, payload: { reason: 'session.already_connected' } }),
    })
    const link = world().link(sim)
    const states: string[] = []
    link.on('state', (e) => states.push(e.state))
    const result = await settle(link.connect())
    expect(result.ok).toBe(false)
    expect((result as { error: AgentDisconnectedError }).error.reason.kind).toBe('superseded')
    expect(states).not.toContain('connected')
    expect(link.state).toBe('terminated')
  })

  it('supersede while a slow control handler runs: terminated at once; earlier signals delivered in order; later ones never (scenario 12)', async () => {
    const sim = await world().sim()
    const { onControl, delivered, release, lastDone: s3done } = gatedControl('s1', 's3')
    const link = world().link(sim, { onControl })
    await link.connect()
    const firstStarted = next(link, 'control')
    sim.control('agent-1', { mode: 'interrupt', correlation_id: 's1' })
    await firstStarted
    const terminated = untilState(link, 'terminated')
    const topic = controlTopic('agent-1')
    const conn = sim.live('agent-1')[0]!
    const joinRef = conn.channels.get(topic)!.joinRef
    for (const id of ['s2', 's3']) conn.send({ join_ref: joinRef, ref: null, topic, event: CONTROL_EVENT, payload: { mode: 'stop', scope: 'agent', agent_id: 'agent-1', correlation_id: id } })
    conn.send({ join_ref: joinRef, ref: null, topic, event: SUPERSEDE_EVENT, payload: { reason: 'session.already_connected' } })
    conn.send({ join_ref: joinRef, ref: null, topic, event: CONTROL_EVENT, payload: { mode: 'stop', scope: 'agent', agent_id: 'agent-1', correlation_id: 's4' } })
    conn.close(1000)
    await terminated
    // Terminated while the handler is still inside s1.
    expect(delivered).toEqual(['start s1'])
    release()
    await s3done
    await link.disconnect()
    expect(delivered).toEqual(['start s1', 'end s1', 'start s2', 'end s2', 'start s3', 'end s3'])
    expect(sim.accepted('agent-1')).toHaveLength(1)
  })

  it('a second link with the same key supersedes the first; the second stays (scenario 13)', async () => {
    const sim = await world().sim()
    const first = world().link(sim)
    await first.connect()
    const firstRun = settle(first.runForever())
    const second = world().link(sim)
    await second.connect()
    const r = await firstRun
    expect((r as { error: AgentDisconnectedError }).error.reason.kind).toBe('superseded')
    expect(second.state).toBe('connected')
    await first.disconnect()
    expect(sim.live('agent-1')).toHaveLength(1)
    expect(sim.accepted('agent-1')).toHaveLength(2)
  })

  it('with on_conflict=reject the second link fails rejected(conflict) by HTTP 409 and the first is untouched (scenario 13)', async () => {
    const sim = await world().sim({ rejectMode: 'json' })
    const first = world().link(sim)
    await first.connect()
    const second = world().link(sim, { onConflict: 'reject' })
    const r = await settle(second.connect())
    expect((r as { error: AgentDisconnectedError }).error.reason).toMatchObject({ kind: 'rejected', cause: 'conflict', status: 409, errorCode: 'connection_conflict' })
    expect(first.state).toBe('connected')
    expect(sim.live('agent-1')).toHaveLength(1)
    // The server's record says what each upgrade asked: the first nothing (the platform supersedes), the second reject.
    expect(sim.upgrades.map((u) => [u.status, u.onConflict])).toEqual([[101, null], [409, 'reject']])
  })

  it("a newer instance connects while the older link's control join is pending: Phoenix pushes no supersede there (only the close), so the older link's next attempts probe with on_conflict=reject, are refused 409 while the newer instance is live, and past conflictRetryWindowMs it ends superseded (cause unseen); the newer instance is never evicted", async () => {
    const sim = await world().sim()
    sim.onJoin(controlTopic('agent-1'), { reply: 'hold' }, 1)
    const older = world().link(sim, { policy: { connection: { conflictRetryWindowMs: 100 }, reconnect: { initialDelayMs: 50, maxDelayMs: 50 } } })
    const olderUp = settle(older.connect())
    await sim.waitFor(() => sim.heldJoins.length === 1, { what: "the older link's control join held" })
    const [gen1] = sim.accepted('agent-1')
    const newer = world().link(sim)
    await newer.connect()
    const r = await olderUp
    expect((r as { error: AgentDisconnectedError }).error.reason).toMatchObject({ kind: 'superseded', cause: 'unseen', retryable: false, generation: 1, correlationId: null })
    expect(older.state).toBe('terminated')
    // The server sent the older socket no supersede, only the close; every later upgrade of the
    // older link asked on_conflict=reject and was refused while the newer instance held the key.
    expect(gen1!.frames.filter((f) => f.dir === 'out' && f.frame?.event === SUPERSEDE_EVENT)).toEqual([])
    const [first, second, ...probes] = sim.upgrades
    expect([first!.status, first!.onConflict, second!.status, second!.onConflict]).toEqual([101, null, 101, null])
    expect(probes.length).toBeGreaterThan(0)
    expect(probes.map((u) => [u.status, u.onConflict])).toEqual(probes.map(() => [409, 'reject']))
    expect(newer.state).toBe('connected')
    expect(sim.live('agent-1')).toHaveLength(1)
    expect(sim.accepted('agent-1')).toHaveLength(2)
  })

  it('a control join that reaches the server between its supersede (no push: the channel was not joined) and its close joins and hears nothing: the close, within unseenSupersedeWindowMs of the join, is probed like one before it; refused 409 past the window, the link ends superseded (cause unseen); the newer instance stays', async () => {
    const sim = await world().sim()
    sim.onJoin(controlTopic('agent-1'), { reply: 'hold' }, 1)
    // Its backoff (about 300 ms) outlasts the conflict window (100 ms): its first probe's 409 decides.
    const older = world().link(sim, { policy: { connection: { conflictRetryWindowMs: 100 }, reconnect: { initialDelayMs: 300, maxDelayMs: 300 } }, env: { random: () => 0.99 } })
    const olderUp = older.connect()
    await sim.waitFor(() => sim.heldJoins.length === 1, { what: "the older link's control join held" })
    const [gen1] = sim.accepted('agent-1')
    // Phoenix's order, by hand: the supersede (nothing to push it on), the join answered, the close;
    // the newer instance, whose connect/3 superseded, is accepted meanwhile.
    expect(sim.supersede('agent-1', { close: null })).toBe(1)
    expect(sim.answerHeldJoin(controlTopic('agent-1'), { reply: 'ok' })).toBe(true)
    await olderUp
    const ended = next(older, 'disconnected', { filter: (e) => e.terminal })
    expect(sim.close({ agent: 'agent-1' }, 1011)).toBe(1)
    const newer = world().link(sim)
    await newer.connect()
    expect((await ended).reason).toMatchObject({ kind: 'superseded', cause: 'unseen', generation: 1 })
    expect(gen1!.frames.filter((f) => f.dir === 'out' && f.frame?.event === SUPERSEDE_EVENT)).toEqual([])
    expect(sim.upgrades.slice(2).map((u) => [u.status, u.onConflict])).toEqual(sim.upgrades.slice(2).map(() => [409, 'reject']))
    expect(newer.state).toBe('connected')
    expect(sim.live('agent-1')).toHaveLength(1)
  })

  it("a host that stops and connects again while a supersede's cause is unknown (a watchdog's disconnect() then connect() in the backoff) evicts nobody: the new session's upgrade probes with on_conflict=reject too, is refused 409 past conflictRetryWindowMs, and the link ends superseded (cause unseen); the newer instance stays", async () => {
    const sim = await world().sim()
    sim.onJoin(controlTopic('agent-1'), { reply: 'hold' }, 1)
    // The monotonic clock the link decides by is the test's: the restart comes past the conflict window.
    let now = 1_000
    const older = world().link(sim, { policy: { connection: { conflictRetryWindowMs: 100 }, reconnect: { initialDelayMs: 60_000, maxDelayMs: 60_000 } }, env: { monotonic: () => now } })
    const olderUp = settle(older.connect())
    await sim.waitFor(() => sim.heldJoins.length === 1, { what: "the older link's control join held" })
    const lost = next(older, 'disconnected')
    const newer = world().link(sim)
    await newer.connect()
    // The server closed the older socket before its control join (no supersede push): a doubt, and a long backoff.
    expect((await lost).reason).toMatchObject({ kind: 'closed', generation: 1 })
    expect(older.state).toBe('reconnecting')
    await older.disconnect()
    expect(await olderUp).toMatchObject({ ok: false, error: expect.objectContaining({ reason: expect.objectContaining({ kind: 'graceful' }) }) })
    now += 1_000
    const again = settle(older.connect())
    const r = await again
    expect((r as { error: AgentDisconnectedError }).error.reason).toMatchObject({ kind: 'superseded', cause: 'unseen', retryable: false, generation: 1 })
    expect(older.state).toBe('terminated')
    // The restarted session's only upgrade asked on_conflict=reject and was refused: the newer socket is the only one live.
    expect(sim.upgrades.map((u) => [u.status, u.onConflict])).toEqual([[101, null], [101, null], [409, 'reject']])
    expect(newer.state).toBe('connected')
    expect(sim.live('agent-1')).toHaveLength(1)
    expect(sim.accepted('agent-1')).toHaveLength(2)
  })

  it("a newer instance supersedes the older link's just-lost socket (a stalled server never read its close) right after the host's disconnect(): read while stopped, its cause is unknown, so the host's connect() probes with on_conflict=reject, is refused 409 past conflictRetryWindowMs and ends superseded; the newer instance stays", async () => {
    const sim = await world().sim()
    let now = 1_000
    const policy = { transport: { heartbeatIntervalMs: 100, closeTimeoutMs: 8_000 }, connection: { conflictRetryWindowMs: 100 }, reconnect: { initialDelayMs: 60_000, maxDelayMs: 60_000 } }
    const older = world().link(sim, { policy, env: { monotonic: () => now } })
    await older.connect()
    const [gen1] = sim.accepted('agent-1')
    const lost = next(older, 'disconnected')
    sim.stall(gen1!)
    expect((await lost).reason).toMatchObject({ kind: 'timed-out', phase: 'heartbeat' })
    // A watchdog restarts the link: disconnect() waits for the old socket's close, which the stalled server never reads.
    const stopping = older.disconnect()
    expect(older.state).toBe('stopped')
    const newer = world().link(sim)
    await newer.connect()
    expect(gen1!.frames.filter((f) => f.dir === 'out' && f.frame?.event === SUPERSEDE_EVENT)).toHaveLength(1)
    await waitForChart(chartOf(older), (s) => s.context.ambiguousSupersede !== null, 2_000)
    expect(older.state).toBe('stopped')
    await endedBySupersede(sim, gen1!)
    await stopping
    now += 1_000
    const r = await settle(older.connect())
    expect((r as { error: AgentDisconnectedError }).error.reason).toMatchObject({ kind: 'superseded', generation: 1, retryable: false })
    expect(sim.upgrades.map((u) => [u.status, u.onConflict])).toEqual([[101, null], [101, null], [409, 'reject']])
    expect(newer.state).toBe('connected')
    expect(sim.live('agent-1')).toHaveLength(1)
  })

  it('a socket closed while its control join is pending, with no other instance: the next attempt probes, is accepted, and the link connects; the doubt is reported as ignored', async () => {
    const sim = await world().sim()
    sim.onJoin(controlTopic('agent-1'), { reply: 'hold' }, 1)
    const link = world().link(sim, { policy: { reconnect: { initialDelayMs: 50, maxDelayMs: 50 } } })
    const up = link.connect()
    await sim.waitFor(() => sim.heldJoins.length === 1, { what: 'the control join held' })
    const ignored = next(link, 'ignored', { filter: (e) => e.event === 'socket.close' && e.detail.includes('may have hidden a supersede') })
    const lost = next(link, 'disconnected')
    expect(sim.close({ agent: 'agent-1' }, 1011)).toBe(1)
    // The decision is visible at the loss: the next upgrade is a conflict probe.
    expect(await lost).toMatchObject({ outcome: 'reconnect', conflictProbe: true, reason: { kind: 'closed', closeCode: 1011 } })
    await up
    expect((await ignored).detail).toContain('the server accepted a connection made with on_conflict=reject')
    expect(sim.upgrades.map((u) => [u.status, u.onConflict])).toEqual([[101, null], [101, 'reject']])
    expect(link.state).toBe('connected')
  })

  describe('a reset of the connection (what Phoenix\'s close is to a client that was sending) may have lost a supersede push, however long the control channel had been joined', () => {
    /** No unseen-supersede window (a close after the join is never probed for it); backoffs long enough for a newer instance to connect in between. */
    const RESET_POLICY = { connection: { unseenSupersedeWindowMs: 0, conflictRetryWindowMs: 150 }, reconnect: { initialDelayMs: 250, maxDelayMs: 250 } }

    it('a newer instance holds the key when the probes go out: refused 409 past the window, the older ends superseded (unseen); the newer is never evicted', async () => {
      const sim = await world().sim()
      const older = world().link(sim, { policy: RESET_POLICY })
      await older.connect()
      // The link sends (a channel's join), and the reset follows within transport.resetAfterSendMs.
      await older.channel('room:r').joined()
      const lost = next(older, 'disconnected')
      const ended = next(older, 'disconnected', { filter: (e) => e.terminal })
      expect(sim.abort({ agent: 'agent-1' }, { reset: true })).toBe(1)
      const loss = await lost
      expect(loss).toMatchObject({ outcome: 'reconnect', conflictProbe: true, reason: { kind: 'dropped', reset: true, source: 'socket' } })
      expect((loss.reason as { detail: string }).detail).toMatch(/^abnormal closure \(1006\): read ECONNRESET$/)
      // The newer instance connects during the older's backoff (its supersede push was the frame the reset lost).
      const newer = world().link(sim)
      await newer.connect()
      const end = await ended
      expect(end.reason).toMatchObject({ kind: 'superseded', cause: 'unseen', retryable: false })
      expect(end.reason.kind === 'superseded' && end.reason.message).toMatch(/^the socket's connection was reset \(dropped\)/)
      expect(older.state).toBe('terminated')
      expect(newer.state).toBe('connected')
      const probes = sim.upgrades.slice(2)
      expect(probes.length).toBeGreaterThan(0)
      expect(probes.map((u) => [u.status, u.onConflict])).toEqual(probes.map(() => [409, 'reject']))
      expect(sim.live('agent-1')).toHaveLength(1)
    })

    it('no other instance: the probe is accepted, the link connects, and the doubt is reported as ignored, naming the reset', async () => {
      const sim = await world().sim()
      const link = world().link(sim, { policy: RESET_POLICY })
      await link.connect()
      await link.channel('room:r').push('ping', {})
      const ignored = next(link, 'ignored', { filter: (e) => e.event === 'socket.close' })
      const back = next(link, 'reconnected')
      expect(sim.abort({ agent: 'agent-1' }, { reset: true })).toBe(1)
      await back
      expect((await ignored).detail).toMatch(/^a reset that may have lost a supersede push \(the connection of the socket of generation 1 was reset.*: the server accepted a connection made with on_conflict=reject/)
      expect(sim.upgrades.map((u) => [u.status, u.onConflict])).toEqual([[101, null], [101, 'reject']])
      expect(link.state).toBe('connected')
    })

    for (const [how, reset, policy] of [
      ['an abort without reset of a link that is not sending (a FIN: everything sent before it arrives)', false, RESET_POLICY],
      [
        'a reset of a link that sent nothing within transport.resetAfterSendMs (0 here: none counts; a NAT or proxy dropping an idle flow while the server still holds the socket)',
        true,
        { ...RESET_POLICY, transport: { resetAfterSendMs: 0 } },
      ],
    ] as const) {
      it(`${how} is a plain drop: the next upgrade asks nothing`, async () => {
        const sim = await world().sim()
        const link = world().link(sim, { policy })
        await link.connect()
        await link.channel('room:r').push('ping', {})
        const lost = next(link, 'disconnected')
        const back = next(link, 'reconnected')
        expect(sim.abort({ agent: 'agent-1' }, { reset })).toBe(1)
        const loss = await lost
        expect(loss).toMatchObject({ outcome: 'reconnect', conflictProbe: false, reason: { kind: 'dropped' } })
        expect(loss.reason).not.toHaveProperty('reset')
        // The reset's error is still named (ws reports none of its own: the link reads the connection's).
        if (reset) expect((loss.reason as { detail: string }).detail).toBe('abnormal closure (1006): read ECONNRESET')
        await back
        expect(sim.upgrades.map((u) => [u.status, u.onConflict])).toEqual([[101, null], [101, null]])
      })
    }

    it('a reset that arrives behind a frame the link has not read yet (Node reports an end of stream, not ECONNRESET) still counts: the next upgrade probes', async () => {
      const sim = await world().sim()
      const link = world().link(sim, { policy: RESET_POLICY })
      await link.connect()
      await link.channel('room:r').push('ping', {})
      const [socket] = sim.live('agent-1')
      const lost = next(link, 'disconnected')
      const back = next(link, 'reconnected')
      // A frame, then the reset, in one turn: the link's kernel holds the frame unread when the reset arrives.
      socket!.send({ join_ref: null, ref: null, topic: 'room:r', event: 'notice', payload: {} })
      expect(sim.abort({ agent: 'agent-1' }, { reset: true })).toBe(1)
      const loss = await lost
      expect(loss).toMatchObject({ outcome: 'reconnect', conflictProbe: true, reason: { kind: 'dropped', reset: true, source: 'socket' } })
      // Found by the pong the transport writes at the end of stream (a write to a reset connection fails).
      expect((loss.reason as { detail: string }).detail).toBe('abnormal closure (1006): write ECONNRESET')
      await back
      expect(sim.upgrades.map((u) => [u.status, u.onConflict])).toEqual([[101, null], [101, 'reject']])
    })

    it('a FIN, then a reset behind it (a server that ends, then closes with the link\'s last push unread), is a plain drop: the FIN came behind everything the server sent, and the link read it all', async () => {
      const sim = await world().sim()
      const link = world().link(sim, { policy: RESET_POLICY })
      await link.connect()
      const room = link.channel('room:r')
      await room.joined()
      const [socket] = sim.live('agent-1')
      const lost = next(link, 'disconnected')
      const back = next(link, 'reconnected')
      // The server stops reading, the link pushes (its bytes unread there), and the server ends its
      // side: a FIN, then, closed with those bytes unread, a reset (the link's kernel: EPIPE).
      sim.stall({ agent: 'agent-1' })
      room.push('late', {}).catch(() => {})
      const tcp = (socket as unknown as { ws: { _socket: import('node:net').Socket } }).ws._socket
      tcp.once('finish', () => tcp.destroy())
      tcp.end()
      const loss = await lost
      expect(loss).toMatchObject({ outcome: 'reconnect', conflictProbe: false, reason: { kind: 'dropped' } })
      expect(loss.reason).not.toHaveProperty('reset')
      await back
      expect(sim.upgrades.map((u) => [u.status, u.onConflict])).toEqual([[101, null], [101, null]])
    })

    it('a heartbeat is not a frame the link sent: a reset past transport.resetAfterSendMs since its last push, heartbeats sent since, is a plain drop', async () => {
      const sim = await world().sim()
      // The link's monotonic clock, stepped by the test (phoenix.js's heartbeat runs on real timers).
      let now = 0
      const link = world().link(sim, { policy: { ...RESET_POLICY, transport: { heartbeatIntervalMs: 250 } }, env: { monotonic: () => now } })
      await link.connect()
      await link.channel('room:r').push('ping', {})
      const [socket] = sim.live('agent-1')
      // Past the window (2 s) since the push; a heartbeat goes out after it and is answered.
      now = 10_000
      const seen = socket!.heartbeats
      await sim.waitFor(() => socket!.heartbeats > seen, { what: 'a heartbeat from the link' })
      const lost = next(link, 'disconnected')
      const back = next(link, 'reconnected')
      expect(sim.abort({ agent: 'agent-1' }, { reset: true })).toBe(1)
      const loss = await lost
      expect(loss).toMatchObject({ outcome: 'reconnect', conflictProbe: false, reason: { kind: 'dropped' } })
      expect(loss.reason).not.toHaveProperty('reset')
      // The reset reached the link (read, or written behind a heartbeat's reply it had not read): the window alone decided.
      expect((loss.reason as { detail: string }).detail).toMatch(/^abnormal closure \(1006\): (read|write) ECONNRESET$/)
      await back
      expect(sim.upgrades.map((u) => [u.status, u.onConflict])).toEqual([[101, null], [101, null]])
    })
  })

  it("the simulator's supersede cooldown: 429 with Retry-After for that agent until it runs out, then accepted; a cooldown that ran out is forgotten", async () => {
    const sim = await world().sim({ supersedeCooldownMs: 150, rejectMode: 'json' })
    const first = world().link(sim)
    await first.connect()
    const ended = next(first, 'disconnected', { filter: (e) => e.terminal })
    sim.supersede('agent-1')
    expect((await ended).reason).toMatchObject({ kind: 'superseded' })
    const refused = await rawUpgrade(sim.port, { vsn: '2.0.0', agent_id: 'agent-1', api_key: 'key-1' })
    expect(refused.statusLine).toBe('HTTP/1.1 429 Too Many Requests')
    expect(refused.headers).toContainEqual(['retry-after', '1'])
    const cooling = (sim as unknown as { cooldowns: Map<string, number> }).cooldowns
    expect([...cooling.keys()]).toEqual(['agent-1'])
    // A link of agent-1 now: refused 429 while the cooldown lasts, it waits the Retry-After (1 s) and is accepted.
    const again = world().link(sim)
    await again.connect()
    const statuses = sim.upgrades.filter((u) => u.agentId === 'agent-1').map((u) => u.status)
    expect(statuses.slice(0, 2)).toEqual([101, 429])
    expect(statuses.at(-1)).toBe(101)
    const other = world().link(sim, { agentId: 'agent-2', apiKey: 'key-2' })
    await other.connect()
    sim.supersede('agent-2')
    await untilState(other, 'terminated')
    expect([...cooling.keys()]).toEqual(['agent-2']) // agent-1's, run out (it was accepted), went when agent-2's was set
  })

  it('a supersede read during the backoff, on the socket the link just gave up (a stalled server that never read its close): terminated; the newer instance stays; no reconnect', async () => {
    const sim = await world().sim()
    // The heartbeat times out; the old socket, whose close the stalled server never reads, is still read while the link waits out a long backoff.
    const policy = { transport: { heartbeatIntervalMs: 100, closeTimeoutMs: 1_500 }, reconnect: { initialDelayMs: 5_000, maxDelayMs: 5_000 } }
    const first = world().link(sim, { policy, env: { random: () => 0.99 } })
    await first.connect()
    const lost = next(first, 'disconnected')
    sim.stall({ agent: 'agent-1' })
    expect((await lost).reason).toMatchObject({ kind: 'timed-out', phase: 'heartbeat' })
    expect(first.state).toBe('reconnecting')
    await newerInstanceSupersedes(world(), sim, first)
    expect(sim.accepted('agent-1')).toHaveLength(2)
  })

  it("a supersede read while the next socket's credentials are still coming (an async apiKey: no upgrade of ours out): terminated; the newer instance stays", async () => {
    const sim = await world().sim()
    let release: (key: string) => void = () => {}
    let asked = 0
    let second: () => void = () => {}
    const secondAsked = new Promise<void>((resolve) => (second = resolve))
    const apiKey = () => {
      if (++asked === 1) return 'key-1'
      second()
      return new Promise<string>((resolve) => (release = resolve))
    }
    const older = world().link(sim, { apiKey, policy: { transport: { heartbeatIntervalMs: 100, closeTimeoutMs: 1_500 } } })
    await older.connect()
    sim.stall({ agent: 'agent-1' })
    await secondAsked
    expect(older.state).toBe('connecting')
    await newerInstanceSupersedes(world(), sim, older)
    release('key-1')
    expect(sim.upgrades.map((u) => u.status)).toEqual([101, 101])
  })

  it('a supersede read after the next upgrade was refused with a 4xx (429): the socket given up holds the key again, so the link ends superseded; the newer instance stays', async () => {
    const sim = await world().sim()
    const older = world().link(sim, { policy: { transport: { heartbeatIntervalMs: 100, closeTimeoutMs: 1_500 } } })
    await older.connect()
    sim.refuseUpgrades({ status: 429, retryAfter: '5' })
    const refused = next(older, 'disconnected', { filter: (e) => e.reason.kind === 'rejected' })
    sim.stall({ agent: 'agent-1' })
    expect((await refused).reason).toMatchObject({ kind: 'rejected', status: 429, retryable: true })
    expect(older.state).toBe('reconnecting')
    await newerInstanceSupersedes(world(), sim, older)
    expect(sim.upgrades.map((u) => u.status)).toEqual([101, 429, 101])
  })

  it("a supersede read in the backoff after the next upgrade went unanswered (held by the server until the connect timeout) is ambiguous (the server may have accepted that upgrade): the next attempt probes with on_conflict=reject, is refused 409 past conflictRetryWindowMs, and the link ends superseded; the newer instance is never evicted", async () => {
    const sim = await world().sim()
    let rolls = 0
    // The first backoff short (the next upgrade goes out at once), the one after the timeout long.
    const older = world().link(sim, { policy: UNANSWERED_PROBE, env: { random: () => (rolls++ === 0 ? 0.001 : 0.99) } })
    await older.connect()
    const [gen1] = sim.accepted('agent-1')
    const release = sim.holdUpgrades()
    sim.stall({ agent: 'agent-1' })
    await sim.waitFor(() => sim.heldUpgrades === 1, { what: 'the next upgrade held' })
    expect((await next(older, 'disconnected', { filter: (e) => e.reason.generation === 2, timeoutMs: 3_000 })).reason).toMatchObject({ kind: 'timed-out', phase: 'connect' })
    await sim.waitFor(() => sim.heldUpgrades === 0, { what: 'the timed-out upgrade gone' })
    release()
    expect(older.state).toBe('reconnecting')
    await newerInstanceSupersedes(world(), sim, older)
    // The probe reached the server and was refused; no other upgrade of the older link was accepted.
    expect(sim.upgrades.map((u) => u.status)).toEqual([101, 101, 409])
    expect(sim.upgrades[2]!.outcome).toBe('an open connection holds this key')
    expect(sim.accepted('agent-1')).toHaveLength(2)
    await endedBySupersede(sim, gen1!)
  })

  /**
   * The older link's next upgrade is held by the server (sent, unanswered) when a newer instance
   * connects and the platform supersedes the older link's lost socket, which the older link still
   * reads (the stalled server never read its close). Its own held upgrade may have caused that
   * supersede, so the link holds it; the upgrade's outcome decides.
   */
  async function supersedeWhileUpgradeOut() {
    const sim = await world().sim()
    const policy = {
      transport: { heartbeatIntervalMs: 100, closeTimeoutMs: 8_000 },
      connection: { conflictRetryWindowMs: 100 },
      reconnect: { initialDelayMs: 50, maxDelayMs: 50 },
    }
    const older = world().link(sim, { policy })
    await older.connect()
    const [gen1] = sim.accepted('agent-1')
    const release = sim.holdUpgrades()
    sim.stall(gen1!)
    await sim.waitFor(() => sim.heldUpgradesOf('agent-1') === 1, { what: "the older link's next upgrade held" })
    expect(older.state).toBe('connecting')
    const newer = world().link(sim)
    const newerUp = newer.connect()
    await sim.waitFor(() => sim.heldUpgradesOf('agent-1') === 2, { what: "the newer instance's upgrade held" })
    expect(sim.answerHeldUpgrade(undefined, 'agent-1', 'newest')).toBe(true)
    await newerUp
    // The platform superseded the older link's lost socket; the older link read it and holds it.
    await waitForChart(chartOf(older), (s) => s.context.heldSupersede !== null, 5_000)
    expect(gen1!.frames.filter((f) => f.dir === 'out' && f.frame?.event === SUPERSEDE_EVENT)).toHaveLength(1)
    expect(older.state).toBe('connecting')
    expect(older.lastDisconnectReason).toMatchObject({ kind: 'timed-out', phase: 'heartbeat' })
    return { sim, older, newer, gen1: gen1!, release }
  }

  it('a supersede read on the lost socket while the next upgrade is out ends the link superseded once the server refuses that upgrade with a 4xx (429): it caused nothing; the newer instance stays', async () => {
    const { sim, older, newer, gen1, release } = await supersedeWhileUpgradeOut()
    const ended = next(older, 'disconnected', { filter: (e) => e.terminal })
    expect(sim.answerHeldUpgrade({ status: 429, retryAfter: '1' }, 'agent-1')).toBe(true)
    expect((await ended).reason).toMatchObject({ kind: 'superseded', generation: 1, retryable: false })
    expect(older.state).toBe('terminated')
    expect(newer.state).toBe('connected')
    release()
    await endedBySupersede(sim, gen1!)
    await sim.waitFor(() => sim.live('agent-1').length === 1, { what: "only the newer instance's socket live" })
    // No attempt of the older link after the refused one; the newer instance's socket is the only live one.
    expect(sim.upgrades.filter((u) => u.agentId === 'agent-1').map((u) => u.status)).toEqual([101, 101, 429])
    expect(newer.state).toBe('connected')
  })

  for (const answer of ['drop', 503] as const) {
    const how = answer === 'drop' ? 'ends with no answer (dropped: the server may have accepted it)' : "is refused 503 (the platform's tracking_failed comes after it superseded)"
    it(`a supersede read on the lost socket while the next upgrade is out, which then ${how}, is ambiguous: the next attempts probe with on_conflict=reject, are refused 409 while the newer instance is live, and past conflictRetryWindowMs the link ends superseded; the newer instance is never evicted`, async () => {
      const { sim, older, newer, gen1, release } = await supersedeWhileUpgradeOut()
      const ended = next(older, 'disconnected', { filter: (e) => e.terminal })
      const ignored = vi.fn()
      older.on('ignored', ignored)
      expect(sim.answerHeldUpgrade(answer === 'drop' ? 'drop' : { status: answer }, 'agent-1')).toBe(true)
      release()
      expect((await ended).reason).toMatchObject({ kind: 'superseded', generation: 1, retryable: false })
      expect(ignored).not.toHaveBeenCalledWith(expect.objectContaining({ event: 'control.supersede' }))
      expect(newer.state).toBe('connected')
      const upgrades = sim.upgrades.filter((u) => u.agentId === 'agent-1')
      const probes = upgrades.slice(answer === 'drop' ? 2 : 3)
      expect(upgrades.slice(0, 2).map((u) => u.status)).toEqual([101, 101])
      if (answer !== 'drop') expect(upgrades[2]).toMatchObject({ status: 503, onConflict: null })
      expect(probes.length).toBeGreaterThanOrEqual(1)
      expect(probes.every((u) => u.status === 409 && u.onConflict === 'reject')).toBe(true)
      expect(sim.unansweredUpgradesOf('agent-1')).toBe(answer === 'drop' ? 1 : 0)
      expect(sim.accepted('agent-1')).toHaveLength(2)
      await endedBySupersede(sim, gen1!)
      expect(newer.state).toBe('connected')
    })
  }

  it('a supersede read on the lost socket while the next upgrade is out changes nothing once the server accepts that upgrade (it may have caused it): reported as ignored, the link connects', async () => {
    const { sim, older, newer, gen1, release } = await supersedeWhileUpgradeOut()
    const ignored = next(older, 'ignored', { filter: (e) => e.event === 'control.supersede' })
    const newerEnded = next(newer, 'disconnected', { filter: (e) => e.terminal })
    expect(sim.answerHeldUpgrade(undefined, 'agent-1')).toBe(true)
    expect((await ignored).detail).toBe(
      'a supersede of the previous socket (generation 1), held while the next upgrade was out: the next upgrade was accepted, so it may be the platform superseding our own previous socket',
    )
    await untilState(older, 'connected')
    // The platform decides the race: the upgrade it accepted last superseded the newer instance.
    expect((await newerEnded).reason).toMatchObject({ kind: 'superseded' })
    release()
    await endedBySupersede(sim, gen1!)
    expect(older.state).toBe('connected')
  })

  it('two upgrades in a row unanswered until the connect timeout, then another instance supersedes the lost socket: still ambiguous (either upgrade may have caused it), so the link probes, is refused 409 and ends superseded; the newer instance is never evicted', async () => {
    const sim = await world().sim()
    let rolls = 0
    // Short backoffs before the two unanswered attempts, long ones after.
    const older = world().link(sim, { policy: UNANSWERED_PROBE, env: { random: () => (rolls++ < 2 ? 0.001 : 0.99) } })
    await older.connect()
    const [gen1] = sim.accepted('agent-1')
    const release = sim.holdUpgrades()
    sim.stall(gen1!)
    await next(older, 'disconnected', { filter: (e) => e.reason.generation === 3, timeoutMs: 5_000 })
    await sim.waitFor(() => sim.heldUpgrades === 0, { what: 'the timed-out upgrades gone' })
    release()
    expect(sim.unansweredUpgradesOf('agent-1')).toBe(2)
    expect(older.state).toBe('reconnecting')
    const newerKept = vi.fn()
    await newerInstanceSupersedes(world(), sim, older)
    const newer = sim.accepted('agent-1')[1]!
    newer.ws.on('close', newerKept)
    // The probe reached the server and was refused; no upgrade of the older link was accepted after its first.
    expect(sim.upgrades.filter((u) => u.agentId === 'agent-1').map((u) => u.status)).toEqual([101, 101, 409])
    expect(sim.accepted('agent-1')).toHaveLength(2)
    expect(newer.state).toBe('open')
    expect(newerKept).not.toHaveBeenCalled()
    await endedBySupersede(sim, gen1!)
  })

  it("with the host's onConflict 'reject' no supersede can be the link's own doing: one read after an unanswered upgrade ends the link at once; the newer instance stays", async () => {
    const sim = await world().sim()
    const policy = { transport: { heartbeatIntervalMs: 100, closeTimeoutMs: 8_000 }, connection: { connectTimeoutMs: 600 }, reconnect: { initialDelayMs: 5_000, maxDelayMs: 5_000 } }
    let rolls = 0
    const older = world().link(sim, { policy, onConflict: 'reject', env: { random: () => (rolls++ === 0 ? 0.001 : 0.99) } })
    await older.connect()
    const [gen1] = sim.accepted('agent-1')
    const release = sim.holdUpgrades()
    sim.stall(gen1!)
    await next(older, 'disconnected', { filter: (e) => e.reason.generation === 2, timeoutMs: 3_000 })
    await sim.waitFor(() => sim.heldUpgrades === 0, { what: 'the timed-out upgrade gone' })
    release()
    await newerInstanceSupersedes(world(), sim, older)
    expect(sim.upgrades.map((u) => u.status)).toEqual([101, 101])
    await endedBySupersede(sim, gen1!)
  })

  it("the platform superseding the link's own lost socket because its next one connected (a stalled server, the old socket still closing) changes nothing: reported as ignored, the link stays connected", async () => {
    const sim = await world().sim()
    const link = world().link(sim, { policy: { transport: { heartbeatIntervalMs: 100, closeTimeoutMs: 1_500 } } })
    await link.connect()
    const [old] = sim.accepted('agent-1')
    const ignored = next(link, 'ignored', { filter: (e) => e.event === 'control.supersede' })
    sim.stall(old!)
    expect((await ignored).detail).toMatch(OWN_SUPERSEDE_IGNORED)
    await untilState(link, 'connected')
    expect(link.lastDisconnectReason).toMatchObject({ kind: 'timed-out', phase: 'heartbeat' })
    // The server did supersede the old socket, on it, once the link's next one connected.
    expect(old!.frames.filter((f) => f.dir === 'out' && f.frame?.event === SUPERSEDE_EVENT)).toHaveLength(1)
    expect(sim.accepted('agent-1')).toHaveLength(2)
    expect(link.state).toBe('connected')
  })

  describe("a link that replaces one whose doubt was left undecided (a host that rebuilds its link after a terminal reason) gets the doubt through supersedeDoubt", () => {
    /** A link that lost its socket right after the control join (a close that may hide a supersede), then was refused 403: terminated, its doubt undecided. */
    async function endedInDoubt(sim: PlatformSimulator) {
      const older = world().link(sim, { policy: { reconnect: { initialDelayMs: 20, maxDelayMs: 20 } } })
      await older.connect()
      const lost = next(older, 'disconnected')
      const ended = untilState(older, 'terminated')
      sim.refuseUpgradesOf('agent-1', { status: 403 })
      expect(sim.close({ agent: 'agent-1' }, 1000)).toBe(1)
      expect(await lost).toMatchObject({ outcome: 'reconnect', conflictProbe: true })
      await ended
      expect(older.lastDisconnectReason).toMatchObject({ kind: 'rejected', status: 403 })
      const doubt = older.supersedeDoubt
      expect(doubt).toMatchObject({ reason: { kind: 'superseded', cause: 'unseen', generation: 1 } })
      expect(Number.isFinite(doubt!.sinceMs)).toBe(true)
      expect(sim.upgrades.map((u) => [u.status, u.onConflict])).toEqual([[101, null], [403, 'reject']])
      return doubt!
    }

    it('no other instance: its first upgrade asks on_conflict=reject, is accepted, and the doubt is dismissed (reported as ignored); a link not given it asks nothing', async () => {
      const sim = await world().sim()
      const doubt = await endedInDoubt(sim)
      const replacement = world().link(sim, { supersedeDoubt: doubt })
      expect(replacement.supersedeDoubt).toEqual(doubt)
      const ignored = next(replacement, 'ignored', { filter: (e) => e.event === 'socket.close' })
      await replacement.connect()
      expect((await ignored).detail).toMatch(/the server accepted a connection made with on_conflict=reject, so no other instance holds the key/)
      expect(replacement.supersedeDoubt).toBeNull()
      await replacement.disconnect()
      // The doubt is the host's to pass on: a link made without it knows nothing of it.
      const unaware = world().link(sim)
      await unaware.connect()
      expect(sim.upgrades.map((u) => [u.status, u.onConflict]).slice(2)).toEqual([[101, 'reject'], [101, null]])
    })

    it('another instance holds the key: the replacement is refused 409 past conflictRetryWindowMs and ends superseded (cause unseen); the instance holding the key is never evicted', async () => {
      const sim = await world().sim()
      const doubt = await endedInDoubt(sim)
      const holder = world().link(sim)
      await holder.connect()
      const replacement = world().link(sim, { supersedeDoubt: doubt, policy: { connection: { conflictRetryWindowMs: 0 } } })
      const r = await settle(replacement.connect())
      expect((r as { error: AgentDisconnectedError }).error.reason).toMatchObject({ kind: 'superseded', cause: 'unseen', generation: 1 })
      expect(replacement.state).toBe('terminated')
      expect(holder.state).toBe('connected')
      expect(sim.live('agent-1')).toHaveLength(1)
      expect(sim.upgrades.map((u) => [u.status, u.onConflict]).slice(2)).toEqual([[101, null], [409, 'reject']])
    })

    it("createLink() refuses a supersedeDoubt that is not one (another kind of reason, a time that is no number), another agent's, or one ahead of env.monotonic (another process's), naming the field", () => {
      const sim = { url: 'ws://127.0.0.1:1/socket' } as PlatformSimulator
      const reason = { kind: 'superseded', retryable: false, cause: 'unseen', message: null, retryAfterMs: null, targetSocketId: null, correlationId: null, raw: {}, generation: 1, at: 0 } as const
      const doubt = { agentId: 'agent-1', reason, sinceMs: 0, socketLostMs: null }
      const make = (supersedeDoubt: unknown, monotonic = 1_000) => () => world().link(sim, { supersedeDoubt: supersedeDoubt as never, env: { monotonic: () => monotonic } })
      expect(make({ ...doubt, reason: { kind: 'nope' } })).toThrow(/supersedeDoubt\.reason/)
      // A doubt is about a supersede: a retryable close would end the link "terminated" with a reason that says it reconnects.
      expect(make({ ...doubt, reason: { kind: 'closed', retryable: true, closeCode: 1000, closeName: 'normal closure', closeReason: '', generation: 1, at: 0 } })).toThrow(/supersedeDoubt\.reason/)
      expect(make({ ...doubt, sinceMs: Number.NaN })).toThrow(/supersedeDoubt\.sinceMs: must be a finite number of milliseconds on env\.monotonic/)
      expect(make({ ...doubt, socketLostMs: '5' })).toThrow(/supersedeDoubt\.socketLostMs/)
      expect(make({ ...doubt, agentId: 'agent-2' })).toThrow('supersedeDoubt is about agent "agent-2", not this link\'s "agent-1"')
      expect(make({ ...doubt, sinceMs: 5_000 })).toThrow(/supersedeDoubt\.sinceMs \(5000\) is ahead of env\.monotonic \(1000\): a doubt from another process or clock/)
      expect(make({ ...doubt, socketLostMs: 1_001 })).toThrow(/supersedeDoubt\.socketLostMs \(1001\) is ahead of env\.monotonic/)
      expect(make(doubt)).not.toThrow()
    })

    it('the link keeps the doubt it was given as the check read it: a getter read again or a change the host makes later does not reach it; the doubt it gives is a frozen copy', () => {
      const sim = { url: 'ws://127.0.0.1:1/socket' } as PlatformSimulator
      const reason = { kind: 'superseded' as const, retryable: false as const, cause: 'unseen', message: null, retryAfterMs: null, targetSocketId: null, correlationId: null, raw: { n: 1 }, generation: 1, at: 0 }
      let reads = 0
      const given = {
        agentId: 'agent-1',
        reason,
        get sinceMs() {
          return reads++ === 0 ? 0 : ('soon' as unknown as number)
        },
        socketLostMs: null,
      }
      const link = world().link(sim, { supersedeDoubt: given, env: { monotonic: () => 1_000 } })
      reason.cause = 'changed later'
      reason.raw.n = 2
      const kept = link.supersedeDoubt!
      expect(kept).toEqual({ agentId: 'agent-1', reason: { ...reason, cause: 'unseen', raw: { n: 1 } }, sinceMs: 0, socketLostMs: null })
      expect(Object.isFrozen(kept) && Object.isFrozen(kept.reason) && Object.isFrozen(kept.reason.raw)).toBe(true)
      // A copy each time: the chart's own reason is not the host's to reach.
      expect(link.supersedeDoubt!.reason).not.toBe(kept.reason)
    })
  })

  it("a supersede with an app channel joined: disconnected, then terminated, then the channel's detached; its status reads detached throughout", async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await room.joined()
    const seen: string[] = []
    link.on('disconnected', (e) => void seen.push(`disconnected ${e.outcome} (room ${room.status})`))
    link.on('state', (e) => void seen.push(`${e.state} (room ${room.status})`))
    const detached = next(link, 'channel', { filter: (e) => e.status === 'detached' })
    sim.supersede('agent-1')
    const { topic, reason } = await detached
    seen.push(`channel ${topic} detached`)
    expect(reason).toBeNull()
    expect(seen).toEqual(['disconnected terminated (room detached)', 'terminated (room detached)', 'channel room:1 detached'])
  })

  it('after superseded, disconnect() succeeds, sends no leave, logs no warning (scenario 14)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const ended = untilState(link, 'terminated')
    sim.supersede('agent-1')
    await ended
    const lines = world().captured.get(link)!.lines
    const before = lines.length
    await link.disconnect()
    await link.disconnect()
    expect(link.state).toBe('terminated')
    expect(link.lastDisconnectReason?.kind).toBe('superseded')
    expect(lines.slice(before).filter((l) => l.level === 'warn' || l.level === 'error')).toEqual([])
    expect(framesIn(sim.accepted('agent-1')[0]!, 'phx_leave')).toEqual([])
  })

  it('after superseded, a late runForever() rejects at once with the same reason (scenario 15)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const ended = untilState(link, 'terminated')
    sim.supersede('agent-1')
    await ended
    const r = await settle(link.runForever())
    expect((r as { error: AgentDisconnectedError }).error.reason).toBe(link.lastDisconnectReason)
  })

  it('odd supersede payloads are still terminal, the odd fields kept raw (scenario 16)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const ended = next(link, 'disconnected')
    sim.supersede('agent-1', { payload: { reason: 'who.knows', retry_after: 'soon', correlation_id: null, extra: { nested: [1, 2] } } })
    const { reason } = await ended
    expect(reason).toMatchObject({ kind: 'superseded', cause: 'who.knows', retryAfterMs: null, correlationId: null, raw: { extra: { nested: [1, 2] }, retry_after: 'soon' } })
    expect(link.state).toBe('terminated')
  })
})
