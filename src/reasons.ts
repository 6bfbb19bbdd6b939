/**
 * Why a transport or a session ended: `DisconnectReason`, a zod discriminated union on `kind`,
 * and the classification tables that turn what the socket saw (close codes, refused upgrades,
 * supersede pushes, join errors) into one. The charts decide on `retryable`; this file decides
 * what is retryable. Classification never throws: anything unrecognised becomes `other` with the
 * raw text kept.
 */
import * as z from 'zod/mini'
import type { ReasonLike } from '../machines/types.js'
import { SupersedePayload, UpgradeErrorBody } from './protocol.js'
import { deepFreeze } from './freeze.js'

/**
 * The longest wait a reason reports, in milliseconds: 2^31-1 (about 24.8 days), the longest delay
 * a JavaScript timer takes (HTML timers, Node's setTimeout). A server's larger `retry_after` or
 * Retry-After (1e308 seconds, 400 nines) is reported as this, never as Infinity, which JSON
 * cannot carry (JSON.stringify writes null). The reconnect policy caps the wait far lower
 * (`maxRetryAfterMs`).
 */
export const MAX_RETRY_AFTER_MS = 2 ** 31 - 1

/** A reason's `retryAfterMs`: whole milliseconds in [0, {@link MAX_RETRY_AFTER_MS}], or null. */
const RetryAfterMs = z.nullable(z.int().check(z.minimum(0), z.maximum(MAX_RETRY_AFTER_MS)))

/**
 * A wait the server gave in seconds (a finite number >= 0, or a string of digits as HTTP's
 * delta-seconds), as whole milliseconds (rounded up) capped at {@link MAX_RETRY_AFTER_MS}; null for anything
 * else (negative, not finite, not a number, junk text).
 */
function retryAfterSecondsToMs(value: unknown): number | null {
  let seconds: number
  // A number JSON decoded is finite; digits too many for a double read as Infinity: the cap.
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0) seconds = value
  else if (typeof value === 'string' && /^\s*\d+(\.\d+)?\s*$/.test(value)) seconds = Number(value)
  else return null
  // Rounded up (from whole microseconds, so 1.1 s is 1100 ms, not 1101): never shorter than asked.
  return Math.min(MAX_RETRY_AFTER_MS, Math.ceil(Math.round(seconds * 1e6) / 1e3))
}

const base = {
  /** Transport generation the reason belongs to. */
  generation: z.int().check(z.nonnegative()),
  /** When, in milliseconds since the Unix epoch. */
  at: z.number(),
}

/** Causes of a `rejected` reason. Only `rate-limited` and `unavailable` are retryable. */
export const RejectionCause = z.enum([
  'unauthenticated',
  'unauthorized',
  'conflict',
  'rate-limited',
  'quota-exceeded',
  'protocol-error',
  'unavailable',
])
/** Cause of a `rejected` reason. */
export type RejectionCause = z.infer<typeof RejectionCause>

/** Where a rejection came from: the HTTP upgrade, the control channel join, or a close frame. */
export const RejectionPhase = z.enum(['upgrade', 'join', 'close'])
/** Where a rejection came from. */
export type RejectionPhase = z.infer<typeof RejectionPhase>

/** The host stopped the session with disconnect(). Never retried. */
export const GracefulReason = z.object({ kind: z.literal('graceful'), retryable: z.literal(false), ...base })

/**
 * The platform handed this agent's key to a newer session (`supersede` push on the control
 * channel). Terminal: reconnecting would evict the newer instance.
 */
export const SupersededReason = z.object({
  kind: z.literal('superseded'),
  retryable: z.literal(false),
  /**
   * The payload's `reason`, an open set such as `session.already_connected`; `unknown` when missing;
   * `unseen` when no push carried it: the server closed a socket before its control channel joined
   * and conflict probes were then refused 409 past the window (machines/types.ts
   * `unseenSupersedeReason`; its payload fields null, `raw` empty, `generation` and `at` those of
   * the close).
   */
  cause: z.string(),
  message: z.nullable(z.string()),
  /** The payload's `retry_after` in milliseconds (it is sent in seconds), at most {@link MAX_RETRY_AFTER_MS}; null when missing or malformed. */
  retryAfterMs: RetryAfterMs,
  targetSocketId: z.nullable(z.string()),
  correlationId: z.nullable(z.string()),
  /**
   * The payload as received, odd fields included; a payload that is no object as `{ value }`, a
   * binary frame's as `{ binary, bytes }` (base64 of its first 150 bytes, and its length). Its
   * text fields above are cut to {@link REASON_TEXT_LIMIT} characters between tokens (a field that
   * is one longer token is null); `raw` keeps them whole.
   */
  raw: z.record(z.string(), z.unknown()),
  ...base,
})

