/**
 * The Phoenix V2 wire protocol and the platform's payloads, as zod schemas shared by the link
 * and the simulator. Decoding never throws: every inbound frame is either a `Frame` or a typed
 * `FrameProblem` the caller reports.
 *
 * Sources: phoenixframework/phoenix lib/phoenix/socket/serializers/v2_json_serializer.ex and
 * assets/js/phoenix/serializer.js (frame layout, binary kinds); band-ai/band-sdk-python
 * src/band/client/streaming/client.py (control channel, supersede and agent.control payloads).
 */
import * as z from 'zod/mini'
import { describeIssue } from './zod-issues.js'
import { deepFreeze } from './freeze.js'

/** Phoenix's reserved channel events (assets/js/phoenix/constants.js CHANNEL_EVENTS). */
export const CHANNEL_EVENTS = deepFreeze({
  join: 'phx_join',
  leave: 'phx_leave',
  reply: 'phx_reply',
  error: 'phx_error',
  close: 'phx_close',
} as const)

/**
 * Whether `event` is in phoenix.js's own namespaces (`phx_*`, `chan_reply_*`; channel.js,
 * push.js), which hosts must not push and servers send only as replies, errors and closes.
 * A character test before startsWith, not a RegExp: it runs on every inbound frame.
 */
export function isReservedEvent(event: string): boolean {
  const first = event.charCodeAt(0)
  return (first === 112 /* p */ && event.startsWith('phx_')) || (first === 99 /* c */ && event.startsWith('chan_reply_'))
}

/** Topic of the socket-level heartbeat (`[null, ref, "phoenix", "heartbeat", {}]`). */
export const HEARTBEAT_TOPIC = 'phoenix'
/** Event of the socket-level heartbeat. */
export const HEARTBEAT_EVENT = 'heartbeat'
/** Protocol version query parameter phoenix.js sends (`vsn=2.0.0`). */
export const PROTOCOL_VSN = '2.0.0'
/** Event of the platform's supersede push on the control channel. */
export const SUPERSEDE_EVENT = 'supersede'
/** Event of the platform's control signals on the control channel. */
export const CONTROL_EVENT = 'agent.control'
/** Socket param naming the agent (docs/field-notes.md "The platform's control channel"). */
export const AGENT_ID_PARAM = 'agent_id'
/** Socket param carrying the API key when it is not sent as a header. */
export const API_KEY_PARAM = 'api_key'
/** Upgrade header carrying the API key (Node only; browsers cannot set upgrade headers). */
export const API_KEY_HEADER = 'x-api-key'
/** Socket param asking the platform to refuse a duplicate with HTTP 409 instead of superseding the older socket. */
export const ON_CONFLICT_PARAM = 'on_conflict'

/**
 * Socket params the link sets itself: `agent_id` (agentId), `api_key` (apiKey; on Phoenix the
 * param wins over the `x-api-key` header, so a host's own would override a rotated key, and it
 * would not be redacted), `on_conflict` (onConflict, and the conflict probes a supersede of
 * unknown cause asks for), `vsn` (phoenix.js socket.js endPointURL, `2.0.0`).
 */
export const LINK_PARAMS: readonly string[] = Object.freeze([AGENT_ID_PARAM, API_KEY_PARAM, ON_CONFLICT_PARAM, 'vsn'])

/**
 * Why host `params` cannot be sent, when they name a param the link sets itself ({@link LINK_PARAMS}); null when they can.
 */
export function linkParamIn(params: Record<string, unknown>): string | null {
  const taken = LINK_PARAMS.find((name) => Object.hasOwn(params, name))
  return taken === undefined
    ? null
    : `params must not set ${JSON.stringify(taken)}: the link sets agent_id, api_key, on_conflict and vsn itself (use the agentId, apiKey and onConflict options)`
}

/**
 * The mandatory control channel topic of an agent: `agent_control:<agent_id>`.
 *
 * @example controlTopic('agent-7') // 'agent_control:agent-7'
 */
export function controlTopic(agentId: string): string {
  return `agent_control:${agentId}`
}

/** A JSON object payload: Phoenix payloads are maps, never arrays or scalars. */
export const Payload = z.record(z.string(), z.unknown())
/** A JSON object payload. */
export type Payload = z.infer<typeof Payload>

