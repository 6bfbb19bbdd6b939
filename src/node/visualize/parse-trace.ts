/**
 * Reading a trace file back (JSON lines of {@link TraceRecord}, as `phoenix-link connect --trace`,
 * `demo --trace` and {@link traceToFile} write them): every field of every record checked, and
 * every state it names checked against the shipped charts, so a damaged file or one recorded by
 * another version of phoenix-link is refused naming the line, never replayed wrong. Pure: the
 * visualizer page runs it in the browser, and hosts can run it in Node.
 */
import { LINK_STATES } from '../../../machines/status.js'
import type { TraceRecord } from './trace.js'
import type { DisconnectReason } from '../../reasons.js'
import { jsonDepth } from '../../json-depth.js'

/** A chart state value as a trace holds it: a state name, or nested regions. */
type TraceStateValue = TraceRecord['charts']['connection']

/** The format of the trace records this version writes and reads (see {@link TraceRecord.format}). */
export const TRACE_FORMAT = 1

/** The largest trace the replay reads, in bytes (256 MiB): a browser cannot hold a string of much more. */
export const MAX_TRACE_BYTES = 256 * 1024 * 1024

/**
 * Deepest nesting of arrays and objects a record may have: a written record nests a few levels (a
 * reason's fields, a state value's regions); the page shows a record with `JSON.stringify`, which
 * a value nested thousands deep would overflow.
 */
export const MAX_RECORD_DEPTH = 64

/** The states of one chart, by dotted path (`session.online.attached`), as the visualizer draws them. */
export interface TraceChartStates {
  /** `connection`, `reconnect`, `control` or `channel`. */
  name: string
  states: ReadonlyArray<{ path: string }>
}

function isStateValue(value: unknown, depth = 0): value is TraceStateValue {
  if (typeof value === 'string') return value !== ''
  if (value === null || typeof value !== 'object' || Array.isArray(value) || depth > 32) return false
  const entries = Object.entries(value)
  return entries.length > 0 && entries.every(([key, inner]) => key !== '' && isStateValue(inner, depth + 1))
}

/** Every active state path of a value, ancestors included: `{a: {b: 'c'}}` -> a, a.b, a.b.c. */
export function statePaths(value: TraceStateValue | null, prefix = ''): string[] {
  if (value === null) return []
  if (typeof value === 'string') return [prefix + value]
  return Object.entries(value).flatMap(([key, inner]) => [prefix + key, ...statePaths(inner as TraceStateValue, `${prefix}${key}.`)])
}

const LINK_STATE_SET: ReadonlySet<string> = new Set(LINK_STATES)

/**
 * The kinds of a {@link DisconnectReason}, restated so that the page (which runs this) does not
 * bundle the reasons' zod schemas; the types below fail to compile if the two lists part.
 */
const REASON_KIND_LIST = ['graceful', 'superseded', 'rejected', 'closed', 'dropped', 'timed-out', 'suppressed', 'other'] as const satisfies ReadonlyArray<DisconnectReason['kind']>
const everyKind: [Exclude<DisconnectReason['kind'], (typeof REASON_KIND_LIST)[number]>] extends [never] ? true : false = true
void everyKind
const REASON_KINDS: ReadonlySet<string> = new Set(REASON_KIND_LIST)

/** The charts a step can be taken by: the connection, reconnect and control charts, and a channel's (`channel:<topic>`). */
const TRACE_ACTOR = /^(connection|reconnect|control|channel:[\s\S]+)$/

/**
 * Parses a trace's text: one {@link TraceRecord} per non-blank line. Each record needs `link` (a
 * non-empty string), `seq` (a whole number from 1, greater than the link's record before it, or
 * 1 again: a link followed anew under that label), `at` (finite milliseconds), `event` (a string), `actor` (`connection`, `reconnect`,
 * `control` or `channel:<topic>`), `state` (a
 * public link state), `charts.connection` (a state value), `charts.reconnect` and
 * `charts.control` (a state value or null), `charts.channels` (an object of state values; absent
 * reads as none) and `lastReason` (an object whose `kind` is a reason's kind, or null; absent reads
 * as null). With
 * `charts`, every state a record names must be a state of that chart.
 *
 * @param charts the shipped charts' states (the page's drawn charts); omit to check shapes only.
 * @returns the records, in file order.
 * @throws {Error} naming the first bad line (1-based) and what is wrong with it; `the trace has no
 *   records` for a file without one.
 */
