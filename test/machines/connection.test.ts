/**
 * The connection chart, pure: every DESIGN rule as transitions through `transition()`. Each test
 * fails when the guard or transition that encodes its rule is removed.
 */
import { describe, expect, it } from 'vitest'
import { createActor, initialTransition, SimulatedClock } from 'xstate'
import { connectionMachine, DEFAULT_CONNECTION_POLICY, type ConnectionEvent } from '../../machines/connection.js'
import { rejoinDelayMs } from '../../machines/channel.js'
import { linkStateOf } from '../../machines/status.js'
import { classifyClose, classifyControlChannelLoss, classifyUpgrade, DisconnectReason, heartbeatTimeout } from '../../src/reasons.js'
import { isResetUnseen, suppressedReason, unseenSupersedeReason } from '../../machines/types.js'
import {
  closeEvent,
  dropEvent,
  connected,
  env,
  origin,
  run,
  start,
  state,
  step,
  supersedeEvent,
  supersedeIgnored,
  PROBE_ACCEPTED,
  upgradeEvent,
  unseenSettled,
  upgradeOut,
  waiting,
  normalLoss,
  type ConnSnapshot,
} from '../support/chart.js'

describe('connection chart: the happy path', () => {
  it('goes idle -> connecting -> joining -> connected, one generation per transport', () => {
    let s = start()
    expect(state(s)).toBe('idle')
    s = run(s, { type: 'host.connect' })
    expect(state(s)).toBe('connecting')
    expect(s.context).toMatchObject({ epoch: 1, generation: 1 })
    s = run(s, { type: 'socket.open', ...origin(s) })
    expect(state(s)).toBe('joining')
    const r = step(s, { type: 'control.joinOk', ...origin(s) })
    expect(state(r.s)).toBe('connected')
    expect(r.emitted).toContainEqual(expect.objectContaining({ type: 'link.connected', generation: 1, reconnect: false }))
  })
})

describe('rule: a normal close reconnects', () => {
  for (const code of [1000, 1001, 1002, 1003, 1005, 1006, 1007, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 4000, 4001, 4499]) {
    it(`close ${code} while connected -> reconnecting, never stopped`, () => {
      const s = connected()
      const r = step(s, closeEvent(s, code))
      expect(state(r.s)).toBe('reconnecting')
      // The loss goes to the reconnect chart; the socket is ended.
      expect(r.io).toContainEqual({ type: 'tellReconnect', params: { type: 'reconnect.lost', reason: r.s.context.lastReason } })
      expect(r.io).toContainEqual({ type: 'endTransport', params: origin(s) })
      expect(r.s.context.lastReason?.retryable).toBe(true)
    })
  }

  it('reconnects with a new generation when the reconnect chart says due', () => {
    let s = waiting()
    expect(state(s)).toBe('reconnecting')
    s = run(s, { type: 'reconnect.due' })
    expect(state(s)).toBe('connecting')
    expect(s.context.generation).toBe(2)
    s = run(s, { type: 'socket.open', ...origin(s) })
    const r = step(s, { type: 'control.joinOk', ...origin(s) })
    expect(r.emitted).toContainEqual(expect.objectContaining({ type: 'link.connected', generation: 2, reconnect: true }))
  })

  it('reports the loss with the reconnect chart delay', () => {
    const s = run(connected(), closeEvent(connected(), 1001))
    const r = step(s, { type: 'reconnect.scheduled', delayMs: 321, attempt: 1 })
    expect(r.emitted).toContainEqual(
      expect.objectContaining({ type: 'link.disconnected', nextDelayMs: 321, reason: expect.objectContaining({ kind: 'closed', closeCode: 1001 }) }),
    )
  })
})

