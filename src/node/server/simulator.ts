/**
 * The platform simulator: a Phoenix V2 protocol server on `ws` that behaves like an agent
 * platform (socket auth by agent_id + API key, the `agent_control:<agent_id>` channel, supersede
 * of an older same-key socket) and lets a test script every peer behaviour the link must survive.
 * The official `phoenix` client works against it unchanged (test/interop).
 *
 * Each control is a named, composable method, so a test reads as one sentence:
 * `sim.refuseUpgrades({ status: 503, retryAfter: '1' })`, `sim.disconnect({ agent: 'a1' })`.
 */
import { EventEmitter } from 'node:events'
import { isUtf8 } from 'node:buffer'
import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { randomBytes, randomUUID } from 'node:crypto'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { WebSocketServer, type RawData, type WebSocket } from 'ws'
import {
  AGENT_ID_PARAM,
  API_KEY_HEADER,
  API_KEY_PARAM,
  CHANNEL_EVENTS,
  CONTROL_EVENT,
  controlTopic,
  decodeBinaryFromClient,
  decodeTextFrameFromClient,
  type ClientDecodeResult,
  hasLoneSurrogate,
  HEARTBEAT_EVENT,
  HEARTBEAT_TOPIC,
  ON_CONFLICT_PARAM,
  SUPERSEDE_EVENT,
  type ClientFrame,
  type WireRef,
  type Payload,
  notPlainObject,
} from '../../protocol.js'
import { JOINS_KEPT, SimConnection, cutField, cutRef, assertSendableClose, type CloseCause, type SimChannel } from './connection.js'
import { SERVER_FLAVORS, type FlavorName, type ServerFlavor } from './flavors.js'
import { decodeV1FromClient, negotiateSerializer, type SerializerVersion } from './serializers.js'
import { requestTooLarge, SIMULATOR_MAX_HEADER_BYTES, tooLargeResponse, type RequestTooLarge } from './request-limits.js'
import { ServerMetrics, type MetricsOptions } from './metrics.js'
import { isRegistry } from '../prometheus.js'
import { PresenceTracker, type PresenceCrossing } from './presence.js'
import { AdminApi } from './admin.js'
import { ControlApi, isLoopbackHost, isLoopbackInterface, requestUrl } from './control-api.js'
import { RunSupervisor, type AgentAborted, type RunSupervisorOptions } from '../../runs.js'
import { classifyClose, classifySupersede, clipText, heartbeatTimeout, type DisconnectReason } from '../../reasons.js'
import { DEFAULT_PRESENCE_POLICY, type PresencePolicy } from '../../../machines/presence-policy.js'
import { redacting, type LinkLog, type Logger } from '../../logger.js'
import { thrownText } from '../../../machines/types.js'
import { checkKnownKeys, describeArgument, unknownKey } from '../../call-checks.js'
import { settleReported } from '../../emitter.js'

/** What an admin token may be: visible ASCII, spaces inside it allowed (an HTTP field value without CR, LF or control characters, RFC 9110 section 5.5). */
const ADMIN_TOKEN = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/

/** Where the simulator logs; defaults to silence. */
export type SimulatorLogger = Pick<Logger, 'info' | 'warn'>

/** Version of the simulator's HTTP API (its OpenAPI document's `info.version`). */
export const SIMULATOR_API_VERSION = '1.0.0'

/** Options of {@link startSimulator}. */
export interface SimulatorOptions {
  /**
   * Interface to listen on. @default '127.0.0.1' — loopback only. A host that is not loopback
   * (`0.0.0.0`, a LAN address, a name other than `localhost`) needs `adminToken`, as the caller's
   * word that other machines may reach it: the token guards the `/admin` routes, while the socket
   * endpoint takes any agent unless `agents` lists them and `/metrics` stays open to all. Without
   * one the simulator refuses to start. A bracketed IPv6 address (`[::1]`) is read without its
   * brackets.
   */
  host?: string
  /** Port; 0 picks a free one. @default 0 */
  port?: number
  /** Socket mount path; clients connect to `<path>/websocket`. @default '/socket' */
  path?: string
  /**
   * Who may connect: a map of agent id to API key (or to the keys valid at once, as during a
   * rotation), or `'any'` for any agent with a non-empty key. {@link PlatformSimulator.setKeys}
   * changes an agent's keys while running. @default 'any'
   */
  agents?: Record<string, string | readonly string[]> | 'any'
  /** Which web server's close codes to use. @default 'phoenix' */
  flavor?: FlavorName
  /**
   * The socket's channel routes, as a Phoenix socket declares them (`channel "room:*",
   * RoomChannel`; phoenix lib/phoenix/socket.ex `channel/3`): an exact topic (`'lobby'`), or a
   * prefix ending in the one `*` a pattern may hold (`'room:*'`; `'*'` routes every topic). A join
   * of a topic no route matches is answered as Phoenix answers it, before any {@link
   * PlatformSimulator.onJoin} rule: `[null, ref, topic, "phx_reply", {"response": {"reason":
   * "unmatched topic"}, "status": "error"}]`, join_ref null (socket.ex `encode_ignore`), and the
   * socket joins nothing. The control channel (`agent_control:*`) is the platform's own and always
   * routed. The reference peer routes `['room:*']` (docs/field-notes.md). @default every topic
   * (a catch-all route, `channel "*"`)
   */
  channels?: readonly string[]
  /** Close a socket that sent nothing for this long (the transport's idle timeout); null never. @default 60000 */
  idleTimeoutMs?: number | null
  /** After a supersede, answer upgrades of that agent with HTTP 429 for this long; 0 disables. @default 0 */
  supersedeCooldownMs?: number
  /** `retry_after` (seconds) sent in supersede payloads. @default 30 */
  supersedeRetryAfterS?: number
  /** Frames kept per socket for assertions (a whole number, or Infinity for all). @default 5000 */
  recordLimit?: number
  /**
   * How many of each record the simulator keeps, the most recent: closed sockets in
   * `connections` (open ones are always kept), `upgrades`, `presence`, `aborts`, the agents
   * whose unanswered upgrades are counted (`unansweredUpgradesOf`), and the events `GET
   * /admin/events` sends again to a reader that resumes (`?after=`, `Last-Event-ID`). A whole
   * number, or Infinity (the default) for all, as a test wants; a long-running server (`phoenix-link
   * serve` sets 10000) bounds its memory with it. A socket no longer kept is unknown to the admin routes.
   * @default Infinity
   */
  historyLimit?: number
  /**
   * Frames (and recorded joins, `joinsReceived`) kept over the records of every closed socket together (each socket's own record is
   * bounded by `recordLimit`, each frame by its cut past 2,000 characters): past it, the oldest
   * closed sockets' frame records are emptied, their other fields kept (`framesForgotten` says how
   * many frames each lost). A whole number, or Infinity (the default) for all; `phoenix-link serve`
   * sets 100000, so that a server left running for days with agents reconnecting keeps tens of
   * megabytes of frames, not gigabytes (about 300 bytes a heartbeat frame).
   * @default Infinity
   */
  historyFrameLimit?: number
  /**
   * Which pages may open a socket, by the upgrade's `Origin` header, as Phoenix's `check_origin`
   * (phoenix/lib/phoenix/socket/transport.ex `check_origin/5`: an upgrade without an Origin, which
   * no browser omits and most other clients do not send, always passes; a refused one is answered
   * 403 with an empty body, before the socket's `connect`). `true`: pages served from loopback
   * only (`localhost`, 127.0.0.0/8, `[::1]`), the counterpart of Phoenix's default, which allows
   * the endpoint's own host: so a page of another site the developer has open cannot connect as an
   * agent under test and supersede it; an opaque origin (`null`: a `file://` page, a sandboxed
   * frame) is refused too. `false`: any origin (the reference peer's config does this). A list:
   * loopback pages and exactly these origins (`'https://app.example:8443'`, as browsers send them).
   * @default true
   */
  checkOrigin?: boolean | readonly string[]
  /** Largest inbound frame in bytes; larger ones are closed with 1009 by `ws`. @default 8388608 */
  maxFrameBytes?: number
  /** Presence policy: the grace window before last-disconnected. @default { graceWindowMs: 0 } */
  presence?: Partial<PresencePolicy>
  /** Run supervisor settings (the bound on an abort hook). */
  runs?: RunSupervisorOptions
  /** Where `GET /metrics` reads from: a prom-client registry and a name prefix. */
  metrics?: MetricsOptions
  /**
   * Extra HTTP routes on the simulator's port, tried before /metrics and /admin/*: return true
   * when the request was answered (the CLI's `serve --dashboard` serves the visualizer page here).
   */
  routes?: (req: IncomingMessage, res: ServerResponse) => boolean
  /** Comment line sent on `GET /admin/events` streams so proxies keep them open. @default 15000 */
  eventStreamKeepAliveMs?: number
  /**
   * The body of the simulator's own refusals (wrong key, revoked agent, bad on_conflict, 409
   * conflict, the 429 after a supersede): `plain`, no body, as stock Phoenix answers a socket
   * whose connect/3 returns :error; `json`, the platform's `{"error": {code, message,
   * request_id}}`; `json_close`, that body and `Connection: close`. The same modes as the
   * reference peer's `REJECT_MODE`. @default 'plain'
   */
  rejectMode?: RejectMode
  /**
   * A token for the HTTP admin routes (src/node/server/control-api.ts): with one, every
   * `/admin/*` request must send `Authorization: Bearer <token>`, from any address; without one,
   * only loopback callers are served. A non-empty string of visible ASCII (spaces inside it
   * allowed), as an HTTP header carries it; anything else is refused at start, since an empty
   * token would open every GET route to any address. @default none
   */
  adminToken?: string
  logger?: SimulatorLogger
}

/** Body modes of the simulator's own refusals; see {@link SimulatorOptions.rejectMode}. */
export type RejectMode = 'plain' | 'json' | 'json_close'

/**
 * A scripted answer to the next upgrade: refuse with this status, Retry-After, body and
 * connection header. The connection stays open for a next request (keep-alive) as Phoenix's
 * servers keep it, for the flavor's `refusalKeepAliveMs`.
 */
export interface UpgradeRefusal {
  /** HTTP status, 400-599. */
  status: number
  /** Retry-After header value, e.g. `'2'` (seconds) or an HTTP date. */
  retryAfter?: string
  /**
   * `'none'`: an empty body (`content-length: 0`), as stock Phoenix sends; `'platform'`: the
   * platform's `{"error": {code, message, request_id}}` JSON for the status; `{ text }`:
   * exactly that text (sent as JSON when it parses as JSON). @default 'none'
   */
  body?: 'none' | 'platform' | { text: string }
  /**
   * `'close'` sends `Connection: close`: a `cowboy` or `phoenix` flavor then closes the
   * connection, a `bandit` one keeps it open as Bandit does. @default 'keep-alive'
   */
  connection?: 'keep-alive' | 'close'
  /** The platform error message of a `'platform'` body. @default the status's own, e.g. 'too many connection attempts' for 429 */
  message?: string
}

/** An upgrade the simulator answered. */
export interface UpgradeRecord {
  /** Milliseconds since the simulator started. */
  at: number
  agentId: string | null
  /** 101 when accepted, else the refusal status. */
  status: number
  /** Why it was refused, or `accepted`. */
  outcome: string
  /**
   * Accepted upgrades only: the ids of the agent's sockets that were still open when this one
   * was accepted (each is then superseded). Empty when the agent had no open socket.
   */
  superseded?: string[]
  /**
   * The upgrade's `on_conflict` query parameter as sent, the one the simulator decided by (the
   * first, when given more than once): `'reject'` (refuse it 409 while the agent has an open
   * socket, a conflict probe), `'supersede'`, any other text (refused 400), or null when absent
   * (the platform then supersedes). Null too for a request whose URL cannot be parsed or whose
   * path is not the socket's (404).
   */
  onConflict: string | null
}

/** Who asked for an upgrade, as its URL says: the agent and its `on_conflict` parameter. */
interface Asker {
  agentId: string | null
  onConflict: string | null
}

/** No agent asked (an unparsable request, a wrong path). */
const NOBODY: Asker = Object.freeze({ agentId: null, onConflict: null })

/** The agent id and `on_conflict` parameter (the first of each) of an upgrade's query. */
function askerIn(params: URLSearchParams): Asker {
  return { agentId: lastParam(params, AGENT_ID_PARAM), onConflict: lastParam(params, ON_CONFLICT_PARAM) }
}

/**
 * A query param's value as Plug reads it: the last of a name given twice (`agent_id=a&agent_id=b`
 * is `b`; Plug.Conn.Query.decode, measured on the reference peer 2026-12-03); null when absent.
 */
function lastParam(params: URLSearchParams, name: string): string | null {
  const all = params.getAll(name)
  return all.length === 0 ? null : all[all.length - 1]!
}

/** {@link askerIn} of an upgrade request; {@link NOBODY} when its URL cannot be parsed. */
function askerOf(req: IncomingMessage): Asker {
  try {
    return askerIn(requestUrl(req.url).searchParams)
  } catch {
    return NOBODY
  }
}

/** A join reply's response: fixed, or made from the join (e.g. `({ topic }) => ({ joined: topic })`). */
export type JoinResponse = Payload | ((join: { topic: string; payload: Payload; connection: SimConnection }) => Payload)

/** How the simulator answers a channel join. */
export type JoinOutcome = (
  | { reply: 'ok'; response?: JoinResponse }
  | { reply: 'error'; response: JoinResponse }
  /** Never reply: the client's join times out. */
  | { reply: 'none' }
  /** Hold the join until the test answers it with {@link PlatformSimulator.answerHeldJoin}. */
  | { reply: 'hold' }
) & {
  /** Runs just before the reply is sent (same tick, so same TCP read for the client): e.g. a supersede push. */
  before?: (connection: SimConnection) => void
  /** Runs just after the reply is sent (same tick). */
  after?: (connection: SimConnection) => void
}

/** Which sockets a control applies to. */
export type Target = SimConnection | { agent: string } | { socket: string } | 'all'

/** Handler of client pushes on app channels; returns the reply, or null for no reply. */
export type PushHandler = (push: { connection: SimConnection; topic: string; event: string; payload: ClientFrame['payload'] }) =>
  | { status: string; response: Payload }
  | null

const DEFAULT_PUSH_HANDLER: PushHandler = () => ({ status: 'ok', response: {} })

/** What a socket's records hold toward `historyFrameLimit`: its recorded frames and joins. */
function recorded(c: SimConnection): number {
  return c.frames.length + c.joinsReceived.length
}

/** The `checkOrigin` option checked and copied. @throws {TypeError} for anything but a boolean or a list of origin strings. */
function checkOriginOf(value: unknown): boolean | readonly string[] {
  if (value === undefined) return true
  if (typeof value === 'boolean') return value
  if (!Array.isArray(value)) throw new TypeError(`checkOrigin must be true, false or a list of origins such as ['https://app.example'], got ${shownAs(value)}`)
  // Each as a browser sends it (RFC 6454 serialization: scheme://host[:port], lower case, no
  // default port), so `https://App.example:443/` allows the page `https://app.example`.
  return Object.freeze(
    value.map((given: unknown) => {
      const origin = typeof given === 'string' ? originOf(given) : null
      if (origin === null) throw new TypeError(`checkOrigin: ${shownAs(given)} is not an origin: give scheme://host[:port], such as 'https://app.example:8443' (no path, query or fragment)`)
      return origin
    }),
  )
}

