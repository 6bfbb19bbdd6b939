/**
 * The serializers a Phoenix socket negotiates from an upgrade's `vsn` param, and the V1 JSON
 * serializer's frames, as the simulator speaks them. The link itself speaks V2 only
 * (src/protocol.ts); V1 is here so that a client that still speaks it (older SDKs in other
 * languages, `phoenix-link conform` runs of them) is served as Phoenix serves it.
 *
 * Sources: phoenix lib/phoenix/socket.ex (`@default_serializers`: V1 for `~> 1.0.0`, V2 for
 * `~> 2.0.0`; a missing `vsn` is read as "1.0.0"; no match: the transport refuses the upgrade,
 * 403 with no body), lib/phoenix/socket/serializers/v1_json_serializer.ex and
 * lib/phoenix/socket/message.ex (`from_map!`), measured against Phoenix 1.7.14 on Bandit 1.6.11
 * and Cowboy 2.12.0 (test/conformance/differential.test.ts, 2026-12-07).
 */
import { framePreview, isWireRef, type ClientDecodeResult, type ClientFrame } from '../../protocol.js'

/** The serializer a socket speaks: `v1` (a frame is a JSON object) or `v2` (a JSON array, or binary). */
export type SerializerVersion = 'v1' | 'v2'

/** A pre-release identifier: a number without leading zeros, or alphanumerics with at least one non-digit. */
const PRE_ID = '(?:0|[1-9]\\d*|\\d*[A-Za-z-][0-9A-Za-z-]*)'
/** Elixir's `Version.parse/1` grammar (SemVer 2.0.0): no leading zeros in the numbers, nor in a numeric pre-release identifier. */
const SEMVER = new RegExp(`^(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)(?:-(${PRE_ID}(?:\\.${PRE_ID})*))?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$`)

/**
 * The serializer Phoenix picks for an upgrade's `vsn` (its last value, as Plug reads a repeated
 * param; null when there is none, read as "1.0.0"), or null when none matches: then Phoenix
 * refuses the upgrade with 403 and no body, before the socket's `connect/3` runs.
 *
 * `~> M.0.0` means at least M.0.0 and below M.1.0: `2.0.1` and `2.0.0+build` are V2; `2`, an
 * empty value, `2.9.9`, `3.0.0`, `1.1.0`, `02.0.0` and `2.0.0-rc.1` (a pre-release sorts below
 * its release) match nothing. Never throws.
 */
export function negotiateSerializer(vsn: string | null): SerializerVersion | null {
  const parsed = SEMVER.exec(vsn ?? '1.0.0')
  if (parsed === null) return null
  const [, major, minor, patch, pre] = parsed
  // A pre-release of M.0.0 sorts below M.0.0; one of M.0.1 or later is within the range.
  if (minor !== '0' || (pre !== undefined && patch === '0')) return null
  return major === '1' ? 'v1' : major === '2' ? 'v2' : null
}

/**
 * Encodes a frame as the V1 JSON serializer does: an object of `event`, `payload`, `ref` and
 * `topic`, in that order (Jason writes a small map's keys sorted). V1 carries no join_ref: it is
 * dropped, for replies, pushes and broadcasts alike.
 */
export function encodeV1(frame: ClientFrame): string {
  return JSON.stringify({ event: frame.event, payload: frame.payload, ref: frame.ref, topic: frame.topic })
}

const V1_KEYS = ['topic', 'event', 'payload', 'ref'] as const

function refused(kind: 'not-array' | 'wrong-arity' | 'wrong-types', detail: string, raw: string): ClientDecodeResult {
  return { ok: false, problem: { kind, detail, raw: framePreview(raw) } }
}

/**
 * Decodes a V1 text frame a client sent, as Phoenix's socket reads it: a JSON object with
 * `topic`, `event`, `payload` and `ref`, and an optional `join_ref` (Message.from_map!). Phoenix
 * crashes the socket (close 1011) on anything else; so does the simulator, which, as for V2
 * frames, also refuses a topic or event that is not a string and a ref or join_ref that is an
 * object or an array (Phoenix serves those: docs/field-notes.md). A ref or join_ref that is a
 * number or a boolean is kept as it came, and echoed so (as Phoenix does). Never throws.
 *
 * @returns the frame (a missing join_ref read as null), or a problem: `not-json`, `not-array`
 *   (the text is JSON but not an object), `wrong-arity` (a key missing), `wrong-types`.
 */
export function decodeV1FromClient(text: string): ClientDecodeResult {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return { ok: false, problem: { kind: 'not-json', detail: 'not JSON', raw: framePreview(text) } }
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return refused('not-array', 'a V1 frame is a JSON object (vsn 1.0.0; an array is a V2 frame)', text)
  const map = parsed as Record<string, unknown>
  const missing = V1_KEYS.filter((k) => !Object.hasOwn(map, k))
  if (missing.length > 0) return refused('wrong-arity', `a V1 frame has topic, event, payload and ref; this one lacks ${missing.join(', ')}`, text)
  const { topic, event, payload, ref } = map
  const joinRef = Object.hasOwn(map, 'join_ref') ? map.join_ref : null
  if (typeof topic !== 'string' || typeof event !== 'string') return refused('wrong-types', 'a V1 frame\'s topic and event are strings', text)
  if (!isWireRef(ref) || !isWireRef(joinRef)) return refused('wrong-types', 'a V1 frame\'s ref and join_ref are strings, numbers, booleans or null here (Phoenix echoes objects and arrays too)', text)
  return { ok: true, frame: { join_ref: joinRef, ref, topic, event, payload } }
}
