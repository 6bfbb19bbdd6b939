/**
 * The connection statechart: one link's session with its platform. Every lifecycle decision of
 * phoenix-link is a transition here; the adapter only reports what the socket did.
 *
 *   idle --host.connect--> session.online.connecting --socket.open--> attached.joining
 *   joining --control.joinOk--> live.connected --host.disconnect--> stopping --> stopped
 *   live.connected --control.crashed--> controlErrored --after--> controlRejoining --joinOk--> connected
 *   online --loss--> lost --[isOwnConflict]--> reconnecting
 *                         --[isTerminalLoss]--> terminated | reconnecting --due--> online (n+1)
 *   reconnecting.deciding --reconnect.suspended--> reconnecting.suspended --due--> online (n+1)
 *   session --control.supersede (this session)--> terminated
 *
 * The rules of docs/lifecycle.md, each a guard or transition below:
 * - normal close reconnects: a loss goes to `lost`; only `isTerminalLoss` (a non-retryable
 *   reason from src/reasons.ts's tables) ends the session, and no close code is terminal there.
 * - supersede is terminal: `control.supersede` of this session ends it from every session state,
 *   including the backoff; the transport actor is stopped, so the socket is ended, not flagged.
 * - upgrade rejection is terminal: 400/401/403/409 classify as non-retryable; 429/503 carry
 *   Retry-After into the reconnect chart.
 * - our own conflict is retried: a 409 within `conflictRetryWindowMs` of losing one of this
 *   link's connections (`isOwnConflict`) is the platform still holding our lost socket; it reconnects.
 * - a control channel crash is a channel crash: its phx_error rejoins it on the same socket with
 *   backoff (`live.controlErrored`); the transport and the app channels stay; only its phx_close,
 *   or a refused rejoin, is a session-level loss.
 * - giving up is not the default: past the rapid-disconnect limit the reconnect chart suspends
 *   (one attempt per cooldown, for ever, `reconnecting.suspended`); only supersede, an upgrade
 *   rejection or a policy give-up end a session.
 * - stale generations change nothing: `isCurrentTransport` / `isCurrentSession` guard every
 *   adapter event; a stale one falls through to the root and is reported as ignored.
 * - cancelling a wait is not a stop: waits live in the link; only `host.disconnect` stops.
 * - disconnect() always succeeds: `host.disconnect` is handled in every state.
 * - control signals in order without holding up a supersede or close: they go to the
 *   control delivery actor (machines/control.ts); this chart never waits for the handler.
 */
import { assign, emit, enqueueActions, fromCallback, sendTo, setup, type ActorRefFrom } from 'xstate'
import { channelMachine, DEFAULT_CHANNEL_POLICY, rejoinDelayMs, type ChannelEvent, type ChannelPolicy, type ChannelStatusReport } from './channel.js'
import { controlMachine, DEFAULT_CONTROL_POLICY, type ControlDropCause, type ControlPolicy, type ControlReport, type QueuedSignal, type SignalLike } from './control.js'
import { DEFAULT_RECONNECT_POLICY, reconnectMachine, type ReconnectPolicy, type ReconnectReport } from './reconnect.js'
import { gracefulReason, thrownText, timedOutReason, type Env, type Origin, type ReasonLike } from './types.js'
import { DEFAULT_CONNECTION_POLICY, type ConnectionPolicy } from './connection-policy.js'

export { DEFAULT_CONNECTION_POLICY, validateConnectionPolicy, type ConnectionPolicy } from './connection-policy.js'