/** A decoded V2 frame: `[join_ref, ref, topic, event, payload]`. Refs are decimal strings. */
export interface Frame {
  join_ref: string | null
  ref: string | null
  topic: string
  event: string
  /**
   * A JSON value for text frames (Phoenix always sends an object; anything else is kept so that,
   * for example, a `supersede` with a null payload still ends the session), an ArrayBuffer for
   * binary frames. A phx_reply payload is always `{status, response}`.
   */
  payload: unknown
}

/**
 * A `join_ref` or `ref` as a client may send it to a server. phoenix.js sends decimal strings (or
 * null); Phoenix reads any JSON there and echoes it as it came: a number, a boolean, also an object
 * or an array (measured 2026-12-07 on Bandit and Cowboy, phoenix 1.7.14: `[1, 2, topic,
 * "phx_join", {}]` is answered `[1, 2, topic, "phx_reply", ...]`, and the channel's pushes carry
 * the number). The simulator serves the scalars and refuses objects and arrays (docs/field-notes.md).
 */
export type WireRef = string | number | boolean | null

/** A frame a client sent, as a server reads it: a {@link Frame} whose refs may be any {@link WireRef}. */
export interface ClientFrame extends Omit<Frame, 'join_ref' | 'ref'> {
  join_ref: WireRef
  ref: WireRef
}

/** Outcome of decoding one frame a client sent. */
export type ClientDecodeResult = { ok: true; frame: ClientFrame } | { ok: false; problem: FrameProblem }

/** The text form of a V2 frame, as a zod tuple. decodeTextFrame checks the same shape by hand (it is the hot path); a property test keeps them in step. */
export const TextFrame = z.tuple([z.nullable(z.string()), z.nullable(z.string()), z.string(), z.string(), z.unknown()])

/** Payload of a phx_reply: `{"status": "ok" | "error" | ..., "response": {...}}`. */
export const ReplyPayload = z.object({ status: z.string(), response: z.optional(z.unknown()) })
/** Payload of a phx_reply. */
export type ReplyPayload = z.infer<typeof ReplyPayload>

/** Why an inbound frame could not be used. */
export const FrameProblemKind = z.enum([
  'too-large',
  'not-json',
  'not-array',
  'wrong-arity',
  'wrong-types',
  'bad-reply',
  'bad-binary',
])
/** Why an inbound frame could not be used. */
export type FrameProblemKind = z.infer<typeof FrameProblemKind>

/** A frame that could not be decoded: its kind, a sentence, and the start of the raw text. */
export interface FrameProblem {
  kind: FrameProblemKind
  detail: string
  /** The first 200 characters of the frame (binary frames: a hex prefix). */
  raw: string
}

/** Outcome of decoding one inbound frame. */
export type DecodeResult = { ok: true; frame: Frame } | { ok: false; problem: FrameProblem }

const RAW_PREVIEW = 200

/** The start of a frame's text as a problem quotes it: its first 200 characters, `…` when cut. */
export function framePreview(text: string): string {
  return text.length > RAW_PREVIEW ? `${text.slice(0, RAW_PREVIEW)}…` : text
}

function hexPreview(bytes: Uint8Array): string {
  return Array.from(bytes.subarray(0, 64), (b) => b.toString(16).padStart(2, '0')).join('')
}

/** The detail of a text that JSON.parse refused, from V8's message without the piece of text it quotes. */
function notJsonDetail(message: string): string {
  if (message.includes('end of JSON input')) return 'not JSON: the text ends inside a value'
  const position = /at position (\d+)/.exec(message)?.[1]
  return position === undefined ? 'not JSON: a syntax error' : `not JSON: a syntax error at position ${position}`
}

function problem(kind: FrameProblemKind, detail: string, raw: string): DecodeResult {
  return { ok: false, problem: { kind, detail, raw } }
}

/**
 * Decodes a V2 text frame. Never throws.
 *
 * @param text the frame as received.
 * @param maxBytes frames longer than this many bytes of UTF-8 are refused as `too-large` (in Node
 *   `ws`'s own limit closes the socket with 1009 before this; a browser's WebSocket has no limit,
 *   so there this is the only one).
 */
export function decodeTextFrame(text: string, maxBytes = Number.POSITIVE_INFINITY): DecodeResult {
  return decodeText(text, maxBytes, true)
}

