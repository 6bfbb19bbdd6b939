/**
 * A link's Prometheus metrics (prom-client), in a registry the host can pass in:
 * `<prefix>link_state{state}` (one-hot: 1 for the current state, 0 for the others),
 * `<prefix>link_reconnects_total{reason}` (losses followed by a reconnect, by reason kind) and
 * `<prefix>link_connected_seconds_total` (time spent connected).
 *
 * @example
 * const metrics = linkMetrics(link, { registry })   // registry.metrics() now includes the link
 * metrics.stop()                                   // stop following the link
 */
import { Counter, Gauge, Registry } from 'prom-client'
import { LINK_STATES } from '../machines/status.js'
import type { Link } from './link.js'
import { checkPrefix, DEFAULT_METRICS_PREFIX, type MetricsOptions } from './prometheus.js'

/** What {@link linkMetrics} returns. */
export interface LinkMetrics {
  registry: Registry
  /** Stops following the link (the metrics stay registered with their last values). */
  stop(): void
}

/**
 * Follows `link` and keeps its metrics in `options.registry` (a new one by default).
 *
 * @throws {RangeError} for a prefix Prometheus would refuse.
 */
export function linkMetrics(link: Link, options: MetricsOptions & { now?: () => number } = {}): LinkMetrics {
  const prefix = checkPrefix(options.prefix ?? DEFAULT_METRICS_PREFIX)
  const registry = options.registry ?? new Registry()
  const now = options.now ?? (() => Date.now())
  const state = new Gauge({ name: `${prefix}link_state`, help: 'The link state, one-hot.', labelNames: ['state'], registers: [registry] })
  const reconnects = new Counter({
    name: `${prefix}link_reconnects_total`,
    help: 'Transport losses followed by a reconnect, by the reason kind of the loss.',
    labelNames: ['reason'],
    registers: [registry],
  })
  let accumulated = 0
  let since: number | null = link.state === 'connected' ? now() : null
  let reported = 0
  new Counter({
    name: `${prefix}link_connected_seconds_total`,
    help: 'Seconds the link spent connected.',
    registers: [registry],
    collect() {
      const total = (accumulated + (since === null ? 0 : now() - since)) / 1000
      if (total > reported) this.inc(total - reported)
      reported = Math.max(reported, total)
    },
  })
  const setState = (current: string) => {
    for (const s of LINK_STATES) state.set({ state: s }, s === current ? 1 : 0)
  }
  setState(link.state)
  const offState = link.on('state', (e) => {
    setState(e.state)
    if (e.state === 'connected' && since === null) since = now()
    if (e.state !== 'connected' && since !== null) {
      accumulated += now() - since
      since = null
    }
  })
  const offLoss = link.on('disconnected', (e) => {
    if (e.outcome === 'reconnect') reconnects.inc({ reason: e.reason.kind })
  })
  return {
    registry,
    stop() {
      offState()
      offLoss()
    },
  }
}