/** The platform refused the agent: upgrade status, join error, or a close code that says so. */
export const RejectedReason = z.object({
  kind: z.literal('rejected'),
  retryable: z.boolean(),
  cause: RejectionCause,
  phase: RejectionPhase,
  /** HTTP status of a refused upgrade. */
  status: z.nullable(z.int()),
  /** RFC 6455 close code, for phase `close`. */
  closeCode: z.optional(z.int()),
  /** The error body's `code` (`connection_conflict`, `too_many_requests`, ...) or the join error's `reason`. */
  errorCode: z.nullable(z.string()),
  message: z.nullable(z.string()),
  requestId: z.nullable(z.string()),
  /** Retry-After in milliseconds, when the server sent one, at most {@link MAX_RETRY_AFTER_MS}. */
  retryAfterMs: RetryAfterMs,
  ...base,
})

/** The peer sent a close frame with a code that is not a refusal. */
export const ClosedReason = z.object({
  kind: z.literal('closed'),
  retryable: z.boolean(),
  /** RFC 6455 section 7.4 close code. */
  closeCode: z.int(),
  /** RFC 6455 name of the code, e.g. `going away`. */
  closeName: z.string(),
  /** The close frame's reason text. */
  closeReason: z.string(),
  ...base,
})

/**
 * The transport ended without a close frame (1006), failed to connect, or the control channel
 * died; on an app channel, the server closed it (phx_close).
 */
export const DroppedReason = z.object({
  kind: z.literal('dropped'),
  /**
   * True for the session (the link reconnects, or rejoins the control channel); false on an app
   * channel's `dropped` status, since the channel chart does not rejoin a channel the server closed.
   */
  retryable: z.boolean(),
  /** `socket`: the WebSocket itself; `channel`: phx_error or phx_close on the control channel, or phx_close on an app channel. */
  source: z.enum(['socket', 'channel']),
  detail: z.string(),
  /**
   * True when the TCP connection of a socket the server had accepted was reset (Node reported
   * `ECONNRESET` or `EPIPE`, {@link RESET_ERROR_CODES}) within transport policy
   * `resetAfterSendMs` (2 s) of a frame the link sent (not a heartbeat): the server closed it with
   * bytes of ours unread, and the frames it had sent that the link had not yet read were lost with
   * it. Phoenix on Bandit and Cowboy close so whenever a client is sending, a "disconnect" and the
   * close after a supersede push alike (docs/field-notes.md "A reset loses what it overtakes"), so
   * the push may be among the lost frames: the link's next upgrades ask `on_conflict=reject`
   * (docs/rules.md). Absent otherwise: a reset of a link that sent nothing that recently (a NAT or
   * proxy dropping an idle flow) or during the handshake (the detail still names the error), and
   * always in a browser, whose WebSocket reports no socket error.
   */
  reset: z.optional(z.literal(true)),
  ...base,
})

/** A wait ran out: heartbeat reply, control channel join, or transport open. */
export const TimedOutReason = z.object({
  kind: z.literal('timed-out'),
  retryable: z.literal(true),
  phase: z.enum(['heartbeat', 'join', 'connect']),
  ...base,
})

/**
 * Anything unrecognised: diagnostics only, never control flow. The session retries it with
 * backoff; an app channel whose join was refused with an unlisted reason is dropped.
 */
export const OtherReason = z.object({
  kind: z.literal('other'),
  /**
   * True for the session (retried with backoff); false on an app channel's `dropped` status (a
   * join refused with a reason the join table does not list: the channel chart does not rejoin it)
   * and for a link whose chart crashed (a phoenix-link bug: `internal error: …`, terminated).
   */
  retryable: z.boolean(),
  detail: z.string(),
  /** The raw text that could not be classified, when there was one. */
  raw: z.optional(z.string()),
  ...base,
})

/** The reconnect chart slowed down past the rapid-disconnect limit (retryable: the link is suspended), or gave up by policy (terminal). */
export const SuppressedReason = z.object({
  kind: z.literal('suppressed'),
  /** True while the link is `suspended` (slow retry, the default); false when the policy gave up. */
  retryable: z.boolean(),
  cause: z.enum(['rapid-disconnects', 'max-attempts']),
  attempts: z.int().check(z.nonnegative()),
  /**
   * The loss that reached the limit: the last of the rapid losses (for `rapid-disconnects`), or the
   * loss past `maxAttempts`. The host's `disconnected` event for that loss carries this `suppressed`
   * reason instead, so the loss's own close code, status or detail are here. Always set by the
   * link; optional so that a reason recorded by an earlier build (a trace) still parses.
   */
  lastLoss: z.optional(
    z.discriminatedUnion('kind', [RejectedReason, ClosedReason, DroppedReason, TimedOutReason, OtherReason]),
  ),
  ...base,
})

/** Why a transport or a session ended. Discriminated on `kind`. */
export const DisconnectReason = z.discriminatedUnion('kind', [
  GracefulReason,
  SupersededReason,
  RejectedReason,
  ClosedReason,
  DroppedReason,
  TimedOutReason,
  SuppressedReason,
  OtherReason,
])
/** Why a transport or a session ended. */
export type DisconnectReason = z.infer<typeof DisconnectReason>