/**
 * Decodes a V2 text frame a client sent to a server, as Phoenix's socket reads it (its V2
 * serializer matches `[join_ref, ref, topic, event, payload | _]`): the checks of
 * {@link decodeTextFrame} but three. A `phx_reply` payload may have any shape, since Phoenix routes
 * a client's `phx_reply` like any other event (ok on a joined topic, "unmatched topic" otherwise;
 * measured 2026-12-06). An array longer than 5 elements is read, the rest ignored. A join_ref or
 * ref may be any JSON scalar ({@link WireRef}), kept as it came so that a reply echoes it (both
 * measured 2026-12-07 on Bandit and Cowboy). Objects and arrays there, which Phoenix echoes too, are
 * refused `wrong-types`. Never throws.
 */
export function decodeTextFrameFromClient(text: string, maxBytes = Number.POSITIVE_INFINITY): ClientDecodeResult {
  return decodeText(text, maxBytes, false) as ClientDecodeResult
}

/**
 * The UTF-8 length of `text` in bytes, as it came over the wire (RFC 6455 section 5.6: a text
 * frame's payload is UTF-8): 1 to 4 bytes per character, a surrogate pair 4, a lone surrogate 3
 * (as TextEncoder writes it: U+FFFD).
 */
export function utf8Length(text: string): number {
  let bytes = 0
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i)
    if (unit < 0x80) bytes += 1
    else if (unit < 0x800) bytes += 2
    else if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      bytes += 4
      i++
    } else bytes += 3
  }
  return bytes
}

/** Whether `value` is a ref a client may send as the simulator reads it: a JSON scalar ({@link WireRef}). */
export function isWireRef(value: unknown): value is WireRef {
  return value === null || typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
}

/** Whether `value` is a ref as a Phoenix server sends it: a string (phoenix.js's, echoed) or null. */
function isServerRef(value: unknown): value is string | null {
  return value === null || typeof value === 'string'
}

