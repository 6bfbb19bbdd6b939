/**
 * The channel statechart: one app channel's join lifecycle, spawned by the connection chart for
 * each `link.channel(topic)` and kept until the host leaves it or the server drops it.
 *
 *   detached --transport.up--> attached.live.joining --joinOk--> attached.live.joined
 *   joined --phx_error--> attached.errored --after rejoinDelay--> live.joining (fresh join_ref)
 *   joining --join timeout--> errored (kept: retried on this transport and every later one)
 *   joining --join error--> dropped (final, typed reason), or errored when the refusal passes
 *     (rate_limited, join crashed: rejoined no sooner than its retry_after);  joined --phx_close--> dropped
 *   any --transport.down--> detached;  joining | joined --host leave--> leaving --> left (final)
 *   detached | errored --host leave--> left (nothing of it is on the server; a timed-out join was left by the adapter)
 *
 * Its I/O (`attach` and `release` a join attempt, `pushLeave`, `report` to the connection chart)
 * is carried out by the link's runtime (src/runtime/); the chart holds no actor.
 *
 * The control channel is not one of these: its lifecycle is the session's (machines/connection.ts):
 * its phx_error rejoins it on the same socket there, with the same backoff ({@link rejoinDelayMs}),
 * and its phx_close is a session-level loss.
 */
import { assign, enqueueActions, setup } from 'xstate'
import { thrownText, timedOutReason, type Env, type ReasonLike } from './types.js'
import { rejoinDelayMs, type ChannelPolicy } from './channel-policy.js'

export { DEFAULT_CHANNEL_POLICY, validateChannelPolicy, rejoinDelayMs, type ChannelPolicy } from './channel-policy.js'

/** Stamp of an adapter event about one join attempt of one app channel. */
export interface AttachOrigin {
  /** Transport generation the join attempt runs on (globally monotonic, so no epoch is needed). */
  readonly generation: number
  /** The channel's topic, e.g. `chat_room:42`. */
  readonly topic: string
  /** Which join attempt of this channel actor the event belongs to (+1 per attempt). */
  readonly attachId: number
}

/** Events of the channel chart. */
export type ChannelEvent =
  /** Connection chart: the session's transport is connected (control channel joined). */
  | { type: 'transport.up'; generation: number }
  /** Connection chart: the transport is gone; wait for the next one. */
  | { type: 'transport.down' }
  /** Link (host `channel.leave()`). */
  | { type: 'host.leave' }
  /** Adapter: the join reply was ok. */
  | ({ type: 'channel.joinOk' } & AttachOrigin)
  /** Adapter: the join reply was an error; `reason` is classified (`rejected` or `other`). */
  | ({ type: 'channel.joinError'; reason: ReasonLike } & AttachOrigin)
  /** Adapter: phx_error, the server-side channel process crashed. */
  | ({ type: 'channel.error' } & AttachOrigin)
  /** Adapter: phx_close, the server ended the channel. */
  | ({ type: 'channel.close'; reason: ReasonLike } & AttachOrigin)
  /** Adapter: the leave was acknowledged. */
  | ({ type: 'channel.left' } & AttachOrigin)
  /** Adapter: the join attempt could not start (the host's params function threw), classified `other`. */
  | ({ type: 'channel.attachFailed'; reason: ReasonLike } & AttachOrigin)
  /** Runtime: an I/O action of this chart threw (a phoenix-link bug); during a join attempt it fails that attempt. */
  | { type: 'io.failed'; action: string; error: unknown }

/** What a channel chart reports to the connection chart (its `report` action). */
export interface ChannelStatusReport {
  type: 'channel.status'
  topic: string
  status: 'joined' | 'detached' | 'errored' | 'dropped' | 'left'
  /** Why, for `errored` and `dropped`. */
  reason: ReasonLike | null
}

/** Input of the channel chart. */
export interface ChannelInput {
  topic: string
  policy: ChannelPolicy
  env: Env
}

/** Context of the channel chart. */
export interface ChannelContext extends ChannelInput {
  /** Generation of the transport the channel is attached to; 0 while detached. */
  generation: number
  /** Current join attempt (+1 per attempt); adapter events carry it. */
  attachId: number
  /** Rejoins in a row without a join that held `rejoinStableAfterMs`, for the rejoin backoff. */
  rejoins: number
  /** Why the channel errored or was dropped. */
  reason: ReasonLike | null
}

function attemptOf(context: ChannelContext): AttachOrigin {
  return { topic: context.topic, generation: context.generation, attachId: context.attachId }
}

function statusReport(context: ChannelContext, status: ChannelStatusReport['status']): ChannelStatusReport {
  return {
    type: 'channel.status',
    topic: context.topic,
    status,
    reason: status === 'errored' || status === 'dropped' ? context.reason : null,
  }
}