describe('rule: supersede is terminal', () => {
  const phases: Array<[string, () => ConnSnapshot]> = [
    ['connecting', () => run(start(), { type: 'host.connect' })],
    [
      'joining',
      () => {
        const s = run(start(), { type: 'host.connect' })
        return run(s, { type: 'socket.open', ...origin(s) })
      },
    ],
    ['connected', () => connected()],
    ['the backoff (deciding)', () => { const c = connected(); return run(c, closeEvent(c, 1000)) }],
    ['the backoff (waiting)', () => waiting()],
  ]
  for (const [phase, make] of phases) {
    it(`while ${phase}: terminated with the superseded reason; the transport is stopped`, () => {
      const s = make()
      const r = step(s, supersedeEvent(origin(s), { reason: 'session.already_connected', correlation_id: 'c-1' }))
      expect(state(r.s)).toBe('terminated')
      expect(r.s.context.lastReason).toMatchObject({ kind: 'superseded', correlationId: 'c-1', retryable: false })
      expect(r.emitted).toContainEqual(expect.objectContaining({ type: 'link.disconnected', nextDelayMs: null }))
      // Its reconnect chart stops; a transport still open is ended.
      expect(r.io.map((a) => a.type)).toContain('stopReconnect')
      if (phase === 'connecting' || phase === 'joining' || phase === 'connected') expect(r.io).toContainEqual({ type: 'endTransport', params: origin(s) })
      expect(r.io.map((a) => a.type)).not.toContain('openTransport')
    })
  }

  it('a supersede read during the backoff on the transport just lost (still closing) terminates: no newer socket of ours can have caused it', () => {
    const s = waiting()
    expect(s.context.generation).toBe(1)
    const r = step(s, supersedeEvent({ generation: 1, epoch: s.context.epoch }))
    expect(state(r.s)).toBe('terminated')
    expect(r.s.context.lastReason).toMatchObject({ kind: 'superseded', generation: 1 })
  })

  it("until the next transport's upgrade left (its TCP connection opening, or credentials pending), a supersede read on the socket just lost terminates; once it left, it is stale", () => {
    const opening = run(waiting(), { type: 'reconnect.due' })
    expect(state(opening)).toBe('connecting')
    expect(opening.context).toMatchObject({ generation: 2, keyHolder: 1 })
    const r = step(opening, supersedeEvent({ generation: 1, epoch: 1 }))
    expect(state(r.s)).toBe('terminated')
    expect(r.s.context.lastReason).toMatchObject({ kind: 'superseded', generation: 1 })
    const sent = run(opening, { type: 'socket.upgradeSent', generation: 2, epoch: 1 })
    expect(sent.context).toMatchObject({ keyHolder: 2, priorKeyHolder: 1 })
    expect(state(run(sent, supersedeEvent({ generation: 1, epoch: 1 })))).toBe('connecting')
  })

  it('a next transport whose TCP connection failed before its upgrade left (refused, unreachable) claimed nothing: a supersede read in the backoff after it, on the socket lost before, terminates', () => {
    const opening = run(waiting(), { type: 'reconnect.due' })
    const refused = run(run(opening, dropEvent(2)))
    expect(state(refused)).toBe('reconnecting')
    expect(refused.context).toMatchObject({ generation: 2, keyHolder: 1 })
    const r = step(refused, supersedeEvent({ generation: 1, epoch: 1 }))
    expect(state(r.s)).toBe('terminated')
    expect(r.s.context.lastReason).toMatchObject({ kind: 'superseded', generation: 1 })
  })

  it('after the next upgrade was refused with a 4xx, the socket lost before holds the key again: a supersede read on it terminates', () => {
    const s = upgradeOut()
    expect(s.context.keyHolder).toBe(2)
    const refused = run(s, upgradeEvent(s, 429, '1'))
    expect(state(refused)).toBe('reconnecting')
    expect(refused.context).toMatchObject({ generation: 2, keyHolder: 1 })
    const r = step(refused, supersedeEvent({ generation: 1, epoch: 1 }))
    expect(state(r.s)).toBe('terminated')
    expect(r.s.context.lastReason).toMatchObject({ kind: 'superseded', generation: 1 })
  })

  it("after the next upgrade was refused 503, it keeps the claim: the platform's 503 (tracking_failed) comes after it superseded, so a supersede then read on the socket before is of unknown cause, and the next attempt probes", () => {
    const s = upgradeOut()
    const refused = run(s, upgradeEvent(s, 503, '1'))
    expect(state(refused)).toBe('reconnecting')
    expect(refused.context).toMatchObject({ generation: 2, keyHolder: 2, priorKeyHolder: 1, lastAccepted: 1 })
    const r = step(refused, supersedeEvent({ generation: 1, epoch: 1 }))
    expect(state(r.s)).toBe('reconnecting')
    expect(r.s.context.ambiguousSupersede).toMatchObject({ reason: { kind: 'superseded', generation: 1 } })
    const next = step(run(r.s, { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 }), { type: 'reconnect.due' })
    expect(next.io).toContainEqual({ type: 'openTransport', params: { generation: 3, epoch: 1, conflictProbe: true } })
    // The server refused it and holds no socket for it: a 409 next is no own conflict of it.
    expect(refused.context.acceptedLostAt).toBe(s.context.acceptedLostAt)
  })

  it("a next transport lost after its upgrade left but before it opened (dropped, or never answered: the connect timeout) keeps the claim: the server may have accepted it, its 101 lost, so a supersede read in the backoff after it on the socket before is ambiguous: the next attempt probes", () => {
    const sent = upgradeOut()
    expect(sent.context.keyHolder).toBe(2)
    const dropped = run(sent, dropEvent(2))
    const timedOut = run(sent, { type: 'xstate.after.connectTimeout.connection.session.online.connecting' } as unknown as ConnectionEvent)
    for (const [how, s] of [['dropped', dropped], ['timed out', timedOut]] as const) {
      expect(state(s), how).toBe('reconnecting')
      expect(s.context, how).toMatchObject({ generation: 2, keyHolder: 2, priorKeyHolder: 1, lastAccepted: 1 })
      const r = step(s, supersedeEvent({ generation: 1, epoch: 1 }))
      expect(state(r.s), how).toBe('reconnecting')
      expect(r.s.context.ambiguousSupersede, how).toEqual({ reason: expect.objectContaining({ kind: 'superseded', generation: 1 }), since: 1_000 })
      expect(r.emitted, how).toEqual([])
      // The next attempt is a conflict probe.
      const next = step(run(r.s, { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 }), { type: 'reconnect.due' })
      expect(next.io, how).toContainEqual({ type: 'openTransport', params: { generation: 3, epoch: 1, conflictProbe: true } })
    }
    // A 5xx keeps the claim too (a gateway's may follow an upgrade accepted upstream; the
    // platform's 503 comes after it superseded); a 4xx gives it back (answered before any supersede).
    expect(run(sent, upgradeEvent(sent, 502)).context.keyHolder).toBe(2)
    expect(run(sent, upgradeEvent(sent, 504)).context.keyHolder).toBe(2)
    expect(run(sent, upgradeEvent(sent, 503, '1')).context.keyHolder).toBe(2)
    expect(run(sent, upgradeEvent(sent, 429, '1')).context.keyHolder).toBe(1)
    expect(run(sent, upgradeEvent(sent, 403)).context.keyHolder).toBe(1)
    // Once opened (and its control channel joined, so a supersede of it would be pushed), a loss
    // keeps the claim, answered: a supersede read on the socket before is stale.
    const opened = run(sent, { type: 'socket.open', generation: 2, epoch: 1 }, { type: 'control.joinOk', generation: 2, epoch: 1 })
    const lostOpen = run(opened, dropEvent(2))
    expect(lostOpen.context).toMatchObject({ keyHolder: 2, lastAccepted: 2 })
    const stale = step(lostOpen, supersedeEvent({ generation: 1, epoch: 1 }))
    expect(stale.s.context.ambiguousSupersede).toBeNull()
    expect(stale.emitted).toEqual([{ type: 'link.ignored', event: 'control.supersede', detail: 'from a stale transport (generation 1, current 2)' }])
  })

  it('two unanswered upgrades in a row: a supersede read on the last socket the server accepted is still ambiguous (either upgrade may have caused it), whether the third upgrade is out or not, and the next attempt probes', () => {
    const scheduled: ConnectionEvent = { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 }
    let s = run(upgradeOut(), dropEvent(2), scheduled)
    s = run(s, { type: 'reconnect.due' }, { type: 'socket.upgradeSent', generation: 3, epoch: 1 })
    expect(s.context).toMatchObject({ generation: 3, keyHolder: 3, priorKeyHolder: 2, lastAccepted: 1 })
    // The third upgrade out: not held (a refusal of it would say nothing of the second), ambiguous at once.
    const out = step(s, supersedeEvent({ generation: 1, epoch: 1 }))
    expect(out.s.context.heldSupersede).toBeNull()
    expect(out.s.context.ambiguousSupersede).toMatchObject({ reason: { generation: 1 } })
    expect(out.emitted).toEqual([])
    const refused = run(out.s, upgradeEvent(out.s, 503, '1'))
    expect(state(refused)).toBe('reconnecting')
    expect(refused.context.ambiguousSupersede).not.toBeNull()
    expect(step(run(refused, scheduled), { type: 'reconnect.due' }).io).toContainEqual({ type: 'openTransport', params: { generation: 4, epoch: 1, conflictProbe: true } })
    // The third dropped too, then the supersede in the backoff: ambiguous, the next attempt probes.
    const backoff = run(s, dropEvent(3), scheduled)
    const read = run(backoff, supersedeEvent({ generation: 1, epoch: 1 }))
    expect(state(read)).toBe('reconnecting')
    expect(read.context.ambiguousSupersede).toMatchObject({ reason: { generation: 1 } })
    expect(step(read, { type: 'reconnect.due' }).io).toContainEqual({ type: 'openTransport', params: { generation: 4, epoch: 1, conflictProbe: true } })
  })

  it('a supersede that becomes ambiguous while the next attempt opens (its upgrade not yet left) starts that attempt again as a conflict probe', () => {
    const opening = run(upgradeOut(), dropEvent(2), { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 }, { type: 'reconnect.due' })
    expect(opening.context).toMatchObject({ generation: 3, keyHolder: 2, lastAccepted: 1, probing: false })
    const r = step(opening, supersedeEvent({ generation: 1, epoch: 1 }))
    expect(state(r.s)).toBe('connecting')
    expect(r.s.context).toMatchObject({ generation: 4, probing: true })
    expect(r.io).toEqual([
      { type: 'endTransport', params: { generation: 3, epoch: 1 } },
      { type: 'openTransport', params: { generation: 4, epoch: 1, conflictProbe: true } },
    ])
    // Accepted, the probe says no other instance holds the key.
    const opened = step(run(r.s, { type: 'socket.upgradeSent', generation: 4, epoch: 1 }), { type: 'socket.open', generation: 4, epoch: 1 })
    expect(opened.emitted).toContainEqual(supersedeIgnored(`a supersede of the previous socket (generation 1), whose cause was unknown: ${PROBE_ACCEPTED}`))
    // Once the upgrade left, it cannot become a probe: accepted, the report says so.
    const sent = run(opening, { type: 'socket.upgradeSent', generation: 3, epoch: 1 }, supersedeEvent({ generation: 1, epoch: 1 }))
    expect(sent.context).toMatchObject({ generation: 3, probing: false })
    expect(step(sent, { type: 'socket.open', generation: 3, epoch: 1 }).emitted).toContainEqual(supersedeIgnored('a supersede of the previous socket (generation 1), whose cause was unknown: the next upgrade, sent before it was read and without on_conflict=reject, was accepted, so it may be the platform superseding our own previous socket'))
  })

  it("with the host's onConflict 'reject' no supersede is the link's own doing: an upgrade claims the key only once accepted, and a supersede read after an unanswered upgrade ends the session at once", () => {
    const start = initialTransition(connectionMachine, { env, onConflict: 'reject' })[0]
    const s = run(waiting(connected(start)), { type: 'reconnect.due' }, { type: 'socket.upgradeSent', generation: 2, epoch: 1 })
    expect(s.context).toMatchObject({ keyHolder: 1, config: { upgradesSupersede: false } })
    const r = step(run(s, dropEvent(2), { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 }), supersedeEvent({ generation: 1, epoch: 1 }))
    expect(state(r.s)).toBe('terminated')
    expect(r.s.context.lastReason).toMatchObject({ kind: 'superseded', generation: 1 })
    // While its upgrade is out too.
    expect(state(run(s, supersedeEvent({ generation: 1, epoch: 1 })))).toBe('terminated')
  })

  it('an ambiguous supersede the session ends before deciding (a terminal refusal of a probe, a give-up) outlives it, unreported (nothing is decided): the next session probes', () => {
    const probing = run(upgradeOut(), dropEvent(2), supersedeEvent({ generation: 1, epoch: 1 }), { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 }, { type: 'reconnect.due' }, { type: 'socket.upgradeSent', generation: 3, epoch: 1 })
    const doubt = probing.context.ambiguousSupersede
    expect(doubt).toMatchObject({ reason: { kind: 'superseded', generation: 1 } })
    const refused = step(probing, upgradeEvent(probing, 403))
    expect(state(refused.s)).toBe('terminated')
    expect(refused.s.context.lastReason?.kind).toBe('rejected')
    const lost = run(probing, dropEvent(3))
    const gaveUp = step(lost, { type: 'reconnect.gaveUp', reason: suppressedReason('max-attempts', 3, normalLoss(3), 0) })
    expect(state(gaveUp.s)).toBe('terminated')
    expect(gaveUp.s.context.lastReason?.kind).toBe('suppressed')
    for (const ended of [refused, gaveUp]) {
      expect(ended.s.context.ambiguousSupersede).toBe(doubt)
      expect(ended.emitted.filter((e) => (e as { type: string }).type === 'link.ignored')).toEqual([])
      expect(step(ended.s, { type: 'host.connect' }).io).toContainEqual({ type: 'openTransport', params: { generation: ended.s.context.generation + 1, epoch: 2, conflictProbe: true } })
    }
  })

  it("a conflict probe that itself ends with no answer may be held by the server: a 409 within conflictRetryWindowMs of it is retried, though the ambiguity is older than the window", () => {
    let now = 1_000
    const scheduled: ConnectionEvent = { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 }
    const window = DEFAULT_CONNECTION_POLICY.conflictRetryWindowMs
    let s = run(waiting(connected(initialTransition(connectionMachine, { env: { ...env, monotonic: () => now } })[0])), { type: 'reconnect.due' }, { type: 'socket.upgradeSent', generation: 2, epoch: 1 }, dropEvent(2), supersedeEvent({ generation: 1, epoch: 1 }), scheduled)
    expect(s.context.ambiguousSupersede?.since).toBe(1_000)
    // A probe sent near the window's end, unanswered until its connect timeout.
    now = 1_000 + window - 5_000
    s = run(s, { type: 'reconnect.due' }, { type: 'socket.upgradeSent', generation: 3, epoch: 1 })
    now += 10_000
    s = run(s, { type: 'xstate.after.connectTimeout.connection.session.online.connecting' } as unknown as ConnectionEvent, scheduled)
    expect(s.context.acceptedLostAt).toBe(now)
    // The next probe, past the ambiguity's window but within the unanswered probe's: 409 retried.
    now += 7_000
    s = run(s, { type: 'reconnect.due' }, { type: 'socket.upgradeSent', generation: 4, epoch: 1 })
    const r = step(s, upgradeEvent(s, 409))
    expect(state(r.s)).toBe('reconnecting')
    expect(r.s.context.ambiguousSupersede).not.toBeNull()
    // Past both: another instance holds the key.
    now += window
    expect(state(run(s, upgradeEvent(s, 409)))).toBe('terminated')
  })

  it("with onConflict 'reject', an upgrade that left and had no answer may be held by the server too: a 409 within the window of it is our own conflict, retried", () => {
    let now = 1_000
    const start = initialTransition(connectionMachine, { env: { ...env, monotonic: () => now }, onConflict: 'reject' })[0]
    const s = run(waiting(connected(start)), { type: 'reconnect.due' })
    now = 1_000 + DEFAULT_CONNECTION_POLICY.conflictRetryWindowMs + 1
    // A 409 past the window of the socket lost: terminal, as ever.
    expect(state(run(s, { type: 'socket.upgradeSent', generation: 2, epoch: 1 }, upgradeEvent(s, 409)))).toBe('terminated')
    // The upgrade left and timed out: within its window, a 409 is retried.
    const timedOut = run(s, { type: 'socket.upgradeSent', generation: 2, epoch: 1 }, { type: 'xstate.after.connectTimeout.connection.session.online.connecting' } as unknown as ConnectionEvent, { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 }, { type: 'reconnect.due' })
    expect(timedOut.context.acceptedLostAt).toBe(now)
    expect(state(run(timedOut, upgradeEvent(timedOut, 409)))).toBe('reconnecting')
    // A TCP connection refused (no upgrade left) marks nothing.
    const refused = run(s, dropEvent(2))
    expect(refused.context.acceptedLostAt).not.toBe(now)
  })

  it('an upgrade that left counts as a socket the server may hold however its attempt ends with no answer: an I/O fault, or the host\'s disconnect() (a 409 in the next session within the window is ours); never an open or a refusal', () => {
    let now = 1_000
    const start = initialTransition(connectionMachine, { env: { ...env, monotonic: () => now }, onConflict: 'reject' })[0]
    const s = run(waiting(connected(start)), { type: 'reconnect.due' })
    now = 1_000 + DEFAULT_CONNECTION_POLICY.conflictRetryWindowMs + 1
    const sent = run(s, { type: 'socket.upgradeSent', generation: 2, epoch: 1 })
    const faulted = run(sent, { type: 'io.failed', action: 'openTransport', error: new Error('adapter bug') } as ConnectionEvent)
    expect(faulted.context.acceptedLostAt).toBe(now)
    const stopped = run(sent, { type: 'host.disconnect' })
    expect(state(stopped)).toBe('stopped')
    expect(stopped.context.acceptedLostAt).toBe(now)
    // The next session's first upgrade refused 409 a second later: our own abandoned upgrade, retried.
    now += 1_000
    const again = run(stopped, { type: 'host.connect' })
    const g = again.context.generation
    expect(state(run(again, { type: 'socket.upgradeSent', generation: g, epoch: again.context.epoch }, { ...upgradeEvent(again, 409), generation: g, epoch: again.context.epoch } as ConnectionEvent))).toBe('reconnecting')
    // Not an upgrade that never left (stamped now if counted), an open, or a refusal instead of accepting.
    expect(run(s, { type: 'io.failed', action: 'openTransport', error: new Error('adapter bug') } as ConnectionEvent).context.acceptedLostAt).not.toBe(now)
    expect(run(sent, { type: 'socket.open', generation: 2, epoch: 1 }).context.acceptedLostAt).not.toBe(now)
    for (const status of [403, 429, 503]) expect(run(sent, upgradeEvent(sent, status, '1')).context.acceptedLostAt, String(status)).not.toBe(now)
    expect(run(sent, upgradeEvent(sent, 502)).context.acceptedLostAt).toBe(now)
    // An HTTP answer says the upgrade left, though the adapter reported no upgradeSent before it.
    expect(run(s, upgradeEvent(s, 502)).context.acceptedLostAt).toBe(now)
  })

  it('only the current transport claims the key when its upgrade leaves; under onConflict \'reject\' a 4xx gives back no claim it never made, so the socket before keeps the key and its supersede ends the session at once', () => {
    const opening = run(waiting(), { type: 'reconnect.due' })
    expect(run(opening, { type: 'socket.upgradeSent', generation: 1, epoch: 1 }).context).toMatchObject({ generation: 2, keyHolder: 1 })
    const start = initialTransition(connectionMachine, { env, onConflict: 'reject' })[0]
    const out = run(waiting(connected(start)), { type: 'reconnect.due' }, { type: 'socket.upgradeSent', generation: 2, epoch: 1 })
    expect(out.context).toMatchObject({ keyHolder: 1, priorKeyHolder: 0 })
    const refused = run(out, upgradeEvent(out, 429, '1'))
    expect(refused.context).toMatchObject({ keyHolder: 1, priorKeyHolder: 0 })
    const r = run(refused, supersedeEvent({ generation: 1, epoch: 1 }))
    expect(state(r)).toBe('terminated')
    expect(r.context.lastReason).toMatchObject({ kind: 'superseded', generation: 1 })
  })

  it("with onConflict 'reject', a supersede that ends the session while an upgrade is out stamps nothing: another instance holds the key, so a 409 of the next session past the window of our lost socket is terminal", () => {
    let now = 1_000
    const start = initialTransition(connectionMachine, { env: { ...env, monotonic: () => now }, onConflict: 'reject' })[0]
    const waitingAfterLoss = waiting(connected(start))
    expect(waitingAfterLoss.context.acceptedLostAt).toBe(1_000)
    now = 31_000
    const out = run(waitingAfterLoss, { type: 'reconnect.due' }, { type: 'socket.upgradeSent', generation: 2, epoch: 1 })
    now = 40_000
    const superseded = run(out, supersedeEvent({ generation: 1, epoch: 1 }))
    expect(state(superseded)).toBe('terminated')
    expect(superseded.context.acceptedLostAt).toBe(1_000)
    now = 1_000 + DEFAULT_CONNECTION_POLICY.conflictRetryWindowMs + 10_000
    const again = run(superseded, { type: 'host.connect' })
    const origin2 = { generation: again.context.generation, epoch: again.context.epoch }
    expect(state(run(again, { type: 'socket.upgradeSent', ...origin2 }, { ...upgradeEvent(again, 409), ...origin2 } as ConnectionEvent))).toBe('terminated')
  })

  it('a conflict probe accepted: no other instance holds the key, so the ambiguous supersede was ours (reported as ignored) and later attempts ask nothing', () => {
    const sent = upgradeOut()
    let s = run(sent, dropEvent(2), supersedeEvent({ generation: 1, epoch: 1 }))
    s = run(s, { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 }, { type: 'reconnect.due' }, { type: 'socket.upgradeSent', generation: 3, epoch: 1 })
    const r = step(s, { type: 'socket.open', generation: 3, epoch: 1 })
    expect(state(r.s)).toBe('joining')
    expect(r.s.context.ambiguousSupersede).toBeNull()
    expect(r.emitted).toContainEqual(supersedeIgnored(`a supersede of the previous socket (generation 1), whose cause was unknown: ${PROBE_ACCEPTED}`))
    const lost = run(r.s, { type: 'control.joinOk', generation: 3, epoch: 1 }, closeEvent(r.s, 1000), { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 })
    expect(step(lost, { type: 'reconnect.due' }).io).toContainEqual({ type: 'openTransport', params: { generation: 4, epoch: 1, conflictProbe: false } })
  })

  it('a conflict probe refused 409: within conflictRetryWindowMs it may be our own unanswered socket, still held (retried, still probing); past it another instance holds the key, and the session ends superseded', () => {
    let now = 1_000
    const sent = run(run(waiting(connected(initialTransition(connectionMachine, { env: { ...env, monotonic: () => now } })[0])), { type: 'reconnect.due' }), { type: 'socket.upgradeSent', generation: 2, epoch: 1 })
    let s = run(sent, dropEvent(2), supersedeEvent({ generation: 1, epoch: 1 }))
    expect(s.context.ambiguousSupersede?.since).toBe(1_000)
    s = run(s, { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 }, { type: 'reconnect.due' }, { type: 'socket.upgradeSent', generation: 3, epoch: 1 })
    // Both ends of the window count: a 409 at once (on a coarse monotonic clock) and one at its last millisecond.
    expect(state(run(s, upgradeEvent(s, 409)))).toBe('reconnecting')
    now = 1_000 + DEFAULT_CONNECTION_POLICY.conflictRetryWindowMs
    const within = step(s, upgradeEvent(s, 409))
    expect(state(within.s)).toBe('reconnecting')
    expect(within.s.context.lastReason).toMatchObject({ kind: 'rejected', cause: 'conflict', retryable: true })
    expect(within.s.context.ambiguousSupersede).not.toBeNull()
    now += 1
    const past = step(s, upgradeEvent(s, 409))
    expect(state(past.s)).toBe('terminated')
    expect(past.s.context.lastReason).toMatchObject({ kind: 'superseded', generation: 1, retryable: false })
    expect(past.s.context.ambiguousSupersede).toBeNull()
    // Other refusals of a probe are what they always are: a 503 is retried, still probing.
    const busy = run(s, upgradeEvent(s, 503, '1'))
    expect(state(busy)).toBe('reconnecting')
    expect(busy.context.ambiguousSupersede).not.toBeNull()
  })

  it('socket.open claims the key for an adapter that never reports its upgrade sent, and claims it once: the prior holder stays the one before', () => {
    const opening = run(waiting(), { type: 'reconnect.due' })
    const opened = run(opening, { type: 'socket.open', generation: 2, epoch: 1 })
    expect(opened.context).toMatchObject({ keyHolder: 2, priorKeyHolder: 1 })
    expect(state(run(opened, supersedeEvent({ generation: 1, epoch: 1 })))).toBe('joining')
    const both = run(run(opening, { type: 'socket.upgradeSent', generation: 2, epoch: 1 }), { type: 'socket.open', generation: 2, epoch: 1 })
    expect(both.context).toMatchObject({ keyHolder: 2, priorKeyHolder: 1 })
    // A refusal never follows an open; a release of a key this transport does not hold changes nothing.
    expect(run(opening, upgradeEvent(opening, 503, '1')).context).toMatchObject({ keyHolder: 1, priorKeyHolder: 0 })
  })

  it('an upgrade sent of a transport the host stopped meanwhile: nothing claimed, nothing reported', () => {
    const s = run(connected(), { type: 'host.disconnect' })
    const stopped = run(run(s, { type: 'control.left', ...origin(s) }))
    expect(state(stopped)).toBe('stopped')
    const r = step(stopped, { type: 'socket.upgradeSent', ...origin(s) })
    expect(r.s.context).toEqual(stopped.context)
    expect(r.emitted).toEqual([])
    expect(r.io).toEqual([])
  })

  it("a supersede read on the socket lost before while the next upgrade is out is held, not acted on: that upgrade's outcome decides", () => {
    const s = upgradeOut()
    expect(s.context.generation).toBe(2)
    const r = step(s, supersedeEvent({ generation: 1, epoch: s.context.epoch }))
    expect(state(r.s)).toBe('connecting')
    expect(r.s.context.lastReason?.kind).not.toBe('superseded')
    expect(r.s.context.heldSupersede).toMatchObject({ kind: 'superseded', generation: 1 })
    expect(r.io).toEqual([])
    expect(r.emitted).toEqual([])
    // A second one while one is held changes nothing, and says so.
    const again = step(r.s, supersedeEvent({ generation: 1, epoch: 1 }))
    expect(again.s.context.heldSupersede).toBe(r.s.context.heldSupersede)
    expect(again.emitted).toEqual([{ type: 'link.ignored', event: 'control.supersede', detail: 'a supersede of the previous socket is already held until the next upgrade is answered' }])
  })

  it('the upgrade a held supersede waited on is accepted: it may have caused the supersede, so the link goes on (reported as ignored)', () => {
    const s = run(upgradeOut(), supersedeEvent({ generation: 1, epoch: 1 }))
    const r = step(s, { type: 'socket.open', generation: 2, epoch: 1 })
    expect(state(r.s)).toBe('joining')
    expect(r.s.context.heldSupersede).toBeNull()
    expect(r.emitted).toContainEqual(supersedeIgnored('a supersede of the previous socket (generation 1), held while the next upgrade was out: the next upgrade was accepted, so it may be the platform superseding our own previous socket'))
    expect(state(run(r.s, { type: 'control.joinOk', generation: 2, epoch: 1 }))).toBe('connected')
  })

  it("the server refuses the upgrade a held supersede waited on with a 4xx: the platform answers those before it supersedes, so the upgrade caused nothing and the supersede was another instance's: the session ends", () => {
    const held = run(upgradeOut(), supersedeEvent({ generation: 1, epoch: 1 }))
    for (const [how, event] of [
      ['refused 400', upgradeEvent(held, 400)],
      ['refused 429', upgradeEvent(held, 429, '1')],
      ['refused 403', upgradeEvent(held, 403)],
      ['refused 409 (within the own-conflict window)', upgradeEvent(held, 409)],
    ] as const) {
      const r = step(held, event)
      expect(state(r.s), how).toBe('terminated')
      expect(r.s.context.lastReason, how).toMatchObject({ kind: 'superseded', generation: 1, retryable: false })
      expect(r.s.context.heldSupersede, how).toBeNull()
      expect(r.io, how).not.toContainEqual(expect.objectContaining({ type: 'tellReconnect' }))
      expect(r.io, how).toContainEqual({ type: 'endTransport', params: { generation: 2, epoch: 1 } })
      expect(r.emitted, how).toContainEqual({ type: 'link.disconnected', reason: r.s.context.lastReason, nextDelayMs: null, attempt: null, conflictProbe: false })
    }
    // A refusal of a stale transport's upgrade decides nothing.
    expect(state(run(held, { ...upgradeEvent(held, 429, '1'), generation: 1 } as ConnectionEvent))).toBe('connecting')
    // Without a held supersede the same refusal is retried, as before.
    const plain = upgradeOut()
    expect(state(run(plain, upgradeEvent(plain, 429, '1')))).toBe('reconnecting')
  })

  it('the upgrade a held supersede waited on ends with no answer (dropped, timed out, a gateway 502, an I/O fault) or a 503 (the platform\'s tracking_failed comes after it superseded): the server may have accepted it, its 101 lost, or superseded for it, so the supersede\'s cause is unknown: the link reconnects, and the next attempt probes', () => {
    const held = run(upgradeOut(), supersedeEvent({ generation: 1, epoch: 1 }))
    for (const [how, event] of [
      ['dropped', dropEvent(2)],
      ['timed out', { type: 'xstate.after.connectTimeout.connection.session.online.connecting' }],
      ['a gateway 502', upgradeEvent(held, 502)],
      ['the platform 503', upgradeEvent(held, 503, '1')],
      ['an I/O fault', { type: 'io.failed', action: 'openTransport', error: new Error('boom') }],
    ] as const) {
      const r = step(held, event as unknown as ConnectionEvent)
      expect(state(r.s), how).toBe('reconnecting')
      expect(r.s.context.heldSupersede, how).toBeNull()
      expect(r.s.context.ambiguousSupersede, how).toEqual({ reason: expect.objectContaining({ kind: 'superseded', generation: 1 }), since: 1_000 })
      expect(r.emitted.filter((e) => (e as { type: string }).type === 'link.ignored'), how).toEqual([])
      const next = step(run(r.s, { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 }), { type: 'reconnect.due' })
      expect(next.io, how).toContainEqual({ type: 'openTransport', params: { generation: 3, epoch: 1, conflictProbe: true } })
    }
  })

  it("a held or ambiguous supersede outlives a session the host stops first: the host's connect() starts a session whose attempts probe (disconnect() then connect() must not evict the instance that may hold the key); a held one's upgrade was abandoned unanswered, so its cause is unknown", () => {
    let now = 1_000
    const clocked = initialTransition(connectionMachine, { env: { ...env, monotonic: () => now }, policy: { ...DEFAULT_CONNECTION_POLICY, unseenSupersedeWindowMs: 0 } })[0]
    const held = run(upgradeOut(waiting(connected(clocked))), supersedeEvent({ generation: 1, epoch: 1 }))
    const stopped = step(held, { type: 'host.disconnect' })
    expect(state(stopped.s)).toBe('stopped')
    expect(stopped.s.context.lastReason?.kind).toBe('graceful')
    expect(stopped.s.context.heldSupersede).toBeNull()
    expect(stopped.s.context.ambiguousSupersede).toEqual({ reason: expect.objectContaining({ kind: 'superseded', generation: 1 }), since: 1_000 })
    // Nothing is decided yet, so nothing is reported.
    expect(stopped.emitted.filter((e) => (e as { type: string }).type === 'link.ignored')).toEqual([])
    const ambiguous = run(held, dropEvent(2))
    expect(ambiguous.context.ambiguousSupersede).not.toBeNull()
    const stoppedToo = step(ambiguous, { type: 'host.disconnect' })
    expect(stoppedToo.s.context.ambiguousSupersede).toBe(ambiguous.context.ambiguousSupersede)
    expect(stoppedToo.emitted.filter((e) => (e as { type: string }).type === 'link.ignored')).toEqual([])
    for (const s of [stopped.s, stoppedToo.s]) {
      const again = run(s, { type: 'host.connect' })
      expect(again.context).toMatchObject({ heldSupersede: null, ambiguousSupersede: s.context.ambiguousSupersede, keyHolder: 0, lastAccepted: 0 })
      const opened = step(s, { type: 'host.connect' })
      expect(opened.io).toContainEqual({ type: 'openTransport', params: { generation: s.context.generation + 1, epoch: 2, conflictProbe: true } })
      // The probe accepted: no other instance holds the key; the doubt is dismissed, and says so.
      const upgraded = run(opened.s, { type: 'socket.upgradeSent', generation: s.context.generation + 1, epoch: 2 })
      const accepted = step(upgraded, { type: 'socket.open', generation: s.context.generation + 1, epoch: 2 })
      expect(accepted.s.context.ambiguousSupersede).toBeNull()
      expect(accepted.emitted).toContainEqual(supersedeIgnored(`a supersede of the previous socket (generation 1), whose cause was unknown: ${PROBE_ACCEPTED}`))
      // The probe refused 409 past conflictRetryWindowMs: another instance holds the key; the new session ends superseded.
      now = 1_000 + DEFAULT_CONNECTION_POLICY.conflictRetryWindowMs + 1
      const refused = run(upgraded, upgradeEvent(upgraded, 409))
      now = 1_000
      expect(state(refused)).toBe('terminated')
      expect(refused.context.lastReason).toMatchObject({ kind: 'superseded', generation: 1 })
      expect(refused.context.ambiguousSupersede).toBeNull()
    }
    // A session that ends superseded decided the doubt: forgotten, and the next session asks nothing.
    const superseded = run(ambiguous, { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 }, { type: 'reconnect.due' })
    const ended = step(superseded, supersedeEvent({ generation: superseded.context.generation, epoch: 1 }))
    expect(state(ended.s)).toBe('terminated')
    expect(ended.s.context.ambiguousSupersede).toBeNull()
    expect(ended.emitted).toContainEqual(supersedeIgnored('a supersede of the previous socket (generation 1), whose cause was unknown: the session ended first (superseded)'))
    expect(step(ended.s, { type: 'host.connect' }).io).toContainEqual(expect.objectContaining({ type: 'openTransport', params: expect.objectContaining({ conflictProbe: false }) }))
    // A second ambiguous one while one is probed changes nothing, and says so.
    const twice = step(ambiguous, supersedeEvent({ generation: 1, epoch: 1 }))
    expect(twice.s.context.ambiguousSupersede).toBe(ambiguous.context.ambiguousSupersede)
    expect(twice.emitted).toEqual([{ type: 'link.ignored', event: 'control.supersede', detail: 'a supersede of the previous socket whose cause is unknown is already being probed' }])
  })

  describe("a supersede read on a socket still closing after the session ended (a stalled server never read the link's close)", () => {
    /** Connected, then the heartbeat timed out: the link ended generation 1, which the adapter still reads until its close completes; a long backoff. */
    const lostInBackoff = () => run(connected(), { type: 'socket.heartbeatTimeout', reason: heartbeatTimeout(1, 5), generation: 1, epoch: 1 } as ConnectionEvent, { type: 'reconnect.scheduled', delayMs: 60_000, attempt: 1 })
    const probes = (s: ConnSnapshot) => step(s, { type: 'host.connect' }).io.find((a) => a.type === 'openTransport')?.params

    it("after the host's disconnect() its cause is unknown (another instance, or an upgrade of ours abandoned): the next session's attempts probe", () => {
      const stopped = run(lostInBackoff(), { type: 'host.disconnect' })
      const read = step(stopped, supersedeEvent({ generation: 1, epoch: 1 }))
      expect(state(read.s)).toBe('stopped')
      expect(read.s.context.lastReason?.kind).toBe('graceful')
      expect(read.s.context.ambiguousSupersede).toMatchObject({ reason: { kind: 'superseded', generation: 1 } })
      expect(read.emitted).toEqual([])
      expect(probes(read.s)).toEqual({ generation: 2, epoch: 2, conflictProbe: true })
    })

    it('after a policy give-up or a refusal too; not after the session ended superseded (the host was told: its connect() is its own decision)', () => {
      const lost = run(connected(), { type: 'socket.heartbeatTimeout', reason: heartbeatTimeout(1, 5), generation: 1, epoch: 1 } as ConnectionEvent)
      const gaveUp = run(lost, { type: 'reconnect.gaveUp', reason: suppressedReason('max-attempts', 1, normalLoss(1), 0) })
      expect(state(gaveUp)).toBe('terminated')
      expect(probes(run(gaveUp, supersedeEvent({ generation: 1, epoch: 1 })))).toMatchObject({ conflictProbe: true })
      const refused = run(upgradeOut(waiting()), { type: 'socket.upgradeRejected', reason: classifyUpgrade({ status: 403 }, 2, 0), generation: 2, epoch: 1 } as ConnectionEvent)
      expect(state(refused)).toBe('terminated')
      expect(probes(run(refused, supersedeEvent({ generation: 1, epoch: 1 })))).toMatchObject({ conflictProbe: true })
      const superseded = run(connected(), supersedeEvent({ generation: 1, epoch: 1 }))
      expect(superseded.context.lastReason?.kind).toBe('superseded')
      const again = step(superseded, supersedeEvent({ generation: 1, epoch: 1 }))
      expect(again.s.context.ambiguousSupersede).toBeNull()
      expect(again.emitted).toEqual([{ type: 'link.ignored', event: 'control.supersede', detail: 'not handled in this state' }])
      expect(probes(again.s)).toMatchObject({ conflictProbe: false })
    })

    it("one read on an older socket than the ended session's last accepted one is stale, as during the session (that later socket's upgrade may have caused it): no doubt", () => {
      let s = run(lostInBackoff(), { type: 'reconnect.due' }, { type: 'socket.upgradeSent', generation: 2, epoch: 1 }, { type: 'socket.open', generation: 2, epoch: 1 })
      s = run(s, { type: 'control.joinOk', generation: 2, epoch: 1 })
      expect(step(s, supersedeEvent({ generation: 1, epoch: 1 })).s.context.ambiguousSupersede).toBeNull()
      const stopped = run(s, { type: 'host.disconnect' }, { type: 'control.left', generation: 2, epoch: 1 })
      expect(state(stopped)).toBe('stopped')
      const older = step(stopped, supersedeEvent({ generation: 1, epoch: 1 }))
      expect(older.s.context.ambiguousSupersede).toBeNull()
      expect(older.emitted).toEqual([{ type: 'link.ignored', event: 'control.supersede', detail: 'from a stale transport (generation 1, current 2)' }])
      // The last accepted socket itself: a doubt.
      expect(run(stopped, supersedeEvent({ generation: 2, epoch: 1 })).context.ambiguousSupersede).toMatchObject({ reason: { generation: 2 } })
      // An earlier session's socket, after a session that had one accepted: stale; after one that had none: a doubt.
      const later = run(stopped, { type: 'host.connect' }, { type: 'socket.upgradeSent', generation: 3, epoch: 2 }, { type: 'socket.open', generation: 3, epoch: 2 }, { type: 'host.disconnect' })
      expect(state(later)).toBe('stopped')
      expect(run(later, supersedeEvent({ generation: 2, epoch: 1 })).context.ambiguousSupersede).toBeNull()
      const none = run(stopped, { type: 'host.connect' }, { type: 'host.disconnect' })
      expect(none.context.lastAccepted).toBe(0)
      expect(run(none, supersedeEvent({ generation: 2, epoch: 1 })).context.ambiguousSupersede).toMatchObject({ reason: { generation: 2 } })
    })

    it("disconnect() then connect() at once: read before the new session's upgrade left, the attempt starts again as a probe; read once it left, a doubt that the upgrade's answer decides; read once the new session has an accepted socket, stale", () => {
      const again = run(lostInBackoff(), { type: 'host.disconnect' }, { type: 'host.connect' })
      expect(again.context).toMatchObject({ generation: 2, epoch: 2, probing: false })
      const before = step(again, supersedeEvent({ generation: 1, epoch: 1 }))
      expect(state(before.s)).toBe('connecting')
      expect(before.s.context.ambiguousSupersede).toMatchObject({ reason: { generation: 1 } })
      expect(before.io).toContainEqual({ type: 'openTransport', params: { generation: 3, epoch: 2, conflictProbe: true } })
      const out = run(again, { type: 'socket.upgradeSent', generation: 2, epoch: 2 })
      const after = step(out, supersedeEvent({ generation: 1, epoch: 1 }))
      expect(state(after.s)).toBe('connecting')
      expect(after.s.context.ambiguousSupersede).toMatchObject({ reason: { generation: 1 } })
      // Refused with a 4xx it supersedes nothing: retried, still probing.
      const retried = run(after.s, upgradeEvent(after.s, 429, '1'), { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 })
      expect(step(retried, { type: 'reconnect.due' }).io).toContainEqual({ type: 'openTransport', params: { generation: 3, epoch: 2, conflictProbe: true } })
      const opened = run(out, { type: 'socket.open', generation: 2, epoch: 2 })
      const stale = step(opened, supersedeEvent({ generation: 1, epoch: 1 }))
      expect(stale.s.context.ambiguousSupersede).toBeNull()
      expect(stale.emitted).toEqual([{ type: 'link.ignored', event: 'control.supersede', detail: 'from an earlier session (epoch 1, current 2)' }])
    })

    it("a \"disconnect\" close (1000, 1001, 1011) while disconnect() leaves the control channel, within unseenSupersedeWindowMs of its join, may be a supersede no push carried: stopped as asked, and the next session probes; past the window, or a drop, it is not", () => {
      let now = 1_000
      const clocked = initialTransition(connectionMachine, { env: { ...env, monotonic: () => now }, policy: DEFAULT_CONNECTION_POLICY })[0]
      const stopping = run(connected(clocked), { type: 'host.disconnect' })
      expect(state(stopping)).toBe('stopping')
      for (const code of [1000, 1001, 1011]) {
        const stopped = step(stopping, closeEvent(stopping, code))
        expect(state(stopped.s), String(code)).toBe('stopped')
        expect(stopped.s.context.lastReason?.kind, String(code)).toBe('graceful')
        expect(stopped.s.context.ambiguousSupersede, String(code)).toMatchObject({ reason: { kind: 'superseded', cause: 'unseen', generation: 1 } })
        expect(probes(stopped.s), String(code)).toMatchObject({ conflictProbe: true })
      }
      expect(run(stopping, dropEvent(1)).context.ambiguousSupersede).toBeNull()
      // A close of an older transport (read late) is not this socket's: stale, still stopping, no doubt.
      const second = run(connected(run(waiting(connected(clocked)), { type: 'reconnect.due' })), { type: 'host.disconnect' })
      expect(second.context.generation).toBe(2)
      const stale = step(second, closeEvent(second, 1011, '', { generation: 1, epoch: 1 }))
      expect(state(stale.s)).toBe('stopping')
      expect(stale.s.context.ambiguousSupersede).toBeNull()
      expect(stale.emitted).toEqual([{ type: 'link.ignored', event: 'socket.close', detail: 'from a stale transport (generation 1, current 2)' }])
      expect(run(stopping, closeEvent(stopping, 1012)).context.ambiguousSupersede).toBeNull()
      now += DEFAULT_CONNECTION_POLICY.unseenSupersedeWindowMs
      expect(run(stopping, closeEvent(stopping, 1011)).context.ambiguousSupersede).toBeNull()
    })
  })

  it('only a supersede of the previous key holder is held: one read on an older socket, which the previous key holder\'s accepted upgrade may have caused, is stale', () => {
    // Generation 2 opened (the server accepted it) and was lost; generation 3's upgrade is out.
    let s = upgradeOut()
    s = run(s, { type: 'socket.open', generation: 2, epoch: 1 })
    s = run(s, dropEvent(2), { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 })
    s = run(s, { type: 'reconnect.due' }, { type: 'socket.upgradeSent', generation: 3, epoch: 1 })
    expect(s.context).toMatchObject({ generation: 3, keyHolder: 3, priorKeyHolder: 2 })
    const older = step(s, supersedeEvent({ generation: 1, epoch: 1 }))
    expect(older.s.context.heldSupersede).toBeNull()
    expect(older.emitted).toEqual([{ type: 'link.ignored', event: 'control.supersede', detail: 'from a stale transport (generation 1, current 3)' }])
    expect(run(s, supersedeEvent({ generation: 2, epoch: 1 })).context.heldSupersede).toMatchObject({ generation: 2 })
    // Generation 3 refused (429: it claimed nothing): before generation 4's upgrade left, the key holder's supersede is terminal at once.
    const before = run(s, upgradeEvent(s, 429, '1'), { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 }, { type: 'reconnect.due' })
    expect(before.context).toMatchObject({ generation: 4, keyHolder: 2 })
    expect(state(run(before, supersedeEvent({ generation: 2, epoch: 1 })))).toBe('terminated')
    // Generation 3 dropped unanswered instead (it keeps the claim): the same supersede is ambiguous.
    const unanswered = run(s, dropEvent(3), { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 }, { type: 'reconnect.due' })
    expect(unanswered.context).toMatchObject({ generation: 4, keyHolder: 3, priorKeyHolder: 2, lastAccepted: 2 })
    const probed = run(unanswered, supersedeEvent({ generation: 2, epoch: 1 }))
    expect(state(probed)).toBe('connecting')
    expect(probed.context.ambiguousSupersede).toMatchObject({ reason: { generation: 2 } })
  })

  it('no close code after the supersede brings it back', () => {
    let s = connected()
    s = run(s, supersedeEvent(origin(s)))
    for (const code of [1000, 1001, 1011]) s = run(s, closeEvent(s, code))
    s = run(s, { type: 'reconnect.due' })
    expect(state(s)).toBe('terminated')
    expect(s.context.lastReason?.kind).toBe('superseded')
  })

  it('malformed supersede payloads are still terminal', () => {
    for (const payload of [{}, { retry_after: 'soon' }, { correlation_id: null, extra: [1] }, 'text', null]) {
      const s = connected()
      expect(state(run(s, supersedeEvent(origin(s), payload)))).toBe('terminated')
    }
  })
})