/** The serialized origin of `text` (`new URL(text).origin`), or null when it is not an http(s) origin with at most a `/` path. */
function originOf(text: string): string | null {
  try {
    const url = new URL(text)
    if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username !== '' || url.password !== '' || url.pathname !== '/' || url.search !== '' || url.hash !== '') return null
    if (text.endsWith('#') || text.endsWith('?')) return null
    return url.origin
  } catch {
    return null
  }
}

/** Error codes of the platform's refusal body, by status (docs/field-notes.md "The platform's control channel"). */
const ERROR_CODES: Record<number, string> = {
  400: 'invalid_on_conflict',
  401: 'unauthenticated',
  403: 'unauthenticated',
  409: 'connection_conflict',
  429: 'too_many_requests',
  503: 'tracking_failed',
}

/** The platform body's default message, by status (the reference peer's platform model, real-phoenix refusal.ex). */
const ERROR_MESSAGES: Record<number, string> = {
  400: 'on_conflict must be reject or supersede',
  401: 'authentication required',
  403: 'unknown agent or wrong API key',
  409: 'an open connection holds this agent id',
  429: 'too many connection attempts',
  503: 'connection tracking failed',
}

/** How long a refusal sent with `Connection: close` waits for the client to end its side before the socket is cut. */
const CLOSING_LINGER_MS = 1_000

/** Whether `key` is one of an agent's valid keys. */
function keyMatches(valid: string | readonly string[] | undefined, key: string): boolean {
  return typeof valid === 'string' ? valid === key : Array.isArray(valid) && valid.includes(key)
}

/**
 * Throws unless `agents` is left out, `'any'`, or a map of agent id to a key or a list of keys: a
 * map of anything else would refuse every agent, far from the mistake.
 *
 * @throws {TypeError} naming the option, or the agent whose keys are not a key or a list of them.
 */
function checkAgents(agents: unknown): void {
  if (agents === undefined || agents === 'any') return
  if (agents === null || typeof agents !== 'object' || Array.isArray(agents)) {
    throw new TypeError(`agents must be 'any' or a map of agent id to an API key (or a list of keys), got ${describeArgument(agents)}`)
  }
  for (const [id, keys] of Object.entries(agents)) {
    if (typeof keys === 'string' || (Array.isArray(keys) && keys.every((k) => typeof k === 'string'))) continue
    // Its type, never its value: the value may hold a key.
    const got = Array.isArray(keys) ? `a list holding a ${typeof keys.find((k) => typeof k !== 'string')}` : keys === null ? 'null' : `a ${typeof keys}`
    throw new TypeError(`agents[${JSON.stringify(id)}] must be an API key or a list of keys, got ${got}`)
  }
}

/**
 * `pattern` without its `g` and `y` flags: `test()` of a global or sticky RegExp resumes at the
 * pattern's `lastIndex` and so misses every other match of the same text; the simulator tests
 * each agent id and topic anew.
 */
function statelessPattern(pattern: RegExp): RegExp {
  return pattern.global || pattern.sticky ? new RegExp(pattern.source, pattern.flags.replace(/[gy]/g, '')) : pattern
}

/**
 * `payload` as JSON carries it (toJSON applied, undefined members dropped): what a control that
 * sends it puts on the wire and in its records. Phoenix's V2 serializer sends JSON, so a payload
 * JSON cannot carry is the caller's error, refused before any socket is touched or marked. A JSON
 * value that is no object (a string, an array, null) goes through: Phoenix's own pushes carry
 * maps, and a test sends other values to see what a client does with them.
 *
 * @param control the control's name for the error, e.g. `supersede()`.
 * @throws {TypeError} naming the control, for a payload `JSON.stringify` refuses (a BigInt, a
 *   cycle, a getter that throws) or turns into no JSON at all (undefined, a function).
 */
function asJson(control: string, payload: Payload): Payload {
  let text: string | undefined
  try {
    text = JSON.stringify(payload)
  } catch (error) {
    throw notJson(control, thrownText(error))
  }
  if (text === undefined) throw notJson(control, `JSON.stringify gives nothing for ${typeof payload}`)
  return JSON.parse(text) as Payload
}

/** The TypeError of a control whose payload JSON cannot carry, saying why. */
function notJson(control: string, why: string): TypeError {
  return new TypeError(`simulator: ${control} payload cannot be sent as JSON: ${why}`)
}

