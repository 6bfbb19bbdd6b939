/**
 * The thin adapter over the official `phoenix` client: one phoenix Socket per transport
 * generation, with phoenix's own reconnect and rejoin switched off, every lifecycle callback
 * turned into a chart event tagged with its generation and session epoch. It decides nothing:
 * it classifies what the socket saw (src/reasons.ts) and reports it; the charts decide.
 *
 * App channel data messages bypass the charts (they are not lifecycle) and go straight to the
 * link's handlers; phoenix.js drops those with an outdated join_ref (channel.js isMember), and
 * the socket-level listener here reports them.
 */
import { Channel, Serializer, Socket, type Push, type SocketOptions } from 'phoenix'
import type { AttachOrigin, ChannelEvent } from '../../machines/channel.js'
import type { ConnectionEvent } from '../../machines/connection.js'
import { thrownText, type Origin, type TransportOpen } from '../../machines/types.js'
import {
  AGENT_ID_PARAM,
  ON_CONFLICT_PARAM,
  linkParamIn,
  API_KEY_HEADER,
  API_KEY_PARAM,
  CHANNEL_EVENTS,
  CONTROL_EVENT,
  controlTopic,
  decodeBinaryFromServer,
  decodeTextFrame,
  HEARTBEAT_EVENT,
  HEARTBEAT_TOPIC,
  hasLoneSurrogate,
  isWellFormedText,
  LONE_SURROGATE_CANNOT_GO_IN,
  LONE_SURROGATE_MESSAGE,
  isReservedEvent,
  notJsonMap,
  notPlainObject,
  parseControlSignal,
  SUPERSEDE_EVENT,
  utf8Length,
  type Frame,
  type Payload,
} from '../protocol.js'
import {
  classifyChannelClose,
  classifyClose,
  classifyControlChannelLoss,
  classifyJoinError,
  classifySupersede,
  classifyUpgrade,
  clipText,
  heartbeatTimeout,
  RESET_ERROR_CODES,
  type DisconnectReason,
} from '../reasons.js'
import { isHeaderValue, transportClass, SUPPORTS_UPGRADE_HEADERS, type RefusedUpgrade, type TransportHooks } from './ws-transport.js'
import type WebSocket from 'isomorphic-ws'
import type { TransportPolicy } from './transport-policy.js'
import type { Credentials, PushFailure } from './types.js'
import { onAbort } from '../abort.js'

export { DEFAULT_TRANSPORT_POLICY, validateTransportPolicy, type TransportPolicy } from './transport-policy.js'
export type { Credentials, PushFailure } from './types.js'

/** phoenix.js's reconnectAfterMs/rejoinAfterMs when the charts own retries: never (2^31-1, not Infinity, which Node clamps to 1 ms). */
const NEVER = 2 ** 31 - 1
/** {@link NEVER} as phoenix.js's backoff function: one for every socket. */
const never = (): number => NEVER

/**
 * phoenix.js's `sessionStorage` option: one store for every socket, keeping nothing. Without the
 * option the Socket constructor reads the global `sessionStorage` (1.8.16 socket.js), and that
 * read throws a SecurityError where storage is denied (a sandboxed iframe without
 * allow-same-origin, checked in Chromium 156): no socket could be made, every attempt would
 * fail. phoenix.js stores only what its LongPoll fallback remembers (getSession/storeSession in
 * connectWithFallback), which the link never uses.
 */
const NO_SESSION_STORE = Object.freeze({ getItem: (): null => null, setItem: (): void => {}, removeItem: (): void => {} })

/**
 * How long before the chart's connect timeout a refused upgrade's body stops being read: the
 * refusal must reach the chart first, or a terminal 403 would end as a retryable timeout.
 */
const REFUSAL_MARGIN_MS = 50

/** Characters of a malformed frame quoted in its `ignored` detail. */
const FRAME_EXCERPT = 80

/**
 * Server text (an event name, a topic, a ref or join_ref) as an `ignored` detail quotes it:
 * JSON-quoted, so a line break in it cannot forge a log line, and cut to 80 characters between
 * tokens (reasons.ts clipText), its length said when cut, so a 5 MB event name makes no 5 MB log
 * line. `null` (no ref) reads `null`.
 */
export function quoteServerText(text: string | null): string {
  if (text === null) return 'null'
  const clipped = clipText(text, FRAME_EXCERPT)
  return clipped.length === text.length ? JSON.stringify(text) : `${JSON.stringify(clipped)}... (${text.length} characters)`
}

function isThenable<T>(value: T | Promise<T>): value is Promise<T> {
  return value !== null && typeof value === 'object' && typeof (value as { then?: unknown }).then === 'function'
}

/** Extra time phoenix.js waits for a join or leave reply past the chart's own timeout, so the chart always decides first. */
const JOIN_TIMEOUT_SLACK_MS = 1000

/** decodeFrame()'s dispatch for a transport the chart ended: nothing reaches phoenix.js (readLate() routes every frame). */
const IGNORE_DECODED = (_decoded: unknown): void => {}

/** What the adapter needs: settings, and the link's callbacks (methods, so one object serves a link). */
export interface AdapterConfig {
  /** Socket endpoint without `/websocket`, e.g. `wss://platform.example/socket`. */
  url: string
  agentId: string
  /**
   * The API key and extra socket params (`on_conflict`, ...) of one connection attempt, asked
   * just before it opens; sync, or async within `policy.credentialsTimeoutMs` (`signal` aborts
   * when the attempt is given up). A throw, a rejection, a timeout or a bad value fails the
   * attempt with a retryable `other` reason.
   */
  credentials(attempt: { generation: number; signal: AbortSignal }): Credentials | Promise<Credentials>
  /** Send the API key as the `x-api-key` upgrade header (Node) or as the `api_key` param. */
  apiKeyIn: 'header' | 'param'
  policy: TransportPolicy
  /** The connection chart's connect timeout: a refused upgrade's body is read only until shortly before it. */
  connectTimeoutMs: number
  /** The connection chart's control channel join timeout; phoenix.js gets this plus a slack. */
  controlJoinTimeoutMs: number
  /** The connection chart's control channel leave timeout (stopping). */
  controlLeaveTimeoutMs: number
  /** The channel chart's app channel join timeout; phoenix.js gets this plus a slack. */
  channelJoinTimeoutMs: number
  /** The channel chart's app channel leave timeout. */
  channelLeaveTimeoutMs: number
  /** Wall clock for reason timestamps. */
  now(): number
  /** Monotonic clock, for waits the adapter bounds itself. */
  monotonic(): number
  /** Where lifecycle events go: the connection chart. */
  sink(event: ConnectionEvent): void
  /** A server push or broadcast on an app channel's current join: to the link's channel handle. */
  message(topic: string, event: string, payload: Payload | ArrayBuffer, meta: { generation: number }): void
  /** Join params of an app channel, asked at each join attempt; sync or async, bounded like `credentials`. */
  channelParams(topic: string, attempt: { generation: number; signal: AbortSignal }): object | Promise<object>
}

interface Attachment {
  readonly topic: string
  readonly channel: AttachedChannel
  readonly origin: AttachOrigin | Origin
  leaving: boolean
  joined: boolean
  /** The `response` of this join's `ok` reply (phoenix.js `join().receive('ok', response)`); undefined until then. */
  joinResponse: unknown
  /** Pushes awaiting a reply, with the function that rejects their promise; null while none was made. */
  pushes: Map<Push, (failure: PushFailure) => void> | null
  leavePush: Push | null
}

/** A host's check of one open socket (Link.ping()): the heartbeat it sent, and its bound. */
interface Ping {
  /** The ref of the heartbeat it sent (its own: a reply to an earlier heartbeat proves nothing of the socket now). */
  readonly ref: string
  /** When it was made (adapter monotonic, ms). */
  readonly startedAt: number
  /** Its bound: ends the socket as an unanswered heartbeat does. */
  readonly timer: ReturnType<typeof setTimeout>
  /** Called with the time from the ping to the heartbeat's reply (ms). */
  readonly answered: (rttMs: number) => void
}

/**
 * One transport generation: its phoenix Socket and WebSocket, what the socket reported, its
 * attachments, and when it is closed. It is also the transport's hooks ({@link TransportHooks}):
 * the WebSocket reports to it directly, with no closures per generation (but the two listeners
 * on an accepted socket's TCP connection, its errors and its end of stream: ws-transport.ts).
 */
