/**
 * The reconnect statechart: after each loss of a session's transport, "retry after d ms", "slow
 * down" or (only when the policy asks) "give up". Invoked by the connection chart for the life of
 * one session, so every session starts from the first delay with no rapid streak.
 *
 *   idle --reconnect.opened--> up (young | settled) x (settling | stable)
 *   idle | up --reconnect.lost--> deciding --> waiting --after backoffDelay--> idle
 *                                          \-> suspended --after cooldown--> idle
 *                                          \-> gaveUp (final: `suppressed`, by policy only)
 *
 * Only retryable losses reach it: the connection chart ends the session itself on a terminal
 * reason (supersede, upgrade rejection), so nothing here can turn a stop into a retry. Past the
 * rapid-disconnect limit it slows down for ever (like Ably's `suspended`): one attempt per
 * cooldown, growing to about five minutes, until a connection outlives the rapid window.
 */
import { and, assign, sendParent, setup, stateIn } from 'xstate'
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
  const ceiling = Math.min(policy.suspendMaxDelayMs, policy.suspendInitialDelayMs * 2 ** Math.max(0, suspensions - 1))
  const delay = Math.floor(ceiling / 2 + (roll * ceiling) / 2)
  const retryAfter = typeof reason.retryAfterMs === 'number' ? Math.min(reason.retryAfterMs, policy.maxRetryAfterMs) : 0
  return Math.max(delay, retryAfter)
}

/** Events of the reconnect chart; all are sent by the connection chart (machines/connection.ts). */
export type ReconnectEvent =
  /** The session's transport opened: the connection-lifetime windows start. */
  | { type: 'reconnect.opened' }
  /** The transport was lost for a retryable reason. */
  | { type: 'reconnect.lost'; reason: ReasonLike }

/** The loss event: the only one the actions and guards that read a reason are named on. */
type Lost = Extract<ReconnectEvent, { type: 'reconnect.lost' }>

/** Events the reconnect chart sends to its parent, the connection chart. */
export type ReconnectReport =
  /** A retry is scheduled after `delayMs`; `attempt` counts consecutive losses. */
  | { type: 'reconnect.scheduled'; delayMs: number; attempt: number }
  /** Past the rapid-disconnect limit: the next attempt after a cooldown of `delayMs`; `reason` is `suppressed`, retryable. */
  | { type: 'reconnect.suspended'; delayMs: number; attempt: number; reason: SuppressedReason }
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
  /** Connections in a row that the server closed or dropped within `rapidWindowMs`. */
  rapidStreak: number
  /** Cooldowns in a row while suspended; 0 once a connection outlives the rapid window. */
  suspensions: number
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
    /**
     * The server ended the connection: a close frame (`closed`) or the socket dropped with none.
     * A heartbeat or join timeout, a control channel loss or a refused join is not the server
     * accepting and then closing sockets, so it never counts toward the rapid limit.
     */
    isServerClose: ({ event }) => {
      const { reason } = event as Lost
      // `source` is a `dropped` reason's field: 'socket' (no close frame) or 'channel'.
      return reason.kind === 'closed' || reason.source === 'socket'
    },
    /** The policy says to give up, not slow down, past the rapid limit. */
    givesUpOnRapid: ({ context }) => context.policy.onRapidLimit === 'give-up',
    /** `rapidLimit` short-lived connections in a row: an accept-then-close loop. */
    isRapidLimitReached: ({ context }) => context.rapidStreak >= context.policy.rapidLimit,
    /** More consecutive losses than `maxAttempts` allows. */
    isAttemptLimitReached: ({ context }) =>
      context.policy.maxAttempts !== null && context.attempt > context.policy.maxAttempts,
  },
  actions: {
    countLoss: assign({
      attempt: ({ context }) => context.attempt + 1,
      lastLoss: ({ event }) => (event as Lost).reason,
    }),
    countRapid: assign({ rapidStreak: ({ context }) => context.rapidStreak + 1 }),
    /** A connection outlived the rapid window: the streak and any suspension are over. */
    clearRapidStreak: assign({ rapidStreak: 0, suspensions: 0 }),
    countSuspension: assign({ suspensions: ({ context }) => context.suspensions + 1 }),
    chooseCooldown: assign({
      delayMs: ({ context }) =>
        cooldownDelay(
          context.policy,
          context.suspensions,
          context.lastLoss!,
          context.env.random(),
        ),
    }),
    resetAttempts: assign({ attempt: 0 }),
    chooseDelay: assign({
      delayMs: ({ context }) =>
        backoffDelay(
          context.policy,
          context.attempt,
          context.lastLoss!,
          context.env.random(),
        ),
    }),
    reportScheduled: sendParent(({ context }) => ({
      type: 'reconnect.scheduled',
      delayMs: context.delayMs,
      attempt: context.attempt,
    })),
    reportDue: sendParent({ type: 'reconnect.due' }),
    reportSuspended: sendParent(({ context }) => ({
      type: 'reconnect.suspended',
      delayMs: context.delayMs,
      attempt: context.attempt,
      reason: suppressedReason('rapid-disconnects', context.attempt, context.lastLoss!.generation, context.env.now(), true),
    })),
    reportRapidGiveUp: sendParent(({ context }) => ({
      type: 'reconnect.gaveUp',
      reason: suppressedReason(
        'rapid-disconnects',
        context.attempt,
        context.lastLoss!.generation,
        context.env.now(),
      ),
    })),
    reportAttemptGiveUp: sendParent(({ context }) => ({
      type: 'reconnect.gaveUp',
      reason: suppressedReason('max-attempts', context.attempt, context.lastLoss!.generation, context.env.now()),
    })),
  },
  delays: {
    backoffDelay: ({ context }) => context.delayMs,
    cooldown: ({ context }) => context.delayMs,
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
    suspensions: 0,
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
          { guard: and(['livedBriefly', 'isServerClose']), target: 'deciding', actions: ['countRapid', 'countLoss'] },
          // A loss the server did not cause neither counts nor ends the streak.
          { guard: 'livedBriefly', target: 'deciding', actions: 'countLoss' },
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
    /** Transient: give up (by policy), slow down, or choose the delay. */
    deciding: {
      description: 'Transient: give up (only by policy), slow down past the rapid limit, or choose the delay.',
      always: [
        { guard: and(['isRapidLimitReached', 'givesUpOnRapid']), target: 'gaveUp', actions: 'reportRapidGiveUp' },
        { guard: 'isAttemptLimitReached', target: 'gaveUp', actions: 'reportAttemptGiveUp' },
        { guard: 'isRapidLimitReached', target: 'suspended', actions: ['countSuspension', 'chooseCooldown', 'reportSuspended'] },
        { target: 'waiting', actions: ['chooseDelay', 'reportScheduled'] },
      ],
    },
    /** Past the rapid limit: one attempt per cooldown, for ever, until a connection outlives the rapid window. */
    suspended: {
      description: 'Past the rapid-disconnect limit: one attempt per growing cooldown (to ~5 min), for ever.',
      after: { cooldown: { target: 'idle', actions: 'reportDue' } },
    },
    /** Waiting out the chosen delay. */
    waiting: {
      description: 'Waiting out the chosen delay; then the connection chart opens the next transport.',
      after: { backoffDelay: { target: 'idle', actions: 'reportDue' } },
    },
    /** Gave up (policy: onRapidLimit give-up, or maxAttempts): the session ends `suppressed`. */
    gaveUp: { type: 'final', description: 'Gave up (only when the policy asks): the session ends suppressed.' },
  },
})