/** Whether `text` parses as JSON. */
function isJson(text: string): boolean {
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

/** The wall-clock date of an HTTP response (RFC 9110 section 6.6.1). */
function httpDate(): string {
  return new Date().toUTCString()
}

/** Every option of {@link SimulatorOptions}: another key is a typo, refused. */
const SIMULATOR_OPTION_KEYS: ReadonlySet<string> = new Set([
  'host', 'port', 'path', 'agents', 'flavor', 'channels', 'idleTimeoutMs', 'supersedeCooldownMs', 'supersedeRetryAfterS', 'recordLimit', 'historyLimit', 'historyFrameLimit', 'checkOrigin',
  'maxFrameBytes', 'presence', 'runs', 'metrics', 'routes', 'eventStreamKeepAliveMs', 'rejectMode', 'adminToken', 'logger',
] satisfies Array<keyof SimulatorOptions>)

/** The keys of the nested option objects. */
const NESTED_OPTION_KEYS: Record<'presence' | 'runs' | 'metrics', ReadonlySet<string>> = {
  presence: new Set(Object.keys(DEFAULT_PRESENCE_POLICY)),
  runs: new Set(['hookTimeoutMs', 'now'] satisfies Array<keyof RunSupervisorOptions>),
  metrics: new Set(['registry', 'prefix'] satisfies Array<keyof MetricsOptions>),
}

/** @throws {RangeError} naming the first own key of `value` that `known` lacks (`where` is its path prefix). */
function unknownKeys(where: string, value: object, known: ReadonlySet<string>): void {
  const unknown = unknownKey(value, known)
  if (unknown !== undefined) throw new RangeError(`unknown simulator option ${JSON.stringify(`${where}${unknown}`)}; known: ${[...known].join(', ')}`)
}

/**
 * Starts a simulator on loopback and resolves once it listens.
 *
 * @example
 * const sim = await startSimulator({ agents: { 'agent-1': 'key-1' } })
 * // ... createLink({ url: sim.url, agentId: 'agent-1', apiKey: 'key-1' }) ...
 * await sim.stop()
 * @throws {Error} (rejects) when the port cannot be bound.
 * @throws {RangeError} (rejects) for an option out of range (a numeric option that is not a whole
 *   number in its range, an unknown flavor or rejectMode), naming it.
 * @throws {TypeError} (rejects) when `presence`, `runs` or `metrics` is not an object,
 *   `metrics.registry` is not a prom-client Registry, or `adminToken` is not a non-empty string
 *   of visible ASCII.
 * @throws {RangeError} (rejects) for an unknown option, at the top or inside `presence`, `runs`
 *   or `metrics` (a typo is an error, never ignored).
 * @throws {RangeError} (rejects) for a `host` that is not loopback when no `adminToken` is set.
 */
export async function startSimulator(options: SimulatorOptions = {}): Promise<PlatformSimulator> {
  const sim = new PlatformSimulator(options)
  await sim.listen()
  return sim
}

/**
 * The close code `ws` sent when it failed a connection on a frame it refused: the status ws keeps
 * on the error under its `status-code` symbol (ws lib/receiver.js; pinned ws 8.23); null for an
 * error that carries none (a socket error, not a refused frame).
 */
function wsStatusCode(error: Error): number | null {
  const key = Object.getOwnPropertySymbols(error).find((s) => s.description === 'status-code')
  const code = key === undefined ? undefined : (error as unknown as Record<symbol, unknown>)[key]
  return typeof code === 'number' ? code : null
}

/**
 * Throws when a scripted refusal could not be written as the HTTP response it describes: a
 * `retryAfter` with a character outside an HTTP field value (RFC 9110 section 5.5: visible ASCII,
 * space and tab; a CR or LF would end the header early and inject others), a status outside
 * 400-599, a body other than `'none'`, `'platform'` or `{ text: string }`, a connection other than
 * `'keep-alive'` or `'close'`, or a message that is not a string.
 *
 * @throws {TypeError} naming the field.
 */
/**
 * Checks the options object of a control (`undefined` is none): an object holding only `known`
 * keys, as its HTTP route's body is (a misspelt `close` of supersede() would be ignored and the
 * close still sent).
 *
 * @throws {TypeError} naming the control and the first unknown key, or what the options are.
 */
function checkControlOptions(where: string, options: unknown, known: ReadonlySet<string>): void {
  if (options === undefined) return
  if (options === null || typeof options !== 'object') throw new TypeError(`${where}: options must be an object, got ${shownAs(options)}`)
  checkKnownKeys(options, known, where)
}

const REFUSAL_KEYS: ReadonlySet<string> = new Set(['status', 'retryAfter', 'body', 'connection', 'message'])
const JOIN_OUTCOME_KEYS: ReadonlySet<string> = new Set(['reply', 'response', 'before', 'after'])

/**
 * Checks a join rule as `POST /admin/join-rule` checks its body: a reply of ok, error (with a
 * response), none or hold; a response that is a plain object or a function giving one; hooks
 * that are functions; `times` a whole number of at least 1 (or Infinity: always).
 *
 * @throws {TypeError} naming what is wrong (a join of a misspelt reply would never be answered).
 * @throws {RangeError} for `times` out of range.
 */
function checkJoinOutcome(outcome: JoinOutcome, times: number, where = 'onJoin()'): void {
  if (outcome === null || typeof outcome !== 'object') throw new TypeError(`${where}: the outcome must be an object { reply, response? }, got ${shownAs(outcome)}`)
  checkKnownKeys(outcome, JOIN_OUTCOME_KEYS, where, 'outcome key')
  const { reply } = outcome
  if (reply !== 'ok' && reply !== 'error' && reply !== 'none' && reply !== 'hold') throw new TypeError(`${where}: reply must be 'ok', 'error', 'none' or 'hold', got ${shownAs(reply)}`)
  const response = (outcome as { response?: unknown }).response
  if (reply === 'error' && response === undefined) throw new TypeError(`${where}: an 'error' reply needs a response (the join's error reply carries it, e.g. { reason: 'unauthorized' })`)
  if ((reply === 'none' || reply === 'hold') && response !== undefined) throw new TypeError(`${where}: a '${reply}' reply sends no response`)
  if (response !== undefined && typeof response !== 'function' && notPlainObject(response) !== null) {
    throw new TypeError(`${where}: the response must be a plain object (a Phoenix map) or a function giving one, got ${notPlainObject(response)}`)
  }
  for (const hook of ['before', 'after'] as const) {
    const fn = (outcome as { before?: unknown; after?: unknown })[hook]
    if (fn !== undefined && typeof fn !== 'function') throw new TypeError(`${where}: ${hook} must be a function (connection) => void, got ${shownAs(fn)}`)
  }
  if (!(times === Number.POSITIVE_INFINITY || (Number.isInteger(times) && times >= 1))) throw new RangeError(`${where}: times must be a whole number >= 1 (or Infinity: always), got ${shownAs(times)}`)
}

function checkRefusal(refusal: UpgradeRefusal): void {
  if (refusal === null || typeof refusal !== 'object') throw new TypeError(`a refusal is an object { status, retryAfter?, body?, connection?, message? }, got ${shownAs(refusal)}`)
  checkKnownKeys(refusal, REFUSAL_KEYS, 'refusal', 'key')
  if (!Number.isInteger(refusal.status) || refusal.status < 400 || refusal.status > 599) throw new TypeError(`refusal status must be a whole number in 400-599, got ${String(refusal.status)}`)
  if (refusal.retryAfter !== undefined && (typeof refusal.retryAfter !== 'string' || !/^[\t\x20-\x7e]*$/.test(refusal.retryAfter))) {
    throw new TypeError(`refusal retryAfter must be an HTTP field value (visible ASCII, spaces and tabs), got ${JSON.stringify(refusal.retryAfter)}`)
  }
  const { body } = refusal
  if (!(body === undefined || body === 'none' || body === 'platform' || (typeof body === 'object' && body !== null && typeof body.text === 'string'))) {
    throw new TypeError(`refusal body must be 'none', 'platform' or { text: string }, got ${shownAs(body)}`)
  }
  if (!(refusal.connection === undefined || refusal.connection === 'keep-alive' || refusal.connection === 'close')) {
    throw new TypeError(`refusal connection must be 'keep-alive' or 'close', got ${shownAs(refusal.connection)}`)
  }
  if (refusal.message !== undefined && typeof refusal.message !== 'string') throw new TypeError(`refusal message must be a string, got ${shownAs(refusal.message)}`)
}

/**
 * A running simulator. Emits `connection` (a SimConnection accepted: after the `presence`
 * crossing it causes, so a socket a `first-connected` listener closed is already `closing` there),
 * `closed` (a SimConnection closed), `refused` (an UpgradeRecord) and `change` after anything it records, so `waitFor`
 * can re-check a condition without polling. A listener that throws or rejects is logged (the
 * logger's `warn`) and never thrown into the simulator; the listeners after it still hear the event.
 */
export class PlatformSimulator extends EventEmitter {
  /** The flavor in use. */
  readonly flavor: ServerFlavor
  /** Every socket accepted, in order, open or closed (past `historyLimit`, only the most recent closed ones). */
  readonly connections: SimConnection[] = []
  /** Every upgrade answered, in order (the most recent `historyLimit`). */
  readonly upgrades: UpgradeRecord[] = []

  private readonly http: Server
  private readonly wss: WebSocketServer
  private readonly options: Required<Omit<SimulatorOptions, 'logger' | 'agents' | 'presence' | 'runs' | 'metrics' | 'routes' | 'adminToken' | 'channels'>> & {
    agents: Record<string, string | readonly string[]> | 'any'
  }
  /**
   * The run supervisor: start runs per agent; they are aborted when the agent's last connection
   * ends. A run started while the agent has no connection waits for its next last-disconnected;
   * `stop()` aborts every run still registered (reason `null`), and once it is called `startRun()`
   * throws (the supervisor is closed: nothing would abort a run started then).
   */
  readonly runs: RunSupervisor
  /** The metrics `GET /metrics` serves. */
  readonly metrics: ServerMetrics
  /** Every presence crossing, in order (the most recent `historyLimit`). */
  readonly presence: PresenceCrossing[] = []
  /** Every abort report, in order (the most recent `historyLimit`). */
  readonly aborts: AgentAborted[] = []
  private readonly tracker: PresenceTracker
  private readonly admin: AdminApi
  /** Abort rounds still settling (hooks running), for stop(). */
  private readonly abortsInFlight = new Set<Promise<unknown>>()
  private readonly logger: Pick<LinkLog, 'info' | 'warn'>
  private readonly started = performance.now()
  private readonly startedAt = Date.now()
  private readonly refusals: UpgradeRefusal[] = []
  private readonly agentRefusals = new Map<string, UpgradeRefusal[]>()
  private readonly joinRules: Array<{ match: string | RegExp; outcome: JoinOutcome; times: number }> = []
  /** The channel routes ({@link SimulatorOptions.channels}): exact topics and prefixes; null routes every topic. */
  private readonly channelRoutes: { exact: ReadonlySet<string>; prefixes: readonly string[] } | null
  private readonly cooldowns = new Map<string, number>()
  private readonly revoked = new Set<string>()
  /** Refused upgrades' connections kept open for a next request (keep-alive), until they close or stop(). */
  private readonly keptAlive = new Set<Duplex>()
  /** Upgrades' TCP connections given the simulator's own listeners (tend()), weakly. */
  private readonly tended = new WeakSet<Duplex>()
  private pushHandler: PushHandler = DEFAULT_PUSH_HANDLER
  /** Upgrades held unanswered, oldest first: by the test's hold ({@link holdUpgrades}) or by a freeze. */
  private held: Array<{ agentId: string | null; gone: () => boolean; answer: (refusal?: UpgradeRefusal | 'drop') => void }> = []
  /** Held upgrades that ended with no answer, by agent id (null: a request without one). */
  private readonly unanswered = new Map<string | null, number>()
  /** Sockets whose presence ended (endPresence), weakly: a socket trimmed from the records is forgotten. */
  private readonly presenceEnded = new WeakSet<SimConnection>()
  /** Per agent: its sockets in `connections`, in order (what accepted(agentId) and live(agentId) read). */
  private readonly socketsOf = new Map<string, SimConnection[]>()
  /** Per agent: its upgrades in `upgrades`, and how many of them were refused. */
  private readonly upgradesOf = new Map<string, { upgrades: number; refused: number }>()
  /** The refused upgrades in `upgrades`. */
  private refusedUpgrades = 0
  /** Frames in the records of the closed sockets still in `connections` (bounded by `historyFrameLimit`). */
  private closedFrames = 0
  /** The test's hold ({@link holdUpgrades}): of the agents `match` matches, or of all when null; null when none. */
  private hold: { match: RegExp | null } | null = null
  /** Freezes not yet thawed: while any is, every upgrade is held and the sockets they froze are stalled. */
  private freezes = 0
  /** Last thaws whose held upgrades are not answered yet (just after the reads they let in): they still hold. */
  private thawing = 0
  /** Sockets the freezes stalled (not those the test stalled, before or during them): the last thaw resumes them. */
  private readonly frozen = new Set<SimConnection>()
  /** Joins held unanswered, each with the later frames of the same join (same join_ref), which wait behind it. */
  private readonly heldJoinFrames: Array<{ connection: SimConnection; frame: ClientFrame; behind: ClientFrame[] }> = []
  /**
   * Frames for joined channels, handled on the next turn as Phoenix's channel processes handle
   * theirs (`dispatch`): what the socket answers itself (a heartbeat, "unmatched topic", a join)
   * goes out first.
   */
  private channelWork: ChannelWork[] = []
  private channelTurn: NodeJS.Immediate | null = null
  /** Channel work of stalled (frozen) sockets, in order: handled once the socket is thawed, dropped when it closes. */
  private readonly parkedWork = new Map<SimConnection, ChannelWork[]>()
  private nextSocket = 1
  private boundPort = 0
  private stopping: Promise<void> | null = null
  /** Set once stop() has finished: a wait can no longer be met by anything the simulator records. */
  private stopped = false
  /** Waits of waitFor() still pending: stop() settles each as it finishes (met, or rejected). */
  private readonly waits = new Set<() => void>()

  /** @internal use {@link startSimulator}. */
  constructor(options: SimulatorOptions) {
    super()
    this.setMaxListeners(0)
    if (options === null || typeof options !== 'object') throw new TypeError(`simulator options must be an object, got ${options === null ? 'null' : typeof options}`)
    unknownKeys('', options, SIMULATOR_OPTION_KEYS)
    checkAgents(options.agents)
    this.channelRoutes = channelRoutesOf(options.channels)
    this.options = {
      // `[::1]` as a URL writes it is the address `::1` to listen on.
      host: typeof options.host === 'string' && /^\[[^\]]*\]$/.test(options.host) ? options.host.slice(1, -1) : (options.host ?? '127.0.0.1'),
      port: options.port ?? 0,
      path: typeof options.path === 'string' ? options.path.replace(/\/$/, '') : (options.path ?? '/socket'),
      // A copy with no prototype: an agent id is any text (`constructor`, `__proto__` too), and
      // setKeys() changes the simulator's keys, not the caller's object.
      agents: options.agents === undefined || options.agents === 'any' ? 'any' : Object.assign(Object.create(null) as Record<string, string | readonly string[]>, options.agents),
      flavor: options.flavor ?? 'phoenix',
      idleTimeoutMs: options.idleTimeoutMs === undefined ? 60_000 : options.idleTimeoutMs,
      supersedeCooldownMs: options.supersedeCooldownMs ?? 0,
      supersedeRetryAfterS: options.supersedeRetryAfterS ?? 30,
      recordLimit: options.recordLimit ?? 5000,
      historyLimit: options.historyLimit ?? Number.POSITIVE_INFINITY,
      historyFrameLimit: options.historyFrameLimit ?? Number.POSITIVE_INFINITY,
      checkOrigin: checkOriginOf(options.checkOrigin),
      maxFrameBytes: options.maxFrameBytes ?? 8 * 1024 * 1024,
      eventStreamKeepAliveMs: options.eventStreamKeepAliveMs ?? 15_000,
      rejectMode: options.rejectMode ?? 'plain',
    }
    // An empty host would listen on every interface (Node's default), a path without its slash would
    // make a url that is not one: both are typos, refused here.
    if (typeof this.options.host !== 'string' || this.options.host.trim() === '') {
      throw new TypeError(`host must be an interface name or address such as '127.0.0.1' (an empty one would listen on every interface), got ${shownAs(options.host)}`)
    }
    // '/' mounts the socket at the root (its path normalizes to '', the upgrade route is /websocket).
    const rawPath = options.path ?? '/socket'
    if (typeof rawPath !== 'string' || !rawPath.startsWith('/') || /[\s?#]/.test(rawPath)) {
      throw new TypeError(`path must start with '/' and hold no spaces, '?' or '#', such as '/socket'; got ${shownAs(options.path)}`)
    }
    if (!['plain', 'json', 'json_close'].includes(this.options.rejectMode)) {
      throw new RangeError(`rejectMode must be plain, json or json_close, got ${String(options.rejectMode)}`)
    }
    const idle = this.options.idleTimeoutMs
    if (idle !== null && !(Number.isInteger(idle) && idle >= 1 && idle <= 2 ** 31 - 1)) {
      throw new RangeError(`idleTimeoutMs must be null or a whole number of milliseconds in [1, 2^31-1], got ${String(idle)}`)
    }
    // Numbers a typo or a unit slip would turn into a silent misbehaviour (a keep-alive comment every
    // tick, a frame record that never caps) are refused here, naming the option.
    const whole = (name: keyof SimulatorOptions, value: unknown, min: number, max: number) => {
      if (!(Number.isInteger(value) && (value as number) >= min && (value as number) <= max)) {
        throw new RangeError(`${name} must be a whole number in [${min}, ${max === 2 ** 31 - 1 ? '2^31-1' : max}], got ${String(value)}`)
      }
    }
    whole('supersedeCooldownMs', this.options.supersedeCooldownMs, 0, 2 ** 31 - 1)
    // Node's listen() takes a numeric string as a port too: refused, as the other numbers are.
    whole('port', this.options.port, 0, 65_535)
    // Not a function, the routes would throw on every request (every answer a 500, /metrics too).
    if (options.routes !== undefined && typeof options.routes !== 'function') {
      throw new TypeError(`routes must be a function (req, res) => boolean (true: it answered the request), got ${shownAs(options.routes)}`)
    }
    // Infinity keeps every frame.
    if (this.options.recordLimit !== Number.POSITIVE_INFINITY) whole('recordLimit', this.options.recordLimit, 0, Number.MAX_SAFE_INTEGER)
    if (this.options.historyLimit !== Number.POSITIVE_INFINITY) whole('historyLimit', this.options.historyLimit, 0, Number.MAX_SAFE_INTEGER)
    if (this.options.historyFrameLimit !== Number.POSITIVE_INFINITY) whole('historyFrameLimit', this.options.historyFrameLimit, 0, Number.MAX_SAFE_INTEGER)
    whole('maxFrameBytes', this.options.maxFrameBytes, 1, Number.MAX_SAFE_INTEGER)
    whole('eventStreamKeepAliveMs', this.options.eventStreamKeepAliveMs, 1, 2 ** 31 - 1)
    const retryAfter = this.options.supersedeRetryAfterS
    if (!(typeof retryAfter === 'number' && Number.isFinite(retryAfter) && retryAfter >= 0)) {
      throw new RangeError(`supersedeRetryAfterS must be a finite number of seconds >= 0, got ${String(retryAfter)}`)
    }
    const token: unknown = options.adminToken
    if (token !== undefined && !(typeof token === 'string' && ADMIN_TOKEN.test(token))) {
      throw new TypeError(
        `adminToken must be a non-empty string of visible ASCII (spaces inside it allowed), as an Authorization header carries it; got ${typeof token === 'string' ? (token === '' ? 'an empty string' : 'a string with other characters, or spaces at an end') : token === null ? 'null' : typeof token}`,
      )
    }
    // Reachable from other machines, the simulator would take any agent and show its metrics to
    // anyone: that takes a token, as its HTTP routes do to serve a caller that is not loopback.
    if (token === undefined && !isLoopbackInterface(this.options.host)) {
      throw new RangeError(
        `host ${JSON.stringify(this.options.host)} is not a loopback interface: other machines could reach the simulator there (its socket endpoint takes any agent unless agents lists them, and /metrics is open to all); set adminToken to listen beyond loopback anyway (the /admin routes then require it), or use '127.0.0.1'`,
      )
    }
    for (const name of ['presence', 'runs', 'metrics'] as const) {
      const value = options[name]
      if (value !== undefined && (value === null || typeof value !== 'object')) throw new TypeError(`${name} must be an object of options, got ${value === null ? 'null' : typeof value}`)
      // A typo is an error, never a default silently kept (a grace window of 0, unbounded records).
      if (value !== undefined) unknownKeys(`${name}.`, value, NESTED_OPTION_KEYS[name])
    }
    const registry: unknown = options.metrics?.registry
    // null, as undefined, is a registry of its own.
    if (registry !== undefined && registry !== null && !isRegistry(registry)) throw new TypeError('metrics.registry must be a prom-client Registry')
    const flavor = SERVER_FLAVORS[this.options.flavor]
    if (!flavor) throw new RangeError(`unknown flavor ${String(options.flavor)}; use one of ${Object.keys(SERVER_FLAVORS).join(', ')}`)
    this.flavor = flavor
    // The host's logger, called as the link calls it (pino's `(fields, message)`, the console's
    // `(message, fields)`); it runs inside socket and presence callbacks, so its errors are swallowed.
    this.logger = redacting(options.logger, () => [])
    // Abort reports on the records' time base (milliseconds since start) unless the host gives a clock.
    this.runs = new RunSupervisor({ ...options.runs, now: options.runs?.now ?? (() => this.now()) })
    // Each report is recorded as its run's hook settles, not once the slowest of its principal's has.
    this.runs.onAborted((report) => this.recordAbort(report))
    this.metrics = new ServerMetrics(options.metrics)
    this.tracker = new PresenceTracker((crossing) => this.onCrossing(crossing), options.presence, (what) => this.logger.warn('presence ignored', { what }))
    this.admin = new AdminApi({
      metrics: this.metrics,
      connections: () =>
        this.connections
          .filter((c) => c.state !== 'closed')
          .map((c) => ({
            principal: c.agentId,
            socket: c.id,
            since: new Date(this.startedAt + c.openedAt).toISOString(),
            state: c.stalled ? ('stalled' as const) : (c.state as 'open' | 'closing'),
            channels: [...c.channels.keys()],
          })),
      keepAliveMs: this.options.eventStreamKeepAliveMs,
      replayLimit: this.options.historyLimit,
      control: new ControlApi(this, options.adminToken ?? null, SIMULATOR_API_VERSION),
    })
    const routes = options.routes
    // Node's own cap on a request's head (16 KiB by default) would answer before the flavor's.
    this.http = createServer({ maxHeaderSize: SIMULATOR_MAX_HEADER_BYTES }, (req, res) => {
      // The web server refuses a request past its parser's limits before any route sees it, as an upgrade.
      const tooLarge = requestTooLarge(req, this.flavor.requestParser)
      if (tooLarge) {
        this.endWith(req.socket, tooLargeResponse(tooLarge.status, this.flavor.requestParser))
        return
      }
      // What a host's route or an admin route throws must not take the simulator (and every
      // attached agent) down: it is answered 500. A host's error is its own, so not echoed.
      let hostRoute = true
      try {
        if (routes?.(req, res)) return
        hostRoute = false
        this.admin.handle(req, res)
      } catch (error) {
        this.logger.warn(hostRoute ? 'an extra HTTP route threw' : 'an admin route threw', { url: req.url, error: thrownText(error) })
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ error: hostRoute ? { code: 'route_failed', message: 'the route threw' } : { code: 'admin_failed', message: thrownText(error) } }))
      }
    })
    this.wss = new WebSocketServer({ noServer: true, maxPayload: this.options.maxFrameBytes, clientTracking: false })
    this.wss.on('headers', (lines: string[]) => this.upgradeHead(lines))
    this.http.on('upgrade', (req, socket, head) => this.handleUpgrade(req, socket, head))
  }

  /** @internal */
  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.http.once('error', reject)
      this.http.listen(this.options.port, this.options.host, () => {
        this.http.off('error', reject)
        const address = this.http.address()
        this.boundPort = typeof address === 'object' && address ? address.port : this.options.port
        this.logger.info('simulator listening', { url: this.url, flavor: this.flavor.name })
        this.metrics.running(true)
        resolve()
      })
    })
  }

  /** The port it listens on. */
  get port(): number {
    return this.boundPort
  }

  /** The endpoint URL for clients, e.g. `ws://127.0.0.1:41234/socket` (phoenix.js appends `/websocket`). */
  get url(): string {
    const host = this.options.host.includes(':') ? `[${this.options.host}]` : this.options.host
    return `ws://${host}:${this.boundPort}${this.options.path}`
  }

  /** Open sockets, of one agent or of all. */
  live(agentId?: string): SimConnection[] {
    if (agentId === undefined) return this.connections.filter((c) => c.live)
    return (this.socketsOf.get(agentId) ?? []).filter((c) => c.live)
  }

  /**
   * Resolves when every socket the simulator accepted, of `agentId` or of every agent, is closed
   * on its side (ws reported its close: the socket ended and its idle and close timers are
   * cleared). A link's `disconnect()` resolves when its own end is closed; a test whose simulator
   * outlives it awaits this too, so nothing of the test is left open on the server.
   *
   * @param options.timeoutMs how long to wait, default 5000
   * @throws {Error} (rejects) after `timeoutMs`, naming the sockets still open
   */
  settled(agentId?: string, options: { timeoutMs?: number } = {}): Promise<void> {
    try {
      checkControlOptions('settled()', options, new Set(['timeoutMs']))
    } catch (error) {
      return Promise.reject(error)
    }
    const open = () => this.accepted(agentId).filter((c) => c.state !== 'closed')
    return this.waitFor(() => open().length === 0, {
      timeoutMs: options.timeoutMs ?? 5000,
      what: `the sockets of ${agentId ?? 'every agent'} to close (${open().map((c) => c.id).join(', ')} open)`,
    })
  }

  /** Sockets ever accepted, of one agent or of all. */
  accepted(agentId?: string): SimConnection[] {
    return agentId === undefined ? [...this.connections] : [...(this.socketsOf.get(agentId) ?? [])]
  }

  /**
   * Every upgrade of `agentId` the server has seen: answered (in `upgrades`), held, or ended
   * unanswered (see {@link unansweredUpgradesOf}); as long as nothing was forgotten under
   * `historyLimit`. A client's count of the upgrades it sent, compared with this, says whether they
   * have all reached the server.
   */
  upgradesSeenOf(agentId: string): number {
    return this.upgradeCounts(agentId).upgrades + this.heldUpgradesOf(agentId) + this.unansweredUpgradesOf(agentId)
  }

  /**
   * @internal How many of the upgrade records kept (`upgrades`) are of `agentId` (every agent when
   * undefined), and how many of those were refused: read by the HTTP route's long-poll waits on
   * every change, so kept per agent rather than counted over the whole record.
   */
  upgradeCounts(agentId?: string): { upgrades: number; refused: number } {
    if (agentId === undefined) return { upgrades: this.upgrades.length, refused: this.refusedUpgrades }
    const counts = this.upgradesOf.get(agentId)
    return counts === undefined ? { upgrades: 0, refused: 0 } : { ...counts }
  }

  /**
   * Close frames the simulator sent, one per socket it closed, in the order the sockets were
   * accepted: the socket, its agent, the code and reason, and when it was sent (`at`, ms since the
   * simulator started).
   */
  get closesSent(): Array<{ socket: string; agentId: string; code: number; reason: string; at: number }> {
    return this.connections
      .filter((c) => c.closeSent)
      .map((c) => ({ socket: c.id, agentId: c.agentId, code: c.closeSent!.code, reason: c.closeSent!.reason, at: c.closeSentAt ?? c.closedAt ?? c.openedAt }))
  }

  // ---- scripting ---------------------------------------------------------------------------

  /**
   * Answers the next upgrades, one each, with these refusals (then accepts again).
   *
   * @throws {TypeError} for a refusal that could not be written: a status outside 400-599, a
   *   `retryAfter` that is not an HTTP field value; none of them is queued.
   */
  refuseUpgrades(...refusals: UpgradeRefusal[]): this {
    this.assertRunning('refuseUpgrades()')
    for (const refusal of refusals) checkRefusal(refusal)
    this.refusals.push(...refusals)
    return this
  }

  /**
   * Answers the next upgrades of one agent, one each, with these refusals (then accepts its
   * upgrades again); other agents' upgrades are not affected. Used before the refusals of
   * {@link refuseUpgrades}.
   *
   * @throws {TypeError} as {@link refuseUpgrades} does; none of them is queued.
   */
  refuseUpgradesOf(agentId: string, ...refusals: UpgradeRefusal[]): this {
    this.assertRunning('refuseUpgradesOf()')
    for (const refusal of refusals) checkRefusal(refusal)
    const queue = this.agentRefusals.get(agentId) ?? []
    queue.push(...refusals)
    this.agentRefusals.set(agentId, queue)
    return this
  }

  /**
   * Answers joins of a topic (exact string or RegExp) with `outcome`, `times` times (default:
   * always). Later rules take precedence. Without a rule a join succeeds. A rule is the channel's
   * join/3: a join of a topic no channel route matches ({@link SimulatorOptions.channels}) never
   * reaches one, and is answered "unmatched topic", as Phoenix routes before any channel runs.
   *
   * @throws {TypeError} for an outcome its HTTP route would refuse (a reply other than ok, error,
   *   none or hold; an error with no response; an unknown key; a response that is not a plain
   *   object or a function), and {RangeError} for `times` that is not a whole number >= 1.
   */
  onJoin(match: string | RegExp, outcome: JoinOutcome, times = Number.POSITIVE_INFINITY): this {
    this.assertRunning('onJoin()')
    checkJoinOutcome(outcome, times)
    this.joinRules.unshift({ match: typeof match === 'string' ? match : statelessPattern(match), outcome, times })
    return this
  }

  /**
   * Holds every upgrade from now on (of the agents `agents` matches, when given) unanswered, so
   * the client stays `connecting`, until the returned function is called or a test answers one
   * with {@link answerHeldUpgrade}; then the held ones are answered as usual.
   */
  holdUpgrades(agents?: RegExp): () => void {
    this.assertRunning('holdUpgrades()')
    this.hold = { match: agents === undefined ? null : statelessPattern(agents) }
    return () => {
      this.hold = null
      this.answerUnheld()
    }
  }

  /** Whether an upgrade of `agentId` is held now: by a freeze, or by the test's hold. */
  private holds(agentId: string | null): boolean {
    return this.freezes > 0 || this.thawing > 0 || (this.hold !== null && (this.hold.match === null || this.hold.match.test(agentId ?? '')))
  }

  /** Answers, as usual, the held upgrades nothing holds any more (a freeze holds them all until its thaw). */
  private answerUnheld(): void {
    const free = this.held.filter((h) => !this.holds(h.agentId))
    if (free.length === 0) return
    this.held = this.held.filter((h) => !free.includes(h))
    for (const { answer } of free) answer()
    this.changed()
  }

  /** Whether stop() has been called (the simulator is stopping or has stopped): it scripts nothing more. */
  get isStopping(): boolean {
    return this.stopping !== null
  }

  /**
   * What `util.inspect()` and `console.log()` show of the simulator: where it listens and what it
   * holds, never its agents' API keys or its admin token (the default inspection printed the keys
   * at depth 2, so logging what a chained control such as `refuseUpgrades()` returns leaked them).
   */
  [Symbol.for('nodejs.util.inspect.custom')](): string {
    const state = this.stopping !== null ? 'stopping or stopped' : 'running'
    return `PlatformSimulator { url: '${this.url}', flavor: '${this.flavor.name}', ${state}, live sockets: ${this.live().length}, upgrades seen: ${this.upgrades.length} }`
  }

  /** Upgrades held by {@link holdUpgrades}, not yet answered, whose client is still there (one that went away counts as unanswered). */
  get heldUpgrades(): number {
    return this.held.filter((h) => !h.gone()).length
  }

  /** Held upgrades of one agent. */
  heldUpgradesOf(agentId: string): number {
    return this.held.filter((h) => h.agentId === agentId && !h.gone()).length
  }

  /**
   * Upgrades held by {@link holdUpgrades} that ended with no answer: closed by the client while
   * held (it gave up on it: its connect timeout; counted from when its end of the connection is
   * read, before the socket closes), or answered `'drop'`; of `agentId` when given,
   * else of every agent. Neither kind is in {@link upgrades} (which records answered upgrades), so
   * `upgrades` of the agent, {@link heldUpgradesOf} and this count together are every upgrade of
   * it the server saw while holding, as long as nothing was forgotten under `historyLimit` (which
   * keeps the counts of the most recent agents only, as it keeps the most recent upgrades).
   */
  unansweredUpgradesOf(agentId?: string): number {
    const leaving = this.held.filter((h) => (agentId === undefined || h.agentId === agentId) && h.gone()).length
    if (agentId !== undefined) return (this.unanswered.get(agentId) ?? 0) + leaving
    let total = leaving
    for (const n of this.unanswered.values()) total += n
    return total
  }

  /**
   * Answers an upgrade held by {@link holdUpgrades} (of `agentId`, when given; others stay held),
   * the oldest or the newest (`which`: a second instance of an agent whose first instance's
   * upgrade is still held, say): accepted, refused with `refusal`, or `'drop'`: the TCP connection
   * ends with no answer.
   *
   * @returns false when no upgrade is held.
   * @throws {TypeError} for a refusal that could not be written (as {@link refuseUpgrades} throws), or a `which` other than 'oldest' or 'newest'; nothing is answered.
   */
  answerHeldUpgrade(refusal?: UpgradeRefusal | 'drop', agentId?: string, which: 'oldest' | 'newest' = 'oldest'): boolean {
    if (typeof refusal === 'object') checkRefusal(refusal)
    if (which !== 'oldest' && which !== 'newest') throw new TypeError(`which: expected 'oldest' or 'newest', got ${String(which)}`)
    // An upgrade whose client already went away (it gave the attempt up) is not answered: it leaves the hold as its socket closes.
    const matches = (h: { agentId: string | null; gone: () => boolean }) => (agentId === undefined || h.agentId === agentId) && !h.gone()
    const index = which === 'oldest' ? this.held.findIndex(matches) : this.held.findLastIndex(matches)
    if (index < 0) return false
    const [held] = this.held.splice(index, 1)
    held!.answer(refusal)
    return true
  }

  /** Joins held by a `{ reply: 'hold' }` outcome, oldest first, on sockets still open. */
  get heldJoins(): ReadonlyArray<{ connection: SimConnection; topic: string; joinRef: WireRef }> {
    return this.heldJoinFrames
      .filter((j) => j.connection.state === 'open')
      .map((j) => ({ connection: j.connection, topic: j.frame.topic, joinRef: j.frame.join_ref }))
  }

  /**
   * Answers a held join of `topic` on a socket still open with `outcome`: the oldest, the newest
   * (a client that rejoined after a timeout waits for that one), or the one with `joinRef`.
   *
   * @returns false when no join of that topic is held.
   */
  answerHeldJoin(topic: string, outcome: Exclude<JoinOutcome, { reply: 'hold' }>, which: 'oldest' | 'newest' | { joinRef: WireRef } = 'oldest'): boolean {
    // As onJoin() checks a rule (a misspelt reply would drop the join unanswered); holding it again is no answer.
    checkJoinOutcome(outcome, 1, 'answerHeldJoin()')
    if ((outcome as { reply: string }).reply === 'hold') throw new TypeError("answerHeldJoin(): the join is held already; answer it 'ok', 'error' or 'none'")
    const matches = (j: { frame: ClientFrame; connection: SimConnection }) =>
      j.frame.topic === topic && j.connection.state === 'open' && (typeof which !== 'object' || j.frame.join_ref === which.joinRef)
    const index = which === 'newest' ? this.heldJoinFrames.findLastIndex(matches) : this.heldJoinFrames.findIndex(matches)
    if (index < 0) return false
    const [held] = this.heldJoinFrames.splice(index, 1)
    this.answerJoin(held!.connection, held!.frame, outcome)
    // Phoenix handles a socket's messages in order: what came behind the join comes after its answer.
    for (const frame of held!.behind) if (held!.connection.state === 'open') this.dispatchSafely(held!.connection, frame)
    this.changed()
    return true
  }

  /**
   * Forgets every script: refusals not yet used, join rules, the push handler, held upgrades
   * (answered as usual) and supersede cooldowns. Sockets and records stay.
   */
  resetScripts(): this {
    this.assertRunning('resetScripts()')
    this.refusals.length = 0
    this.agentRefusals.clear()
    this.joinRules.length = 0
    this.pushHandler = DEFAULT_PUSH_HANDLER
    this.cooldowns.clear()
    // The test's hold ends; a freeze still holds what it holds until its thaw.
    this.hold = null
    this.answerUnheld()
    return this
  }

  /** Replaces the handler of client pushes on app channels (default: reply ok with `{}`). */
  onPush(handler: PushHandler): this {
    this.assertRunning('onPush()')
    this.pushHandler = handler
    return this
  }

  /**
   * Closes the target sockets with `code` and `reason`; returns how many it closed. Like every
   * control of a target, it acts on the sockets open now: an agent between sockets (its link
   * reconnecting) has none, and 0 is returned (wait with `waitFor(() => sim.live(id).length > 0)`).
   *
   * @throws {RangeError} for a code an endpoint may not send (1004-1006, 1015, 1016-2999, outside 1000-4999) or a reason over 123 bytes (RFC 6455 sections 5.5 and 7.4.1); no socket is closed then.
   */
  close(target: Target, code: number, reason = ''): number {
    return this.closeWith(target, code, reason, 'scripted')
  }

  /**
   * Ends the target sockets' TCP connections without a close frame (the client sees 1006); returns
   * how many. A socket named by its record or `{ socket: id }` is reached even while its closing
   * handshake is under way, as no other control reaches it: after a close the simulator sent, a
   * socket that stopped reading (stalled) keeps the server's end a moment, or, after a close its
   * flavor reads on after (Bandit's 1000 and 1012: flavors.ts `readsOnAfterClose`), until ws's
   * close timeout (the server's `closeTimeout` option, 30 s by default: ws
   * lib/websocket-server.js); abort() ends it now, on both sides. `{ agent }` and `'all'` reach
   * open sockets only, like every control (0 for an agent between sockets).
   *
   * @param options.reset reset the connections (a TCP RST) instead of ending them (a FIN): Node's
   *   client sees `ECONNRESET`, or an end of stream when the reset comes right behind bytes it
   *   had not read yet (docs/field-notes.md). Phoenix's
   *   close is a reset whenever the client is sending (docs/field-notes.md "A reset loses what it
   *   overtakes"); this is how a test gives a client that close, with the loss, at will.
   */
  abort(target: Target, options: { reset?: boolean } = {}): number {
    checkControlOptions('abort()', options, new Set(['reset']))
    const sockets = this.resolve(target, { closing: true })
    for (const c of sockets) c.abort(options.reset === true)
    return sockets.length
  }

  /** The platform's `"disconnect"` broadcast: closes with the flavor's code (1001, 1000 or 1011), no reason text; returns how many sockets. */
  disconnect(target: Target): number {
    return this.closeWith(target, this.flavor.disconnect, '', 'disconnect')
  }

  /**
   * Sets the keys an agent may connect with from now on (a key rotation: both keys for a while,
   * then the new one alone). Live sockets are not checked again, as a platform does not.
   *
   * @throws {Error} when the simulator accepts any agent (`agents: 'any'`): there are no keys to change.
   */
  setKeys(agentId: string, keys: string | readonly string[]): this {
    this.assertRunning('setKeys()')
    if (this.options.agents === 'any') throw new Error("setKeys needs an agents map; this simulator accepts any agent (agents: 'any')")
    this.options.agents[agentId] = typeof keys === 'string' ? keys : [...keys]
    return this
  }

  /**
   * Refuses the agent's later upgrades with 403, as a revoked key is; its open sockets stay
   * up (disconnect them to force a reconnect). Undone by {@link unrevoke}.
   */
  revoke(agentId: string): this {
    this.assertRunning('revoke()')
    this.revoked.add(agentId)
    return this
  }

  /** Accepts the agent's upgrades again after {@link revoke}. */
  unrevoke(agentId: string): this {
    this.assertRunning('unrevoke()')
    this.revoked.delete(agentId)
    return this
  }

  /**
   * A frozen server (a SIGSTOP'd process): every open socket stops reading and answering
   * (heartbeats included), and every upgrade is held unanswered. The returned thaw (SIGCONT)
   * reads again: what clients sent meanwhile (their close frames) is handled first, on this turn
   * of the event loop's reads, and the held upgrades are answered just after (so a client's new
   * socket does not supersede its old one whose close is still unread). What the test scripts
   * stays its own, set before the freeze or during it: a socket it stalled ({@link stall}) stays
   * stalled, and an upgrade its {@link holdUpgrades} holds at the thaw stays held; the thaw
   * answers the upgrades only the freeze held. Freezes nest: the sockets stay stalled and the
   * upgrades held until the last thaw. A thaw called again does nothing.
   */
  freeze(): () => void {
    this.assertRunning('freeze()')
    for (const c of this.live()) {
      if (c.stalled) continue
      this.stallOne(c)
      this.frozen.add(c)
    }
    this.freezes++
    let thawed = false
    return () => {
      if (thawed) return
      thawed = true
      if (--this.freezes > 0) return
      for (const c of this.frozen) {
        c.resume()
        if (c.state === 'open') this.armIdle(c)
        // What its channels had read before the freeze comes first, in order.
        const parked = this.parkedWork.get(c)
        this.parkedWork.delete(c)
        if (parked !== undefined && c.state === 'open') {
          this.channelWork.unshift(...parked)
          this.channelTurn ??= setImmediate(() => this.runChannelWork())
        }
      }
      this.frozen.clear()
      this.changed()
      // After the poll phase that reads what the resumed sockets have buffered.
      this.thawing++
      setImmediate(() => {
        this.thawing--
        this.answerUnheld()
      })
    }
  }

  /** Stops answering heartbeats and reading on the target sockets; they never close by themselves. Returns how many. */
  stall(target: Target): number {
    return this.each(target, (c) => {
      // The test's own stall: a thaw leaves it.
      this.frozen.delete(c)
      this.stallOne(c)
    })
  }

  /**
   * A server restart (a deploy's drain), and keeps listening: every open socket that joined a
   * channel is closed 1012 (service restart), no reason text; one that joined none is ended as
   * the flavor's web server ends it (Bandit: 1000 at once; Cowboy: cut with no close frame after
   * 5 s), as Phoenix's drainer only drains sockets with channels.
   */
  restart(): void {
    this.assertRunning('restart()')
    for (const c of this.live()) this.drainOne(c, false)
  }

  /**
   * Pushes `event` on `topic` to the target sockets that joined it, with the current join_ref,
   * or with `joinRef` when given (a stale one, to test that clients drop it). The payload goes out
   * as JSON carries it.
   *
   * @throws {TypeError} for a payload JSON cannot carry (a BigInt, a cycle, a getter that throws),
   *   before anything is sent.
   */
  push(target: Target, topic: string, event: string, payload: Payload, options: { joinRef?: WireRef } = {}): number {
    checkControlOptions('push()', options, new Set(['joinRef']))
    payload = asJson('push()', payload)
    let sent = 0
    for (const c of this.resolve(target)) {
      const channel = c.channels.get(topic)
      if (!channel && options.joinRef === undefined) continue
      c.send({ join_ref: options.joinRef !== undefined ? options.joinRef : channel!.channelRef, ref: null, topic, event, payload })
      sent++
    }
    return sent
  }

  /**
   * Sends raw text or bytes to the target sockets (malformed frames, for fuzzing).
   *
   * @returns how many sockets it was sent to (a socket already closing gets nothing).
   */
  sendRaw(target: Target, data: string | Uint8Array): number {
    let sent = 0
    for (const c of this.resolve(target)) if (c.sendRaw(data)) sent++
    return sent
  }

  /**
   * Sends an `agent.control` signal on the agent's control channel: `via: 'push'` (default)
   * through the channel, carrying its join_ref; `via: 'broadcast'` as an endpoint broadcast
   * (fastlane), join_ref null, to every socket that joined the topic.
   *
   * @returns how many sockets it was sent to.
   * @throws {TypeError} for a signal JSON cannot carry (see push()), before anything is sent.
   */
  control(
    agentId: string,
    signal: { mode: string; scope?: string; room_id?: string; execution_id?: string; reason?: string; correlation_id?: string | null } & Payload,
    options: { via?: 'push' | 'broadcast' } = {},
  ): number {
    checkControlOptions('control()', options, new Set(['via']))
    if (options.via !== undefined && options.via !== 'push' && options.via !== 'broadcast') throw new TypeError(`control(): via must be 'push' or 'broadcast', got ${shownAs(options.via)}`)
    // The signal's own members over the defaults, as given (a `scope: undefined` leaves the wire
    // without one), then as JSON carries them; a signal whose members cannot be read is refused.
    let merged: Payload
    try {
      merged = { scope: 'agent', agent_id: agentId, ...signal }
    } catch (error) {
      throw notJson('control()', thrownText(error))
    }
    const payload = asJson('control()', merged)
    if (options.via !== 'broadcast') return this.push({ agent: agentId }, controlTopic(agentId), CONTROL_EVENT, payload)
    return this.broadcast(controlTopic(agentId), CONTROL_EVENT, payload)
  }

  /**
   * An endpoint broadcast on `topic` (Phoenix's fastlane): `[null, null, topic, event, payload]`
   * to every open socket that joined it.
   *
   * @returns how many sockets it was sent to.
   * @throws {TypeError} for a payload JSON cannot carry, before anything is sent.
   */
  broadcast(topic: string, event: string, payload: Payload): number {
    this.assertRunning('broadcast()')
    payload = asJson('broadcast()', payload)
    let sent = 0
    for (const c of this.live()) {
      if (!c.channels.has(topic)) continue
      c.send({ join_ref: null, ref: null, topic, event, payload })
      sent++
    }
    return sent
  }

  /**
   * Supersedes the agent's open sockets: a `supersede` push on the control channel, then (unless
   * `close: null`) a close with the flavor's code, in the same tick. A socket whose control channel
   * is not joined gets no push (Phoenix pushes it through that channel), only the close. Returns
   * how many sockets were superseded. The payload is pushed, recorded and kept as the platform's
   * reason (`raw`) as JSON carries it.
   *
   * @throws {RangeError} for a close code a server may not send (as close()), before any socket
   *   is pushed to, marked or closed.
   * @throws {TypeError} for a payload JSON cannot carry (a BigInt, a cycle, a getter that throws),
   *   before any socket is pushed to, marked or closed.
   */
  supersede(agentId: string, options: { payload?: Payload; close?: number | null } = {}): number {
    this.assertRunning('supersede()')
    checkControlOptions('supersede()', options, new Set(['payload', 'close']))
    // A bad close code is refused before anything is pushed or recorded (RangeError, as close()).
    if (typeof options.close === 'number') assertSendableClose(options.close, '')
    // So is a payload JSON cannot carry: what is pushed, recorded and kept as the reason's raw is its JSON.
    const payload = options.payload === undefined ? undefined : asJson('supersede()', options.payload)
    const targets = this.live(agentId)
    for (const c of targets) this.supersedeOne(c, payload, options.close)
    return targets.length
  }

  /**
   * The server-side channel of `topic` crashes on the target sockets: phx_error with the join's
   * join_ref as join_ref and ref, payload as the flavor's Phoenix sends it; the join is forgotten
   * and the socket stays up. Returns how many sockets had `topic` joined.
   */
  channelError(target: Target, topic: string): number {
    return this.eachJoined(target, topic, (c) => this.crashChannel(c, topic))
  }

  /** Sends phx_close on `topic` to the target sockets (the server ended the channel) and forgets the join. Returns how many sockets had `topic` joined. */
  channelClose(target: Target, topic: string): number {
    return this.eachJoined(target, topic, (c, channel) => {
      c.channels.delete(topic)
      c.send({ join_ref: channel.joinRef, ref: channel.joinRef, topic, event: CHANNEL_EVENTS.close, payload: {} })
    })
  }

  /**
   * Resolves when `check()` is true, re-checking after every recorded change (a connection, a
   * frame, a close, a refusal: the simulator's own records), not on a timer: for a condition on the
   * client's side, wait on the link (`link.whenState()`, `link.once()`).
   *
   * @throws {Error} (rejects) naming `what` when `timeoutMs` passes first, or with what `check` threw;
   *   at once when the simulator has stopped (or once it stops, for a wait pending then) and
   *   `check()` is false, since nothing it records can change any more.
   * @throws {RangeError} (rejects) for a `timeoutMs` that is not a whole number of milliseconds in [0, 2^31-1].
   */
  waitFor(check: () => boolean, options: { timeoutMs?: number; what?: string } = {}): Promise<void> {
    try {
      checkControlOptions('waitFor()', options, new Set(['timeoutMs', 'what']))
    } catch (error) {
      return Promise.reject(error)
    }
    try {
      if (check()) return Promise.resolve()
    } catch (error) {
      return Promise.reject(error)
    }
    const timeoutMs = options.timeoutMs ?? 5000
    if (!(Number.isInteger(timeoutMs) && timeoutMs >= 0 && timeoutMs <= 2 ** 31 - 1)) {
      return Promise.reject(new RangeError(`waitFor timeoutMs must be a whole number of milliseconds in [0, 2^31-1], got ${String(timeoutMs)}`))
    }
    const stoppedError = () => new Error(`simulator: stopped while waiting for ${options.what ?? 'a condition'}; it was not met and nothing will change any more`)
    if (this.stopped) return Promise.reject(stoppedError())
    return new Promise((resolve, reject) => {
      const settleOnStop = () => {
        onChange()
        if (!this.waits.has(settleOnStop)) return
        cleanup()
        reject(stoppedError())
      }
      const onChange = () => {
        let done: boolean
        try {
          done = check()
        } catch (error) {
          cleanup()
          reject(error)
          return
        }
        if (!done) return
        cleanup()
        resolve()
      }
      const timer = setTimeout(() => {
        cleanup()
        // The condition is re-checked only when the simulator records a change: say so, since a
        // condition on the client's side (a link's state, a handler's calls) is a common cause.
        reject(
          new Error(
            `simulator: timed out after ${timeoutMs} ms waiting for ${options.what ?? 'a condition'} (re-checked only when the simulator records a change; wait for a link's own state or events with link.whenState() or link.once())`,
          ),
        )
      }, timeoutMs)
      const cleanup = () => {
        clearTimeout(timer)
        this.off('change', onChange)
        this.waits.delete(settleOnStop)
      }
      this.on('change', onChange)
      this.waits.add(settleOnStop)
    })
  }

  /**
   * Stops as a Phoenix endpoint drains on SIGTERM: closes every socket, stops listening, and
   * resolves when every socket and the server are closed. Each socket is closed with `code` when
   * given (no reason text), aborted with `abort: true` (a stalled one always is), and by default
   * drained as the flavor's endpoint drains: 1012 (service restart) to a socket with a channel
   * joined; one with none is closed or cut as the flavor's web server does (1000 on Bandit; cut,
   * the client seeing 1006, on Cowboy and the platform flavor: flavors.ts `drainWithoutChannels`). Grace windows still open
   * end (each principal's last-disconnected, its runs aborted), then every run still registered is
   * aborted with reason `null`, each abort reported; stop() waits for their abort hooks, each at
   * most `runs.hookTimeoutMs` (5 s by default).
   */
  stop(options: { code?: number; abort?: boolean } = {}): Promise<void> {
    if (this.stopping) return this.stopping
    try {
      checkControlOptions('stop()', options, new Set(['code', 'abort']))
    } catch (error) {
      return Promise.reject(error)
    }
    // A code no endpoint may send is refused before anything is torn down, so the host can stop again.
    if (options.code !== undefined) {
      try {
        assertSendableClose(options.code, '')
      } catch (error) {
        return Promise.reject(error)
      }
    }
    // A run started from now on would have no connection left to end it, and stop() aborts those already started.
    this.runs.close('the simulator has stopped (or is stopping) and aborts its runs; start another simulator')
    this.stopping = (async () => {
      const held = this.held
      this.held = []
      this.hold = null
      // Frames no channel will handle now: their sockets are closing.
      if (this.channelTurn !== null) clearImmediate(this.channelTurn)
      this.channelTurn = null
      this.channelWork = []
      this.parkedWork.clear()
      for (const { answer } of held) answer('drop')
      for (const socket of this.keptAlive) socket.destroy()
      this.keptAlive.clear()
      for (const c of this.connections) {
        if (c.idleTimer) clearTimeout(c.idleTimer)
        c.idleTimer = null
        if (c.drainTimer) clearTimeout(c.drainTimer)
        c.drainTimer = null
        if (c.state === 'closed') continue
        if (options.abort || c.stalled) c.abort()
        else if (options.code !== undefined) c.close(options.code, '', 'stop')
        else this.drainOne(c, true)
      }
      // A client that never answers the close frame is cut off rather than waited for.
      const pending = this.connections.filter((c) => c.state !== 'closed')
      const allClosed = () => pending.every((c) => c.state === 'closed')
      if (pending.length > 0) {
        await this.waitFor(allClosed, { timeoutMs: 1000, what: 'sockets to close' }).catch(async () => {
          for (const c of pending) if (c.state !== 'closed') c.abort()
          // terminate() destroys the TCP socket; its close event, which ends the principal's
          // presence (and so aborts its runs), follows within a tick: wait for it.
          await this.waitFor(allClosed, { timeoutMs: 1000, what: 'aborted sockets to close' }).catch(() => {})
        })
      }
      // Grace windows still open end now: their principals are gone for good, their runs aborted,
      // and the event streams still hear it.
      this.tracker.flush()
      await Promise.all(this.abortsInFlight)
      // Runs started while their principal had no connection (before it ever connected, or after
      // its last-disconnected) had no crossing to end them: nobody will receive them now either.
      await Promise.all(this.runs.principals().map((principal) => this.runs.abortPrincipal(principal, null)))
      this.admin.stop()
      this.tracker.stop()
      await new Promise<void>((resolve) => {
        this.wss.close(() => resolve())
      })
      // Every HTTP connection goes with the server, a request still arriving too (half its headers
      // or body sent): close() alone waits for it, and stops the check that would time it out.
      const closed = new Promise<void>((resolve) => this.http.close(() => resolve()))
      this.http.closeAllConnections()
      await closed
      this.stopped = true
      this.metrics.running(false)
      // Waits still pending are settled now: met, or rejected (nothing will change any more).
      for (const settle of [...this.waits]) settle()
      this.removeAllListeners()
    })()
    return this.stopping
  }

  // ---- private ----------------------------------------------------------------------------

  /**
   * Scripting a simulator that has stopped (or is stopping) would do nothing: say so.
   *
   * @throws {Error} naming the call, once stop() has been called.
   */
  private assertRunning(what: string): void {
    if (this.stopping) throw new Error(`simulator: ${what} after stop(): this simulator has stopped (or is stopping) and scripts nothing more; start another`)
  }

  /**
   * The principal's presence of `c` ends: once, as the socket stops being live (the simulator's
   * close or abort, the client's close frame read, a frame ws refused), not at its TCP end, which a
   * peer that never answers a close holds up a moment (after Bandit's 1000 and 1012, for ws's 30 s
   * close timeout). As a Phoenix socket
   * process ends when it sends its close or reads the client's (connection.ts `live`).
   */
  private endPresence(c: SimConnection): void {
    if (this.presenceEnded.has(c)) return
    // The reason first: the socket is marked ended only once its crossing can be told.
    const reason = this.reasonOf(c)
    this.presenceEnded.add(c)
    c.onClosing = null
    this.tracker.closed(c.agentId, c.id, reason, this.now())
  }

  /**
   * Why a socket ended, as the platform sees it: superseded (a supersede was pushed to it),
   * timed out (its idle timeout), dropped (aborted, or no close frame), the close code the server
   * sent, by the close code table, or the client's close (graceful for 1000 or 1001). A client
   * that started the closing handshake is never aborted nor sent a close after it (SimConnection's
   * `clientClosed`), so its own close decides.
   */
  private reasonOf(c: SimConnection): DisconnectReason {
    const at = Date.now()
    if (c.superseded) return classifySupersede(c.superseded, 0, at)
    if (c.closeCause === 'idle') return heartbeatTimeout(0, at)
    if (c.aborted) return { kind: 'dropped', retryable: true, source: 'socket', detail: 'the server ended the connection without a close frame', generation: 0, at }
    if (c.closeSent) return classifyClose({ code: c.closeSent.code, reason: c.closeSent.reason }, 0, at)
    // The client's close frame when its presence ends on it (the TCP end, closeSeen, may come later).
    const seen = c.clientClosed ?? c.closeSeen ?? { code: 1006, reason: '' }
    if (seen.code === 1000 || seen.code === 1001) return { kind: 'graceful', retryable: false, generation: 0, at }
    return classifyClose({ code: seen.code, reason: seen.reason }, 0, at)
  }

  private onCrossing(crossing: PresenceCrossing): void {
    // The platform's own bookkeeping first (record, metrics, feed, aborts); host code (logger,
    // listeners) last, each guarded, so a host that throws cannot stop an abort.
    this.presence.push(crossing)
    this.trimHistory(this.presence)
    this.admin.publish('principal-presence', crossing)
    if (crossing.kind === 'last-disconnected') this.metrics.principalDisconnects.inc({ reason: crossing.reason?.kind ?? 'unknown' })
    this.logger.info('presence', { principal: crossing.principal, kind: crossing.kind, reason: crossing.reason?.kind })
    this.emitSafely('presence', crossing)
    if (crossing.kind === 'last-disconnected') {
      // No connection of this principal is left: nobody will receive its runs' results. Told after
      // the crossing, so the reports (a nothing-to-abort one comes at once) follow it everywhere.
      const round = this.runs
        .abortPrincipal(crossing.principal, crossing.reason)
        // A round rejects only on arguments it refuses (a simulator fault): said, never unhandled, never stop()'s rejection.
        .catch((error: unknown) => this.logger.warn('aborting the runs of a principal failed', { principal: crossing.principal, error: thrownText(error) }))
        .then(() => {
          this.abortsInFlight.delete(round)
        })
      this.abortsInFlight.add(round)
    }
    // A crossing is a record too (a grace window's end comes from a timer, with no socket event): waits re-check.
    this.changed()
  }

  /**
   * Counts an upgrade of `agentId` held and ended with no answer; the counts of the `historyLimit`
   * agents whose upgrade went unanswered most recently are kept.
   */
  private countUnanswered(agentId: string | null): void {
    const count = (this.unanswered.get(agentId) ?? 0) + 1
    this.unanswered.delete(agentId)
    this.unanswered.set(agentId, count)
    if (this.unanswered.size > this.options.historyLimit) this.unanswered.delete(this.unanswered.keys().next().value!)
  }

  /** Records an upgrade answered, keeping the most recent `historyLimit` and the counts per agent. */
  private recordUpgrade(record: UpgradeRecord): void {
    const count = (r: UpgradeRecord, by: number) => {
      if (r.status !== 101) this.refusedUpgrades += by
      if (r.agentId === null) return
      const counts = this.upgradesOf.get(r.agentId) ?? { upgrades: 0, refused: 0 }
      counts.upgrades += by
      if (r.status !== 101) counts.refused += by
      if (counts.upgrades === 0) this.upgradesOf.delete(r.agentId)
      else this.upgradesOf.set(r.agentId, counts)
    }
    this.upgrades.push(record)
    count(record, 1)
    const excess = this.upgrades.length - this.options.historyLimit
    if (excess > 0) for (const dropped of this.upgrades.splice(0, excess)) count(dropped, -1)
  }

  /** Drops the oldest entries of a record list past `historyLimit`. */
  private trimHistory(list: unknown[]): void {
    const excess = list.length - this.options.historyLimit
    if (excess > 0) list.splice(0, excess)
  }

  /**
   * Called as `closed` closes: drops the oldest closed sockets from `connections` past
   * `historyLimit` (open ones stay), then empties the frame records of the oldest closed sockets
   * while the closed sockets' frames together exceed `historyFrameLimit`.
   */
  private trimClosedConnections(closed: SimConnection): void {
    this.closedFrames += recorded(closed)
    const limit = this.options.historyLimit
    if (this.connections.length > limit) {
      let excess = this.connections.reduce((n, c) => n + (c.state === 'closed' ? 1 : 0), 0) - limit
      for (let i = 0; i < this.connections.length && excess > 0; ) {
        const c = this.connections[i]!
        if (c.state === 'closed') {
          this.connections.splice(i, 1)
          const sockets = this.socketsOf.get(c.agentId)!
          sockets.splice(sockets.indexOf(c), 1)
          if (sockets.length === 0) this.socketsOf.delete(c.agentId)
          this.closedFrames -= recorded(c)
          excess--
        } else i++
      }
    }
    for (let i = 0; i < this.connections.length && this.closedFrames > this.options.historyFrameLimit; i++) {
      const c = this.connections[i]!
      if (c.state !== 'closed' || recorded(c) === 0) continue
      this.closedFrames -= recorded(c)
      c.framesForgotten += c.frames.length
      c.frames.length = 0
      c.joinsReceived.length = 0
    }
  }

  /** An abort report of the simulator's run supervisor: recorded, counted, published, told. */
  private recordAbort(report: AgentAborted): void {
    this.aborts.push(report)
    this.trimHistory(this.aborts)
    this.metrics.agentAborts.inc({ outcome: report.outcome })
    this.admin.publish('agent-aborted', report)
    this.logger.info('agent aborted', { principal: report.principal, runId: report.runId, outcome: report.outcome })
    this.emitSafely('agent-aborted', report)
    this.changed()
  }

  /**
   * Emits to the host's listeners, each on its own: one that throws, or whose promise rejects (an
   * `async` listener), is logged and never thrown into the simulator, and the listeners after it
   * still hear the event.
   */
  private emitSafely(event: string, payload: unknown): void {
    const report = (error: unknown) => this.logger.warn('a simulator event listener threw', { event, error: thrownText(error) })
    // rawListeners: once() listeners come wrapped, and remove themselves when called.
    for (const listener of this.rawListeners(event)) {
      try {
        settleReported((listener as (payload: unknown) => unknown).call(this, payload), report)
      } catch (error) {
        report(error)
      }
    }
  }

  /** Milliseconds since the simulator started, on the monotonic clock: the time base of every record (`at`, `openedAt`, `closedAt`). */
  now(): number {
    return Math.round(performance.now() - this.started)
  }

  /** Tells `change` listeners (waits, and the host's own: one that throws is logged, never thrown into the simulator's socket handling). */
  private changed(): void {
    this.emitSafely('change', undefined)
  }

  /**
   * A drain of one socket: 1012 when it joined a channel; else the flavor's web server's way
   * (a close code, or a cut after a delay; at once when the server is `stopping`, which does
   * not wait the delay out).
   */
  private drainOne(c: SimConnection, stopping: boolean): void {
    const cause: CloseCause = stopping ? 'stop' : 'restart'
    const bare = this.flavor.drainWithoutChannels
    if (c.channels.size > 0) return c.close(this.flavor.restart, '', cause)
    if ('close' in bare) return c.close(bare.close, '', cause)
    if (stopping) return c.abort()
    if (c.drainTimer) return
    c.drainTimer = setTimeout(() => {
      c.drainTimer = null
      c.abort()
    }, bare.abortAfterMs)
  }

  private closeWith(target: Target, code: number, reason: string, cause: CloseCause): number {
    // Checked once before any socket is touched, so a bad code closes none of them.
    assertSendableClose(code, reason)
    return this.each(target, (c) => c.close(code, reason, cause))
  }

  /** Runs `act` on each target socket open now; returns how many. */
  private each(target: Target, act: (c: SimConnection) => void): number {
    const sockets = this.resolve(target)
    for (const c of sockets) act(c)
    return sockets.length
  }

  /** Runs `act` on each target socket that has `topic` joined, then records the change; returns how many. */
  private eachJoined(target: Target, topic: string, act: (c: SimConnection, channel: SimChannel) => void): number {
    let sockets = 0
    for (const c of this.resolve(target)) {
      const channel = c.channels.get(topic)
      if (!channel) continue
      act(c, channel)
      sockets++
    }
    this.changed()
    return sockets
  }

  private stallOne(c: SimConnection): void {
    if (c.idleTimer) clearTimeout(c.idleTimer)
    c.idleTimer = null
    c.stall()
  }

  /** A channel process that exits abnormally: phx_error (socket.ex encode_on_exit), the join forgotten. */
  private crashChannel(c: SimConnection, topic: string): void {
    const channel = c.channels.get(topic)
    if (!channel) return
    c.channels.delete(topic)
    c.send({ join_ref: channel.joinRef, ref: channel.joinRef, topic, event: CHANNEL_EVENTS.error, payload: { ...this.flavor.channelErrorPayload } })
  }

  /**
   * The open connections `target` names; with `closing`, a connection named by its record or id is returned while its TCP connection is up (its closing handshake under way too).
   *
   * @throws {TypeError} for a target that is none of the {@link Target} shapes (a bare agent id
   *   string, say), naming what was given.
   */
  private resolve(target: Target, options: { closing?: boolean } = {}): SimConnection[] {
    this.assertRunning('scripting a socket (close, abort, push, stall, ...)')
    // A socket named (by its record or id) is reached while its TCP connection is up when
    // `closing` asks for it (abort's); an agent's or every socket, only while open.
    const named = options.closing ? (c: SimConnection) => c.state !== 'closed' : (c: SimConnection) => c.live
    if (target === 'all') return this.live()
    if (target instanceof SimConnection) return named(target) ? [target] : []
    if (typeof target === 'object' && target !== null) {
      if (typeof (target as { agent?: unknown }).agent === 'string') return this.live((target as { agent: string }).agent)
      if (typeof (target as { socket?: unknown }).socket === 'string') return this.connections.filter((c) => c.id === (target as { socket: string }).socket && named(c))
    }
    throw new TypeError(`a simulator target is a connection, { agent: id }, { socket: id } or 'all'; got ${shownAs(target)}`)
  }

  /**
   * Answers an upgrade with a refusal as the flavor's server writes it: its headers, the body
   * asked for (none by default, as stock Phoenix), and the connection kept open for a next
   * request unless `Connection: close` was asked of a server that honours it (docs/field-notes.md
   * "Real Phoenix"). The upgrade's head bytes go back to the HTTP parser with the socket.
   */
  private refuse(socket: Duplex, refusal: UpgradeRefusal, asker: Asker, outcome: string, head: Buffer = Buffer.alloc(0)): void {
    // Stamped before the write: a client's next upgrade can come no sooner after it than after the refusal left.
    const at = this.now()
    const { status } = refusal
    const { agentId } = asker
    const body = refusal.body ?? 'none'
    const text =
      body === 'none'
        ? ''
        : body === 'platform'
          ? JSON.stringify({ error: { code: ERROR_CODES[status] ?? 'error', message: refusal.message ?? ERROR_MESSAGES[status] ?? outcome, request_id: `req-${randomBytes(8).toString('hex')}` } })
          : body.text
    const headers: Array<readonly [string, string]> = [['date', httpDate()], ['content-length', String(Buffer.byteLength(text))], ...this.flavor.refusalHeaders]
    if (refusal.retryAfter !== undefined) headers.push(['retry-after', refusal.retryAfter])
    if (body === 'platform' || (typeof body === 'object' && isJson(body.text))) headers.push(['content-type', 'application/json; charset=utf-8'])
    const close = refusal.connection === 'close'
    if (close) headers.push(['connection', 'close'])
    const response = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\n${this.headerLines(headers).join('\r\n')}\r\n\r\n${text}`
    if (close && this.flavor.honoursConnectionClose) this.endWith(socket, response)
    else {
      socket.write(response)
      this.keepAlive(socket as Socket, head)
    }
    this.refused({ at, agentId, status, outcome, onConflict: asker.onConflict })
  }

  /**
   * Writes an upgrade's last response and ends the connection. The socket is no longer read by
   * the HTTP parser: what follows is read and dropped, so the client's end of the connection is
   * seen and the socket closes; a client that never ends its side (half-open) is cut after a
   * moment, and by stop().
   */
  private endWith(socket: Duplex, response: string): void {
    socket.end(response)
    socket.resume()
    this.tend(socket)
    this.keptAlive.add(socket)
    ;(socket as Socket).setTimeout(CLOSING_LINGER_MS)
  }

  /**
   * Gives an upgrade's TCP connection the simulator's own listeners, once: a keep-alive connection
   * carries upgrade after upgrade (a client's, or a pooling proxy's), and a listener added per
   * request would pile up (Node warns at 11) and keep memory per request. An error destroys it;
   * its close forgets it; its idle timeout (armed with `setTimeout(ms)` while it is kept alive or
   * ending, disarmed with `setTimeout(0)`) cuts it.
   */
  private tend(socket: Duplex): void {
    if (this.tended.has(socket)) return
    this.tended.add(socket)
    socket.on('error', () => socket.destroy())
    socket.on('close', () => this.keptAlive.delete(socket))
    socket.on('timeout', () => socket.destroy())
  }

  /** Records a refused upgrade and tells the listeners. */
  private refused(record: UpgradeRecord): void {
    this.recordUpgrade(record)
    this.logger.info('upgrade refused', { status: record.status, agentId: record.agentId, outcome: record.outcome })
    this.emitSafely('refused', record)
    this.changed()
  }

  /**
   * Answers a request past the flavor's parser limits as its web server does: 414 or 431 with
   * `connection: close` (request-limits.ts), then the connection closes, before the platform's
   * code sees the request.
   */
  private refuseTooLarge(socket: Duplex, tooLarge: RequestTooLarge, asker: Asker): void {
    const at = this.now()
    this.endWith(socket, tooLargeResponse(tooLarge.status, this.flavor.requestParser))
    this.refused({ at, agentId: asker.agentId, status: tooLarge.status, outcome: tooLarge.limit, onConflict: asker.onConflict })
  }

  /**
   * Rewrites, in place, the 101 head `ws` is about to write (its status line, then `Name: value`
   * lines) as the flavor's server writes it: lower-case names, a date, the flavor's own headers,
   * sorted on Cowboy, date first on Bandit (measured 2026-12-06 against the reference peer).
   */
  private upgradeHead(lines: string[]): void {
    const [status, ...rest] = lines
    const headers: Array<readonly [string, string]> = rest.map((line) => {
      const colon = line.indexOf(':')
      return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()] as const
    })
    headers.unshift(['date', httpDate()])
    headers.push(...this.flavor.upgradeHeaders)
    lines.splice(0, lines.length, status!, ...this.headerLines(headers))
  }

  /** Header lines (`name: value`) in the flavor's order: sorted by name on Cowboy, as given on Bandit. */
  private headerLines(headers: Array<readonly [string, string]>): string[] {
    if (this.flavor.sortsHeaders) headers.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return headers.map(([k, v]) => `${k}: ${v}`)
  }

  /** A refusal of the simulator's own (auth, conflict, cooldown), with the body of {@link SimulatorOptions.rejectMode}. */
  private refuseOwn(socket: Duplex, head: Buffer, status: number, asker: Asker, outcome: string, extra: Partial<UpgradeRefusal> = {}): void {
    const mode = this.options.rejectMode
    const refusal: UpgradeRefusal = { status, ...extra, body: mode === 'plain' ? 'none' : 'platform', ...(mode === 'json_close' ? { connection: 'close' as const } : {}) }
    this.refuse(socket, refusal, asker, outcome, head)
  }

  /**
   * Hands a refused upgrade's socket back to the HTTP server, so a next request on it is served
   * as on any keep-alive connection (Node's documented way to inject a connection), and closes
   * it after the flavor's keep-alive time without traffic.
   */
  private keepAlive(socket: Socket, head: Buffer): void {
    if (socket.destroyed) return
    this.tend(socket)
    this.keptAlive.add(socket)
    if (head.length > 0) socket.unshift(head)
    socket.setTimeout(this.flavor.refusalKeepAliveMs)
    this.http.emit('connection', socket)
  }

  private handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    this.tend(socket)
    // A kept-alive connection (an earlier refusal) carrying a new upgrade is no longer idle: its
    // keep-alive timeout ends, and stop() closes what it becomes, not the bare socket.
    if (this.keptAlive.delete(socket)) (socket as Socket).setTimeout(0)
    if (this.stopping) {
      socket.destroy()
      return
    }
    // An unparsable URL is answered (400) below.
    const asker = askerOf(req)
    const tooLarge = requestTooLarge(req, this.flavor.requestParser)
    if (tooLarge) {
      this.refuseTooLarge(socket, tooLarge, asker)
      return
    }
    const { agentId } = asker
    if (this.holds(agentId)) {
      // A client that gives up on a held upgrade closes its end: close ours and forget it.
      const unanswered = () => this.countUnanswered(agentId)
      const entry = {
        agentId,
        // The client went away (its end of the connection read, or the socket destroyed): the entry leaves at its close.
        gone: () => socket.destroyed || (socket as Socket).readableEnded,
        answer: (refusal?: UpgradeRefusal | 'drop') => {
          if (socket.destroyed || this.stopping || refusal === 'drop') {
            unanswered()
            socket.destroy()
          }
          else if (refusal) this.refuse(socket, refusal, asker, 'scripted refusal of a held upgrade', head)
          else this.answerUpgradeSafely(req, socket, head)
        },
      }
      this.held.push(entry)
      socket.once('end', () => socket.destroy())
      socket.once('close', () => {
        const index = this.held.indexOf(entry)
        if (index >= 0) {
          this.held.splice(index, 1)
          unanswered()
        }
        this.changed()
      })
      this.changed()
      return
    }
    this.answerUpgradeSafely(req, socket, head)
  }

  /** Whether an upgrade with this `Origin` header may open a socket (`checkOrigin`). */
  private originAllowed(origin: string): boolean {
    const check = this.options.checkOrigin
    if (check === false) return true
    if (check !== true) {
      const sent = originOf(origin)
      if (sent !== null && check.includes(sent)) return true
    }
    if (origin === 'null') return false
    try {
      const url = new URL(origin)
      return (url.protocol === 'http:' || url.protocol === 'https:') && isLoopbackHost(url.host)
    } catch {
      return false
    }
  }

  /** A request the simulator cannot parse gets HTTP 400; nothing a client sends can stop the server. */
  private answerUpgradeSafely(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    try {
      this.answerUpgrade(req, socket, head)
    } catch (error) {
      this.logger.warn('bad upgrade request', { error: (error as Error).message })
      if (!socket.destroyed) {
        this.refuse(socket, { status: 400, body: { text: JSON.stringify({ error: { code: 'bad_request', message: (error as Error).message } }) } }, NOBODY, 'unparsable request', head)
      }
    }
  }

  private answerUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const url = requestUrl(req.url)
    // Plug routes by path segments and drops empty ones: `//socket/websocket` and
    // `/socket/websocket/` reach the socket on Phoenix (measured 2026-12-06 on Bandit and Cowboy).
    if (segmentsOf(url.pathname) !== segmentsOf(`${this.options.path}/websocket`)) {
      this.refuse(socket, { status: 404, body: { text: JSON.stringify({ error: { code: 'not_found', message: `no socket at ${url.pathname}` } }) } }, NOBODY, 'no such path', head)
      return
    }
    const asker = askerIn(url.searchParams)
    const { agentId, onConflict } = asker
    const origin = req.headers.origin
    if (origin !== undefined && !this.originAllowed(origin)) {
      // Phoenix's transport checks the origin before the socket's connect/3: a 403 with no body.
      this.refuse(socket, { status: 403, body: 'none' }, asker, 'origin not allowed', head)
      return
    }
    const own = agentId === null ? undefined : this.agentRefusals.get(agentId)
    const scripted = own?.shift() ?? this.refusals.shift()
    if (own?.length === 0) this.agentRefusals.delete(agentId!)
    if (scripted) {
      this.refuse(socket, scripted, asker, 'scripted refusal', head)
      return
    }
    // Phoenix picks the serializer before the socket's connect/3 runs: a vsn it cannot serve is
    // refused 403 with no body, whatever the key (serializers.ts).
    const serializer = negotiateSerializer(lastParam(url.searchParams, 'vsn'))
    if (serializer === null) {
      this.refuse(socket, { status: 403, body: 'none' }, asker, 'unsupported vsn', head)
      return
    }
    // The api_key param wins over the x-api-key header when both are sent, an empty one too, as the
    // platform reads them (reference peer: user_socket.ex `params["api_key"] || header_key`).
    const headerKey = req.headers[API_KEY_HEADER]
    const apiKey = lastParam(url.searchParams, API_KEY_PARAM) ?? (Array.isArray(headerKey) ? headerKey[0] : headerKey)
    const agents = this.options.agents
    const authorised =
      agentId !== null &&
      agentId !== '' &&
      typeof apiKey === 'string' &&
      apiKey !== '' &&
      (agents === 'any' || keyMatches(agents[agentId], apiKey))
    if (!authorised) {
      // Phoenix answers the upgrade with 403 when the socket's connect/3 returns :error.
      this.refuseOwn(socket, head, 403, asker, 'unknown agent or wrong API key')
      return
    }
    if (this.revoked.has(agentId!)) {
      this.refuseOwn(socket, head, 403, asker, 'revoked')
      return
    }
    if (onConflict !== null && onConflict !== 'reject' && onConflict !== 'supersede') {
      this.refuseOwn(socket, head, 400, asker, `on_conflict must be reject or supersede, got ${onConflict}`)
      return
    }
    const cooldownUntil = this.cooldowns.get(agentId!) ?? 0
    const now = performance.now()
    if (cooldownUntil > now) {
      this.refuseOwn(socket, head, 429, asker, 'reconnect after supersede', { retryAfter: String(Math.ceil((cooldownUntil - now) / 1000)) })
      return
    }
    if (onConflict === 'reject' && this.live(agentId!).length > 0) {
      this.refuseOwn(socket, head, 409, asker, 'an open connection holds this key')
      return
    }
    const params: Record<string, string> = {}
    for (const [k, v] of url.searchParams) if (k !== API_KEY_PARAM) params[k] = v
    this.wss.handleUpgrade(req, socket, this.flavor.readsFramesWithUpgrade ? head : Buffer.alloc(0), (ws) => this.accept(ws, socket, agentId!, params, onConflict, serializer))
  }

  private accept(ws: WebSocket, socket: Duplex, agentId: string, params: Record<string, string>, onConflict: string | null, serializer: SerializerVersion): void {
    const connection = new SimConnection(
      ws,
      { id: `sock-${this.nextSocket++}`, agentId, params, openedAt: this.now(), serializer },
      this.options.recordLimit,
      () => this.now(),
    )
    const older = this.live(agentId)
    this.connections.push(connection)
    const sockets = this.socketsOf.get(agentId)
    if (sockets === undefined) this.socketsOf.set(agentId, [connection])
    else sockets.push(connection)
    this.recordUpgrade({ at: this.now(), agentId, status: 101, outcome: 'accepted', superseded: older.map((c) => c.id), onConflict })
    this.logger.info('socket accepted', { socket: connection.id, agentId })
    ws.on('message', (data, isBinary) => this.receive(connection, data, isBinary))
    // Any bytes received restart the idle timeout, as on Bandit and Cowboy: a ping or a pong, and
    // a part of a frame or of a fragmented message, not only a whole message (docs/field-notes.md
    // "Real Phoenix"). Listened to on the TCP socket after ws has wired its own reader to it.
    const traffic = () => {
      if (connection.state === 'open') this.armIdle(connection)
    }
    socket.on('data', traffic)
    // The client's close frame, when it is read (ws reports it only with the TCP end, in `close`):
    // the socket is closing from then on, as a Phoenix socket process ends on it, and a waiter on
    // live() hears it at once. ws's own listener (registered first) has already answered it.
    ;(ws as unknown as { _receiver?: { on(event: 'conclude', listener: (code: number, reason: Buffer) => void): void } })._receiver?.on('conclude', (code, reason) => {
      if (connection.state !== 'open') return
      connection.state = 'closing'
      connection.clientClosed = { code, reason: reason.toString() }
      // ws answered it; the server ends the connection as its flavor does (Cowboy's socket process
      // exits on it, and Bandit ends it whole after its answer).
      connection.endAfterCloseFrame(null)
      this.endPresence(connection)
      this.changed()
    })
    ws.on('error', (error) => {
      // A frame ws refused (over maxFrameBytes, bad UTF-8, a protocol error): ws has answered it
      // with a close frame of its own (1009, 1007, 1002; RFC 6455 section 7.4.1), so the socket is
      // closing, that close was sent, and nothing scripted after it sends another.
      if (connection.state === 'open') {
        connection.state = 'closing'
        const code = wsStatusCode(error)
        if (code !== null) {
          connection.closeSent = { code, reason: '' }
          connection.closeSentAt = this.now()
          connection.closeCause = 'protocol'
          connection.endAfterCloseFrame(code)
        }
        this.endPresence(connection)
        this.changed()
      }
      connection.problems.push(`socket error: ${error.message}`)
      this.logger.warn('socket error', { socket: connection.id, error: error.message })
    })
    ws.on('close', (code, reason) => {
      if (connection.idleTimer) clearTimeout(connection.idleTimer)
      connection.idleTimer = null
      if (connection.drainTimer) clearTimeout(connection.drainTimer)
      connection.drainTimer = null
      connection.state = 'closed'
      connection.closedAt = this.now()
      connection.closeSeen = { code, reason: reason.toString() }
      connection.channels.clear()
      this.logger.info('socket closed', { socket: connection.id, code })
      this.metrics.activeConnections.dec()
      this.endPresence(connection)
      this.parkedWork.delete(connection)
      // A join held on this socket can no longer be answered: forget it (and the frames behind it).
      for (let i = this.heldJoinFrames.length - 1; i >= 0; i--) if (this.heldJoinFrames[i]!.connection === connection) this.heldJoinFrames.splice(i, 1)
      this.trimClosedConnections(connection)
      this.emitSafely('closed', connection)
      this.changed()
    })
    this.metrics.activeConnections.inc()
    // Wired before the crossing is told: a presence listener may close the socket (first-connected).
    connection.onClosing = () => this.endPresence(connection)
    if (this.flavor.idleCountsSends) connection.onSent = traffic
    connection.readsOnAfterClose = this.flavor.readsOnAfterClose
    this.armIdle(connection)
    this.tracker.opened(agentId, connection.id, this.now())
    // A second socket with the same key supersedes the older ones: push first, then close.
    for (const old of older) this.supersedeOne(old, undefined, undefined)
    this.emitSafely('connection', connection)
    this.changed()
  }

  private supersedeOne(c: SimConnection, payload: Payload | undefined, close: number | null | undefined): void {
    const topic = controlTopic(c.agentId)
    const channel = c.channels.get(topic)
    const sent = payload ?? {
      reason: 'session.already_connected',
      message: 'A newer connection for this agent was established',
      retryable: false,
      retry_after: this.options.supersedeRetryAfterS,
      target_socket_id: c.id,
      correlation_id: randomUUID(),
    }
    c.superseded = sent
    // The platform pushes supersede through the socket's control channel, so a socket whose control
    // channel is not joined (its join pending or held, never sent, left, or crashed) is only closed,
    // as Phoenix on Bandit and Cowboy close it (docs/field-notes.md "No supersede without a joined
    // control channel").
    if (channel !== undefined) c.send({ join_ref: channel.channelRef, ref: null, topic, event: SUPERSEDE_EVENT, payload: sent })
    // Monotonic: a wall-clock step must not lengthen or end a cooldown.
    if (this.options.supersedeCooldownMs > 0) {
      const now = performance.now()
      // Cooldowns that have run out are forgotten here, so a simulator that sees many agents
      // superseded over its life keeps an entry only for those still cooling down.
      for (const [agentId, until] of this.cooldowns) if (until <= now) this.cooldowns.delete(agentId)
      this.cooldowns.set(c.agentId, now + this.options.supersedeCooldownMs)
    }
    if (close !== null) c.close(close ?? this.flavor.supersede, '', 'supersede')
    this.changed()
  }

  private armIdle(c: SimConnection): void {
    const ms = this.options.idleTimeoutMs
    if (ms === null || c.stalled) return
    if (c.idleTimer) {
      c.idleTimer.refresh()
      return
    }
    c.idleTimer = setTimeout(() => {
      c.idleTimer = null
      c.close(this.flavor.idle, '', 'idle')
      this.changed()
    }, ms)
  }

  private receive(c: SimConnection, data: RawData, isBinary: boolean): void {
    if (c.stalled || c.state !== 'open') return
    this.armIdle(c)
    const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data)
    // The V1 serializer reads every frame as JSON text, whatever its opcode (v1_json_serializer.ex decode!).
    const v1 = c.serializer === 'v1'
    const asText = !isBinary || v1
    const text = asText ? bytes.toString('utf8') : ''
    // Jason refuses a `\udXXX` escape of half a character: Phoenix closes 1011 on it (docs/field-notes.md).
    const decoded = !asText
      ? decodeBinaryFromClient(bytes)
      : isBinary && !isUtf8(bytes)
        ? // A V1 binary frame is JSON-decoded as it is: Jason refuses bytes that are not UTF-8 (Phoenix closes 1011; a text frame's are checked by ws, 1007).
          ({ ok: false, problem: { kind: 'not-json', detail: 'a binary frame read as V1 JSON holds bytes that are not UTF-8', raw: `<binary ${bytes.length} bytes>` } } satisfies ClientDecodeResult)
        : hasLoneSurrogate(text)
        ? ({ ok: false, problem: { kind: 'not-json', detail: 'the JSON holds a lone UTF-16 surrogate escape, which Phoenix\'s JSON decoder (Jason) refuses', raw: text } } satisfies ClientDecodeResult)
        : refuseOutOfRange(text, v1 ? decodeV1FromClient(text) : decodeTextFrameFromClient(text))
    if (!decoded.ok) {
      c.record('in', null, decoded.problem.raw)
      c.problems.push(`${decoded.problem.kind}: ${decoded.problem.detail}`)
      this.logger.warn('malformed frame', { socket: c.id, kind: decoded.problem.kind, detail: decoded.problem.detail })
      // A Phoenix socket process crashes on a frame it cannot decode (V2 serializer decode!):
      // Bandit and Cowboy close with 1011 (internal error), no reason text (docs/field-notes.md).
      c.close(1011, '', 'malformed')
      this.changed()
      return
    }
    const frame = decoded.frame
    c.record('in', frame, isBinary ? `<binary ${bytes.length} bytes>` : text, isBinary ? bytes.length : text.length)
    // Matched by join_ref, a null one too (a V1 client sends none: its frames behind a held join of the topic wait for it).
    const heldJoin = this.heldJoinFrames.length === 0 ? undefined : this.heldJoinFrames.find((j) => j.connection === c && j.frame.topic === frame.topic && j.frame.join_ref === frame.join_ref)
    if (heldJoin) {
      // A push or leave of a join still held: answered once the join is (as Phoenix, in order).
      heldJoin.behind.push(frame)
      this.changed()
      return
    }
    this.dispatchSafely(c, frame)
    this.changed()
  }

  /** Dispatches a client frame; a join hook or push handler that throws is the channel crashing. */
  private dispatchSafely(c: SimConnection, frame: ClientFrame): void {
    try {
      this.dispatch(c, frame)
    } catch (error) {
      this.handlerThrew(c, frame, error)
    }
  }

  /**
   * A join hook or push handler threw: recorded and logged. A join hook that throws is Phoenix's
   * crashed join/3 (an error reply, "join crashed"); a push handler that throws is the channel
   * process crashing (phx_error, the join forgotten).
   */
  private handlerThrew(c: SimConnection, frame: ClientFrame, error: unknown): void {
    const text = thrownText(error)
    c.problems.push(`handler error on ${frame.topic} ${frame.event}: ${text}`)
    this.logger.warn('handler threw', { socket: c.id, topic: frame.topic, error: text })
    if (frame.event === CHANNEL_EVENTS.join) this.reply(c, frame, 'error', { reason: 'join crashed' })
    else this.crashChannel(c, frame.topic)
  }

  /** A phx_reply to `frame`, carrying `joinRef` (the frame's own by default). */
  private reply(c: SimConnection, frame: ClientFrame, status: string, response: Payload, joinRef: WireRef = frame.join_ref): void {
    // Keys in Jason's order, as Phoenix encodes a reply: {"response": ..., "status": ...}.
    c.send({ join_ref: joinRef, ref: frame.ref, topic: frame.topic, event: CHANNEL_EVENTS.reply, payload: { response, status } })
  }

  /**
   * Routes a client frame as Phoenix's socket does (phoenix lib/phoenix/socket.ex handle_in):
   * by topic alone, never by join_ref. A joined channel answers with its own join_ref; an
   * unjoined topic gets "unmatched topic" with join_ref null; phx_leave of an unjoined topic is
   * answered ok, echoing the join_ref it carried; a phx_leave whose join_ref is not the
   * channel's raced a server close and gets no answer.
   */
  private dispatch(c: SimConnection, frame: ClientFrame): void {
    if (frame.topic === HEARTBEAT_TOPIC && frame.event === HEARTBEAT_EVENT) {
      c.heartbeats++
      this.reply(c, frame, 'ok', {}, null)
      return
    }
    if (frame.event === CHANNEL_EVENTS.join) {
      c.joins++
      if (c.joinsReceived.length < JOINS_KEPT) c.joinsReceived.push({ topic: cutField(frame.topic), joinRef: cutRef(frame.join_ref), at: this.now() })
      return this.join(c, frame)
    }
    const channel = c.channels.get(frame.topic)
    if (frame.event === CHANNEL_EVENTS.leave) {
      if (!channel) return this.reply(c, frame, 'ok', {})
      // Phoenix leaves when the leave's join_ref is the channel's, or the channel has none (V1).
      if (channel.joinRef !== null && frame.join_ref !== channel.joinRef) return
      return this.toChannel(c, frame, channel)
    }
    if (!channel) return this.reply(c, frame, 'error', { reason: 'unmatched topic' }, null)
    this.toChannel(c, frame, channel)
  }

  /**
   * Hands a frame to its joined channel: handled on the next turn (setImmediate), in order with the
   * channel's other frames. Phoenix's socket process answers a heartbeat, an "unmatched topic" and
   * a join itself, and forwards the rest to the channel's own process, which answers through the
   * socket's mailbox: a heartbeat written after a push often has its reply first (about half of
   * 200 rounds on Bandit, 5-35% on Cowboy; measured 2026-12-06), and here it always does when both
   * came in one read. A frame whose channel is gone by then (left, joined again, crashed, its
   * socket closed) is answered by nobody, as a push written right after its topic's phx_leave is
   * on Phoenix (17-20 of 20 rounds).
   */
  private toChannel(c: SimConnection, frame: ClientFrame, channel: SimChannel): void {
    this.channelWork.push({ connection: c, frame, channel })
    this.channelTurn ??= setImmediate(() => this.runChannelWork())
  }

  private runChannelWork(): void {
    this.channelTurn = null
    const work = this.channelWork
    this.channelWork = []
    for (const item of work) {
      const { connection: c, frame, channel } = item
      if (c.state !== 'open' || c.channels.get(frame.topic) !== channel) continue
      // A frozen server's channel processes answer nothing either: the work waits for the thaw.
      if (c.stalled) {
        const parked = this.parkedWork.get(c)
        if (parked === undefined) this.parkedWork.set(c, [item])
        else parked.push(item)
        continue
      }
      try {
        this.channelHandles(c, frame, channel)
      } catch (error) {
        this.handlerThrew(c, frame, error)
      }
    }
    if (work.length > 0) this.changed()
  }

  /** What a joined channel's process does with a frame: a leave (ok, then phx_close), the control channel's ok, or the push handler's answer. */
  private channelHandles(c: SimConnection, frame: ClientFrame, channel: SimChannel): void {
    if (frame.event === CHANNEL_EVENTS.leave) {
      c.channels.delete(frame.topic)
      this.reply(c, frame, 'ok', {}, channel.channelRef)
      c.send({ join_ref: channel.joinRef, ref: channel.joinRef, topic: frame.topic, event: CHANNEL_EVENTS.close, payload: {} })
      return
    }
    if (frame.topic === controlTopic(c.agentId)) return this.reply(c, frame, 'ok', {}, channel.channelRef)
    const answer = this.pushHandler({ connection: c, topic: frame.topic, event: frame.event, payload: frame.payload })
    if (answer) this.reply(c, frame, answer.status, answer.response, channel.channelRef)
  }

  private join(c: SimConnection, frame: ClientFrame): void {
    // Phoenix joins with a null ref or join_ref too (its reply then carries the same nulls).
    if (frame.topic.startsWith('agent_control:') && frame.topic !== controlTopic(c.agentId)) {
      this.reply(c, frame, 'error', { reason: 'unauthorized' })
      return
    }
    // Phoenix's socket routes a join before any channel sees it; the control channel is the platform's own route.
    if (!frame.topic.startsWith('agent_control:') && !this.isRouted(frame.topic)) {
      this.reply(c, frame, 'error', { reason: 'unmatched topic' }, null)
      return
    }
    const rule = this.joinRules.find((r) => (typeof r.match === 'string' ? r.match === frame.topic : r.match.test(frame.topic)))
    if (rule) {
      rule.times -= 1
      if (rule.times <= 0) this.joinRules.splice(this.joinRules.indexOf(rule), 1)
    }
    const outcome: JoinOutcome = rule?.outcome ?? { reply: 'ok' }
    if (outcome.reply === 'hold') {
      this.heldJoinFrames.push({ connection: c, frame, behind: [] })
      this.changed()
      return
    }
    this.answerJoin(c, frame, outcome)
  }

  /** Whether a channel route matches `topic` ({@link SimulatorOptions.channels}). */
  private isRouted(topic: string): boolean {
    const routes = this.channelRoutes
    return routes === null || routes.exact.has(topic) || routes.prefixes.some((prefix) => topic.startsWith(prefix))
  }

  /**
   * Answers a join. A second join of a topic on one socket ends the first whatever the new
   * join's outcome: the reply to the new join comes first, then phx_close with the OLD join_ref
   * (phoenix socket.ex: the old channel is shut down and its close queued behind the reply).
   */
  private answerJoin(c: SimConnection, frame: ClientFrame, outcome: Exclude<JoinOutcome, { reply: 'hold' }>): void {
    if (c.state !== 'open') return
    const previous = c.channels.get(frame.topic)
    if (previous) c.channels.delete(frame.topic)
    // Phoenix's channel server takes `join_ref || ref`: Elixir's false is as empty as nil there (measured).
    if (outcome.reply === 'ok') c.channels.set(frame.topic, { topic: frame.topic, joinRef: frame.join_ref, channelRef: frame.join_ref === null || frame.join_ref === false ? frame.ref : frame.join_ref })
    outcome.before?.(c)
    const response = (r: JoinResponse | undefined): Payload => (typeof r === 'function' ? r({ topic: frame.topic, payload: frame.payload as Payload, connection: c }) : (r ?? {}))
    if (outcome.reply === 'error') this.reply(c, frame, 'error', response(outcome.response))
    else if (outcome.reply === 'ok') this.reply(c, frame, 'ok', response(outcome.response))
    outcome.after?.(c)
    if (previous) {
      c.send({ join_ref: previous.joinRef, ref: previous.joinRef, topic: frame.topic, event: CHANNEL_EVENTS.close, payload: {} })
    }
  }
}

