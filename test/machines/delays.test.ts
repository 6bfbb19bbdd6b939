/**
 * The delay formulas, to the millisecond: the reconnect backoff with its floors and Retry-After,
 * the suspension cooldown, and the channel rejoin delay. Each is checked at the roll's ends and
 * in between, so a changed operator or bound shows as a wrong number, not a plausible one.
 */
import { describe, expect, it } from 'vitest'
import { DEFAULT_CHANNEL_POLICY, rejoinDelayMs } from '../../machines/channel.js'
import { backoffDelay, cooldownDelay, DEFAULT_RECONNECT_POLICY, type ReconnectPolicy } from '../../machines/reconnect.js'
import type { ReasonLike } from '../../machines/types.js'

const loss = (extra: Partial<ReasonLike> = {}): ReasonLike => ({ kind: 'closed', retryable: true, generation: 1, at: 0, ...extra })
const policy = (patch: Partial<ReconnectPolicy> = {}): ReconnectPolicy => ({ ...DEFAULT_RECONNECT_POLICY, ...patch })

describe('backoffDelay', () => {
  it('draws below the ceiling, which doubles per attempt up to maxDelayMs', () => {
    const p = policy({ initialDelayMs: 1_000, factor: 2, maxDelayMs: 8_000 })
    expect(backoffDelay(p, 1, loss(), 0.5)).toBe(500)
    expect(backoffDelay(p, 2, loss(), 0.5)).toBe(1_000)
    expect(backoffDelay(p, 4, loss(), 0.5)).toBe(4_000)
    expect(backoffDelay(p, 9, loss(), 0.5)).toBe(4_000)
    expect(backoffDelay(p, 0, loss(), 0.5)).toBe(500) // attempt 0 reads as the first
  })

  it('waits at least a Retry-After, capped at maxRetryAfterMs, plus a jitter of up to initialDelayMs', () => {
    const p = policy({ initialDelayMs: 1_000, maxRetryAfterMs: 60_000 })
    expect(backoffDelay(p, 1, loss({ retryAfterMs: 10_000 }), 0.25)).toBe(10_250)
    expect(backoffDelay(p, 1, loss({ retryAfterMs: 600_000 }), 0)).toBe(60_000)
    expect(backoffDelay(p, 1, loss({ retryAfterMs: 1 }), 0)).toBe(1)
  })

  it('never exceeds what a timer takes (2^31-1 ms): a Retry-After at a cap of 2^31-1 plus its jitter would run after 1 ms', () => {
    const p = policy({ initialDelayMs: 500, maxRetryAfterMs: 2 ** 31 - 1 })
    expect(backoffDelay(p, 1, loss({ retryAfterMs: 99_999_999_000 }), 0.5)).toBe(2 ** 31 - 1)
    expect(backoffDelay(p, 1, loss({ retryAfterMs: 2 ** 31 - 1_000 }), 0.5)).toBe(2 ** 31 - 1_000 + 250)
  })

  it('with initialDelayMs 0 is 0 at every attempt, never NaN once factor^attempt overflows; a Retry-After still holds', () => {
    for (const factor of [2, 1e10]) {
      const p = policy({ initialDelayMs: 0, factor })
      for (const attempt of [1, 32, 1025, 5000]) {
        expect(backoffDelay(p, attempt, loss(), 0.5)).toBe(0)
        expect(backoffDelay(p, attempt, loss({ retryAfterMs: 50 }), 0.5)).toBe(50)
      }
    }
    // A huge factor with a positive initial delay reaches maxDelayMs, not Infinity.
    expect(backoffDelay(policy({ initialDelayMs: 1, factor: 1e300, maxDelayMs: 10_000 }), 40, loss(), 0.5)).toBe(5_000)
  })

  it('adds no Retry-After jitter without a Retry-After, even when maxDelayMs is below initialDelayMs', () => {
    const p = policy({ initialDelayMs: 1_000, maxDelayMs: 100 })
    expect(backoffDelay(p, 1, loss(), 0.9)).toBe(90)
    expect(backoffDelay(p, 1, loss({ retryAfterMs: 0 }), 0.9)).toBe(90)
    expect(backoffDelay(p, 1, loss({ retryAfterMs: null }), 0.9)).toBe(90)
    expect(backoffDelay(p, 1, loss({ retryAfterMs: 50 }), 0.9)).toBe(950)
  })

  it('reads a zero, missing or non-number Retry-After as none', () => {
    const p = policy({ initialDelayMs: 1_000 })
    expect(backoffDelay(p, 1, loss({ retryAfterMs: 0 }), 0.5)).toBe(500)
    expect(backoffDelay(p, 1, loss({ retryAfterMs: null }), 0.5)).toBe(500)
    expect(backoffDelay(p, 1, loss({ retryAfterMs: '9000' as never }), 0.5)).toBe(500)
  })

  it('raises 1001, 1012 and 1013 to their floors, drawn in the floor range with the same roll', () => {
    const p = policy({ initialDelayMs: 100, goingAwayFloorMs: [1_000, 2_000], serviceRestartFloorMs: [3_000, 5_000], tryAgainLaterFloorMs: [10_000, 20_000] })
    expect(backoffDelay(p, 1, loss({ closeCode: 1001 }), 0.5)).toBe(1_500)
    expect(backoffDelay(p, 1, loss({ closeCode: 1012 }), 0.5)).toBe(4_000)
    expect(backoffDelay(p, 1, loss({ closeCode: 1013 }), 0.5)).toBe(15_000)
    expect(backoffDelay(p, 1, loss({ closeCode: 1000 }), 0.5)).toBe(50)
  })
})