describe('rule: supersede is terminal, across links (a doubt another link left undecided: input supersedeDoubt)', () => {
  const doubt = { reason: unseenSupersedeReason(classifyClose({ code: 1000, reason: '' }, 1, 0), 1, 0), since: 0, socketLostAt: null }

  it("a chart given one starts with it: its first attempt is a conflict probe; a probe accepted dismisses it, reported as ignored", () => {
    const [s] = initialTransition(connectionMachine, { env, policy: DEFAULT_CONNECTION_POLICY, supersedeDoubt: doubt })
    expect(s.context.ambiguousSupersede).toEqual({ reason: doubt.reason, since: 0 })
    expect(s.context.acceptedLostAt).toBeNull()
    const opened = step(s, { type: 'host.connect' })
    expect(opened.io).toContainEqual({ type: 'openTransport', params: { generation: 1, epoch: 1, conflictProbe: true } })
    const accepted = step(opened.s, { type: 'socket.open', ...origin(opened.s) })
    expect(accepted.s.context.ambiguousSupersede).toBeNull()
    expect(accepted.emitted).toContainEqual(unseenSettled(1))
  })

  it("a probe refused 409 is judged on the window of the link that left the doubt: past it from the doubt's time, terminal; within it from that link's last lost socket (socketLostAt: the platform may still hold it), retried", () => {
    // env.monotonic reads 1,000; the window is 75,000.
    const old = { ...doubt, since: -100_000 }
    for (const [socketLostAt, outcome] of [
      [null, 'terminated'],
      [0, 'reconnecting'],
    ] as const) {
      const [s] = initialTransition(connectionMachine, { env, policy: DEFAULT_CONNECTION_POLICY, supersedeDoubt: { ...old, socketLostAt } })
      expect(s.context.acceptedLostAt).toBe(socketLostAt)
      const opened = run(s, { type: 'host.connect' })
      const refused = run(opened, upgradeEvent(opened, 409))
      expect(state(refused), `socketLostAt ${socketLostAt}`).toBe(outcome)
      if (outcome === 'terminated') expect(refused.context.lastReason).toMatchObject({ kind: 'superseded', cause: 'unseen', generation: 1 })
      else expect(refused.context.ambiguousSupersede).not.toBeNull()
    }
  })

  it('without one (the default) the first attempt asks nothing', () => {
    expect(step(start(), { type: 'host.connect' }).io).toContainEqual({ type: 'openTransport', params: { generation: 1, epoch: 1, conflictProbe: false } })
  })
})

