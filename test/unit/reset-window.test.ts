/** Which reset of an accepted socket reads as a server's close that may have lost frames (transport policy resetAfterSendMs). */
import { describe, expect, it } from 'vitest'
import { resetWhileSending } from '../../src/adapter/phoenix-adapter.js'
import { DEFAULT_TRANSPORT_POLICY } from '../../src/adapter/transport-policy.js'

describe('resetWhileSending', () => {
  it('counts a reset within the window after the last frame the link sent, the bound included', () => {
    expect(resetWhileSending({ lastSentAt: 1_000, resetAt: 1_000 }, 2_000)).toBe(true)
    expect(resetWhileSending({ lastSentAt: 1_000, resetAt: 3_000 }, 2_000)).toBe(true)
    expect(resetWhileSending({ lastSentAt: 1_000, resetAt: 3_000.5 }, 2_000)).toBe(false)
  })

  it('not with no reset, nothing sent, or a window of 0 (no reset counts)', () => {
    expect(resetWhileSending({ lastSentAt: 1_000, resetAt: null }, 2_000)).toBe(false)
    expect(resetWhileSending({ lastSentAt: null, resetAt: 1_000 }, 2_000)).toBe(false)
    expect(resetWhileSending({ lastSentAt: 1_000, resetAt: 1_000 }, 0)).toBe(false)
  })

  it('defaults to 2 s', () => {
    expect(DEFAULT_TRANSPORT_POLICY.resetAfterSendMs).toBe(2_000)
  })
})