class TransportHandle implements TransportHooks {
  socket: LinkSocket | null = null
  /** The credentials of this attempt: `abort()` gives them up (the signal the host's function was given, when it read it). */
  credentials: AttemptSignal | null = null
  ws: WebSocket | null = null
  refusal: RefusedUpgrade | null = null
  lastError: string | null = null
  /** The code of the last socket error: ws's (e.g. WS_ERR_UNSUPPORTED_MESSAGE_LENGTH), or Node's for the TCP connection of an accepted socket (ECONNRESET, EPIPE). */
  lastErrorCode: string | null = null
  /** Set by the encode hook when a push could not be encoded. */
  encodeError: unknown = null
  /** When (adapter monotonic) the link last sent a frame other than a heartbeat on this socket (the encode hook); null before the first. */
  lastSentAt: number | null = null
  /** When (adapter monotonic) this accepted socket's TCP connection was found reset (onSocketError); null while it was not. */
  resetAt: number | null = null
  heartbeatTimedOut = false
  /** Host pings waiting for their heartbeat's reply (Link.ping()); null while none. */
  pings: Ping[] | null = null
  /**
   * The first loss the adapter reported on this transport (its close, a heartbeat timeout, a
   * supersede read on it, the control channel's phx_close or refused join); null while none. A
   * push still waiting for its reply when the transport is released fails `TRANSPORT_LOST` with
   * it, so the host reads why (a close 1009 from the server says a push was over its frame limit).
   */
  lost: DisconnectReason | null = null
  /** True while phoenix.js dispatches a frame the server sent (so a phx_error is the server's, whatever its payload). */
  dispatchingServerFrame = false
  ended = false
  /** The control channel's join_ref when end() released it (null: it had none): frames read after that are checked against it. */
  controlJoinRef: string | null = null
  wsClosed = false
  teardownDone = false
  /** phoenix.js teardowns of this socket still polling for its close (see connect()). */
  teardowns = 0
  readonly attachments = new Map<string, Attachment>()
  /**
   * Joins this link left on this transport, by {@link leftKey} (topic and join_ref: a topic left
   * and joined again has one entry per join left): how many tail frames (leave reply, phx_close,
   * a pending join's reply) may still come; null while none.
   */
  leftTopics: Map<string, LeftJoin> | null = null
  /**
   * Upgrade headers of this attempt (Node: the `x-api-key`), behind an accessor: `util.inspect`
   * of a link shows no field that holds the key.
   */
  #headers: Record<string, string> = {}
  get headers(): Record<string, string> {
    return this.#headers
  }
  set headers(headers: Record<string, string>) {
    this.#headers = headers
  }
  /** When (adapter monotonic) the attempt started, to bound a refused upgrade's body by the connect timeout. */
  readonly openedAt: number
  /** What each app message of this transport is delivered with: its generation. */
  readonly meta: { readonly generation: number }
  private isClosed = false
  /** Resolves the settled() calls waiting for this transport; null while none waits. */
  private closedWaiters: Array<() => void> | null = null

  constructor(
    readonly origin: Origin,
    /** @internal */ readonly adapter: PhoenixAdapter,
    /** A conflict probe: the upgrade asks on_conflict=reject, whatever the host's own setting. */
    readonly conflictProbe = false,
  ) {
    this.openedAt = adapter.config.monotonic()
    this.meta = { generation: origin.generation }
  }

  /** Resolves once the socket is closed and phoenix.js's teardown of it finished. */
  get closed(): Promise<void> {
    if (this.isClosed) return Promise.resolve()
    return new Promise((resolve) => (this.closedWaiters ??= []).push(resolve))
  }

  /** The ping whose heartbeat has ref `ref`, or undefined (a reply that answers no ping). */
  pingOf(ref: string): Ping | undefined {
    return this.pings?.find((ping) => ping.ref === ref)
  }

  /** The heartbeat of `ping` was answered: it is answered, with the time since it was sent. */
  pingAnswered(ping: Ping): void {
    this.forgetPing(ping)
    clearTimeout(ping.timer)
    ping.answered(Math.max(0, this.adapter.config.monotonic() - ping.startedAt))
  }

  /**
   * A ping's bound ran out on this live socket: it is ended as phoenix.js ends it when its own
   * heartbeat goes unanswered (socket.js heartbeatTimeout, run on the ping's heartbeat as the
   * pending one: close 1000 "heartbeat timeout", channels errored), which onClientClose reports to
   * the chart as `socket.heartbeatTimeout`.
   */
  pingExpired(ping: Ping): void {
    this.forgetPing(ping)
    if (this.ended || this.heartbeatTimedOut || this.socket === null) return
    this.socket.pendingHeartbeatRef = ping.ref
    this.socket.heartbeatTimeout()
  }

  private forgetPing(ping: Ping): void {
    const waiting = this.pings?.filter((other) => other !== ping) ?? []
    this.pings = waiting.length > 0 ? waiting : null
  }

  /** Drops the pings of a transport that ends: their timers are cleared; the link reports the loss to their hosts. */
  dropPings(): void {
    for (const ping of this.pings ?? []) clearTimeout(ping.timer)
    this.pings = null
  }

  checkClosed(): void {
    if (this.isClosed || !(this.teardownDone && this.teardowns === 0 && (this.wsClosed || this.ws === null))) return
    this.isClosed = true
    this.adapter.forget(this)
    const waiters = this.closedWaiters
    this.closedWaiters = null
    for (const resolve of waiters ?? []) resolve()
  }

  // ---- TransportHooks: what the WebSocket of this generation reports (src/adapter/ws-transport.ts)
  get maxPayload(): number {
    return this.adapter.config.policy.maxFrameBytes
  }
  get closeTimeout(): number {
    return this.adapter.config.policy.closeTimeoutMs
  }
  get bodyLimit(): number {
    return this.adapter.config.policy.refusalBodyLimitBytes
  }
  bodyWaitMs(): number {
    const { config } = this.adapter
    return Math.max(0, Math.min(config.policy.refusalBodyTimeoutMs, config.connectTimeoutMs - (config.monotonic() - this.openedAt) - REFUSAL_MARGIN_MS))
  }
  onCreate(ws: WebSocket): void {
    this.ws = ws
  }
  onClosed(): void {
    this.wsClosed = true
    this.checkClosed()
  }
  onRefused(refusal: RefusedUpgrade): void {
    this.refusal = refusal
  }
  onError(code: string | null): void {
    // A live socket's errors reach the adapter through phoenix.js (socketErrored); once the chart
    // ended it, phoenix.js no longer listens, and a frame over maxFrameBytes read meanwhile (ws
    // closed the socket with 1009) would vanish unreported.
    if (this.ended && code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') this.adapter.oversizeAfterEnd(this)
  }
  onSocketError(code: string | null, message: string, afterEnd: boolean): void {
    // Kept for the close that follows (ws destroys the socket and closes 1006): a reset soon after
    // the link sent makes the drop's reason say so (socketClosed). An error phoenix.js reported
    // first (socketErrored) is kept as it is. An EPIPE past the end of stream is a reset that
    // followed the server's FIN (a peer that ended, then closed while the link sent): everything
    // the server sent came before the FIN and was read, so it is no reset that overtook a push.
    if (this.ended) return
    if (code !== null && RESET_ERROR_CODES.includes(code) && !(afterEnd && code === 'EPIPE')) this.resetAt ??= this.adapter.config.monotonic()
    if (this.lastError !== null) return
    this.lastError = message
    this.lastErrorCode = code
  }
  onUpgradeSent(): void {
    // The upgrade request left: from now on the server may accept it, and may supersede an older
    // socket of this agent because of it (the platform does so in connect/3, before it answers
    // 101), so the chart's key holder moves on to this transport. Not after the chart ended it.
    if (this.ended) return
    const { generation, epoch } = this.origin
    this.adapter.emit({ type: 'socket.upgradeSent', generation, epoch })
  }
  onClientClose(_code: number | undefined, reason: string | undefined): void {
    // phoenix.js socket.js heartbeatTimeout(): connection.close(WS_CLOSE_NORMAL, "heartbeat timeout").
    // On the socket alone that close looks like a server's normal close (docs/field-notes.md), so it
    // is classified here, where the client's own close is visible. Reported after phoenix
    // finishes its own handling of the timeout.
    if (reason === 'heartbeat timeout' && !this.ended && !this.heartbeatTimedOut) {
      this.heartbeatTimedOut = true
      const { generation, epoch } = this.origin
      const reason = heartbeatTimeout(generation, this.adapter.config.now())
      this.lost ??= reason
      queueMicrotask(() => this.adapter.emit({ type: 'socket.heartbeatTimeout', reason, generation, epoch }))
    }
  }
}

/**
 * The phoenix.js Socket of one transport generation, reporting to its handle through phoenix's
 * own hooks (socket.js onConnOpen, onConnError, onConnClose, teardown) instead of registered
 * callbacks: one class for every socket, no closure per socket (bench/ idle memory). Each
 * override keeps where phoenix.js runs its callbacks (open and close after its own handling,
 * error before it errors the channels); phoenix 1.8.16 socket.js, pinned. The open is reported
 * after the channels' own open callbacks (a registered callback ran before them), which differs
 * only on a second open of one Socket; the link opens each Socket once.
 */
class LinkSocket extends Socket {
  constructor(
    endPoint: string,
    opts: SocketOptions,
    /** @internal */ readonly handle: TransportHandle,
  ) {
    super(endPoint, opts)
  }