/** `fromServer`: the link's strict read of what a server sent; otherwise a server's read of a client's frame ({@link decodeTextFrameFromClient}). */
function decodeText(text: string, maxBytes: number, fromServer: boolean): DecodeResult {
  // A character is 1 to 3 bytes per UTF-16 unit: counted only when the length alone cannot decide.
  if (text.length * 3 > maxBytes) {
    const bytes = utf8Length(text)
    if (bytes > maxBytes) return problem('too-large', `text frame of ${bytes} bytes exceeds ${maxBytes}`, framePreview(text))
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (error) {
    // V8's message quotes a piece of the text, cut where V8 chose (`..."y-0123": nope}"`): none of
    // it is kept, only where the text ends or the position V8 names, so no piece of a secret the
    // frame echoed reaches a detail. (The raw preview is the caller's to redact.)
    return problem('not-json', notJsonDetail((error as Error).message), framePreview(text))
  }
  if (!Array.isArray(parsed)) return problem('not-array', 'a V2 frame is a JSON array', framePreview(text))
  if (fromServer ? parsed.length !== 5 : parsed.length < 5) {
    return problem('wrong-arity', `a V2 frame has 5 elements, this one has ${parsed.length}`, framePreview(text))
  }
  // Index reads, not array destructuring (which runs the iterator protocol): this is on every frame's path.
  const join_ref: unknown = parsed[0]
  const ref: unknown = parsed[1]
  const topic: unknown = parsed[2]
  const event: unknown = parsed[3]
  const payload: unknown = parsed[4]
  const refOk = fromServer ? isServerRef : isWireRef
  const wrong = !refOk(join_ref) ? 0 : !refOk(ref) ? 1 : typeof topic !== 'string' ? 2 : typeof event !== 'string' ? 3 : -1
  if (wrong >= 0) {
    const refs = fromServer ? 'string or null' : 'a string, number, boolean or null'
    const names = [`join_ref (${refs})`, `ref (${refs})`, 'topic (string)', 'event (string)']
    return problem('wrong-types', `element ${wrong} must be ${names[wrong]} (expected [join_ref, ref, topic, event, payload])`, framePreview(text))
  }
  if (fromServer && event === CHANNEL_EVENTS.reply) {
    const reply = payload as { status?: unknown } | null
    if (!reply || typeof reply !== 'object' || Array.isArray(reply) || typeof reply.status !== 'string') {
      return problem('bad-reply', 'a phx_reply payload is {"status": string, "response": ...}', framePreview(text))
    }
  }
  return { ok: true, frame: { join_ref: join_ref as string | null, ref: ref as string | null, topic: topic as string, event: event as string, payload } }
}

/** Encodes a frame with an object payload as V2 JSON text (the refs of a {@link ClientFrame} as they came, numbers as numbers). */
export function encodeTextFrame(frame: Frame | ClientFrame): string {
  // Only JSON payloads: a binary payload goes through encodeBinaryToClient/ToServer.
  return JSON.stringify([frame.join_ref, frame.ref, frame.topic, frame.event, frame.payload])
}

/** A UTF-16 code unit's range: high surrogates D800-DBFF, low DC00-DFFF. */
const isHigh = (unit: number) => unit >= 0xd800 && unit <= 0xdbff
const isLow = (unit: number) => unit >= 0xdc00 && unit <= 0xdfff
const SURROGATE = /[\uD800-\uDFFF]/

/**
 * Why `value` is not a plain object as JSON would send it (a Phoenix map), or null when it is.
 * Plain: an object whose prototype is `Object.prototype` (of any realm) or null, with no `toJSON`
 * method. `JSON.stringify` sends anything else as something other than what the caller holds: a
 * Map or a Set as `{}`, a Date as a string, a typed array as an object of indices, a class
 * instance without its prototype's getters, an array as a list.
 *
 * @returns a phrase naming what it is (`null`, `a string`, `an array`, `a Map`, `a Uint8Array`,
 *   `an object with a toJSON method (JSON would send what it returns)`, `a value that cannot be
 *   read (…)` for a revoked proxy); null for a plain object. Never throws.
 */
export function notPlainObject(value: unknown): string | null {
  if (value === null) return 'null'
  if (typeof value !== 'object') return `a ${typeof value}`
  try {
    if (Array.isArray(value)) return 'an array'
    const proto = Object.getPrototypeOf(value) as object | null
    if (proto === null || Object.getPrototypeOf(proto) === null) {
      return typeof (value as { toJSON?: unknown }).toJSON === 'function' ? 'an object with a toJSON method (JSON would send what it returns)' : null
    }
    const name = (proto as { constructor?: { name?: unknown } }).constructor?.name
    return typeof name === 'string' && name !== '' ? `a ${name}` : 'an object with a prototype of its own'
  } catch (error) {
    return `a value that cannot be read (${error instanceof Error ? error.message : String(error)})`
  }
}

/**
 * Where, inside a payload that is a plain object, a value sits whose content JSON would lose: a
 * Map, Set, WeakMap or WeakSet (sent as `{}`), an ArrayBuffer (`{}`), or a typed array or DataView
 * (an object of indexes, or `{}`): what it is and its path, e.g. `a Map at value.items`, or null
 * when there is none. A value with a `toJSON` method is sent as that returns (a Date as ISO text,
 * a Buffer as `{type, data}`, a host's own class as it chose), as `JSON.stringify` documents it, and
 * is not looked into; nor is a value of a class without one looked at but for its own fields,
 * which JSON sends. Walks objects and arrays once each, without recursion (a cycle is left to the
 * encoder, which refuses it); plain objects and arrays, nearly every value, cost one prototype
 * read each. Never throws: a value that cannot be read says so.
 */
export function lossyValueIn(payload: object): string | null {
  const seen = new Set<object>([payload])
  // Each object looked into, with where it is: its parent's index and its key there (-1: the
  // payload). A path is written only for the value refused.
  const nodes: object[] = [payload]
  const parents: number[] = [-1]
  const keys: string[] = ['']
  /** The path of `key` in node `index`: each key from the payload down, `[i]` in an array, `.k` in an object (`a.b[1].c`). */
  const pathOf = (index: number, key: string): string => {
    const steps: Array<[key: string, inArray: boolean]> = [[key, Array.isArray(nodes[index])]]
    for (let i = index; i > 0; i = parents[i]!) steps.unshift([keys[i]!, Array.isArray(nodes[parents[i]!])])
    return steps.map(([k, inArray], j) => (inArray ? `[${k}]` : j === 0 ? k : `.${k}`)).join('')
  }
  const stack: number[] = [0]
  try {
    for (let index = stack.pop(); index !== undefined; index = stack.pop()) {
      const container = nodes[index]!
      for (const key of Object.keys(container)) {
        const value: unknown = (container as Record<string, unknown>)[key]
        if (value === null || typeof value !== 'object' || seen.has(value)) continue
        seen.add(value)
        const proto = Object.getPrototypeOf(value) as object | null
        // A plain object or an array (of this realm): looked into; a value with toJSON goes as it returns.
        if (!(proto === Object.prototype || proto === Array.prototype || proto === null)) {
          if (typeof (value as { toJSON?: unknown }).toJSON === 'function') continue
          const lost = lossyKind(value)
          if (lost !== null) {
            const why = lost.startsWith('binary') ? 'JSON cannot carry it: send an ArrayBuffer as the whole payload, or encode it, e.g. as base64' : 'JSON would send it as {}'
            return `${lost} at ${pathOf(index, key)} (${why})`
          }
        }
        nodes.push(value)
        parents.push(index)
        keys.push(key)
        stack.push(nodes.length - 1)
      }
    }
  } catch (error) {
    return `a value that cannot be read (${error instanceof Error ? error.message : String(error)})`
  }
  return null
}

/**
 * Why `value` cannot go as a JSON map as the host holds it: not a plain object
 * ({@link notPlainObject}: `a Map`, `an array`, ...), or one holding a value JSON would lose
 * ({@link lossyValueIn}: `an object holding a Map at value.items (...)`); null when it can. The
 * check of push payloads and join params. Never throws.
 */
export function notJsonMap(value: unknown): string | null {
  const notPlain = notPlainObject(value)
  if (notPlain !== null) return notPlain
  const lost = lossyValueIn(value as object)
  return lost === null ? null : `an object holding ${lost}`
}

/** What `value` (an object that is not plain and has no toJSON) is when JSON would lose its content, or null. */
function lossyKind(value: object): string | null {
  if (value instanceof Map || value instanceof Set || value instanceof WeakMap || value instanceof WeakSet) return `a ${value.constructor.name}`
  const tag = Object.prototype.toString.call(value)
  // Of any realm: a collection or binary data made in another context is the same to JSON.
  if (tag === '[object Map]' || tag === '[object Set]' || tag === '[object WeakMap]' || tag === '[object WeakSet]') return `a ${tag.slice(8, -1)}`
  if (ArrayBuffer.isView(value) || tag === '[object ArrayBuffer]' || tag === '[object SharedArrayBuffer]') return `binary data (${(value as { constructor?: { name?: string } }).constructor?.name ?? tag.slice(8, -1)})`
  return null
}

/** ArrayBuffer's `byteLength` getter: it throws for anything but an ArrayBuffer of any realm (a SharedArrayBuffer, a view, a look-alike). */
const ARRAY_BUFFER_BYTE_LENGTH = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'byteLength')!.get!

