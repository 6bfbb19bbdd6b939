/**
 * Optional OpenTelemetry spans for a link, through `@opentelemetry/api` (an optional peer: pass
 * `trace.getTracer('my-agent')` as `createLink({ tracer })`; without one nothing here runs).
 * Typed structurally, so the package imports nothing from OpenTelemetry:
 *
 * - `phoenix_link.session`: from the host's connect() (a new session, `phoenix_link.epoch`) to
 *   the session's end: `stopped` (status unset), or `terminated` (status ERROR, the reason kind as
 *   its message). Each loss of a connected transport is a span event `phoenix_link.disconnected`.
 * - `phoenix_link.connect`: one per connection attempt, from `connecting` to the control
 *   channel's join (`connected`; status OK) or to the attempt's failure (status ERROR), with the
 *   transport generation, the reason's attributes (`phoenix_link.reason.*`: kind, close code or
 *   HTTP status, cause, phase, source, detail, ...), and what follows.
 *
 * Attribute names follow the OpenTelemetry convention of a namespace prefix; values are redacted
 * of the link's keys like every line the link writes. Built on the link's public events only.
 */
import type { LinkState } from '../machines/status.js'
import type { DisconnectReason } from './reasons.js'
import { settleReported } from './emitter.js'
import { ConfigurationError } from './errors/configuration-error.js'
import { describeArgument } from './call-checks.js'

/** An attribute value a span accepts (OpenTelemetry `AttributeValue`, scalars only here). */
export type SpanAttributeValue = string | number | boolean

/** What the link needs of an OpenTelemetry `Span`. */
export interface SpanLike {
  setAttribute(key: string, value: SpanAttributeValue): unknown
  /** `code`: 1 OK, 2 ERROR (OpenTelemetry `SpanStatusCode`). */
  setStatus(status: { code: number; message?: string }): unknown
  addEvent(name: string, attributes?: Record<string, SpanAttributeValue>): unknown
  end(): void
}

/** What the link needs of an OpenTelemetry `Tracer` (`trace.getTracer(name)` from `@opentelemetry/api`). */
export interface TracerLike {
  startSpan(name: string, options?: { attributes?: Record<string, SpanAttributeValue> }): SpanLike
}

/** OpenTelemetry `SpanStatusCode` values. */
const STATUS_OK = 1
const STATUS_ERROR = 2

/** The link events the spans are made from (a structural slice of `Link`, so this file needs no import of it). */
export interface TracedLink {
  readonly agentId: string
  /** The public state now: read when tracing starts, to join a session already under way. */
  readonly state: LinkState
  /** The session now (`Link.epoch`): read when tracing starts. */
  readonly epoch: number
  on(type: 'state', listener: (e: { state: LinkState; previous: LinkState; epoch: number }) => void): () => void
  on(type: 'connected' | 'reconnected', listener: (e: { generation: number; epoch: number }) => void): () => void
  on(
    type: 'disconnected',
    listener: (e: { reason: DisconnectReason; outcome: 'reconnect' | 'stopped' | 'terminated'; nextDelayMs: number | null }) => void,
  ): () => void
  redactOutput<T>(value: T): T
}

/**
 * Attributes of a reason (`phoenix_link.reason.*`): kind, retryable, and each of close_code,
 * http_status, cause, phase, source, error_code, retry_after_ms and detail the reason has (detail:
 * an `other` or `dropped` reason's text, which names what the tables did not know, such as an
 * upgrade refused with HTTP 404); for `suppressed`, attempts and the kind, close code and HTTP
 * status of its last loss (`phoenix_link.reason.last_loss.*`).
 */