  /**
   * A socket made without the page listeners phoenix.js's constructor adds (1.8.16 socket.js:
   * `pagehide`, `pageshow` and `visibilitychange` on `window`, `resume` on `document`, when a
   * `window` exists). They are never removed, so each would keep its Socket, and through it its
   * transport's handle, for the page's life: one more per generation of a link that reconnects
   * for days. And they decide outside the charts: `pagehide` closes the socket (the link then
   * reads a close it did not choose and reconnects), `pageshow` and `visibilitychange` reconnect
   * it. The page lifecycle is the host's to wire (README "Entries, browsers and CommonJS"). While the constructor
   * runs, `window.addEventListener` reads `undefined` (an own property over EventTarget's), so
   * phoenix.js's `if (phxWindow && phxWindow.addEventListener)` skips the four; the property is
   * restored before anything else can run. Where `window` is absent (Node, a Web Worker) or the
   * property cannot be shadowed, the socket is made as phoenix.js makes it.
   */
  static make(endPoint: string, opts: SocketOptions, handle: TransportHandle): LinkSocket {
    const page = (globalThis as { window?: object }).window
    if (typeof page !== 'object' || page === null) return new LinkSocket(endPoint, opts, handle)
    const own = Object.getOwnPropertyDescriptor(page, 'addEventListener')
    try {
      Object.defineProperty(page, 'addEventListener', { value: undefined, configurable: true, writable: true })
    } catch {
      return new LinkSocket(endPoint, opts, handle)
    }
    try {
      return new LinkSocket(endPoint, opts, handle)
    } finally {
      if (own) Object.defineProperty(page, 'addEventListener', own)
      else delete (page as { addEventListener?: unknown }).addEventListener
    }
  }

  /** The `encode` option: phoenix.js calls it as the socket's method (socket.js push). */
  static encodeFrame(this: LinkSocket, message: object, callback: (encoded: string | ArrayBuffer) => void): void {
    // phoenix.js encodes inside push(); a payload JSON cannot encode (a BigInt, a cycle) or a
    // binary field over 255 bytes would throw out of it with a push timer armed. Caught here
    // and turned into PUSH_INVALID by push().
    try {
      Serializer.encode(message, (encoded) => {
        // Half of a character (a lone surrogate): Phoenix's JSON decoder would refuse the frame by
        // closing the socket (1011), dropping every channel with it; it is not sent.
        if (typeof encoded === 'string' && hasLoneSurrogate(encoded)) {
          this.handle.encodeError = new Error(LONE_SURROGATE_MESSAGE)
          return
        }
        // Over the frame limit, which binds both ways: a server with that limit would close the
        // socket 1009 (message too big), every channel with it, and the join or push would be
        // sent again on the next socket, for ever. It is not sent.
        const limit = this.handle.adapter.config.policy.maxFrameBytes
        const size = typeof encoded === 'string' ? (encoded.length * 3 > limit ? utf8Length(encoded) : 0) : encoded.byteLength
        if (size > limit) {
          this.handle.encodeError = new Error(
            `the frame would be ${size} bytes, over transport.maxFrameBytes (${limit}): a server with that limit closes the socket with 1009 (message too big; raise the policy to the server's own limit if it allows more)`,
          )
          return
        }
        // phoenix.js encodes a frame as it sends it: the time of the last one that is not a heartbeat.
        if ((message as { topic?: unknown }).topic !== HEARTBEAT_TOPIC) this.handle.lastSentAt = this.handle.adapter.config.monotonic()
        callback(encoded)
      })
    } catch (error) {
      this.handle.encodeError = error
    }
  }

  /** The `decode` option: phoenix.js calls it as the socket's method (socket.js onConnMessage). */
  static decodeFrame(this: LinkSocket, raw: string | ArrayBuffer, callback: (decoded: unknown) => void): void {
    this.handle.adapter.decodeFrame(this.handle, raw, callback)
  }

  /** As socket.js channel(), with an {@link AttachedChannel}. */
  override channel(topic: string, params?: object | (() => object)): AttachedChannel {
    const channel = new AttachedChannel(topic, params, this)
    this.channels.push(channel)
    return channel
  }

  override onConnOpen(): void {
    super.onConnOpen()
    this.handle.adapter.socketOpened(this.handle)
  }

  override onConnError(error: unknown): void {
    this.handle.adapter.socketErrored(this.handle, error)
    super.onConnError(error)
  }

  override onConnClose(event: { code?: number; reason?: string }): void {
    super.onConnClose(event)
    this.handle.adapter.socketClosed(this.handle, event)
  }

  /**
   * phoenix.js also tears the connection down on its own (after a heartbeat timeout:
   * socket.js heartbeatTimeout, teardownAndReconnect), and each teardown polls the socket with
   * a timer until it reads closed. The transport counts as closed once every one finished, so
   * settled() leaves no phoenix.js timer behind.
   */
  override teardown(callback?: () => void, code?: number, reason?: string): void {
    const { handle } = this
    handle.teardowns++
    super.teardown(
      () => {
        handle.teardowns--
        handle.checkClosed()
        callback?.()
      },
      code,
      reason,
    )
  }
}

/**
 * A phoenix.js Channel that reports its join's reply, its phx_error and its phx_close to the
 * adapter through phoenix's own dispatch (channel.js trigger), after phoenix.js's bindings ran,
 * instead of registered callbacks: no binding or receive hook per channel (bench/ idle memory).
 * A reply counts as the join's when phoenix.js just took it as such: it came as the join push's
 * ref event (push.js `chan_reply_<ref>`) and the push stored it as its `receivedResp`.
 * phoenix 1.8.16 channel.js and push.js, pinned.
 */
class AttachedChannel extends Channel {
  /** @internal What this channel is to the adapter; set right after it is created. */
  attachment: Attachment | null = null

  override trigger(event: string, payload?: unknown, ref?: unknown, joinRef?: unknown): void {
    super.trigger(event, payload, ref, joinRef)
    const { attachment } = this
    if (attachment === null) return
    const { adapter } = (this.socket as LinkSocket).handle
    if (event === CHANNEL_EVENTS.error) adapter.channelErrored(attachment, payload, (this.socket as LinkSocket).handle.dispatchingServerFrame)
    else if (event === CHANNEL_EVENTS.close) adapter.channelClosed(attachment, payload)
    // The reply phoenix.js just took as the join's (its ref event binding is one-shot and stores
    // it as receivedResp), as `join().receive()` saw it: one report per reply.
    else if (event === this.joinPush.refEvent && payload && this.joinPush.receivedResp === payload) {
      const reply = payload as { status?: unknown; response?: unknown }
      adapter.joinReplied(attachment, reply.status, reply.response)
    }
  }
}

/**
 * Whether the accepted socket of `handle` was reset within `windowMs` of the link's last frame
 * other than a heartbeat (transport policy `resetAfterSendMs`): a server's close with the link's
 * bytes unread, which may have discarded frames the link had not read. @internal (exported for its tests)
 */
export function resetWhileSending(handle: { readonly resetAt: number | null; readonly lastSentAt: number | null }, windowMs: number): boolean {
  return windowMs > 0 && handle.resetAt !== null && handle.lastSentAt !== null && handle.resetAt - handle.lastSentAt <= windowMs
}

/**
 * The text of a socket or transport error: ws's ErrorEvent carries the Error in `error`, a
 * browser's has only `type`. Never throws (a getter that throws, a value with no text: see
 * `thrownText`).
 */
function errorText(error: unknown): string {
  try {
    if (error && typeof error === 'object') {
      const e = error as { message?: unknown; error?: { message?: unknown; code?: unknown }; type?: unknown }
      if (e.error && typeof e.error.message === 'string') return e.error.code ? `${String(e.error.code)}: ${e.error.message}` : e.error.message
      if (typeof e.message === 'string') return e.message
      if (typeof e.type === 'string') return e.type
    }
  } catch {
    // a getter or a code that throws: the value's own text, below
  }
  return thrownText(error)
}

/** The reserved events a Phoenix server sends to a channel (phoenix constants.js CHANNEL_EVENTS). */
const SERVER_EVENTS = new Set<string>([CHANNEL_EVENTS.reply, CHANNEL_EVENTS.error, CHANNEL_EVENTS.close])

/**
 * The AbortSignal of one attempt's host input (credentials, channel params), made only when the
 * host's function reads it: a link whose key is a string, or whose function ignores the signal,
 * keeps no AbortController per transport (about 750 bytes each). An abort before the signal was
 * read is remembered, so a signal read late is already aborted.
 */
class AttemptSignal {
  private controller: AbortController | null = null
  private aborted: { reason: unknown } | null = null
  /** Clears what waits for an async answer (its timer), when there is one. */
  onGiveUp: (() => void) | null = null

  get signal(): AbortSignal {
    if (this.controller === null) {
      this.controller = new AbortController()
      if (this.aborted) this.controller.abort(this.aborted.reason)
    }
    return this.controller.signal
  }

  abort(reason?: unknown): void {
    if (this.aborted) return
    this.aborted = { reason }
    this.onGiveUp?.()
    this.onGiveUp = null
    this.controller?.abort(reason)
  }

  /** What the host's function is told: `{ generation, signal }`, the signal made when read. */
  info(generation: number): { generation: number; signal: AbortSignal } {
    const source = this
    return {
      generation,
      get signal() {
        return source.signal
      },
    }
  }
}

/** One join attempt of an app channel: its params being asked, then its attachment. */
interface AppAttempt {
  readonly attachId: number
  /** Set once the attempt was released or left before its params settled. */
  ended: boolean
  /** The join params being asked: `abort()` gives them up; null until asked. */
  params: AttemptSignal | null
  attachment: Attachment | null
}


/** Whether join params, as JSON, hold a lone surrogate; params JSON cannot encode are left to the join's own failure. */
function paramsHoldLoneSurrogate(params: object): boolean {
  try {
    return hasLoneSurrogate(JSON.stringify(params))
  } catch {
    return false
  }
}

/**
 * One link's adapter: carries out the charts' socket and channel I/O actions (the link's runtime
 * calls {@link PhoenixAdapter.openTransport} and the rest), delivers app data, and knows when
 * every socket it opened is closed (`settled()`). Every method is total: what goes wrong on the
 * wire comes back to the charts as an event, never as a throw.
 */
export class PhoenixAdapter {
  private readonly handles = new Map<number, TransportHandle>()
  /** The current join attempt of each app topic, with its attachment once its params settled (for host pushes). */
  private readonly attempts = new Map<string, AppAttempt>()
  private readonly controlTopic: string
  /** Highest ref any of this link's sockets has made. */
  private get lastRef(): number {
    let max = this.endedRef
    for (const h of this.handles.values()) if (h.socket) max = Math.max(max, h.socket.ref)
    return max
  }
  private endedRef = 0

