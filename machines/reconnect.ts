/**
 * The reconnect statechart: after each loss of a session's transport, "retry after d ms" or
 * "give up". Invoked by the connection chart for the life of one session, so every session
 * starts from the first delay with no rapid streak.
 *
 *   idle --reconnect.opened--> up (young | settled) x (settling | stable)
 *   idle | up --reconnect.lost--> deciding --> waiting --after backoffDelay--> idle
 *                                          \-> gaveUp (final: `suppressed`)
 *
 * Only retryable losses reach it: the connection chart ends the session itself on a terminal
 * reason (supersede, upgrade rejection), so nothing here can turn a stop into a retry.
 */
import { assign, sendParent, setup, stateIn } from 'xstate'
import { assertMs, suppressedReason, type Env, type ReasonLike, type SuppressedReason } from './types.js'

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
   * Rapid connections in a row after which the chart gives up with `suppressed`.
   * A count, not milliseconds. @default 10 — ends accept-then-close loops that backoff alone
   * would keep alive forever.
   */
  rapidLimit: 10,
  /**
   * Consecutive losses after which the chart gives up with `suppressed`; `null` never gives up.
   * A count. @default null — an agent keeps trying through any outage.
   */
  maxAttempts: null as number | null,
  /**
   * Delay range after close 1001 (going away, RFC 6455 section 7.4.1): a server shutting down or
   * redeploying says this to every agent at once, so their returns are spread over the range.
   * @default [0, 2000] — schedules about 5% of a fleet per 100 ms (bench/ "reconnect storm": peak window 6.5%
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
  if (policy.maxAttempts !== null && !(Number.isInteger(policy.maxAttempts) && policy.maxAttempts >= 0)) {
    throw new RangeError(`reconnect.maxAttempts must be null or a whole number >= 0, got ${policy.maxAttempts}`)
  }
  for (const name of ['goingAwayFloorMs', 'serviceRestartFloorMs', 'tryAgainLaterFloorMs'] as const) {
    const [lo, hi] = policy[name]
    assertMs(`reconnect.${name}[0]`, lo)
    assertMs(`reconnect.${name}[1]`, hi)
    if (lo > hi) throw new RangeError(`reconnect.${name} must be [low, high] with low <= high, got [${lo}, ${hi}]`)
  }
  return policy
}

/**
 * The delay before the next attempt, in milliseconds: full jitter (a uniform draw below an
 * exponential ceiling), raised to the range of the close code (1001, 1012, 1013) or to the
 * server's Retry-After (capped), whichever is longer.
 *
 * @param attempt consecutive losses so far, counting this one (1 for the first).
 * @param roll a number in [0, 1) from the injected random source.
 */
export function backoffDelay(policy: ReconnectPolicy, attempt: number, reason: ReasonLike, roll: number): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.initialDelayMs * policy.factor ** Math.max(0, attempt - 1))
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
  return delay
}

/** Events of the reconnect chart; all are sent by the connection chart (machines/connection.ts). */
export type ReconnectEvent =
  /** The session's transport opened: the connection-lifetime windows start. */
  | { type: 'reconnect.opened' }
  /** The transport was lost for a retryable reason. */
  | { type: 'reconnect.lost'; reason: ReasonLike }

/** Events the reconnect chart sends to its parent, the connection chart. */
export type ReconnectReport =
  /** A retry is scheduled after `delayMs`; `attempt` counts consecutive losses. */
  | { type: 'reconnect.scheduled'; delayMs: number; attempt: number }
  /** The scheduled delay has passed: open the next transport. */
  | { type: 'reconnect.due' }
  /** The chart gave up; the session ends with this `suppressed` reason. */
  | { type: 'reconnect.gaveUp'; reason: SuppressedReason }

/** Input of the reconnect chart. */
export interface ReconnectInput {
  policy: ReconnectPolicy
  env: Env
}

/** Context of the reconnect chart. */
export interface ReconnectContext {
  policy: ReconnectPolicy
  env: Env
  /** Consecutive losses since the session started or last stayed up `stableAfterMs`. */
  attempt: number
  /** Connections in a row that lived less than `rapidWindowMs`. */
  rapidStreak: number
  /** The delay chosen for the pending retry, in milliseconds. */
  delayMs: number
  /** The loss being decided. */
  lastLoss: ReasonLike | null
}