/** Whether `value` is an ArrayBuffer, of this realm or another (not a SharedArrayBuffer, a view or a look-alike). */
export function isArrayBuffer(value: object): boolean {
  try {
    ARRAY_BUFFER_BYTE_LENGTH.call(value)
    return true
  } catch {
    return false
  }
}

/**
 * Whether JSON text holds a lone UTF-16 surrogate: half of a character such as an emoji (cut by a
 * `slice()`), written as a `\uXXXX` escape (as `JSON.stringify` writes one; either case) or as the
 * code unit itself, with no other half beside it. A pair written as two escapes (`\ud83d\ude00`,
 * as Python's json.dumps writes an emoji) is whole. Phoenix's JSON decoder (Jason) refuses a lone
 * one, and the socket closes 1011: measured on Phoenix 1.7.14 with Bandit and Cowboy
 * (docs/field-notes.md "Real Phoenix").
 */
export function hasLoneSurrogate(json: string): boolean {
  // Most text holds neither an escape of one nor a surrogate: two native scans decide it.
  if (!json.includes('\\u') && !SURROGATE.test(json)) return false
  // The code unit at `i` (an escape or a character) and where the next one starts.
  const unitAt = (i: number): [number, number] => {
    if (json[i] === '\\' && json[i + 1] === 'u') return [Number.parseInt(json.slice(i + 2, i + 6), 16), i + 6]
    return [json.charCodeAt(i), i + 1]
  }
  for (let i = 0; i < json.length; ) {
    if (json[i] === '\\' && json[i + 1] !== 'u') {
      i += 2 // another escape (\\, \", \n, ...): never a surrogate
      continue
    }
    const [unit, next] = unitAt(i)
    if (isLow(unit)) return true
    if (isHigh(unit)) {
      if (next >= json.length || !isLow(unitAt(next)[0])) return true
      i = unitAt(next)[1]
      continue
    }
    i = next
  }
  return false
}