  /** @internal read by the transport handles. */
  constructor(readonly config: AdapterConfig) {
    this.controlTopic = controlTopic(config.agentId)
  }

  /**
   * The connection chart's `openTransport`: asks the credentials of this attempt (sync or async,
   * bounded), then opens the phoenix Socket of `open.generation`; a conflict probe
   * (`open.conflictProbe`) adds `on_conflict=reject` to its params, over the host's own. A
   * failure on the way (the host's function threw, rejected, timed out, gave a bad value) is the
   * transport's close, with a retryable `other` reason.
   */
  openTransport(open: TransportOpen): void {
    const origin: Origin = { generation: open.generation, epoch: open.epoch }
    const handle = new TransportHandle(origin, this, open.conflictProbe === true)
    this.handles.set(origin.generation, handle)
    handle.credentials = this.settleInput(
      'the apiKey/params of this connection attempt',
      (attempt) => this.config.credentials(attempt.info(origin.generation)),
      (value) => this.checkCredentials(value),
      (credentials) => {
        if (!handle.ended) this.connectSocket(handle, credentials)
      },
      (detail) => {
        if (handle.ended) return
        const reason: DisconnectReason = { kind: 'other', retryable: true, detail, generation: origin.generation, at: this.config.now() }
        queueMicrotask(() => !handle.ended && this.emit({ type: 'socket.close', reason, generation: origin.generation, epoch: origin.epoch }))
      },
    )
  }

  /** The connection chart's `endTransport`: closes the socket of `origin.generation` with 1000 and releases its channels. */
  endTransport(origin: Origin): void {
    const handle = this.handles.get(origin.generation)
    if (!handle) return
    handle.credentials?.abort()
    handle.credentials = null
    this.end(handle)
  }

  /**
   * Resolves a host input of one attempt (credentials, channel params): a value, or a promise
   * bounded by `credentialsTimeoutMs`. Calls `use` with a checked value, or `fail` with a detail
   * naming what went wrong (threw, rejected, timed out, a bad value). Its `abort()` gives the
   * attempt up: it aborts the signal handed to the host and clears the timer. A value given at
   * once keeps nothing but that signal's source (no closure holds the callbacks).
   */
  private settleInput<T>(
    what: string,
    ask: (signal: AttemptSignal) => T | Promise<T>,
    check: (value: unknown) => string | null,
    use: (value: T) => void,
    fail: (detail: string) => void,
  ): AttemptSignal {
    const controller = new AttemptSignal()
    let asked: T | Promise<T>
    try {
      asked = ask(controller)
    } catch (error) {
      fail(`${what}: the function threw: ${errorText(error)}`)
      return controller
    }
    let thenable: boolean
    try {
      thenable = isThenable(asked)
    } catch (error) {
      // A `then` getter that throws: the answer cannot be read.
      fail(`${what}: reading the function's answer threw: ${errorText(error)}`)
      return controller
    }
    if (!thenable) settleValue(asked, what, check, use, fail)
    else this.settleLater(controller, asked as Promise<T>, what, check, use, fail)
    return controller
  }

  /** settleInput() of a promise: bounded by `credentialsTimeoutMs`, given up by the controller's abort(). */
  private settleLater<T>(
    controller: AttemptSignal,
    asked: Promise<T>,
    what: string,
    check: (value: unknown) => string | null,
    use: (value: T) => void,
    fail: (detail: string) => void,
  ): void {
    let timer: ReturnType<typeof setTimeout> | null = null
    const accept = (value: unknown) => settleValue(value, what, check, use, fail)
    let settled = false
    const ms = this.config.policy.credentialsTimeoutMs
    timer = setTimeout(() => {
      settled = true
      controller.abort(new Error(`timed out after ${ms} ms`))
      fail(`${what}: the function did not settle within ${ms} ms (transport.credentialsTimeoutMs)`)
    }, ms)
    // Promise.resolve() takes a host's thenable whose then() throws as a rejection, not a throw here
    // (which would leave the timer armed and the attempt failed as an internal error).
    Promise.resolve(asked).then(
      (value) => {
        if (settled) return
        settled = true
        clearTimeout(timer!)
        accept(value)
      },
      (error: unknown) => {
        if (settled) return
        settled = true
        clearTimeout(timer!)
        fail(`${what}: the function rejected: ${errorText(error)}`)
      },
    )
    controller.onGiveUp = () => {
      settled = true
      if (timer) clearTimeout(timer)
    }
  }

  /** Why resolved credentials cannot be sent, or null. */
  private checkCredentials(value: unknown): string | null {
    const c = value as Partial<Credentials> | null
    if (!c || typeof c !== 'object') return `expected { apiKey, params }, got ${typeof value}`
    if (typeof c.apiKey !== 'string' || c.apiKey === '') return `the API key must be a non-empty string, got ${c.apiKey === '' ? 'an empty string' : typeof c.apiKey}`
    // Before the header check: a key holding half of a character goes neither in a header nor in the URL.
    if (!isWellFormedText(c.apiKey)) return `the API key cannot be sent: ${LONE_SURROGATE_CANNOT_GO_IN} a URL or an HTTP header`
    if (this.config.apiKeyIn === 'header' && SUPPORTS_UPGRADE_HEADERS && !isHeaderValue(c.apiKey)) {
      return "the API key has characters an HTTP header cannot carry (a control character, a code point above U+00FF, or a space or tab at its start or end); trim it, or pass apiKeyIn: 'param'"
    }
    if (!c.params || typeof c.params !== 'object' || Array.isArray(c.params) || Object.values(c.params).some((v) => typeof v !== 'string')) {
      return `params must be an object of string values, got ${describeValue(c.params)}`
    }
    // A Map or a class instance would be sent as no params, or not as the caller holds them.
    const notPlain = notPlainObject(c.params)
    if (notPlain !== null) return `params must be a plain object of string values, got ${notPlain}`
    const broken = Object.entries(c.params).find(([k, v]) => !isWellFormedText(k) || !isWellFormedText(v))
    if (broken) return `params ${isWellFormedText(broken[0]) ? `value of ${JSON.stringify(broken[0])}` : 'key'} cannot be sent: ${LONE_SURROGATE_CANNOT_GO_IN} a URL`
    return linkParamIn(c.params)
  }

  /** The connection chart's `joinControl`: joins the control topic on the transport of `origin.generation` (its params are fixed). */
  joinControl(origin: Origin): void {
    this.attachControl(origin)
  }

  /**
   * The connection chart's `rejoinControl` (after a crash): forgets the crashed phoenix Channel
   * and joins the control topic again on the same transport, with a fresh join_ref.
   */
  rejoinControl(origin: Origin): void {
    const attachment = this.controlOf(origin)
    if (!attachment) return
    this.release(attachment)
    this.attachControl(origin)
  }

  /** The connection chart's `leaveControl`: pushes phx_leave on the control channel; `control.left` follows. */
  leaveControl(origin: Origin): void {
    const attachment = this.controlOf(origin)
    if (attachment) this.leave(attachment, Math.min(NEVER, this.config.controlLeaveTimeoutMs + JOIN_TIMEOUT_SLACK_MS))
  }

  /**
   * A channel chart's `joinAttempt`: asks the channel's join params (sync or async, bounded),
   * then joins its app topic on the transport of `attempt.generation`. A failure on the way is
   * `channel.attachFailed` with a retryable `other` reason.
   */
  joinAttempt(attempt: AttachOrigin): void {
    const base = { topic: attempt.topic, generation: attempt.generation, attachId: attempt.attachId }
    this.attempts.get(attempt.topic)?.params?.abort()
    const run: AppAttempt = { attachId: attempt.attachId, ended: false, params: null, attachment: null }
    this.attempts.set(attempt.topic, run)
    run.params = this.settleInput(
      `the join params of channel ${attempt.topic}`,
      (signal) => this.config.channelParams(attempt.topic, signal.info(attempt.generation)),
      (value) => {
        // A Map, a Date, a typed array or a class instance would be sent as something else ({}, a string, indices).
        const what = notJsonMap(value)
        if (what !== null) return `expected a plain object, got ${what}`
        return paramsHoldLoneSurrogate(value as object) ? LONE_SURROGATE_MESSAGE : null
      },
      (params: object) => {
        if (!run.ended) run.attachment = this.attachApp(attempt, params)
      },
      (detail) => {
        if (run.ended) return
        const reason: DisconnectReason = { kind: 'other', retryable: true, detail, generation: attempt.generation, at: this.config.now() }
        this.later(run, { type: 'channel.attachFailed', reason, ...base })
      },
    )
  }

