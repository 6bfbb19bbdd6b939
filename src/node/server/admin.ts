/**
 * The simulator's HTTP side: `GET /metrics` (Prometheus text, prom-client), `GET /admin/connections`
 * (JSON: who is attached, since when, in what state) and `GET /admin/events` (server-sent events:
 * the presence crossings and abort reports, live); the control routes, records and waits of
 * control-api.ts, and its access rule for every `/admin` route. Anything else is a JSON 404.
 */
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
  /** The control routes and the access rule of every `/admin` route (control-api.ts). */
  control?: ControlApi
}

/**
 * Bytes an event stream may hold unsent (its reader not reading) before it is cut off: 1 MiB,
 * some thousands of events. A reader that keeps up holds far less, except in one burst larger
 * than that (a stop() of a simulator with thousands of principals publishes a crossing and an
 * abort report for each in one turn): such a reader is cut off too, and may open a new stream.
 */
export const MAX_STREAM_BUFFER_BYTES = 1024 * 1024

interface Stream {
  res: ServerResponse
  timer: NodeJS.Timeout
}

/** Serves the admin routes and streams events to `GET /admin/events` clients. */
export class AdminApi {
  private readonly streams = new Set<Stream>()

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
      const stray = unknownQuery(query, [])
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
    this.openStream(res) // the one GET route left: /admin/events
  }

  /**
   * Sends an event to every open event stream. A stream whose reader has fallen more than
   * {@link MAX_STREAM_BUFFER_BYTES} behind (it stopped reading) is cut off rather than buffered
   * without bound; the simulator's records (`sim.presence`, `sim.aborts`) still hold what it
   * missed, and a reader may open a new stream. Data JSON cannot carry (none of the simulator's
   * own records is such: a payload a control sends is JSON by then) goes out as an
   * `unserializable` event naming the event and the error, never as a throw into the simulator's
   * bookkeeping (an abort, a metric, a listener after it).
   */
  publish(event: string, data: unknown): void {
    // Nobody subscribed: nothing to serialize (a mass close publishes one crossing per principal).
    if (this.streams.size === 0) return
    let frame: string
    try {
      frame = `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`
    } catch (error) {
      frame = `event: unserializable\ndata: ${JSON.stringify({ event, error: thrownText(error) })}\n\n`
    }
    for (const stream of [...this.streams]) this.write(stream, frame)
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

  private openStream(res: ServerResponse): void {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
    res.write(': phoenix-link simulator events (principal-presence, agent-aborted)\n\n')
    const stream: Stream = { res, timer: setInterval(() => this.write(stream, ': keep-alive\n\n'), this.sources.keepAliveMs) }
    this.streams.add(stream)
    res.on('close', () => {
      clearInterval(stream.timer)
      this.streams.delete(stream)
    })
  }
}