/**
 * Why text that goes into the socket URL (the agent id, the key sent as a param, the params) or
 * an HTTP header (the key sent as one) cannot be sent: `encodeURIComponent` throws `URIError: URI
 * malformed` on half of a character, and a header value holds Latin-1 only (RFC 9110 section
 * 5.5), so every attempt would fail the same way, for ever. Ends with the carrier, e.g. `a URL`.
 */
export const LONE_SURROGATE_CANNOT_GO_IN = 'it holds a lone UTF-16 surrogate (half of a character such as an emoji, cut by a slice()), which cannot go in'

/**
 * Why a frame holding half of a character is not sent (hasLoneSurrogate): the reason of a push's
 * `PUSH_INVALID`, of a channel's `ConfigurationError`, and of a join attempt's `other`.
 */
export const LONE_SURROGATE_MESSAGE = "it holds a lone UTF-16 surrogate (half of a character such as an emoji, cut by a slice()); Phoenix's JSON decoder refuses it by closing the socket (1011)"

/** Whether `text` is whole UTF-16: no lone surrogate. */
export const isWellFormedText = (text: string): boolean => !hasLoneSurrogate(JSON.stringify(text))

/** Binary frame kinds of the V2 serializer (assets/js/phoenix/serializer.js KINDS). */
export const BINARY_KINDS = deepFreeze({ push: 0, reply: 1, broadcast: 2 } as const)

const utf8 = new TextDecoder('utf-8', { fatal: true })

function readFields(bytes: Uint8Array, offset: number, sizes: number[]): string[] | string {
  const out: string[] = []
  let at = offset
  for (const size of sizes) {
    if (at + size > bytes.length) return `field of ${size} bytes at offset ${at} runs past the frame end (${bytes.length})`
    try {
      out.push(utf8.decode(bytes.subarray(at, at + size)))
    } catch {
      return `field at offset ${at} is not UTF-8`
    }
    at += size
  }
  return out
}

function toBytes(data: ArrayBuffer | Uint8Array): Uint8Array {
  return data instanceof Uint8Array ? data : new Uint8Array(data)
}

/**
 * The bytes from `from` on, as an ArrayBuffer of their own. Uint8Array's slice copies; a Node
 * Buffer's own slice() does not (it is subarray(), its `.buffer` the whole pooled allocation), so
 * it is called as Uint8Array's whatever `bytes` is.
 */
function sliceBuffer(bytes: Uint8Array, from: number): ArrayBuffer {
  return Uint8Array.prototype.slice.call(bytes, from).buffer as ArrayBuffer
}

/**
 * Decodes a binary frame sent by a server to a client: push (kind 0: join_ref, topic, event),
 * reply (kind 1: join_ref, ref, topic, status) or broadcast (kind 2: topic, event). One-byte size
 * fields. Never throws.
 */
export function decodeBinaryFromServer(data: ArrayBuffer | Uint8Array, maxBytes = Number.POSITIVE_INFINITY): DecodeResult {
  const bytes = toBytes(data)
  if (bytes.length > maxBytes) return problem('too-large', `binary frame of ${bytes.length} bytes exceeds ${maxBytes}`, hexPreview(bytes))
  const kind = bytes[0]
  const header = (n: number) => (bytes.length < n ? null : Array.from(bytes.subarray(1, n)))
  if (kind === BINARY_KINDS.push) {
    const sizes = header(4)
    if (!sizes) return problem('bad-binary', 'push header needs 4 bytes', hexPreview(bytes))
    const fields = readFields(bytes, 4, sizes)
    if (typeof fields === 'string') return problem('bad-binary', fields, hexPreview(bytes))
    const [join_ref, topic, event] = fields as [string, string, string]
    const end = 4 + sizes.reduce((a, b) => a + b, 0)
    return { ok: true, frame: { join_ref, ref: null, topic, event, payload: sliceBuffer(bytes, end) } }
  }
  if (kind === BINARY_KINDS.reply) {
    const sizes = header(5)
    if (!sizes) return problem('bad-binary', 'reply header needs 5 bytes', hexPreview(bytes))
    const fields = readFields(bytes, 5, sizes)
    if (typeof fields === 'string') return problem('bad-binary', fields, hexPreview(bytes))
    const [join_ref, ref, topic, status] = fields as [string, string, string, string]
    const end = 5 + sizes.reduce((a, b) => a + b, 0)
    return {
      ok: true,
      frame: {
        join_ref,
        ref,
        topic,
        event: CHANNEL_EVENTS.reply,
        // phoenix.js puts the binary response under `response`, like a JSON reply's.
        payload: { status, response: sliceBuffer(bytes, end) } as unknown as Payload,
      },
    }
  }
  if (kind === BINARY_KINDS.broadcast) {
    const sizes = header(3)
    if (!sizes) return problem('bad-binary', 'broadcast header needs 3 bytes', hexPreview(bytes))
    const fields = readFields(bytes, 3, sizes)
    if (typeof fields === 'string') return problem('bad-binary', fields, hexPreview(bytes))
    const [topic, event] = fields as [string, string]
    const end = 3 + sizes.reduce((a, b) => a + b, 0)
    return { ok: true, frame: { join_ref: null, ref: null, topic, event, payload: sliceBuffer(bytes, end) } }
  }
  return problem('bad-binary', `unknown binary kind ${String(kind)} (expected 0 push, 1 reply, 2 broadcast)`, hexPreview(bytes))
}