  /**
   * A channel chart's `leaveAttempt`: phx_leave on the attempt's join (`channel.left` follows its
   * reply); before its params settled nothing was sent, so it is left at once: `channel.left` is
   * sent now (queued behind this step, as phoenix.js's local answer to a leave is), so the host's
   * `leave()` finds the channel left when it returns and a `link.channel()` of the topic right
   * after it gets a new handle, as it does for a joined channel.
   */
  leaveAttempt(attempt: AttachOrigin): void {
    const run = this.attemptOf(attempt)
    if (!run) return
    if (run.attachment) this.leave(run.attachment, Math.min(NEVER, this.config.channelLeaveTimeoutMs + JOIN_TIMEOUT_SLACK_MS))
    else {
      run.params?.abort()
      this.emitChannel({ type: 'channel.left', topic: attempt.topic, generation: attempt.generation, attachId: attempt.attachId })
    }
  }

  /** A channel chart's `releaseAttempt`: the attempt is over; its phoenix Channel is released (a join still unanswered is left on the wire). */
  releaseAttempt(attempt: AttachOrigin): void {
    const run = this.attemptOf(attempt)
    if (run) this.endAttempt(attempt.topic, run, false)
  }

  /**
   * A crashed channel chart's topic (its exit actions never ran): its attempt ends as
   * {@link releaseAttempt} ends it, after a phx_leave when the server accepted the join (a join
   * still unanswered is left by the release itself). Nothing of the topic is kept.
   */
  dropTopic(topic: string): void {
    const run = this.attempts.get(topic)
    if (run) this.endAttempt(topic, run, true)
  }

  /** Ends an attempt and forgets it: its params input aborted, its phoenix Channel released (after a phx_leave when `leaveJoined` and it is joined). */
  private endAttempt(topic: string, run: AppAttempt, leaveJoined: boolean): void {
    run.ended = true
    run.params?.abort()
    if (run.attachment) {
      if (leaveJoined && run.attachment.joined) this.leave(run.attachment, Math.min(NEVER, this.config.channelLeaveTimeoutMs + JOIN_TIMEOUT_SLACK_MS))
      this.release(run.attachment)
    }
    this.attempts.delete(topic)
  }

  /** The current attempt of `attempt.topic` when it is this one. */
  private attemptOf(attempt: AttachOrigin): AppAttempt | undefined {
    const run = this.attempts.get(attempt.topic)
    return run?.attachId === attempt.attachId ? run : undefined
  }

  /** Reports `event` of an attempt on a microtask (outside the transition that started the attempt), unless it ended meanwhile. */
  private later(run: AppAttempt, event: ChannelEvent): void {
    queueMicrotask(() => !run.ended && this.emitChannel(event))
  }

  /** The control channel attachment of the transport of `origin`. */
  private controlOf(origin: Origin): Attachment | undefined {
    return this.handles.get(origin.generation)?.attachments.get(this.controlTopic)
  }

  /**
   * Resolves when every socket this adapter opened, up to generation `upTo` (all by default),
   * is closed and phoenix.js's teardown of it finished.
   */
  async settled(upTo = Number.POSITIVE_INFINITY): Promise<void> {
    for (;;) {
      const pending = [...this.handles.values()].filter((h) => h.origin.generation <= upTo)
      if (pending.length === 0) return
      await Promise.all(pending.map((h) => h.closed))
    }
  }

  /**
   * Checks the open socket of `generation` now (Link.ping()): sends a heartbeat of its own (topic
   * `phoenix`, a fresh ref; phoenix.js's heartbeat cycle runs on untouched) and calls `answered`
   * with the time from sending it to its reply (ms, adapter monotonic). Its own, not phoenix.js's
   * pending one: a reply the server sent before the call, still in flight, would answer that one and
   * prove nothing of the socket now. With no reply within `timeoutMs` (a real timer, as phoenix.js's
   * own heartbeat timers), the socket is ended as phoenix.js ends it when its heartbeat goes
   * unanswered, so the connection chart reads `socket.heartbeatTimeout` and the loss takes the same
   * path (phoenix.js's own heartbeat still bounds the socket too: its timeout may come first). A
   * transport that ends first drops its pings: `answered` is never called.
   *
   * @returns false, with nothing sent, when `generation` has no open socket (not opened yet,
   *   ending, ended, or its heartbeat already timed out).
   */
  ping(generation: number, timeoutMs: number, answered: (rttMs: number) => void): boolean {
    const handle = this.handles.get(generation)
    const socket = handle?.socket ?? null
    if (!handle || handle.ended || handle.heartbeatTimedOut || socket === null || !socket.isConnected()) return false
    const ref = socket.makeRef()
    socket.push({ topic: HEARTBEAT_TOPIC, event: HEARTBEAT_EVENT, payload: {}, ref, join_ref: null })
    const ping: Ping = {
      ref,
      startedAt: this.config.monotonic(),
      timer: setTimeout(() => handle.pingExpired(ping), timeoutMs),
      answered,
    }
    ;(handle.pings ??= []).push(ping)
    return true
  }

  /** Ends every transport now (the chart can no longer do it: it crashed). */
  endAll(): void {
    for (const attempt of this.attempts.values()) {
      attempt.ended = true
      attempt.params?.abort()
    }
    this.attempts.clear()
    for (const handle of this.handles.values()) {
      handle.credentials?.abort()
      handle.credentials = null
      this.end(handle)
    }
  }

  /** Whether `topic` has a joined app attachment right now. */
  isJoined(topic: string): boolean {
    return this.attempts.get(topic)?.attachment?.joined === true
  }

  /** The `ok` reply's `response` of the current join of app channel `topic` (`{}` when the server sent none); undefined while not joined. */
  joinReplyOf(topic: string): unknown {
    const attachment = this.attempts.get(topic)?.attachment
    return attachment?.joined === true ? (attachment.joinResponse ?? {}) : undefined
  }

  /**
   * Pushes on the current join of app channel `topic`.
   *
   * @returns the reply's `response` for an `ok` reply.
   * @throws {PushFailure} (rejects) with `PUSH_REJECTED` for an error reply, `PUSH_TIMEOUT`
   *   after `timeoutMs`, `TRANSPORT_LOST` when the join ended before a reply.
   */
  push(topic: string, event: string, payload: Payload | ArrayBuffer, timeoutMs: number, signal?: AbortSignal): Promise<unknown> {
    const attachment = this.attempts.get(topic)?.attachment
    if (!attachment || !attachment.joined) {
      return Promise.reject({ code: 'TRANSPORT_LOST', response: null } satisfies PushFailure)
    }
    const handle = this.handles.get(attachment.origin.generation)
    return new Promise((resolve, reject) => {
      // Aborted before it went out: nothing is sent.
      if (signal?.aborted) return reject(signal.reason)
      if (handle) handle.encodeError = null
      const push = attachment.channel.push(event, payload as object, timeoutMs)
      if (handle?.encodeError) {
        push.cancelTimeout()
        reject({ code: 'PUSH_INVALID', response: null, cause: handle.encodeError } satisfies PushFailure)
        handle.encodeError = null
        return
      }
      // The attachment's pushes in flight, made on its first push (an idle channel holds no map).
      const pushes = (attachment.pushes ??= new Map())
      // The host stopped waiting: drop this push's reply timer and binding at once, not after its timeout.
      const aborted = () => {
        push.cancelTimeout()
        push.cancelRefEvent()
        pushes.delete(push)
        reject(signal!.reason)
      }
      const fail = (failure: PushFailure) => {
        unwatch?.()
        pushes.delete(push)
        reject(failure)
      }
      pushes.set(push, fail)
      const unwatch = signal ? onAbort(signal, aborted) : undefined
      push
        .receive('ok', (response) => {
          unwatch?.()
          pushes.delete(push)
          resolve(response)
        })
        .receive('error', (response) => fail({ code: 'PUSH_REJECTED', response }))
        .receive('timeout', () => fail({ code: 'PUSH_TIMEOUT', response: null }))
    })
  }

  // ---- transports -------------------------------------------------------------------------

  /** @internal Hands an event to the charts. */
  emit(event: ConnectionEvent): void {
    this.config.sink(event)
  }

  /** Hands an app channel's event to the charts (the connection chart routes it to the channel's chart). */
  private emitChannel(event: ChannelEvent): void {
    this.config.sink(event as ConnectionEvent)
  }

  /**
   * Records `reason` as the loss of the transport of `generation` when none is recorded yet
   * (TransportHandle.lost): the control channel's phx_close or a refused (re)join, which end the
   * transport, are what its pushes in flight fail with.
   */
  private noteLost(generation: number, reason: DisconnectReason): void {
    const handle = this.handles.get(generation)
    if (handle) handle.lost ??= reason
  }

  /** @internal A transport closed: it leaves the adapter (its highest ref is kept, so refs never repeat). */
  forget(handle: TransportHandle): void {
    if (handle.socket) this.endedRef = Math.max(this.endedRef, handle.socket.ref)
    if (this.handles.get(handle.origin.generation) === handle) this.handles.delete(handle.origin.generation)
  }

  /** @internal The socket of `handle` opened (after phoenix.js's own onConnOpen). */
  socketOpened(handle: TransportHandle): void {
    const { generation, epoch } = handle.origin
    this.emit({ type: 'socket.open', generation, epoch })
  }

