/**
 * A link's transitions as records a person can follow: after every chart event, the state of
 * each chart (connection, reconnect, control, and each app channel), the event that caused it,
 * the link's public state and the typed reason of the last disconnect. The visualizer streams
 * them live and replays them from a trace file (JSON lines). Records hold state values, event
 * types and typed reasons only, never an event payload, with every key the link used redacted.
 */
import { createWriteStream, openSync, type WriteStream } from 'node:fs'
import type { Link } from '../../link.js'
import type { ChartStateValue as StateValue, LinkState } from '../../../machines/status.js'
import type { DisconnectReason } from '../../reasons.js'
import { chartsOf } from '../../chart-of.js'
import type { RunningChart } from '../../runtime/chart-runner.js'
import { TRACE_FORMAT } from './parse-trace.js'

/** One step of a link's lifecycle. */
export interface TraceRecord {
  /**
   * The record format, {@link TRACE_FORMAT} (1). A reader refuses a record of another format (one
   * written by a later phoenix-link) rather than replay it wrong; a record without it (written
   * before the field existed) is format 1.
   */
  format?: number
  /** Which link (a label the host chose, e.g. `A`). */
  link: string
  /** Counts records of this link from 1. */
  seq: number
  /**
   * Milliseconds since the trace started (a monotonic clock: `performance.now()`): since the trace
   * file was opened, for every link of one {@link openTraceFile}; since `origin` (by default,
   * since the link was followed) for {@link traceLink}.
   */
  at: number
  /** The chart event that caused this step, e.g. `socket.close`, `xstate.after.backoffDelay…`. */
  event: string
  /** Which chart took the event: `connection`, `reconnect`, `control` or `channel:<topic>`. */
  actor: string
  /** The public link state. */
  state: LinkState
  /** Each chart's state value; null for a chart not running (no reconnect chart outside a session). */
  charts: {
    connection: StateValue
    reconnect: StateValue | null
    control: StateValue | null
    /**
     * App channels by topic. A channel whose chart ended (`dropped`, `left`) keeps its final
     * state here until the host registers the topic again.
     */
    channels: Record<string, StateValue>
  }
  /** The typed reason of the last disconnect, or null. */
  lastReason: DisconnectReason | null
}

interface ChildSnapshot {
  value?: StateValue
  status?: string
  context?: { topic?: unknown }
}

function childValue(chart: RunningChart | null): StateValue | null {
  const snapshot = chart?.getSnapshot() as ChildSnapshot | undefined
  return chart?.isStopped === false && snapshot?.status === 'active' && snapshot.value !== undefined ? snapshot.value : null
}

/** @throws {TypeError} when `label` is not a non-empty string. */
function checkLabel(label: unknown): asserts label is string {
  if (typeof label !== 'string' || label === '') {
    throw new TypeError(`a trace label must be a non-empty string (it names the link in every record), got ${typeof label === 'string' ? 'an empty string' : typeof label}`)
  }
}

/**
 * Follows `link` and calls `onRecord` after every chart event that changed a chart's state or
 * the last reason (plus one record at once for the current state).
 *
 * @param origin the `performance.now()` reading each record's `at` counts from (milliseconds);
 *   default: now. Give the links of one trace the same origin, so their records' times line up.
 * @returns a function that stops following.
 *
 * @throws {TypeError} when `label` is not a non-empty string (a trace names every record's link
 *   by it; the replay refuses a record without one), or `origin` is not a finite number.
 */
export function traceLink(link: Link, label: string, onRecord: (record: TraceRecord) => void, origin: number = performance.now()): () => void {
  checkLabel(label)
  if (typeof origin !== 'number' || !Number.isFinite(origin)) throw new TypeError(`a trace origin must be a finite performance.now() reading in milliseconds, got ${typeof origin === 'number' ? String(origin) : typeof origin}`)
  const started = origin
  let seq = 0
  let last = ''
  const all = chartsOf(link)
  // Channels whose chart ended leave the link's charts; their final state stays.
  const ended = new Map<string, StateValue>()
  const emit = (event: string, actor: string) => {
    const snapshot = all.connection.getSnapshot()
    const running: Record<string, StateValue> = {}
    for (const [topic, chart] of all.channels) {
      const channel = chart.getSnapshot() as ChildSnapshot | undefined
      if (channel?.value === undefined) continue
      if (channel.status === 'done') ended.set(topic, channel.value)
      else if (channel.status === 'active') {
        ended.delete(topic)
        running[topic] = channel.value
      }
    }
    const channels: Record<string, StateValue> = { ...Object.fromEntries(ended), ...running }
    const charts = { connection: snapshot.value as StateValue, reconnect: childValue(all.reconnect), control: childValue(all.control), channels }
    const lastReason = link.lastDisconnectReason
    const key = JSON.stringify([charts, lastReason])
    if (key === last) return
    last = key
    // A trace is output: every key the link used is redacted where text from the host or the
    // server can hold one (the label, topics, the reason). State values and event names are the
    // charts' own identifiers: redacting a short key inside them (a key `e` in `idle`) would make
    // a trace no chart can replay.
    const text = (value: string) => link.redactOutput(value)
    const topicOf = (name: string) => (name.startsWith('channel:') ? `channel:${text(name.slice(8))}` : name)
    onRecord({
      format: TRACE_FORMAT,
      link: text(label),
      seq: ++seq,
      at: Math.round(performance.now() - started),
      event,
      actor: topicOf(actor),
      state: link.state,
      charts: { ...charts, channels: Object.fromEntries(Object.entries(channels).map(([topic, value]) => [text(topic), value])) },
      lastReason: link.redactOutput(lastReason),
    })
  }
  emit('(start)', 'connection')
  return all.observe((e) => {
    if (e.type !== '@xstate.snapshot') return
    emit((e.event as { type: string }).type, e.actorRef.id)
  })
}