/** The reconnect statechart. Pure: time comes from `after` delays, randomness from `input.env`. */
export const reconnectMachine = setup({
  types: {
    context: {} as ReconnectContext,
    events: {} as ReconnectEvent,
    input: {} as ReconnectInput,
  },
  guards: {
    /** The lost connection had been open less than `rapidWindowMs`. */
    livedBriefly: stateIn('#reconnect.up.rapidness.young'),
    /** `rapidLimit` short-lived connections in a row: an accept-then-close loop. */
    isRapidLimitReached: ({ context }) => context.rapidStreak >= context.policy.rapidLimit,
    /** More consecutive losses than `maxAttempts` allows. */
    isAttemptLimitReached: ({ context }) =>
      context.policy.maxAttempts !== null && context.attempt > context.policy.maxAttempts,
  },
  actions: {
    countLoss: assign({
      attempt: ({ context }) => context.attempt + 1,
      lastLoss: ({ event }) => (event.type === 'reconnect.lost' ? event.reason : null),
    }),
    countRapid: assign({ rapidStreak: ({ context }) => context.rapidStreak + 1 }),
    clearRapidStreak: assign({ rapidStreak: 0 }),
    resetAttempts: assign({ attempt: 0 }),
    chooseDelay: assign({
      delayMs: ({ context }) =>
        backoffDelay(
          context.policy,
          context.attempt,
          context.lastLoss ?? { kind: 'other', retryable: true, generation: 0, at: 0 },
          context.env.random(),
        ),
    }),
    reportScheduled: sendParent(({ context }) => ({
      type: 'reconnect.scheduled',
      delayMs: context.delayMs,
      attempt: context.attempt,
    })),
    reportDue: sendParent({ type: 'reconnect.due' }),
    reportRapidGiveUp: sendParent(({ context }) => ({
      type: 'reconnect.gaveUp',
      reason: suppressedReason(
        'rapid-disconnects',
        context.attempt,
        context.lastLoss?.generation ?? 0,
        context.env.now(),
      ),
    })),
    reportAttemptGiveUp: sendParent(({ context }) => ({
      type: 'reconnect.gaveUp',
      reason: suppressedReason('max-attempts', context.attempt, context.lastLoss?.generation ?? 0, context.env.now()),
    })),
  },
  delays: {
    backoffDelay: ({ context }) => context.delayMs,
    rapidWindow: ({ context }) => context.policy.rapidWindowMs,
    stableAfter: ({ context }) => context.policy.stableAfterMs,
  },
}).createMachine({
  id: 'reconnect',
  context: ({ input }) => ({
    policy: input.policy,
    env: input.env,
    attempt: 0,
    rapidStreak: 0,
    delayMs: 0,
    lastLoss: null,
  }),
  initial: 'idle',
  states: {
    /** No transport of this session is open: the first one is opening, or the next one after a wait. */
    idle: {
      description: 'No transport of this session is open: the first is opening, or the next after a wait.',
      on: {
        'reconnect.opened': { target: 'up' },
        // A transport that never opened (refused, upgrade 503) is an attempt, not a rapid connection.
        'reconnect.lost': { target: 'deciding', actions: 'countLoss' },
      },
    },
    /** A transport is open; two windows measure how long it lives. */
    up: {
      description: 'A transport is open; two windows measure how long it lives.',
      type: 'parallel',
      on: {
        'reconnect.lost': [
          { guard: 'livedBriefly', target: 'deciding', actions: ['countRapid', 'countLoss'] },
          { target: 'deciding', actions: ['clearRapidStreak', 'countLoss'] },
        ],
      },
      states: {
        rapidness: {
          initial: 'young',
          states: {
            young: { after: { rapidWindow: { target: 'settled', actions: 'clearRapidStreak' } } },
            settled: {},
          },
        },
        stability: {
          initial: 'settling',
          states: {
            settling: { after: { stableAfter: { target: 'stable', actions: 'resetAttempts' } } },
            stable: {},
          },
        },
      },
    },
    /** Transient: give up, or choose the delay. */
    deciding: {
      description: 'Transient: give up (rapid streak or attempt limit) or choose the delay.',
      always: [
        { guard: 'isRapidLimitReached', target: 'gaveUp', actions: 'reportRapidGiveUp' },
        { guard: 'isAttemptLimitReached', target: 'gaveUp', actions: 'reportAttemptGiveUp' },
        { target: 'waiting', actions: ['chooseDelay', 'reportScheduled'] },
      ],
    },
    /** Waiting out the chosen delay. */
    waiting: {
      description: 'Waiting out the chosen delay; then the connection chart opens the next transport.',
      after: { backoffDelay: { target: 'idle', actions: 'reportDue' } },
    },
    /** Gave up: the session ends `suppressed`. */
    gaveUp: { type: 'final', description: 'Gave up: the session ends suppressed.' },
  },
})