/**
 * Decodes a binary frame sent by a client to a server: kind 0 push with join_ref, ref, topic and
 * event sizes (assets/js/phoenix/serializer.js binaryEncode). A join_ref or ref of no bytes is the
 * empty string, as Phoenix's V2 serializer reads it (its replies echo `""`; measured 2026-12-06 on
 * Bandit and Cowboy). Never throws.
 */
export function decodeBinaryFromClient(data: ArrayBuffer | Uint8Array, maxBytes = Number.POSITIVE_INFINITY): DecodeResult {
  const bytes = toBytes(data)
  if (bytes.length > maxBytes) return problem('too-large', `binary frame of ${bytes.length} bytes exceeds ${maxBytes}`, hexPreview(bytes))
  if (bytes[0] !== BINARY_KINDS.push) {
    return problem('bad-binary', `a client sends only binary kind 0 (push), got ${String(bytes[0])}`, hexPreview(bytes))
  }
  if (bytes.length < 5) return problem('bad-binary', 'push header needs 5 bytes', hexPreview(bytes))
  const sizes = Array.from(bytes.subarray(1, 5))
  const fields = readFields(bytes, 5, sizes)
  if (typeof fields === 'string') return problem('bad-binary', fields, hexPreview(bytes))
  const [join_ref, ref, topic, event] = fields as [string, string, string, string]
  const end = 5 + sizes.reduce((a, b) => a + b, 0)
  return {
    ok: true,
    // A field of no bytes is the empty string, as Phoenix's V2 serializer reads it (it echoes `""`).
    frame: { join_ref, ref, topic, event, payload: sliceBuffer(bytes, end) },
  }
}

function fieldBytes(values: string[]): Uint8Array[] {
  const encoder = new TextEncoder()
  return values.map((value) => {
    const bytes = encoder.encode(value)
    if (bytes.length > 255) throw new RangeError(`binary frame field "${value.slice(0, 20)}…" is ${bytes.length} bytes; the limit is 255`)
    return bytes
  })
}

function assemble(kind: number, fields: Uint8Array[], payload: ArrayBuffer | Uint8Array): Uint8Array {
  const body = toBytes(payload)
  const headerLength = 1 + fields.length + fields.reduce((a, f) => a + f.length, 0)
  const out = new Uint8Array(headerLength + body.length)
  out[0] = kind
  fields.forEach((f, i) => (out[1 + i] = f.length))
  let at = 1 + fields.length
  for (const f of fields) {
    out.set(f, at)
    at += f.length
  }
  out.set(body, at)
  return out
}

/**
 * Encodes a binary frame from server to client.
 *
 * @throws {RangeError} when a field is longer than 255 bytes (the size fields are one byte).
 */
