/** The simulator's presence tracker forgets principals that are gone, so its memory follows live agents, not all agents ever seen. */
import { describe, expect, it } from 'vitest'
import { PresenceTracker, type PresenceCrossing } from '../../src/node/server/presence.js'
import { classifyClose } from '../../src/reasons.js'

describe('PresenceTracker', () => {
  it('keeps a chart only while a principal has a connection, then forgets it; a returning principal starts afresh', async () => {
    const crossings: PresenceCrossing[] = []
    const tracker = new PresenceTracker((c) => crossings.push(c))
    const reason = classifyClose({ code: 1000, reason: '' }, 0, 0)
    for (let i = 0; i < 1000; i++) tracker.opened(`agent-${i}`, `c${i}`, i)
    expect(tracker.tracked).toBe(1000)
    for (let i = 0; i < 1000; i++) tracker.closed(`agent-${i}`, `c${i}`, reason, i)
    await Promise.resolve()
    expect(tracker.tracked).toBe(0)
    expect(crossings.filter((c) => c.kind === 'last-disconnected')).toHaveLength(1000)
    tracker.opened('agent-7', 'again', 2000)
    expect(crossings.at(-1)).toMatchObject({ principal: 'agent-7', kind: 'first-connected', count: 1 })
    expect(tracker.tracked).toBe(1)
    tracker.stop()
  })

  it('a close of a principal it has no chart for (a duplicate or late close) is reported ignored and keeps nothing', async () => {
    const crossings: PresenceCrossing[] = []
    const ignored: string[] = []
    const tracker = new PresenceTracker((c) => crossings.push(c), {}, (what) => ignored.push(what))
    const reason = classifyClose({ code: 1000, reason: '' }, 0, 0)
    for (let i = 0; i < 100; i++) tracker.closed(`ghost-${i}`, `c${i}`, reason, i)
    tracker.opened('agent-1', 'c1', 0)
    tracker.closed('agent-1', 'c1', reason, 1)
    await Promise.resolve()
    tracker.closed('agent-1', 'c1', reason, 2) // the same close again, after the principal was forgotten
    expect(tracker.tracked).toBe(0)
    expect(ignored).toHaveLength(101)
    expect(ignored[0]).toBe('presence.closed of unknown connection c0 (ghost-0)')
    expect(crossings.map((c) => c.kind)).toEqual(['first-connected', 'last-disconnected'])
    tracker.stop()
  })
})
