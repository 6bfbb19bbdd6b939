/**
 * The presence chart: first-connected and last-disconnected only on crossings of zero, after the
 * count changes, in count order; any number of connections closing in any order; a close racing
 * an open; the grace window.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { createActor, SimulatedClock } from 'xstate'
import { presenceMachine, validatePresencePolicy, type PrincipalPresence } from '../../machines/presence.js'
import { classifyClose, classifySupersede, classifyUpgrade, type DisconnectReason } from '../../src/reasons.js'
import { gracefulReason, suppressedReason, timedOutReason } from '../../machines/types.js'
import { normalLoss } from '../support/chart.js'

function harness(graceWindowMs = 0) {
  const clock = new SimulatedClock()
  const events: Array<{ type: string; kind?: string; count?: number; reason?: unknown }> = []
  const actor = createActor(presenceMachine, { input: { principal: 'agent-1', policy: { graceWindowMs } }, clock })
  actor.on('*', (e) => events.push(e as never))
  actor.start()
  let t = 0
  return {
    clock,
    events,
    crossings: () => events.filter((e) => e.type === 'principal-presence') as unknown as PrincipalPresence[],
    open: (id: string) => actor.send({ type: 'presence.opened', connectionId: id, at: ++t }),
    close: (id: string, reason: DisconnectReason = classifyClose({ code: 1000, reason: '' }, 1, 0)) =>
      actor.send({ type: 'presence.closed', connectionId: id, reason, at: ++t }),
    count: () => actor.getSnapshot().context.connections.length,
    flush: () => actor.send({ type: 'presence.flush' }),
    state: () => actor.getSnapshot().value,
    stop: () => actor.stop(),
  }
}

describe('presence chart', () => {
  it('presence.flush (the server stops) ends an open grace window at once; elsewhere it changes nothing', () => {
    const h = harness(60_000)
    h.flush()
    expect(h.state()).toBe('absent')
    h.open('a')
    h.flush()
    expect(h.state()).toBe('present')
    const reason = classifyClose({ code: 1011, reason: '' }, 1, 0)
    h.close('a', reason)
    expect(h.state()).toBe('grace')
    h.flush()
    expect(h.state()).toBe('absent')
    expect(h.crossings().map((c) => [c.kind, c.reason])).toEqual([
      ['first-connected', null],
      ['last-disconnected', reason],
    ])
    h.clock.increment(60_000)
    expect(h.crossings()).toHaveLength(2) // the grace timer was cancelled with the state
    h.stop()
  })

  it('one connection: first-connected, then last-disconnected with the reason', () => {
    const h = harness()
    h.open('a')
    const reason = classifySupersede({}, 1, 0)
    h.close('a', reason)
    expect(h.crossings()).toEqual([
      { type: 'principal-presence', principal: 'agent-1', kind: 'first-connected', count: 1, reason: null, at: 1 },
      { type: 'principal-presence', principal: 'agent-1', kind: 'last-disconnected', count: 0, reason, at: 2 },
    ])
    h.stop()
  })

  for (const n of [1, 2, 50]) {
    it(`${n} connections closing in any order: exactly one first-connected and one last-disconnected, carrying the last close's reason`, () => {
      fc.assert(
        fc.property(fc.shuffledSubarray([...Array(n).keys()], { minLength: n, maxLength: n }), (order) => {
          const h = harness()
          for (let i = 0; i < n; i++) h.open(`c${i}`)
          expect(h.count()).toBe(n)
          const reasons = order.map((i) => classifyClose({ code: 4000 + i, reason: '' }, 1, 0))
          order.forEach((i, k) => h.close(`c${i}`, reasons[k]))
          const crossings = h.crossings()
          expect(crossings.map((c) => c.kind)).toEqual(['first-connected', 'last-disconnected'])
          expect(crossings[1]!.reason).toBe(reasons.at(-1))
          expect(h.count()).toBe(0)
          h.stop()
        }),
        { numRuns: n === 1 ? 1 : 50 },
      )
    })
  }

  it('a close racing an open: close first gives two crossings; open first gives none', () => {
    const closeFirst = harness()
    closeFirst.open('a')
    closeFirst.close('a')
    closeFirst.open('b')
    expect(closeFirst.crossings().map((c) => c.kind)).toEqual(['first-connected', 'last-disconnected', 'first-connected'])
    const openFirst = harness()
    openFirst.open('a')
    openFirst.open('b')
    openFirst.close('a')
    expect(openFirst.crossings().map((c) => c.kind)).toEqual(['first-connected'])
    expect(openFirst.count()).toBe(1)
    closeFirst.stop()
    openFirst.stop()
  })

  it('flapping: every crossing is an event by default', () => {
    const h = harness()
    for (let i = 0; i < 5; i++) {
      h.open(`x${i}`)
      h.close(`x${i}`)
    }
    expect(h.crossings().map((c) => c.kind)).toEqual(Array(5).fill(['first-connected', 'last-disconnected']).flat())
    h.stop()
  })

  it('a grace window hides a reconnect within it, and reports the last close after it', () => {
    const h = harness(1_000)
    h.open('a')
    h.close('a')
    h.clock.increment(999)
    h.open('b')
    expect(h.crossings().map((c) => c.kind)).toEqual(['first-connected'])
    const reason = classifyClose({ code: 1001, reason: '' }, 1, 0)
    h.close('b', reason)
    h.clock.increment(999)
    expect(h.crossings()).toHaveLength(1)
    h.clock.increment(1)
    expect(h.crossings().at(-1)).toMatchObject({ kind: 'last-disconnected', reason })
    h.stop()
  })

  it('every reason kind reaches last-disconnected', () => {
    const reasons: DisconnectReason[] = [
      gracefulReason(1, 0) as DisconnectReason,
      classifySupersede({}, 1, 0),
      classifyUpgrade({ status: 403 }, 1, 0),
      classifyClose({ code: 1000, reason: '' }, 1, 0),
      classifyClose({ code: 1006, reason: '' }, 1, 0),
      timedOutReason('join', 1, 0) as DisconnectReason,
      suppressedReason('rapid-disconnects', 10, normalLoss(1), 0) as DisconnectReason,
      classifyUpgrade({ status: 404 }, 1, 0),
    ]
    const h = harness()
    reasons.forEach((reason, i) => {
      h.open(`r${i}`)
      h.close(`r${i}`, reason)
    })
    expect(h.crossings().filter((c) => c.kind === 'last-disconnected').map((c) => c.reason!.kind)).toEqual([
      'graceful',
      'superseded',
      'rejected',
      'closed',
      'dropped',
      'timed-out',
      'suppressed',
      'other',
    ])
    h.stop()
  })

  it('a close of an unknown connection and a repeated open are reported, never counted', () => {
    const h = harness()
    h.close('ghost')
    h.open('a')
    h.open('a')
    h.close('ghost')
    expect(h.count()).toBe(1)
    expect(h.events.filter((e) => e.type === 'presence-ignored')).toEqual([
      { type: 'presence-ignored', principal: 'agent-1', event: 'presence.closed', connectionId: 'ghost' },
      { type: 'presence-ignored', principal: 'agent-1', event: 'presence.opened', connectionId: 'a' },
      { type: 'presence-ignored', principal: 'agent-1', event: 'presence.closed', connectionId: 'ghost' },
    ])
    expect(h.crossings().map((c) => c.kind)).toEqual(['first-connected'])
    h.stop()
  })

  it('the grace window is checked: whole milliseconds from 0', () => {
    expect(validatePresencePolicy({ graceWindowMs: 0 })).toEqual({ graceWindowMs: 0 })
    for (const bad of [-1, 1.5, Number.NaN, 2 ** 31]) expect(() => validatePresencePolicy({ graceWindowMs: bad }), String(bad)).toThrow(/presence.graceWindowMs/)
  })
})
