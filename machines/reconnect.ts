/**
 * The reconnect statechart: after each loss of a session's transport, "retry after d ms", "slow
 * down" or (only when the policy asks) "give up". Invoked by the connection chart for the life of
 * one session, so every session starts from the first delay with no rapid streak.
 *
 *   idle --reconnect.opened--> up (young | settled) x (settling | stable)
 *   idle | up --reconnect.lost--> deciding --> waiting --after backoffDelay--> idle
 *                                          \-> suspended --after cooldown--> idle
 *                                          \-> gaveUp (final: `suppressed`, by policy only)
 *   waiting | suspended --reconnect.retryNow--> idle, or holding (the server's floor, or a retry-now floor, left) --after--> idle
 *
 * Its answers go to the connection chart through one I/O action, `report`, which the link's
 * runtime (src/runtime/) carries out; the chart holds no actor and spawns none.
 *
 * Only retryable losses reach it: the connection chart ends the session itself on a terminal
 * reason (supersede, upgrade rejection), so nothing here can turn a stop into a retry. Past the
 * rapid-disconnect limit it slows down for ever (like Ably's `suspended`): one attempt per
 * cooldown, growing to about five minutes, until a connection outlives the rapid window.
 */
import { and, assign, enqueueActions, setup, stateIn } from 'xstate'
import { suppressedReason, type Env, type ReasonLike, type SuppressedReason } from './types.js'
import { backoffDelay, cooldownDelay, retryNowFloorMs, serverFloorMs, type ReconnectPolicy } from './reconnect-policy.js'

export { DEFAULT_RECONNECT_POLICY, validateReconnectPolicy, backoffDelay, cooldownDelay, retryNowFloorMs, serverFloorMs, type ReconnectPolicy } from './reconnect-policy.js'

/** Events of the reconnect chart; all are sent by the connection chart (machines/connection.ts). */
export type ReconnectEvent =
  /** The session's transport opened: the connection-lifetime windows start. */
  | { type: 'reconnect.opened' }
  /** The transport was lost for a retryable reason. */
  | { type: 'reconnect.lost'; reason: ReasonLike }
  /** The host asked to retry now (link.reconnect()): the wait or cooldown ends early; the attempt count stays. */
  | { type: 'reconnect.retryNow' }

/** The loss event: the only one the actions and guards that read a reason are named on. */
type Lost = Extract<ReconnectEvent, { type: 'reconnect.lost' }>

/** What the reconnect chart reports to the connection chart (its `report` action). */
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
  /**
   * The part of the current wait a retry now cannot cut, in milliseconds from its start: the
   * server's (`serverFloorMs` of the loss); once the host retried now, that or its retry-now floor
   * (`retryNowFloorMs`), whichever is longer. Never more than the wait itself.
   */
  floorMs: number
  /**
   * Retries now (reconnect()) in a row: those that cut a wait since a wait last ran out on its own
   * or a connection last outlived `rapidWindowMs`.
   */
  retriesNow: number
  /** When the current wait started (env.monotonic), in milliseconds. */
  waitSince: number
}

/**
 * How long the current wait has run, on the injected monotonic clock: never negative, so a clock
 * that steps back (a host's own clock, restored from elsewhere) makes a retry now hold at most the
 * whole floor, never the floor plus the step (up to a timer's 2^31-1 ms).
 */
function waited(context: ReconnectContext): number {
  return Math.max(0, context.env.monotonic() - context.waitSince)
}

/**
 * What of the current wait a retry now cannot cut, in milliseconds from its start: the server's
 * floor, or the retry-now floor of the retries in a row so far (`retryNowFloorMs`), whichever is
 * longer, never more than the wait.
 */
