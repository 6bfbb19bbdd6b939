/**
 * The simulator's HTTP side: `GET /metrics` (Prometheus text, prom-client), `GET /admin/connections`
 * (JSON: who is attached, since when, in what state) and `GET /admin/events` (server-sent events:
 * the presence crossings and abort reports, live); the control routes, records and waits of
 * control-api.ts, and its access rule for every `/admin` route. Anything else is a JSON 404.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { ServerMetrics } from './metrics.js'
import { json, type ControlApi } from './control-api.js'

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

/** Serves the admin routes and streams events to `GET /admin/events` clients. */
export class AdminApi {
  private readonly streams = new Set<{ res: ServerResponse; timer: ReturnType<typeof setInterval> }>()

  constructor(private readonly sources: AdminSources) {}

  /** Handles one HTTP request. Never throws into the server. */
  handle(req: IncomingMessage, res: ServerResponse): void {
    let path = ''
    try {
      path = new URL(req.url ?? '/', 'http://simulator').pathname
    } catch {
      path = ''
    }
    if (this.sources.control?.handle(req, res, path)) return
    const gets = ['/metrics', '/admin/connections', '/admin/events']
    if (!gets.includes(path)) return json(res, 404, { error: { code: 'not_found', message: `no route ${req.method ?? 'GET'} ${path}` } })
    if (req.method !== 'GET') {
      res.setHeader('allow', 'GET')
      return json(res, 405, { error: { code: 'method_not_allowed', message: `${path} takes GET` } })
    }
    if (path === '/metrics') {
      this.sources.metrics.registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': this.sources.metrics.registry.contentType })
          res.end(text)
        },
        (error: Error) => json(res, 500, { error: { code: 'metrics_failed', message: error.message } }),
      )
      return
    }
    if (path === '/admin/connections') return json(res, 200, { connections: this.sources.connections() })
    this.openStream(res) // the one GET route left: /admin/events
  }

  /** Sends an event to every open event stream. */
  publish(event: string, data: unknown): void {
    // Nobody subscribed: nothing to serialize (a mass close publishes one crossing per principal).
    if (this.streams.size === 0) return
    const frame = `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`
    for (const stream of this.streams) stream.res.write(frame)
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

  private openStream(res: ServerResponse): void {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
    res.write(': phoenix-link simulator events (principal-presence, agent-aborted)\n\n')
    const stream = { res, timer: setInterval(() => res.write(': keep-alive\n\n'), this.sources.keepAliveMs) }
    this.streams.add(stream)
    res.on('close', () => {
      clearInterval(stream.timer)
      this.streams.delete(stream)
    })
  }
}
