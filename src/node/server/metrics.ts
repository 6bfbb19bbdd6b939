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
 * The simulators' metric objects of each registry, by name, while a simulator using them runs: a
 * registry cleared meanwhile gets the same ones back (their counts go on). Once none runs, they
 * are forgotten, so a registry cleared then (a test's teardown) starts the next simulator at zero.
 */
const MADE = new WeakMap<Registry, { metrics: Map<string, Gauge | Counter>; running: Set<ServerMetrics> }>()

/**
 * The simulator's metrics. Simulators given one registry and prefix (several at once, or one
 * started again after a stop) share the metrics: `active_connections` counts the open sockets of
 * all of them and the counters go on counting, as one platform's would across a restart. A
 * `registry.clear()` (a test teardown) unregisters them: while a simulator using them runs, its
 * `GET /metrics` (or {@link ServerMetrics.reattach}) registers them again with their counts, and a
 * simulator started on that registry shares them; once none runs, the next starts from zero.
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

  /**
   * Whether the simulator using these metrics runs (listening, not yet stopped): while one does,
   * its metric objects are kept for a registry cleared meanwhile; once none does, forgotten.
   * @internal called by the simulator.
   */
  running(on: boolean): void {
    const entry = MADE.get(this.registry)
    if (!entry) return
    if (on) entry.running.add(this)
    else if (entry.running.delete(this) && entry.running.size === 0) entry.metrics.clear()
  }

  /**
   * Registers again, with their counts, the metrics a `registry.clear()` removed since; a name the
   * registry holds (these metrics, or the host's own made after the clear) is left as it is.
   */
  reattach(): void {
    for (const metric of [this.activeConnections, this.agentAborts, this.principalDisconnects] as Array<Gauge | Counter>) {
      const name = (metric as unknown as { name: string }).name
      if (this.registry.getSingleMetric(name) === undefined) this.registry.registerMetric(metric)
    }
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

/**
 * The metric `name` already in `registry` (checked by {@link assertFits}), else the one a running
 * simulator made for it before a `registry.clear()` (registered again), else a new one from `make`.
 */
function shared<M extends Gauge | Counter>(registry: Registry, name: string, make: () => M): M {
  let entry = MADE.get(registry)
  if (!entry) MADE.set(registry, (entry = { metrics: new Map(), running: new Set() }))
  const made = entry.metrics
  const held = registry.getSingleMetric(name) as M | undefined
  if (held !== undefined) {
    made.set(name, held)
    return held
  }
  // Kept only for a simulator still running (one that failed to start, or stopped, counts for nothing).
  const before = entry.running.size > 0 ? (made.get(name) as M | undefined) : undefined
  if (before !== undefined) {
    registry.registerMetric(before)
    return before
  }
  const metric = make()
  made.set(name, metric)
  return metric
}
