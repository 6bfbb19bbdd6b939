/**
 * What the charts share. The charts import nothing from src/ (data flows machines <- reasons
 * <- adapter <- link): they read the few fields of a reason they decide on, and the full zod
 * union lives in src/reasons.ts. test/unit/reasons.test.ts checks that every reason a chart
 * makes itself parses as a `DisconnectReason`.
 */

/**
 * The fields of a `DisconnectReason` (src/reasons.ts) that the charts read. The adapter
 * classifies socket and channel outcomes into full reasons before they reach a chart; the charts
 * keep the whole object and only look at these fields.
 */
export interface ReasonLike {
  /** Discriminant of the DisconnectReason union, e.g. `closed`, `superseded`, `rejected`. */
  readonly kind: string
  /** Whether a reconnect may follow. Decided by the classification tables of src/reasons.ts. */
  readonly retryable: boolean
  /** Transport generation the reason belongs to (0 before the first transport). */
  readonly generation: number
  /** When it happened, milliseconds since the Unix epoch, from the injected clock. */
  readonly at: number
  /** RFC 6455 section 7.4 close code, for `closed` reasons: the reconnect chart's floors read it. */
  readonly closeCode?: number
  /** Minimum wait before the next attempt in milliseconds (HTTP Retry-After, supersede retry_after). */
  readonly retryAfterMs?: number | null
  /** Why the platform refused, for `rejected` reasons (`conflict`, `unauthenticated`, ...): the connection chart reads `conflict`. */
  readonly cause?: string
  /** Where a `rejected` reason came from (`upgrade`, `join`, `close`) or which wait a `timed-out` one ran out. */
  readonly phase?: string
  /** What a `dropped` reason lost: the `socket` (no close frame) or a `channel` (phx_error/phx_close). */
  readonly source?: string
  /** The HTTP status of a refused upgrade (`rejected`, phase `upgrade`); null or absent otherwise. */
  readonly status?: number | null
  /** True on a `dropped` reason whose TCP connection was reset soon after the link sent (src/reasons.ts `DroppedReason.reset`): frames the server sent before it may be lost. */
  readonly reset?: boolean
}

/**
 * Whether a refused upgrade says the server holds no socket for it: any 4xx, and 503 (the
 * platform's own refusals are 400, 401, 403, 409, 429 and 503 `tracking_failed`, each answered in
 * `connect/3` instead of accepting: docs/field-notes.md, ../shared/real-phoenix `user_socket.ex`;
 * a gateway answers 503 when it has no upstream). Any other 5xx (500, 502, 504) may come from a
 * gateway after the server accepted the upgrade upstream, its 101 lost: the platform may hold that
 * socket. Used for our own conflict (a 409 within the window of a socket the server may hold).
 */
export function isRefusedUnaccepted(reason: ReasonLike): boolean {
  const status = reason.phase === 'upgrade' ? reason.status : null
  return typeof status === 'number' && ((status >= 400 && status < 500) || status === 503)
}

/**
 * Whether a refused upgrade is taken as having superseded nothing: a 4xx only. The platform answers
 * its 4xx (auth 401/403 and `on_conflict` 400/409 in `connect/3` before `Supersede.supersede_older`:
 * ../shared/real-phoenix `user_socket.ex`; the 429 of its supersede cooldown, answered to a
 * reconnect: ../shared/FIELD-NOTES.md) without superseding. Its 503 is `tracking_failed`
 * (FIELD-NOTES); the reference peer answers 503 only as a scripted refusal, first, but tracks a
 * socket after `supersede_older`, and whether the platform's tracking can fail after it superseded
 * is not known. So a 503 (and any other 5xx) proves nothing: read as "superseded nothing", and
 * wrong, it ends the link `superseded` with no other instance online, for good; read as unknown,
 * and wrong, the link probes (`on_conflict=reject`, evicting no one) and ends `superseded` after
 * `conflictRetryWindowMs` of 409s. Used for a supersede held on that upgrade and for the key claim.
 */
export function isRefusedBeforeSupersede(reason: ReasonLike): boolean {
  const status = reason.phase === 'upgrade' ? reason.status : null
  return typeof status === 'number' && status >= 400 && status < 500
}

/**
 * Time and randomness, injected so the charts stay pure: production passes `Date.now`,
 * `performance.now` and `Math.random`; tests pass their own. The charts never read a clock or a
 * random source of their own. Two clocks, because they answer different questions: the wall
 * clock says when (a stamp for a person), the monotonic clock how long (a decision). A wall clock
 * steps (NTP, a resumed VM, a waking laptop); a decision read from it would change with the step.
 */
export interface Env {
  /** Wall time, milliseconds since the Unix epoch. Only stamps `at` on reasons a chart makes; never measures anything. */
  now(): number
  /**
   * A monotonic clock in milliseconds (any origin; `performance.now()` by default). Every elapsed
   * time a chart decides on is read from it: the connection chart's conflict retry window (time
   * since the link last lost a connection). Chart delays (`after`) run on the actor's clock.
   */
  monotonic(): number
  /** A number in [0, 1), used for backoff jitter. */
  random(): number
}