function reasonAttributes(reason: DisconnectReason, prefix = 'phoenix_link.reason'): Record<string, SpanAttributeValue> {
  const out: Record<string, SpanAttributeValue> = { [`${prefix}.kind`]: reason.kind, [`${prefix}.retryable`]: reason.retryable }
  const fields = reason as Partial<Record<string, unknown>>
  const copy = (field: string, name: string, type: 'number' | 'string') => {
    if (typeof fields[field] === type) out[`${prefix}.${name}`] = fields[field] as SpanAttributeValue
  }
  copy('closeCode', 'close_code', 'number')
  copy('status', 'http_status', 'number')
  copy('cause', 'cause', 'string')
  copy('phase', 'phase', 'string')
  copy('source', 'source', 'string')
  copy('errorCode', 'error_code', 'string')
  copy('retryAfterMs', 'retry_after_ms', 'number')
  copy('detail', 'detail', 'string')
  copy('attempts', 'attempts', 'number')
  if (reason.kind === 'suppressed' && reason.lastLoss) {
    const last = reasonAttributes(reason.lastLoss, `${prefix}.last_loss`)
    for (const name of ['kind', 'close_code', 'http_status']) {
      const key = `${prefix}.last_loss.${name}`
      if (last[key] !== undefined) out[key] = last[key]
    }
  }
  return out
}

/** The states of a session under way: tracing started in one joins it. */
const IN_SESSION: ReadonlySet<LinkState> = new Set(['connecting', 'joining', 'connected', 'reconnecting', 'suspended', 'stopping'])

/**
 * Starts following `link` with spans on `tracer`; returns the function that stops following it
 * (ending any open span). Started while a session is under way (`link.state` connecting through
 * stopping), it opens that session's span at once, with the link's `epoch` and
 * `phoenix_link.traced_from` (the state it was in), and an attempt span when it starts in
 * `connecting` (an attempt that reached `joining` is not traced: that state is also a control
 * channel's rejoin); `phoenix_link.attempt` then counts the attempts traced. A throwing tracer is the host's
 * bug: the link's emitter catches and logs it, and the link runs on; so does a span method that
 * returns a promise which rejects (an async span), as the emitter reports a listener's rejected
 * promise. (One made by the returned stop function itself, which runs in no listener, is ignored.)
 *
 * @throws {ConfigurationError} (`INVALID_OPTIONS`) when `tracer` has no `startSpan` method.
 */
