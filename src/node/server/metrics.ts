/**
 * The simulator's Prometheus metrics (prom-client), in a registry the host can pass in:
 * `<prefix>active_connections` (no principal label: cardinality stays bounded),
 * `<prefix>agent_aborts_total{outcome}`, `<prefix>principal_disconnects_total{reason}`.
 */
import { Counter, Gauge, Registry } from 'prom-client'
import type { AbortOutcome } from '../../runs.js'
import { checkPrefix, DEFAULT_METRICS_PREFIX, type MetricsOptions } from '../prometheus.js'

export { checkPrefix, DEFAULT_METRICS_PREFIX, type MetricsOptions }

/** The simulator's metrics. */
export class ServerMetrics {
  readonly registry: Registry
  readonly activeConnections: Gauge
  readonly agentAborts: Counter<'outcome'>
  readonly principalDisconnects: Counter<'reason'>

  constructor(options: MetricsOptions = {}) {
    const prefix = checkPrefix(options.prefix ?? DEFAULT_METRICS_PREFIX)
    this.registry = options.registry ?? new Registry()
    this.activeConnections = new Gauge({ name: `${prefix}active_connections`, help: 'Open agent sockets.', registers: [this.registry] })
    this.agentAborts = new Counter({
      name: `${prefix}agent_aborts_total`,
      help: 'Aborts of a principal\'s in-flight runs after its last connection ended, by outcome.',
      labelNames: ['outcome'],
      registers: [this.registry],
    })
    this.principalDisconnects = new Counter({
      name: `${prefix}principal_disconnects_total`,
      help: 'Principals whose last connection ended, by the reason kind of that close.',
      labelNames: ['reason'],
      registers: [this.registry],
    })
    for (const outcome of ['aborted', 'nothing-to-abort', 'failed'] satisfies AbortOutcome[]) this.agentAborts.inc({ outcome }, 0)
  }
}