/** Stamp of every adapter event: the transport generation and the session epoch it came from. */
export interface Origin {
  /** Transport generation: 1 for a link's first phoenix Socket, +1 for each later one. */
  readonly generation: number
  /** Session epoch: +1 each time the host starts a session with connect(). */
  readonly epoch: number
}

/**
 * What the connection chart's `openTransport` I/O action carries: the new transport's Origin, and
 * whether its upgrade is a conflict probe: it asks `on_conflict=reject` (the platform then answers
 * 409 `connection_conflict` instead of superseding another live socket of the agent:
 * docs/field-notes.md, the platform's socket params), while a supersede's cause is unknown.
 */
export interface TransportOpen extends Origin {
  readonly conflictProbe: boolean
}

/** A reason the connection chart makes when the host stops the session (`disconnect()`). */
export interface GracefulReason extends ReasonLike {
  readonly kind: 'graceful'
  readonly retryable: false
}

/** A reason a chart makes when one of its own delays runs out. */
export interface TimedOutReason extends ReasonLike {
  readonly kind: 'timed-out'
  readonly retryable: true
  /** Which wait ran out: the transport opening or the control channel join. */
  readonly phase: 'connect' | 'join'
}

/**
 * A reason the reconnect chart makes when it slows down (`retryable: true`: the link is
 * `suspended`, one attempt per cooldown) or, by policy only, gives up (`retryable: false`).
 */
export interface SuppressedReason extends ReasonLike {
  readonly kind: 'suppressed'
  /** True while suspended (the link keeps trying, slowly); false when the policy gave up. */
  readonly retryable: boolean
  /** Why: too many short-lived connections in a row, or the attempt limit. */
  readonly cause: 'rapid-disconnects' | 'max-attempts'
  /** Consecutive losses counted. */
  readonly attempts: number
  /**
   * The loss that reached the limit (the last of the rapid losses, or the loss past `maxAttempts`),
   * as the reconnect chart was told of it: the host is told `suppressed` instead of that loss, so
   * its close code, status or detail are kept here.
   */
  readonly lastLoss: ReasonLike
}

/**
 * The close codes a Phoenix endpoint sends when it ends a socket with a "disconnect" broadcast, as
 * the platform ends a superseded one: 1011 on Bandit, 1000 on Cowboy, 1001 on Phoenix 1.8.8+
 * (docs/field-notes.md, "Close codes a real server sends"). A close with another code (a drain's
 * 1012, a 1009 the link itself sent for an oversize frame) is not a supersede's.
 */
export const DISCONNECT_CLOSE_CODES: readonly number[] = Object.freeze([1000, 1001, 1011])

/**
 * The `cause` of a `superseded` reason the link inferred rather than read: a socket lost before its
 * control channel joined (no supersede can be pushed there), then conflict probes refused 409 past
 * the window (another instance holds the key).
 */
export const UNSEEN_SUPERSEDE_CAUSE = 'unseen'

/** A `superseded` reason no supersede push carried (its payload fields null, `raw` empty): see {@link UNSEEN_SUPERSEDE_CAUSE}. */
export interface UnseenSupersedeReason extends ReasonLike {
  readonly kind: 'superseded'
  readonly retryable: false
  readonly cause: typeof UNSEEN_SUPERSEDE_CAUSE
  readonly message: string
  readonly retryAfterMs: null
  readonly targetSocketId: null
  readonly correlationId: null
  readonly raw: Record<string, never>
}

/** How the message of an unseen supersede raised by a reset begins ({@link isResetUnseen}). */
const RESET_UNSEEN = "the socket's connection was reset (dropped)"

/** Whether `reason` is an unseen supersede raised by a reset of the socket (not by a close): its report says so. */
export function isResetUnseen(reason: ReasonLike & { message?: unknown }): boolean {
  return reason.cause === UNSEEN_SUPERSEDE_CAUSE && typeof reason.message === 'string' && reason.message.startsWith(RESET_UNSEEN)
}

/**
 * Makes the reason a session ends with when a socket of `generation`, closed by the server with
 * `loss` before its control channel joined or just after (or reset at any time), turns out to have been superseded
 * (conflict probes refused 409 past the window). `at` is wall time (env.now) of the close.
 */
export function unseenSupersedeReason(loss: ReasonLike, generation: number, at: number): UnseenSupersedeReason {
  const code = typeof loss.closeCode === 'number' ? ` ${loss.closeCode}` : ''
  const where =
    loss.reset === true
      ? `${RESET_UNSEEN}, which loses the frames the server sent that were not yet read, a supersede push among them`
      : `the server closed the socket (${loss.kind}${code}) before its control channel joined or just after, where the platform may not have pushed a supersede`
  return {
    kind: 'superseded',
    retryable: false,
    cause: UNSEEN_SUPERSEDE_CAUSE,
    message: `${where}, and connections made with on_conflict=reject were then refused 409 past the conflict window: another instance holds the key${loss.reset === true ? ", or the server still holds this link's own socket (a reset made by a middlebox, not by the server)" : ''}`,
    retryAfterMs: null,
    targetSocketId: null,
    correlationId: null,
    raw: {},
    generation,
    at,
  }
}