/** Every `kind` of DisconnectReason, read from the schema. */
export const REASON_KINDS: readonly DisconnectReason['kind'][] = deepFreeze(DisconnectReason.def.options.map((o) => o.def.shape.kind.def.values[0]!))
/** A DisconnectReason kind. */
export type ReasonKind = DisconnectReason['kind']

// The charts keep reasons as ReasonLike; every DisconnectReason must be one.
const _reasonIsReasonLike = (r: DisconnectReason): ReasonLike => r
void _reasonIsReasonLike

/** Where a close code sends a session: reconnect (`closed`), no frame (`dropped`), or refusal (`rejected`). */
export type CloseOutcome =
  | { kind: 'closed'; retryable: true }
  | { kind: 'dropped' }
  | { kind: 'rejected'; cause: RejectionCause }

/**
 * The close code table: RFC 6455 section 7.4.1 names and the IANA WebSocket close code registry
 * (1012-1015), with the outcome for a session. No close code means "stop": 1000, 1001 and 1011
 * are what the same platform "disconnect" sends through Phoenix 1.8, Cowboy and Bandit
 * (docs/field-notes.md "Close codes a real server sends"). Only a server saying the agent is not allowed
 * ends the session: 1008 (policy violation) and 4500-4999. A complaint about one message (1002,
 * 1003, 1007, 1009, 1010) reconnects: Bandit closes an idle socket with 1002 (docs/field-notes.md), and one
 * oversized push must not silence an agent for good; a real protocol fault that repeats ends in
 * `suppressed` through the rapid-disconnect window.
 */
export const CLOSE_CODES: ReadonlyArray<Readonly<{ from: number; to: number; name: string; outcome: Readonly<CloseOutcome> }>> = deepFreeze([
  { from: 1000, to: 1000, name: 'normal closure', outcome: { kind: 'closed', retryable: true } },
  { from: 1001, to: 1001, name: 'going away', outcome: { kind: 'closed', retryable: true } },
  { from: 1002, to: 1002, name: 'protocol error', outcome: { kind: 'closed', retryable: true } },
  { from: 1003, to: 1003, name: 'unsupported data', outcome: { kind: 'closed', retryable: true } },
  { from: 1005, to: 1005, name: 'no status received', outcome: { kind: 'closed', retryable: true } },
  { from: 1006, to: 1006, name: 'abnormal closure', outcome: { kind: 'dropped' } },
  { from: 1007, to: 1007, name: 'invalid frame payload data', outcome: { kind: 'closed', retryable: true } },
  { from: 1008, to: 1008, name: 'policy violation', outcome: { kind: 'rejected', cause: 'unauthorized' } },
  { from: 1009, to: 1009, name: 'message too big', outcome: { kind: 'closed', retryable: true } },
  { from: 1010, to: 1010, name: 'mandatory extension', outcome: { kind: 'closed', retryable: true } },
  { from: 1011, to: 1011, name: 'internal error', outcome: { kind: 'closed', retryable: true } },
  { from: 1012, to: 1012, name: 'service restart', outcome: { kind: 'closed', retryable: true } },
  { from: 1013, to: 1013, name: 'try again later', outcome: { kind: 'closed', retryable: true } },
  { from: 1014, to: 1014, name: 'bad gateway', outcome: { kind: 'closed', retryable: true } },
  { from: 1015, to: 1015, name: 'TLS handshake', outcome: { kind: 'dropped' } },
  { from: 3000, to: 3999, name: 'registered (libraries and frameworks)', outcome: { kind: 'closed', retryable: true } },
  { from: 4000, to: 4499, name: 'application (retryable)', outcome: { kind: 'closed', retryable: true } },
  { from: 4500, to: 4999, name: 'application (terminal)', outcome: { kind: 'rejected', cause: 'unauthorized' } },
])

/** The RFC 6455 / IANA name of a close code, or `unknown`. */
export function closeCodeName(code: number): string {
  return CLOSE_CODES.find((row) => code >= row.from && code <= row.to)?.name ?? 'unknown'
}

/** What a transport saw when it closed. */
export interface CloseInfo {
  /** Close code; 1006 when no close frame arrived. */
  code: number
  /** Close frame reason text ('' when none). */
  reason: string
  /** A socket error seen before the close (connection refused, reset), for the `dropped` detail. */
  error?: string | null
  /**
   * The adapter found the TCP connection of the accepted socket reset ({@link RESET_ERROR_CODES})
   * soon after the link sent a frame (transport policy `resetAfterSendMs`): marks a `dropped`
   * reason `reset`.
   */
  reset?: boolean
}

/**
 * The socket error codes of a reset TCP connection (Node, libuv): `ECONNRESET` (a read met the
 * peer's RST) and `EPIPE` (a write did). A connection ended by a FIN, refused or timed out is not
 * among them.
 */
