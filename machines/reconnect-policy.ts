/**
 * Backoff, slow-down and give-up policy of the reconnect chart (machines/reconnect.ts), and its delay functions.
 * Plain data and pure functions with no XState import, so the package's public types
 * (src/policy.ts, the main entry) reach them without pulling in a chart; the chart imports them
 * from here and re-exports them. Frozen: a default cannot be changed for later links.
 */
import { assertMs, exponentialCeiling, MAX_TIMER_MS, type ReasonLike } from './types.js'

/**
 * Backoff and give-up policy. Every field in milliseconds unless it says otherwise.
 * docs/lifecycle.md's policy table is generated from this object.
 */
export const DEFAULT_RECONNECT_POLICY = {
  /**
   * Ceiling of the first full-jitter delay.
   * @default 500 — short enough that a routine deploy (close 1001/1012) costs an agent under a
   * second, long enough that 1,000 agents do not land on the server in the same millisecond.
   */
  initialDelayMs: 500,
  /** Growth of the ceiling per consecutive loss. @default 2 — the usual exponential backoff. */
  factor: 2,
  /**
   * Largest ceiling. @default 30000 — an agent never waits more than 30 s for a server that came
   * back (one of ours once stayed offline for almost a day).
   */
  maxDelayMs: 30_000,
  /**
   * Connected time after which the attempt counter starts again from the first delay.
   * @default 60000 — one minute of health means the next loss is a new incident.
   */
  stableAfterMs: 60_000,
  /**
   * A connection that lived less than this (from socket open) counts as rapid.
   * @default 5000 — a server that accepts and then closes at once is not healthy.
   */
  rapidWindowMs: 5_000,
  /**
   * Rapid connections in a row (the server accepted the socket, then closed or dropped it within
   * `rapidWindowMs`) after which the chart slows down (`onRapidLimit`). A count, not
   * milliseconds. @default 10 — an accept-then-close loop must not be hammered at backoff speed.
   */
  rapidLimit: 10,
  /**
   * Past `rapidLimit`: `suspend` (one attempt per cooldown, from `suspendInitialDelayMs` doubling
   * to `suspendMaxDelayMs`, for ever; the link state is `suspended` and the reason `suppressed`,
   * retryable) or `give-up` (the session ends `suppressed`, terminal).
   * @default "suspend" — only a supersede, an upgrade rejection or an explicit give-up end a
   * session: an agent must come back once the server is fixed, however long it was broken.
   */
  onRapidLimit: 'suspend' as 'suspend' | 'give-up',
  /** The first cooldown while suspended. @default 30000 — Ably's suspended retry timeout. */
  suspendInitialDelayMs: 30_000,
  /** The largest cooldown while suspended. @default 300000 — a fixed server is found within five minutes. */
  suspendMaxDelayMs: 300_000,
  /**
   * Reconnect attempts allowed in a row: the chart gives up with `suppressed` at the next loss (with
   * 2, the third consecutive loss ends the session, `attempts: 3`; with 0, the first); `null` never gives up.
   * A count. @default null — an agent keeps trying through any outage.
   */
  maxAttempts: null as number | null,
  /**
   * Delay range after close 1001 (going away, RFC 6455 section 7.4.1): a server shutting down or
   * redeploying says this to every agent at once, so their returns are spread over the range.
   * @default [0, 2000] — schedules about 5% of a fleet per 100 ms (bench/ "reconnect storm": peak window about 6%
   * of 2,000 links scheduled), each back within 2 s of its own delay.
   */
  goingAwayFloorMs: [0, 2_000] as readonly [number, number],
  /**
   * Delay range after close 1012 (service restart, RFC 6455 section 7.4.1 via the IANA registry):
   * the server is coming back, not yet. @default [1000, 5000]
   */
  serviceRestartFloorMs: [1_000, 5_000] as readonly [number, number],
  /**
   * Delay range after close 1013 (try again later): the server asked for room.
   * @default [30000, 60000]
   */
  tryAgainLaterFloorMs: [30_000, 60_000] as readonly [number, number],
  /**
   * Cap on a server's Retry-After. @default 300000 — five minutes; a malformed or hostile
   * Retry-After must not park an agent for a day.
   */
  maxRetryAfterMs: 300_000,
}

/** Backoff and give-up policy; see {@link DEFAULT_RECONNECT_POLICY} for each field. */
export type ReconnectPolicy = typeof DEFAULT_RECONNECT_POLICY

