/**
 * The simulator's HTTP side: `GET /metrics` (Prometheus text, prom-client), `GET /admin/connections`
 * (JSON: who is attached, since when, in what state) and `GET /admin/events` (server-sent events:
 * the presence crossings and abort reports, live, each with an id a reader resumes after:
 * `?after=` or the `Last-Event-ID` a reconnecting EventSource sends, WHATWG HTML section 9.2 "Server-sent
 * events"); the control routes, records and waits of control-api.ts, and its access rule for every
 * `/admin` route. Anything else is a JSON 404.
 */
import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { ServerMetrics } from './metrics.js'
import { ADMIN_ROUTES, json, methodNotAllowed, requestUrl, unknownQuery, type ControlApi } from './control-api.js'
import { thrownText } from '../../../machines/types.js'

/** One attached socket as the admin API lists it. */
export interface AttachedConnection {
  principal: string
  socket: string
  /** When it was accepted, ISO 8601. */
  since: string
  state: 'open' | 'closing' | 'stalled'
  channels: string[]
}

/** What the admin routes read: the simulator's metrics, connections and event feed. */
export interface AdminSources {
  metrics: ServerMetrics
  connections(): AttachedConnection[]
  keepAliveMs: number
  /**
   * How many of the most recent published events are kept for a reader that resumes (`?after=`,
   * `Last-Event-ID`): a whole number or Infinity (the simulator's `historyLimit`). @default Infinity
   */
  replayLimit?: number
  /** The control routes and the access rule of every `/admin` route (control-api.ts). */
  control?: ControlApi
}

/**
 * Bytes the simulator lets an event stream hold unsent (its reader slow or not reading): 1 MiB,
 * some thousands of events. Past it the simulator writes nothing more to that stream until the
 * reader has read what waits (`drain`), then goes on from the kept events (`replayLimit`) where it
 * stopped: a slow reader costs no more memory, loses nothing that is still kept, and is told with
 * a `missed` event what is not. One burst larger than that (a stop() of a simulator with thousands
 * of principals publishes a crossing and an abort report for each in one turn, a replay of many
 * kept events) is sent so too, in slices.
 */
export const MAX_STREAM_BUFFER_BYTES = 1024 * 1024

interface Stream {
  res: ServerResponse
  timer: NodeJS.Timeout
  /**
   * Null while the stream is live (each event written as it is published); otherwise the seq of
   * the next event to write from the kept ones, once the reader has read what waits.
   */
  cursor: number | null
}

/** A published event, kept for readers that resume or catch up: its sequence number (1, 2, … in publish order) and its frame as sent live. */
interface Published {
  seq: number
  frame: string
}

/**
 * Where a reader of `GET /admin/events` resumes: the sequence number of the last event it has, from
 * the `Last-Event-ID` header (a reconnecting EventSource sends the id of the last event it got; it
 * wins over the URL's `after`, which is still the page's first) or the `after` query parameter:
 * an id as sent (`<run>.<seq>`), or a plain seq (as the real-phoenix reference server's `GET
 * /admin/events?after=SEQ` takes; it names no run, so a reader that gives it should compare the
 * `replay` event's `run` with its own). An id of another run (a simulator started again on the
 * port) resumes from the start of what is kept. Null: no resume point, live events only. A
 * string: what is wrong.
 */
export function resumePoint(header: string | string[] | undefined, after: string | null, run: string): { seq: number } | null | string {
  const range = 'a whole number from 0 to 2^53 - 1, without leading zeros'
  // A seq, or with `id` an id `<run>.<seq>`: its seq when the run is this one, 0 for another run; null when malformed.
  const parse = (text: string, id: boolean): number | null => {
    const dot = text.indexOf('.')
    if (dot === -1 && id) return null
    const seq = text.slice(dot + 1)
    if (dot === 0 || !/^(0|[1-9][0-9]*)$/.test(seq) || !Number.isSafeInteger(Number(seq))) return null
    return dot === -1 || text.slice(0, dot) === run ? Number(seq) : 0
  }
  const fromAfter = after === null ? null : parse(after, false)
  if (after !== null && fromAfter === null) return `after must be the id of the last event read (<run>.<seq>) or its seq, ${range} (0 for every event kept), got ${JSON.stringify(after.slice(0, 100))}`
  if (typeof header === 'string' && header !== '') {
    const seq = parse(header, true)
    if (seq === null) return `Last-Event-ID must be an id this feed sent (<run>.<seq>, seq ${range}), got ${JSON.stringify(header.slice(0, 100))}`
    return { seq }
  }
  return fromAfter === null ? null : { seq: fromAfter }
}

