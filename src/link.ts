/**
 * The host API: `createLink()` gives an agent one long-lived, self-healing connection to its
 * platform. The connection chart decides every lifecycle step; the link turns the host's calls
 * into chart events, waits on the chart's states, and publishes what happened as typed events.
 */
import type { CarriedDoubt, ConnectionEmitted, ConnectionEvent } from '../machines/connection.js'
import type { QueuedSignal } from '../machines/control.js'
import { LINK_STATES, linkStateOf, type ChartStateValue, type LinkState } from '../machines/status.js'
import { gracefulReason, thrownText, type Env } from '../machines/types.js'
import { deepFreeze } from './freeze.js'
import { abortError, checkSignal, isAbortSignal, onAbort } from './abort.js'
import { callOptions, checkFunction, describeArgument, isCallTimeout, unknownKey } from './call-checks.js'
import { PhoenixAdapter, quoteServerText, type AdapterConfig, type Credentials, type TransportPolicy } from './adapter/phoenix-adapter.js'
import { REAL_CLOCK, type Clock } from './runtime/clock.js'
import { LinkCharts, type LinkChartsHost } from './runtime/link-charts.js'
import { RunningChart } from './runtime/chart-runner.js'
import { isHeaderValue, SUPPORTS_UPGRADE_HEADERS } from './adapter/ws-transport.js'
import { Emitter, settleReported, type Unsubscribe } from './emitter.js'
import { AgentDisconnectedError } from './errors/agent-disconnected.js'
import { ConfigurationError } from './errors/configuration-error.js'
import { PhoenixLinkError } from './errors/base.js'
import { LinkChannel, type ChannelHost, type ChannelStatus } from './link-channel.js'
import { redact, redacting, type LinkLog, type Logger } from './logger.js'
import { checkOptions } from './options.js'
import { RunSupervisor, runProblem, type RunOptions } from './runs.js'
import { resolvePolicy, type LinkPolicy, type LinkPolicyInput } from './policy.js'
import { controlTopic, HEARTBEAT_TOPIC, hasLoneSurrogate, LONE_SURROGATE_MESSAGE, notJsonMap, utf8Length, type ControlSignal, type Payload } from './protocol.js'
import { describeReason, type DisconnectReason } from './reasons.js'
import { traceSpans, type TracerLike } from './tracing.js'

export type { Clock } from './runtime/clock.js'

/**
 * A host's handler of control signals; the next signal waits until the returned promise settles.
 * `delivery.signal` aborts when the link stops waiting for this handler (a new session started
 * while it still ran); `epoch` is the session the signal arrived in.
 */
export type ControlHandler = (
  signal: ControlSignal,
  delivery: { epoch: number; sequence: number; signal: AbortSignal },
) => void | Promise<void>

declare global {
  interface SymbolConstructor {
    /**
     * `Symbol.asyncDispose` (TC39 explicit resource management; TypeScript's lib.esnext.disposable
     * and @types/node declare it the same way). Restated so {@link Link}'s `[Symbol.asyncDispose]`
     * compiles in a consumer whose `lib` stops at ES2022 with the DOM; at run time the link defines
     * the method only where the runtime has the symbol (Node 20, current browsers).
     */
    readonly asyncDispose: unique symbol
  }
}

/** A state change as the link's internal waiters see it. */
interface StateSeen {
  state: LinkState
  generation: number
  epoch: number
}

/** Options of {@link createLink}. */
export interface LinkOptions {
  /**
   * Socket endpoint without `/websocket`, e.g. `wss://platform.example/socket`. `ws://` only to
   * a loopback host unless `allowInsecureTransport` is set.
   */
  url: string
  /** The agent's id: the `agent_id` socket param and the control topic `agent_control:<id>`. */
  agentId: string
  /**
   * The agent's API key, or a function that gives the key of each connection attempt (sync or
   * async; called with `{ generation, signal }` just before the attempt opens, so a key rotated
   * during a week-long session is used on the next reconnect). A throw, a rejection, an empty
   * key, or no answer within `transport.credentialsTimeoutMs` fails that attempt with a retryable
   * `other` reason. Every key the link has used (the last 1,000: a key rotated hourly for six
   * weeks) is redacted from what it writes (logs, error messages, traces, inspection events, and
   * the snapshots an inspector reads of the charts they name); values handed to your code are
   * never rewritten.
   */
  apiKey: string | ((attempt: AttemptInfo) => string | Promise<string>)
  /** Policy overrides, by concern; see `DEFAULT_LINK_POLICY`. */
  policy?: LinkPolicyInput | undefined
  /** Where the link logs its transitions; default silent. Every line is redacted of the API key. */
  logger?: Logger | undefined
  /**
   * An OpenTelemetry tracer (`trace.getTracer('my-agent')` from `@opentelemetry/api`, an optional
   * peer): spans `phoenix_link.session` and one `phoenix_link.connect` per attempt (src/tracing.ts).
   */
  tracer?: TracerLike | undefined
  /**
   * An XState inspection observer (or @statelyai/inspect's `inspector.inspect`), passed to the
   * chart actor: a function of each event, or an object with `next(event)`.
   */
  inspect?: InspectListener | { next?: InspectListener | undefined } | undefined
  /** Handler of `agent.control` signals, called once per signal, in order, one at a time. */
  onControl?: ControlHandler | undefined
  /**
   * How the API key is sent: the `x-api-key` upgrade header (default in Node; keeps it out of
   * URLs and proxy logs) or the `api_key` socket param (the only way in browsers).
   */
  apiKeyIn?: 'header' | 'param' | undefined
  /** `reject`: a second same-key socket is refused with HTTP 409 instead of superseding this one. */
  onConflict?: 'supersede' | 'reject' | undefined
  /**
   * A supersede of unknown cause that another link of this agent left undecided
   * ({@link Link.supersedeDoubt} of the link this one replaces, read once it has ended): this
   * link's first attempts are conflict probes (`on_conflict=reject`) until the doubt is decided,
   * as the next session of that link would have made them (docs/rules.md, "Supersede is
   * terminal"). A host that rebuilds its link (after a terminal reason, to change its options)
   * passes it on, so the new link never evicts the instance that may hold the key. `sinceMs` is
   * on the monotonic clock both links read (`env.monotonic`; the process's `performance.now()` by
   * default), so the doubt does not outlive the process. @default null (no doubt)
   */
  supersedeDoubt?: SupersedeDoubt | null | undefined
  /** Extra socket params, or a function giving them for each attempt (sync or async, like `apiKey`). */
  params?: Record<string, string> | ((attempt: AttemptInfo) => Record<string, string> | Promise<Record<string, string>>) | undefined
  /** Allow `ws://` (no TLS) to a host that is not loopback. @default false */
  allowInsecureTransport?: boolean | undefined
  /**
   * Clocks and random source; tests pass their own, any part of them. `now`: wall time (ms since
   * the epoch), only for stamps (the `at` of reasons and of run abort reports); `monotonic`: ms
   * on a clock that never steps, for every elapsed time the link decides on or reports (the own-conflict window,
   * `reconnected.downtimeMs`); `random`: [0, 1) for jitter (a draw outside it is read as a throw:
   * the reconnect chart's crash, terminated with reason `other`). A `now` or `monotonic` reading
   * that is not a finite number (NaN, a string) is logged once and replaced by the process's own
   * clock (`Date.now()`, `performance.now()`).
   * @default { now: Date.now, monotonic: performance.now, random: Math.random }
   */
  env?: Partial<Env> | undefined
  /**
   * The scheduler of the charts' delays (backoff, rapid and stable windows, connect/join/leave
   * timeouts): an XState `Clock` such as `new SimulatedClock()`, so a test advances chart time by
   * hand while the sockets stay real. phoenix.js's own timers (heartbeat, push replies) are not
   * affected. A `now()` that reads no finite number is read as a throw where a delay is
   * scheduled (that chart's crash, state terminated, reason `other` naming it), not as a due time
   * every delay has passed. @default real timers
   */
  clock?: Clock | undefined
  /**
   * The runs of {@link Link.runSignal}: `hookTimeoutMs` is the longest wait, in milliseconds, for
   * a run's `onAbort` hook to settle once the session ends (a hook still pending then is reported
   * `failed`); {@link Link.disconnect} waits for those hooks. A whole number in [0, 2^31-1].
   * @default { hookTimeoutMs: 5000 }
   */
  runs?: { hookTimeoutMs?: number | undefined } | undefined
}

/**
 * A supersede whose cause a link could not know, and that no attempt has decided yet: a
 * `supersede` read on a socket the link's own next upgrade may have caused the platform to
 * supersede, or a loss that may have hidden one (a server's close right around the control join,
 * a reset of the connection). While a link holds one, its upgrades ask `on_conflict=reject`
 * (docs/rules.md, "Supersede is terminal"): an accepted one decides that no other instance holds
 * the key; one refused 409 past `connection.conflictRetryWindowMs` decides that one does, and the
 * link ends `superseded`.
 */
export interface SupersedeDoubt {
  /** The agent whose key the doubt is about: a link of another agent refuses it. */
  readonly agentId: string
  /**
   * What raised it: a `superseded` reason (its `cause` `unseen` when no push was read: a close or
   * a reset that may have hidden one). A link that a probe's 409 ends reports it as it is: its
   * `generation` and `at` are those of the link that raised it.
   */
  readonly reason: Extract<DisconnectReason, { kind: 'superseded' }>
  /** When it arose, in milliseconds on the link's monotonic clock (`env.monotonic`). */
  readonly sinceMs: number
  /**
   * When the link last lost a socket the server may still hold (one it accepted, or an upgrade
   * that had no answer), in milliseconds on `env.monotonic`; null if none. A 409 within
   * `connection.conflictRetryWindowMs` of it, or of `sinceMs`, may be the platform still holding
   * that socket: the link that gets the doubt retries it, as the one that lost the socket would.
   */
  readonly socketLostMs: number | null
}

/**
 * What an `apiKey`, `params` or channel params function is told about the attempt it answers for.
 * `signal` aborts when the attempt is given up (its wait timed out, the host stopped the link).
 */
export interface AttemptInfo {
  /** The transport generation the socket params are for (a channel join's transport, for channel params); 0 when not known. */
  generation: number
  /**
   * Aborted when the link gives the attempt up: with `Error('timed out after <ms> ms')` as its
   * reason when the function did not settle within `transport.credentialsTimeoutMs`, with an
   * `AbortError` when the attempt ended otherwise (the link stopped, the transport or the channel
   * ended). Made when first read: read after the abort, it is already aborted, with that reason.
   */
  signal: AbortSignal
}