export const RESET_ERROR_CODES: readonly string[] = Object.freeze(['ECONNRESET', 'EPIPE'])

/**
 * Classifies a transport close by the {@link CLOSE_CODES} table. Codes outside the table become
 * `other` (retryable). Never throws.
 */
export function classifyClose(close: CloseInfo, generation: number, at: number): DisconnectReason {
  const row = CLOSE_CODES.find((r) => close.code >= r.from && close.code <= r.to)
  if (!row) {
    // A code no peer may send (RFC 6455 section 7.4.2: unassigned in 1000-2999, below 1000, 5000
    // and up). `ws` fails such a connection (1006); Chromium hands the code on with wasClean true.
    // Read as the drop ws makes of it, so a browser and Node report the same reason, and the loss
    // counts toward the rapid-disconnect limit in both.
    return {
      kind: 'dropped',
      retryable: true,
      source: 'socket',
      detail: `close code ${close.code} is outside every range of the close code table: no peer may send it (RFC 6455 section 7.4.2), read as a drop${close.reason ? ` (reason ${JSON.stringify(clipText(close.reason, REASON_TEXT_LIMIT))})` : ''}`,
      generation,
      at,
    }
  }
  switch (row.outcome.kind) {
    case 'closed':
      return { kind: 'closed', retryable: true, closeCode: close.code, closeName: row.name, closeReason: close.reason, generation, at }
    case 'dropped': {
      const reason: z.infer<typeof DroppedReason> = {
        kind: 'dropped',
        retryable: true,
        source: 'socket',
        detail: `${row.name} (${close.code})${close.error ? `: ${close.error}` : ': no close frame'}`,
        generation,
        at,
      }
      if (close.reset === true) reason.reset = true
      return reason
    }
    case 'rejected':
      return {
        kind: 'rejected',
        retryable: false,
        cause: row.outcome.cause,
        phase: 'close',
        status: null,
        closeCode: close.code,
        errorCode: null,
        message: close.reason || row.name,
        requestId: null,
        retryAfterMs: null,
        generation,
        at,
      }
  }
}

/**
 * HTTP statuses of a refused WebSocket upgrade and the rejection cause they mean. 400/401/402/403/409
 * end the session (a 409 soon after this session lost its own connection is retried instead: the
 * connection chart's `isOwnConflict`); 429 and 503 wait at least Retry-After (docs/field-notes.md "The platform's control
 * channel"; Phoenix answers 403 when connect/3 returns :error). 414 and 431 end it too: the web
 * server's HTTP parser refused the request's size (the url with its socket params, or a header
 * such as a long x-api-key), which is the same on every attempt (Bandit past 10,000 bytes a
 * line, Cowboy past 8,000 for the request line and 4,096 for a header value; docs/field-notes.md
 * "Request size"). Statuses not listed: other 5xx are `unavailable` (retryable), anything else is
 * `other`.
 */
export const UPGRADE_STATUSES: Readonly<Record<number, Readonly<{ cause: RejectionCause; retryable: boolean }>>> = deepFreeze({
  400: { cause: 'protocol-error', retryable: false },
  401: { cause: 'unauthenticated', retryable: false },
  402: { cause: 'quota-exceeded', retryable: false },
  403: { cause: 'unauthenticated', retryable: false },
  409: { cause: 'conflict', retryable: false },
  414: { cause: 'protocol-error', retryable: false },
  429: { cause: 'rate-limited', retryable: true },
  431: { cause: 'protocol-error', retryable: false },
  503: { cause: 'unavailable', retryable: true },
})

/** What a refused upgrade carried. */
export interface UpgradeRefusal {
  status: number
  /** The Retry-After header as received, if any. */
  retryAfter?: string | null
  /** The response's Date header, if any: an HTTP-date Retry-After is read against it (see {@link parseRetryAfter}). */
  date?: string | null
  /** The response body as text (at most a few KB are read). */
  body?: string | null
}

const MONTHS = 'Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec'
/** IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`: the form servers send. */
const IMF_FIXDATE = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\\d{2}) (${MONTHS}) (\\d{4}) (\\d{2}):(\\d{2}):(\\d{2}) GMT$`)
/** The obsolete forms a recipient still reads (RFC 9110 section 5.6.7): RFC 850's, `Sunday, 06-Nov-94 08:49:37 GMT`. */
const RFC850_DATE = new RegExp(`^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\\d{2})-(${MONTHS})-(\\d{2}) (\\d{2}):(\\d{2}):(\\d{2}) GMT$`)
/** ... and asctime's, `Sun Nov  6 08:49:37 1994` (GMT, though it says no zone). */
const ASCTIME_DATE = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (${MONTHS}) ( \\d|\\d{2}) (\\d{2}):(\\d{2}):(\\d{2}) (\\d{4})$`)

