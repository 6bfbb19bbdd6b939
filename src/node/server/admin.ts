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
import { json, methodNotAllowed, requestUrl, unknownQuery, type ControlApi } from './control-api.js'
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
 * Bytes an event stream may hold unsent (its reader not reading) before it is cut off: 1 MiB,
 * some thousands of events. A reader that keeps up holds far less, except in one burst larger
 * than that (a stop() of a simulator with thousands of principals publishes a crossing and an
 * abort report for each in one turn, or a replay of many kept events): such a reader is cut off
 * too, and may resume on a new stream after the last event it read, which makes progress each time.
 */
export const MAX_STREAM_BUFFER_BYTES = 1024 * 1024

interface Stream {
  res: ServerResponse
  timer: NodeJS.Timeout
}

/** A published event, kept for readers that resume: its sequence number (1, 2, … in publish order), name and data. */
interface Published {
  seq: number
  event: string
  data: unknown
}

/**
 * Where a reader of `GET /admin/events` resumes: the sequence number of the last event it has, from
 * the `Last-Event-ID` header (a reconnecting EventSource sends the id of the last event it got; it
 * wins over the URL's `after`, which is still the page's first) or the `after` query parameter
 * (a plain sequence number, as the real-phoenix reference server's `GET /admin/events?after=SEQ`).
 * An id is `<run>.<seq>`: one of another run (a simulator started again on the port) resumes from
 * the start of what is kept. Null: no resume point, live events only. A string: what is wrong.
 */
export function resumePoint(header: string | string[] | undefined, after: string | null, run: string): { seq: number } | null | string {
  const whole = (text: string) => /^(0|[1-9][0-9]{0,15})$/.test(text) && Number.isSafeInteger(Number(text))
  if (typeof header === 'string' && header !== '') {
    const dot = header.indexOf('.')
    const seq = header.slice(dot + 1)
    if (dot <= 0 || !whole(seq)) return `Last-Event-ID must be an id this feed sent (<run>.<seq>), got ${JSON.stringify(header.slice(0, 100))}`
    return { seq: header.slice(0, dot) === run ? Number(seq) : 0 }
  }
  if (after === null) return null
  if (!whole(after)) return `after must be a whole number (the seq of the last event read; 0 for every event kept), got ${JSON.stringify(after.slice(0, 100))}`
  return { seq: Number(after) }
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
    // The admin routes read no query parameter (token aside): one given is a mistake, said so.
    // /metrics is left to scrapers, which may add parameters of their own.
    if (path !== '/metrics') {
      const stray = unknownQuery(query, path === '/admin/events' ? ['after'] : [])
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
   * Sends an event to every open event stream. A stream whose reader has fallen more than
   * {@link MAX_STREAM_BUFFER_BYTES} behind (it stopped reading) is cut off rather than buffered
   * without bound; a reader that opens a new stream with the id of the last event it read
   * (`Last-Event-ID`, as an EventSource does, or `?after=`) gets what it missed, as far as it is kept
   * (`replayLimit`), and the simulator's records (`sim.presence`, `sim.aborts`) hold it too. Every
   * event is kept for that, published to no reader or many. Data JSON cannot carry (none of the simulator's
   * own records is such: a payload a control sends is JSON by then) goes out as an
   * `unserializable` event naming the event and the error, never as a throw into the simulator's
   * bookkeeping (an abort, a metric, a listener after it).
   */
  publish(event: string, data: unknown): void {
    const published = { seq: ++this.lastSeq, event, data }
    const limit = this.sources.replayLimit ?? Number.POSITIVE_INFINITY
    if (limit > 0) {
      this.kept.push(published)
      if (this.kept.length > limit) this.kept.shift()
    }
    // Nobody subscribed: nothing to serialize now (a mass close publishes one crossing per principal).
    if (this.streams.size === 0) return
    const frame = this.frameOf(published)
    for (const stream of [...this.streams]) this.write(stream, frame)
  }

  /** An event as the stream sends it: its id (`<run>.<seq>`), name and data, or an `unserializable` event in its place. */
  private frameOf({ seq, event, data }: Published): string {
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

  /** Writes to one event stream, or cuts it off and forgets it when its reader is too far behind. */
  private write(stream: Stream, text: string): void {
    if (stream.res.writableLength > MAX_STREAM_BUFFER_BYTES) {
      clearInterval(stream.timer)
      this.streams.delete(stream)
      stream.res.destroy()
      return
    }
    stream.res.write(text)
  }

  /**
   * Opens an event stream. With a resume point, a `replay` event comes first (no id, so a reader's
   * last event id stays that of the last event it got): `{after, lastSeq, replayed, missed}`, the
   * events after `after` it will send again now and how many of them are no longer kept (past
   * `replayLimit`); `after` past `lastSeq` (an id of another run counts as 0) replays every event
   * kept. Then those events, in order, then the live ones: nothing published between the two is
   * lost or sent twice, since this runs in one turn of the event loop.
   */
  private openStream(res: ServerResponse, resume: { seq: number } | null): void {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
    res.write(': phoenix-link simulator events (principal-presence, agent-aborted)\n\n')
    const stream: Stream = { res, timer: setInterval(() => this.write(stream, ': keep-alive\n\n'), this.sources.keepAliveMs) }
    this.streams.add(stream)
    if (resume !== null) {
      const after = resume.seq > this.lastSeq ? 0 : resume.seq
      const replay = this.kept.filter((p) => p.seq > after)
      // Sequence numbers after `after` that are neither replayed nor kept: trimmed past replayLimit.
      const missed = this.lastSeq - after - replay.length
      this.write(stream, `event: replay\ndata: ${JSON.stringify({ after: resume.seq, lastSeq: this.lastSeq, replayed: replay.length, missed })}\n\n`)
      for (const published of replay) if (this.streams.has(stream)) this.write(stream, this.frameOf(published))
    }
    res.on('close', () => {
      clearInterval(stream.timer)
      this.streams.delete(stream)
    })
  }
}