describe('cooldownDelay', () => {
  const p = policy({ suspendInitialDelayMs: 10_000, suspendMaxDelayMs: 40_000, maxRetryAfterMs: 100_000 })

  it('draws in the upper half of a ceiling that doubles per cooldown up to suspendMaxDelayMs', () => {
    expect(cooldownDelay(p, 1, loss(), 0)).toBe(5_000)
    expect(cooldownDelay(p, 1, loss(), 0.5)).toBe(7_500)
    expect(cooldownDelay(p, 1, loss(), 0.999)).toBe(9_995)
    expect(cooldownDelay(p, 2, loss(), 0)).toBe(10_000)
    expect(cooldownDelay(p, 3, loss(), 0)).toBe(20_000)
    expect(cooldownDelay(p, 9, loss(), 0)).toBe(20_000)
    expect(cooldownDelay(p, 0, loss(), 0)).toBe(5_000)
  })

  it('is never shorter than a Retry-After, capped at maxRetryAfterMs; zero or missing is none', () => {
    expect(cooldownDelay(p, 1, loss({ retryAfterMs: 60_000 }), 0)).toBe(60_000)
    expect(cooldownDelay(p, 1, loss({ retryAfterMs: 500_000 }), 0)).toBe(100_000)
    expect(cooldownDelay(p, 1, loss({ retryAfterMs: 1_000 }), 0)).toBe(5_000)
    expect(cooldownDelay(p, 1, loss({ retryAfterMs: 0 }), 0)).toBe(5_000)
    expect(cooldownDelay(p, 1, loss({ retryAfterMs: -5 }), 0)).toBe(5_000)
    expect(cooldownDelay(p, 1, loss({ retryAfterMs: '60000' as never }), 0)).toBe(5_000)
  })
})

describe('rejoinDelayMs', () => {
  const p = { ...DEFAULT_CHANNEL_POLICY, rejoinInitialDelayMs: 1_000, rejoinMaxDelayMs: 6_000 }

  it('draws in the upper half of a ceiling that doubles per rejoin up to rejoinMaxDelayMs', () => {
    expect(rejoinDelayMs(p, 1, 0)).toBe(500)
    expect(rejoinDelayMs(p, 1, 0.5)).toBe(750)
    expect(rejoinDelayMs(p, 1, 0.999)).toBe(999)
    expect(rejoinDelayMs(p, 2, 0)).toBe(1_000)
    expect(rejoinDelayMs(p, 3, 0)).toBe(2_000)
    expect(rejoinDelayMs(p, 4, 0)).toBe(3_000)
    expect(rejoinDelayMs(p, 0, 0)).toBe(500)
  })

  it('with rejoinInitialDelayMs 0 is 0 at every rejoin, never NaN once 2^rejoins overflows', () => {
    const zero = { ...p, rejoinInitialDelayMs: 0 }
    for (const rejoins of [1, 1025, 5000]) expect(rejoinDelayMs(zero, rejoins, 0.5)).toBe(0)
  })
})
