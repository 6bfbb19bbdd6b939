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
})