  /** @internal The socket of `handle` reported an error (before phoenix.js errors its channels); its text is kept for the close. */
  socketErrored(handle: TransportHandle, error: unknown): void {
    handle.lastError = errorText(error)
    const code = (error as { error?: { code?: unknown } } | null)?.error?.code
    handle.lastErrorCode = typeof code === 'string' ? code : null
  }

  /** @internal The socket of `handle` closed (after phoenix.js's own onConnClose): classified for the chart. */
  socketClosed(handle: TransportHandle, event: { code?: number; reason?: string } | undefined): void {
    const now = this.config.now()
    // After end() the close only confirms the chart's own decision to close this transport.
    if (handle.ended) return
    if (handle.heartbeatTimedOut) return // already reported as socket.heartbeatTimeout
    const { generation, epoch } = handle.origin
    if (handle.refusal) {
      this.emit({ type: 'socket.upgradeRejected', reason: classifyUpgrade(handle.refusal, generation, now), generation, epoch })
      return
    }
    // An oversized inbound frame: ws closes with 1009 and destroys the socket, so the close
    // event may read 1006; the reason is the 1009 the link sent (RFC 6455 section 7.4.1).
    const { maxFrameBytes } = this.config.policy
    const tooBig = handle.lastErrorCode === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH'
    const close = tooBig
      ? { code: 1009, reason: `an inbound frame exceeded maxFrameBytes (${maxFrameBytes} bytes); the link closed the socket with 1009` }
      : { code: typeof event?.code === 'number' ? event.code : 1006, reason: String(event?.reason ?? ''), error: handle.lastError, reset: resetWhileSending(handle, this.config.policy.resetAfterSendMs) }
    const reason = classifyClose(close, generation, now)
    handle.lost ??= reason
    this.emit({ type: 'socket.close', reason, generation, epoch })
  }

  /**
   * @internal Decodes one frame of the socket of `handle` and routes it: what phoenix.js's
   * channels run on (replies, phx_error, phx_close) to `callback` (phoenix.js's dispatch), app
   * and control data straight to its reader; a frame that does not decode, or that this
   * transport does not expect, is reported as `socket.malformed` and dropped.
   */
  decodeFrame(handle: TransportHandle, raw: string | ArrayBuffer, callback: (decoded: unknown) => void): void {
    const { maxFrameBytes } = this.config.policy
    const decoded = typeof raw === 'string' ? decodeTextFrame(raw, maxFrameBytes) : decodeBinaryFromServer(raw, maxFrameBytes)
    if (decoded.ok) {
      const { frame } = decoded
      // The frame's size as read: what a queued control signal counts against control.maxQueuedBytes.
      const bytes = typeof raw === 'string' ? raw.length : raw.byteLength
      if (handle.ended) {
        this.readLate(handle, frame, bytes)
        return
      }
      if (!this.isExpected(handle, frame)) return
      // Data (any event outside phoenix's phx_ and chan_reply_ names) goes straight to its
      // reader; phoenix.js gets only what its channels run on (replies, phx_error, phx_close).
      if (isReservedEvent(frame.event)) {
        handle.dispatchingServerFrame = true
        try {
          callback(frame)
        } finally {
          handle.dispatchingServerFrame = false
        }
      } else this.deliverData(handle, frame, bytes)
      return
    }
    // The detail quotes the frame's start, cut between tokens (clipText), so a secret the
    // frame echoed is either whole, and redacted where the detail is written out, or absent.
    const { problem } = decoded
    this.reportUnexpected(handle, `${problem.kind}: ${problem.detail}; frame starts ${JSON.stringify(clipText(problem.raw, FRAME_EXCERPT))}`)
  }

  private connectSocket(handle: TransportHandle, credentials: Credentials): void {
    const { origin } = handle
    const { policy } = this.config
    const tag = { generation: origin.generation, epoch: origin.epoch }
    const headers: Record<string, string> = {}
    const params: Record<string, string> = { ...credentials.params, [AGENT_ID_PARAM]: this.config.agentId }
    if (credentials.onConflict) params[ON_CONFLICT_PARAM] = credentials.onConflict
    // A conflict probe (the connection chart's ambiguousSupersede): the platform answers 409 rather than evict another instance.
    if (handle.conflictProbe) params[ON_CONFLICT_PARAM] = 'reject'
    if (this.config.apiKeyIn === 'header' && SUPPORTS_UPGRADE_HEADERS) headers[API_KEY_HEADER] = credentials.apiKey
    else params[API_KEY_PARAM] = credentials.apiKey

    handle.headers = headers
    const socket = LinkSocket.make(
      this.config.url,
      {
        transport: transportClass(handle),
        params,
        heartbeatIntervalMs: policy.heartbeatIntervalMs,
        timeout: policy.pushTimeoutMs,
        reconnectAfterMs: never,
        rejoinAfterMs: never,
        binaryType: 'arraybuffer',
        sessionStorage: NO_SESSION_STORE,
        encode: LinkSocket.encodeFrame,
        decode: LinkSocket.decodeFrame,
      },
      handle,
    )
    handle.socket = socket
    // Refs (and so join_refs) continue from the previous transport instead of restarting at 1,
    // so every rejoin carries a join_ref this link never used before (socket.js makeRef).
    socket.ref = this.lastRef
    // In Node the transport reports its upgrade sent once its TCP connection (or TLS session) is
    // up and the request written (ws-transport.ts onUpgradeSent); a browser's WebSocket tells
    // nothing of it, so its upgrade counts as sent once the WebSocket is made.
    if (!SUPPORTS_UPGRADE_HEADERS) this.emit({ type: 'socket.upgradeSent', ...tag })
    try {
      socket.connect()
    } catch (error) {
      // ws throws synchronously on a malformed URL; report it as the transport's close.
      handle.teardownDone = true
      handle.checkClosed()
      const reason: DisconnectReason = {
        kind: 'other',
        retryable: true,
        detail: `could not open the socket: ${errorText(error)}`,
        generation: origin.generation,
        at: this.config.now(),
      }
      queueMicrotask(() => this.emit({ type: 'socket.close', reason, ...tag }))
    }
  }

  /**
   * Whether `frame` is the expected tail of a join this link left on this transport (its leave's
   * reply or phx_close, or the pending join's own reply); counts it, and once all came, nothing
   * of that join is kept.
   */
  private isLeaveTail(handle: TransportHandle, frame: Frame): boolean {
    const { event } = frame
    if (event !== CHANNEL_EVENTS.close && event !== CHANNEL_EVENTS.reply) return false
    const key = leftKey(frame.topic, frame.join_ref)
    const left = handle.leftTopics?.get(key)
    if (left === undefined) return false
    let counted = 1 // phx_close, the leave's reply, or the join's own reply
    if (event === CHANNEL_EVENTS.reply && frame.ref === left.joinRef) {
      // A refused join (its reply: ref = join_ref, status not ok) leaves no channel to close, so
      // the phx_close counted for it never comes (Phoenix answers the leave of an unjoined topic ok).
      if ((frame.payload as { status?: unknown } | null)?.status !== 'ok') counted = 2
    } else if (event === CHANNEL_EVENTS.reply && left.leaveRef !== null && frame.ref !== left.leaveRef) {
      // The reply to a push of that join still in flight when it was left (failed then): it
      // belongs to the join, but is not one of the frames that end it.
      counted = 0
    }
    left.tails -= counted
    if (left.tails <= 0) handle.leftTopics!.delete(key)
    return true
  }

  /**
   * Checks a decoded frame against what this transport expects before phoenix.js dispatches it,
   * because phoenix.js drops the rest silently (channel.js isMember, a reply with no pending
   * push). Reported (`socket.malformed`) and dropped: a frame for a topic with no join or with a
   * join_ref that is not current; a reply to a ref nothing waits for; an event in phoenix's own
   * namespaces (`phx_*` other than reply/error/close, `chan_reply_*`); anything on the heartbeat
   * topic but the reply to the pending heartbeat. The tail of a leave (its reply, phx_close) passes.
   */
  private isExpected(handle: TransportHandle, frame: Frame): boolean {
    const { topic, event, ref } = frame
    if (topic === HEARTBEAT_TOPIC) {
      const reply = event === CHANNEL_EVENTS.reply && ref !== null
      const ping = reply ? handle.pingOf(ref) : undefined
      if (ping !== undefined || (reply && ref === handle.socket?.pendingHeartbeatRef)) {
        // Phoenix answers every heartbeat ok (Phoenix.Socket's handle_in for "phoenix"/"heartbeat").
        // Another status still answers it (the peer is alive; phoenix.js clears the pending
        // heartbeat whatever the status), but is reported, not passed over in silence.
        const { status } = frame.payload as { status: string }
        if (status !== 'ok') this.reportUnexpected(handle, `heartbeat reply with status ${quoteServerText(status)}, not ok: counted as an answer (the peer is alive)`)
        if (ping === undefined) return true
        // A ping's own heartbeat (Link.ping()): answered here; phoenix.js, which did not send it, never sees it.
        handle.pingAnswered(ping)
        return false
      }
      return this.reportUnexpected(handle, `${quoteServerText(event)} on the heartbeat topic with ref ${quoteServerText(ref)}, which answers no pending heartbeat`)
    }
    const attachment = handle.attachments.get(topic)
    if (!attachment) {
      if (this.isLeaveTail(handle, frame)) return false
      return this.reportUnexpected(handle, `${quoteServerText(event)} for topic ${quoteServerText(topic)}, which this link has not joined on this transport`)
    }
    if (isReservedEvent(event) && !SERVER_EVENTS.has(event)) {
      return this.reportUnexpected(handle, `${quoteServerText(event)} on ${topic}: an event name phoenix reserves, not sent by a Phoenix server`)
    }
    const current = attachment.channel.joinRef()
    if (frame.join_ref !== null && current !== null && frame.join_ref !== current) {
      if (attachment.leaving && event === CHANNEL_EVENTS.close) return true
      // The topic was left and joined again: the earlier join's tail may still come.
      if (this.isLeaveTail(handle, frame)) return false
      return this.reportUnexpected(handle, `${quoteServerText(event)} on ${topic} with stale join_ref ${quoteServerText(frame.join_ref)} (current ${current})`)
    }
    if (event === CHANNEL_EVENTS.reply) {
      if (!attachment.channel.bindings.some((b) => b.event === `chan_reply_${ref}`)) {
        if (attachment.leaving) return false // the leave settled locally before its reply (channel.js leave)
        return this.reportUnexpected(handle, `phx_reply on ${topic} to ref ${quoteServerText(ref)}, which no push of this link waits for`)
      }
      const { status, response } = frame.payload as { status: string; response?: unknown }
      if (status !== 'ok' && status !== 'error') return this.replyOfOtherStatus(handle, attachment, ref, status, response)
    }
    return true
  }