describe('rule: supersede is terminal, where no supersede can be pushed (a socket lost before its control channel joined)', () => {
  /** A chart on a clock the test moves (env.monotonic and env.now), idle. */
  function clocked() {
    let t = 1_000
    const clockEnv = { now: () => t, monotonic: () => t, random: () => 0.5 }
    return { start: () => initialTransition(connectionMachine, { env: clockEnv })[0], advance: (ms: number) => (t += ms) }
  }
  const joining = (s: ConnSnapshot) => run(s, { type: 'host.connect' }, { type: 'socket.open', generation: 1, epoch: 1 })
  const crashed = (s: ConnSnapshot) => run(s, { type: 'control.crashed', reason: classifyControlChannelLoss('phx_error', {}, 1, 5), generation: 1, epoch: 1 })
  const backoffDue = (s: ConnSnapshot) => step(run(s, { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 }), { type: 'reconnect.due' })
  const conflict = (s: ConnSnapshot) => ({ type: 'socket.upgradeRejected', reason: classifyUpgrade({ status: 409, retryAfter: null }, s.context.generation, 5), ...origin(s) }) as ConnectionEvent

  const unjoined: Array<[string, (s: ConnSnapshot) => ConnSnapshot, (s: ConnSnapshot) => ConnectionEvent]> = [
    ['joining, closed 1011 (Bandit\'s close of a superseded socket)', joining, (s) => closeEvent(s, 1011)],
    ['joining, closed 1000 (Cowboy\'s)', joining, (s) => closeEvent(s, 1000)],
    ['joining, closed 1001 (Phoenix 1.8.8+)', joining, (s) => closeEvent(s, 1001)],
    ['the control channel crashed, closed 1011 before its rejoin', (s) => crashed(run(joining(s), { type: 'control.joinOk', generation: 1, epoch: 1 })), (s) => closeEvent(s, 1011)],
    [
      'the control channel rejoining, closed 1000',
      (s) => run(crashed(run(joining(s), { type: 'control.joinOk', generation: 1, epoch: 1 })), { type: 'xstate.after.controlRejoinDelay.connection.session.online.attached.live.controlErrored' } as unknown as ConnectionEvent),
      (s) => closeEvent(s, 1000),
    ],
  ]
  for (const [how, reach, lose] of unjoined) {
    it(`${how}: the cause is unknown, and the next attempt is a conflict probe`, () => {
      const s = reach(start())
      expect(state(s)).toBe('joining')
      const lost = step(s, lose(s))
      expect(state(lost.s)).toBe('reconnecting')
      expect(lost.s.context.ambiguousSupersede).toEqual({ reason: expect.objectContaining({ kind: 'superseded', cause: 'unseen', retryable: false, generation: 1, raw: {} }), since: 1_000 })
      expect(lost.emitted.filter((e) => (e as { type: string }).type === 'link.ignored')).toEqual([])
      expect(backoffDue(lost.s).io).toContainEqual({ type: 'openTransport', params: { generation: 2, epoch: 1, conflictProbe: true } })
    })
  }

  it('a drop, a close no "disconnect" sends (1012, the link\'s own 1009), a heartbeat timeout, a join timeout or a refused join before the control channel joined is no supersede (the platform ends a superseded socket with a "disconnect" close), and the server may still hold the socket: the next attempt asks nothing', () => {
    const losses: Array<[string, (s: ConnSnapshot) => ConnectionEvent]> = [
      ['dropped', (s) => dropEvent(s.context.generation)],
      // Closes no "disconnect" sends: a drain, and the link's own 1009 for an oversize frame.
      ['closed 1012', (s) => closeEvent(s, 1012)],
      ['closed 1009', (s) => closeEvent(s, 1009)],
      ['heartbeat timeout', (s) => ({ type: 'socket.heartbeatTimeout', reason: { kind: 'timed-out', phase: 'heartbeat', retryable: true, generation: 1, at: 5 }, ...origin(s) }) as ConnectionEvent],
      ['join timeout', () => ({ type: 'xstate.after.joinTimeout.connection.session.online.attached.joining' }) as unknown as ConnectionEvent],
      ['join crashed', (s) => ({ type: 'control.joinError', reason: { kind: 'other', retryable: true, detail: 'join crashed', generation: 1, at: 5 }, ...origin(s) }) as ConnectionEvent],
    ]
    for (const [how, lose] of losses) {
      const s = joining(start())
      const lost = run(s, lose(s))
      expect(state(lost), how).toBe('reconnecting')
      expect(lost.context.ambiguousSupersede, how).toBeNull()
      expect(backoffDue(lost).io, how).toContainEqual({ type: 'openTransport', params: { generation: 2, epoch: 1, conflictProbe: false } })
    }
  })

  it('a "disconnect" close within unseenSupersedeWindowMs of the control join may still be one (the join landed between the supersede broadcast and the close, hearing nothing): probed; past the window a supersede would have been pushed, so it leaves no doubt', () => {
    const window = DEFAULT_CONNECTION_POLICY.unseenSupersedeWindowMs
    const clock = clocked()
    const s = connected(clock.start())
    clock.advance(window - 1)
    const within = run(s, closeEvent(s, 1011))
    expect(within.context.ambiguousSupersede).toMatchObject({ reason: { cause: 'unseen', generation: 1 } })
    expect(backoffDue(within).io).toContainEqual({ type: 'openTransport', params: { generation: 2, epoch: 1, conflictProbe: true } })
    clock.advance(1)
    const past = run(s, closeEvent(s, 1011))
    expect(past.context.ambiguousSupersede).toBeNull()
    expect(backoffDue(past).io).toContainEqual({ type: 'openTransport', params: { generation: 2, epoch: 1, conflictProbe: false } })
  })

  it('the window counts from the last (re)join: a close soon after a rejoin that followed a crash is probed; one past it is not', () => {
    const clock = clocked()
    const joined = connected(clock.start())
    clock.advance(60_000)
    const rejoined = run(crashed(joined), { type: 'xstate.after.controlRejoinDelay.connection.session.online.attached.live.controlErrored' } as unknown as ConnectionEvent, { type: 'control.joinOk', generation: 1, epoch: 1 })
    expect(state(rejoined)).toBe('connected')
    expect(run(rejoined, closeEvent(rejoined, 1011)).context.ambiguousSupersede).toMatchObject({ reason: { cause: 'unseen' } })
    clock.advance(DEFAULT_CONNECTION_POLICY.unseenSupersedeWindowMs)
    expect(run(rejoined, closeEvent(rejoined, 1011)).context.ambiguousSupersede).toBeNull()
  })

  it('the loss that raises the doubt is announced with conflictProbe: the host sees why the next upgrade asks on_conflict=reject; one past the window is not', () => {
    const clock = clocked()
    const joined = connected(clock.start())
    const announced = (s: ConnSnapshot) =>
      step(run(s, closeEvent(s, 1011)), { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 }).emitted.filter((e) => (e as { type: string }).type === 'link.disconnected')
    expect(announced(joined)).toEqual([expect.objectContaining({ nextDelayMs: 100, attempt: 1, conflictProbe: true })])
    clock.advance(DEFAULT_CONNECTION_POLICY.unseenSupersedeWindowMs)
    expect(announced(joined)).toEqual([expect.objectContaining({ nextDelayMs: 100, attempt: 1, conflictProbe: false })])
  })

  it('unseenSupersedeWindowMs 0: only a close before the join is probed', () => {
    const s = connected(initialTransition(connectionMachine, { env, policy: { ...DEFAULT_CONNECTION_POLICY, unseenSupersedeWindowMs: 0 } })[0])
    expect(run(s, closeEvent(s, 1011)).context.ambiguousSupersede).toBeNull()
  })

  describe('a reset soon after the link sent (the TCP connection reset: ECONNRESET or EPIPE; the adapter marks the drop `reset`) loses the frames the server sent that the link had not read, a supersede push among them', () => {
    const resetEvent = (s: ConnSnapshot, errorCode = 'ECONNRESET') =>
      ({ type: 'socket.close', reason: classifyClose({ code: 1006, reason: '', error: `read ${errorCode}`, reset: true }, s.context.generation, 5), ...origin(s) }) as ConnectionEvent

    it('of an accepted socket, however long its control channel had been joined: the cause is unknown, and the next attempt is a conflict probe', () => {
      const clock = clocked()
      const joined = connected(clock.start())
      clock.advance(DEFAULT_CONNECTION_POLICY.unseenSupersedeWindowMs * 100)
      for (const code of ['ECONNRESET', 'EPIPE']) {
        const lost = run(joined, resetEvent(joined, code))
        expect(lost.context.lastReason, code).toMatchObject({ kind: 'dropped', reset: true, detail: `abnormal closure (1006): read ${code}` })
        expect(lost.context.ambiguousSupersede, code).toMatchObject({ reason: { kind: 'superseded', cause: 'unseen', generation: 1 } })
        expect((lost.context.ambiguousSupersede!.reason as unknown as { message: string }).message, code).toMatch(/^the socket's connection was reset \(dropped\), which loses the frames/)
        expect(backoffDue(lost).io, code).toContainEqual({ type: 'openTransport', params: { generation: 2, epoch: 1, conflictProbe: true } })
      }
      // Before the join, and while the control channel rejoins after a crash, too.
      const unjoined = joining(start())
      expect(run(unjoined, resetEvent(unjoined)).context.ambiguousSupersede).toMatchObject({ reason: { cause: 'unseen' } })
      const rejoining = crashed(joined)
      expect(run(rejoining, resetEvent(rejoining)).context.ambiguousSupersede).toMatchObject({ reason: { cause: 'unseen' } })
    })

    it('a reset probed past the window ends the session superseded (unseen) once the probes are refused 409 past conflictRetryWindowMs', () => {
      const clock = clocked()
      const joined = connected(clock.start())
      clock.advance(60_000)
      let s = run(joined, resetEvent(joined))
      s = run(backoffDue(s).s, { type: 'socket.upgradeSent', generation: 2, epoch: 1 })
      clock.advance(DEFAULT_CONNECTION_POLICY.conflictRetryWindowMs + 1)
      const ended = run(s, conflict(s))
      expect(state(ended)).toBe('terminated')
      expect(ended.context.lastReason).toMatchObject({ kind: 'superseded', cause: 'unseen', retryable: false })
    })

    it('not a drop the adapter did not mark `reset` (no error, another error, or a reset of a link that sent nothing just before it): the server may still hold that socket', () => {
      const clock = clocked()
      const joined = connected(clock.start())
      clock.advance(60_000)
      for (const errorCode of [null, 'ETIMEDOUT', 'ECONNREFUSED', 'ECONNRESET']) {
        const drop = { type: 'socket.close', reason: classifyClose({ code: 1006, reason: '', error: errorCode === null ? null : `read ${errorCode}`, reset: false }, 1, 5), ...origin(joined) } as ConnectionEvent
        const lost = run(joined, drop)
        expect((lost.context.lastReason as { reset?: boolean }).reset, String(errorCode)).toBeUndefined()
        expect(lost.context.ambiguousSupersede, String(errorCode)).toBeNull()
      }
    })

    it("not a reset before the upgrade was accepted (the server accepted nothing to supersede), nor under the host's onConflict 'reject'", () => {
      const s = run(start(), { type: 'host.connect' })
      expect(run(s, resetEvent(s)).context.ambiguousSupersede).toBeNull()
      const reject = run(initialTransition(connectionMachine, { env, onConflict: 'reject' })[0], { type: 'host.connect' }, { type: 'socket.open', generation: 1, epoch: 1 })
      expect(run(reject, resetEvent(reject)).context.ambiguousSupersede).toBeNull()
    })
  })

  it('a loss before the upgrade was answered (not accepted) is not this rule: the server held no channel to push on, nor accepted the socket', () => {
    const s = run(start(), { type: 'host.connect' })
    expect(run(s, dropEvent(1)).context.ambiguousSupersede).toBeNull()
  })

  it("with the host's onConflict 'reject' nothing is probed: the link's upgrades supersede nothing", () => {
    const s = run(initialTransition(connectionMachine, { env, onConflict: 'reject' })[0], { type: 'host.connect' }, { type: 'socket.open', generation: 1, epoch: 1 })
    expect(run(s, closeEvent(s, 1011)).context.ambiguousSupersede).toBeNull()
  })

  it('an accepted probe dismisses it, reported as ignored with what it was', () => {
    const s = joining(start())
    const probing = backoffDue(run(s, closeEvent(s, 1011))).s
    const accepted = step(probing, { type: 'socket.open', generation: 2, epoch: 1 })
    expect(accepted.s.context.ambiguousSupersede).toBeNull()
    expect(accepted.emitted).toContainEqual(unseenSettled(1))
  })

  it('a probe refused 409 within conflictRetryWindowMs is retried (our own socket may still be held); past it the session ends superseded, cause unseen: the newer instance is never evicted', () => {
    const clock = clocked()
    const s = joining(clock.start())
    const probing = backoffDue(run(s, closeEvent(s, 1011))).s
    clock.advance(DEFAULT_CONNECTION_POLICY.conflictRetryWindowMs)
    const within = run(probing, conflict(probing))
    expect(state(within)).toBe('reconnecting')
    const again = backoffDue(within)
    expect(again.io).toContainEqual({ type: 'openTransport', params: { generation: 3, epoch: 1, conflictProbe: true } })
    clock.advance(1)
    const past = run(again.s, conflict(again.s))
    expect(state(past)).toBe('terminated')
    expect(past.context.lastReason).toMatchObject({ kind: 'superseded', cause: 'unseen', retryable: false, generation: 1 })
  })

  it('a doubt no supersede read raised outlives a session the host stops in the backoff, unreported: the next session probes, and an accepted probe dismisses it', () => {
    const s = joining(start())
    const lost = run(s, closeEvent(s, 1011), { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 })
    expect(lost.context.ambiguousSupersede).not.toBeNull()
    const stopped = step(lost, { type: 'host.disconnect' })
    expect(state(stopped.s)).toBe('stopped')
    expect(stopped.s.context.ambiguousSupersede).toBe(lost.context.ambiguousSupersede)
    expect(stopped.emitted.filter((e) => (e as { type: string }).type === 'link.ignored')).toEqual([])
    // The stop says the next connect() probes.
    expect(stopped.emitted).toContainEqual(expect.objectContaining({ type: 'link.disconnected', reason: expect.objectContaining({ kind: 'graceful' }), conflictProbe: true }))
    const again = step(stopped.s, { type: 'host.connect' })
    expect(again.io).toContainEqual({ type: 'openTransport', params: { generation: 2, epoch: 2, conflictProbe: true } })
    const accepted = step(run(again.s, { type: 'socket.upgradeSent', generation: 2, epoch: 2 }), { type: 'socket.open', generation: 2, epoch: 2 })
    expect(accepted.s.context.ambiguousSupersede).toBeNull()
    expect(accepted.emitted).toContainEqual(unseenSettled(1))
  })

  it('the unseen reason names the loss it follows (its kind and close code), and nothing a payload would carry', () => {
    const tail = 'before its control channel joined or just after, where the platform may not have pushed a supersede, and connections made with on_conflict=reject were then refused 409 past the conflict window: another instance holds the key'
    expect(unseenSupersedeReason({ kind: 'closed', retryable: true, closeCode: 1011, generation: 2, at: 5 }, 2, 7)).toEqual({
      kind: 'superseded',
      retryable: false,
      cause: 'unseen',
      message: `the server closed the socket (closed 1011) ${tail}`,
      retryAfterMs: null,
      targetSocketId: null,
      correlationId: null,
      raw: {},
      generation: 2,
      at: 7,
    })
    expect(unseenSupersedeReason({ kind: 'dropped', retryable: true, generation: 2, at: 5 }, 2, 7).message).toBe(`the server closed the socket (dropped) ${tail}`)
  })

  it('the unseen reason of a reset says the reset may have lost the push, or that a middlebox made it; isResetUnseen tells it from a close', () => {
    const reset = unseenSupersedeReason({ kind: 'dropped', retryable: true, reset: true, generation: 3, at: 5 } as never, 3, 9)
    expect(reset).toMatchObject({ kind: 'superseded', retryable: false, cause: 'unseen', generation: 3, at: 9 })
    expect(reset.message).toBe(
      "the socket's connection was reset (dropped), which loses the frames the server sent that were not yet read, a supersede push among them, " +
        'and connections made with on_conflict=reject were then refused 409 past the conflict window: another instance holds the key, ' +
        "or the server still holds this link's own socket (a reset made by a middlebox, not by the server)",
    )
    const closed = unseenSupersedeReason({ kind: 'closed', retryable: true, closeCode: 1000, generation: 3, at: 5 }, 3, 9)
    expect(isResetUnseen(reset)).toBe(true)
    expect(isResetUnseen(closed)).toBe(false)
    // The cause decides as well as the message: a reason of another cause that says the same is no reset doubt.
    expect(isResetUnseen({ ...reset, cause: 'push' } as never)).toBe(false)
    expect(isResetUnseen({ ...reset, message: undefined } as never)).toBe(false)
    expect(isResetUnseen({ ...reset, message: 7 } as never)).toBe(false)
    // Its report begins so; text after those words is no reset doubt.
    expect(isResetUnseen({ ...reset, message: `a close: ${reset.message}` })).toBe(false)
    expect(isResetUnseen({ ...reset, message: "the socket's connection was reset (dropped)" })).toBe(true)
  })

  it('a doubt no supersede read raised, settled by the session ending superseded (a supersede then pushed on the socket just lost), is forgotten unreported: nothing was read', () => {
    const s = joining(start())
    const lost = run(s, closeEvent(s, 1011), { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 })
    expect(lost.context.ambiguousSupersede?.reason.cause).toBe('unseen')
    const ended = step(lost, supersedeEvent({ generation: 1, epoch: 1 }))
    expect(state(ended.s)).toBe('terminated')
    expect(ended.s.context.lastReason).toMatchObject({ kind: 'superseded', generation: 1 })
    expect(ended.s.context.ambiguousSupersede).toBeNull()
    expect(ended.emitted.filter((e) => (e as { type: string }).type === 'link.ignored')).toEqual([])
  })

  it('an accepted probe lost again before its control channel joined starts a new doubt, from then, about that socket', () => {
    const clock = clocked()
    const s = joining(clock.start())
    const probing = backoffDue(run(s, closeEvent(s, 1011))).s
    clock.advance(500)
    const opened = run(probing, { type: 'socket.open', generation: 2, epoch: 1 })
    expect(opened.context.ambiguousSupersede).toBeNull()
    const lostAgain = run(opened, closeEvent(opened, 1011))
    expect(lostAgain.context.ambiguousSupersede).toMatchObject({ reason: { generation: 2, cause: 'unseen' }, since: 1_500 })
  })
})

describe('rule: upgrade rejection is terminal; 429 and 503 wait', () => {
  for (const status of [400, 401, 403, 409]) {
    it(`HTTP ${status} -> terminated, rejected`, () => {
      const s = run(start(), { type: 'host.connect' })
      const r = step(s, upgradeEvent(s, status))
      expect(state(r.s)).toBe('terminated')
      expect(r.s.context.lastReason).toMatchObject({ kind: 'rejected', phase: 'upgrade', status })
    })
  }
  for (const status of [429, 503]) {
    it(`HTTP ${status} with Retry-After -> reconnecting, carrying the wait to the reconnect chart`, () => {
      const s = run(start(), { type: 'host.connect' })
      const r = step(s, upgradeEvent(s, status, '2'))
      expect(state(r.s)).toBe('reconnecting')
      expect(r.s.context.lastReason).toMatchObject({ kind: 'rejected', retryable: true, retryAfterMs: 2000 })
    })
  }
  it('a refused reconnect (403) after a normal close is terminal on that attempt', () => {
    let s = run(waiting(), { type: 'reconnect.due' })
    s = run(s, upgradeEvent(s, 403))
    expect(state(s)).toBe('terminated')
  })
  for (const code of [1008, 4500, 4999]) {
    it(`close ${code} (the server says the agent is not allowed) is terminal`, () => {
      const s = connected()
      expect(state(run(s, closeEvent(s, code)))).toBe('terminated')
    })
  }
})

describe('rule: our own conflict is retried (409 soon after this session lost its connection)', () => {
  /** A chart whose clocks the test moves: `t` the monotonic clock, `wall` the wall clock's offset. */
  function withClock() {
    const clock = { t: 1_000, wall: 0 }
    const env = { now: () => 1_796_000_000_000 + clock.t + clock.wall, monotonic: () => clock.t, random: () => 0.5 }
    // The unseen-supersede window off: these sockets close the instant they join (tested on its own).
    const s = initialTransition(connectionMachine, { env, policy: { ...DEFAULT_CONNECTION_POLICY, conflictRetryWindowMs: 5_000, unseenSupersedeWindowMs: 0 } })[0]
    return { clock, s }
  }

  it('a 409 within the window after a connected transport was lost -> reconnecting, the reason marked retryable', () => {
    const { clock, s: idle } = withClock()
    let s = waiting(connected(idle))
    clock.t += 5_000
    s = run(s, { type: 'reconnect.due' })
    const r = step(s, upgradeEvent(s, 409))
    expect(state(r.s)).toBe('reconnecting')
    expect(r.s.context.lastReason).toMatchObject({ kind: 'rejected', cause: 'conflict', status: 409, retryable: true })
    // Still ours on the next attempt inside the window; once the platform lets go, connected.
    s = run(r.s, { type: 'reconnect.scheduled', delayMs: 100, attempt: 2 }, { type: 'reconnect.due' })
    expect(state(run(s, upgradeEvent(s, 409)))).toBe('reconnecting')
  })

  it('a 409 after the window -> terminated: another instance holds the key', () => {
    const { clock, s: idle } = withClock()
    let s = run(waiting(connected(idle)), { type: 'reconnect.due' })
    clock.t += 5_001
    s = run(s, upgradeEvent(s, 409))
    expect(state(s)).toBe('terminated')
    expect(s.context.lastReason).toMatchObject({ kind: 'rejected', cause: 'conflict', retryable: false })
  })

  it('a 409 before the server ever accepted a socket of this link -> terminated: another instance holds the key', () => {
    const { s: idle } = withClock()
    let s = run(idle, { type: 'host.connect' })
    s = run(s, closeEvent(s, 1006), { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 }, { type: 'reconnect.due' })
    expect(state(run(s, upgradeEvent(s, 409)))).toBe('terminated')
  })

  it('a socket the server accepted counts though it never joined: a 409 within the window after it was lost while joining -> reconnecting', () => {
    const { clock, s: idle } = withClock()
    let s = run(idle, { type: 'host.connect' })
    s = run(s, { type: 'socket.open', ...origin(s) })
    expect(state(s)).toBe('joining')
    s = run(s, closeEvent(s, 1006), { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 })
    clock.t += 5_000
    s = run(s, { type: 'reconnect.due' })
    const r = step(s, upgradeEvent(s, 409))
    expect(state(r.s)).toBe('reconnecting')
    expect(r.s.context.lastReason).toMatchObject({ cause: 'conflict', retryable: true })
    clock.t += 1
    expect(state(run(s, upgradeEvent(s, 409)))).toBe('terminated')
  })

  it('a disconnect() while joining counts as closing an accepted socket: a 409 on the next connect() within the window -> reconnecting', () => {
    const { s: idle } = withClock()
    let s = run(idle, { type: 'host.connect' })
    s = run(s, { type: 'socket.open', ...origin(s) }, { type: 'host.disconnect' })
    expect(state(s)).toBe('stopped')
    s = run(s, { type: 'host.connect' })
    expect(state(run(s, upgradeEvent(s, 409)))).toBe('reconnecting')
  })

  it('the window spans sessions: stopped and connected again within it, a 409 is still retried', () => {
    const { clock, s: idle } = withClock()
    const first = connected(idle)
    let s = run(first, { type: 'host.disconnect' }, { type: 'control.left', ...origin(first) })
    expect(state(s)).toBe('stopped')
    clock.t += 1_000
    s = run(s, { type: 'host.connect' })
    expect(state(run(s, upgradeEvent(s, 409)))).toBe('reconnecting')
    clock.t += 5_000
    expect(state(run(s, upgradeEvent(s, 409)))).toBe('terminated')
  })

  it('the window is measured on the monotonic clock: a wall clock stepped back or forward an hour changes nothing', () => {
    for (const step of [-3_600_000, 3_600_000]) {
      const { clock, s: idle } = withClock()
      let s = run(waiting(connected(idle)), { type: 'reconnect.due' })
      clock.wall += step
      clock.t += 1_000
      expect(state(run(s, upgradeEvent(s, 409)))).toBe('reconnecting')
      clock.t += 5_000
      s = run(s, upgradeEvent(s, 409))
      expect(state(s)).toBe('terminated')
    }
  })

  it('a monotonic clock that stepped back (a host\'s own, restored from elsewhere) reads as no time passed: the 409 is retried, not terminal (the one answer that cannot be undone); the window still runs from there', () => {
    const { clock, s: idle } = withClock()
    let s = run(waiting(connected(idle)), { type: 'reconnect.due' })
    clock.t -= 60_000
    s = run(s, upgradeEvent(s, 409))
    expect(state(s)).toBe('reconnecting')
    s = run(waiting(s), { type: 'reconnect.due' })
    // Past the window as the clock now reads it (from the loss): another instance holds the key.
    clock.t += 60_000 + s.context.config.policy.conflictRetryWindowMs + 1
    expect(state(run(s, upgradeEvent(s, 409)))).toBe('terminated')
  })

  it('other refusals stay terminal inside the window', () => {
    const { s: idle } = withClock()
    for (const status of [400, 401, 403]) {
      let s = run(waiting(connected(idle)), { type: 'reconnect.due' })
      s = run(s, upgradeEvent(s, status))
      expect(state(s)).toBe('terminated')
    }
  })
})

describe('rule: stale generations and earlier sessions change nothing', () => {
  it('a close from the previous transport after the new one opened is ignored and reported', () => {
    let s = run(waiting(), { type: 'reconnect.due' })
    s = run(s, { type: 'socket.open', ...origin(s) })
    s = run(s, { type: 'control.joinOk', ...origin(s) })
    const stale = closeEvent(s, 1000, '', { generation: 1, epoch: s.context.epoch })
    const r = step(s, stale)
    expect(state(r.s)).toBe('connected')
    expect(r.s.context.generation).toBe(2)
    expect(r.emitted).toContainEqual(expect.objectContaining({ type: 'link.ignored', event: 'socket.close' }))
  })

  it('an open or join reply from a stale transport does not advance the chart', () => {
    let s = run(waiting(), { type: 'reconnect.due' })
    expect(state(run(s, { type: 'socket.open', generation: 1, epoch: s.context.epoch }))).toBe('connecting')
    s = run(s, { type: 'socket.open', ...origin(s) })
    expect(state(run(s, { type: 'control.joinOk', generation: 1, epoch: s.context.epoch }))).toBe('joining')
  })

  it('events of a session the host stopped and restarted are ignored, a supersede included', () => {
    let s = connected()
    const old = origin(s)
    s = run(s, { type: 'host.disconnect' }, { type: 'control.left', ...old })
    expect(state(s)).toBe('stopped')
    s = connected(s)
    expect(s.context.epoch).toBe(2)
    const lost = { type: 'control.lost' as const, reason: classifyControlChannelLoss('phx_error', {}, old.generation, 5), ...old }
    for (const e of [closeEvent(s, 1000, '', old), supersedeEvent(old), lost]) {
      const r = step(s, e)
      expect(state(r.s)).toBe('connected')
      expect(r.emitted).toContainEqual(expect.objectContaining({ type: 'link.ignored' }))
    }
  })
})

describe('rule: disconnect() always succeeds', () => {
  const from: Array<[string, () => ConnSnapshot, string]> = [
    ['idle', () => start(), 'idle'],
    ['connecting', () => run(start(), { type: 'host.connect' }), 'stopped'],
    ['joining', () => { const s = run(start(), { type: 'host.connect' }); return run(s, { type: 'socket.open', ...origin(s) }) }, 'stopped'],
    ['connected', () => connected(), 'stopping'],
    ['reconnecting', () => waiting(), 'stopped'],
    ['stopped', () => { const s = connected(); return run(s, { type: 'host.disconnect' }, { type: 'control.left', ...origin(s) }) }, 'stopped'],
    ['terminated', () => { const s = connected(); return run(s, supersedeEvent(origin(s))) }, 'terminated'],
  ]
  for (const [name, make, expected] of from) {
    it(`from ${name} -> ${expected}`, () => {
      const s = make()
      const r = step(s, { type: 'host.disconnect' })
      expect(state(r.s)).toBe(expected)
      expect(r.emitted.filter((e) => (e as { type: string }).type === 'link.ignored')).toEqual([])
      if (expected === 'stopped' && name !== 'stopped') expect(r.s.context.lastReason?.kind).toBe('graceful')
      if (name === 'terminated') expect(r.s.context.lastReason?.kind).toBe('superseded')
    })
  }

  it('stopping ends on the leave reply, on a close, or on the leave timeout', () => {
    const s = run(connected(), { type: 'host.disconnect' })
    expect(state(run(s, { type: 'control.left', ...origin(s) }))).toBe('stopped')
    // A peer close racing disconnect(): still stopped, graceful, never a reconnect.
    for (const code of [1000, 1001, 1011, 1012]) {
      const closed = run(s, closeEvent(s, code))
      expect(state(closed)).toBe('stopped')
      expect(closed.context.lastReason?.kind).toBe('graceful')
    }
    // The leave needs the transport: it is pushed on entering stopping, and the socket ends only on stopped.
    const leaving = step(connected(), { type: 'host.disconnect' })
    expect(leaving.io).toEqual([{ type: 'leaveControl', params: origin(s) }])
    const done = step(s, { type: 'control.left', ...origin(s) })
    expect(done.io).toContainEqual({ type: 'endTransport', params: origin(s) })
  })
})

describe('lastDisconnectReason', () => {
  it('is kept after stop and after terminated, and cleared by the next connect', () => {
    let s = connected()
    s = run(s, supersedeEvent(origin(s)))
    expect(s.context.lastReason?.kind).toBe('superseded')
    s = run(s, { type: 'host.connect' })
    expect(s.context.lastReason).toBeNull()
    expect(s.context.epoch).toBe(2)
  })

  it('every reason the chart makes itself parses as a DisconnectReason', () => {
    const made = [
      run(connected(), { type: 'host.disconnect' }, { type: 'control.left', generation: 1, epoch: 1 }).context.lastReason,
      run(connected(), closeEvent(connected(), 1000), { type: 'reconnect.gaveUp', reason: suppressedReason('rapid-disconnects', 10, normalLoss(1), 1) }).context.lastReason,
      run(run(start(), { type: 'host.connect' }), { type: 'xstate.after.connectTimeout.connection.session.online.connecting' } as never).context.lastReason,
    ]
    for (const reason of made) expect(DisconnectReason.safeParse(reason).success, JSON.stringify(reason)).toBe(true)
  })
})

describe("app channel reports while the reconnect chart decides", () => {
  const deciding = () => {
    const c = run(connected(), { type: 'host.channel', topic: 'room:1' })
    const s = run(c, closeEvent(c, 1000))
    expect(s.value).toMatchObject({ session: { reconnecting: 'deciding' } })
    return s
  }
  const detachedReport = { type: 'channel.status', topic: 'room:1', status: 'detached', reason: null } as const
  const droppedReport = { type: 'channel.status', topic: 'room:1', status: 'dropped', reason: { kind: 'dropped', retryable: false, generation: 1, at: 0 } } as const

  it('are held, and announced before disconnected when the answer is a delay (or a slow-down); a dropped or left one stops its chart, the others stay', () => {
    const c = run(connected(), { type: 'host.channel', topic: 'room:1' }, { type: 'host.channel', topic: 'room:2' }, { type: 'host.channel', topic: 'room:3' })
    const lost = run(c, closeEvent(c, 1000))
    const held = step(lost, detachedReport)
    expect(held.emitted).toEqual([])
    expect(held.s.context.heldChannelReports).toEqual([detachedReport])
    const leftReport = { type: 'channel.status', topic: 'room:3', status: 'left', reason: null } as const
    const erroredReport = { type: 'channel.status', topic: 'room:2', status: 'errored', reason: { kind: 'dropped', retryable: true, generation: 1, at: 0 } } as const
    for (const answer of [
      { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 },
      { type: 'reconnect.suspended', delayMs: 30_000, attempt: 10, reason: suppressedReason('rapid-disconnects', 10, normalLoss(1), 0, true) },
    ] as const) {
      const r = step(run(held.s, droppedReport, erroredReport, leftReport), answer)
      expect(r.emitted.slice(0, 4)).toEqual([
        { type: 'link.channel', topic: 'room:1', status: 'detached', reason: null },
        { type: 'link.channel', topic: 'room:1', status: 'dropped', reason: droppedReport.reason },
        { type: 'link.channel', topic: 'room:2', status: 'errored', reason: erroredReport.reason },
        { type: 'link.channel', topic: 'room:3', status: 'left', reason: null },
      ])
      expect((r.emitted[4] as { type: string }).type).toBe('link.disconnected')
      expect(r.io.filter((a) => a.type === 'stopChannel')).toEqual([
        { type: 'stopChannel', params: { topic: 'room:1' } },
        { type: 'stopChannel', params: { topic: 'room:3' } },
      ])
      expect(r.s.context.heldChannelReports).toBeNull()
      expect(r.s.context.channels).toEqual(['room:2'])
    }
    // With none held, the answer announces only the loss.
    const none = step(lost, { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 })
    expect(none.emitted.map((e) => (e as { type: string }).type)).toEqual(['link.disconnected'])
    expect(none.s.context.channels).toEqual(['room:1', 'room:2', 'room:3'])
  })

  it('are queued again behind the end of the session when it ends instead (a give-up, a supersede, a stop): announced after it', () => {
    const held = run(deciding(), detachedReport)
    for (const end of [
      { type: 'reconnect.gaveUp', reason: suppressedReason('max-attempts', 1, normalLoss(1), 0) },
      supersedeEvent({ generation: 1, epoch: 1 }),
      { type: 'host.disconnect' },
    ] as const) {
      const r = step(held, end as ConnectionEvent)
      expect(['terminated', 'stopped']).toContain(state(r.s))
      expect(r.emitted.filter((e) => (e as { type: string }).type === 'link.channel')).toEqual([])
      expect(r.io.filter((a) => a.type === 'redeliver')).toEqual([{ type: 'redeliver', params: detachedReport }])
      expect(r.s.context.heldChannelReports).toBeNull()
      // Queued again, the report is announced where the session ended.
      expect(step(r.s, detachedReport).emitted).toEqual([{ type: 'link.channel', topic: 'room:1', status: 'detached', reason: null }])
    }
  })
})

describe('control signals', () => {
  it('go to the control delivery chart from the current transport, in arrival order', () => {
    const s = connected()
    const signal = { correlationId: 'a' }
    const r = step(s, { type: 'control.signal', signal, ...origin(s) })
    expect(r.io).toEqual([{ type: 'tellControl', params: { type: 'control.enqueue', signal, sequence: 1, epoch: 1, bytes: 0 } }])
    expect(r.s.context.signalSeq).toBe(1)
    expect(state(r.s)).toBe('connected')
  })

  it('from a stale transport (older than the newest the server accepted) are not delivered', () => {
    const s = run(upgradeOut(), { type: 'socket.open', generation: 2, epoch: 1 })
    const r = step(s, { type: 'control.signal', signal: {}, generation: 1, epoch: s.context.epoch })
    expect(r.s.context.signalSeq).toBe(0)
    expect(r.io).toEqual([])
    expect(r.emitted).toEqual([{ type: 'link.ignored', event: 'control.signal', detail: 'from a stale transport (generation 1, current 2)' }])
  })

  it('read on the newest socket the server accepted are delivered while the next upgrade is out, and after it went unanswered or was refused: nothing newer can have been read', () => {
    const signal = { correlationId: 'stop-1' }
    const out = upgradeOut()
    const scheduled: ConnectionEvent = { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 }
    for (const [how, s] of [
      ['the next upgrade out', out],
      ['the next upgrade dropped unanswered (it keeps the key claim)', run(out, dropEvent(2), scheduled)],
      ['the next upgrade refused 503 (it keeps the key claim)', run(out, upgradeEvent(out, 503, '1'), scheduled)],
      ['the next upgrade refused 429', run(out, upgradeEvent(out, 429, '1'), scheduled)],
    ] as const) {
      const r = step(s, { type: 'control.signal', signal, generation: 1, epoch: s.context.epoch })
      expect(r.io, how).toEqual([{ type: 'tellControl', params: { type: 'control.enqueue', signal, sequence: 1, epoch: 1, bytes: 0 } }])
      expect(r.emitted, how).toEqual([])
      expect(linkStateOf(r.s.value), how).toBe(linkStateOf(s.value))
    }
  })

  it('read during the backoff on the transport just lost (before its close completed) are delivered', () => {
    const s = waiting()
    const signal = { correlationId: 'late' }
    const r = step(s, { type: 'control.signal', signal, generation: 1, epoch: s.context.epoch })
    expect(r.io).toEqual([{ type: 'tellControl', params: { type: 'control.enqueue', signal, sequence: 1, epoch: 1, bytes: 0 } }])
    expect(state(r.s)).toBe('reconnecting')
  })

  it('read while disconnect() stops the session are not delivered, and reported', () => {
    const s = run(connected(), { type: 'host.disconnect' })
    expect(state(s)).toBe('stopping')
    const r = step(s, { type: 'control.signal', signal: { correlationId: 'c-9' }, ...origin(s) })
    expect(r.io).toEqual([])
    expect(r.s.context.signalSeq).toBe(0)
    expect(r.emitted).toEqual([{ type: 'link.ignored', event: 'control.signal', detail: 'an agent.control signal (correlation_id "c-9") read while the session stops or after it ended: not delivered' }])
  })

  it('after the session ended are not delivered, and reported', () => {
    const c = connected()
    const s = run(c, supersedeEvent(origin(c)))
    const r = step(s, { type: 'control.signal', signal: {}, ...origin(c) })
    expect(r.s.context.signalSeq).toBe(0)
    expect(r.io).toEqual([])
    expect(r.emitted).toEqual([{ type: 'link.ignored', event: 'control.signal', detail: 'an agent.control signal (correlation_id null) read while the session stops or after it ended: not delivered' }])
  })
})

describe('a failing I/O action (a phoenix-link bug) is a loss, not a crash', () => {
  const failed = (action: string): ConnectionEvent => ({ type: 'io.failed', action, error: new Error('adapter bug') })

  it('the transport failing: a retryable other reason, reconnecting', () => {
    const s = run(start(), { type: 'host.connect' })
    const r = step(s, failed('openTransport'))
    expect(linkStateOf(r.s.value)).toBe('reconnecting')
    expect(r.s.context.lastReason).toMatchObject({ kind: 'other', retryable: true, detail: 'the adapter failed inside phoenix-link: adapter bug' })
    expect(DisconnectReason.safeParse(r.s.context.lastReason).success).toBe(true)
    expect(r.io).toContainEqual({ type: 'endTransport', params: origin(s) })
  })

  it('the control channel failing: a retryable other reason, reconnecting; connected too', () => {
    const joining = run(run(start(), { type: 'host.connect' }), { type: 'socket.open', generation: 1, epoch: 1 })
    expect(linkStateOf(run(joining, failed('joinControl')).value)).toBe('reconnecting')
    expect(linkStateOf(run(connected(), failed('rejoinControl')).value)).toBe('reconnecting')
  })

  it('while stopping: still stopped, graceful (the host asked to stop), never a reconnect', () => {
    const s = run(connected(), { type: 'host.disconnect' })
    const r = run(s, failed('leaveControl'))
    expect(state(r)).toBe('stopped')
    expect(r.context.lastReason?.kind).toBe('graceful')
  })

  it('with no transport (the backoff, stopped) it changes nothing and is reported ignored with what failed', () => {
    const r = step(waiting(), { type: 'io.failed', action: 'endTransport', error: 'socket gone' })
    expect(state(r.s)).toBe('reconnecting')
    expect(r.emitted).toEqual([{ type: 'link.ignored', event: 'io.failed', detail: 'the endTransport action failed inside phoenix-link: socket gone' }])
  })

  it('what it says quotes what was thrown: an Error, a plain object with a message, null, a string', () => {
    for (const [error, text] of [
      [new Error('adapter bug'), 'adapter bug'],
      [{ message: 'a plain object with a message' }, 'a plain object with a message'],
      [null, 'null'],
      ['socket gone', 'socket gone'],
    ] as const) {
      const s = run(run(start(), { type: 'host.connect' }), { type: 'io.failed', action: 'openTransport', error })
      expect(s.context.lastReason).toMatchObject({ detail: `the adapter failed inside phoenix-link: ${text}` })
    }
  })
})

describe('app channel routing and ignored reports', () => {
  it('starts one channel chart per topic, forwards its events, forgets it when it ends', () => {
    const started = step(start(), { type: 'host.channel', topic: 'room:1' })
    expect(started.io).toEqual([{ type: 'startChannel', params: { topic: 'room:1' } }])
    let s = started.s
    expect(s.context.channels).toEqual(['room:1'])
    const again = step(s, { type: 'host.channel', topic: 'room:1' })
    expect(again.io).toEqual([])
    s = again.s
    expect(s.context.channels).toEqual(['room:1'])
    let r = step(s, { type: 'host.leaveChannel', topic: 'room:1' })
    expect(r.io).toEqual([{ type: 'tellChannel', params: { topic: 'room:1', event: { type: 'host.leave' } } }])
    r = step(s, { type: 'channel.joinOk', topic: 'room:1', generation: 1, attachId: 1 })
    expect(r.io).toEqual([{ type: 'tellChannel', params: { topic: 'room:1', event: { type: 'channel.joinOk', topic: 'room:1', generation: 1, attachId: 1 } } }])
    r = step(s, { type: 'channel.joinOk', topic: 'room:2', generation: 1, attachId: 1 })
    expect(r.emitted).toContainEqual(expect.objectContaining({ type: 'link.ignored', event: 'channel.joinOk' }))
    r = step(s, { type: 'channel.status', topic: 'room:1', status: 'errored', reason: null })
    expect(r.s.context.channels).toEqual(['room:1'])
    for (const status of ['dropped', 'left'] as const) {
      r = step(s, { type: 'channel.status', topic: 'room:1', status, reason: null })
      expect(r.s.context.channels).toEqual([])
      expect(r.io).toEqual([{ type: 'stopChannel', params: { topic: 'room:1' } }])
      expect(r.emitted).toContainEqual({ type: 'link.channel', topic: 'room:1', status, reason: null })
    }
    r = step(s, { type: 'channel.status', topic: 'room:9', status: 'dropped', reason: null })
    expect(r.s.context.channels).toEqual(['room:1'])
  })

  it('a channel registered while connected is attached at once; one registered earlier when the session connects', () => {
    const before = run(start(), { type: 'host.channel', topic: 'early' })
    const c = connected(before)
    const r = step(c, { type: 'host.channel', topic: 'late' })
    expect(r.io).toEqual([
      { type: 'startChannel', params: { topic: 'late' } },
      { type: 'tellChannel', params: { topic: 'late', event: { type: 'transport.up', generation: 1 } } },
    ])
    expect(r.s.context.channels).toEqual(['early', 'late'])
  })

  it('says why an event was ignored', () => {
    const c = connected()
    const detail = (e: Parameters<typeof step>[1], s = c) =>
      (step(s, e).emitted.find((x) => (x as { type: string }).type === 'link.ignored') as { detail?: string } | undefined)?.detail
    expect(detail({ type: 'socket.malformed', detail: 'not-json: x', ...origin(c) })).toBe('not-json: x')
    expect(detail({ type: 'socket.open', generation: 1, epoch: 0 })).toBe('from an earlier session (epoch 0, current 1)')
    expect(detail({ type: 'socket.open', generation: 0, epoch: 1 })).toBe('from a stale transport (generation 0, current 1)')
    expect(detail({ type: 'socket.open', generation: 1, epoch: 1 })).toBe('not handled in this state')
    expect(detail({ type: 'reconnect.due' })).toBe('not handled in this state')
  })

  it('records the reconnect chart\'s give-up and its schedule only from their own events', () => {
    const s = run(connected(), closeEvent(connected(), 1000))
    const scheduled = run(s, { type: 'reconnect.scheduled', delayMs: 42, attempt: 3 })
    expect(scheduled.context.retry).toEqual({ delayMs: 42, attempt: 3 })
    const gaveUp = run(s, { type: 'reconnect.gaveUp', reason: suppressedReason('max-attempts', 4, normalLoss(1), 9) })
    expect(gaveUp.context.lastReason).toMatchObject({ kind: 'suppressed', cause: 'max-attempts', attempts: 4 })
    const back = run(scheduled, { type: 'reconnect.due' })
    expect(back.context.retry).toEqual({ delayMs: 42, attempt: 3 })
    const joined = run(back, { type: 'socket.open', ...origin(back) }, { type: 'control.joinOk', ...origin(back) })
    expect(joined.context.retry).toBeNull()
  })
})

describe('rule: a control channel crash is a channel crash (rejoined on the same socket)', () => {
  const crashed = (s: ConnSnapshot) => ({ type: 'control.crashed' as const, reason: classifyControlChannelLoss('phx_error', {}, s.context.generation, 5), ...origin(s) })
  const rejoinDelay = 'xstate.after.controlRejoinDelay.connection.session.online.attached.live.controlErrored'

  it('phx_error on the control channel -> joining on the same transport, after a delay a fresh join; no loss, no reconnect', () => {
    const s = connected()
    const r = step(s, crashed(s))
    expect(state(r.s)).toBe('joining')
    expect(r.s.value).toEqual({ session: { online: { attached: { live: 'controlErrored' } } } })
    expect(r.s.context.generation).toBe(s.context.generation)
    expect(r.s.context.lastReason).toBeNull()
    expect(r.emitted.filter((e) => (e as { type: string }).type === 'link.disconnected')).toEqual([])
    // The app channels stay attached (no transport.down to them); the socket stays.
    expect(r.io).toEqual([])
    const rejoin = step(r.s, { type: rejoinDelay } as never)
    expect(rejoin.s.value).toEqual({ session: { online: { attached: { live: 'controlRejoining' } } } })
    expect(rejoin.io).toEqual([{ type: 'rejoinControl', params: origin(s) }])
    const back = step(rejoin.s, { type: 'control.joinOk', ...origin(s) })
    expect(state(back.s)).toBe('connected')
    // Not a reconnect: no second link.connected.
    expect(back.emitted.filter((e) => (e as { type: string }).type === 'link.connected')).toEqual([])
  })

  it('crashes in a row back off, a crash right after each join included; a join that holds rejoinStableAfterMs starts the backoff again', () => {
    const stable = 'xstate.after.controlStableAfter.connection.session.online.attached.live.connected'
    let s = connected()
    for (let i = 1; i <= 3; i++) {
      s = run(s, crashed(s))
      expect(s.context.controlCrashes).toBe(i)
      s = run(s, { type: rejoinDelay } as never, { type: 'control.joinOk', ...origin(s) })
      expect(state(s)).toBe('connected')
    }
    // Joined, but not yet for rejoinStableAfterMs: the next crash waits longer still.
    expect(s.context.controlCrashes).toBe(3)
    expect(rejoinDelayMs(s.context.config.channelPolicy, 4, 0)).toBeGreaterThan(rejoinDelayMs(s.context.config.channelPolicy, 1, 0.999))
    s = run(s, { type: stable } as never)
    expect(s.context.controlCrashes).toBe(0)
    expect(run(s, crashed(s)).context.controlCrashes).toBe(1)
  })

  it('a new session starts with no crashes counted, though the last one stopped inside a run of them', () => {
    let s = connected()
    s = run(s, crashed(s), { type: rejoinDelay } as never, { type: 'control.joinOk', ...origin(s) })
    s = run(s, crashed(s))
    expect(s.context.controlCrashes).toBe(2)
    s = run(s, { type: 'host.disconnect' })
    expect(state(s)).toBe('stopped')
    s = run(s, { type: 'host.connect' })
    expect(s.context.controlCrashes).toBe(0)
  })

  it('a refused rejoin is a session-level loss; a rejoin that times out too', () => {
    const s = run(run(connected(), crashed(connected())), { type: rejoinDelay } as never)
    const refused = run(s, { type: 'control.joinError', reason: { kind: 'rejected', cause: 'unauthorized', phase: 'join', retryable: false, generation: 1, at: 0 }, ...origin(s) })
    expect(state(refused)).toBe('terminated')
    const timedOut = run(s, { type: 'xstate.after.joinTimeout.connection.session.online.attached.live.controlRejoining' } as never)
    expect(state(timedOut)).toBe('reconnecting')
    expect(timedOut.context.lastReason).toMatchObject({ kind: 'timed-out', phase: 'join' })
  })

  it('phx_close on the control channel stays a session-level loss; a supersede while rejoining is terminal; disconnect() stops', () => {
    const s = connected()
    const closed = run(s, { type: 'control.lost', reason: classifyControlChannelLoss('phx_close', {}, 1, 5), ...origin(s) })
    expect(state(closed)).toBe('reconnecting')
    const errored = run(s, crashed(s))
    expect(state(run(errored, supersedeEvent(origin(s))))).toBe('terminated')
    expect(state(run(errored, { type: 'host.disconnect' }))).toBe('stopped')
  })
})

describe('rule: giving up is not the default (suspended past the rapid-disconnect limit)', () => {
  it('reconnect.suspended -> suspended: the reason suppressed (retryable) with the cooldown as the next delay; due -> a new transport', () => {
    const c = connected()
    const s = run(c, closeEvent(c, 1000))
    const reason = suppressedReason('rapid-disconnects', 10, normalLoss(1), 5, true)
    const r = step(s, { type: 'reconnect.suspended', delayMs: 30_000, attempt: 10, reason })
    expect(state(r.s)).toBe('suspended')
    expect(r.s.context.lastReason).toMatchObject({ kind: 'suppressed', retryable: true })
    expect(r.emitted).toContainEqual(expect.objectContaining({ type: 'link.disconnected', nextDelayMs: 30_000, reason: expect.objectContaining({ kind: 'suppressed' }) }))
    const back = run(r.s, { type: 'reconnect.due' })
    expect(state(back)).toBe('connecting')
    expect(back.context.generation).toBe(2)
    expect(DisconnectReason.safeParse(r.s.context.lastReason).success).toBe(true)
    expect(state(run(r.s, { type: 'host.disconnect' }))).toBe('stopped')
    expect(state(run(r.s, supersedeEvent(origin(r.s))))).toBe('terminated')
  })
})

describe('connection chart, what its I/O actions are given and what it reports', () => {
  it('the transport and control channel actions get the generation and epoch they serve; a session starts and stops its reconnect chart', () => {
    const connecting = step(start(), { type: 'host.connect' })
    expect(connecting.io).toEqual([
      { type: 'tellControl', params: { type: 'control.reset' } },
      { type: 'startReconnect', params: { policy: connecting.s.context.config.reconnectPolicy, env } },
      { type: 'openTransport', params: { generation: 1, epoch: 1, conflictProbe: false } },
    ])
    const joining = step(connecting.s, { type: 'socket.open', generation: 1, epoch: 1 })
    expect(joining.io).toEqual([
      { type: 'tellReconnect', params: { type: 'reconnect.opened' } },
      { type: 'joinControl', params: { generation: 1, epoch: 1 } },
    ])
  })

  it('under a bare XState actor its I/O actions do nothing: the chart still decides, and times out the connect', () => {
    const bare = createActor(connectionMachine, { input: { env }, clock: new SimulatedClock() }).start()
    bare.send({ type: 'host.connect' })
    expect(linkStateOf(bare.getSnapshot().value)).toBe('connecting')
    expect(bare.getSnapshot().children).toEqual({})
    bare.stop()
  })

  it("XState's own events that reach no transition are not reported as ignored; other unhandled events are", () => {
    const s = connected()
    expect(step(s, { type: 'xstate.after.somewhere' } as never).emitted).toEqual([])
    expect(step(s, { type: 'reconnect.due' }).emitted).toEqual([{ type: 'link.ignored', event: 'reconnect.due', detail: 'not handled in this state' }])
  })

  it('a 409 the moment the connection was lost (no time elapsed on the monotonic clock) is still our own conflict', () => {
    const s = run(waiting(connected()), { type: 'reconnect.due' })
    // env.monotonic is fixed at 1000: the loss and the 409 are at the same instant.
    expect(state(run(s, upgradeEvent(s, 409)))).toBe('reconnecting')
  })
})

describe('rule: events of a stale transport are ignored', () => {
  it('a close of the previous transport of the same session, read after the next one connected, changes nothing and is reported', () => {
    let s = run(waiting(), { type: 'reconnect.due' })
    s = run(s, { type: 'socket.open', ...origin(s) }, { type: 'control.joinOk', ...origin(s) })
    expect(s.context).toMatchObject({ generation: 2, epoch: 1 })
    const r = step(s, closeEvent(s, 1000, '', { generation: 1, epoch: 1 }))
    expect(state(r.s)).toBe('connected')
    expect(r.emitted).toEqual([{ type: 'link.ignored', event: 'socket.close', detail: 'from a stale transport (generation 1, current 2)' }])
  })
})