/**
 * An HTTP-date's time in milliseconds since the epoch, or NaN when `text` is none of its three
 * forms (RFC 9110 section 5.6.7) or names no real time (the 31st of February, hour 24). Read by
 * field, not by Date.parse, which takes far more ("foo 2030" as a date in 2030, "0" as the year
 * 2000) and rolls an impossible date over. RFC 850's two-digit year is the one RFC 9110 names: a
 * year that would lie more than 50 years after `now` is the most recent past year with those digits.
 *
 * @param now milliseconds since the Unix epoch, for RFC 850's century.
 */
function httpDate(text: string, now: number): number {
  let m = IMF_FIXDATE.exec(text)
  if (m) return utc(Number(m[3]), m[2]!, Number(m[1]), m[4]!, m[5]!, m[6]!)
  m = RFC850_DATE.exec(text)
  if (m) {
    const thisYear = new Date(Number.isFinite(now) ? now : 0).getUTCFullYear()
    let year = Math.floor(thisYear / 100) * 100 + Number(m[3])
    if (year > thisYear + 50) year -= 100
    return utc(year, m[2]!, Number(m[1]), m[4]!, m[5]!, m[6]!)
  }
  m = ASCTIME_DATE.exec(text)
  if (m) return utc(Number(m[6]), m[1]!, Number(m[2]), m[3]!, m[4]!, m[5]!)
  return Number.NaN
}

/**
 * Date.UTC of the fields, or NaN for a day the month lacks or a time past 23:59:60 (a leap second
 * reads as :59). Date.UTC rolls a field over into the next (day 0, the 31st of February, hour 24:
 * another day), so the day read back must be the day given; a minute or a second past its range
 * could roll over within the day, and is refused first.
 */
function utc(year: number, month: string, day: number, hours: string, minutes: string, seconds: string): number {
  const [min, s] = [Number(minutes), Number(seconds)]
  if (min > 59 || s > 60) return Number.NaN
  const time = Date.UTC(year, MONTHS.split('|').indexOf(month), day, Number(hours), min, Math.min(s, 59))
  return new Date(time).getUTCDate() === day ? time : Number.NaN
}

/**
 * Reads an HTTP Retry-After value (RFC 9110 section 10.2.3): delta-seconds or an HTTP-date (an
 * IMF-fixdate, or the obsolete RFC 850 or asctime form; anything else is malformed: null).
 * An HTTP-date is read against the response's own Date header when it has a valid one (both on
 * the server's clock, so a local wall clock that is off or steps changes nothing), else against
 * `now`.
 *
 * @param now milliseconds since the Unix epoch (the local wall clock), for a date with no Date header.
 * @param serverDate the response's Date header, if any.
 * @returns milliseconds to wait (0 for a past date; at most {@link MAX_RETRY_AFTER_MS}), or null when missing or malformed.
 */
export function parseRetryAfter(value: string | null | undefined, now: number, serverDate?: string | null): number | null {
  if (value === null || value === undefined) return null
  const text = value.trim()
  if (/^\d+(\.\d+)?$/.test(text)) return retryAfterSecondsToMs(text)
  const date = httpDate(text, now)
  if (Number.isNaN(date)) return null
  const sent = serverDate ? httpDate(serverDate.trim(), now) : Number.NaN
  return Math.min(MAX_RETRY_AFTER_MS, Math.max(0, Math.round(date - (Number.isNaN(sent) ? now : sent))))
}

/** Classifies a refused upgrade by {@link UPGRADE_STATUSES}. Never throws. */
export function classifyUpgrade(refusal: UpgradeRefusal, generation: number, at: number): DisconnectReason {
  let errorCode: string | null = null
  let message: string | null = null
  let requestId: string | null = null
  if (refusal.body) {
    let json: unknown
    try {
      json = JSON.parse(refusal.body)
    } catch {
      // Not JSON: kept as the message below.
    }
    const parsed = UpgradeErrorBody.safeParse(json)
    if (parsed.success) {
      errorCode = parsed.data.error.code ?? null
      message = parsed.data.error.message ?? null
      requestId = parsed.data.error.request_id ?? null
    }
    if (message === null && errorCode === null) message = clipText(refusal.body, REASON_TEXT_LIMIT) || null
  }
  const retryAfterMs = parseRetryAfter(refusal.retryAfter, at, refusal.date)
  const row =
    UPGRADE_STATUSES[refusal.status] ??
    (refusal.status >= 500 && refusal.status <= 599 ? { cause: 'unavailable' as const, retryable: true } : null)
  if (!row) {
    const hint =
      refusal.status === 404
        ? ': no WebSocket endpoint at this path; check the url (it ends at the socket mount, e.g. /socket)'
        : ', a status the upgrade table does not list'
    return {
      kind: 'other',
      retryable: true,
      detail: `upgrade refused with HTTP ${refusal.status}${hint}`,
      raw: clipText(refusal.body ?? '', REASON_TEXT_LIMIT),
      generation,
      at,
    }
  }
  return {
    kind: 'rejected',
    retryable: row.retryable,
    cause: row.cause,
    phase: 'upgrade',
    status: refusal.status,
    errorCode,
    message,
    requestId,
    retryAfterMs,
    generation,
    at,
  }
}

