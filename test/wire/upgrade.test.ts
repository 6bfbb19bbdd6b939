/**
 * SCENARIOS 17-20 on the real wire: a refused upgrade is terminal, except 429 and 503, and a
 * 409 from our own lost socket that the platform still holds (on_conflict=reject).
 */
import { describe, expect, it } from 'vitest'
import { AgentDisconnectedError } from '../../src/errors/agent-disconnected.js'
import { next, settle, useWorld } from '../support/wire.js'

const world = useWorld()

describe('rule: upgrade rejection is terminal', () => {
  it('a wrong API key: HTTP 403 -> rejected(unauthenticated), connect() rejects, no retry (scenario 17)', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { apiKey: 'wrong-key' })
    const r = await settle(link.connect())
    const error = (r as { error: AgentDisconnectedError }).error
    expect(error).toBeInstanceOf(AgentDisconnectedError)
    expect(error.reason).toMatchObject({ kind: 'rejected', cause: 'unauthenticated', phase: 'upgrade', status: 403, retryable: false })
    expect(link.state).toBe('terminated')
    await link.disconnect()
    expect(sim.upgrades.map((u) => u.status)).toEqual([403])
  })

  for (const [status, cause] of [
    [401, 'unauthenticated'],
    [400, 'protocol-error'],
    [409, 'conflict'],
  ] as const) {
    it(`HTTP ${status} -> rejected(${cause}), terminal (scenario 18)`, async () => {
      const sim = await world().sim()
      sim.refuseUpgrades({ status })
      const link = world().link(sim)
      const r = await settle(link.connect())
      expect((r as { error: AgentDisconnectedError }).error.reason).toMatchObject({ kind: 'rejected', cause, status })
      await link.disconnect()
      expect(sim.upgrades).toHaveLength(1)
    })
  }

  it('HTTP 429 with Retry-After waits at least that long, then retries (scenario 19)', async () => {
    const sim = await world().sim()
    sim.refuseUpgrades({ status: 429, retryAfter: '1', body: 'platform' })
    const link = world().link(sim)
    const d = next(link, 'disconnected')
    await link.connect()
    const { reason, nextDelayMs } = await d
    expect(reason).toMatchObject({ kind: 'rejected', cause: 'rate-limited', retryAfterMs: 1000, errorCode: 'too_many_requests' })
    expect(nextDelayMs).toBeGreaterThanOrEqual(1000)
    expect(sim.upgrades[1]!.at - sim.upgrades[0]!.at).toBeGreaterThanOrEqual(995)
  })

  it('HTTP 429 without Retry-After uses the normal backoff (scenario 19)', async () => {
    const sim = await world().sim()
    sim.refuseUpgrades({ status: 429 })
    const link = world().link(sim)
    const d = next(link, 'disconnected')
    await link.connect()
    expect((await d).nextDelayMs).toBeLessThanOrEqual(20)
  })

  it('a refused reconnect (403) after a normal close is terminal on that attempt (scenario 20)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const run = settle(link.runForever())
    sim.refuseUpgrades({ status: 403 })
    sim.close({ agent: 'agent-1' }, 1000)
    const r = await run
    expect((r as { error: AgentDisconnectedError }).error.reason).toMatchObject({ kind: 'rejected', status: 403 })
    await link.disconnect()
    expect(sim.upgrades.map((u) => u.status)).toEqual([101, 403])
  })

  it('an unreachable port is dropped and retried, never terminal', async () => {
    const sim = await world().sim()
    const url = sim.url
    await sim.stop()
    const link = world().link(sim, { url })
    const d1 = next(link, 'disconnected')
    const d2 = next(link, 'disconnected', { filter: (e) => e.attempt === 2 })
    void link.connect().catch(() => {})
    expect((await d1).reason).toMatchObject({ kind: 'dropped', detail: expect.stringContaining('ECONNREFUSED') })
    await d2
    expect(link.state).toBe('reconnecting')
  })
})

describe('rule: our own conflict is retried (on_conflict=reject)', () => {
  // The platform closes a socket 60 s after it last received anything (docs/field-notes.md), so after a
  // loss it may still hold ours: a stalled peer stops reading, so our close never reaches it.
  it('a 409 from our own lost socket still held by the platform is retried until the platform lets go', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { onConflict: 'reject', policy: { transport: { heartbeatIntervalMs: 100 } } })
    await link.connect()
    const conflicts: Array<{ outcome: string; retryable: boolean }> = []
    link.on('disconnected', ({ reason, outcome }) => {
      if (reason.kind === 'rejected') conflicts.push({ outcome, retryable: reason.retryable })
    })
    const secondConflict = next(link, 'disconnected', { filter: (e) => e.reason.kind === 'rejected' && conflicts.length >= 2 })
    sim.stall({ agent: 'agent-1' })
    await secondConflict
    expect(conflicts.slice(0, 2)).toEqual([
      { outcome: 'reconnect', retryable: true },
      { outcome: 'reconnect', retryable: true },
    ])
    expect(link.state).not.toBe('terminated')
    // The platform lets go of the ghost (its idle timeout); the next attempt is accepted.
    const back = next(link, 'reconnected', { timeoutMs: 4_000 })
    sim.close({ agent: 'agent-1' }, 1000)
    await back
    expect(link.state).toBe('connected')
    const statuses = sim.upgrades.map((u) => u.status)
    expect(statuses[0]).toBe(101)
    expect(statuses.filter((s) => s === 409).length).toBeGreaterThanOrEqual(2)
    expect(statuses.at(-1)).toBe(101)
    expect(sim.live('agent-1')).toHaveLength(1)
  })

  it('with conflictRetryWindowMs 0 the same 409 is terminal', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { onConflict: 'reject', policy: { transport: { heartbeatIntervalMs: 100 }, connection: { conflictRetryWindowMs: 0 } } })
    await link.connect()
    const ended = settle(link.runForever())
    sim.stall({ agent: 'agent-1' })
    const r = await ended
    expect((r as { error: AgentDisconnectedError }).error.reason).toMatchObject({ kind: 'rejected', cause: 'conflict', status: 409, retryable: false })
    expect(link.state).toBe('terminated')
    expect(sim.upgrades.map((u) => u.status)).toEqual([101, 409])
  })
})
