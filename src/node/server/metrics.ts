/**
 * The simulator's Prometheus metrics (prom-client), in a registry the host can pass in:
 * `<prefix>active_connections` (no principal label: cardinality stays bounded),
 * `<prefix>agent_aborts_total{outcome}`, `<prefix>principal_disconnects_total{reason}`.
 */
import { Counter, Gauge, Registry } from 'prom-client'
import type { AbortOutcome } from '../../runs.js'
import { checkPrefix, DEFAULT_METRICS_PREFIX, type MetricsOptions } from '../prometheus.js'

export { checkPrefix, DEFAULT_METRICS_PREFIX, type MetricsOptions }

/**
 * The simulator's metrics. Simulators given one registry and prefix (several at once, or one
 * started again after a stop) share the metrics: `active_connections` counts the open sockets of
 * all of them and the counters go on counting, as one platform's would across a restart.
 *
 * @throws {Error} when the registry holds a metric of one of these names that is not the
 *   simulator's kind (a gauge, or a counter with the same label).
 */
export class ServerMetrics {
  readonly registry: Registry
  readonly activeConnections: Gauge
  readonly agentAborts: Counter<'outcome'>
  readonly principalDisconnects: Counter<'reason'>

  constructor(options: MetricsOptions = {}) {
    const prefix = checkPrefix(options.prefix ?? DEFAULT_METRICS_PREFIX)
    const registry = (this.registry = options.registry ?? new Registry())
    const active = `${prefix}active_connections`
    const aborts = `${prefix}agent_aborts_total`
    const disconnects = `${prefix}principal_disconnects_total`
    // Every name is checked before any is registered: a conflict leaves the host's registry as it was.
    assertFits(registry, Gauge, [], active)
    assertFits(registry, Counter, ['outcome'], aborts)
    assertFits(registry, Counter, ['reason'], disconnects)
    this.activeConnections = shared(registry, active, () => new Gauge({ name: active, help: 'Open agent sockets.', registers: [registry] }))
    this.agentAborts = shared(registry, aborts, () =>
      new Counter({
        name: aborts,
        help: 'Aborts of a principal\'s in-flight runs after its last connection ended, by outcome.',
        labelNames: ['outcome'],
        registers: [registry],
      })) as Counter<'outcome'>
    this.principalDisconnects = shared(registry, disconnects, () =>
      new Counter({
        name: disconnects,
        help: 'Principals whose last connection ended, by the reason kind of that close.',
        labelNames: ['reason'],
        registers: [registry],
      })) as Counter<'reason'>
    for (const outcome of ['aborted', 'nothing-to-abort', 'failed'] satisfies AbortOutcome[]) this.agentAborts.inc({ outcome }, 0)
  }
}

/**
 * Checks that `registry` holds no metric `name`, or holds it as the simulator's `kind` with `labels`.
 *
 * @throws {Error} naming the metric, when it is there in another kind or with other labels.
 */
function assertFits(registry: Registry, kind: abstract new (...args: never[]) => Gauge | Counter, labels: string[], name: string): void {
  const existing = registry.getSingleMetric(name)
  if (existing === undefined) return
  const labelNames = (existing as unknown as { labelNames?: string[] }).labelNames ?? []
  if (existing instanceof kind && labelNames.join() === labels.join()) return
  throw new Error(`the metrics registry already holds ${name}, not as the simulator's ${kind.name.toLowerCase()}${labels.length > 0 ? ` with the label ${labels.join(', ')}` : ''}: give the simulator another registry or prefix`)
}

/** The metric `name` already in `registry` (checked by {@link assertFits}), else a new one from `make`. */
function shared<M extends Gauge | Counter>(registry: Registry, name: string, make: () => M): M {
  return (registry.getSingleMetric(name) as M | undefined) ?? make()
}