/** Every event the connection chart handles, with who sends it. */
export type ConnectionEvent =
  /** Link: connect() or runForever(); starts a session from idle, stopped or terminated. */
  | { type: 'host.connect' }
  /** Link: disconnect(); stops the session from any state. */
  | { type: 'host.disconnect' }
  /**
   * Link: reconnect(); while waiting out a backoff or a cooldown, retry now (the browser's
   * `online` event, a host that knows the network is back). The reconnect chart ends its wait;
   * its attempt and rapid counts stay, so a retry now cannot defeat the slow-down.
   */
  | { type: 'host.reconnect' }
  /** Link: channel(topic); registers an app channel, joined on every connected transport. */
  | { type: 'host.channel'; topic: string }
  /** Link: an app channel's leave(). */
  | { type: 'host.leaveChannel'; topic: string }
  /** Adapter: the WebSocket of `generation` opened. */
  | ({ type: 'socket.open' } & Origin)
  /** Adapter: the transport closed (close frame, or 1006 without one), classified. */
  | ({ type: 'socket.close'; reason: ReasonLike } & Origin)
  /** Adapter: the HTTP upgrade was refused (status, Retry-After, error body), classified. */
  | ({ type: 'socket.upgradeRejected'; reason: ReasonLike } & Origin)
  /** Adapter: no heartbeat reply within the interval (phoenix.js closed the socket). */
  | ({ type: 'socket.heartbeatTimeout'; reason: ReasonLike } & Origin)
  /** Adapter: the control channel join reply was ok. */
  | ({ type: 'control.joinOk' } & Origin)
  /** Adapter: the control channel join reply was an error, classified. */
  | ({ type: 'control.joinError'; reason: ReasonLike } & Origin)
  /** Adapter: phx_close on the control channel (the server ended it): a session-level loss. */
  | ({ type: 'control.lost'; reason: ReasonLike } & Origin)
  /** Adapter: phx_error on the control channel (its server process crashed): rejoined on this socket. */
  | ({ type: 'control.crashed'; reason: ReasonLike } & Origin)
  /** Adapter: the control channel leave was acknowledged (during stopping). */
  | ({ type: 'control.left' } & Origin)
  /** Adapter: a `supersede` push on the control channel, classified as `superseded`. */
  | ({ type: 'control.supersede'; reason: ReasonLike } & Origin)
  /** Adapter: a valid `agent.control` push on the control channel. */
  | ({ type: 'control.signal'; signal: SignalLike } & Origin)
  /** Adapter: an inbound frame or payload it could not use; reported, never acted on. */
  | ({ type: 'socket.malformed'; detail: string } & Origin)
  /** Adapter: events of app channels, forwarded to the channel actor of `topic`. */
  | Extract<ChannelEvent, { topic: string }>
  /** Reconnect actor (machines/reconnect.ts). */
  | ReconnectReport
  /** Channel actors (machines/channel.ts). */
  | ChannelStatusReport
  /** Control delivery actor (machines/control.ts). */
  | ControlReport

/** Events the chart emits for the link to publish (actor.on). */
export type ConnectionEmitted =
  | { type: 'link.connected'; generation: number; epoch: number; reconnect: boolean }
  | { type: 'link.disconnected'; reason: ReasonLike; nextDelayMs: number | null; attempt: number | null }
  | { type: 'link.channel'; topic: string; status: ChannelStatusReport['status']; reason: ReasonLike | null }
  | { type: 'link.ignored'; event: string; detail: string }
  | { type: 'link.controlDuplicate'; signal: SignalLike; sequence: number }
  | { type: 'link.controlFailed'; signal: SignalLike; sequence: number; error: unknown }
  | { type: 'link.controlDropped'; signals: QueuedSignal[]; cause: ControlDropCause }

/** Input of the connection chart. */
export interface ConnectionInput {
  policy?: ConnectionPolicy
  reconnectPolicy?: ReconnectPolicy
  channelPolicy?: ChannelPolicy
  controlPolicy?: ControlPolicy
  env: Env
}

/** Context of the connection chart. */
export interface ConnectionContext {
  policy: ConnectionPolicy
  reconnectPolicy: ReconnectPolicy
  channelPolicy: ChannelPolicy
  controlPolicy: ControlPolicy
  env: Env
  /** Session epoch; +1 on every host.connect that starts a session. */
  epoch: number
  /** Transport generation; +1 on every transport, never reused across sessions. */
  generation: number
  /** Why the last transport or session ended; kept after stop, cleared when a session starts. */
  lastReason: ReasonLike | null
  /** The pending retry, while reconnecting. */
  retry: { delayMs: number; attempt: number } | null
  /** Times this session reached connected. */
  connects: number
  /**
   * When (env.monotonic) the link last left `connected`, in this session or an earlier one (the
   * platform may hold any socket this link lost, whatever the session); null before the link
   * first connected.
   */
  liveLostAt: number | null
  /** App channel actors by topic. */
  channels: Record<string, ActorRefFrom<typeof channelMachine>>
  /** Arrival sequence of control signals. */
  signalSeq: number
  /** Control channel crashes in a row (no join since that held the channel policy's rejoinStableAfterMs), for the rejoin backoff. */
  controlCrashes: number
}