function retryFloor(context: ReconnectContext): number {
  return Math.min(context.delayMs, Math.max(context.floorMs, retryNowFloorMs(context.policy, context.retriesNow)))
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
    /** What a retry now cannot cut (the server's Retry-After or 1012/1013 floor, the retry-now floor) has passed, or there is none. */
    isRetryFloorPast: ({ context }) => {
      const floor = retryFloor(context)
      return floor === 0 || waited(context) >= floor
    },
    /** The host has retried now since a wait last ran out on its own or a connection last held. */
    isRetryInARow: ({ context }) => context.retriesNow > 0,
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
    clearRapidStreak: assign({ rapidStreak: 0, suspensions: 0, retriesNow: 0 }),
    /** A wait ran out on its own: the host's next retry now is the first of a row again. */
    forgetRetriesNow: assign({ retriesNow: 0 }),
    /** A retry now cuts the wait: what it cannot cut is fixed for `holding`, and it counts. */
    countRetryNow: assign({
      floorMs: ({ context }) => retryFloor(context),
      retriesNow: ({ context }) => context.retriesNow + 1,
    }),
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
    /**
     * Entry of `waiting` and `suspended`: what of the wait the server asked for (never more than
     * the wait itself: a cooldown shorter than a 1013 floor is not lengthened by a retry now), and
     * when it started.
     */
    startWait: assign({
      floorMs: ({ context }) => Math.min(serverFloorMs(context.policy, context.lastLoss!), context.delayMs),
      waitSince: ({ context }) => context.env.monotonic(),
    }),
    chooseDelay: assign({
      delayMs: ({ context }) =>
        backoffDelay(
          context.policy,
          context.attempt,
          context.lastLoss!,
          context.env.random(),
        ),
    }),
    reportScheduled: enqueueActions(({ context, enqueue }) =>
      enqueue({ type: 'report', params: { type: 'reconnect.scheduled', delayMs: context.delayMs, attempt: context.attempt } }),
    ),
    reportDue: enqueueActions(({ enqueue }) => enqueue({ type: 'report', params: { type: 'reconnect.due' } })),
    reportSuspended: enqueueActions(({ context, enqueue }) =>
      enqueue({
        type: 'report',
        params: {
          type: 'reconnect.suspended',
          delayMs: context.delayMs,
          attempt: context.attempt,
          reason: suppressedReason('rapid-disconnects', context.attempt, context.lastLoss!, context.env.now(), true),
        },
      }),
    ),
    reportRapidGiveUp: enqueueActions(({ context, enqueue }) =>
      enqueue({
        type: 'report',
        params: { type: 'reconnect.gaveUp', reason: suppressedReason('rapid-disconnects', context.attempt, context.lastLoss!, context.env.now()) },
      }),
    ),
    reportAttemptGiveUp: enqueueActions(({ context, enqueue }) =>
      enqueue({
        type: 'report',
        params: { type: 'reconnect.gaveUp', reason: suppressedReason('max-attempts', context.attempt, context.lastLoss!, context.env.now()) },
      }),
    ),
    /**
     * I/O: hands a report to the connection chart. Carried out by the link's runtime
     * (src/runtime/link-charts.ts); a no-op under a bare XState actor, where a test reads the
     * report from the action list or feeds the connection chart itself.
     */
    report: (_: unknown, _report: ReconnectReport) => {},
  },
  delays: {
    backoffDelay: ({ context }) => context.delayMs,
    /** What is left of the server's floor when the host asked to retry now (`holding`). */
    floorRemaining: ({ context }) => Math.max(0, context.floorMs - waited(context)),
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
    floorMs: 0,
    retriesNow: 0,
    waitSince: 0,
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
      entry: 'startWait',
      after: { cooldown: { target: 'idle', actions: ['forgetRetriesNow', 'reportDue'] } },
      on: {
        'reconnect.retryNow': [
          // A cooldown is cut by the first retry now only: one in a row waits it out (a host's timer
          // gets at most one attempt more per cooldown than the link alone).
          { guard: 'isRetryInARow' },
          { guard: 'isRetryFloorPast', target: 'idle', actions: ['countRetryNow', 'reportDue'] },
          { target: 'holding', actions: 'countRetryNow' },
        ],
      },
    },
    /** Waiting out the chosen delay. */
    waiting: {
      description: 'Waiting out the chosen delay; then the connection chart opens the next transport.',
      entry: 'startWait',
      after: { backoffDelay: { target: 'idle', actions: ['forgetRetriesNow', 'reportDue'] } },
      on: {
        'reconnect.retryNow': [
          { guard: 'isRetryFloorPast', target: 'idle', actions: ['countRetryNow', 'reportDue'] },
          { target: 'holding', actions: 'countRetryNow' },
        ],
      },
    },
    /**
     * The host asked to retry now (`reconnect()`), but the server asked for longer (its
     * Retry-After, or a 1012/1013 floor), or the host has retried now in a row (the retry-now
     * floor). The attempt waits for what is left of that, no more.
     */
    holding: {
      description: "The host asked to retry now; the server's Retry-After (or a 1012/1013 floor), or the floor of retries now in a row, still runs: the attempt starts when it ends.",
      after: { floorRemaining: { target: 'idle', actions: 'reportDue' } },
    },
    /** Gave up (policy: onRapidLimit give-up, or maxAttempts): the session ends `suppressed`. */
    gaveUp: { type: 'final', description: 'Gave up (only when the policy asks): the session ends suppressed.' },
  },
})
