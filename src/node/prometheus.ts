/** What the link's and the simulator's Prometheus metrics share: the registry option and the name prefix. */
import type { Registry } from 'prom-client'

/** Where metrics go. */
export interface MetricsOptions {
  /** A prom-client Registry; a new one by default. */
  registry?: Registry
  /** Metric name prefix, Prometheus style (`[a-zA-Z_:][a-zA-Z0-9_:]*`). @default 'phoenix_link_' */
  prefix?: string
}

/** Whether `value` is a prom-client Registry (of any copy of prom-client): it has `getSingleMetric`. */
export function isRegistry(value: unknown): value is Registry {
  return typeof (value as { getSingleMetric?: unknown } | null | undefined)?.getSingleMetric === 'function'
}

/** The default metric name prefix. */
export const DEFAULT_METRICS_PREFIX = 'phoenix_link_'

/**
 * Checks a metric name prefix.
 *
 * @throws {RangeError} for a prefix Prometheus would refuse.
 */
export function checkPrefix(prefix: string): string {
  if (prefix !== '' && !/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(prefix)) {
    throw new RangeError(`metrics prefix ${JSON.stringify(prefix)} is not a Prometheus name prefix ([a-zA-Z_:][a-zA-Z0-9_:]*)`)
  }
  return prefix
}
