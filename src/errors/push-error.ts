import { PhoenixLinkError } from './base.js'
import { describeReason, type DisconnectReason } from '../reasons.js'

/** Why a channel push failed. */
export type PushErrorCode =
  /** No reply within the push timeout. */
  | 'PUSH_TIMEOUT'
  /** The server replied with status `error`; `response` holds its payload. */
  | 'PUSH_REJECTED'
  /** The transport or the join ended before a reply; the push may or may not have arrived. */
  | 'TRANSPORT_LOST'
  /** The channel was left or dropped, or the link stopped, before the push could be sent. */
  | 'CHANNEL_CLOSED'
  /** The payload could not be encoded (not JSON-serialisable, or a binary field over 255 bytes); `cause` says why. */
  | 'PUSH_INVALID'
  /**
   * The server replied with a status other than `ok` or `error` (a Phoenix channel may reply with
   * any atom: `{:reply, {:accepted, map}, socket}`, Phoenix.Channel handle_in/3); `status` and
   * `response` hold the reply. phoenix.js would leave such a push unsettled.
   */
  | 'PUSH_REPLY_STATUS'

/**
 * A push on an app channel failed; `code` says how. A push made while the channel is not joined
 * waits for the join up to its timeout. Fix: for `TRANSPORT_LOST`, push again once the channel
 * is joined again (`await channel.joined()`, or its `joined` status) if the operation is idempotent.
 */
export class PushError extends PhoenixLinkError {
  override readonly code: PushErrorCode
  /** The channel's topic. */
  readonly topic: string
  /** The pushed event. */
  readonly event: string
  /** The server's reply payload for `PUSH_REJECTED` and `PUSH_REPLY_STATUS`. */
  readonly response: unknown
  /** The reply's status when the server replied (`error` for `PUSH_REJECTED`, the status it sent for `PUSH_REPLY_STATUS`); null otherwise. */
  readonly status: string | null
  /**
   * For `CHANNEL_CLOSED` on a channel the server refused or closed (status `dropped`): why, as the
   * channel's typed reason (`channel.reason`). For `TRANSPORT_LOST` when the transport was lost
   * under the push: the loss the link reported for it (the close, with its close code; a
   * heartbeat timeout; a supersede; the control channel's phx_close or refused rejoin). A
   * `closed` 1009 "message too big" (RFC 6455 section 7.4.1) says a frame was over a limit: the
   * server's, so this push or another in flight was over its frame limit, unless its
   * `closeReason` says the link closed the socket for an inbound frame over `maxFrameBytes`.
   * Null otherwise (the link ended the transport itself: `disconnect()`, a stale socket
   * replaced, a fault of its own).
   */
  readonly reason: DisconnectReason | null

  constructor(
    code: PushErrorCode,
    topic: string,
    event: string,
    response: unknown = null,
    cause?: unknown,
    status: string | null = code === 'PUSH_REJECTED' ? 'error' : null,
    /**
     * `reason`: the dropped channel's reason (kept as it is: data); `redact`: applied to the
     * message only (the link passes its key redaction: the message is output, and the reason's
     * text comes from the server); `detail`: what ended it, when no reason says; `join`: the wait
     * of channel.joined() failed (the message names the join, not a push).
     */
    options: { reason?: DisconnectReason | null; redact?: (text: string) => string; detail?: string; join?: boolean } = {},
  ) {
    const reason = options.reason ?? null
    const why =
      cause instanceof Error
        ? ` (${cause.message})`
        : reason
          ? code === 'TRANSPORT_LOST'
            ? ` (the transport was lost: ${describeReason(reason)})`
            : // A dropped reason's line starts with its kind: said once.
              ` (the channel was dropped: ${describeReason(reason).replace(/^dropped: /, '')})`
          : options.detail !== undefined
            ? ` (${options.detail})`
            : code === 'TRANSPORT_LOST'
              ? ' (the link ended the transport itself: disconnect(), or a socket it replaced)'
              : ''
    // A wait for the join (channel.joined()) fails as a push of phx_join would: its message says join.
    const what = options.join === true ? `the join of ${JSON.stringify(topic)}` : `push ${JSON.stringify(String(event).slice(0, 100))} on ${JSON.stringify(topic)}`
    const message = `${what} failed: ${code}${why}`
    super(code, options.redact ? options.redact(message) : message, cause === undefined ? undefined : { cause })
    this.name = 'PushError'
    this.code = code
    this.topic = topic
    this.event = event
    this.response = response
    this.status = status
    this.reason = reason
  }
}

/** Whether `error` is a {@link PushError}. */
export function isPushError(error: unknown): error is PushError {
  return error instanceof PushError
}