export function encodeBinaryToClient(
  frame:
    | { kind: 'push'; join_ref: string; topic: string; event: string; payload: ArrayBuffer | Uint8Array }
    | { kind: 'reply'; join_ref: string; ref: string; topic: string; status: string; payload: ArrayBuffer | Uint8Array }
    | { kind: 'broadcast'; topic: string; event: string; payload: ArrayBuffer | Uint8Array },
): Uint8Array {
  switch (frame.kind) {
    case 'push':
      return assemble(BINARY_KINDS.push, fieldBytes([frame.join_ref, frame.topic, frame.event]), frame.payload)
    case 'reply':
      return assemble(BINARY_KINDS.reply, fieldBytes([frame.join_ref, frame.ref, frame.topic, frame.status]), frame.payload)
    case 'broadcast':
      return assemble(BINARY_KINDS.broadcast, fieldBytes([frame.topic, frame.event]), frame.payload)
  }
}

/**
 * Encodes a binary push from client to server (kind 0 with join_ref, ref, topic, event).
 *
 * @throws {RangeError} when a field is longer than 255 bytes.
 */
export function encodeBinaryToServer(frame: {
  join_ref: string | null
  ref: string | null
  topic: string
  event: string
  payload: ArrayBuffer | Uint8Array
}): Uint8Array {
  return assemble(
    BINARY_KINDS.push,
    fieldBytes([frame.join_ref ?? '', frame.ref ?? '', frame.topic, frame.event]),
    frame.payload,
  )
}

/** A text field read leniently: missing or of another type reads as null. */
const lenientText = z.catch(z.optional(z.nullable(z.string())), null)

/**
 * The platform's `supersede` payload, read leniently: every field may be missing or of the wrong
 * type and the push still ends the session. `retry_after` is seconds (number or numeric string),
 * read by classifySupersede (src/reasons.ts).
 */
export const SupersedePayload = z.object({
  reason: lenientText,
  message: lenientText,
  retryable: z.optional(z.unknown()),
  retry_after: z.optional(z.unknown()),
  target_socket_id: lenientText,
  correlation_id: lenientText,
})
/** The platform's `supersede` payload after lenient reading. */
export type SupersedePayload = z.infer<typeof SupersedePayload>

/** Modes of an `agent.control` signal. */
export const ControlMode = z.enum(['interrupt', 'stop', 'play'])
/** Scopes of an `agent.control` signal. */
export const ControlScope = z.enum(['agent', 'room'])

/**
 * An `agent.control` signal as delivered to the host's handler (camelCase of the wire payload
 * `{mode, scope, agent_id, room_id?, execution_id?, reason?, correlation_id?}`). Unknown extra
 * fields are kept in `raw`.
 */
export const ControlSignal = z.object({
  mode: ControlMode,
  scope: ControlScope,
  agentId: z.string(),
  roomId: z.nullable(z.string()),
  executionId: z.nullable(z.string()),
  reason: z.nullable(z.string()),
  correlationId: z.nullable(z.string()),
  raw: Payload,
})
/** An `agent.control` signal as delivered to the host's handler. */
export type ControlSignal = z.infer<typeof ControlSignal>

const nullableString = z.optional(z.union([z.string(), z.null()]))

/** The wire form of an `agent.control` payload. */
export const ControlPayload = z.object({
  mode: ControlMode,
  scope: ControlScope,
  agent_id: z.string(),
  room_id: nullableString,
  execution_id: nullableString,
  reason: nullableString,
  correlation_id: nullableString,
})

/**
 * Reads an `agent.control` payload. Never throws.
 *
 * @returns the signal, or the list of problems (field paths and messages) for the caller to report.
 */
export function parseControlSignal(payload: unknown): { ok: true; signal: ControlSignal } | { ok: false; issues: string[] } {
  const parsed = ControlPayload.safeParse(payload, { reportInput: true })
  if (!parsed.success) {
    return { ok: false, issues: parsed.error.issues.map((i) => `${i.path.join('.') || '(payload)'}: ${describeIssue(i)}`) }
  }
  const p = parsed.data
  return {
    ok: true,
    signal: {
      mode: p.mode,
      scope: p.scope,
      agentId: p.agent_id,
      roomId: p.room_id ?? null,
      executionId: p.execution_id ?? null,
      reason: p.reason ?? null,
      correlationId: p.correlation_id ?? null,
      raw: payload as Payload,
    },
  }
}

/** The JSON body of a refused upgrade: `{"error": {"code", "message", "request_id"}}`. */
export const UpgradeErrorBody = z.object({
  error: z.object({
    code: z.optional(z.string()),
    message: z.optional(z.string()),
    request_id: z.optional(z.string()),
  }),
})
/** The JSON body of a refused upgrade. */
export type UpgradeErrorBody = z.infer<typeof UpgradeErrorBody>
