/**
 * What the link's and the simulator's Prometheus metrics share: the registry option, the name
 * prefix, and loading prom-client, an optional peer dependency.
 */
import { createRequire } from 'node:module'
import type * as PromClient from 'prom-client'
import type { Registry } from 'prom-client'

/**
 * prom-client's module, for `entry` (the subpath that needs it, named in the error). Loaded with
 * require (prom-client is CommonJS) rather than a static import, so importing
 * `phoenix-link/server` or `/metrics` without it fails with what to install instead of Node's
 * bare ERR_MODULE_NOT_FOUND.
 *
 * @throws {Error} with code `ERR_MISSING_PEER` when prom-client cannot be found from this
 *   package; the resolution error is its `cause`. Any other error loading it is thrown as is.
 */
export function loadPromClient(entry: string): typeof PromClient {
  try {
    return createRequire(import.meta.url)('prom-client') as typeof PromClient
  } catch (error) {
    const e = error as { code?: unknown; message?: unknown }
    if (e?.code !== 'MODULE_NOT_FOUND' || typeof e.message !== 'string' || !e.message.includes("'prom-client'")) throw error
    throw Object.assign(new Error(`${entry} needs prom-client, an optional peer dependency of phoenix-link: npm install prom-client`, { cause: error }), {
      code: 'ERR_MISSING_PEER',
    })
  }
}

/** Where metrics go. */
export interface MetricsOptions {
  /** A prom-client Registry; a new one by default. */
  registry?: Registry
  /** Metric name prefix, Prometheus style (`[a-zA-Z_:][a-zA-Z0-9_:]*`). @default 'phoenix_link_' */
  prefix?: string
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