  /**
   * A reply whose status is neither ok nor error, to a ref something waits for. phoenix.js runs
   * only the hooks of the status it got (push.js matchReceive) after clearing the push's timeout,
   * and a status of `timeout` runs its own timeout hooks (a join's sends a phx_leave with a timer
   * of its own), so it never sees one: a join's (answered ok or error by Phoenix.Channel join/3)
   * is reported and dropped, and the join runs out its timeout; a push's rejects that push with
   * `PUSH_REPLY_STATUS` (a channel's handle_in/3 may reply with any atom).
   */
  private replyOfOtherStatus(handle: TransportHandle, attachment: Attachment, ref: string | null, status: string, response: unknown): false {
    const { topic, channel } = attachment
    const shown = quoteServerText(status)
    for (const [push, fail] of attachment.pushes ?? []) {
      if (push.ref !== ref) continue
      push.cancelTimeout()
      push.cancelRefEvent()
      fail({ code: 'PUSH_REPLY_STATUS', response, status, cause: new Error(`the server replied with status ${shown}, neither ok nor error`) })
      return false
    }
    const what = ref === channel.joinPush.ref ? `the join of ${topic}: a join is answered ok or error (Phoenix.Channel join/3)` : `ref ${quoteServerText(ref)} on ${topic}, which waits for ok or error`
    return this.reportUnexpected(handle, `phx_reply with status ${shown} to ${what}`)
  }

  /**
   * A data frame isExpected() let through: a `supersede` or an `agent.control` signal on the
   * control channel (anything else there is reported), or an app channel's push or broadcast for
   * the link's handlers. phoenix.js would hand them to the channel's onMessage unchanged.
   */
  private deliverData(handle: TransportHandle, frame: Frame, bytes: number): void {
    const { topic, event, payload } = frame
    const { generation, epoch } = handle.origin
    if (topic !== this.controlTopic) {
      this.config.message(topic, event, payload as Payload | ArrayBuffer, handle.meta)
      return
    }
    if (event === SUPERSEDE_EVENT) {
      const reason = classifySupersede(payload, generation, this.config.now())
      handle.lost ??= reason
      this.emit({ type: 'control.supersede', reason, generation, epoch })
    } else if (event === CONTROL_EVENT) {
      const parsed = parseControlSignal(payload)
      if (parsed.ok) this.emit({ type: 'control.signal', signal: parsed.signal, bytes, generation, epoch })
      else this.emit({ type: 'socket.malformed', detail: `agent.control payload ignored: ${parsed.issues.join('; ')}`, generation, epoch })
    } else {
      this.emit({ type: 'socket.malformed', detail: `unknown event ${quoteServerText(event)} on the control channel`, generation, epoch })
    }
  }

  /**
   * A frame read on a transport the chart already ended, before its close completed (end() reads
   * the socket itself from then on, until it has closed). Its channels were released at end(), so
   * nothing of it reaches phoenix.js.
   * A `supersede` or an `agent.control` signal on the control channel, with the join_ref that
   * channel had (or none: a broadcast), goes to the chart with this transport's generation, and
   * the chart decides (machines/connection.ts `isKeyHolder`): read before the next transport's
   * upgrade was sent, a supersede ends the session (another instance holds the key) and a signal
   * is delivered; after it, either is stale (the supersede may be the platform evicting this very
   * socket because our next one connected) and reported as ignored. A reply (it answers a join,
   * push, leave or heartbeat this link sent; nothing waits for it now) and the tail of a leave are
   * dropped; anything else is reported (`socket.malformed`).
   */
  private readLate(handle: TransportHandle, frame: Frame, bytes: number): void {
    const { topic, event } = frame
    // A reply answers what this link sent on the transport (a join, a push, a leave, a
    // heartbeat: each settled or failed when the transport ended), and a phx_close may end a
    // leave it sent: nothing waits for them now.
    if (event === CHANNEL_EVENTS.reply || this.isLeaveTail(handle, frame)) return
    // join_ref null: an endpoint broadcast (fastlane), as isExpected() lets through.
    const ofControl = topic === this.controlTopic && handle.controlJoinRef !== null && (frame.join_ref === null || frame.join_ref === handle.controlJoinRef)
    if (ofControl && !isReservedEvent(event)) {
      this.deliverData(handle, frame, bytes)
      return
    }
    this.reportUnexpected(handle, `${quoteServerText(event)} on ${quoteServerText(topic)} read after the link ended this transport (generation ${handle.origin.generation}), while its socket closed`)
  }

  /** @internal A frame over maxFrameBytes arrived on a transport the chart had ended: ws closed it with 1009, the frame unread. */
  oversizeAfterEnd(handle: TransportHandle): void {
    this.reportUnexpected(handle, `an inbound frame exceeded maxFrameBytes (${this.config.policy.maxFrameBytes} bytes) on a socket the link had already ended (generation ${handle.origin.generation}): not read, the socket closed with 1009`)
  }

  /** Reports a frame isExpected() drops; a method rather than a closure, as it sits on every frame's path. */
  private reportUnexpected(handle: TransportHandle, detail: string): false {
    this.emit({ type: 'socket.malformed', detail, generation: handle.origin.generation, epoch: handle.origin.epoch })
    return false
  }

  private end(handle: TransportHandle): void {
    if (handle.ended) return
    handle.ended = true
    handle.dropPings()
    // What a supersede or a control signal still read on this socket must carry (readLate()).
    handle.controlJoinRef = handle.attachments.get(this.controlTopic)?.channel.joinRef() ?? null
    for (const attachment of handle.attachments.values()) this.release(attachment)
    // From here on this socket's frames go straight to readLate() until it has closed. phoenix.js
    // would pass them on only until its teardown stops waiting for the close (about 1.5 s:
    // socket.js waitForSocketClosed, then `connection` is null and connection.js onmessage reads
    // only the current connection), while the socket can stay open until closeTimeoutMs (a peer
    // that never reads our close), and a supersede read then must still end the session.
    const ws = handle.ws as { onmessage: ((event: { data: unknown }) => void) | null } | null
    if (ws !== null) ws.onmessage = (event) => this.decodeFrame(handle, event.data as string | ArrayBuffer, IGNORE_DECODED)
    const finish = () => {
      handle.teardownDone = true
      handle.checkClosed()
    }
    if (!handle.socket || handle.teardownDone) {
      finish()
    } else {
      // Closed now, not when phoenix.js's teardown finds the send buffer empty: it polls
      // bufferedAmount in 150 ms steps for up to 1.5 s (socket.js waitForBufferDone) before its
      // close, and a browser's buffer is not empty right after a send (a last push, the phx_leave
      // of disconnect()), so the socket stayed open past a page's pagehide handler, and the page
      // out of the back/forward cache (a review, 2026-12-07). The close frame goes out after the
      // data already queued (RFC 6455 section 5.5.1; WHATWG WebSockets close()), so nothing sent is
      // lost. Only an open socket: one still opening is phoenix.js's to abort.
      const open = handle.ws as { readyState: number; close(code: number, reason: string): void } | null
      if (open !== null && open.readyState === 1) open.close(1000, 'client closing')
      // Then waits for the socket to close; phoenix.js clears its heartbeat and reconnect timers
      // here (socket.js disconnect/teardown; its own close of a closing socket changes nothing).
      handle.socket.disconnect(finish, 1000, 'client closing')
    }
  }

  // ---- channels -----------------------------------------------------------------------------

  private attachControl(origin: Origin): Attachment | null {
    const handle = this.handles.get(origin.generation)
    if (!handle?.socket || handle.ended) return null
    return this.attach(handle.socket, this.controlTopic, {}, origin, this.config.controlJoinTimeoutMs)
  }