/**
 * The actor of an app channel topic. Topics are host strings used as keys, so only own
 * properties count: `toString` or `__proto__` is a topic like any other, not Object.prototype.
 */
function channelOf(context: ConnectionContext, topic: string): ActorRefFrom<typeof channelMachine> | undefined {
  return Object.hasOwn(context.channels, topic) ? context.channels[topic] : undefined
}

/**
 * The id of a new app channel actor: the lowest `channel-<n>` no live channel actor has.
 *
 * Why not a fresh id per actor: a child's id is part of the event types its parent receives
 * (`xstate.done.actor.<id>` when it reaches `left` or `dropped`, `xstate.error.actor.<id>`), and
 * XState memoizes the candidate transitions of each state node per event type for the life of
 * the machine (StateMachine memo `candidates-<type>`, shared by every actor of the chart). Unique
 * ids made that cache grow by five arrays per finished channel, for ever (about 0.7 KB per
 * joined-and-left channel). Reused ids keep the set of event types as small as the most channels
 * ever open at once.
 */
function freeChannelId(context: ConnectionContext): string {
  const used = new Set(Object.values(context.channels).map((ref) => ref.id))
  for (let n = 0; ; n++) if (!used.has(`channel-${n}`)) return `channel-${n}`
}

type TransportInput = Origin
type ControlChannelInput = Origin