/** Makes the `graceful` reason of a host stop. */
export function gracefulReason(generation: number, at: number): GracefulReason {
  return { kind: 'graceful', retryable: false, generation, at }
}

/** Makes the `timed-out` reason of a chart delay that ran out. */
export function timedOutReason(phase: TimedOutReason['phase'], generation: number, at: number): TimedOutReason {
  return { kind: 'timed-out', phase, retryable: true, generation, at }
}

/**
 * Makes the `suppressed` reason of a reconnect slow-down (`retryable: true`) or give-up
 * (`retryable: false`) after `attempts` consecutive losses, the last of them `lastLoss` (whose
 * transport generation the reason takes); `at` is wall time (env.now).
 */
export function suppressedReason(
  cause: SuppressedReason['cause'],
  attempts: number,
  lastLoss: ReasonLike,
  at: number,
  retryable = false,
): SuppressedReason {
  return { kind: 'suppressed', cause, attempts, retryable, lastLoss, generation: lastLoss.generation, at }
}

/**
 * The longest delay a timer can take, in milliseconds (2^31-1, about 24.8 days): Node and browsers
 * run a longer `setTimeout` after 1 ms (Node prints TimeoutOverflowWarning; HTML timers clamp the
 * same signed 32-bit range), so every delay a chart computes is capped here.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1

/**
 * The most fields a chart's context may have and stay an object with fast properties in V8 when
 * XState copies it on every assign (`Object.assign({}, context, update)`, xstate's resolveAssign):
 * 19 on Node 20's V8 11.3, measured 2026-12-05 (`%HasFastProperties` after such copies: 19 fields
 * stay fast, 20 and more make every copy a dictionary, about 2.5 times the size and every read a
 * hash lookup). Every chart's context keeps within it (test/machines/context-shape.test.ts, which
 * also checks the figure against the V8 it runs on).
 */
export const MAX_CONTEXT_FIELDS = 19

/**
 * An exponential ceiling, in milliseconds: `initial * factor^(n)` capped at `max` and at
 * {@link MAX_TIMER_MS}. An `initial` of 0 gives 0 at every `n` (where `0 * Infinity` would give
 * NaN once `factor^n` overflows).
 */
export function exponentialCeiling(initial: number, factor: number, n: number, max: number): number {
  if (initial <= 0) return 0
  return Math.min(max, MAX_TIMER_MS, initial * factor ** Math.max(0, n))
}

/**
 * Throws when a policy number is not a whole number of milliseconds in [0, 2^31-1], or is below
 * `min` (a wait of 0 that could never be met, say). Strict at configuration: a misconfigured
 * policy fails at createLink(), not hours later in a timer.
 *
 * @throws {RangeError} naming the field and the value it got.
 */
export function assertMs(name: string, value: unknown, min = 0): asserts value is number {
  // Number.isInteger is false for anything that is not a number.
  if (!Number.isInteger(value) || (value as number) < 0 || (value as number) > MAX_TIMER_MS) {
    throw new RangeError(`${name} must be a whole number of ${name.endsWith('Bytes') ? 'bytes' : 'milliseconds'} in [0, 2^31-1], got ${String(value)}`)
  }
  if ((value as number) < min) throw new RangeError(`${name} must be at least ${min}, got ${value}`)
}

/**
 * The text of what an actor threw, for the detail of an `other` reason: its `message` when it has
 * a string one (an Error of any realm, or a plain object), else the value as `String()` makes it.
 * Never throws: a value that cannot be made text (a null-prototype object, a `toString` or a
 * `message` getter that throws) reads `an unprintable <type>`.
 */
export function thrownText(error: unknown): string {
  try {
    const message = (error as { message?: unknown } | null | undefined)?.message
    if (typeof message === 'string') return message
  } catch {
    // a message getter that throws: fall through to the value itself
  }
  try {
    return String(error)
  } catch {
    // (String() never throws for null or undefined: only an object or a function gets here.)
    return `an unprintable ${typeof error}`
  }
}

/**
 * The first `end` code units of `text` (all of it by default) as a string of their own: a
 * `slice()` of a long string is, in V8, a sliced string that keeps the whole original alive
 * (measured: a 2,000-character cut of a 1 MB frame kept the megabyte). Never ends inside a
 * surrogate pair (a cut there drops its first half). Linear in `end`.
 */
export function copyText(text: string, end = text.length): string {
  let stop = Math.min(end, text.length)
  const last = text.charCodeAt(stop - 1)
  if (stop < text.length && last >= 0xd800 && last <= 0xdbff) stop--
  let copy = ''
  for (let at = 0; at < stop; at += 4096) {
    const codes: number[] = []
    for (let i = at; i < Math.min(stop, at + 4096); i++) codes.push(text.charCodeAt(i))
    copy += String.fromCharCode(...codes)
  }
  return copy
}