/** A client frame handed to its joined channel, to handle on the channel's turn. */
interface ChannelWork {
  connection: SimConnection
  frame: ClientFrame
  channel: SimChannel
}

/**
 * The routes of {@link SimulatorOptions.channels}, checked as Phoenix checks a `channel` pattern
 * when the socket compiles (socket.ex `to_topic_match`: one `*`, at the end); null for undefined.
 *
 * @throws {TypeError} when `channels` is not an array of strings.
 * @throws {RangeError} for a pattern with a `*` anywhere but at its end, naming it.
 */
function channelRoutesOf(channels: unknown): { exact: ReadonlySet<string>; prefixes: readonly string[] } | null {
  if (channels === undefined) return null
  const wanted = `channels must be an array of topic patterns such as ['room:*', 'lobby'], got`
  if (!Array.isArray(channels)) throw new TypeError(`${wanted} ${shownAs(channels)}`)
  const exact = new Set<string>()
  const prefixes: string[] = []
  // Each index read (every() would skip the holes of a sparse array).
  for (let i = 0; i < channels.length; i++) {
    const pattern: unknown = channels[i]
    if (typeof pattern !== 'string') throw new TypeError(`${wanted} ${shownAs(pattern)} at index ${i}`)
    const star = pattern.indexOf('*')
    if (star === -1) exact.add(pattern)
    else if (star === pattern.length - 1) prefixes.push(pattern.slice(0, -1))
    else throw new RangeError(`channels: ${JSON.stringify(pattern)} holds a * before its end; a pattern is an exact topic or a prefix ending in * (Phoenix: "channels using splat patterns must end with *")`)
  }
  return { exact, prefixes }
}