/** The connection statechart. The `transport` and `controlChannel` actors are provided by the adapter. */
export const connectionMachine = setup({
  types: {
    context: {} as ConnectionContext,
    events: {} as ConnectionEvent,
    input: {} as ConnectionInput,
    emitted: {} as ConnectionEmitted,
  },
  actors: {
    /** Opens one phoenix Socket for `generation`; stopping the actor ends it. Provided by src/adapter. */
    transport: fromCallback<{ type: 'noop' }, TransportInput>(() => {
      throw new Error('transport must be provided (machine.provide) by the adapter')
    }),
    /**
     * Joins the control channel on the transport of `generation`; receives `leave`, and `rejoin`
     * (join it again, with a fresh join_ref, after a crash). Provided by src/adapter.
     */
    controlChannel: fromCallback<{ type: 'leave' } | { type: 'rejoin' }, ControlChannelInput>(() => {
      throw new Error('controlChannel must be provided (machine.provide) by the adapter')
    }),
    reconnect: reconnectMachine,
    control: controlMachine,
    channel: channelMachine,
  },
  guards: {
    /**
     * The event comes from this session's current transport. Generations grow across sessions
     * (a new session does not reset them), so the generation alone names the transport. Named
     * only on adapter events, which carry an Origin.
     */
    isCurrentTransport: ({ context, event }) => (event as unknown as Origin).generation === context.generation,
    /** The event comes from this session, from any of its transports (a supersede read late still counts). */
    isCurrentSession: ({ context, event }) => (event as unknown as Origin).epoch === context.epoch,
    /** The loss just recorded is not retryable: supersede, upgrade rejection, terminal close code. */
    isTerminalLoss: ({ context }) => context.lastReason !== null && !context.lastReason.retryable,
    /**
     * The loss is an upgrade refused 409 `conflict` within `conflictRetryWindowMs` of losing one
     * of this link's connections: maybe our own socket, still held by the platform.
     */
    isOwnConflict: ({ context }) => {
      // Only a refused upgrade (409, UPGRADE_STATUSES in src/reasons.ts) has the cause `conflict`:
      // no close code or join error maps to it. Evaluated after recordLoss: a reason is there.
      if (context.lastReason!.cause !== 'conflict' || context.liveLostAt === null) return false
      // Monotonic: a wall-clock step after the loss changes nothing. (A negative elapsed time
      // could only come from a broken injected clock: terminal, as without this rule.)
      const elapsed = context.env.monotonic() - context.liveLostAt
      return elapsed >= 0 && elapsed <= context.policy.conflictRetryWindowMs
    },
    /** An app channel actor exists for the event's topic. */
    hasChannel: ({ context, event }) => 'topic' in event && channelOf(context, event.topic) !== undefined,
    /** No app channel actor exists yet for the topic. */
    isNewChannel: ({ context, event }) => 'topic' in event && channelOf(context, event.topic) === undefined,
  },
  actions: {
    startSession: assign({
      epoch: ({ context }) => context.epoch + 1,
      lastReason: null,
      retry: null,
      connects: 0,
      controlCrashes: 0,
    }),
    nextGeneration: assign({ generation: ({ context }) => context.generation + 1 }),
    // Named on the events that carry a reason (losses, refusals, supersedes).
    recordLoss: assign({ lastReason: ({ event }) => (event as unknown as { reason: ReasonLike }).reason }),
    recordConnectTimeout: assign({
      lastReason: ({ context }) => timedOutReason('connect', context.generation, context.env.now()),
    }),
    recordJoinTimeout: assign({
      lastReason: ({ context }) => timedOutReason('join', context.generation, context.env.now()),
    }),
    recordActorFailure: assign({
      lastReason: ({ context, event }) => ({
        kind: 'other',
        detail: `the adapter failed inside phoenix-link: ${thrownText((event as { error?: unknown }).error)}`,
        retryable: true,
        generation: context.generation,
        at: context.env.now(),
      }),
    }),
    recordGraceful: assign({ lastReason: ({ context }) => gracefulReason(context.generation, context.env.now()) }),
    // Named on reconnect.gaveUp.
    recordGiveUp: assign({ lastReason: ({ event }) => (event as Extract<ConnectionEvent, { type: 'reconnect.gaveUp' }>).reason }),
    // Named on reconnect.scheduled and reconnect.suspended.
    recordRetry: assign({
      retry: ({ event }) => {
        const { delayMs, attempt } = event as Extract<ConnectionEvent, { type: 'reconnect.scheduled' | 'reconnect.suspended' }>
        return { delayMs, attempt }
      },
    }),
    /** Past the rapid limit: the reason the host sees is `suppressed` (retryable), with the cooldown as the next delay. */
    recordSuspension: assign({ lastReason: ({ event }) => (event as Extract<ConnectionEvent, { type: 'reconnect.suspended' }>).reason }),
    countControlCrash: assign({ controlCrashes: ({ context }) => context.controlCrashes + 1 }),
    clearControlCrashes: assign({ controlCrashes: 0 }),
    rejoinControlChannel: sendTo('controlChannel', { type: 'rejoin' }),
    clearRetry: assign({ retry: null }),
    countConnect: assign({ connects: ({ context }) => context.connects + 1 }),
    markLiveLost: assign({ liveLostAt: ({ context }) => context.env.monotonic() }),
    /** The conflict is retried: the reason says so (`retryable: true`) in the disconnected event and lastDisconnectReason. */
    retryOwnConflict: assign({ lastReason: ({ context }) => ({ ...context.lastReason!, retryable: true }) }),
    tellReconnectOpened: sendTo('reconnect', { type: 'reconnect.opened' }),
    /** Asks the reconnect chart to end its wait now; it answers `reconnect.due`. */
    retryNow: sendTo('reconnect', { type: 'reconnect.retryNow' }),
    tellReconnectLost: sendTo('reconnect', ({ context }) => ({
      type: 'reconnect.lost' as const,
      reason: context.lastReason!,
    })),
    leaveControlChannel: sendTo('controlChannel', { type: 'leave' }),
    flushControl: sendTo('control', { type: 'control.flush' }),
    resetControl: sendTo('control', { type: 'control.reset' }),
    // Named on control.signal.
    enqueueControlSignal: enqueueActions(({ context, event: anyEvent, enqueue }) => {
      const event = anyEvent as Extract<ConnectionEvent, { type: 'control.signal' }>
      const sequence = context.signalSeq + 1
      enqueue.assign({ signalSeq: sequence })
      enqueue.sendTo('control', { type: 'control.enqueue', signal: event.signal, sequence, epoch: event.epoch })
    }),
    // Runs only when the isNewChannel guard passed: the event is a host.channel of a new topic.
    spawnChannel: assign({
      channels: ({ context, event, spawn }) => {
        const { topic } = event as Extract<ConnectionEvent, { type: 'host.channel' }>
        const ref = spawn('channel', { id: freeChannelId(context), input: { topic, policy: context.channelPolicy, env: context.env } })
        return { ...context.channels, [topic]: ref }
      },
    }),
    // After spawnChannel, on the same host.channel, while connected.
    attachNewChannel: enqueueActions(({ context, event, enqueue }) => {
      const ref = channelOf(context, (event as Extract<ConnectionEvent, { type: 'host.channel' }>).topic)!
      enqueue.sendTo(ref, { type: 'transport.up', generation: context.generation })
    }),
    attachChannels: enqueueActions(({ context, enqueue }) => {
      for (const ref of Object.values(context.channels)) {
        enqueue.sendTo(ref, { type: 'transport.up', generation: context.generation })
      }
    }),
    detachChannels: enqueueActions(({ context, enqueue }) => {
      for (const ref of Object.values(context.channels)) enqueue.sendTo(ref, { type: 'transport.down' })
    }),
    // Runs only when the hasChannel guard passed: the event names the topic of a channel actor.
    forwardToChannel: enqueueActions(({ context, event, enqueue }) => {
      const e = event as Extract<ConnectionEvent, { topic: string }>
      const ref = channelOf(context, e.topic)!
      enqueue.sendTo(ref, e.type === 'host.leaveChannel' ? { type: 'host.leave' } : (e as ChannelEvent))
    }),
    dropFailedChannel: enqueueActions(({ context, event, enqueue }) => {
      const failed = (event as { actorId?: string }).actorId
      const topic = Object.keys(context.channels).find((t) => context.channels[t]!.id === failed)
      const detail = thrownText((event as { error?: unknown }).error)
      if (topic === undefined) {
        enqueue.emit({ type: 'link.ignored', event: event.type, detail: `an actor of the chart failed: ${detail}` })
        return
      }
      const { [topic]: _gone, ...rest } = context.channels
      enqueue.assign({ channels: rest })
      enqueue.emit({
        type: 'link.channel',
        topic,
        status: 'dropped',
        reason: { kind: 'other', detail: `the channel failed inside phoenix-link: ${detail}`, retryable: true, generation: context.generation, at: context.env.now() } as ReasonLike,
      })
    }),
    forgetFinishedChannel: enqueueActions(({ context, event, enqueue }) => {
      const e = event as ChannelStatusReport // runs on channel.status only
      if (e.status !== 'dropped' && e.status !== 'left') return
      // A channel reports dropped or left once, as its last act: its actor is there.
      const ref = channelOf(context, e.topic)!
      const { [e.topic]: _gone, ...rest } = context.channels
      enqueue.assign({ channels: rest })
      enqueue.stopChild(ref)
    }),
    announceConnected: emit(({ context }) => ({
      type: 'link.connected' as const,
      generation: context.generation,
      epoch: context.epoch,
      reconnect: context.connects > 1,
    })),
    announceRetry: emit(({ context }) => ({
      type: 'link.disconnected' as const,
      reason: context.lastReason!,
      // After recordRetry, on the same event.
      nextDelayMs: context.retry!.delayMs,
      attempt: context.retry!.attempt,
    })),
    announceEnded: emit(({ context }) => ({
      type: 'link.disconnected' as const,
      reason: context.lastReason!,
      nextDelayMs: null,
      attempt: null,
    })),
    announceChannel: emit(({ event }) => {
      const e = event as ChannelStatusReport
      return { type: 'link.channel' as const, topic: e.topic, status: e.status, reason: e.reason }
    }),
    announceDuplicate: emit(({ event }) => {
      const e = event as Extract<ControlReport, { type: 'control.duplicate' }>
      return { type: 'link.controlDuplicate' as const, signal: e.signal, sequence: e.sequence }
    }),
    announceControlDropped: emit(({ event }) => {
      const e = event as Extract<ControlReport, { type: 'control.dropped' }>
      return { type: 'link.controlDropped' as const, signals: e.signals, cause: e.cause }
    }),
    announceHandlerFailed: emit(({ event }) => {
      const e = event as Extract<ControlReport, { type: 'control.handlerFailed' }>
      return { type: 'link.controlFailed' as const, signal: e.signal, sequence: e.sequence, error: e.error }
    }),
    reportIgnored: enqueueActions(({ context, event, enqueue }) => {
      if (event.type.startsWith('xstate.')) return
      const detail =
        'epoch' in event && event.epoch !== context.epoch
          ? `from an earlier session (epoch ${event.epoch}, current ${context.epoch})`
          : 'generation' in event && event.generation !== context.generation
            ? `from a stale transport (generation ${event.generation}, current ${context.generation})`
            : event.type === 'socket.malformed'
              ? event.detail
              : 'not handled in this state'
      enqueue.emit({ type: 'link.ignored', event: event.type, detail })
    }),
  },
  delays: {
    controlRejoinDelay: ({ context }) => rejoinDelayMs(context.channelPolicy, context.controlCrashes, context.env.random()),
    controlStableAfter: ({ context }) => context.channelPolicy.rejoinStableAfterMs,
    connectTimeout: ({ context }) => context.policy.connectTimeoutMs,
    joinTimeout: ({ context }) => context.policy.joinTimeoutMs,
    leaveTimeout: ({ context }) => context.policy.leaveTimeoutMs,
  },
}).createMachine({
  id: 'connection',
  context: ({ input }) => ({
    policy: input.policy ?? DEFAULT_CONNECTION_POLICY,
    reconnectPolicy: input.reconnectPolicy ?? DEFAULT_RECONNECT_POLICY,
    channelPolicy: input.channelPolicy ?? DEFAULT_CHANNEL_POLICY,
    controlPolicy: input.controlPolicy ?? DEFAULT_CONTROL_POLICY,
    env: input.env,
    epoch: 0,
    generation: 0,
    lastReason: null,
    retry: null,
    connects: 0,
    liveLostAt: null,
    channels: {},
    signalSeq: 0,
    controlCrashes: 0,
  }),
  invoke: { id: 'control', src: 'control', input: ({ context }) => ({ policy: context.controlPolicy }) },
  initial: 'idle',
  on: {
    'host.channel': { guard: 'isNewChannel', actions: 'spawnChannel' },
    'host.leaveChannel': { guard: 'hasChannel', actions: 'forwardToChannel' },
    'channel.joinOk': { guard: 'hasChannel', actions: 'forwardToChannel' },
    'channel.joinError': { guard: 'hasChannel', actions: 'forwardToChannel' },
    'channel.error': { guard: 'hasChannel', actions: 'forwardToChannel' },
    'channel.close': { guard: 'hasChannel', actions: 'forwardToChannel' },
    'channel.left': { guard: 'hasChannel', actions: 'forwardToChannel' },
    'channel.attachFailed': { guard: 'hasChannel', actions: 'forwardToChannel' },
    'channel.status': { actions: ['announceChannel', 'forgetFinishedChannel'] },
    // An app channel actor stopped with an error (a phoenix-link bug): report it as dropped and forget it.
    'xstate.error.actor.*': { actions: 'dropFailedChannel' },
    'socket.malformed': { actions: 'reportIgnored' },
    'control.duplicate': { actions: 'announceDuplicate' },
    'control.handlerFailed': { actions: 'announceHandlerFailed' },
    'control.dropped': { actions: 'announceControlDropped' },
    // Lenient at run time: anything no state handled (stale, late, malformed) is reported, not thrown.
    '*': { actions: 'reportIgnored', meta: { rule: 'stale-events-ignored' } },
  },
  states: {
    /** Nothing open; no session has started. */
    idle: {
      description: 'Nothing open; no session has started.',
      on: {
        'host.connect': { target: 'session', actions: ['startSession', 'resetControl'] },
        'host.disconnect': { meta: { rule: 'disconnect-always-succeeds' } },
      },
    },
    /** A session: from host.connect until stop or a terminal reason. */
    session: {
      description: 'A session, from host.connect until the host stops it or a terminal reason ends it.',
      invoke: {
        id: 'reconnect',
        src: 'reconnect',
        input: ({ context }) => ({ policy: context.reconnectPolicy, env: context.env }),
      },
      initial: 'online',
      on: {
        'host.connect': {},
        'host.disconnect': { target: 'stopped', actions: 'recordGraceful', meta: { rule: 'disconnect-always-succeeds' } },
        // Terminal in every session state, the backoff included: a late read still means a
        // newer instance of this agent holds the key, and reconnecting would evict it.
        'control.supersede': {
          guard: 'isCurrentSession',
          target: 'terminated',
          actions: 'recordLoss',
          meta: { rule: 'supersede-is-terminal' },
        },
      },
      states: {
        /** A transport of this session exists (opening, open, or closing on our side). */
        online: {
          description: 'A transport of this session exists: opening, open, or closing on our side. Leaving it ends the socket.',
          entry: 'nextGeneration',
          invoke: {
            id: 'transport',
            src: 'transport',
            input: ({ context }) => ({ generation: context.generation, epoch: context.epoch }),
            // The adapter's transport actor threw (a phoenix-link bug): a loss like any other, retried.
            onError: { target: 'lost', actions: 'recordActorFailure' },
          },
          initial: 'connecting',
          on: {
            'socket.close': { guard: 'isCurrentTransport', target: 'lost', actions: 'recordLoss', meta: { rule: 'normal-close-reconnects' } },
            'socket.upgradeRejected': {
              guard: 'isCurrentTransport',
              target: 'lost',
              actions: 'recordLoss',
              meta: { rule: 'upgrade-rejection-is-terminal' },
            },
            'socket.heartbeatTimeout': { guard: 'isCurrentTransport', target: 'lost', actions: 'recordLoss' },
            'control.signal': { guard: 'isCurrentTransport', actions: 'enqueueControlSignal', meta: { rule: 'control-in-order' } },
          },
          states: {
            /** Transport `generation` is opening. */
            connecting: {
              description: 'The WebSocket of this generation is opening (TCP, TLS, HTTP upgrade).',
              on: {
                'socket.open': { guard: 'isCurrentTransport', target: 'attached', actions: 'tellReconnectOpened' },
              },
              after: { connectTimeout: { target: '#connection.session.lost', actions: 'recordConnectTimeout' } },
            },
            /** The transport is open; the control channel lives on it. */
            attached: {
              description: 'The transport is open; the control channel lives on it.',
              invoke: {
                id: 'controlChannel',
                src: 'controlChannel',
                input: ({ context }) => ({ generation: context.generation, epoch: context.epoch }),
                onError: { target: '#connection.session.lost', actions: 'recordActorFailure' },
              },
              initial: 'joining',
              on: {
                'control.lost': { guard: 'isCurrentTransport', target: '#connection.session.lost', actions: 'recordLoss' },
              },
              states: {
                /** The control channel join is pushed. */
                joining: {
                  description: 'The control channel join is pushed; waiting for its reply.',
                  on: {
                    'control.joinOk': { guard: 'isCurrentTransport', target: 'live' },
                    'control.joinError': {
                      guard: 'isCurrentTransport',
                      target: '#connection.session.lost',
                      actions: 'recordLoss',
                    },
                  },
                  after: { joinTimeout: { target: '#connection.session.lost', actions: 'recordJoinTimeout' } },
                },
                /** The session is up on this transport: app channels attached; the control channel joined or rejoining. */
                live: {
                  description: 'The session is up on this transport: app channels attached; the control channel joined, or rejoining after a crash.',
                  entry: ['countConnect', 'clearRetry', 'announceConnected', 'attachChannels'],
                  exit: ['detachChannels', 'markLiveLost'],
                  on: {
                    'host.channel': { guard: 'isNewChannel', actions: ['spawnChannel', 'attachNewChannel'] },
                  },
                  initial: 'connected',
                  states: {
                    /** Control channel joined; app channels joined or rejoining. */
                    connected: {
                      description: 'Control channel joined; app channels joined or rejoining.',
                      // A join that holds the channel policy's rejoinStableAfterMs ends the run of crashes.
                      after: { controlStableAfter: { actions: 'clearControlCrashes' } },
                      on: {
                        'host.disconnect': { target: '#connection.session.online.attached.stopping' },
                        'control.crashed': { guard: 'isCurrentTransport', target: 'controlErrored', meta: { rule: 'control-crash-rejoins' } },
                      },
                    },
                    /** phx_error on the control channel: its server process crashed; rejoin on this socket after a delay. */
                    controlErrored: {
                      description: 'phx_error on the control channel: rejoin it on this socket after a delay (the socket and app channels stay).',
                      entry: 'countControlCrash',
                      after: { controlRejoinDelay: { target: 'controlRejoining' } },
                    },
                    /** The control channel's rejoin is pushed, with a fresh join_ref. */
                    controlRejoining: {
                      description: "The control channel's rejoin is pushed with a fresh join_ref; waiting for its reply.",
                      entry: 'rejoinControlChannel',
                      on: {
                        'control.joinOk': { guard: 'isCurrentTransport', target: 'connected' },
                        'control.crashed': { guard: 'isCurrentTransport', target: 'controlErrored' },
                        'control.joinError': {
                          guard: 'isCurrentTransport',
                          target: '#connection.session.lost',
                          actions: 'recordLoss',
                        },
                      },
                      after: { joinTimeout: { target: '#connection.session.lost', actions: 'recordJoinTimeout' } },
                    },
                  },
                },
                /** disconnect(): leaving the control channel, then the transport closes 1000. */
                stopping: {
                  description: 'disconnect(): leaving the control channel; the socket closes 1000 on stopped.',
                  entry: 'leaveControlChannel',
                  on: {
                    'host.disconnect': {},
                    'control.left': { guard: 'isCurrentTransport', target: '#connection.stopped', actions: 'recordGraceful' },
                    'control.lost': { guard: 'isCurrentTransport', target: '#connection.stopped', actions: 'recordGraceful' },
                    'control.crashed': { guard: 'isCurrentTransport', target: '#connection.stopped', actions: 'recordGraceful' },
                    'socket.close': { guard: 'isCurrentTransport', target: '#connection.stopped', actions: 'recordGraceful' },
                    'socket.heartbeatTimeout': {
                      guard: 'isCurrentTransport',
                      target: '#connection.stopped',
                      actions: 'recordGraceful',
                    },
                    'control.signal': {},
                  },
                  after: { leaveTimeout: { target: '#connection.stopped', actions: 'recordGraceful' } },
                },
              },
            },
          },
        },
        /** Transient: the transport was lost; terminal or retry. */
        lost: {
          description: 'Transient: the loss just recorded is terminal (supersede, refusal) or retried.',
          always: [
            { guard: 'isOwnConflict', target: 'reconnecting', actions: 'retryOwnConflict', meta: { rule: 'own-conflict-retries' } },
            { guard: 'isTerminalLoss', target: '#connection.terminated', meta: { rule: 'upgrade-rejection-is-terminal' } },
            { target: 'reconnecting', meta: { rule: 'normal-close-reconnects' } },
          ],
        },
        /** No transport; the reconnect chart decides the wait. */
        reconnecting: {
          description: 'No transport; the reconnect chart chooses the wait or gives up.',
          entry: 'tellReconnectLost',
          initial: 'deciding',
          states: {
            deciding: {
              description: "Waiting for the reconnect chart's answer: a delay, a slow-down, or (by policy) give up.",
              on: {
                'reconnect.scheduled': { target: 'waiting', actions: ['recordRetry', 'announceRetry'] },
                'reconnect.suspended': {
                  target: 'suspended',
                  actions: ['recordSuspension', 'recordRetry', 'announceRetry'],
                  meta: { rule: 'suspend-not-give-up' },
                },
                'reconnect.gaveUp': { target: '#connection.terminated', actions: 'recordGiveUp' },
              },
            },
            waiting: {
              description: 'Waiting out the delay; the next transport opens on reconnect.due.',
              on: { 'reconnect.due': { target: '#connection.session.online' }, 'host.reconnect': { actions: 'retryNow' } },
            },
            /** Past the rapid-disconnect limit: the cooldown; the reason is `suppressed`, retryable. */
            suspended: {
              description: 'Past the rapid-disconnect limit: waiting out a cooldown (growing to ~5 min); the next transport opens on reconnect.due.',
              on: { 'reconnect.due': { target: '#connection.session.online' }, 'host.reconnect': { actions: 'retryNow' } },
            },
          },
        },
      },
    },
    /** The host stopped the session; `lastReason` is `graceful`. */
    stopped: {
      description: 'The host stopped the session; lastReason is graceful and kept until the next connect.',
      // Signals not yet handed to the handler are dropped (reported): the host stopped the agent.
      entry: ['announceEnded', 'flushControl'],
      on: {
        'host.connect': { target: 'session', actions: ['startSession', 'resetControl'] },
        'host.disconnect': { meta: { rule: 'disconnect-always-succeeds' } },
      },
    },
    /** A terminal reason ended the session; no transport, no timer. */
    terminated: {
      description: 'A terminal reason ended the session; no transport, no timer. disconnect() sends nothing.',
      entry: 'announceEnded',
      on: {
        'host.connect': { target: 'session', actions: ['startSession', 'resetControl'] },
        // Sends nothing on the wire; signals still waiting for the handler are dropped (the host stopped).
        'host.disconnect': { actions: 'flushControl', meta: { rule: 'disconnect-always-succeeds' } },
      },
    },
  },
})

/** The connection chart's states as dotted paths, e.g. `session.online.attached.connected`. */
export type ConnectionStatePath =
  | 'idle'
  | 'session.online.connecting'
  | 'session.online.attached.joining'
  | 'session.online.attached.live.connected'
  | 'session.online.attached.live.controlErrored'
  | 'session.online.attached.live.controlRejoining'
  | 'session.online.attached.stopping'
  | 'session.lost'
  | 'session.reconnecting.deciding'
  | 'session.reconnecting.waiting'
  | 'session.reconnecting.suspended'
  | 'stopped'
  | 'terminated'