/** The channel statechart. Pure: delays are named, jitter comes from `input.env`. */
export const channelMachine = setup({
  types: {
    context: {} as ChannelContext,
    events: {} as ChannelEvent,
    input: {} as ChannelInput,
  },
  guards: {
    /**
     * The event belongs to this channel's current join attempt, not an earlier one (of this
     * transport or an older one): the attach id grows by one per attempt, so it alone tells them
     * apart. Named only on adapter events, which all carry an AttachOrigin.
     */
    isCurrentAttempt: ({ context, event }) => (event as unknown as AttachOrigin).attachId === context.attachId,
    /**
     * The current attempt's join was refused for a cause that passes (`rejected` and retryable:
     * rate_limited, too_many_requests, join crashed: src/reasons.ts JOIN_ERRORS). Any other
     * refusal (unauthorized, an unlisted app reason) is about who may join: the channel is dropped.
     */
    isCurrentRetryableRefusal: ({ context, event }) => {
      const { attachId, reason } = event as unknown as AttachOrigin & { reason: ReasonLike }
      return attachId === context.attachId && reason.kind === 'rejected' && reason.retryable === true
    },
  },
  actions: {
    attach: assign({ generation: ({ event }) => (event as Extract<ChannelEvent, { type: 'transport.up' }>).generation }),
    detach: assign({ generation: 0 }),
    nextAttempt: assign({ attachId: ({ context }) => context.attachId + 1 }),
    clearReason: assign({ reason: null }),
    clearRejoins: assign({ rejoins: 0 }),
    countRejoin: assign({ rejoins: ({ context }) => context.rejoins + 1 }),
    // Named on the adapter events that carry a reason: a refused join, phx_close, a failed attempt.
    recordEventReason: assign({ reason: ({ event }) => (event as unknown as { reason: ReasonLike }).reason }),
    /**
     * The event's reason, as the chart's verdict on it: `retryable: false`, since the chart does
     * not rejoin a channel the server refused or closed (whatever the classification said of the
     * same reason on the control channel, where a phx_close or an unlisted refusal is retried).
     */
    recordDropReason: assign({ reason: ({ event }) => ({ ...(event as unknown as { reason: ReasonLike }).reason, retryable: false }) }),
    recordCrash: assign({
      reason: ({ context }) => ({
        kind: 'other',
        detail: 'phx_error: the server-side channel crashed',
        retryable: true,
        generation: context.generation,
        at: context.env.now(),
      }),
    }),
    recordAttachmentFailure: assign({
      reason: ({ context, event }) => ({
        kind: 'other',
        detail: `the join attempt failed inside phoenix-link: ${thrownText((event as { error?: unknown }).error)}`,
        retryable: true,
        generation: context.generation,
        at: context.env.now(),
      }),
    }),
    recordJoinTimeout: assign({
      reason: ({ context }) => timedOutReason('join', context.generation, context.env.now()),
    }),
    reportJoined: enqueueActions(({ context, enqueue }) => enqueue({ type: 'report', params: statusReport(context, 'joined') })),
    reportErrored: enqueueActions(({ context, enqueue }) => enqueue({ type: 'report', params: statusReport(context, 'errored') })),
    reportDropped: enqueueActions(({ context, enqueue }) => enqueue({ type: 'report', params: statusReport(context, 'dropped') })),
    reportLeft: enqueueActions(({ context, enqueue }) => enqueue({ type: 'report', params: statusReport(context, 'left') })),
    reportDetached: enqueueActions(({ context, enqueue }) => enqueue({ type: 'report', params: statusReport(context, 'detached') })),
    /** Starts this join attempt (entry of `attached.live`). */
    startAttempt: enqueueActions(({ context, enqueue }) => enqueue({ type: 'joinAttempt', params: attemptOf(context) })),
    /** Ends this join attempt (exit of `attached.live`): its phoenix Channel is released. */
    endAttempt: enqueueActions(({ context, enqueue }) => enqueue({ type: 'releaseAttempt', params: attemptOf(context) })),
    /** The host left: phx_leave on this attempt's join (entry of `leaving`). */
    pushLeave: enqueueActions(({ context, enqueue }) => enqueue({ type: 'leaveAttempt', params: attemptOf(context) })),
    /**
     * I/O: one join attempt of the channel on transport `generation`: asks its join params and
     * joins; the adapter reports the outcome as channel events stamped with this AttachOrigin.
     */
    joinAttempt: (_: unknown, _attempt: AttachOrigin) => {},
    /** I/O: releases the attempt's phoenix Channel (its timers, its bindings); a join still unanswered is left on the wire. */
    releaseAttempt: (_: unknown, _attempt: AttachOrigin) => {},
    /** I/O: pushes phx_leave on the attempt's join; the adapter answers `channel.left`. */
    leaveAttempt: (_: unknown, _attempt: AttachOrigin) => {},
    /** I/O: hands a status report to the connection chart. */
    report: (_: unknown, _report: ChannelStatusReport) => {},
  },
  delays: {
    joinTimeout: ({ context }) => context.policy.joinTimeoutMs,
    leaveTimeout: ({ context }) => context.policy.leaveTimeoutMs,
    // A join refused with a retry_after waits at least that long (capped by maxRetryAfterMs).
    rejoinDelay: ({ context }) =>
      Math.max(rejoinDelayMs(context.policy, context.rejoins, context.env.random()), Math.min(context.reason?.retryAfterMs ?? 0, context.policy.maxRetryAfterMs)),
    rejoinStableAfter: ({ context }) => context.policy.rejoinStableAfterMs,
  },
}).createMachine({
  id: 'channel',
  context: ({ input }) => ({ ...input, generation: 0, attachId: 0, rejoins: 0, reason: null }),
  initial: 'detached',
  on: {
    'host.leave': { target: '.left', actions: 'reportLeft' },
  },
  states: {
    /** No connected transport: wait for the next one. */
    detached: {
      description: 'No connected transport: wait for the next one.',
      on: { 'transport.up': { target: 'attached', actions: 'attach' } },
    },
    /** The session's transport is connected. */
    attached: {
      description: "The session's transport is connected.",
      initial: 'live',
      on: {
        'transport.down': { target: 'detached', actions: ['detach', 'reportDetached'] },
      },
      states: {
        /** A join attempt on this transport: its own phoenix Channel and join_ref. */
        live: {
          description: 'One join attempt on this transport: its own phoenix Channel and join_ref.',
          entry: ['nextAttempt', 'startAttempt'],
          exit: 'endAttempt',
          on: {
            // An I/O action of this attempt threw (a phoenix-link bug): this attempt failed; retry.
            'io.failed': { target: '#channel.attached.errored', actions: ['recordAttachmentFailure', 'reportErrored'] },
          },
          initial: 'joining',
          states: {
            joining: {
              on: {
                'channel.joinOk': { guard: 'isCurrentAttempt', target: 'joined', actions: ['clearReason', 'reportJoined'] },
                'channel.joinError': [
                  {
                    guard: 'isCurrentRetryableRefusal',
                    target: '#channel.attached.errored',
                    actions: ['recordEventReason', 'reportErrored'],
                    meta: { rule: 'retryable-join-refusal-rejoins' },
                  },
                  { guard: 'isCurrentAttempt', target: '#channel.dropped', actions: ['recordDropReason', 'reportDropped'] },
                ],
                'channel.attachFailed': {
                  guard: 'isCurrentAttempt',
                  target: '#channel.attached.errored',
                  actions: ['recordEventReason', 'reportErrored'],
                },
                // The join is on the wire: the server may accept it; leave it there, not just here.
                'host.leave': { target: 'leaving', meta: { rule: 'leave-leaves-the-server' } },
              },
              after: {
                joinTimeout: { target: '#channel.attached.errored', actions: ['recordJoinTimeout', 'reportErrored'] },
              },
            },
            joined: {
              // A join that holds this long ends the run of rejoins: the backoff starts over.
              after: { rejoinStableAfter: { actions: 'clearRejoins' } },
              on: {
                'channel.error': {
                  guard: 'isCurrentAttempt',
                  target: '#channel.attached.errored',
                  actions: ['recordCrash', 'reportErrored'],
                },
                'channel.close': {
                  guard: 'isCurrentAttempt',
                  target: '#channel.dropped',
                  actions: ['recordDropReason', 'reportDropped'],
                },
                'host.leave': { target: 'leaving' },
              },
            },
            /** The host left: phx_leave pushed, waiting for its reply. */
            leaving: {
              entry: 'pushLeave',
              on: {
                'channel.left': { guard: 'isCurrentAttempt', target: '#channel.left', actions: 'reportLeft' },
                'transport.down': { target: '#channel.left', actions: 'reportLeft' },
              },
              after: { leaveTimeout: { target: '#channel.left', actions: 'reportLeft' } },
            },
          },
        },
        /** phx_error or a join timeout: rejoin on this transport after a delay. */
        errored: {
          description: 'phx_error, a join timeout or a refusal that passes: rejoin on this transport after a delay.',
          entry: 'countRejoin',
          after: { rejoinDelay: { target: 'live' } },
        },
      },
    },
    /** The server refused or ended the channel; the reason is in context. */
    dropped: { type: 'final', description: 'The server refused or ended the channel; the reason is kept.' },
    /** The host left the channel. */
    left: { type: 'final', description: 'The host left the channel.' },
  },
  output: ({ context }) => ({ topic: context.topic, reason: context.reason }),
})