/**
 * Checks a reconnect policy, field by field.
 *
 * @throws {RangeError} naming the first field that is out of range.
 */
export function validateReconnectPolicy(policy: ReconnectPolicy): ReconnectPolicy {
  assertMs('reconnect.initialDelayMs', policy.initialDelayMs)
  assertMs('reconnect.maxDelayMs', policy.maxDelayMs)
  assertMs('reconnect.stableAfterMs', policy.stableAfterMs)
  assertMs('reconnect.rapidWindowMs', policy.rapidWindowMs)
  assertMs('reconnect.maxRetryAfterMs', policy.maxRetryAfterMs)
  if (policy.maxDelayMs < policy.initialDelayMs) {
    // A ceiling below the first delay caps every delay, so initialDelayMs would mean nothing: a unit slip.
    throw new RangeError(`reconnect.maxDelayMs (${policy.maxDelayMs}) must be at least reconnect.initialDelayMs (${policy.initialDelayMs})`)
  }
  if (!(policy.factor >= 1 && Number.isFinite(policy.factor))) {
    throw new RangeError(`reconnect.factor must be a finite number >= 1, got ${policy.factor}`)
  }
  if (policy.stableAfterMs < policy.rapidWindowMs) {
    throw new RangeError(
      `reconnect.stableAfterMs (${policy.stableAfterMs}) must be at least reconnect.rapidWindowMs (${policy.rapidWindowMs}): a connection is stable only once it is no longer rapid`,
    )
  }
  if (!(Number.isInteger(policy.rapidLimit) && policy.rapidLimit >= 1)) {
    throw new RangeError(`reconnect.rapidLimit must be a whole number >= 1, got ${policy.rapidLimit}`)
  }
  if (policy.onRapidLimit !== 'suspend' && policy.onRapidLimit !== 'give-up') {
    throw new RangeError(`reconnect.onRapidLimit must be 'suspend' or 'give-up', got ${String(policy.onRapidLimit)}`)
  }
  assertMs('reconnect.suspendInitialDelayMs', policy.suspendInitialDelayMs, 1)
  assertMs('reconnect.suspendMaxDelayMs', policy.suspendMaxDelayMs, 1)
  if (policy.suspendMaxDelayMs < policy.suspendInitialDelayMs) {
    throw new RangeError(`reconnect.suspendMaxDelayMs (${policy.suspendMaxDelayMs}) must be at least reconnect.suspendInitialDelayMs (${policy.suspendInitialDelayMs})`)
  }
  if (policy.maxAttempts !== null && !(Number.isInteger(policy.maxAttempts) && policy.maxAttempts >= 0)) {
    throw new RangeError(`reconnect.maxAttempts must be null or a whole number >= 0, got ${policy.maxAttempts}`)
  }
  for (const name of ['goingAwayFloorMs', 'serviceRestartFloorMs', 'tryAgainLaterFloorMs'] as const) {
    const range: unknown = policy[name]
    if (!Array.isArray(range) || range.length !== 2) {
      const got = Array.isArray(range) ? `an array of ${range.length}` : typeof range === 'bigint' ? `${range}n` : range === null ? 'null' : typeof range === 'object' ? 'an object' : typeof range === 'function' ? 'a function' : String(range)
      throw new RangeError(`reconnect.${name} must be a [low, high] pair of milliseconds, got ${got}`)
    }
    const [lo, hi] = range as [number, number]
    assertMs(`reconnect.${name}[0]`, lo)
    assertMs(`reconnect.${name}[1]`, hi)
    if (lo > hi) throw new RangeError(`reconnect.${name} must be [low, high] with low <= high, got [${lo}, ${hi}]`)
  }
  return policy
}

/**
 * The delay before the next attempt, in milliseconds: full jitter (a uniform draw below an
 * exponential ceiling), raised to the range of the close code (1001, 1012, 1013) or to the
 * server's Retry-After (capped), whichever is longer; never over 2^31-1 (`MAX_TIMER_MS`, the
 * longest delay a timer takes). An `initialDelayMs` of 0 gives 0 at every attempt.
 *
 * @param attempt consecutive losses so far, counting this one (1 for the first).
 * @param roll a number in [0, 1) from the injected random source.
 */