/** A path's non-empty segments, joined by `/` (how Plug's router sees the path). */
function segmentsOf(pathname: string): string {
  return pathname
    .split('/')
    .filter((segment) => segment !== '')
    .join('/')
}

/**
 * Text that may hold a float literal beyond a double's range: an exponent of 3 digits or more, or
 * a run of 309 digits or more before a decimal point. An integer literal of any length is not one:
 * Jason reads it exactly (a bignum) and Phoenix serves it. The lookbehind starts the digit run's
 * scan only at its first digit, so the test is linear in the text (a scan at every digit cost
 * 0.5 s per MB of long digit strings, a review found).
 */
const MAYBE_OUT_OF_RANGE = /\d[eE][+-]?\d{3}|(?<!\d)\d{309,}\./

/**
 * A decoded client frame that holds a float beyond a double's range (`1e309`, which JSON.parse
 * reads as Infinity) anywhere, its payload, a ref or an element past the fifth, refused as not JSON: Jason raises on it, and Phoenix closes the
 * socket 1011 (measured 2026-12-06 on Bandit and Cowboy); a 309-digit integer is served there, and
 * here. Only a text that may hold such a float is walked, without recursion (a payload may nest a
 * million deep). A frame holding both such text (an `e123` in a string) and a huge integer is
 * refused here, served there: Node 20's JSON.parse does not say which literal gave an Infinity.
 */