/**
 * Join error reasons of the control channel (the phx_reply `{"status":"error","response":{"reason":...}}`)
 * and their causes. Unlisted reasons become `other`: retried with backoff, growing to the reconnect
 * policy's `maxDelayMs` (30 s by default). A refused join is not the server accepting and then
 * closing a socket, so it never counts toward the rapid-disconnect limit (machines/reconnect.ts
 * `isServerClose`): a server that refuses for ever is asked once per `maxDelayMs` for ever, or until
 * the policy's `maxAttempts`. `unmatched topic` is Phoenix's reply to a topic no
 * channel handles; `join crashed` its reply when the channel's join/3 raised.
 */
export const JOIN_ERRORS: Readonly<Record<string, Readonly<{ cause: RejectionCause; retryable: boolean }>>> = deepFreeze({
  unauthorized: { cause: 'unauthorized', retryable: false },
  forbidden: { cause: 'unauthorized', retryable: false },
  unauthenticated: { cause: 'unauthenticated', retryable: false },
  invalid_token: { cause: 'unauthenticated', retryable: false },
  invalid_api_key: { cause: 'unauthenticated', retryable: false },
  rate_limited: { cause: 'rate-limited', retryable: true },
  too_many_requests: { cause: 'rate-limited', retryable: true },
  quota_exceeded: { cause: 'quota-exceeded', retryable: false },
  'unmatched topic': { cause: 'protocol-error', retryable: false },
  'join crashed': { cause: 'unavailable', retryable: true },
})

/** Classifies a join error reply's `response` by {@link JOIN_ERRORS}. Never throws. */
export function classifyJoinError(response: unknown, generation: number, at: number): DisconnectReason {
  const record = response && typeof response === 'object' ? (response as Record<string, unknown>) : {}
  const reasonText = typeof record.reason === 'string' ? record.reason : null
  // Own keys only: a reason such as "constructor" is not a row of the table.
  const row = reasonText !== null && Object.hasOwn(JOIN_ERRORS, reasonText) ? JOIN_ERRORS[reasonText] : undefined
  if (!row) {
    return {
      kind: 'other',
      retryable: true,
      detail: `join refused with a reason the join table does not list: ${reasonText === null ? '(no reason)' : clipText(reasonText, REASON_TEXT_LIMIT)}`,
      raw: safeJson(response),
      generation,
      at,
    }
  }
  const retryAfterMs = retryAfterSecondsToMs(record.retry_after)
  return {
    kind: 'rejected',
    retryable: row.retryable,
    cause: row.cause,
    phase: 'join',
    status: null,
    errorCode: reasonText,
    message: typeof record.message === 'string' ? clipText(record.message, REASON_TEXT_LIMIT) : null,
    requestId: null,
    retryAfterMs,
    generation,
    at,
  }
}

/**
 * Classifies a `supersede` push. Always `superseded`, whatever the payload holds: a malformed
 * supersede is still the platform saying a newer session holds the key. Never throws.
 */
export function classifySupersede(payload: unknown, generation: number, at: number): DisconnectReason {
  const raw = supersedeRaw(payload)
  // Every field of SupersedePayload reads leniently (a wrong type is null), so an object always parses.
  const p = SupersedePayload.parse(raw)
  const retryAfterMs = retryAfterSecondsToMs(raw.retry_after)
  // Server text, cut between tokens (a token longer than the limit goes whole: it may be a
  // secret the server echoed): a megabyte `reason` must not become a megabyte log line.
  const text = (value: string | null | undefined) => {
    if (typeof value !== 'string') return null
    const clipped = clipText(value, REASON_TEXT_LIMIT)
    return clipped === '' && value !== '' ? null : clipped
  }
  return {
    kind: 'superseded',
    retryable: false,
    cause: text(p.reason) ?? 'unknown',
    message: text(p.message),
    retryAfterMs,
    targetSocketId: text(p.target_socket_id),
    correlationId: text(p.correlation_id),
    raw,
    generation,
    at,
  }
}

/** Bytes of a binary payload a reason's `raw` keeps (as base64). */
const RAW_BINARY_BYTES = 150

/**
 * A supersede payload as a reason's `raw` (a JSON object, as `SupersededReason.raw` says): an
 * object as it is; a binary frame's payload (an ArrayBuffer) as `{ binary, bytes }`, its first
 * {@link RAW_BINARY_BYTES} bytes in base64 and its length; anything else (an array, a string,
 * null) as `{ value }`.
 */
function supersedeRaw(payload: unknown): Record<string, unknown> {
  if (payload instanceof ArrayBuffer || ArrayBuffer.isView(payload)) {
    const bytes = payload instanceof ArrayBuffer ? new Uint8Array(payload) : new Uint8Array(payload.buffer, payload.byteOffset, payload.byteLength)
    return { binary: btoa(String.fromCharCode(...bytes.subarray(0, RAW_BINARY_BYTES))), bytes: bytes.byteLength }
  }
  return payload && typeof payload === 'object' && !Array.isArray(payload) ? (payload as Record<string, unknown>) : { value: payload }
}

