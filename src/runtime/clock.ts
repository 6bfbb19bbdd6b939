/**
 * The scheduler the charts' delays run on. Its own file, with no XState import, so the package's
 * public types (`LinkOptions.clock`) reach it without loading XState's declarations.
 */

/**
 * The scheduler the charts' delays run on: `setTimeout`/`clearTimeout` in milliseconds, as XState's
 * `Clock` (xstate system.ts), and `now()`, milliseconds on the same clock (monotonic: only
 * differences are read). `new SimulatedClock()` from xstate implements all three, for tests.
 */
export interface Clock {
  setTimeout(fn: (...args: unknown[]) => void, timeout: number): unknown
  clearTimeout(id: unknown): void
  now(): number
}

/** Real timers, with `performance.now()`. */
export const REAL_CLOCK: Clock = {
  setTimeout: (fn, timeout) => setTimeout(fn, timeout),
  clearTimeout: (id) => clearTimeout(id as ReturnType<typeof setTimeout>),
  now: () => performance.now(),
}