export function backoffDelay(policy: ReconnectPolicy, attempt: number, reason: ReasonLike, roll: number): number {
  const ceiling = exponentialCeiling(policy.initialDelayMs, policy.factor, attempt - 1, policy.maxDelayMs)
  let delay = Math.floor(roll * ceiling)
  const floor =
    reason.closeCode === 1001
      ? policy.goingAwayFloorMs
      : reason.closeCode === 1012
        ? policy.serviceRestartFloorMs
        : reason.closeCode === 1013
          ? policy.tryAgainLaterFloorMs
          : null
  if (floor) delay = Math.max(delay, Math.floor(floor[0] + roll * (floor[1] - floor[0])))
  if (typeof reason.retryAfterMs === 'number' && reason.retryAfterMs > 0) {
    // Retry-After is a minimum; the jitter on top spreads the agents a server refused together.
    const wait = Math.min(reason.retryAfterMs, policy.maxRetryAfterMs)
    delay = Math.max(delay, wait + Math.floor(roll * policy.initialDelayMs))
  }
  // A timer takes no longer delay (a Retry-After capped at 2^31-1 plus its jitter would run after 1 ms).
  return Math.min(delay, MAX_TIMER_MS)
}

/**
 * The part of a wait after `reason` that the server asked for, in milliseconds: its Retry-After
 * (429/503, RFC 9110 section 10.2.3; capped at `maxRetryAfterMs`), or the low end of the range of
 * a close 1012 (service restart) or 1013 (try again later; RFC 6455 section 7.4.1 via the IANA
 * registry), whichever is longer; 0 for any other loss. A host's `reconnect()` cuts a wait down to
 * this, never below it.
 */
export function serverFloorMs(policy: ReconnectPolicy, reason: ReasonLike): number {
  const range = reason.closeCode === 1012 ? policy.serviceRestartFloorMs : reason.closeCode === 1013 ? policy.tryAgainLaterFloorMs : null
  // No Retry-After (null) counts as 0; the max with the range's low end (or 0) keeps the floor at 0 or more.
  const retryAfter = Math.min(reason.retryAfterMs ?? 0, policy.maxRetryAfterMs)
  return Math.min(Math.max(range?.[0] ?? 0, retryAfter), MAX_TIMER_MS)
}

/**
 * How much of a backoff wait a host's `reconnect()` (the chart's `reconnect.retryNow`) cannot cut
 * besides the server's floor, counted from the wait's start, in milliseconds: nothing for the
 * first retry now of a row, then the backoff's own ceilings for each one in a row after it
 * (`initialDelayMs`, times `factor` per retry, up to `maxDelayMs`). A row ends when a wait runs
 * out on its own or a connection outlives the rapid window. So a host that calls reconnect() on an
 * event (the browser's `online`) retries at once, and one that calls it on a timer against a
 * server that keeps refusing backs off about as the link would on its own (before this, every call
 * was an attempt: about 80 a second from a 10 ms timer against a server answering 500, a breaker's
 * run of 2026-12-06). A `suspended` cooldown is cut by the first retry now of a row only. The
 * chart never lengthens a wait with it.
 *
 * @param retries retries now in a row so far (0 for the first).
 */
export function retryNowFloorMs(policy: ReconnectPolicy, retries: number): number {
  return retries === 0 ? 0 : exponentialCeiling(policy.initialDelayMs, policy.factor, retries - 1, policy.maxDelayMs)
}

/**
 * The cooldown before the next attempt while suspended, in milliseconds: a ceiling from
 * `suspendInitialDelayMs` doubling per cooldown in a row up to `suspendMaxDelayMs`, drawn in its
 * upper half (fixed enough to be a slow-down, jittered enough that a fleet does not return at
 * once), and never shorter than the server's Retry-After (capped).
 *
 * @param suspensions cooldowns in a row so far, counting this one (1 for the first).
 * @param roll a number in [0, 1) from the injected random source.
 */
export function cooldownDelay(policy: ReconnectPolicy, suspensions: number, reason: ReasonLike, roll: number): number {
  const ceiling = exponentialCeiling(policy.suspendInitialDelayMs, 2, suspensions - 1, policy.suspendMaxDelayMs)
  const delay = Math.floor(ceiling / 2 + (roll * ceiling) / 2)
  const retryAfter = typeof reason.retryAfterMs === 'number' ? Math.min(reason.retryAfterMs, policy.maxRetryAfterMs) : 0
  return Math.max(delay, retryAfter)
}

Object.freeze(DEFAULT_RECONNECT_POLICY)
for (const range of [DEFAULT_RECONNECT_POLICY.goingAwayFloorMs, DEFAULT_RECONNECT_POLICY.serviceRestartFloorMs, DEFAULT_RECONNECT_POLICY.tryAgainLaterFloorMs]) Object.freeze(range)