/** Serves the admin routes and streams events to `GET /admin/events` clients. */
export class AdminApi {
  private readonly streams = new Set<Stream>()
  /** The most recent published events (`replayLimit`), oldest first. */
  private readonly kept: Published[] = []
  /** The sequence number of the last event published; 0 before the first. */
  private lastSeq = 0
  /** This API's run, the first part of every event id: an id of another run is not ours to resume after. */
  readonly run = randomUUID().slice(0, 8)

  constructor(private readonly sources: AdminSources) {}

  /** Handles one HTTP request. Never throws into the server. */
  handle(req: IncomingMessage, res: ServerResponse): void {
    let path = ''
    let query = new URLSearchParams()
    try {
      const url = requestUrl(req.url)
      path = url.pathname
      query = url.searchParams
    } catch {
      path = ''
    }
    if (this.sources.control?.handle(req, res, path)) return
    const gets = ['/metrics', '/admin/connections', '/admin/events']
    if (!gets.includes(path)) return json(res, 404, { error: { code: 'not_found', message: `no route ${req.method ?? 'GET'} ${path}` } })
    if (req.method !== 'GET') return methodNotAllowed(res, path, ['GET'])
    // The admin routes read the query parameters their ADMIN_ROUTES entry names (token aside): any
    // other is a mistake, said so. /metrics is left to scrapers, which may add parameters of their own.
    if (path !== '/metrics') {
      const stray = unknownQuery(query, Object.keys(ADMIN_ROUTES.find((r) => r.path === path)?.query ?? {}))
      if (stray !== null) return json(res, 400, { error: { code: 'bad_request', message: stray } })
    }
    if (path === '/metrics') {
      // A registry cleared since (a test teardown) gets the simulator's metrics back, with their counts.
      this.sources.metrics.reattach()
      this.sources.metrics.registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': this.sources.metrics.registry.contentType })
          res.end(text)
        },
        (error: unknown) => json(res, 500, { error: { code: 'metrics_failed', message: thrownText(error) } }),
      )
      return
    }
    if (path === '/admin/connections') return json(res, 200, { connections: this.sources.connections() })
    // The one GET route left: /admin/events.
    const resume = resumePoint(req.headers['last-event-id'], query.get('after'), this.run)
    if (typeof resume === 'string') return json(res, 400, { error: { code: 'bad_request', message: resume } })
    this.openStream(res, resume)
  }

  /**
   * Sends an event to every open event stream, and keeps it (the most recent `replayLimit`) for
   * readers that resume or catch up. Its frame is made once, here, so a reader that gets it again
   * later gets what was sent live, whatever host code did to the record since. A stream holding
   * {@link MAX_STREAM_BUFFER_BYTES} unsent is written to no more until its reader reads; it then
   * catches up from the kept events. Data JSON cannot carry (none of the simulator's own records is
   * such: a payload a control sends is JSON by then) goes out as an `unserializable` event naming
   * the event and the error, never as a throw into the simulator's bookkeeping (an abort, a metric,
   * a listener after it).
   */
  publish(event: string, data: unknown): void {
    const seq = ++this.lastSeq
    const limit = this.sources.replayLimit ?? Number.POSITIVE_INFINITY
    // Kept for no one and read by no one: nothing to serialize (a mass close publishes one crossing per principal).
    if (limit <= 0 && this.streams.size === 0) return
    const frame = this.frameOf(seq, event, data)
    if (limit > 0) {
      this.kept.push({ seq, frame })
      if (this.kept.length > limit) this.kept.shift()
    }
    for (const stream of this.streams) {
      if (stream.cursor !== null) continue // catching up: it reaches this one from the kept events
      if (stream.res.writableLength < MAX_STREAM_BUFFER_BYTES) stream.res.write(frame)
      else this.catchUp(stream, seq)
    }
  }

  /** An event as the stream sends it: its id (`<run>.<seq>`), name and data, or an `unserializable` event in its place. */
  private frameOf(seq: number, event: string, data: unknown): string {
    try {
      return `id: ${this.run}.${seq}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`
    } catch (error) {
      return `id: ${this.run}.${seq}\nevent: unserializable\ndata: ${JSON.stringify({ event, error: thrownText(error) })}\n\n`
    }
  }

  /** Ends every event stream (server stopping). */
  stop(): void {
    this.sources.control?.stop()
    for (const stream of [...this.streams]) {
      clearInterval(stream.timer)
      stream.res.end()
    }
    this.streams.clear()
  }

  /** The stream writes from the kept events, from `seq` on, each time its reader has read what waits, until it has caught up. */
  private catchUp(stream: Stream, seq: number): void {
    stream.cursor = seq
    this.pump(stream)
  }

  /**
   * Writes a catching-up stream's next kept events until it holds {@link MAX_STREAM_BUFFER_BYTES}
   * unsent (then waits for `drain`) or has caught up (then it is live again: no event is published
   * between the last one written here and that, as this runs in one turn). Events no longer kept
   * (past `replayLimit`) are skipped behind a `missed` event `{after, missed}`: the seq of the last
   * event before them and how many.
   */
  private pump(stream: Stream): void {
    while (stream.cursor !== null && this.streams.has(stream)) {
      if (stream.cursor > this.lastSeq) {
        stream.cursor = null
        return
      }
      if (stream.res.writableLength >= MAX_STREAM_BUFFER_BYTES) {
        // Called only by catchUp() (a live stream: none waits yet) and by this listener: one waits at most.
        stream.res.once('drain', () => this.pump(stream))
        return
      }
      const oldest = this.lastSeq - this.kept.length + 1
      if (stream.cursor < oldest) {
        stream.res.write(`event: missed\ndata: ${JSON.stringify({ after: stream.cursor - 1, missed: oldest - stream.cursor })}\n\n`)
        stream.cursor = oldest
        continue
      }
      stream.res.write(this.kept[stream.cursor - oldest]!.frame)
      stream.cursor++
    }
  }

  /**
   * Opens an event stream. With a resume point, a `replay` event comes first (no id, so a reader's
   * last event id stays that of the last event it got): `{run, after, lastSeq, replayed, missed}`:
   * this simulator's run (the first part of every id: a reader that resumes with `?after=` can tell
   * a simulator started again on the port), the seq it resumes after (one past `lastSeq`, or of
   * another run, counts as 0: every event kept), the last seq published, how many events it sends
   * again now and how many after `after` are no longer kept (past `replayLimit`). Then those
   * events, in order, then the live ones, with nothing lost or sent twice between them.
   */
  private openStream(res: ServerResponse, resume: { seq: number } | null): void {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
    res.write(': phoenix-link simulator events (principal-presence, agent-aborted)\n\n')
    const stream: Stream = {
      res,
      // A keep-alive comment only while nothing waits for the reader: one that does not read gets no more.
      timer: setInterval(() => {
        if (stream.res.writableLength === 0) stream.res.write(': keep-alive\n\n')
      }, this.sources.keepAliveMs),
      cursor: null,
    }
    this.streams.add(stream)
    res.on('close', () => {
      clearInterval(stream.timer)
      this.streams.delete(stream)
    })
    if (resume === null) return
    const after = resume.seq > this.lastSeq ? 0 : resume.seq
    const replayed = Math.min(this.kept.length, this.lastSeq - after)
    res.write(`event: replay\ndata: ${JSON.stringify({ run: this.run, after, lastSeq: this.lastSeq, replayed, missed: this.lastSeq - after - replayed })}\n\n`)
    // The events no longer kept are counted above: start at the first kept one after `after`.
    if (replayed > 0) this.catchUp(stream, this.lastSeq - replayed + 1)
  }
}