  private attachApp(origin: AttachOrigin, params: object): Attachment | null {
    const handle = this.handles.get(origin.generation)
    if (!handle?.socket || handle.ended) return null
    handle.encodeError = null
    const attachment = this.attach(handle.socket, origin.topic, params, origin, this.config.channelJoinTimeoutMs)
    if (handle.encodeError) {
      // The join frame could not be encoded (params with a BigInt or a cycle): this attempt fails, typed.
      const reason: DisconnectReason = {
        kind: 'other',
        retryable: true,
        detail: `the join params of channel ${origin.topic} cannot be encoded: ${errorText(handle.encodeError)}`,
        generation: origin.generation,
        at: this.config.now(),
      }
      handle.encodeError = null
      const { topic, generation, attachId } = origin
      queueMicrotask(() => this.emitChannel({ type: 'channel.attachFailed', reason, topic, generation, attachId }))
    }
    return attachment
  }

  /**
   * Makes the phoenix Channel of `topic` on `socket` (an {@link AttachedChannel} that reports to
   * its attachment), records the attachment on the socket's handle and sends the join, with
   * phoenix.js's join timeout set past the chart's (`chartTimeoutMs` plus a slack) so the chart's
   * own timeout decides.
   */
  private attach(socket: LinkSocket, topic: string, params: object, origin: AttachOrigin | Origin, chartTimeoutMs: number): Attachment {
    const channel = socket.channel(topic, params)
    const attachment: Attachment = { topic, channel, origin, leaving: false, joined: false, joinResponse: undefined, pushes: null, leavePush: null }
    channel.attachment = attachment
    socket.handle.attachments.set(topic, attachment)
    channel.join(Math.min(NEVER, chartTimeoutMs + JOIN_TIMEOUT_SLACK_MS))
    return attachment
  }

  /**
   * @internal The reply to the current join of `attachment` (after phoenix.js's own handling of
   * it): `control.joinOk` / `control.joinError`, or `channel.joinOk` / `channel.joinError`.
   */
  joinReplied(attachment: Attachment, status: unknown, response: unknown): void {
    const { origin } = attachment
    if (status !== 'ok' && status !== 'error') return
    if (attachment.topic === this.controlTopic) {
      const { generation, epoch } = origin as Origin
      if (status === 'ok') {
        attachment.joined = true
        this.emit({ type: 'control.joinOk', generation, epoch })
      } else {
        const reason = classifyJoinError(response, generation, this.config.now())
        this.noteLost(generation, reason)
        this.emit({ type: 'control.joinError', reason, generation, epoch })
      }
      return
    }
    const { topic, generation, attachId } = origin as AttachOrigin
    if (status === 'ok') {
      attachment.joined = true
      attachment.joinResponse = response
      this.emitChannel({ type: 'channel.joinOk', topic, generation, attachId })
    } else {
      this.emitChannel({ type: 'channel.joinError', reason: classifyJoinError(response, generation, this.config.now()), topic, generation, attachId })
    }
  }

  /**
   * @internal A phx_error of `attachment`'s channel (after phoenix.js's own handling). One
   * phoenix.js raised itself when the transport failed (socket.js triggerChanError,
   * `{source: "transport"}` in phoenix 1.8.10+) is the socket's close, reported by the socket;
   * only the server's phx_error (`fromServer`: a frame it sent, whatever its payload, even one that
   * mimics that marker) is the channel's own loss: the channel's server process crashed, the
   * socket is fine, and the chart rejoins.
   */
  channelErrored(attachment: Attachment, payload: unknown, fromServer: boolean): void {
    if (!fromServer) return
    const { origin } = attachment
    if (attachment.topic === this.controlTopic) {
      const { generation, epoch } = origin as Origin
      this.emit({ type: 'control.crashed', reason: classifyControlChannelLoss('phx_error', payload, generation, this.config.now()), generation, epoch })
      return
    }
    const { topic, generation, attachId } = origin as AttachOrigin
    attachment.joined = false
    this.emitChannel({ type: 'channel.error', topic, generation, attachId })
  }

  /** @internal A phx_close of `attachment`'s channel, the server's or the end of our own leave (after phoenix.js's own handling). */
  channelClosed(attachment: Attachment, payload: unknown): void {
    const { origin } = attachment
    if (attachment.topic === this.controlTopic) {
      const { generation, epoch } = origin as Origin
      if (attachment.leaving) this.emit({ type: 'control.left', generation, epoch })
      else {
        const reason = classifyControlChannelLoss('phx_close', payload, generation, this.config.now())
        this.noteLost(generation, reason)
        this.emit({ type: 'control.lost', reason, generation, epoch })
      }
      return
    }
    const { topic, generation, attachId } = origin as AttachOrigin
    attachment.joined = false
    if (attachment.leaving) this.emitChannel({ type: 'channel.left', topic, generation, attachId })
    else this.emitChannel({ type: 'channel.close', reason: classifyChannelClose(payload, generation, this.config.now()), topic, generation, attachId })
  }

  private leave(attachment: Attachment, timeoutMs: number): void {
    if (attachment.leaving) return
    attachment.leaving = true
    attachment.joined = false
    attachment.leavePush = attachment.channel.leave(timeoutMs)
  }

  /**
   * Forgets a phoenix Channel: the chart moved on (new join attempt, transport gone, session
   * ended). Clears the timers phoenix.js would keep (join push timeout, rejoin timer, push
   * timeouts) and removes it from its socket. Uses channel.js and push.js internals of the pinned
   * phoenix 1.8.16; test/wire checks no timer is left.
   *
   * A join still unanswered on a socket still open (the chart's join timeout ran out) is left
   * on the wire first: Phoenix answers a socket's messages in order, so a late accept would
   * otherwise keep the topic joined for the socket's life, with its pushes reported as ignored.
   */
  private release(attachment: Attachment): void {
    const { channel } = attachment
    const joinPending = channel.joinPush.sent && channel.joinPush.receivedResp === null
    attachment.joined = false
    channel.joinPush.cancelTimeout()
    channel.rejoinTimer.reset()
    attachment.leavePush?.cancelTimeout()
    const handle = this.handles.get(attachment.origin.generation)
    for (const [push, fail] of [...(attachment.pushes ?? [])]) {
      push.cancelTimeout()
      fail({ code: 'TRANSPORT_LOST', response: null, reason: handle?.lost ?? null })
    }
    const socket = channel.socket as unknown as Socket
    socket.remove(channel)
    if (handle?.attachments.get(attachment.topic) === attachment) {
      handle.attachments.delete(attachment.topic)
      // The frames still to come for this join: the leave's reply and phx_close, and the join's
      // own reply when it was still pending.
      const tails = joinPending ? 3 : 2
      if (attachment.leaving) rememberLeft(handle, attachment.topic, { joinRef: channel.joinRef(), leaveRef: attachment.leavePush?.ref ?? null, tails })
      else if (joinPending && !handle.ended && socket.isConnected()) {
        const leaveRef = socket.makeRef()
        socket.push({ topic: attachment.topic, event: CHANNEL_EVENTS.leave, payload: {}, ref: leaveRef, join_ref: channel.joinRef() })
        rememberLeft(handle, attachment.topic, { joinRef: channel.joinRef(), leaveRef, tails })
      }
    }
  }
}

/** A join this link left on a transport, whose last frames may still come (`TransportHandle.leftTopics`). */
interface LeftJoin {
  joinRef: string | null
  /** The ref of its phx_leave, when it went out: its reply is a tail, other replies of the join are not. */
  leaveRef: string | null
  /** Frames still to come: phx_close, the leave's reply, and the join's reply when it was pending. */
  tails: number
}

/**
 * Most left joins a transport remembers: a server that never answers some of them (a join it
 * never replied to, left on its timeout) cannot grow the map for the socket's life. The oldest
 * goes first; its frames, if they ever come, are then reported as for a topic not joined.
 */
const MAX_LEFT_JOINS = 64

/** Remembers a join left on `handle`, forgetting the oldest past {@link MAX_LEFT_JOINS}. */
function rememberLeft(handle: TransportHandle, topic: string, left: LeftJoin): void {
  const map = (handle.leftTopics ??= new Map())
  map.set(leftKey(topic, left.joinRef), left)
  if (map.size > MAX_LEFT_JOINS) map.delete(map.keys().next().value!)
}

/** The key of a join left on a transport, in `TransportHandle.leftTopics`: its topic and join_ref. */
function leftKey(topic: string, joinRef: string | null): string {
  return `${joinRef ?? ''}\u0000${topic}`
}

/** settleInput() of a value given at once: checked, then used, or failed with what is wrong. */
function settleValue<T>(value: unknown, what: string, check: (value: unknown) => string | null, use: (value: T) => void, fail: (detail: string) => void): void {
  const problem = check(value)
  if (problem) fail(`${what}: ${problem}`)
  else use(value as T)
}

/** What a host's value is, for an error detail: `null`, `an array`, `an object with a number at "n"`, or its type. */
function describeValue(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  if (typeof value !== 'object') return typeof value
  const wrong = Object.entries(value).find(([, v]) => typeof v !== 'string')
  return wrong ? `an object with ${wrong[1] === null ? 'null' : Array.isArray(wrong[1]) ? 'an array' : `a ${typeof wrong[1]}`} at ${JSON.stringify(wrong[0])}` : 'an object'
}