function refuseOutOfRange(text: string, decoded: ClientDecodeResult): ClientDecodeResult {
  if (!decoded.ok || !MAYBE_OUT_OF_RANGE.test(text)) return decoded
  // The whole frame as sent: a ref (1e309 reads as Infinity, which JSON would echo as null) and the
  // elements past the fifth, which the frame does not keep, crash Phoenix's decoder as well.
  const pending: unknown[] = [JSON.parse(text) as unknown]
  while (pending.length > 0) {
    const value = pending.pop()
    if (typeof value === 'number') {
      if (!Number.isFinite(value)) return { ok: false, problem: { kind: 'not-json', detail: "the JSON holds a number beyond a double's range, which Phoenix's JSON decoder (Jason) refuses", raw: text } }
    } else if (Array.isArray(value)) {
      for (const item of value) pending.push(item)
    } else if (value !== null && typeof value === 'object') {
      for (const item of Object.values(value)) pending.push(item)
    }
  }
  return decoded
}

/** A value as an error message shows it: its JSON where it has one (cut between tokens at 80 characters, reasons.ts clipText), else its String(). */
function shownAs(value: unknown): string {
  try {
    const json = JSON.stringify(value)
    if (json !== undefined) return json.length > 80 ? `${clipText(json, 80)}...` : json
  } catch {
    // a cycle or a BigInt: String() below
  }
  return String(value)
}