/** The fields of a reason a `disconnected` log line carries, when the reason has them (src/reasons.ts). */
const REASON_LOG_FIELDS = ['closeCode', 'closeName', 'status', 'cause', 'phase', 'source', 'errorCode', 'retryAfterMs', 'requestId', 'correlationId'] as const

/** Clocks and random source of a link given no `env`: shared by every such link. */
const DEFAULT_ENV: Env = Object.freeze({
  now: () => Date.now(),
  monotonic: () => performance.now(),
  random: () => Math.random(),
})

/** What a clock reading `t` is when it is not a finite number of milliseconds (`NaN`, `Infinity`, `string`, `undefined`); null when it is one. */
function badReading(t: unknown): string | null {
  if (typeof t === 'number') return Number.isFinite(t) ? null : String(t)
  return typeof t
}

/** `read`, each reading checked to be a finite number of milliseconds: one that is not throws a RangeError naming `name`. */
function finiteReading(name: string, read: () => number): () => number {
  return () => {
    const t: unknown = read()
    const bad = badReading(t)
    if (bad !== null) throw new RangeError(`${name}() must return a finite number of milliseconds, got ${bad}`)
    return t as number
  }
}

/**
 * The host's `clock`, each `now()` reading checked to be a finite number of milliseconds: one
 * that is not (NaN, an infinity, not a number at all) throws a RangeError naming it, where a
 * throwing `now` would throw (scheduling a chart's delay: that chart's crash, state terminated,
 * reason `other`), instead of a due time of NaN, which every delay reads as passed.
 */
function finiteClock(clock: Clock): Clock {
  return {
    setTimeout: (fn, timeout) => clock.setTimeout(fn, timeout),
    clearTimeout: (id) => clock.clearTimeout(id),
    now: finiteReading('clock.now', () => clock.now()),
  }
}

/**
 * The host's `env.random`, each draw checked to lie in [0, 1): one outside it (NaN, a negative or
 * a too-large number, not a number at all) throws a RangeError naming it, where a throwing
 * `random` would throw: in the reconnect chart's backoff, that chart's crash (state terminated,
 * reason `other`), instead of a delay of NaN or past `maxDelayMs`.
 */
function inUnitRange(random: () => number): () => number {
  return () => {
    const r: unknown = random()
    if (typeof r === 'number' && r >= 0 && r < 1) return r
    throw new RangeError(`env.random() must return a number in [0, 1), got ${typeof r === 'number' ? String(r) : `a ${r === null ? 'null' : typeof r}`}`)
  }
}

/** Most keys a link remembers for redaction: a key rotated hourly for six weeks. */
const MAX_REMEMBERED_KEYS = 1000

/** The link's events, by name. */
export interface LinkEvents {
  /** The public state changed; `epoch` is the session it changed in (see {@link Link.epoch}). */
  state: { state: LinkState; previous: LinkState; epoch: number }
  /** The session's first connect: the control channel is joined. */
  connected: { generation: number; epoch: number }
  /** A later connect of the same session, after a loss; `downtimeMs` since the loss. */
  reconnected: { generation: number; epoch: number; downtimeMs: number }
  /**
   * A transport or the session ended. `outcome` says what follows: `reconnect` after
   * `nextDelayMs`, `stopped` (the host's disconnect()), or `terminated` (a terminal reason:
   * superseded, rejected, suppressed). `terminal` is `outcome === 'terminated'`: alert on it.
   * `conflictProbe`: the next upgrade (of this session, or of the next `connect()` after a stop)
   * asks the platform `on_conflict=reject`, because another instance may hold the key: a supersede
   * whose cause is unknown is not decided yet, or this close may hide one (the server closed the
   * socket before its control channel joined, or within `connection.unseenSupersedeWindowMs` of
   * the join: the platform pushes `supersede` only through a joined control channel). Accepted,
   * the link goes on and reports the doubt settled (`ignored`); refused 409, the session ends
   * `superseded`. It says what was decided at this loss: a supersede read later, during the
   * backoff, on a socket already given up, can still make the next upgrade a probe, and is
   * reported when the probe is answered. See "Supersede is terminal" in docs/rules.md.
   */
  disconnected: {
    reason: DisconnectReason
    outcome: 'reconnect' | 'stopped' | 'terminated'
    nextDelayMs: number | null
    attempt: number | null
    terminal: boolean
    conflictProbe: boolean
  }
  /** A control signal is being handed to the handler (`sequence` counts arrivals; `epoch` is its session). */
  control: { signal: ControlSignal; sequence: number; epoch: number }
  /** An app channel's status changed. */
  channel: { topic: string; status: ChannelStatus; reason: DisconnectReason | null }
  /** Something arrived that changed nothing: a stale or late event, a malformed frame, an unhandled message. */
  ignored: { event: string; detail: string }
}

/** The name of every {@link LinkEvents} event, as on(), once() and off() accept them. */
export const LINK_EVENT_TYPES = Object.freeze(['state', 'connected', 'reconnected', 'disconnected', 'control', 'channel', 'ignored'] as const) satisfies ReadonlyArray<keyof LinkEvents>
// Every event of LinkEvents is listed (a compile error names one left out).
const everyEventListed: Exclude<keyof LinkEvents, (typeof LINK_EVENT_TYPES)[number]> extends never ? true : never = true
void everyEventListed

/** Throws unless `type` names a link event: a misspelt name would register a listener that never runs. */
function checkEventType(type: unknown, where: string): void {
  if (!(LINK_EVENT_TYPES as readonly unknown[]).includes(type)) {
    throw new ConfigurationError(`${where}: ${describeArgument(type)} is not a link event; use one of ${LINK_EVENT_TYPES.join(', ')}`)
  }
}

/**
 * An XState inspection event as the link passes it to `inspect` (xstate's `InspectionEvent`:
 * `@xstate.actor`, `@xstate.event`, `@xstate.snapshot`, `@xstate.microstep`, `@xstate.action`), restated loosely so
 * the package's public types import no XState (a DOM-only or strict consumer compiles them
 * without XState's own declarations). `actorRef` and `sourceRef` are read-only views of the
 * charts (`id`, `sessionId`, `logic`, `_parent`, `getSnapshot()`: what an inspector such as
 * @statelyai/inspect reads), their snapshots redacted; one view per chart, not the chart itself,
 * and nothing can be sent to them. Everything is redacted of every key the link used.
 */
export interface ChartInspectionEvent {
  readonly type: string
  readonly rootId?: string
  readonly actorRef?: unknown
  readonly sourceRef?: unknown
  readonly event?: unknown
  readonly snapshot?: unknown
}

/** A listener of inspection events; declared as a method so a listener typed with xstate's own `InspectionEvent` is accepted. */
export type InspectListener = { bivarianceHack(event: ChartInspectionEvent): void }['bivarianceHack']

/** A snapshot of the connection chart, as {@link ChartActor} gives it. */
export interface ChartSnapshot {
  /** The chart's state value, e.g. `{ session: { online: 'connecting' } }`. */
  readonly value: ChartStateValue
  /** The chart's context (machines/connection.ts `ConnectionContext`). */
  readonly context: object
  readonly status: 'active' | 'done' | 'error' | 'stopped'
}

/**
 * The connection chart's actor as a host sees it: read-only inspection. (Tools in this
 * repository reach the full XState actor; a host sends it nothing.)
 */
export interface ChartActor {
  readonly id: string
  readonly sessionId: string
  getSnapshot(): ChartSnapshot
  /** Calls `listener` with every new snapshot until unsubscribed. */
  subscribe(listener: (snapshot: ChartSnapshot) => void): { unsubscribe(): void }
}

/**
 * A chart as an inspection event names it to the host's `inspect` observer: what an inspector
 * reads of an XState actor (`id`, `sessionId`, `logic`, `_parent`, `getSnapshot()`), the snapshots
 * redacted of every key the link used, as everything else the observer gets. (An inspector is
 * output: a snapshot's context may hold server text echoing a key.)
 */
class InspectedChart {
  constructor(
    private readonly chart: RunningChart,
    /** The view of the chart that started this one; null for the connection chart. */
    readonly _parent: InspectedChart | null,
    private readonly redact: <T>(value: T) => T,
  ) {}

  /** The chart's id, e.g. `channel:<topic>`, redacted (a topic may hold a key). */
  get id(): string {
    return this.redact(this.chart.id)
  }

  get sessionId(): string {
    return this.chart.sessionId
  }

  /** The chart's definition (states, transitions, delays): it holds no server text. */
  get logic(): unknown {
    return this.chart.logic
  }

  /** The chart's current snapshot, redacted. */
  getSnapshot(): unknown {
    return this.redact(this.chart.getSnapshot())
  }
}

/** What {@link Link.ping} waits for by default: 5 s, far below a heartbeat's own bound (two 30 s intervals). */
export const DEFAULT_PING_TIMEOUT_MS = 5_000

/** The options {@link Link.ping} takes. */
const PING_OPTIONS: ReadonlySet<string> = new Set(['timeoutMs'])

/**
 * How a {@link Link.ping} ended:
 * - `alive`: the server answered the heartbeat on socket `generation`; `rttMs` is the time from
 *   the call to the reply (ms, on the link's `env.monotonic`).
 * - `lost`: the socket was lost before an answer came: no reply within the ping's `timeoutMs`
 *   (`reason` is then `timed-out(heartbeat)`), or any other loss, or a disconnect(), on the way.
 *   `reason` and `outcome` are those of the `disconnected` event that reported it (`outcome`
 *   `reconnect`: the link is already on its way to the next socket).
 * - `not-connected`: there was no open socket to check (`state` is the link's state at the call:
 *   idle, connecting, reconnecting, suspended, stopping, stopped or terminated); nothing was sent.
 *   While the link waits out a backoff, {@link Link.reconnect} is the call that retries now.
 */
export type PingResult =
  | { outcome: 'alive'; rttMs: number; generation: number }
  | { outcome: 'lost'; reason: DisconnectReason; disconnected: LinkEvents['disconnected']['outcome']; generation: number }
  | { outcome: 'not-connected'; state: LinkState }

/** One event of {@link Link.events}: `{ type, ...payload }`. */
export type LinkEvent = { [K in keyof LinkEvents]: { type: K } & LinkEvents[K] }[keyof LinkEvents]

/**
 * A loopback host as the WHATWG URL parser writes a URL's hostname (it has checked and
 * normalized the address): `localhost`, an IPv4 address in 127.0.0.0/8, `[::1]`, or a 127.0.0.0/8
 * address IPv4-mapped into IPv6 (RFC 4291 section 2.5.5.2), which the parser writes in hex
 * (`[::ffff:127.0.0.1]` becomes `[::ffff:7f00:1]`).
 */