/** Classifies phx_error or phx_close on the control channel: a session-level loss, retried. */
export function classifyControlChannelLoss(
  event: 'phx_error' | 'phx_close',
  payload: unknown,
  generation: number,
  at: number,
): DisconnectReason {
  const what = event === 'phx_error' ? 'the control channel crashed (phx_error)' : 'the server closed the control channel (phx_close)'
  const detail = payload && typeof payload === 'object' && Object.keys(payload).length > 0 ? `${what}: ${safeJson(payload)}` : what
  return { kind: 'dropped', retryable: true, source: 'channel', detail, generation, at }
}

/** Classifies an app channel's phx_close: the server ended it; the channel is dropped. */
export function classifyChannelClose(payload: unknown, generation: number, at: number): DisconnectReason {
  return {
    kind: 'dropped',
    retryable: true,
    source: 'channel',
    detail: `the server closed the channel (phx_close)${payload && typeof payload === 'object' && Object.keys(payload).length > 0 ? `: ${safeJson(payload)}` : ''}`,
    generation,
    at,
  }
}

/** The `timed-out(heartbeat)` reason of a heartbeat reply that never came. */
export function heartbeatTimeout(generation: number, at: number): DisconnectReason {
  return { kind: 'timed-out', retryable: true, phase: 'heartbeat', generation, at }
}

/** What a 414 or 431 upgrade refusal asks of the host, for {@link describeReason}. */
const TOO_LARGE_HINT = {
  414: 'the url with its socket params is too long for the server: shorten the params',
  431: 'a header is too large for the server: shorten it (an x-api-key, say), or send the key as a param',
} as const

/**
 * One line a person can read, for logs and the CLI. Never contains the API key (no reason holds
 * it), nor a raw line break or other control character: text the server chose (a close reason, a
 * supersede or refusal message, a detail) is written with such characters escaped as JSON writes
 * them (`\n`, `\u001b`), so a server cannot forge a log line or a terminal escape through it.
 * Never throws: a value that is not a {@link DisconnectReason} (null, `{}`, an unknown kind, a
 * missing field) gives `not a DisconnectReason: <why>`.
 *
 * @example describeReason(classifyClose({code: 1001, reason: ''}, 3, 0)) // 'closed 1001 (going away), will reconnect'
 */
export function describeReason(reason: DisconnectReason): string {
  try {
    return describeChecked(reason)
  } catch (error) {
    // A reason-like value whose fields cannot be read (a getter that throws, a revoked proxy).
    return oneLine(`not a DisconnectReason: a value that cannot be read (${clipText(error instanceof Error ? error.message : String(error), REASON_TEXT_LIMIT)})`)
  }
}

function describeChecked(reason: DisconnectReason): string {
  const checked = DisconnectReason.safeParse(reason)
  if (!checked.success) {
    const kind = reason !== null && typeof reason === 'object' && typeof (reason as { kind?: unknown }).kind === 'string' ? ` of kind ${JSON.stringify((reason as { kind: string }).kind)}` : ''
    const fields = [...new Set(checked.error.issues.map((i) => i.path.join('.')))].filter((f) => f !== '' && f !== 'kind')
    const why = fields.length === 0 ? 'no kind it knows' : `${fields.join(', ')} missing or of the wrong type`
    return oneLine(`not a DisconnectReason: ${reason === null || reason === undefined ? String(reason) : typeof reason === 'object' ? clipText(`an object${kind}, ${why}`, REASON_TEXT_LIMIT) : `a ${typeof reason}`}`)
  }
  return oneLine(lineOf(reason))
}

/** Control characters (C0, DEL, C1) and the two JavaScript line terminators JSON leaves raw. */
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g
const SHORT_ESCAPES: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' }