export function traceSpans(link: TracedLink, tracer: TracerLike): () => void {
  if (tracer === null || typeof tracer !== 'object' || typeof (tracer as { startSpan?: unknown }).startSpan !== 'function') {
    throw new ConfigurationError(`traceSpans: tracer must be an object with a startSpan method (an OpenTelemetry Tracer), got ${describeArgument(tracer)}`)
  }
  let session: SpanLike | null = null
  let attempt: SpanLike | null = null
  /**
   * What the span methods called by the listener now running returned that is a promise (a span
   * whose methods are async): the listener returns them, so the link's emitter reports their
   * rejection as it reports a throw, never as an unhandled rejection.
   */
  let pending: unknown[] = []
  const track = (result: unknown): void => {
    // OpenTelemetry's span methods return the span itself: only a thenable is waited on.
    if (((typeof result === 'object' && result !== null) || typeof result === 'function') && typeof (result as { then?: unknown }).then === 'function') pending.push(result)
  }
  /** `span` with every method's result tracked (see `pending`). */
  const tracked = (span: SpanLike): SpanLike => ({
    setAttribute: (key, value) => track(span.setAttribute(key, value)),
    setStatus: (status) => track(span.setStatus(status)),
    addEvent: (name, attributes) => track(span.addEvent(name, attributes)),
    end: () => track(span.end()),
  })
  /** `listener`, returning a promise of its span calls' promises when it made any (see `pending`). */
  const reported =
    <E>(listener: (event: E) => void) =>
    (event: E): Promise<unknown> | undefined => {
      pending = []
      try {
        listener(event)
      } catch (error) {
        // The throw is what the emitter reports; the promises made before it are settled here, so
        // none of them becomes an unhandled rejection.
        for (const made of pending) settleReported(made, () => {})
        pending = []
        throw error
      }
      const made = pending
      pending = []
      return made.length === 0 ? undefined : Promise.all(made)
    }
  /** The epoch of the open session span. */
  let epoch = 0
  let attempts = 0
  const redacted = (attributes: Record<string, SpanAttributeValue>) => link.redactOutput(attributes)
  /** Ends the open attempt; `code` null leaves its status unset (a host's own stop is not an error). */
  const endAttempt = (code: number | null, attributes: Record<string, SpanAttributeValue>, message?: string) => {
    if (!attempt) return
    for (const [key, value] of Object.entries(redacted(attributes))) attempt.setAttribute(key, value)
    if (code !== null) attempt.setStatus(message === undefined ? { code } : { code, message: link.redactOutput(message) })
    attempt.end()
    attempt = null
  }
  const attemptConnected = ({ generation }: { generation: number }) =>
    endAttempt(STATUS_OK, { 'phoenix_link.generation': generation, 'phoenix_link.outcome': 'connected' })
  const openSession = (sessionEpoch: number, tracedFrom: LinkState | null) => {
    epoch = sessionEpoch
    attempts = 0
    session = tracked(
      tracer.startSpan('phoenix_link.session', {
        attributes: redacted({ 'phoenix_link.agent_id': link.agentId, 'phoenix_link.epoch': epoch, ...(tracedFrom === null ? {} : { 'phoenix_link.traced_from': tracedFrom }) }),
      }),
    )
  }
  const openAttempt = () => {
    attempts++
    attempt = tracked(
      tracer.startSpan('phoenix_link.connect', {
        attributes: redacted({ 'phoenix_link.agent_id': link.agentId, 'phoenix_link.epoch': epoch, 'phoenix_link.attempt': attempts }),
      }),
    )
  }
  // A session already under way: its span from now, and the attempt in flight if one is surely
  // in flight (connecting). Not in `joining`, which is also a control channel rejoining on a
  // socket that stays up: no connected event ends that, so its span would stay open and the next
  // loss read as the attempt's failure.
  const now = link.state
  if (IN_SESSION.has(now)) {
    openSession(link.epoch, now)
    if (now === 'connecting') openAttempt()
  }
  const offs = [
    link.on(
      'state',
      reported(({ state, epoch: stateEpoch }: { state: LinkState; epoch: number }) => {
      if (state === 'connecting') {
        // A new session: the last one's span ended with it (stopped, terminated), or there was none.
        if (session === null) openSession(stateEpoch, null)
        openAttempt()
      }
      if ((state === 'stopped' || state === 'terminated') && session) {
        if (state === 'stopped') endAttempt(null, { 'phoenix_link.outcome': state })
        else endAttempt(STATUS_ERROR, { 'phoenix_link.outcome': state }, 'the session ended (terminated) during the attempt')
        session.setAttribute('phoenix_link.outcome', state)
        session.setAttribute('phoenix_link.attempts', attempts)
        session.end()
        session = null
      }
      }),
    ),
    link.on('connected', reported(attemptConnected)),
    link.on('reconnected', reported(attemptConnected)),
    link.on(
      'disconnected',
      reported(({ reason, outcome, nextDelayMs }: { reason: DisconnectReason; outcome: 'reconnect' | 'stopped' | 'terminated'; nextDelayMs: number | null }) => {
      const attributes: Record<string, SpanAttributeValue> = {
        ...reasonAttributes(reason),
        'phoenix_link.generation': reason.generation,
        'phoenix_link.outcome': outcome,
        ...(nextDelayMs === null ? {} : { 'phoenix_link.next_delay_ms': nextDelayMs }),
      }
      if (attempt) endAttempt(outcome === 'stopped' ? null : STATUS_ERROR, attributes, reason.kind)
      else session?.addEvent('phoenix_link.disconnected', redacted(attributes))
      if (outcome === 'terminated' && session) {
        for (const [key, value] of Object.entries(redacted(reasonAttributes(reason)))) session.setAttribute(key, value)
        session.setStatus({ code: STATUS_ERROR, message: reason.kind })
      }
      }),
    ),
  ]
  return () => {
    for (const off of offs) off()
    pending = []
    endAttempt(STATUS_ERROR, { 'phoenix_link.outcome': 'untraced' }, 'tracing stopped')
    session?.end()
    session = null
    // No listener runs to return these to the emitter: a span method's rejection here, after
    // tracing stopped, is the host's tracer failing at its own call, and is not raised.
    for (const made of pending) settleReported(made, () => {})
    pending = []
  }
}