const LOOPBACK = /^(localhost|127(?:\.\d{1,3}){3}|\[::1\]|\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\])$/i

/**
 * Creates a link. Nothing connects until `connect()` or `runForever()`.
 *
 * @example
 * const link = createLink({ url: 'wss://platform.example/socket', agentId, apiKey, onControl })
 * link.on('disconnected', ({ reason, nextDelayMs }) => log(reason.kind, nextDelayMs))
 * await link.runForever({ signal })   // rejects AgentDisconnectedError on a terminal reason
 * @throws {ConfigurationError} for a missing agent id or key, a bad URL (including an empty
 *   `?` or `#`), plain ws:// to a non-loopback host, a key an HTTP header cannot carry sent as
 *   the `x-api-key` header, `apiKeyIn: 'header'` where the WebSocket cannot send headers (a
 *   browser), or a policy field out of range.
 */
export function createLink(options: LinkOptions): Link {
  return new Link(options)
}

/** A long-lived connection of one agent; see {@link createLink}. */
export class Link {
  /** The link's charts and their runtime (src/runtime/link-charts.ts), for this package's own tools (src/chart-of.ts). */
  private readonly charts: LinkCharts
  /** The resolved policy. */
  readonly policy: LinkPolicy
  /**
   * The link's run supervisor: the runs of {@link Link.runSignal}, aborted together when the
   * session ends (terminated, or stopped by disconnect()). `link.runs.onAborted(fn)` hears each abort.
   */
  get runs(): RunSupervisor {
    return (this.#runs ??= new RunSupervisor({ hookTimeoutMs: this.#hookTimeoutMs, now: this.env.now }))
  }
  /** Made at the first use of runs or runSignal(): until then there is no run to abort and nobody to tell. */
  #runs: RunSupervisor | null = null
  /** `runs.hookTimeoutMs` of the options, checked; undefined for the supervisor's default. */
  readonly #hookTimeoutMs: number | undefined
  /** Abort rounds of ended sessions (any session of this link) whose hooks have not all settled: disconnect() waits for them. Null while none (an idle link keeps no set). */
  #abortRounds: Set<Promise<unknown>> | null = null
  /** Above 0 while a run's onAbort hook is being called: a disconnect() from it waits for no abort round (its own among them). */
  #inHook = 0
  readonly #agentId: string
  #nextRun = 1
  /** Every API key this link has used, oldest first: redacted from everything the link writes. */
  readonly #keys: string[]

  private readonly emitter: Emitter<LinkEvents>
  readonly #adapter: PhoenixAdapter
  private readonly log: LinkLog
  private readonly channels = new Map<string, LinkChannel>()
  /** What the link's parts ask of it: see `#Wiring` below. */
  readonly #wiring: AdapterConfig & LinkChartsHost & ChannelHost
  private controlHandler: ControlHandler | undefined
  private lastState: LinkState = 'idle'
  /** disconnect() calls so far: a connect() or runForever() deferred inside the charts' processing yields to a later one. */
  private disconnectCalls = 0
  /**
   * A disconnect() sent its stop to a running session and the session has not ended yet: inside
   * the charts' processing the stop may still be queued behind the event being processed, so a
   * reconnect() called after it must not read the snapshot as a wait it can cut.
   */
  private stopRequested = false
  /** Internal waiters, told synchronously of every state change with the snapshot's numbers; null while none. */
  private watchers: Set<(seen: StateSeen) => void> | null = null
  /** When (env.monotonic) the link was last disconnected, for `reconnected.downtimeMs`. */
  private lostAt: number | null = null
  private readonly env: Env
  /** Which env functions threw outside the charts (logged once each); null while none did. */
  #envFaults: Set<string> | null = null
  /**
   * The host's last good `env.monotonic` reading, what a bad one (not finite, or a throw) reads as:
   * a monotonic reading is only ever subtracted from another, so it must stay on the host's clock
   * (its origin may be hours from `performance.now()`'s). Null until one was read.
   */
  #lastMonotonic: number | null = null
  private crashed: Error | null = null
  private crashReason: DisconnectReason | null = null

  /**
   * What the link's parts ask of it, as one object per link with its methods on a prototype
   * (about twenty closures per link before): the adapter's settings and callbacks
   * ({@link AdapterConfig}), the charts' host ({@link LinkChartsHost}) and every channel
   * handle's host ({@link ChannelHost}). Declared inside the class, so it reaches the link's
   * private members and nothing outside does.
   */
  static readonly #Wiring = class Wiring implements AdapterConfig, LinkChartsHost, ChannelHost {
    readonly agentId: string
    readonly policy: TransportPolicy
    /** The link's options: a true private field, so `util.inspect(link)` never shows the key they hold. */
    readonly #options: LinkOptions
    constructor(
      private readonly link: Link,
      options: LinkOptions,
      readonly url: string,
      readonly apiKeyIn: 'header' | 'param',
    ) {
      this.#options = options
      this.agentId = options.agentId
      this.policy = link.policy.transport
    }

    // ---- AdapterConfig (src/adapter/phoenix-adapter.ts)
    get connectTimeoutMs(): number {
      return this.link.policy.connection.connectTimeoutMs
    }
    get controlJoinTimeoutMs(): number {
      return this.link.policy.connection.joinTimeoutMs
    }
    get controlLeaveTimeoutMs(): number {
      return this.link.policy.connection.leaveTimeoutMs
    }
    get channelJoinTimeoutMs(): number {
      return this.link.policy.channel.joinTimeoutMs
    }
    get channelLeaveTimeoutMs(): number {
      return this.link.policy.channel.leaveTimeoutMs
    }
    credentials(attempt: AttemptInfo): Credentials | Promise<Credentials> {
      return this.link.credentials(this.#options, attempt)
    }
    now(): number {
      return this.link.stamp()
    }
    monotonic(): number {
      return this.link.monotonic()
    }
    sink(event: ConnectionEvent): void {
      this.link.send(event)
    }
    message(topic: string, event: string, payload: Payload | ArrayBuffer, meta: { generation: number }): void {
      // Phoenix payloads are maps (Phoenix.Channel.push and broadcast take a map; binary frames
      // arrive as ArrayBuffer): anything else is reported, never handed to a handler typed Payload.
      if ((typeof payload !== 'object' || payload === null || Array.isArray(payload)) && !(payload instanceof ArrayBuffer)) {
        const kind = payload === null ? 'null' : Array.isArray(payload) ? 'an array' : `a ${typeof payload}`
        this.link.emitter.emit('ignored', { event: 'channel.message', detail: `${quoteServerText(event)} on ${topic} with a payload that is ${kind}, not an object: not delivered` })
        return
      }
      this.link.channels.get(topic)?.deliver(event, payload, meta)
    }
    channelParams(topic: string, attempt: AttemptInfo): object | Promise<object> {
      const params = this.link.channels.get(topic)?.params
      // The attempt as the adapter made it: its signal is created only if the function reads it.
      return typeof params === 'function' ? params(attempt) : (params ?? {})
    }

    // ---- LinkChartsHost (src/runtime/link-charts.ts)
    deliver(queued: QueuedSignal, signal: AbortSignal): Promise<void> {
      return this.link.deliverSignal(queued, signal)
    }
    emitted(event: ConnectionEmitted): void {
      // Runs while the charts carry out a transition's actions: a throw must not reach them.
      try {
        this.link.onChartEmitted(event)
      } catch (error) {
        this.link.log.error('publishing a chart event failed', { event: event.type, error: thrownText(error) })
      }
    }
    changed(): void {
      const { value, context } = this.link.charts.connection.snapshot
      if (isDeciding(value)) return
      this.link.onSnapshot({ state: linkStateOf(value), generation: context.generation, epoch: context.epoch })
    }
    crashed(chart: string, error: unknown): void {
      this.link.onCrash(chart, error)
    }
    actionFailed(chart: string, action: string, error: unknown): void {
      this.link.log.error(`the ${action} action of the ${chart} chart failed`, { error: thrownText(error) })
    }
    listenerFailed(chart: string, error: unknown): void {
      this.link.log.error(`a listener of the ${chart} chart threw`, { error: thrownText(error) })
    }

    // ---- ChannelHost (src/link-channel.ts)
    isRunning(): boolean {
      return !['idle', 'stopping', 'stopped', 'terminated'].includes(this.link.state)
    }
    isEnded(): boolean {
      return ['stopping', 'stopped', 'terminated'].includes(this.link.state)
    }
    linkState(): LinkState {
      return this.link.state
    }
    isJoined(topic: string): boolean {
      return this.link.#adapter.isJoined(topic)
    }
    joinReply(topic: string): unknown {
      return this.link.#adapter.joinReplyOf(topic)
    }
    push(topic: string, event: string, payload: Payload | ArrayBuffer, timeoutMs: number, signal?: AbortSignal): Promise<unknown> {
      return this.link.#adapter.push(topic, event, payload, timeoutMs, signal)
    }
    leave(topic: string): void {
      this.link.send({ type: 'host.leaveChannel', topic })
    }
    get pushTimeoutMs(): number {
      return this.link.policy.transport.pushTimeoutMs
    }
    reportError(error: unknown, where: string): void {
      this.link.log.error(`${where} threw`, { error: thrownText(error) })
    }
    redact(text: string): string {
      return this.link.redactOutput(text)
    }
    reportUnhandled(topic: string, event: string): void {
      this.link.emitter.emit('ignored', { event: 'channel.message', detail: `no handler for ${quoteServerText(event)} on ${topic}` })
    }
  }

  /** @internal use {@link createLink}. */
  constructor(given: LinkOptions) {
    // Read once and checked: later reads (credentials of each attempt) see what was checked.
    const options = checkOptions(given)
    const { url, agentId, apiKey } = options
    this.#agentId = agentId
    this.#hookTimeoutMs = options.runs?.hookTimeoutMs
    // An array literal of its size: a pushed-to empty array keeps room for 16.
    this.#keys = typeof apiKey === 'string' ? [apiKey] : []
    const endpoint = checkUrl(url, options.allowInsecureTransport ?? false, this.#keys)
    this.policy = resolvePolicy(options.policy)
    // The control channel's join frame must fit the frame limit, which binds sent frames too: it
    // would otherwise never be sent, every attempt timing out (refs of 20 digits: room to spare).
    const controlJoinBytes = utf8Length(JSON.stringify(['9'.repeat(20), '9'.repeat(20), controlTopic(agentId), 'phx_join', {}]))
    if (controlJoinBytes > this.policy.transport.maxFrameBytes) {
      throw new ConfigurationError(
        `agentId is too long: the control channel's join frame would be ${controlJoinBytes} bytes, over transport.maxFrameBytes (${this.policy.transport.maxFrameBytes}); shorten the id or raise the limit to the server's own`,
      )
    }
    const env = options.env
    this.env =
      env === undefined
        ? DEFAULT_ENV
        : {
            now: env.now === undefined ? DEFAULT_ENV.now : this.finiteOrOwn('now', env.now),
            monotonic: env.monotonic === undefined ? DEFAULT_ENV.monotonic : this.finiteOrOwn('monotonic', env.monotonic),
            random: env.random === undefined ? DEFAULT_ENV.random : inUnitRange(env.random),
          }
    this.log = redacting(options.logger, () => this.#keys)
    // The host's monotonic clock read once now, so a bad reading later has a good one of the same
    // clock to stand for (finiteOrOwn), not performance.now(), whose origin may be hours away.
    if (env?.monotonic !== undefined) this.monotonic()
    this.controlHandler = options.onControl
    this.emitter = new Emitter<LinkEvents>((error, type) =>
      this.log.error('a link event listener threw', { event: String(type), error: thrownText(error) }),
    )
    const apiKeyIn = options.apiKeyIn ?? (SUPPORTS_UPGRADE_HEADERS ? 'header' : 'param')
    if (apiKeyIn === 'header' && !SUPPORTS_UPGRADE_HEADERS) {
      // A browser's WebSocket cannot send upgrade headers (WHATWG WebSockets: only the URL and
      // subprotocols): asking for one must not silently send the key as a param instead.
      throw new ConfigurationError("apiKeyIn: 'header' needs upgrade headers, which this runtime's WebSocket cannot send (a browser or Web Worker); use apiKeyIn: 'param' or leave it out")
    }
    if (typeof apiKey === 'string' && apiKeyIn === 'header' && SUPPORTS_UPGRADE_HEADERS && !isHeaderValue(apiKey)) {
      throw new ConfigurationError(
        "apiKey has characters an HTTP header cannot carry (control characters, code points above U+00FF, or a space or tab at its start or end, which web servers drop or keep as they choose: RFC 9110 section 5.5); trim it, or pass apiKeyIn: 'param', which percent-encodes it",
      )
    }

    const doubt = this.#carriedDoubt(options.supersedeDoubt ?? null)
    const wiring = new Link.#Wiring(this, options, endpoint, apiKeyIn)
    this.#wiring = wiring
    this.#adapter = new PhoenixAdapter(wiring)
    const inspect = options.inspect
    const observe = typeof inspect === 'function' ? inspect : inspect?.next?.bind(inspect)
    this.charts = new LinkCharts({
      io: this.#adapter,
      clock: options.clock === undefined ? REAL_CLOCK : finiteClock(options.clock),
      env: this.env,
      policy: this.policy,
      onConflict: options.onConflict,
      supersedeDoubt: doubt,
      // The host's observer runs inside socket callbacks: its errors are logged, never thrown there.
      inspect: observe
        ? (event) => {
            try {
              // Inspection events are output: the host's observer gets them with every key redacted.
              // Inspectors also read the chart the event names (@statelyai/inspect calls
              // `actorRef.getSnapshot()`): they get a view of it whose snapshots are redacted too.
              const viewed = { ...event, actorRef: this.#inspectedRef(event.actorRef), sourceRef: this.#inspectedRef(event.sourceRef) }
              // An async observer's rejection is reported as its throw is (never an unhandled rejection).
              settleReported(observe(this.redactOutput(viewed)), (error) => this.log.error('the inspect observer threw', { error: thrownText(error) }))
            } catch (error) {
              this.log.error('the inspect observer threw', { error: thrownText(error) })
            }
          }
        : null,
      host: wiring,
    })
    if (options.tracer) traceSpans(this, options.tracer)
  }

  /** The inspectors' view of each chart (see {@link InspectedChart}), made on first use; null until an inspector sees a chart. */
  #inspected: WeakMap<object, InspectedChart> | null = null

  /** The inspectors' view of `ref` (a chart of this link), or `ref` itself when it is none. */
  #inspectedRef(ref: unknown): unknown {
    if (!(ref instanceof RunningChart)) return ref
    const views = (this.#inspected ??= new WeakMap())
    let view = views.get(ref)
    if (view === undefined) {
      view = new InspectedChart(ref, this.#inspectedRef(ref._parent) as InspectedChart | null, (value) => this.redactOutput(value))
      views.set(ref, view)
    }
    return view
  }

  /** The connection chart's actor, for inspection (`link.actor.getSnapshot().value`). Send it nothing. */
  get actor(): ChartActor {
    return this.charts.connection as unknown as ChartActor
  }

  /** The agent id this link connects as (the `agent_id` socket param). */
  get agentId(): string {
    return this.#agentId
  }

  /** The public state: idle, connecting, joining, connected, reconnecting, suspended, stopping, stopped or terminated. */
  get state(): LinkState {
    if (this.crashed) return 'terminated'
    const { value } = this.charts.connection.snapshot
    // Waiting for the reconnect decision (within this processing): still the state before the loss.
    return isDeciding(value) ? this.lastState : linkStateOf(value)
  }

  /**
   * The session: 0 before the first connect(), then +1 for each connect() that starts a session
   * (from idle, stopped or terminated; a connect() while one runs joins it). The `epoch` of the
   * `connected`, `reconnected`, `state` and `control` events.
   */
  get epoch(): number {
    return this.charts.connection.snapshot.context.epoch
  }

  /**
   * Why the last transport or session ended. Kept after stop and after a terminal reason;
   * cleared when connect() starts a new session. Null before any loss.
   */
  get lastDisconnectReason(): DisconnectReason | null {
    if (this.crashReason) return this.crashReason
    return this.charts.connection.snapshot.context.lastReason as DisconnectReason | null
  }

  /**
   * The supersede of unknown cause this link holds undecided, or null (see {@link SupersedeDoubt}).
   * It outlives a session that ends before deciding it (disconnect(), a refused upgrade, a policy
   * give-up), so a next connect() probes; a link that replaces this one gets it through
   * `LinkOptions.supersedeDoubt`. A session that ends `superseded` decided it: null then.
   */
  get supersedeDoubt(): SupersedeDoubt | null {
    const { ambiguousSupersede: doubt, acceptedLostAt } = this.charts.connection.snapshot.context
    if (doubt === null) return null
    // A copy, frozen whole: what the host holds (and may persist or change) is not the chart's.
    const reason = deepFreeze(structuredClone(doubt.reason)) as SupersedeDoubt['reason']
    return Object.freeze({ agentId: this.#agentId, reason, sinceMs: doubt.since, socketLostMs: acceptedLostAt })
  }

  /**
   * The chart's input for a doubt another link left (`LinkOptions.supersedeDoubt`, as checked and
   * copied by checkOptions).
   *
   * @throws {ConfigurationError} for a doubt of another agent, or one whose times are ahead of
   *   `env.monotonic` (a doubt of another process or clock: it does not outlive the process).
   */
  #carriedDoubt(doubt: SupersedeDoubt | null): CarriedDoubt | null {
    if (doubt === null) return null
    if (doubt.agentId !== this.#agentId) {
      throw new ConfigurationError(`supersedeDoubt is about agent ${JSON.stringify(doubt.agentId)}, not this link's ${JSON.stringify(this.#agentId)}: a doubt is about one agent's key`)
    }
    const now = this.env.monotonic()
    for (const [field, at] of [['sinceMs', doubt.sinceMs], ['socketLostMs', doubt.socketLostMs]] as const) {
      if (at !== null && at > now) {
        throw new ConfigurationError(
          `supersedeDoubt.${field} (${at}) is ahead of env.monotonic (${now}): a doubt from another process or clock, which this link cannot measure its windows from (a doubt does not outlive the process)`,
        )
      }
    }
    return { reason: doubt.reason, since: doubt.sinceMs, socketLostAt: doubt.socketLostMs }
  }

  /**
   * Connects (starting a new session from idle, stopped or terminated) and resolves once the
   * control channel is joined. Retryable losses on the way are retried by the chart; the promise
   * waits through them. Two concurrent calls share one transport.
   *
   * @throws {AgentDisconnectedError} (rejects) when the session ends first: a terminal reason,
   *   or `graceful` when disconnect() is called meanwhile.
   * @throws the signal's reason (an AbortError) when `signal` aborts; the link keeps connecting.
   * @throws {ConfigurationError} (rejects) when `options` is not an object (`null` is no options),
   *   or `options.signal` is given and is not an AbortSignal.
   */
  async connect(options: { signal?: AbortSignal | undefined } | null = {}): Promise<void> {
    this.assertUsable()
    const { signal } = callOptions(options, 'link.connect')
    checkSignal(signal, 'link.connect')
    if (signal?.aborted) throw abortError(signal)
    // Called from inside the charts' processing (a chart subscriber, an `apiKey` or `params`
    // function, an AbortSignal's abort listener, an inspector), the state read below may be behind
    // events already queued: decide once they are processed, which is done by the time a promise
    // callback runs (the processing is synchronous). A disconnect() called after this connect()
    // meanwhile wins: this call then waits on the session as it is (and rejects when it stops).
    // Otherwise decide now, so host.connect is sent before connect() returns.
    if (this.charts.busy) {
      const stops = this.disconnectCalls
      await undefined
      if (this.disconnectCalls > stops) {
        // At rest (idle, stopped, terminated), the session this call would have started was stopped
        // by that disconnect() before it began: rejected as graceful, as the same calls made outside
        // the processing would be. Otherwise the stop is under way in the session this call joins.
        if (this.atRest) throw this.stoppedBeforeStart()
        return this.untilConnected(this.epoch, signal)
      }
    }
    if (this.state === 'stopping') await this.until((s) => s.state !== 'stopping', signal)
    if (this.state === 'connected') return
    const starting = this.atRest
    // The session this call waits for: the one host.connect starts (epoch + 1), even if the chart
    // is busy and handles the event a moment later.
    const epoch = starting ? this.epoch + 1 : this.epoch
    if (starting) {
      this.stopRequested = false
      this.send({ type: 'host.connect' })
    }
    await this.untilConnected(epoch, signal)
  }

  /** No session runs: idle, stopped or terminated (a connect() starts one). */
  private get atRest(): boolean {
    return this.state === 'idle' || this.state === 'stopped' || this.state === 'terminated'
  }

  /** The error of a connect() whose session a later disconnect() stopped before it began (see connect()). */
  private stoppedBeforeStart(): AgentDisconnectedError {
    const reason = gracefulReason(this.charts.connection.snapshot.context.generation, this.env.now()) as DisconnectReason
    return new AgentDisconnectedError(reason, { redact: (text) => this.redactOutput(text) })
  }

  /** Resolves once session `epoch` is connected; rejects AgentDisconnectedError when it ends first, or the signal's reason. */
  private untilConnected(epoch: number, signal: AbortSignal | undefined): Promise<void> {
    return this.until((s) => {
      if (s.epoch !== epoch) return false
      if (s.state === 'connected') return true
      if (s.state === 'stopped' || s.state === 'terminated') throw new AgentDisconnectedError(this.lastDisconnectReason!, { redact: (text) => this.redactOutput(text) })
      return false
    }, signal)
  }

  /**
   * Keeps the agent connected until the host stops it: connects if the link is idle, then
   * resolves when disconnect() stops it. Retryable losses never end it.
   *
   * @throws {AgentDisconnectedError} (rejects) on a terminal reason (superseded, rejected,
   *   suppressed); at once if the link already ended with one.
   * @throws the signal's reason when `signal` aborts: only this waiter ends; the link stays up.
   * @throws {ConfigurationError} (rejects) when `options` is not an object (`null` is no options),
   *   or `options.signal` is given and is not an AbortSignal.
   */
  async runForever(options: { signal?: AbortSignal | undefined } | null = {}): Promise<void> {
    this.assertUsable()
    const { signal } = callOptions(options, 'link.runForever')
    checkSignal(signal, 'link.runForever')
    if (signal?.aborted) throw abortError(signal)
    // As in connect(): inside the charts' processing, decide once the events queued are processed;
    // a disconnect() called after this call meanwhile wins (the wait ends with the session's stop).
    if (this.charts.busy) {
      const stops = this.disconnectCalls
      await undefined
      // From idle, the session this call would have started was stopped before it began: done, as a
      // stop ends it. (Stopped and terminated are decided below, as outside the processing.)
      if (this.disconnectCalls > stops && this.state === 'idle') return
    }
    const starting = this.state === 'idle'
    const epoch = starting ? this.epoch + 1 : this.epoch
    if (starting) {
      this.stopRequested = false
      this.send({ type: 'host.connect' })
    }
    await this.until((s) => {
      if (s.epoch !== epoch) return s.epoch > epoch // a later session means this one was stopped
      if (s.state === 'stopped') return true
      if (s.state === 'terminated') throw new AgentDisconnectedError(this.lastDisconnectReason!, { redact: (text) => this.redactOutput(text) })
      return false
    }, signal)
  }

  /**
   * Stops the session from any state: leaves the control channel when joined, closes the socket
   * with 1000, cancels every timer. Resolves once every socket is closed and every `onAbort` hook
   * of a run ({@link Link.runSignal}) that a session's end aborted, this session's or an earlier
   * one's, has settled, each within `runs.hookTimeoutMs` (5 s by default; one still pending then
   * is reported `failed`): nothing the link started is left running. Called from such a hook
   * (before the hook's first `await`), it does not wait for the hooks. Never rejects;
   * idempotent. After a terminal reason it sends nothing on the wire, keeps that reason and the
   * state `terminated`, and drops the control signals still waiting behind the handler (as a stop
   * from any other state does; each reported `ignored`).
   *
   * A connected link sends the control channel's phx_leave and closes its socket 1000 within this
   * call (phoenix.js settles a leave at once: channel.js leave()), so a page's `pagehide` handler
   * that calls it leaves no socket open when it returns.
   */
  async disconnect(): Promise<void> {
    // Read by a connect() or runForever() called earlier inside the charts' processing, which decide
    // only once the queued events are processed: this later call wins.
    this.disconnectCalls++
    const fromHook = this.#inHook > 0
    // Only this session's sockets: a connect() right after must not hold this disconnect() open,
    // so the last generation is read the moment the stop is seen, before any connect() runs.
    let upTo = this.charts.connection.snapshot.context.generation
    // A link already at rest is not sent another stop: its chart would ignore it, but an
    // inspector would still see an event after the last snapshot. A terminated link is at rest
    // only once no control signal waits behind the handler: signals received before the
    // supersede are dropped by the stop (the chart's `flushControl`, which decides it; this only
    // spares the chart an event it would ignore); nothing goes on the wire.
    if (this.state === 'terminated') {
      if (!this.crashed && (this.charts.control?.snapshot.context.queue.length ?? 0) > 1) this.send({ type: 'host.disconnect' })
    } else if (!this.crashed && this.state !== 'idle' && this.state !== 'stopped') {
      this.stopRequested = true
      this.send({ type: 'host.disconnect' })
      await this.until((s) => {
        if (s.state !== 'idle' && s.state !== 'stopped' && s.state !== 'terminated') return false
        upTo = s.generation
        return true
      }).catch(() => {})
    }
    for (const channel of this.channels.values()) channel.failWaiting(true)
    await this.#adapter.settled(upTo)
    // The runs the session's end aborted: their hooks settled or timed out, each reported. Not
    // when called from such a hook: the round would wait for the hook, and the hook for this.
    if (!fromHook && this.#abortRounds !== null) await Promise.allSettled(this.#abortRounds)
  }

  /**
   * An app channel, joined on every connected transport with a fresh join_ref until `leave()`.
   * Calling it again for an active topic returns the same handle (the first params stay).
   *
   * @param params join params as a plain object (prototype `Object.prototype` of any realm, or
   *   null; no `toJSON`), or a function called at every join attempt (for fresh tokens), sync or
   *   async with `{ signal }`; a throw, a rejection, a value that is not a plain object (a Map, a
   *   Date, a typed array, a class instance: JSON would send it as something else) or no answer
   *   within `transport.credentialsTimeoutMs` fails that attempt (the channel reads `errored` with
   *   an `other` reason) and it is retried with the rejoin backoff.
   * @throws {ConfigurationError} for a topic that is empty, reserved (`phoenix`, `agent_control:*`)
   *   or holds half a character, and for params given at once that are not a plain object, that
   *   JSON cannot encode, or that hold half a character.
   */
  channel(topic: string, params: object | ((attempt: AttemptInfo) => object | Promise<object>) = {}): LinkChannel {
    if (typeof topic !== 'string' || topic === '') throw new ConfigurationError('channel topic must be a non-empty string')
    if (topic.startsWith('agent_control:')) {
      throw new ConfigurationError(`${topic} is the control channel; the link joins it itself`)
    }
    if (topic === HEARTBEAT_TOPIC) throw new ConfigurationError('"phoenix" is the heartbeat topic, not a channel')
    if (hasLoneSurrogate(topic)) throw new ConfigurationError(`channel topic ${JSON.stringify(topic)} cannot be sent: ${LONE_SURROGATE_MESSAGE}`)
    if (typeof params !== 'function') {
      try {
        JSON.stringify(params)
      } catch (error) {
        throw new ConfigurationError(`channel ${topic}: params must be JSON (${thrownText(error)})`)
      }
      // A Map, a Date, a typed array or a class instance would be sent as something else ({}, a string, indices).
      const what = notJsonMap(params)
      if (what !== null) throw new ConfigurationError(`channel ${topic}: params must be a plain object or a function returning one, got ${what}`)
      if (hasLoneSurrogate(JSON.stringify(params))) throw new ConfigurationError(`channel ${topic}: params cannot be sent: ${LONE_SURROGATE_MESSAGE}`)
    }
    const existing = this.channels.get(topic)
    if (existing?.active) return existing
    const handle = new LinkChannel(topic, this.#wiring, params)
    this.channels.set(topic, handle)
    this.send({ type: 'host.channel', topic })
    return handle
  }

  /**
   * An AbortSignal for a unit of the agent's work that only makes sense while this session can
   * still deliver its result: it aborts (with the DisconnectReason) when the session ends:
   * `terminated` (superseded, rejected, suppressed) or `stopped` by {@link Link.disconnect}
   * (`graceful`). Reconnects do not abort it. A run asked for while the link is idle or stopped
   * belongs to the next session. Call
   * {@link Link.endRun} with the signal when the work ends normally
   * (`try { await work(signal) } finally { link.endRun(signal) }`).
   *
   * @param runId a name for the run; by default `run-N`, skipping ids already in flight.
   * @param options `{ onAbort? }` (called when the run is aborted); `null` is no options.
   * @returns a signal already aborted when the link is terminated.
   * @throws {Error} when a run with this (explicit) id is already in flight.
   * @throws {ConfigurationError} for a runId that is not a non-empty string, options that are not
   *   an object, or an `onAbort` that is not a function (no run is registered).
   */
  runSignal(runId?: string, options: RunOptions | null = {}): AbortSignal {
    // Only a runId left out is named here; null or any other value is checked as given.
    const problem = runProblem(this.#agentId, runId === undefined ? 'run' : runId, options)
    if (problem !== null) throw new ConfigurationError(`link.runSignal: ${problem}`)
    options ??= {}
    if (runId === undefined) {
      const inFlight = new Set(this.runs.inFlight(this.#agentId))
      do runId = `run-${this.#nextRun++}`
      while (inFlight.has(runId))
    }
    if (this.state === 'terminated') {
      const controller = new AbortController()
      controller.abort(this.lastDisconnectReason)
      return controller.signal
    }
    const { onAbort } = options
    if (onAbort === undefined) return this.runs.startRun(this.#agentId, runId, options)
    return this.runs.startRun(this.#agentId, runId, {
      onAbort: (reason) => {
        // A disconnect() the hook calls (before its first await) must not wait for this hook.
        this.#inHook++
        try {
          return onAbort(reason)
        } finally {
          this.#inHook--
        }
      },
    })
  }

  /**
   * The run that `signal` (from {@link Link.runSignal}) belongs to ended normally: it leaves the
   * link's run registry. Idempotent; nothing for a run already aborted or ended, nor for a signal
   * of another link. Ends only that run, even when a later run took its id.
   *
   * @throws {ConfigurationError} when `signal` is not an AbortSignal (a run id, say: nothing ends).
   */
  endRun(signal: AbortSignal): void {
    if (!isAbortSignal(signal)) throw new ConfigurationError(`link.endRun: pass the AbortSignal link.runSignal() returned, got ${signal === null ? 'null' : typeof signal}`)
    this.#runs?.endRunOf(this.#agentId, signal)
  }

  /**
   * Sets (or, with `undefined` or `null`, clears) the control signal handler. Signals already
   * being handled finish with the old one.
   *
   * @throws {ConfigurationError} when `handler` is anything else but a function (the handler in
   *   place stays), so no signal is handed to something that cannot take it.
   */
  onControl(handler: ControlHandler | undefined | null): void {
    if (handler !== undefined && handler !== null) checkFunction(handler, 'link.onControl: the handler')
    this.controlHandler = handler ?? undefined
  }

  /**
   * Calls `listener` for each `type` event, on a microtask after the link's decision; returns the
   * function that removes it. The listener may be `async`: what it throws, or its promise rejects
   * with, is logged (`error`: "a link event listener threw") and never thrown into the link.
   * Listeners form a set, as the DOM's `addEventListener` does (not Node's EventEmitter): the
   * same function registered twice for one type, by on() or once() in any mix, is called once per
   * event (a registration already there stays as it was: on() then once() keeps it for every
   * event), and either returned function, or one off(), removes it.
   *
   * @throws {ConfigurationError} when `type` is not one of {@link LINK_EVENT_TYPES} or `listener`
   *   is not a function (nothing is registered).
   */
  on<K extends keyof LinkEvents>(type: K, listener: (payload: LinkEvents[K]) => void): Unsubscribe {
    checkEventType(type, 'link.on')
    checkFunction(listener, 'link.on: the listener')
    return this.emitter.on(type, listener)
  }

  /**
   * Calls `listener` for every event, as `{ type, ...payload }`.
   *
   * @throws {ConfigurationError} when `listener` is not a function (nothing is registered).
   */
  onAny(listener: (event: LinkEvent) => void): Unsubscribe {
    checkFunction(listener, 'link.onAny: the listener')
    return this.emitter.onAny(listener as never)
  }

  /**
   * With a listener: calls it once, for the next `type` event, and returns the function that
   * removes it. Without one: a promise of the next `type` event's payload (as
   * `events.once(emitter, type)` in Node, Ably's `once()`).
   *
   * @throws the signal's reason (an AbortError; rejects) when `options.signal` aborts first.
   * @throws {ConfigurationError} when `type` is not one of {@link LINK_EVENT_TYPES} (thrown with a
   *   listener; rejects without one), and (rejects) when the second argument is neither a
   *   function nor an options object, or `options.signal` is given and is not an AbortSignal.
   */
  once<K extends keyof LinkEvents>(type: K, listener: (payload: LinkEvents[K]) => void): Unsubscribe
  once<K extends keyof LinkEvents>(type: K, options?: { signal?: AbortSignal | undefined } | null): Promise<LinkEvents[K]>
  once<K extends keyof LinkEvents>(
    type: K,
    listenerOrOptions?: ((payload: LinkEvents[K]) => void) | { signal?: AbortSignal | undefined } | null,
  ): Unsubscribe | Promise<LinkEvents[K]> {
    if (typeof listenerOrOptions === 'function') {
      checkEventType(type, 'link.once')
      return this.emitter.once(type, listenerOrOptions)
    }
    let signal: AbortSignal | undefined
    try {
      checkEventType(type, 'link.once')
      signal = callOptions(listenerOrOptions, 'link.once').signal
      checkSignal(signal, 'link.once')
    } catch (error) {
      return Promise.reject(error)
    }
    if (signal?.aborted) return Promise.reject(abortError(signal))
    return new Promise((resolve, reject) => {
      const off = this.emitter.once(type, (payload) => {
        unwatch?.()
        resolve(payload)
      })
      const unwatch = signal
        ? onAbort(signal, () => {
            off()
            reject(abortError(signal))
          })
        : undefined
    })
  }

  /**
   * Removes `listener` of `type`, registered with on() or once() (as the function they returned
   * does). Does nothing when it is not registered.
   *
   * @throws {ConfigurationError} when `type` is not one of {@link LINK_EVENT_TYPES} (a misspelt
   *   name would leave the listener registered).
   */
  off<K extends keyof LinkEvents>(type: K, listener: (payload: LinkEvents[K]) => void): void {
    checkEventType(type, 'link.off')
    this.emitter.off(type, listener)
  }

  /**
   * Resolves with the state once the link is in `state` (or one of `state`s): at once when it is
   * now (as Ably's `connection.whenState()`). Use it to wait for `connected` after a reconnect, or
   * to alert on `suspended`.
   *
   * @throws {AgentDisconnectedError} (rejects) when the session ends, by a terminal reason or a
   *   disconnect(), before reaching the state: the link moved to `terminated` or `stopped` after
   *   this call and that is not a state waited for.
   * @throws the signal's reason (an AbortError; rejects) when `signal` aborts; the link is unaffected.
   * @throws {ConfigurationError} (rejects) when `options.signal` is given and is not an AbortSignal
   *   (`null` options are no options).
   * @throws {ConfigurationError} (rejects) for a name that is not a link state, an empty list,
   *   anything but a name or an array of names, or options that are not an object.
   */
  async whenState(state: LinkState | readonly LinkState[], options: { signal?: AbortSignal | undefined } | null = {}): Promise<LinkState> {
    if (typeof state !== 'string' && !Array.isArray(state)) {
      throw new ConfigurationError(`link.whenState: name a link state or an array of them (${LINK_STATES.join(', ')}), got ${describeArgument(state)}`)
    }
    const wanted: readonly LinkState[] = typeof state === 'string' ? [state] : state
    if (wanted.length === 0) throw new ConfigurationError('link.whenState: name at least one link state')
    for (const name of wanted) {
      if (!(LINK_STATES as readonly string[]).includes(name)) {
        throw new ConfigurationError(`link.whenState: ${describeArgument(name)} is not a link state; use one of ${LINK_STATES.join(', ')}`)
      }
    }
    const { signal } = callOptions(options, 'link.whenState')
    checkSignal(signal, 'link.whenState')
    if (signal?.aborted) throw abortError(signal)
    // A crashed chart reads terminated for good: wait for nothing else.
    if (this.crashed && wanted.includes('terminated')) return 'terminated'
    const startedIn = this.state
    let left = false
    let reached: LinkState = startedIn
    await this.until((seen) => {
      if (wanted.includes(seen.state)) {
        reached = seen.state
        return true
      }
      // Ended: stopped or terminated after the link left the state it was in at the call (a
      // session that ends where it started, e.g. terminated again after a connect(), counts).
      if (seen.state !== startedIn) left = true
      if (left && (seen.state === 'stopped' || seen.state === 'terminated')) {
        throw new AgentDisconnectedError(this.lastDisconnectReason!, { redact: (text) => this.redactOutput(text) })
      }
      return false
    }, signal)
    return reached
  }

  /**
   * Retries now while the link waits out a reconnect backoff or a `suspended` cooldown (for
   * example on the browser's `online` event): the next attempt starts at once. The attempt and
   * rapid-disconnect counts stay (the next rapid loss suspends again, with a longer cooldown), and
   * what the server asked for is kept: after a 429/503 with Retry-After, or a close 1012/1013, the
   * wait is cut to the end of that (machines/reconnect-policy.ts `serverFloorMs`; the reconnect
   * chart's `holding` state). Retries now in a row back off: a row ends when a wait runs out on
   * its own or a connection outlives `reconnect.rapidWindowMs`, so the first retry now after
   * either (an `online` event after a long offline spell) starts the attempt at once; each later
   * one in a row (its attempt failed or was closed at once) cuts a backoff wait only down to the
   * backoff's own ceiling for it from the wait's start (`initialDelayMs`, times `factor` per retry,
   * up to `maxDelayMs`: machines/reconnect-policy.ts `retryNowFloorMs`), and a `suspended`
   * cooldown not at all. So a host calling it on a timer against a server that keeps refusing
   * makes about as many attempts as the link alone would (2 to 6 in 2 s by default, where every
   * call was one before: about 80 a second from a 10 ms timer, a breaker's run of 2026-12-06), and
   * against one that accepts and closes at once at most one more per cooldown. Changes nothing in
   * any other state (a live link, a stopped one: use connect(); a terminated one: a supersede or
   * rejection must not be undone by a retry).
   *
   * @returns whether the link was waiting out a backoff or cooldown: true even when the call cut
   *   nothing (a retry now in a row whose floor covers the wait, or a cooldown after the first).
   */
  reconnect(): boolean {
    // After a disconnect() (its stop maybe still queued inside the processing) there is no wait to cut.
    if (this.crashed || this.stopRequested) return false
    const snapshot = this.charts.connection.snapshot
    if (!snapshot.matches({ session: { reconnecting: 'waiting' } }) && !snapshot.matches({ session: { reconnecting: 'suspended' } })) return false
    this.send({ type: 'host.reconnect' })
    return true
  }

  /**
   * Checks the open socket now instead of at the next heartbeat: sends a heartbeat of its own (a
   * reply to an earlier one, still in flight, proves nothing of the socket now) and waits up to
   * `timeoutMs` for the server's reply. A socket that does not answer in time is lost as one whose heartbeat went unanswered:
   * the link closes it, reports `disconnected` with `timed-out(heartbeat)` and reconnects, without
   * waiting out the heartbeat's own bound (up to two `transport.heartbeatIntervalMs`, 60 s by
   * default). For a network change the link cannot see, such as the browser's `online` event or
   * a laptop's wake, where the old socket is often half-open and still reads `connected`:
   * `addEventListener('online', () => link.reconnect() || void link.ping())`. Each ping sends its
   * own heartbeat, with its own bound; phoenix.js's heartbeat cycle runs on. It changes nothing
   * when there is no open socket (`not-connected`: use reconnect() during a backoff; while the link
   * is `connecting`, its connect timeout bounds the attempt). As phoenix.js's
   * `socket.ping(callback)` and Ably's `connection.ping()` it measures the round trip; unlike
   * them, an unanswered ping ends the socket, since a heartbeat that goes unanswered does.
   *
   * The bound is a real timer, as phoenix.js's heartbeat timers are (not `env.clock`); `rttMs` is
   * read on `env.monotonic`. Phoenix answers every heartbeat on topic `phoenix` (Phoenix.Socket,
   * phoenix 1.7 lib/phoenix/socket.ex `handle_in` of `"heartbeat"`).
   *
   * @param options.timeoutMs how long to wait for the reply, in ms: a whole number in [1, 2^31-1];
   *   default {@link DEFAULT_PING_TIMEOUT_MS} (5000).
   * @returns a {@link PingResult}; it never rejects for an outcome, only for bad options.
   * @throws {ConfigurationError} (rejects) when `options` is not an object, has a key other than
   *   `timeoutMs`, or `timeoutMs` is not a whole number of ms in [1, 2^31-1]; nothing is sent.
   */
  async ping(options: { timeoutMs?: number | undefined } | null = {}): Promise<PingResult> {
    const read = callOptions(options, 'link.ping')
    const stray = unknownKey(read, PING_OPTIONS)
    if (stray !== undefined) throw new ConfigurationError(`link.ping: unknown option ${JSON.stringify(stray)} (known: ${[...PING_OPTIONS].join(', ')})`)
    const timeoutMs: unknown = read.timeoutMs ?? DEFAULT_PING_TIMEOUT_MS
    if (!isCallTimeout(timeoutMs)) {
      throw new ConfigurationError(`link.ping: timeoutMs must be a whole number of milliseconds in [1, 2^31-1], got ${typeof timeoutMs === 'number' ? String(timeoutMs) : describeArgument(timeoutMs)}`)
    }
    // Called from inside the charts' processing (a chart subscriber, an inspector), the state may be
    // behind events already queued (a close just read): decide once they are processed.
    if (this.charts.busy) await undefined
    const state = this.state
    // An open socket: the control channel joining or joined on it (a stop in progress is not pinged).
    if (this.crashed || this.stopRequested || (state !== 'connected' && state !== 'joining')) return { outcome: 'not-connected', state }
    const { generation } = this.charts.connection.snapshot.context
    return new Promise<PingResult>((resolve) => {
      let settled = false
      const settle = (result: PingResult) => {
        if (settled) return
        settled = true
        off()
        resolve(result)
      }
      // The first `disconnected` after the call: the loss the ping found, or one that came first.
      const off = this.emitter.on('disconnected', (event) => settle({ outcome: 'lost', reason: event.reason, disconnected: event.outcome, generation }))
      const sent = this.#adapter.ping(generation, timeoutMs, (rttMs) => settle({ outcome: 'alive', rttMs, generation }))
      if (!sent) settle({ outcome: 'not-connected', state: this.state })
    })
  }

  /**
   * Every event from this call on, as `{ type, ...payload }`, in order, until `signal` aborts,
   * the loop breaks, or (with `untilSessionEnds`) just after the `disconnected` event that ends
   * the session (stopped or terminated). Events wait in memory until read; an abort ends the
   * iteration at once, dropping those not yet read (as Node's `events.on` with a signal does).
   *
   * @example for await (const e of link.events({ signal })) if (e.type === 'disconnected') alert(e.reason)
   * @throws {ConfigurationError} when `options` is not an object, or `options.signal` is given and
   *   is not an AbortSignal (nothing is registered).
   */
  events(options: { signal?: AbortSignal | undefined; untilSessionEnds?: boolean | undefined } | null = {}): AsyncIterableIterator<LinkEvent> {
    options = callOptions(options, 'link.events')
    checkSignal(options.signal, 'link.events')
    return this.emitter.iterate({
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.untilSessionEnds ? { until: (e: LinkEvent) => e.type === 'disconnected' && e.outcome !== 'reconnect' } : {}),
    }) as AsyncIterableIterator<LinkEvent>
  }

  /** disconnect(), for `await using link = createLink(...)` (where the runtime has `Symbol.asyncDispose`: Node 20, current browsers). */
  declare [Symbol.asyncDispose]: () => Promise<void>

  // ---- private ----------------------------------------------------------------------------


  /**
   * A chart stopped with an error (a phoenix-link bug: a throwing guard or assign, an action the
   * runtime does not run). No lifecycle can continue: every chart and socket is stopped, waiters
   * reject INTERNAL, every channel is dropped with the same reason (its waits reject CHANNEL_CLOSED,
   * leave() resolves), the state reads terminated with an `other` reason, and disconnect() still resolves.
   */
  private onCrash(chart: string, error: unknown): void {
    if (this.crashed) return
    const previous = this.state
    this.crashed = new PhoenixLinkError('INTERNAL', `the ${chart} chart stopped with an error: ${thrownText(error)}`, { cause: error })
    this.crashReason = {
      kind: 'other',
      // Terminal: no chart is left to retry (its describeReason() line says so, not "will reconnect").
      retryable: false,
      detail: `internal error: ${thrownText(error)}`,
      generation: this.charts.connection.snapshot?.context.generation ?? 0,
      // The host's env.now may be what crashed the chart: the stamp then falls back to Date.now().
      at: this.stamp(),
    }
    this.log.error(`${chart} chart crashed`, { error: thrownText(error) })
    // Each step whatever the one before did: a host's clock that failed the chart may fail its
    // stop too (a clearTimeout that throws), and the sockets must end all the same.
    for (const [what, step] of [
      ['stopping the charts', () => this.charts.stopAll()],
      ['ending the sockets', () => this.#adapter.endAll()],
    ] as const) {
      try {
        step()
      } catch (stepError) {
        this.log.error(`${what} of the crashed link failed`, { error: thrownText(stepError) })
      }
    }
    // No chart is left to join or leave them: every channel is dropped with the crash's reason, so
    // its status says so, its waits reject CHANNEL_CLOSED and leave() resolves at once.
    for (const channel of [...this.channels.values()]) {
      if (!channel.active) continue
      channel.setStatus('dropped', this.crashReason)
      this.emitter.emit('channel', { topic: channel.topic, status: 'dropped', reason: this.crashReason })
    }
    this.lastState = 'terminated'
    // Terminal like any other terminal reason: the runs of link.runSignal() in flight are aborted.
    this.abortRuns(this.crashReason)
    for (const watcher of [...(this.watchers ?? [])]) watcher({ state: 'terminated', generation: -1, epoch: -1 })
    this.emitter.emit('disconnected', { reason: this.crashReason, outcome: 'terminated', nextDelayMs: null, attempt: null, terminal: true, conflictProbe: false })
    this.emitter.emit('state', { state: 'terminated', previous, epoch: this.epoch })
  }

  /** Aborts the runs of link.runSignal() in flight; a session that ends with none reports nothing (no nothing-to-abort). */
  private abortRuns(reason: DisconnectReason | null): void {
    if ((this.#runs?.inFlight(this.#agentId).length ?? 0) === 0) return
    // A round never rejects (a hook's throw is its report); each hook is bounded by hookTimeoutMs.
    const round = this.#runs!.abortPrincipal(this.#agentId, reason)
    const rounds = (this.#abortRounds ??= new Set())
    rounds.add(round)
    void round.then(() => {
      rounds.delete(round)
      if (rounds.size === 0 && this.#abortRounds === rounds) this.#abortRounds = null
    })
  }

  private send(event: ConnectionEvent): void {
    if (this.crashed) return
    this.charts.send(event)
  }

  private assertUsable(): void {
    if (this.crashed) throw this.crashed
  }

  /**
   * Resolves when `check` is true for the state now or for a later state change (it may throw
   * to reject). Told synchronously of every change, in order, with the snapshot's generation and
   * epoch, so no state is missed however host code reenters the link.
   */
  private until(check: (seen: StateSeen) => boolean, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      // A signal that aborted before the wait began (while a caller deferred its decision) ends it at once.
      if (signal?.aborted) return reject(abortError(signal))
      let unwatch: (() => void) | undefined
      const finish = (settle: () => void) => {
        // The last watcher gone, the set goes too: an idle link keeps none.
        if (this.watchers?.delete(test) && this.watchers.size === 0) this.watchers = null
        unwatch?.()
        settle()
      }
      const test = (seen: StateSeen) => {
        if (this.crashed) return finish(() => reject(this.crashed))
        try {
          if (check(seen)) finish(resolve)
        } catch (error) {
          finish(() => reject(error))
        }
      }
      ;(this.watchers ??= new Set()).add(test)
      if (signal) unwatch = onAbort(signal, () => finish(() => reject(abortError(signal))))
      const { generation, epoch } = this.charts.connection.snapshot.context
      // While the reconnect decision is pending (inside the processing) the state is not settled:
      // the wait's first check is the state the decision commits.
      if (this.crashed || !isDeciding(this.charts.connection.snapshot.value)) test({ state: this.state, generation, epoch })
    })
  }

  private onSnapshot(seen: StateSeen): void {
    if (seen.state === this.lastState) return
    const previous = this.lastState
    this.lastState = seen.state
    this.log.info(`state ${previous} -> ${seen.state}`, { state: seen.state, previous })
    if (seen.state === 'stopped' || seen.state === 'terminated') {
      this.stopRequested = false
      for (const channel of this.channels.values()) channel.failWaiting()
    }
    // Work whose result this session can no longer deliver is aborted (link.runSignal()): the session
    // ended, for a terminal reason or by disconnect(), so a run of it is never left to a later one.
    if (seen.state === 'terminated' || seen.state === 'stopped') this.abortRuns(this.lastDisconnectReason)
    if (this.watchers !== null) for (const watcher of [...this.watchers]) watcher(seen)
    this.emitter.emit('state', { state: seen.state, previous, epoch: seen.epoch })
  }


  private onChartEmitted(event: ConnectionEmitted): void {
    switch (event.type) {
      case 'link.connected': {
        if (event.reconnect) {
          const downtimeMs = this.lostAt === null ? 0 : Math.max(0, Math.round(this.monotonic() - this.lostAt))
          this.lostAt = null
          this.log.info('reconnected', { generation: event.generation, downtimeMs })
          this.emitter.emit('reconnected', { generation: event.generation, epoch: event.epoch, downtimeMs })
        } else {
          this.lostAt = null
          this.log.info('connected', { generation: event.generation, epoch: event.epoch })
          this.emitter.emit('connected', { generation: event.generation, epoch: event.epoch })
        }
        return
      }
      case 'link.disconnected': {
        const reason = event.reason as DisconnectReason
        const outcome = event.nextDelayMs !== null ? 'reconnect' : reason.kind === 'graceful' ? 'stopped' : 'terminated'
        if (this.lostAt === null) this.lostAt = this.monotonic()
        // The reason's own identifying fields as structured fields, for a log query or an alert (never `raw`, `detail` or `message`: text a server chose).
        const fields: Record<string, unknown> = { kind: reason.kind, retryable: reason.retryable, outcome, generation: reason.generation, attempt: event.attempt, nextDelayMs: event.nextDelayMs }
        if (event.conflictProbe) fields.conflictProbe = true
        for (const key of REASON_LOG_FIELDS) {
          const value = (reason as Record<string, unknown>)[key]
          if (value !== undefined && value !== null) fields[key] = value
        }
        if (outcome === 'terminated') this.log.warn(`disconnected: ${describeReason(reason)}`, fields)
        else this.log.info(`disconnected: ${describeReason(reason)}`, fields)
        this.emitter.emit('disconnected', {
          reason,
          outcome,
          nextDelayMs: event.nextDelayMs,
          attempt: event.attempt,
          terminal: outcome === 'terminated',
          conflictProbe: event.conflictProbe,
        })
        return
      }
      case 'link.channel': {
        const handle = this.channels.get(event.topic)
        const status: ChannelStatus = event.status
        const reason = event.reason as DisconnectReason | null
        handle?.setStatus(status, reason)
        if (handle && !handle.active && this.channels.get(event.topic) === handle) {
          this.channels.delete(event.topic)
        }
        this.log.info(`channel ${event.topic} ${status}`, reason ? { reason: describeReason(reason) } : undefined)
        this.emitter.emit('channel', { topic: event.topic, status, reason })
        return
      }
      case 'link.ignored':
        this.log.debug(`ignored ${event.event}: ${event.detail}`)
        this.emitter.emit('ignored', { event: event.event, detail: event.detail })
        return
      case 'link.controlDuplicate':
        this.log.info('control signal with a repeated correlation id not delivered again', { sequence: event.sequence })
        this.emitter.emit('ignored', {
          event: 'control.signal',
          detail: `duplicate correlation_id ${quoteServerText(String(event.signal.correlationId))}: delivered once already`,
        })
        return
      case 'link.controlDropped': {
        const why = CONTROL_DROP_DETAIL[event.cause]
        if (event.cause === 'overflow') {
          this.log.warn('control signal dropped: the queue behind the control handler is full', {
            sequence: event.signals[0]?.sequence,
            maxQueued: this.policy.control.maxQueued,
            maxQueuedBytes: this.policy.control.maxQueuedBytes,
          })
        }
        for (const queued of event.signals) {
          this.emitter.emit('ignored', {
            event: 'control.signal',
            detail: `control signal #${queued.sequence} (correlation ${queued.signal.correlationId == null ? 'none' : quoteServerText(queued.signal.correlationId)}) dropped: ${why}`,
          })
        }
        return
      }
      case 'link.controlFailed':
        this.log.error('control handler failed', { sequence: event.sequence, error: thrownText(event.error) })
        return
    }
  }

  /**
   * Milliseconds on the link's monotonic clock (`env.monotonic`, `performance.now()` by default):
   * the clock its elapsed-time decisions are measured on, for tools that measure beside it
   * (linkMetrics). Outside the charts a throwing `env.monotonic` is logged (once) and read as
   * `performance.now()`, so a host's clock fault never escapes into a socket's listener. @internal
   */
  monotonic(): number {
    return this.readClock('monotonic')
  }

  /**
   * A wall-clock stamp (`env.now`) for what the adapter and the link record outside the charts;
   * a throwing `env.now` is logged (once) and read as `Date.now()`: a stamp decides nothing.
   * (Inside a chart's transition a throwing env function is that chart's crash.) @internal
   */
  stamp(): number {
    return this.readClock('now')
  }

  /** Reads one of the host's clocks; when it throws, logs that once per clock and reads the process's own wall clock, or the monotonic clock's last good reading. */
  private readClock(name: 'now' | 'monotonic'): number {
    try {
      return this.env[name]()
    } catch (error) {
      this.envFault(name, `env.${name} threw; phoenix-link reads its own clock instead where it only stamps or measures`, thrownText(error))
      return name === 'now' ? Date.now() : (this.#lastMonotonic ?? performance.now())
    }
  }

  /**
   * The host's `env.now` or `env.monotonic` (`name`) as the link and its charts read it: a reading
   * that is not a finite number (NaN, an infinity, a string, undefined) is logged once per clock
   * and replaced: a wall-clock one by `Date.now()`, so a reason's `at` is always a number, as its
   * schema says, and a broken wall clock, which only stamps, never ends a session; a monotonic one
   * by the last good reading of the same clock (read once when the link is made; `performance.now()`
   * only when no reading was ever good), since a
   * monotonic reading is only subtracted from another of its clock: one from another clock, whose
   * origin may be hours away, turned a 33 ms outage into an hour of downtime and our own 409 into
   * a terminal conflict (a review, 2026-12-07). A throw passes through (outside the charts
   * {@link readClock} catches it; inside a chart's transition it is that chart's crash).
   */
  private finiteOrOwn(name: 'now' | 'monotonic', read: () => number): () => number {
    return () => {
      const t: unknown = read()
      const bad = badReading(t)
      if (bad === null) {
        if (name === 'monotonic') this.#lastMonotonic = t as number
        return t as number
      }
      this.envFault(name, `env.${name} returned ${bad}, not a finite number of milliseconds; phoenix-link reads ${name === 'now' ? 'its own clock' : "the clock's last good reading"} instead`, null)
      return name === 'now' ? Date.now() : (this.#lastMonotonic ?? performance.now())
    }
  }

  /** Logs a fault of the host's `env.<name>` once per clock. */
  private envFault(name: 'now' | 'monotonic', message: string, error: string | null): void {
    if ((this.#envFaults ??= new Set()).has(name)) return
    this.#envFaults.add(name)
    this.log.error(message, error === null ? {} : { error })
  }

  /**
   * `value` with every API key this link has used redacted: for what the link's tools write out
   * (traces, the CLI). @internal
   */
  redactOutput<T>(value: T): T {
    return redact(value, this.#keys)
  }

  /**
   * The credentials of one connection attempt: the key and params (each a value or the host's
   * function, sync or async) and the host's onConflict; each key seen is remembered so it is
   * redacted from output. Throws or rejects with the host function's error.
   */
  private credentials(options: LinkOptions, attempt: AttemptInfo): Credentials | Promise<Credentials> {
    const key = typeof options.apiKey === 'function' ? options.apiKey(attempt) : options.apiKey
    let params: Record<string, string> | Promise<Record<string, string>>
    try {
      params = typeof options.params === 'function' ? options.params(attempt) : (options.params ?? {})
    } catch (error) {
      // The attempt fails with the params' error; a key promise asked already must not reject unheard.
      if (isPromise(key)) key.then(undefined, () => {})
      throw error
    }
    const combine = (apiKey: string, extra: Record<string, string>): Credentials => {
      this.rememberKey(apiKey)
      // Anything but an object is passed on as it is, for the adapter to refuse with a typed reason.
      // The params as the host gave them: the adapter refuses what it cannot send (not an object of
      // strings, a param the link sets itself) with a typed reason, and adds on_conflict.
      return options.onConflict ? { apiKey, params: extra, onConflict: options.onConflict } : { apiKey, params: extra }
    }
    if (!isPromise(key) && !isPromise(params)) return combine(key, params)
    return Promise.all([key, params]).then(([k, p]) => combine(k, p))
  }

  private rememberKey(key: unknown): void {
    if (typeof key !== 'string' || key === '' || this.#keys.includes(key)) return
    this.#keys.push(key)
    if (this.#keys.length > MAX_REMEMBERED_KEYS) this.#keys.shift()
  }

  private async deliverSignal(queued: QueuedSignal, abort: AbortSignal): Promise<void> {
    const signal = queued.signal as ControlSignal
    // The event goes out now, in the order of the chart's decisions: before an `ignored` for a
    // duplicate of this signal read in the same turn.
    this.emitter.emit('control', { signal, sequence: queued.sequence, epoch: queued.epoch })
    // The handler of this moment (one set by a listener meanwhile takes the next signal) runs outside
    // the charts' processing, a microtask later, and runs even if a new session started meanwhile:
    // the control chart counts a signal handed over as delivered, so skipping it would lose it (its
    // resend is a duplicate); the handler then gets an AbortSignal already aborted.
    const handler = this.controlHandler
    await Promise.resolve()
    if (handler) await handler(signal, { epoch: queued.epoch, sequence: queued.sequence, signal: abort })
  }
}

// `await using`: defined only where the runtime has the symbol (a computed class key would
// otherwise read `undefined` and define a method named "undefined").
if (typeof Symbol.asyncDispose === 'symbol') {
  Object.defineProperty(Link.prototype, Symbol.asyncDispose, {
    value: async function asyncDispose(this: Link): Promise<void> {
      await this.disconnect()
    },
    writable: true,
    configurable: true,
  })
}

/** Why a queued control signal was dropped, as the `ignored` event's detail says it. */
const CONTROL_DROP_DETAIL = {
  stopped: 'the host stopped the session before its turn',
  reset: 'a new session started before its turn',
  overflow: 'control.maxQueued signals, or control.maxQueuedBytes of frames, were already waiting behind a control handler that has not settled',
} as const

function isPromise<T>(value: T | Promise<T>): value is Promise<T> {
  return value !== null && typeof value === 'object' && typeof (value as { then?: unknown }).then === 'function'
}


/**
 * Checks the endpoint URL and returns it without a trailing `/websocket` (phoenix.js appends it).
 *
 * @throws {ConfigurationError} for a URL that does not parse, a scheme other than ws/wss, or
 *   plain ws:// to a non-loopback host without `allowInsecureTransport`.
 */
function checkUrl(url: string, allowInsecure: boolean, keys: readonly string[]): string {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw new ConfigurationError(`url ${JSON.stringify(redact(String(url), keys))} is not a URL; pass e.g. wss://platform.example/socket`)
  }
  if (parsed.protocol !== 'ws:' && parsed.protocol !== 'wss:') {
    throw new ConfigurationError(`url must start with ws:// or wss://, got ${parsed.protocol}//`)
  }
  // An empty `?` or `#` parses to '' but still reaches phoenix.js in the string it is given.
  if (parsed.search !== '' || parsed.hash !== '' || url.includes('?') || url.includes('#')) {
    throw new ConfigurationError('url must not carry a query string or a fragment: phoenix.js appends /websocket and its own params; pass extra params with the `params` option')
  }
  if (parsed.protocol === 'ws:' && !LOOPBACK.test(parsed.hostname) && !allowInsecure) {
    throw new ConfigurationError(
      `url uses ws:// (no TLS) to ${parsed.hostname}, which is not loopback: the API key would cross the network in clear. Use wss://, or set allowInsecureTransport: true (CLI: --allow-insecure).`,
    )
  }
  return url.replace(/\/websocket\/?$/, '').replace(/\/$/, '')
}

/**
 * Whether the connection chart is in `session.reconnecting.deciding`: waiting for the reconnect
 * chart's answer, which comes within the same processing. The public state does not change there:
 * it changes once the answer is in (reconnecting, suspended or terminated), after the
 * `disconnected` event that says why, so a suspension is not first announced as a reconnect.
 */
function isDeciding(value: ChartStateValue): boolean {
  if (typeof value === 'string') return false
  const session = value.session
  return typeof session === 'object' && session !== null && session.reconnecting === 'deciding'
}
