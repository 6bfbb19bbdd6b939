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
 *   session --control.supersede (the key holder)--> terminated
 *
 * The rules of docs/lifecycle.md, each a guard or transition below:
 * - normal close reconnects: a loss goes to `lost`; only `isTerminalLoss` (a non-retryable
 *   reason from src/reasons.ts's tables) ends the session, and no close code is terminal there.
 * - supersede is terminal: `control.supersede` read on the key holder (the current transport, or
 *   the one just lost until the next one's upgrade is sent: `isKeyHolder`) ends the session from
 *   every session state, the backoff included; leaving `online` runs `endTransport`, so the socket
 *   is ended, not flagged. One read on the previous key holder while the next one's upgrade is
 *   out and unanswered may be the platform superseding that socket because of our own next one:
 *   it is held (`awaitsUpgradeOutcome`) until that upgrade is answered, and ends the session if
 *   the server refuses the upgrade with a 4xx (`isRefusalOfHeldUpgrade`: the platform refuses
 *   those before it supersedes, so the upgrade caused nothing), or is reported as ignored once the
 *   server accepts it. An upgrade that ends with no answer (a drop, the connect timeout), or with a
 *   5xx (a 503 `tracking_failed` comes after the platform superseded; a gateway's 5xx may follow an
 *   upgrade accepted upstream), keeps the key claim, as it may have superseded; a supersede held on it,
 *   or read later on the socket before it (`isAmbiguousSupersede`), has an unknown cause
 *   (`ambiguousSupersede`): the next attempts are conflict probes (`on_conflict=reject`), so no
 *   other instance is evicted to find out; an accepted probe dismisses it, a probe refused 409
 *   past `conflictRetryWindowMs` ends the session (`isProbeConflict`). The platform pushes
 *   `supersede` only through a joined control channel, so a socket it supersedes before that is
 *   only closed: a server's close of an accepted socket before its control channel joined
 *   (`isLostUnseen`) leaves a supersede of unknown cause too, probed the same way; so does a
 *   reset of an accepted socket at any time, which loses the frames the server had sent (a
 *   supersede push among them) that the link had not read.
 * - upgrade rejection is terminal: 400/401/403/409 classify as non-retryable; 429/503 carry
 *   Retry-After into the reconnect chart.
 * - our own conflict is retried: a 409 within `conflictRetryWindowMs` of losing or closing a socket
 *   of this link that the server had accepted, joined or not (`isOwnConflict`), is the platform
 *   still holding our socket; it reconnects.
 * - a control channel crash is a channel crash: its phx_error rejoins it on the same socket with
 *   backoff (`live.controlErrored`); the transport and the app channels stay; only its phx_close,
 *   or a refused rejoin, is a session-level loss.
 * - giving up is not the default: past the rapid-disconnect limit the reconnect chart suspends
 *   (one attempt per cooldown, for ever, `reconnecting.suspended`); only supersede, an upgrade
 *   rejection or a policy give-up end a session.
 * - stale generations change nothing: `isCurrentTransport` guards every adapter event; a stale
 *   one falls through to the root and is reported as ignored.
 * - cancelling a wait is not a stop: waits live in the link; only `host.disconnect` stops.
 * - disconnect() always succeeds: `host.disconnect` is handled in every state.
 * - control signals in order without holding up a supersede or close: they go to the
 *   control delivery chart (machines/control.ts); this chart never waits for the handler.
 *
 * The chart holds no actor. Its I/O is named actions the link's runtime (src/runtime/) carries
 * out after each transition: the transport (`openTransport` on entering `online`, `endTransport`
 * on leaving it), the control channel (`joinControlChannel`, `rejoinControlChannel`,
 * `leaveControlChannel`), and what it tells the other charts of the link (`tellReconnect`,
 * `tellControl`, `startChannel`, `tellChannel`, `stopChannel`, `startReconnect`, `stopReconnect`).
 * They report back with events (`reconnect.*`, `control.*` reports, `channel.status`). An I/O
 * action that throws (a phoenix-link bug) comes back as `io.failed`: a loss, retried.
 */
import { assign, emit, enqueueActions, setup } from 'xstate'
import { DEFAULT_CHANNEL_POLICY, rejoinDelayMs, type ChannelEvent, type ChannelPolicy, type ChannelStatusReport } from './channel.js'
import { DEFAULT_CONTROL_POLICY, type ControlDropCause, type ControlEvent, type ControlPolicy, type ControlReport, type QueuedSignal, type SignalLike } from './control.js'
import { DEFAULT_RECONNECT_POLICY, type ReconnectEvent, type ReconnectPolicy, type ReconnectReport } from './reconnect.js'
import { DISCONNECT_CLOSE_CODES, gracefulReason, isRefusedBeforeSupersede, isResetUnseen, isRefusedUnaccepted, thrownText, timedOutReason, unseenSupersedeReason, UNSEEN_SUPERSEDE_CAUSE, type Env, type Origin, type ReasonLike, type TransportOpen } from './types.js'
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
  /**
   * Adapter: this transport's upgrade request left (in Node once its TCP connection, or TLS
   * session, is up and the request written; a browser's WebSocket tells nothing of it, so there
   * once the WebSocket is made): from now on the server may accept it, and may supersede an older
   * socket of this agent because of it, so this transport holds the key (`claimKey`). Until then
   * (credentials pending, the TCP connection opening or refused) the socket lost before still
   * holds it. `socket.open` claims it too, for an adapter that never sends this event.
   */
  | ({ type: 'socket.upgradeSent' } & Origin)
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
  | ({ type: 'control.signal'; signal: SignalLike; /** The size of its frame as read (control `maxQueuedBytes`); absent counts 0. */ bytes?: number } & Origin)
  /** Adapter: an inbound frame or payload it could not use; reported, never acted on. */
  | ({ type: 'socket.malformed'; detail: string } & Origin)
  /** Adapter: events of app channels, forwarded to the channel actor of `topic`. */
  | Extract<ChannelEvent, { topic: string }>
  /** Reconnect chart (machines/reconnect.ts), through the link's runtime. */
  | ReconnectReport
  /** Channel charts (machines/channel.ts), through the link's runtime. */
  | ChannelStatusReport
  /** Control delivery chart (machines/control.ts), through the link's runtime. */
  | ControlReport
  /** Runtime: the channel chart of `topic` stopped with an error (a phoenix-link bug). */
  | { type: 'channel.failed'; topic: string; error: unknown }
  /** Runtime: an I/O action of this chart threw (a phoenix-link bug): during a transport, a retryable loss. */
  | { type: 'io.failed'; action: string; error: unknown }

/** Events the chart emits for the link to publish (actor.on). */
export type ConnectionEmitted =
  | { type: 'link.connected'; generation: number; epoch: number; reconnect: boolean }
  | { type: 'link.disconnected'; reason: ReasonLike; nextDelayMs: number | null; attempt: number | null; conflictProbe: boolean }
  | { type: 'link.channel'; topic: string; status: ChannelStatusReport['status']; reason: ReasonLike | null }
  | { type: 'link.ignored'; event: string; detail: string }
  | { type: 'link.controlDuplicate'; signal: SignalLike; sequence: number }
  | { type: 'link.controlFailed'; signal: SignalLike; sequence: number; error: unknown }
  | { type: 'link.controlDropped'; signals: QueuedSignal[]; cause: ControlDropCause }

/** A supersede doubt another link of the agent left, as the chart takes it ({@link ConnectionInput.supersedeDoubt}): times on env.monotonic. */
export interface CarriedDoubt {
  reason: ReasonLike
  since: number
  socketLostAt: number | null
}

/** Input of the connection chart. */
export interface ConnectionInput {
  /**
   * The host's `on_conflict` socket param (LinkOptions.onConflict). `'reject'`: the link's
   * upgrades never supersede another socket (the platform answers 409 instead), so no supersede can
   * be the link's own doing and an upgrade claims the key only once accepted. Default: supersede.
   */
  onConflict?: 'supersede' | 'reject'
  /**
   * A supersede of unknown cause the chart starts with (`ambiguousSupersede`): one another
   * link of the same agent could not decide before it ended (LinkOptions.supersedeDoubt), with
   * when it arose (`since`) and when that link last lost a socket the server may still hold
   * (`socketLostAt`, its `acceptedLostAt`, or null), both on the same monotonic clock
   * (`env.monotonic`). The first session's attempts probe, as a next session of that link's would
   * have, and a 409 within `conflictRetryWindowMs` of either is retried as that link's would be
   * (it may be the platform still holding that link's socket). Default: none.
   */
  supersedeDoubt?: CarriedDoubt | null
  policy?: ConnectionPolicy
  reconnectPolicy?: ReconnectPolicy
  channelPolicy?: ChannelPolicy
  controlPolicy?: ControlPolicy
  env: Env
}

/**
 * What the connection chart was made with, fixed for its life: one object the context refers to,
 * not six context fields, so the context stays within `MAX_CONTEXT_FIELDS` (machines/types.ts).
 * XState copies the whole context on every assign; past that many fields every copy is a
 * dictionary in V8 (with them as six fields, 23 in all: 2.5 KiB per snapshot instead of 1.1, and
 * slower guards, measured 2026-12-05).
 */
export interface ConnectionConfig {
  /** Whether the link's upgrades may supersede another socket of the agent (not `onConflict: 'reject'`). */
  upgradesSupersede: boolean
  policy: ConnectionPolicy
  reconnectPolicy: ReconnectPolicy
  channelPolicy: ChannelPolicy
  controlPolicy: ControlPolicy
  /** Injected clocks and randomness (`env.monotonic` decides elapsed time, `env.now` stamps `at`). */
  env: Env
}

/** Context of the connection chart. */
export interface ConnectionContext {
  /** What the chart was made with ({@link ConnectionConfig}), the same object for its life. */
  config: ConnectionConfig
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
   * When (env.monotonic) the link last left a socket the server had accepted (state `attached`:
   * joining, live or stopping), or ended one whose upgrade left and had no answer (a drop, the
   * connect timeout, the host's disconnect(), an I/O fault, a gateway's 500/502/504: the server
   * may have accepted it, its 101 lost; not a supersede that ended the session, which says another
   * instance holds the key), in this session or an earlier one: the platform may hold any socket of this link it accepted,
   * joined or not, whatever the session (the real platform tracks the agent in `connect/3`, before
   * any join). Null before either.
   */
  acceptedLostAt: number | null
  /**
   * The generation of this session's newest transport that may hold the agent's key on the
   * server: its upgrade was sent (`socket.upgradeSent`) and not refused with a 4xx; 0: none yet. A
   * supersede read on it counts, during the backoff after its loss too (the socket is read until
   * its close completes); one read on an older transport once this one's upgrade was sent may be
   * the platform superseding it because of this one (it supersedes in `connect/3`, before it
   * answers 101): held or of unknown cause. (A control signal counts on the newest socket the
   * server accepted as well: `isSignalSource`.)
   */
  keyHolder: number
  /** The key holder before the current transport claimed the key: the holder again if its upgrade is refused. */
  priorKeyHolder: number
  /**
   * The generation of this session's newest transport the server accepted (`socket.open`); 0:
   * none yet. A key holder newer than it sent its upgrade and had no answer (dropped, timed out,
   * a gateway's 5xx): the server may have accepted it, its 101 lost, and superseded the socket
   * before it because of it.
   */
  lastAccepted: number
  /**
   * A supersede whose cause the link cannot know (`isAmbiguousSupersede`, or a held one whose
   * upgrade ended with no answer), with when it became so (env.monotonic); null while none. While
   * set, every attempt is a conflict probe: its upgrade asks `on_conflict=reject` (the platform
   * answers 409 instead of superseding another live socket of the agent, docs/field-notes.md), so
   * the link never evicts another instance to find out. Accepted: no other instance holds the key,
   * and it is reported as ignored. Refused 409 past `conflictRetryWindowMs` (within it the 409 may
   * be our own unanswered socket, still held): another instance holds the key, and it ends the
   * session. It outlives a session that ends before deciding it (the host's disconnect(), a
   * refusal, a policy give-up: `carrySupersedeDoubt`), so the next session's attempts probe too:
   * disconnect() then connect() must not evict the instance that may hold the key. A session that
   * ends `superseded` decided it.
   */
  ambiguousSupersede: { reason: ReasonLike; since: number } | null
  /** Whether the current transport's upgrade is a conflict probe (it asks `on_conflict=reject`). */
  probing: boolean
  /** Whether the current transport's upgrade has left (`socket.upgradeSent`, or `socket.open`). */
  upgradeLeft: boolean
  /** Topics of the app channels that have a channel chart, in the order the host asked for them. */
  channels: readonly string[]
  /** Arrival sequence of control signals. */
  signalSeq: number
  /** Control channel crashes in a row (no join since that held the channel policy's rejoinStableAfterMs), for the rejoin backoff. */
  controlCrashes: number
  /**
   * App channel reports (`detached`, as the lost socket's channels tell it) read while the
   * reconnect chart decides (`reconnecting.deciding`), in order; null while none. Announced before
   * the link's `disconnected` when it reconnects, and after the session ended (queued again behind
   * it, `redeliver`) when it gives up: a loss that ends the session tells its channels last.
   */
  heldChannelReports: readonly ChannelStatusReport[] | null
  /**
   * A supersede read on the previous key holder (`priorKeyHolder`) while the current transport's
   * upgrade is out and unanswered (`awaitsUpgradeOutcome`), as its reason; null while none. Our
   * own upgrade may have caused it, so it waits for that upgrade's answer: if the server refuses
   * it with a 4xx (the platform refuses those before it supersedes), it caused nothing and the
   * supersede was another instance's, which ends the session (`isRefusalOfHeldUpgrade`); if the
   * server accepts it, it is reported as ignored (`dismissHeldSupersede`); if the upgrade ends with
   * no answer (a drop, the connect timeout, the host's disconnect() abandoning it) or a 5xx (the
   * platform's 503 comes after it superseded; a gateway's may follow an upgrade accepted upstream),
   * its cause is unknown (`ambiguousSupersede`).
   */
  heldSupersede: ReasonLike | null
  /**
   * When (env.monotonic) the current transport's control channel joined, or last rejoined
   * (entering `live.connected`); null while it is not joined (a new transport, or a crash of it,
   * `controlErrored`). The platform pushes `supersede` only through a joined control channel
   * (reference peer: supersede.ex broadcasts to the channel's own subscription, made in its join)
   * and closes the socket a moment later, as a "disconnect" closes it (1011 on Bandit, 1000 on
   * Cowboy): a server's close of an accepted socket whose control channel is not joined, or
   * joined less than `unseenSupersedeWindowMs` before (after the broadcast, before the close), may
   * be an unseen supersede (`isLostUnseen`).
   */
  controlJoinedAt: number | null
}

/** The part of an `enqueueActions` enqueue the supersede helpers below use: emit a report, assign context. */
type ChartEnqueue = { emit(event: ConnectionEmitted): void; assign(values: Partial<ConnectionContext>): void }

/**
 * Whether a supersede read on the transport `event` names (generation, epoch) has an unknown
 * cause: it is the newest socket the server accepted (`lastAccepted`), and a newer transport holds
 * the key claim unanswered; or it is a socket of an earlier session and this one has no accepted
 * socket yet.
 */
function causeUnknown(context: ConnectionContext, event: Origin): boolean {
  // Generations start at 1, so a match says a socket was accepted in this session.
  if (event.generation === context.lastAccepted && context.keyHolder !== context.lastAccepted) return true
  // A socket of an earlier session, read before the server accepted any upgrade of this one: the
  // server still held it (a stalled peer never read its close) and superseded it, because an
  // upgrade of ours connected (this session's, or one the host's disconnect() abandoned) or
  // because another instance did.
  return context.config.upgradesSupersede && event.epoch !== context.epoch && context.lastAccepted === 0
}

/**
 * Whether the loss (`reason`) of the current transport may hide a supersede, when the link's
 * upgrades supersede (onConflict 'supersede'):
 * - a server's close with a "disconnect" close code (`DISCONNECT_CLOSE_CODES`, which the close
 *   table in src/reasons.ts reads as `closed`; a close frame comes only on a socket the server
 *   accepted) while the control channel was not joined, or within `unseenSupersedeWindowMs` of
 *   its join: the platform pushes a supersede only through a joined control channel;
 * - a reset of a socket the server had accepted (a `dropped` reason marked `reset`), however long
 *   its control channel had been joined: the reset loses the frames the server sent that the link
 *   had not read, and Phoenix closes with a reset whenever the client is sending (a supersede push
 *   then the close 50 ms later, docs/field-notes.md "A reset loses what it overtakes"). The
 *   adapter marks only a reset soon after the link sent (transport policy `resetAfterSendMs`):
 *   the server's own close, after which it holds that socket no more, so a probe meets no 409 of
 *   ours; a middlebox's reset of an idle link, the server still holding the socket, is not marked.
 */
function closedUnseen(context: ConnectionContext, reason: ReasonLike): boolean {
  if (!context.config.upgradesSupersede) return false
  if (reason.reset === true) return reason.generation === context.lastAccepted
  return (
    DISCONNECT_CLOSE_CODES.includes(reason.closeCode!) &&
    (context.controlJoinedAt === null || context.config.env.monotonic() - context.controlJoinedAt < context.config.policy.unseenSupersedeWindowMs)
  )
}

/**
 * Reports a held or ambiguous supersede as ignored, saying why it decided nothing, and forgets
 * both: `ended` is null when the server accepted an upgrade (a probe, or one sent before the
 * doubt), else how the session ended first (only `superseded` forgets a doubt at a session's end).
 * A doubt no supersede read raised (a close just before or after the control join, cause
 * `unseen`) that the session's end decided was about nothing read: not reported.
 */
function dismissDoubt(
  context: ConnectionContext,
  ended: string | null,
  enqueue: ChartEnqueue,
): void {
  const { heldSupersede: held, ambiguousSupersede: ambiguous } = context
  if (held !== null) {
    const why = ended ?? 'the next upgrade was accepted, so it may be the platform superseding our own previous socket'
    enqueue.emit({ type: 'link.ignored', event: 'control.supersede', detail: `a supersede of the previous socket (generation ${held.generation}), held while the next upgrade was out: ${why}` })
  }
  if (ambiguous !== null && !(ended !== null && ambiguous.reason.cause === UNSEEN_SUPERSEDE_CAUSE)) {
    const why =
      ended ??
      (context.probing
        ? 'the server accepted a connection made with on_conflict=reject, so no other instance holds the key'
        : 'the next upgrade, sent before it was read and without on_conflict=reject, was accepted, so it may be the platform superseding our own previous socket')
    // An unseen doubt was raised by a close, not by a supersede read: its report names the close.
    const unseen = ambiguous.reason.cause === UNSEEN_SUPERSEDE_CAUSE
    const what = !unseen
      ? `a supersede of the previous socket (generation ${ambiguous.reason.generation}), whose cause was unknown`
      : isResetUnseen(ambiguous.reason)
        ? `a reset that may have lost a supersede push (the connection of the socket of generation ${ambiguous.reason.generation} was reset, which discards the frames the server sent that were not yet read)`
        : `a close that may have hidden a supersede the platform could not push (the server closed the socket of generation ${ambiguous.reason.generation} before its control channel joined, or within unseenSupersedeWindowMs of the join)`
    enqueue.emit({ type: 'link.ignored', event: unseen ? 'socket.close' : 'control.supersede', detail: `${what}: ${why}` })
  }
  if (held !== null || ambiguous !== null) enqueue.assign({ heldSupersede: null, ambiguousSupersede: null })
}

/**
 * Records a supersede whose cause is unknown (from when, env.monotonic), so the next attempts
 * probe; a second one while one is probed changes nothing, and says so.
 */
function noteCauseUnknown(
  context: ConnectionContext,
  reason: ReasonLike,
  enqueue: ChartEnqueue,
): void {
  if (context.ambiguousSupersede !== null) {
    enqueue.emit({ type: 'link.ignored', event: 'control.supersede', detail: 'a supersede of the previous socket whose cause is unknown is already being probed' })
    return
  }
  enqueue.assign({ ambiguousSupersede: { reason, since: context.config.env.monotonic() } })
}

/**
 * A held supersede whose upgrade ended with no answer (or was abandoned by the host's disconnect())
 * becomes one whose cause is unknown (`noteCauseUnknown`); nothing when none is held.
 */
function deferHeld(
  context: ConnectionContext,
  enqueue: ChartEnqueue,
): void {
  const held = context.heldSupersede
  if (held === null) return
  enqueue.assign({ heldSupersede: null })
  noteCauseUnknown(context, held, enqueue)
}

/** The stamp of the current transport, for the I/O actions about it. */
function originOf(context: ConnectionContext): Origin {
  return { generation: context.generation, epoch: context.epoch }
}

/** The connection statechart. Its I/O actions are carried out by the link's runtime (src/runtime/). */
export const connectionMachine = setup({
  types: {
    context: {} as ConnectionContext,
    events: {} as ConnectionEvent,
    input: {} as ConnectionInput,
    emitted: {} as ConnectionEmitted,
  },
  guards: {
    /**
     * The event comes from this session's current transport. Generations grow across sessions
     * (a new session does not reset them), so the generation alone names the transport. Named
     * only on adapter events, which carry an Origin.
     */
    isCurrentTransport: ({ context, event }) => (event as unknown as Origin).generation === context.generation,
    /**
     * The event was read on the current transport, or on the newest one that may hold the key
     * (`keyHolder`): the socket just lost, before the next one's upgrade was sent. Named on a
     * supersede.
     */
    isKeyHolder: ({ context, event }) => {
      const { generation } = event as unknown as Origin
      return generation === context.generation || generation === context.keyHolder
    },
    /**
     * A control signal was read on the newest socket the server accepted (`lastAccepted`: the
     * current transport once open, or the one before it): nothing newer can have been read, and the
     * platform sent it to this agent's socket. So one read on the socket lost before while the next
     * upgrade is out, or after that upgrade went unanswered (it keeps the key claim), is delivered;
     * one read on an older transport once a newer one opened is stale. Named on a control signal.
     */
    // Only an accepted socket can be read at all (the current transport too: it is the newest
    // accepted once open), and generations start at 1.
    isSignalSource: ({ context, event }) => (event as unknown as Origin).generation === context.lastAccepted,
    /**
     * A supersede read on the previous key holder while this transport's upgrade is out and
     * unanswered: this transport claimed the key (its upgrade left) and the supersede came on the
     * transport that held it before (`priorKeyHolder`). The platform supersedes in `connect/3`
     * and answers 101 right after (../shared/real-phoenix `user_socket.ex`), so our own upgrade
     * may have caused it; its outcome decides. Named on a supersede in `online.connecting`.
     */
    awaitsUpgradeOutcome: ({ context, event }) => {
      const { generation } = event as unknown as Origin
      return context.keyHolder === context.generation && generation === context.priorKeyHolder && context.priorKeyHolder === context.lastAccepted
    },
    /**
     * The current transport's upgrade left, and may supersede another socket of the agent (the
     * host did not ask `on_conflict=reject`): it claims the key. Named on `socket.upgradeSent`.
     */
    isCurrentSupersedingUpgrade: ({ context, event }) => (event as unknown as Origin).generation === context.generation && context.config.upgradesSupersede,
    /**
     * The server refused the current transport's upgrade while a supersede waits on it
     * (`heldSupersede`): the platform refuses before it supersedes (../shared/real-phoenix
     * `user_socket.ex`), so that upgrade caused nothing, and the supersede was another instance's.
     * Only a 4xx says so (`isRefusedBeforeSupersede`): an upgrade dropped or timed out unanswered
     * may have been accepted, its 101 lost, and a 5xx may follow a supersede (the platform's 503
     * `tracking_failed` comes after it). Named on `socket.upgradeRejected` in `online.connecting`.
     */
    isRefusalOfHeldUpgrade: ({ context, event }) => {
      const e = event as unknown as Origin & { reason: ReasonLike }
      return context.heldSupersede !== null && e.generation === context.generation && isRefusedBeforeSupersede(e.reason)
    },
    /**
     * A supersede read on the newest socket the server accepted (`lastAccepted`) while a newer
     * transport holds the key claim unanswered (its upgrade left and had no answer: dropped, timed
     * out, a gateway's 5xx; or it is still out behind such a one): the server may have accepted one
     * of those upgrades and superseded this socket because of it, or another instance may have.
     * Or read on a socket of an earlier session before the server accepted any upgrade of this one
     * (`causeUnknown`). Named on a supersede in `session`, and before the current upgrade left in
     * `online.connecting`.
     */
    isAmbiguousSupersede: ({ context, event }) => causeUnknown(context, event as unknown as Origin),
    /**
     * As `isAmbiguousSupersede`, read while the current transport is opening and its upgrade has not
     * left, and it is no conflict probe: it can still become one (the attempt starts again).
     */
    isAmbiguousBeforeUpgrade: ({ context, event }) =>
      !context.probing && context.keyHolder !== context.generation && causeUnknown(context, event as unknown as Origin),
    /**
     * A conflict probe was refused 409 (`on_conflict=reject`: another live socket of the agent)
     * within `conflictRetryWindowMs` of the supersede becoming ambiguous: the live socket may be our
     * own unanswered one, still held by the server; retried, still probing. Named on `lost`.
     */
    isProbeConflictInWindow: ({ context }) => {
      const probe = context.ambiguousSupersede
      if (probe === null || context.lastReason!.cause !== 'conflict') return false
      // From the later of the ambiguity and the last socket the server may hold for us (one it
      // accepted and we lost, or an upgrade of ours, a probe too, that ended with no answer).
      // A clock that stepped back reads as no time passed: probed again (a probe evicts nobody).
      const elapsed = Math.max(0, context.config.env.monotonic() - Math.max(probe.since, context.acceptedLostAt ?? probe.since))
      return elapsed <= context.config.policy.conflictRetryWindowMs
    },
    /** A conflict probe was refused 409 past the window: another instance holds the key, and the ambiguous supersede was its. Named on `lost`. */
    isProbeConflict: ({ context }) => context.ambiguousSupersede !== null && context.lastReason!.cause === 'conflict',
    /** The loss just recorded is not retryable: supersede, upgrade rejection, terminal close code. */
    isTerminalLoss: ({ context }) => context.lastReason !== null && !context.lastReason.retryable,
    /**
     * The loss may hide a supersede the link could not read (`closedUnseen`):
     * - the server closed (a close frame: `closed`, with a code a Phoenix "disconnect" sends:
     *   `DISCONNECT_CLOSE_CODES`) a socket it had accepted whose control channel was not joined
     *   (the join pending, or a rejoin after a crash), or had joined less than
     *   `unseenSupersedeWindowMs` before (a join that lands between the platform's supersede
     *   broadcast and its close hears nothing): the platform pushes `supersede` only through a
     *   joined control channel, then closes the socket as any "disconnect" does;
     * - or the connection of a socket the server had accepted was reset while the link was
     *   sending (a `dropped` reason marked `reset`), however long after the join: a reset loses
     *   the frames the server sent that the link had not read, the supersede push among them,
     *   and Phoenix's close is a reset whenever the link was sending.
     * Any other drop, a timeout or a refused join is not how a supersede ends a socket, and the
     * server may still hold that socket, so a probe would meet our own socket's 409 until the
     * server lets it go: those reconnect as before. Under onConflict 'reject' the link's upgrades
     * supersede nothing, so there is nothing to probe. Named on `lost`.
     */
    isLostUnseen: ({ context }) => closedUnseen(context, context.lastReason!),
    /**
     * As `isLostUnseen`, for the current transport's close while the host's
     * disconnect() leaves the control channel (`stopping`): the session stops as asked, and a
     * supersede there may have come unseen, so the next session's attempts probe. Named on
     * `socket.close` in `stopping`.
     */
    isStopClosedUnseen: ({ context, event }) => {
      const e = event as unknown as Origin & { reason: ReasonLike }
      return e.generation === context.generation && closedUnseen(context, e.reason)
    },
    /**
     * A supersede read after the session ended, on a socket of ours the server still held (a
     * stalled peer never read its close): another instance connected, or an upgrade of ours the
     * host's disconnect() abandoned unanswered did. Not once the session ended `superseded`: the
     * host was told, and its connect() then is its own decision. Not on a socket older than the
     * ended session's last accepted one either (an earlier session's, once that session had one
     * accepted): that later socket's own upgrade may have caused it, as during a session
     * (`lastAccepted` is kept until the next session starts; generations grow across sessions, so
     * an earlier session's socket is older than any this session accepted). Named on a supersede
     * in `stopped` and `terminated`, whose entry recorded the session's reason.
     */
    isSupersedeAfterEnd: ({ context, event }) =>
      context.config.upgradesSupersede && context.lastReason!.kind !== 'superseded' && (event as unknown as Origin).generation >= context.lastAccepted,
    /**
     * The loss is an upgrade refused 409 `conflict` within `conflictRetryWindowMs` of losing or
     * closing a socket of this link that the server had accepted: maybe our own socket, still held
     * by the platform.
     */
    isOwnConflict: ({ context }) => {
      // Only a refused upgrade (409, UPGRADE_STATUSES in src/reasons.ts) has the cause `conflict`:
      // no close code or join error maps to it. Evaluated after recordLoss: a reason is there.
      if (context.lastReason!.cause !== 'conflict' || context.acceptedLostAt === null) return false
      // Monotonic: a wall-clock step after the loss changes nothing. An injected clock that stepped
      // back reads as no time passed: retried, not terminal (the one answer that cannot be undone).
      const elapsed = Math.max(0, context.config.env.monotonic() - context.acceptedLostAt)
      return elapsed <= context.config.policy.conflictRetryWindowMs
    },
    /** An app channel chart runs for the event's topic. */
    hasChannel: ({ context, event }) => 'topic' in event && context.channels.includes(event.topic),
    /** No app channel chart runs yet for the topic. */
    isNewChannel: ({ context, event }) => 'topic' in event && !context.channels.includes(event.topic),
  },
  actions: {
    startSession: assign({
      epoch: ({ context }) => context.epoch + 1,
      lastReason: null,
      retry: null,
      connects: 0,
      controlCrashes: 0,
      // Only this session's transports can hold the key for it.
      keyHolder: 0,
      priorKeyHolder: 0,
      lastAccepted: 0,
      // A supersede whose cause is still unknown is kept (`carrySupersedeDoubt`): this session's attempts probe.
      heldSupersede: null,
    }),
    nextGeneration: assign({ generation: ({ context }) => context.generation + 1, controlJoinedAt: null }),
    // Named on socket.upgradeSent (the upgrade left), and on socket.open (it surely did); once per transport.
    claimKey: assign(({ context }) => (context.keyHolder === context.generation ? {} : { priorKeyHolder: context.keyHolder, keyHolder: context.generation })),
    // Named on socket.open: the server accepted this transport.
    markAccepted: assign({ lastAccepted: ({ context }) => context.generation }),
    // Named on socket.upgradeRejected: an upgrade refused with a 4xx (the platform answers those
    // before it supersedes) made no claim. Any other loss before the socket opened keeps it: a drop
    // or the connect timeout may follow an upgrade the server accepted, its 101 lost, and a 5xx may
    // follow a supersede (the platform's 503 `tracking_failed`; a gateway's after its upstream accepted).
    releaseKeyClaim: assign(({ context, event }) =>
      context.keyHolder === context.generation && isRefusedBeforeSupersede((event as unknown as { reason: ReasonLike }).reason) ? { keyHolder: context.priorKeyHolder } : {},
    ),
    // Named on a supersede read on the previous key holder while this transport's upgrade is out
    // (`awaitsUpgradeOutcome`): kept until the upgrade's outcome is known. A second one while one
    // is held changes nothing, and says so.
    holdSupersede: enqueueActions(({ context, event, enqueue }) => {
      if (context.heldSupersede !== null) {
        enqueue.emit({ type: 'link.ignored', event: event.type, detail: 'a supersede of the previous socket is already held until the next upgrade is answered' })
        return
      }
      enqueue.assign({ heldSupersede: (event as Extract<ConnectionEvent, { type: 'control.supersede' }>).reason })
    }),
    // Named on the refusal of the upgrade a supersede waited on (`isRefusalOfHeldUpgrade`): it is the session's reason.
    recordHeldSupersede: assign({ lastReason: ({ context }) => context.heldSupersede, heldSupersede: null }),
    // Named on socket.open: a held or ambiguous supersede decides nothing once the server accepted
    // the upgrade (a held one may be the platform superseding our previous socket because of it; an
    // ambiguous one was answered by a conflict probe, so no other instance holds the key, unless
    // that upgrade left before it was read). Reported as ignored, saying which.
    dismissHeldSupersede: enqueueActions(({ context, enqueue }) => dismissDoubt(context, null, enqueue)),
    // Entering stopped or terminated. A supersede whose cause is unknown outlives a session that
    // ends before deciding it (the host's disconnect(), a refusal, a policy give-up): the next
    // session's attempts probe too, so a host's disconnect() then connect() cannot evict the
    // instance that may hold the key; nothing is decided, so nothing is reported yet. A held one
    // there was held on an upgrade the host's disconnect() abandoned unanswered (the server may have
    // accepted it): its cause is unknown. A session that ended `superseded` decided it: reported as
    // ignored, forgotten.
    carrySupersedeDoubt: enqueueActions(({ context, enqueue }) => {
      // Every end of a session records its reason first.
      if (context.lastReason!.kind === 'superseded') {
        dismissDoubt(context, 'the session ended first (superseded)', enqueue)
        return
      }
      deferHeld(context, enqueue)
    }),
    // Entering `reconnecting` with a supersede still held: the upgrade it waited on ended with no
    // answer (a drop, the connect timeout, a gateway's 5xx, an I/O fault), so the server may have
    // accepted it: its cause is unknown, and the next attempts probe.
    deferHeldSupersede: enqueueActions(({ context, enqueue }) => deferHeld(context, enqueue)),
    // Named on a supersede whose cause is unknown (`isAmbiguousSupersede`): the next attempts probe.
    recordAmbiguousSupersede: enqueueActions(({ context, event, enqueue }) =>
      noteCauseUnknown(context, (event as Extract<ConnectionEvent, { type: 'control.supersede' }>).reason, enqueue),
    ),
    // Named on a conflict probe refused past the window (`isProbeConflict`): the supersede was another instance's; it is the session's reason.
    recordProbedSupersede: assign({ lastReason: ({ context }) => context.ambiguousSupersede!.reason, ambiguousSupersede: null }),
    // Named on the events that carry a reason (losses, refusals, supersedes).
    recordLoss: assign({ lastReason: ({ event }) => (event as unknown as { reason: ReasonLike }).reason }),
    recordConnectTimeout: assign({
      lastReason: ({ context }) => timedOutReason('connect', context.generation, context.config.env.now()),
    }),
    recordJoinTimeout: assign({
      lastReason: ({ context }) => timedOutReason('join', context.generation, context.config.env.now()),
    }),
    recordActorFailure: assign({
      lastReason: ({ context, event }) => ({
        kind: 'other',
        detail: `the adapter failed inside phoenix-link: ${thrownText((event as { error?: unknown }).error)}`,
        retryable: true,
        generation: context.generation,
        at: context.config.env.now(),
      }),
    }),
    recordGraceful: assign({ lastReason: ({ context }) => gracefulReason(context.generation, context.config.env.now()) }),
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
    countControlCrash: assign({ controlCrashes: ({ context }) => context.controlCrashes + 1, controlJoinedAt: null }),
    markControlJoined: assign({ controlJoinedAt: ({ context }) => context.config.env.monotonic() }),
    // Named on a close before the control channel joined or just after, or a reset (`isLostUnseen`):
    // a supersede may have come unseen, so its cause is unknown and the next attempts probe. (None is being
    // probed then: the server accepted this socket, which dismissed any.)
    recordUnseenSupersede: assign({
      ambiguousSupersede: ({ context }) => ({
        reason: unseenSupersedeReason(context.lastReason!, context.generation, context.config.env.now()),
        since: context.config.env.monotonic(),
      }),
    }),
    // Named on a close while stopping (`isStopClosedUnseen`): as `recordUnseenSupersede`, from the
    // close's own reason (the session's is `graceful`); the next session's attempts probe.
    recordUnseenSupersedeOnStop: enqueueActions(({ context, event, enqueue }) =>
      noteCauseUnknown(context, unseenSupersedeReason((event as unknown as { reason: ReasonLike }).reason, context.generation, context.config.env.now()), enqueue),
    ),
    clearControlCrashes: assign({ controlCrashes: 0 }),
    rejoinControlChannel: enqueueActions(({ context, enqueue }) => enqueue({ type: 'rejoinControl', params: originOf(context) })),
    clearRetry: assign({ retry: null }),
    countConnect: assign({ connects: ({ context }) => context.connects + 1 }),
    markAcceptedLost: assign({ acceptedLostAt: ({ context }) => context.config.env.monotonic() }),
    // Named on socket.upgradeSent of the current transport.
    noteUpgradeLeft: assign({ upgradeLeft: true }),
    // The exit of `online.connecting` (a transport that did not open, or opened: then `attached`
    // takes over, markAcceptedLost): an upgrade that left and had no answer (a drop, the connect
    // timeout, an I/O fault, the host's disconnect(), a gateway's 500/502/504) may have been
    // accepted, its 101 lost, so the platform may hold that socket as it holds one it accepted and
    // we lost (a 409 within conflictRetryWindowMs of it may be ours). A refusal instead of
    // accepting (a 4xx, a 503) is not, nor an end by another instance's supersede.
    markUnansweredLost: assign(({ context, event }) => {
      // Opened: `attached` takes over. A supersede that ends the session (under onConflict
      // 'reject' the key holder stays the socket before while an upgrade is out) says another
      // instance holds the key, so the server refused or superseded that upgrade.
      if (event.type === 'socket.open' || event.type === 'control.supersede') return {}
      const reason = (event as { reason?: ReasonLike }).reason
      // An HTTP answer says the upgrade left, whatever the adapter reported before it.
      const left = context.upgradeLeft || event.type === 'socket.upgradeRejected'
      // Only a refusal's reason can say the server holds no socket for it (its phase is the upgrade).
      if (!left || (reason !== undefined && isRefusedUnaccepted(reason))) return {}
      return { acceptedLostAt: context.config.env.monotonic() }
    }),
    /** The conflict is retried: the reason says so (`retryable: true`) in the disconnected event and lastDisconnectReason. */
    retryOwnConflict: assign({ lastReason: ({ context }) => ({ ...context.lastReason!, retryable: true }) }),
    tellReconnectOpened: enqueueActions(({ enqueue }) => enqueue({ type: 'tellReconnect', params: { type: 'reconnect.opened' } })),
    /** Asks the reconnect chart to end its wait now; it answers `reconnect.due`. */
    retryNow: enqueueActions(({ enqueue }) => enqueue({ type: 'tellReconnect', params: { type: 'reconnect.retryNow' } })),
    tellReconnectLost: enqueueActions(({ context, enqueue }) =>
      enqueue({ type: 'tellReconnect', params: { type: 'reconnect.lost', reason: context.lastReason! } }),
    ),
    leaveControlChannel: enqueueActions(({ context, enqueue }) => enqueue({ type: 'leaveControl', params: originOf(context) })),
    flushControl: enqueueActions(({ enqueue }) => enqueue({ type: 'tellControl', params: { type: 'control.flush' } })),
    resetControl: enqueueActions(({ enqueue }) => enqueue({ type: 'tellControl', params: { type: 'control.reset' } })),
    // Named on control.signal.
    enqueueControlSignal: enqueueActions(({ context, event: anyEvent, enqueue }) => {
      const event = anyEvent as Extract<ConnectionEvent, { type: 'control.signal' }>
      const sequence = context.signalSeq + 1
      enqueue.assign({ signalSeq: sequence })
      enqueue({ type: 'tellControl', params: { type: 'control.enqueue', signal: event.signal, sequence, epoch: event.epoch, bytes: event.bytes ?? 0 } })
    }),
    // Runs only when the isNewChannel guard passed: the event is a host.channel of a new topic.
    spawnChannel: enqueueActions(({ context, event, enqueue }) => {
      const { topic } = event as Extract<ConnectionEvent, { type: 'host.channel' }>
      // concat allocates the list at its size; a spread leaves room for 16 more (about 130 bytes per link).
      enqueue.assign({ channels: context.channels.concat(topic) })
      enqueue({ type: 'startChannel', params: { topic } })
    }),
    // After spawnChannel, on the same host.channel, while connected.
    attachNewChannel: enqueueActions(({ context, event, enqueue }) => {
      const { topic } = event as Extract<ConnectionEvent, { type: 'host.channel' }>
      enqueue({ type: 'tellChannel', params: { topic, event: { type: 'transport.up', generation: context.generation } } })
    }),
    attachChannels: enqueueActions(({ context, enqueue }) => {
      for (const topic of context.channels) {
        enqueue({ type: 'tellChannel', params: { topic, event: { type: 'transport.up', generation: context.generation } } })
      }
    }),
    detachChannels: enqueueActions(({ context, enqueue }) => {
      for (const topic of context.channels) enqueue({ type: 'tellChannel', params: { topic, event: { type: 'transport.down' } } })
    }),
    // Runs only when the hasChannel guard passed: the event names the topic of a channel chart.
    forwardToChannel: enqueueActions(({ event, enqueue }) => {
      const e = event as Extract<ConnectionEvent, { topic: string }>
      enqueue({ type: 'tellChannel', params: { topic: e.topic, event: e.type === 'host.leaveChannel' ? { type: 'host.leave' } : (e as ChannelEvent) } })
    }),
    // Named on channel.failed: the channel chart of a topic stopped with an error (a phoenix-link bug).
    dropFailedChannel: enqueueActions(({ context, event, enqueue }) => {
      const { topic, error } = event as Extract<ConnectionEvent, { type: 'channel.failed' }>
      const detail = thrownText(error)
      if (!context.channels.includes(topic)) {
        enqueue.emit({ type: 'link.ignored', event: event.type, detail: `a chart of the link failed: ${detail}` })
        return
      }
      enqueue.assign({ channels: context.channels.filter((t) => t !== topic) })
      enqueue({ type: 'stopChannel', params: { topic } })
      enqueue.emit({
        type: 'link.channel',
        topic,
        status: 'dropped',
        reason: { kind: 'other', detail: `the channel failed inside phoenix-link: ${detail}`, retryable: true, generation: context.generation, at: context.config.env.now() } as ReasonLike,
      })
    }),
    // In reconnecting.deciding: a channel report waits for the reconnect chart's answer.
    holdChannelReport: assign({
      heldChannelReports: ({ context, event }) => (context.heldChannelReports ?? []).concat(event as ChannelStatusReport),
    }),
    // The reconnect chart answered with a delay or a slow-down: the held reports are announced now,
    // before the link's disconnected (announceRetry), as on a loss with no decision pending.
    releaseChannelReports: enqueueActions(({ context, enqueue }) => {
      const held = context.heldChannelReports
      if (held === null) return
      let channels = context.channels
      for (const e of held) {
        enqueue.emit({ type: 'link.channel', topic: e.topic, status: e.status, reason: e.reason })
        if (e.status !== 'dropped' && e.status !== 'left') continue
        channels = channels.filter((t) => t !== e.topic)
        enqueue({ type: 'stopChannel', params: { topic: e.topic } })
      }
      enqueue.assign({ heldChannelReports: null, channels })
    }),
    // The session ends while reports are held (a give-up, a supersede, a stop): each is queued again
    // behind this event, so it is announced after the session's end, as every channel report of a
    // loss that ends the session is.
    redeliverChannelReports: enqueueActions(({ context, enqueue }) => {
      const held = context.heldChannelReports
      if (held === null) return
      enqueue.assign({ heldChannelReports: null })
      for (const e of held) enqueue({ type: 'redeliver', params: e })
    }),
    forgetFinishedChannel: enqueueActions(({ context, event, enqueue }) => {
      const e = event as ChannelStatusReport // runs on channel.status only
      if (e.status !== 'dropped' && e.status !== 'left') return
      // A channel reports dropped or left once, as its last act: its chart stops.
      enqueue.assign({ channels: context.channels.filter((t) => t !== e.topic) })
      enqueue({ type: 'stopChannel', params: { topic: e.topic } })
    }),
    /** Opens this session's next transport (entry of `online`, after nextGeneration). */
    // A conflict probe (`conflictProbe`) while a supersede's cause is unknown: the upgrade asks `on_conflict=reject`.
    openCurrentTransport: enqueueActions(({ context, enqueue }) => {
      const conflictProbe = context.ambiguousSupersede !== null
      enqueue.assign({ probing: conflictProbe, upgradeLeft: false })
      enqueue({ type: 'openTransport', params: { ...originOf(context), conflictProbe } })
    }),
    /** Ends the transport of this generation (exit of `online`): its socket is closed, whatever comes after. */
    endCurrentTransport: enqueueActions(({ context, enqueue }) => enqueue({ type: 'endTransport', params: originOf(context) })),
    /** Joins the control channel on the open transport (entry of `attached`). */
    joinCurrentControl: enqueueActions(({ context, enqueue }) => enqueue({ type: 'joinControl', params: originOf(context) })),
    /** A session starts: a fresh reconnect chart, so every session starts from the first delay with no rapid streak. */
    startSessionReconnect: enqueueActions(({ context, enqueue }) =>
      enqueue({ type: 'startReconnect', params: { policy: context.config.reconnectPolicy, env: context.config.env } }),
    ),
    endSessionReconnect: enqueueActions(({ enqueue }) => enqueue({ type: 'stopReconnect', params: {} })),

    // ---- I/O: carried out by the link's runtime after the transition; no-ops under a bare XState actor.
    /** Opens one phoenix Socket for `generation` (asks the credentials of this attempt first); a conflict probe's upgrade asks on_conflict=reject. */
    openTransport: (_: unknown, _open: TransportOpen) => {},
    /** Ends the socket of `generation` with close 1000 and releases its channels. */
    endTransport: (_: unknown, _origin: Origin) => {},
    /** Joins the control channel on the transport of `generation`. */
    joinControl: (_: unknown, _origin: Origin) => {},
    /** Joins the control channel again on the transport of `generation`, with a fresh join_ref, after a crash. */
    rejoinControl: (_: unknown, _origin: Origin) => {},
    /** Pushes phx_leave on the control channel of `generation`; the adapter answers `control.left`. */
    leaveControl: (_: unknown, _origin: Origin) => {},
    /** Starts the session's reconnect chart (machines/reconnect.ts). */
    startReconnect: (_: unknown, _input: { policy: ReconnectPolicy; env: Env }) => {},
    /** Stops the session's reconnect chart; its delays are cancelled. */
    stopReconnect: (_: unknown, _none: Record<string, never>) => {},
    /** Sends an event to the session's reconnect chart. */
    tellReconnect: (_: unknown, _event: ReconnectEvent) => {},
    /** Sends an event to the link's control delivery chart (machines/control.ts). */
    tellControl: (_: unknown, _event: ControlEvent) => {},
    /** Starts the channel chart of an app channel topic (machines/channel.ts). */
    startChannel: (_: unknown, _channel: { topic: string }) => {},
    /** Sends an event to the channel chart of `topic`. */
    tellChannel: (_: unknown, _message: { topic: string; event: ChannelEvent }) => {},
    /** Stops the channel chart of `topic` (it reported `left` or `dropped`, or failed). */
    stopChannel: (_: unknown, _channel: { topic: string }) => {},
    /** Sends a channel report back to this chart, behind every event already queued (redeliverChannelReports). */
    redeliver: (_: unknown, _report: ChannelStatusReport) => {},
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
      // After recordUnseenSupersede and the supersede handlers, on the loss: the next upgrade is a conflict probe.
      conflictProbe: context.ambiguousSupersede !== null,
    })),
    announceEnded: emit(({ context }) => ({
      type: 'link.disconnected' as const,
      reason: context.lastReason!,
      nextDelayMs: null,
      attempt: null,
      // After carrySupersedeDoubt: the next connect()'s upgrades are conflict probes.
      conflictProbe: context.ambiguousSupersede !== null,
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
        event.type === 'io.failed'
          ? `the ${event.action} action failed inside phoenix-link: ${thrownText(event.error)}`
          :
        'epoch' in event && event.epoch !== context.epoch
          ? `from an earlier session (epoch ${event.epoch}, current ${context.epoch})`
          : 'generation' in event && event.generation !== context.generation
            ? `from a stale transport (generation ${event.generation}, current ${context.generation})`
            : event.type === 'socket.malformed'
              ? event.detail
              : event.type === 'control.signal'
                ? `an agent.control signal (correlation_id ${JSON.stringify(event.signal.correlationId ?? null)}) read while the session stops or after it ended: not delivered`
                : 'not handled in this state'
      enqueue.emit({ type: 'link.ignored', event: event.type, detail })
    }),
  },
  delays: {
    controlRejoinDelay: ({ context }) => rejoinDelayMs(context.config.channelPolicy, context.controlCrashes, context.config.env.random()),
    controlStableAfter: ({ context }) => context.config.channelPolicy.rejoinStableAfterMs,
    connectTimeout: ({ context }) => context.config.policy.connectTimeoutMs,
    joinTimeout: ({ context }) => context.config.policy.joinTimeoutMs,
    leaveTimeout: ({ context }) => context.config.policy.leaveTimeoutMs,
  },
}).createMachine({
  id: 'connection',
  context: ({ input }) => ({
    config: {
      upgradesSupersede: input.onConflict !== 'reject',
      policy: input.policy ?? DEFAULT_CONNECTION_POLICY,
      reconnectPolicy: input.reconnectPolicy ?? DEFAULT_RECONNECT_POLICY,
      channelPolicy: input.channelPolicy ?? DEFAULT_CHANNEL_POLICY,
      controlPolicy: input.controlPolicy ?? DEFAULT_CONTROL_POLICY,
      env: input.env,
    },
    epoch: 0,
    generation: 0,
    lastReason: null,
    retry: null,
    connects: 0,
    // The link this one replaces may have left a socket the platform still holds (LinkOptions.supersedeDoubt).
    acceptedLostAt: input.supersedeDoubt?.socketLostAt ?? null,
    keyHolder: 0,
    priorKeyHolder: 0,
    lastAccepted: 0,
    channels: [],
    signalSeq: 0,
    controlCrashes: 0,
    heldChannelReports: null,
    heldSupersede: null,
    ambiguousSupersede: input.supersedeDoubt ? { reason: input.supersedeDoubt.reason, since: input.supersedeDoubt.since } : null,
    probing: false,
    upgradeLeft: false,
    controlJoinedAt: null,
  }),
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
    // An app channel chart stopped with an error (a phoenix-link bug): report it as dropped and forget it.
    'channel.failed': { actions: 'dropFailedChannel' },
    'socket.malformed': { actions: 'reportIgnored' },
    // The upgrade of a transport the chart has already ended: nothing to claim, nothing to report.
    'socket.upgradeSent': {},
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
      entry: 'startSessionReconnect',
      exit: 'endSessionReconnect',
      initial: 'online',
      on: {
        'host.connect': {},
        'host.disconnect': {
          target: 'stopped',
          actions: ['recordGraceful', 'redeliverChannelReports'],
          meta: { rule: 'disconnect-always-succeeds' },
        },
        // Terminal in every session state, the backoff included: read on the key holder (during
        // the backoff, the socket just lost, which the adapter still reads until it has closed),
        // it means another instance of this agent holds the key, and reconnecting would evict it.
        // Read on an older transport once the next one's upgrade was sent, it may be the platform
        // superseding that socket because our next one connected: held while that upgrade is out
        // (`online.connecting`), stale once the server accepted it.
        'control.supersede': [
          {
            guard: 'isKeyHolder',
            target: 'terminated',
            actions: ['recordLoss', 'redeliverChannelReports'],
            meta: { rule: 'supersede-is-terminal' },
          },
          // Its cause is unknown (our unanswered upgrade, or another instance): the next attempts
          // probe with on_conflict=reject, so no other instance is evicted to find out.
          { guard: 'isAmbiguousSupersede', actions: 'recordAmbiguousSupersede', meta: { rule: 'supersede-is-terminal' } },
        ],
        // A signal read on the key holder or on the newest socket the server accepted is
        // delivered, during the backoff after its loss too (read before its close completed), and
        // while the next upgrade is out or after it went unanswered: the platform sent it to this
        // agent, and nothing newer can have been read (`isSignalSource`).
        'control.signal': { guard: 'isSignalSource', actions: 'enqueueControlSignal', meta: { rule: 'control-in-order' } },
      },
      states: {
        /** A transport of this session exists (opening, open, or closing on our side). */
        online: {
          description: 'A transport of this session exists: opening, open, or closing on our side. Leaving it ends the socket.',
          entry: ['nextGeneration', 'openCurrentTransport'],
          exit: 'endCurrentTransport',
          initial: 'connecting',
          on: {
            // An I/O action of this transport threw (a phoenix-link bug): a loss like any other, retried.
            'io.failed': { target: 'lost', actions: 'recordActorFailure' },
            'socket.close': { guard: 'isCurrentTransport', target: 'lost', actions: 'recordLoss', meta: { rule: 'normal-close-reconnects' } },
            'socket.upgradeRejected': {
              guard: 'isCurrentTransport',
              target: 'lost',
              actions: ['recordLoss', 'releaseKeyClaim'],
              meta: { rule: 'upgrade-rejection-is-terminal' },
            },
            'socket.heartbeatTimeout': { guard: 'isCurrentTransport', target: 'lost', actions: 'recordLoss' },
            // The upgrade left: from now on it may have superseded the socket lost before.
            'socket.upgradeSent': [
              { guard: 'isCurrentSupersedingUpgrade', actions: ['noteUpgradeLeft', 'claimKey'] },
              // onConflict 'reject': it supersedes nothing, so it claims nothing; the platform may still hold it if it is lost unanswered.
              { guard: 'isCurrentTransport', actions: 'noteUpgradeLeft' },
            ],
          },
          states: {
            /** Transport `generation` is opening. */
            connecting: {
              description: 'The WebSocket of this generation is opening (TCP, TLS, HTTP upgrade).',
              // An upgrade that left and ends here with no answer may be a socket the server holds.
              exit: 'markUnansweredLost',
              on: {
                'socket.open': {
                  guard: 'isCurrentTransport',
                  target: 'attached',
                  actions: ['claimKey', 'markAccepted', 'tellReconnectOpened', 'dismissHeldSupersede'],
                },
                // Read on the socket lost before while this one's upgrade is out: ours or another
                // instance's; this upgrade's answer decides.
                'control.supersede': [
                  { guard: 'awaitsUpgradeOutcome', actions: 'holdSupersede', meta: { rule: 'supersede-is-terminal' } },
                  // Its cause unknown before this upgrade left: the attempt starts again, as a conflict probe.
                  { guard: 'isAmbiguousBeforeUpgrade', target: '#connection.session.online', reenter: true, actions: 'recordAmbiguousSupersede', meta: { rule: 'supersede-is-terminal' } },
                ],
                // Refused: it caused nothing, so the held supersede was another instance's. (Any
                // other refusal is the `online` transition's: a loss.)
                'socket.upgradeRejected': { guard: 'isRefusalOfHeldUpgrade', target: '#connection.terminated', actions: 'recordHeldSupersede', meta: { rule: 'supersede-is-terminal' } },
                // Lost before it opened. Refused at TCP (no upgrade left), it claimed nothing. Dropped
                // or never answered after its upgrade left, it keeps the claim: the server may have
                // accepted it, its 101 lost; a supersede read later on the socket before is ambiguous.
                'socket.close': { guard: 'isCurrentTransport', target: '#connection.session.lost', actions: 'recordLoss', meta: { rule: 'normal-close-reconnects' } },
              },
              after: { connectTimeout: { target: '#connection.session.lost', actions: 'recordConnectTimeout' } },
            },
            /** The transport is open; the control channel lives on it. */
            attached: {
              description: 'The transport is open; the control channel lives on it.',
              entry: 'joinCurrentControl',
              // The platform may hold this socket for up to a minute after it ends: a 409 meanwhile may be ours.
              exit: 'markAcceptedLost',
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
                  exit: 'detachChannels',
                  on: {
                    'host.channel': { guard: 'isNewChannel', actions: ['spawnChannel', 'attachNewChannel'] },
                  },
                  initial: 'connected',
                  states: {
                    /** Control channel joined; app channels joined or rejoining. */
                    connected: {
                      description: 'Control channel joined; app channels joined or rejoining.',
                      entry: 'markControlJoined',
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
                    'socket.close': [
                      // A "disconnect" close just after the control join may be a supersede no push could carry: the next session probes.
                      { guard: 'isStopClosedUnseen', target: '#connection.stopped', actions: ['recordGraceful', 'recordUnseenSupersedeOnStop'], meta: { rule: 'supersede-is-terminal' } },
                      { guard: 'isCurrentTransport', target: '#connection.stopped', actions: 'recordGraceful' },
                    ],
                    'socket.heartbeatTimeout': {
                      guard: 'isCurrentTransport',
                      target: '#connection.stopped',
                      actions: 'recordGraceful',
                    },
                    // The host asked to stop: a signal read now is not delivered, and says so.
                    'control.signal': { actions: 'reportIgnored' },
                    // The host asked to stop: an I/O fault on the way (a phoenix-link bug) still stops it.
                    'io.failed': { target: '#connection.stopped', actions: 'recordGraceful' },
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
            // A conflict probe refused 409: past the window another instance holds the key; within it, maybe our own socket.
            { guard: 'isProbeConflictInWindow', target: 'reconnecting', actions: 'retryOwnConflict', meta: { rule: 'supersede-is-terminal' } },
            { guard: 'isProbeConflict', target: '#connection.terminated', actions: 'recordProbedSupersede', meta: { rule: 'supersede-is-terminal' } },
            { guard: 'isOwnConflict', target: 'reconnecting', actions: 'retryOwnConflict', meta: { rule: 'own-conflict-retries' } },
            { guard: 'isTerminalLoss', target: '#connection.terminated', meta: { rule: 'upgrade-rejection-is-terminal' } },
            // Accepted, closed before its control channel joined or just after (a supersede there may not be pushed), or reset while sending (one pushed may be lost): the next attempts probe.
            { guard: 'isLostUnseen', target: 'reconnecting', actions: 'recordUnseenSupersede', meta: { rule: 'supersede-is-terminal' } },
            { target: 'reconnecting', meta: { rule: 'normal-close-reconnects' } },
          ],
        },
        /** No transport; the reconnect chart decides the wait. */
        reconnecting: {
          description: 'No transport; the reconnect chart chooses the wait or gives up.',
          // A supersede still held here waited on an upgrade that ended with no answer (a drop, the
          // connect timeout, a gateway's 5xx, an I/O fault): the server may have accepted it, so its cause is unknown.
          entry: ['tellReconnectLost', 'deferHeldSupersede'],
          initial: 'deciding',
          states: {
            deciding: {
              description: "Waiting for the reconnect chart's answer: a delay, a slow-down, or (by policy) give up.",
              on: {
                // The lost socket's channel reports wait for the answer: told before disconnected
                // if the link reconnects, after the session's end if it gives up.
                'channel.status': { actions: 'holdChannelReport' },
                'reconnect.scheduled': { target: 'waiting', actions: ['recordRetry', 'releaseChannelReports', 'announceRetry'] },
                'reconnect.suspended': {
                  target: 'suspended',
                  actions: ['recordSuspension', 'recordRetry', 'releaseChannelReports', 'announceRetry'],
                  meta: { rule: 'suspend-not-give-up' },
                },
                'reconnect.gaveUp': { target: '#connection.terminated', actions: ['recordGiveUp', 'redeliverChannelReports'] },
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
      entry: ['carrySupersedeDoubt', 'announceEnded', 'flushControl'],
      on: {
        'host.connect': { target: 'session', actions: ['startSession', 'resetControl'] },
        'host.disconnect': { meta: { rule: 'disconnect-always-succeeds' } },
        // Read on a socket still closing: its cause is unknown, so the next session's attempts probe.
        'control.supersede': { guard: 'isSupersedeAfterEnd', actions: 'recordAmbiguousSupersede', meta: { rule: 'supersede-is-terminal' } },
      },
    },
    /** A terminal reason ended the session; no transport, no timer. */
    terminated: {
      description: 'A terminal reason ended the session; no transport, no timer. disconnect() sends nothing.',
      entry: ['carrySupersedeDoubt', 'announceEnded'],
      on: {
        'host.connect': { target: 'session', actions: ['startSession', 'resetControl'] },
        // Read on a socket still closing, unless the session ended superseded: its cause is unknown, so the next session's attempts probe.
        'control.supersede': { guard: 'isSupersedeAfterEnd', actions: 'recordAmbiguousSupersede', meta: { rule: 'supersede-is-terminal' } },
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