/** A trace file several links write to: see {@link openTraceFile}. */
export interface TraceFile {
  /**
   * Follows `link`, writing its records labelled `label`; returns a function that stops following it.
   *
   * @throws {TypeError} when `label` is not a non-empty string.
   * @throws {RangeError} when another link is being followed into this file under `label` (the
   *   replay would read both as one link).
   * @throws {Error} after close(), or once a write failed (nothing more is written).
   */
  follow(link: Link, label: string): () => void
  /** Stops following every link and resolves once the file is flushed and closed. */
  close(): Promise<void>
}

/**
 * Opens `path` for a trace of one or more links, as JSON lines (one {@link TraceRecord} per line,
 * each labelled with its link; the visualizer's #replay steps through one link at a time). The
 * file is opened at once, so a path that cannot be written fails here, before any link connects.
 *
 * @param onError called once if a later write fails (disk full, file removed); tracing stops.
 * @throws {Error} when `path` cannot be opened for writing (ENOENT, EISDIR, EACCES), naming it.
 */
export function openTraceFile(path: string, onError: (error: Error) => void = () => {}): TraceFile {
  let fd: number
  try {
    fd = openSync(path, 'w')
  } catch (error) {
    throw new Error(`cannot write the trace to ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`)
  }
  const out: WriteStream = createWriteStream(path, { fd })
  // Every link's `at` counts from the file's opening.
  const opened = performance.now()
  // The stop of each link being followed, by label.
  const stops = new Map<string, () => void>()
  let failed = false
  // Set by close(): the file takes no more links.
  let closing: Promise<void> | null = null
  const stopAll = () => {
    for (const stop of stops.values()) stop()
    stops.clear()
  }
  out.on('error', (error) => {
    if (failed) return
    failed = true
    stopAll()
    onError(error)
  })
  return {
    follow(link, label) {
      if (closing) throw new Error(`the trace file ${path} is closed: open another to follow more links`)
      if (failed) throw new Error(`the trace file ${path} failed to write: nothing more is recorded`)
      if (stops.has(label)) throw new RangeError(`a link labelled ${JSON.stringify(label)} is already followed into ${path}: give each link its own label`)
      const stop = traceLink(
        link,
        label,
        (record) => {
          if (!failed) out.write(`${JSON.stringify(record)}\n`)
        },
        opened,
      )
      stops.set(label, stop)
      return () => {
        stop()
        if (stops.get(label) === stop) stops.delete(label)
      }
    },
    close() {
      if (closing) return closing
      stopAll()
      // Settled by the stream's own end, 'finish' or 'error', not by end()'s callback, which Node
      // calls before the 'error' of a last write that fails (a full disk): a close that resolves
      // has told onError of every failure.
      closing = failed
        ? Promise.resolve()
        : new Promise((resolve) => {
            out.once('finish', () => resolve())
            out.once('error', () => resolve())
            out.end()
          })
      return closing
    },
  }
}

/**
 * Writes a link's trace to `path` as JSON lines (one {@link TraceRecord} per line). The file is
 * opened at once, so a path that cannot be written fails here, before the link connects.
 *
 * @param onError called once if a later write fails (disk full, file removed); tracing stops.
 * @returns a function that stops tracing and resolves once the file is flushed and closed.
 * @throws {Error} when `path` cannot be opened for writing (ENOENT, EISDIR, EACCES), naming it.
 */
export function traceToFile(link: Link, label: string, path: string, onError: (error: Error) => void = () => {}): () => Promise<void> {
  // Checked before the file is opened (and so emptied): a bad label leaves an earlier trace there as it was.
  checkLabel(label)
  const file = openTraceFile(path, onError)
  try {
    file.follow(link, label)
  } catch (error) {
    void file.close()
    throw error
  }
  return () => file.close()
}