/** `text` with every control character escaped (`\n`, `\u001b`): one line whatever it holds. */
function oneLine(text: string): string {
  return text.replace(CONTROL, (c) => SHORT_ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

function lineOf(reason: DisconnectReason): string {
  const tail = reason.retryable ? 'will reconnect' : 'terminal'
  switch (reason.kind) {
    case 'graceful':
      return 'stopped by the host (disconnect)'
    case 'superseded':
      return `superseded by a newer session with the same key (${reason.cause}${reason.message ? `: ${reason.message}` : ''}), terminal`
    case 'rejected': {
      const where =
        reason.phase === 'upgrade'
          ? `upgrade HTTP ${reason.status}`
          : reason.phase === 'close'
            ? `close ${reason.closeCode}`
            : 'join error'
      const hint = reason.phase === 'upgrade' && (reason.status === 414 || reason.status === 431) ? ` (${TOO_LARGE_HINT[reason.status]})` : ''
      return `rejected (${reason.cause}) by ${where}${hint}${reason.errorCode ? ` ${reason.errorCode}` : ''}${reason.message ? `: ${reason.message}` : ''}${reason.retryAfterMs !== null ? `, retry after ${reason.retryAfterMs} ms` : ''}, ${tail}`
    }
    case 'closed':
      return `closed ${reason.closeCode} (${reason.closeName})${reason.closeReason ? ` "${reason.closeReason}"` : ''}, ${tail}`
    case 'dropped':
      return `dropped: ${reason.detail}, ${tail}`
    case 'timed-out':
      return `timed out waiting for the ${reason.phase === 'heartbeat' ? 'heartbeat reply' : reason.phase === 'join' ? 'control channel join reply' : 'transport to open'}, ${tail}`
    case 'suppressed': {
      const last = reason.lastLoss ? `, the last ${lineOf(reason.lastLoss).replace(/, (will reconnect|terminal)$/, '')}` : ''
      return reason.retryable
        ? `suspended after ${reason.attempts} attempts (${reason.cause}${last}): one attempt per cooldown, will reconnect`
        : `gave up after ${reason.attempts} attempts (${reason.cause}${last}), terminal`
    }
    case 'other':
      return `other: ${reason.detail}, ${tail}`
  }
}

function safeJson(value: unknown): string {
  try {
    const text = JSON.stringify(value)
    return clipText(text === undefined ? String(value) : text, REASON_TEXT_LIMIT)
  } catch (error) {
    // Nested too deep for JSON.stringify (a recursion limit, thousands of levels): said so, not `[object Object]`.
    if (value !== null && typeof value === 'object') return `(a payload JSON.stringify cannot write: ${clipText(error instanceof Error ? error.message : 'it threw', REASON_TEXT_LIMIT)})`
    return clipText(String(value), REASON_TEXT_LIMIT)
  }
}

/** Characters of server text a reason keeps (a refusal body, a payload's JSON). */
export const REASON_TEXT_LIMIT = 200

/**
 * Characters that may make up one token of text (an id, a key, a base64 or percent-encoded
 * value): visible ASCII, `!` to `~`, other than a delimiter. Any of them, not only letters, digits
 * and `- _ . ~ + / = % :`: a generated key may hold `!`, `@`, `#`, `$` or `&`, and a cut that kept
 * the part before such a character kept part of the key (changed 2026-12-06, found by a review).
 */
function isTokenChar(c: string): boolean {
  return c >= '!' && c <= '~' && !DELIMITER.test(c)
}

/** Characters that end a word of server text (whitespace, quotes, brackets, separators): a key or token holds none of them. */
const DELIMITER = /[\s"'`<>,;()[\]{}]/

/**
 * `text` cut to at most `limit` characters, never inside a word: when the cut would split one, it
 * ends after the last whitespace, quote, bracket or separator before it, if that is within the
 * last half of what is kept, else before the run of token characters (visible ASCII other than
 * quotes, brackets and separators) the cut split. Server text a reason keeps may echo a secret (an API key, a
 * token), and a key cut short would no longer be recognised, and redacted, where the reason is
 * written out (a log line, an error message); redaction never rewrites the reason itself.
 */
export function clipText(text: string, limit: number): string {
  if (text.length <= limit) return text
  const kept = wholeWordsOf(text.slice(0, limit), text[limit])
  // Never half a character: a cut between the two halves of an emoji drops the first.
  const last = kept.charCodeAt(kept.length - 1)
  return last >= 0xd800 && last <= 0xdbff ? kept.slice(0, -1) : kept
}

/**
 * Shortest last word of a text cut at an unknown point that is dropped (see {@link wholeWordsOf}):
 * the length from which redaction recognises a key's start (src/logger.ts SHORT_KEY); a shorter
 * piece tells little of a key, and dropping it would empty a body such as `abc`.
 */
const CUT_WORD_DROPPED_FROM = 8

/**
 * `text`, whose end was cut off, without the word the cut split (see {@link clipText}): whole when
 * `next`, the first character cut off, is a delimiter; `next` undefined when it is not known
 * (a body read up to a byte limit or a time), so the last word counts as split when it is
 * `CUT_WORD_DROPPED_FROM` (8) characters or longer.
 */
export function wholeWordsOf(text: string, next?: string): string {
  if (next !== undefined && DELIMITER.test(next)) return text
  if (next === undefined) {
    let start = text.length
    while (start > 0 && !DELIMITER.test(text[start - 1]!)) start--
    if (text.length - start < CUT_WORD_DROPPED_FROM) return text
  }
  // Back to the last delimiter, when it is near: a key holds none, so it goes whole.
  for (let end = text.length; end > 0 && text.length - end <= text.length / 2; end--) {
    if (DELIMITER.test(text[end - 1]!)) return text.slice(0, end)
  }
  // None near (the text may be one long token): before the run of token characters the cut split.
  let end = text.length
  while (end > 0 && isTokenChar(text[end - 1]!)) end--
  return text.slice(0, end)
}
