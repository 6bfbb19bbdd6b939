/**
 * Join and rejoin policy of app channels (machines/channel.ts), and the rejoin delay function.
 * Plain data and pure functions with no XState import, so the package's public types
 * (src/policy.ts, the main entry) reach them without pulling in a chart; the chart imports them
 * from here and re-exports them. Frozen: a default cannot be changed for later links.
 */
import { assertMs, exponentialCeiling } from './types.js'

/** Join and rejoin policy of app channels; milliseconds. */
export const DEFAULT_CHANNEL_POLICY = {
  /**
   * Wait for a join reply before the join counts as timed out.
   * @default 10000 — phoenix.js's default push timeout (assets/js/phoenix/constants.js DEFAULT_TIMEOUT).
   */
  joinTimeoutMs: 10_000,
  /** Ceiling of the first rejoin delay after phx_error or a join timeout. @default 1000 — phoenix.js rejoinAfterMs starts at 1000. */
  rejoinInitialDelayMs: 1_000,
  /** Largest rejoin ceiling. @default 10000 — phoenix.js rejoinAfterMs ends at 10000. */
  rejoinMaxDelayMs: 10_000,
  /**
   * How long a channel stays joined before its rejoin backoff starts over. @default 10000 — the
   * largest rejoin ceiling. phoenix.js resets at every join reply (channel.js, rejoinTimer.reset()
   * on "ok"), so a channel whose server process crashes right after each join is rejoined about
   * once a second for ever; here it backs off to `rejoinMaxDelayMs` and stays there until a join holds.
   */
  rejoinStableAfterMs: 10_000,
  /**
   * Longest wait for a host leave before the channel counts as left anyway. With the pinned
   * phoenix.js 1.8.16 the leave counts as done once its phx_leave is sent (docs/field-notes.md),
   * so this bound is not reached on the wire; the server's reply, when it comes, is expected and
   * dropped. @default 1000
   */
  leaveTimeoutMs: 1_000,
  /**
   * Cap on the `retry_after` of a join refused for a cause that passes (rate_limited): the rejoin
   * waits at least that long, up to this. @default 300000 — five minutes, as the reconnect
   * policy's `maxRetryAfterMs`: a hostile retry_after must not park a channel for a day.
   */
  maxRetryAfterMs: 300_000,
}

/** App channel policy; see {@link DEFAULT_CHANNEL_POLICY}. */
export type ChannelPolicy = typeof DEFAULT_CHANNEL_POLICY

/**
 * Checks a channel policy.
 *
 * @throws {RangeError} naming the first field that is out of range.
 */
export function validateChannelPolicy(policy: ChannelPolicy): ChannelPolicy {
  // A join wait of 0 ms could never be met: every attempt would time out at once, forever.
  for (const [name, value] of Object.entries(policy)) assertMs(`channel.${name}`, value, name === 'joinTimeoutMs' ? 1 : 0)
  return policy
}

/**
 * The delay before rejoining a channel after phx_error or a join timeout, in milliseconds: a
 * ceiling from `rejoinInitialDelayMs` doubling per rejoin in a row up to `rejoinMaxDelayMs`
 * (phoenix.js rejoinAfterMs runs 1000, 2000, 5000, then 10000), drawn in its upper half. Half
 * fixed, half jitter: a crashed channel process needs a moment, and many agents rejoining one
 * crashed topic must not arrive together. The control channel's rejoin uses it too.
 *
 * @param rejoins rejoins in a row so far (since a join last held `rejoinStableAfterMs`), counting this one (1 for the first).
 * @param roll a number in [0, 1) from the injected random source.
 */
export function rejoinDelayMs(policy: ChannelPolicy, rejoins: number, roll: number): number {
  const ceiling = exponentialCeiling(policy.rejoinInitialDelayMs, 2, rejoins - 1, policy.rejoinMaxDelayMs)
  return Math.floor(ceiling / 2 + (roll * ceiling) / 2)
}

Object.freeze(DEFAULT_CHANNEL_POLICY)