export function parseTrace(text: string, charts?: readonly TraceChartStates[]): TraceRecord[] {
  // The drawn chart's root node ("(root)") is no state a link can be in.
  const known = charts ? new Map(charts.map((c) => [c.name, new Set(c.states.map((s) => s.path).filter((path) => path !== '(root)'))])) : null
  const records: TraceRecord[] = []
  // The last seq of each link and its line: a link's records count up from 1, in file order.
  const lastSeq = new Map<string, { seq: number; line: number }>()
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim()
    if (line === '') continue
    const where = `line ${i + 1}`
    let value: unknown
    try {
      value = JSON.parse(line)
    } catch (error) {
      throw new Error(`${where} is not JSON (${(error as Error).message})`)
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw new Error(`${where} is not a trace record (expected an object with link, seq, state and charts, as phoenix-link connect --trace writes)`)
    }
    if (jsonDepth(value, MAX_RECORD_DEPTH) > MAX_RECORD_DEPTH) throw new Error(`${where} is not a trace record: it nests deeper than ${MAX_RECORD_DEPTH} levels`)
    const r = value as Record<string, unknown>
    const bad = (field: string, expected: string): never => {
      throw new Error(`${where} is not a trace record: ${field} must be ${expected}, got ${shown(r, field)}`)
    }
    if (r.format !== undefined && r.format !== TRACE_FORMAT) {
      throw new Error(`${where} is a trace record of format ${shown(r, 'format')}, written by another version of phoenix-link; this one reads format ${TRACE_FORMAT}`)
    }
    if (typeof r.link !== 'string' || r.link === '') bad('link', 'a non-empty string')
    if (typeof r.seq !== 'number' || !Number.isInteger(r.seq) || r.seq < 1) bad('seq', 'a whole number from 1')
    // A seq of 1 starts the label again: a link followed anew under a label an earlier follow freed.
    const before = lastSeq.get(r.link as string)
    if (before !== undefined && r.seq !== 1 && (r.seq as number) <= before.seq) {
      throw new Error(
        `${where} is out of order: seq ${r.seq as number} of link ${JSON.stringify(r.link)} comes after its seq ${before.seq} (line ${before.line}); a link's records count up from 1 (lines moved or repeated)`,
      )
    }
    lastSeq.set(r.link as string, { seq: r.seq as number, line: i + 1 })
    // Negative when a host gave traceLink an origin after the link's first step: a stamp, not an order.
    if (typeof r.at !== 'number' || !Number.isFinite(r.at)) bad('at', 'a number of milliseconds')
    if (typeof r.event !== 'string') bad('event', 'a string')
    if (typeof r.actor !== 'string' || !TRACE_ACTOR.test(r.actor)) bad('actor', 'connection, reconnect, control or channel:<topic>')
    if (typeof r.state !== 'string' || !LINK_STATE_SET.has(r.state)) bad('state', `one of ${LINK_STATES.join(', ')}`)
    const c = r.charts as Record<string, unknown> | null | undefined
    if (c === null || typeof c !== 'object' || Array.isArray(c)) bad('charts', 'an object')
    const chartsOf = c as Record<string, unknown>
    if (!isStateValue(chartsOf.connection)) bad('charts.connection', 'a state value')
    for (const name of ['reconnect', 'control'] as const) if (chartsOf[name] !== null && !isStateValue(chartsOf[name])) bad(`charts.${name}`, 'a state value or null')
    if (chartsOf.channels === undefined) chartsOf.channels = {}
    const channels = chartsOf.channels as Record<string, unknown> | null
    if (channels === null || typeof channels !== 'object' || Array.isArray(channels) || !Object.values(channels).every((v) => isStateValue(v))) {
      bad('charts.channels', 'an object of state values by topic')
    }
    if (r.lastReason === undefined) r.lastReason = null
    const reason = r.lastReason as { kind?: unknown } | null
    if (reason !== null && (typeof reason !== 'object' || Array.isArray(reason) || !REASON_KINDS.has(reason.kind as string))) bad('lastReason', `a reason (an object whose kind is ${[...REASON_KINDS].join(', ')}) or null`)
    if (known) {
      const values: Array<[string, unknown]> = [
        ['connection', chartsOf.connection],
        ['reconnect', chartsOf.reconnect],
        ['control', chartsOf.control],
        ...Object.values(channels!).map((v): [string, unknown] => ['channel', v]),
      ]
      for (const [chart, v] of values) {
        const states = known.get(chart)
        if (!states) continue
        const missing = statePaths(v as TraceStateValue | null).find((path) => !states.has(path))
        if (missing !== undefined) {
          throw new Error(`${where}: the ${chart} chart has no state "${missing}": a trace recorded by another version of phoenix-link cannot be replayed on these charts`)
        }
      }
    }
    records.push(r as unknown as TraceRecord)
  }
  if (records.length === 0) throw new Error('the trace has no records')
  return records
}

function shown(record: Record<string, unknown>, path: string): string {
  let value: unknown = record
  for (const key of path.split('.')) value = value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined
  if (value === undefined) return 'nothing'
  // JSON writes Infinity and NaN (a `1e400` read back) as null: said as they are.
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value)
  let text: string
  try {
    text = JSON.stringify(value) ?? String(value)
  } catch {
    // Nested deeper than the stack holds (JSON.parse reads deeper than stringify writes back).
    return 'a value nested too deeply to show'
  }
  return text.length > 60 ? `${text.slice(0, 60)}…` : text
}
