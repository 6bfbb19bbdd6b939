/**
 * A link's Prometheus metrics (prom-client), in a registry the host can pass in:
 * `<prefix>link_state{link,state}` (one-hot: 1 for the current state, 0 for the others),
 * `<prefix>link_reconnects_total{link,reason}` (losses followed by a reconnect, by reason kind)
 * and `<prefix>link_connected_seconds_total{link}` (time spent connected).
 *
 * @example
 * const metrics = linkMetrics(link, { registry })   // registry.metrics() now includes the link
 * metrics.stop()                                   // stop following the link
 */
import { Counter, Gauge, Registry } from 'prom-client'
import { LINK_STATES } from '../../machines/status.js'
import type { Link } from '../link.js'
import { checkPrefix, DEFAULT_METRICS_PREFIX, isRegistry, type MetricsOptions } from './prometheus.js'
import { unknownKey } from '../call-checks.js'
import { isWellFormedText, LONE_SURROGATE_CANNOT_GO_IN } from '../protocol.js'

export type { MetricsOptions } from './prometheus.js'

/** What {@link linkMetrics} returns. */
export interface LinkMetrics {
  registry: Registry
  /**
   * Stops following the link. Its series stay registered with their last values (connected time
   * stops growing), and following it again under the same label continues them; with
   * `{ forget: true }` they are removed instead (and its connected time forgotten), so a host that
   * follows a link per short-lived agent keeps a bounded number of series.
   */
  stop(options?: { forget?: boolean }): void
}

/** One followed link's connected-time bookkeeping. */
interface Follower {
  now: () => number
  /** Milliseconds connected before the current connection. */
  accumulated: number
  /** When the current connection started, or null. */
  since: number | null
  /** Seconds already added to the counter. */
  reported: number
  active: boolean
  /** Reason kinds this label's reconnects were counted under (its series, for `forget`). */
  reasons: Set<string>
  /** The handle of the current follow: an older handle's stop() changes nothing of a later follow. */
  owner: object
  /** Stops listening to the link (its state and losses), once. */
  unfollow: () => void
}

/** The link metrics of one registry and prefix, shared by every link followed into it. */
interface Shared {
  state: Gauge<'link' | 'state'>
  reconnects: Counter<'link' | 'reason'>
  connected: Counter<'link'>
  followers: Map<string, Follower>
}

const SHARED = new WeakMap<Registry, Map<string, Shared>>()

/**
 * The link metrics of `registry` under `prefix`, made on first use. A registry cleared since
 * (`registry.clear()`, a common test teardown) no longer holds them: they are made again, so the
 * links followed after the clear are exported (links followed before it are not: follow them again).
 */
function sharedMetrics(registry: Registry, prefix: string): Shared {
  let byPrefix = SHARED.get(registry)
  if (!byPrefix) SHARED.set(registry, (byPrefix = new Map()))
  const existing = byPrefix.get(prefix)
  if (existing && registry.getSingleMetric(`${prefix}link_state`) === existing.state) return existing
  // Cleared since: the links followed into the old metrics are exported nowhere any more; they stop
  // listening (following them again starts over in the new ones), so re-following leaks nothing.
  if (existing) {
    for (const follower of existing.followers.values()) follower.unfollow()
    byPrefix.delete(prefix)
  }
  // Every name is checked before any is registered: a registry holding one of them already (the
  // host's own metric, or a part of a link's made before a clear) gets nothing half-made.
  const taken = [`${prefix}link_state`, `${prefix}link_reconnects_total`, `${prefix}link_connected_seconds_total`].filter((name) => registry.getSingleMetric(name) !== undefined)
  if (taken.length > 0) {
    throw new Error(`the metrics registry already holds ${taken.join(', ')}, not as a link's metrics: give linkMetrics another registry or prefix`)
  }
  const followers = new Map<string, Follower>()
  const shared: Shared = {
    followers,
    state: new Gauge({ name: `${prefix}link_state`, help: 'The link state, one-hot.', labelNames: ['link', 'state'] as const, registers: [registry] }),
    reconnects: new Counter({
      name: `${prefix}link_reconnects_total`,
      help: 'Transport losses followed by a reconnect, by the reason kind of the loss.',
      labelNames: ['link', 'reason'] as const,
      registers: [registry],
    }),
    connected: null as unknown as Counter<'link'>,
  }
  shared.connected = new Counter({
    name: `${prefix}link_connected_seconds_total`,
    help: 'Seconds the link spent connected.',
    labelNames: ['link'] as const,
    registers: [registry],
    collect() {
      for (const [link, f] of followers) {
        const total = (f.accumulated + (f.since === null ? 0 : f.now() - f.since)) / 1000
        if (total > f.reported) this.inc({ link }, total - f.reported)
        f.reported = Math.max(f.reported, total)
      }
    },
  })
  byPrefix.set(prefix, shared)
  return shared
}

/** The options {@link linkMetrics} reads. */
const LINK_METRICS_OPTIONS: ReadonlySet<string> = new Set(['registry', 'prefix', 'now', 'label'])

/**
 * Follows `link` and keeps its metrics in `options.registry` (a new one by default), each series
 * labelled `link` (the agent id, or `options.label`), so several links can share one registry.
 * Following a link again under the same label after `stop()` continues its series.
 * `options.now` is the clock connected time is measured on: monotonic milliseconds (the link's
 * own `env.monotonic` by default), so a wall-clock step never adds or removes connected seconds.
 *
 * @throws {RangeError} for an unknown option, a prefix Prometheus would refuse, or a label
 *   another link being followed into the same registry already uses (pass `label`).
 * @throws {TypeError} for a `prefix` or `label` that is not a string (a label must not be empty
 *   nor hold half a character, which the exposition's UTF-8 cannot carry),
 *   a `now` that is not a function, or a `registry` that is not a prom-client Registry.
 * @throws {Error} when the registry already holds one of the three metric names as something else
 *   (nothing is registered then: pass another registry or prefix).
 */
export function linkMetrics(link: Link, options: MetricsOptions & { now?: () => number; label?: string } = {}): LinkMetrics {
  if (options === null || typeof options !== 'object') throw new TypeError(`linkMetrics options must be an object, got ${options === null ? 'null' : typeof options}`)
  // A typo is an error, never a default silently kept (a label or prefix of another link's).
  const unknown = unknownKey(options, LINK_METRICS_OPTIONS)
  if (unknown !== undefined) throw new RangeError(`unknown linkMetrics option ${JSON.stringify(unknown)}; known: ${[...LINK_METRICS_OPTIONS].join(', ')}`)
  if (options.prefix !== undefined && typeof options.prefix !== 'string') throw new TypeError(`linkMetrics prefix must be a string, got ${typeof options.prefix}`)
  if (options.label !== undefined && (typeof options.label !== 'string' || options.label === '')) {
    throw new TypeError(`linkMetrics label must be a non-empty string (the link label of every series), got ${typeof options.label === 'string' ? 'an empty string' : typeof options.label}`)
  }
  // The exposition format is UTF-8: half a character would be written as U+FFFD, so two labels
  // would export as one series (a scrape Prometheus refuses).
  if (options.label !== undefined && !isWellFormedText(options.label)) throw new TypeError(`linkMetrics label cannot be exported: ${LONE_SURROGATE_CANNOT_GO_IN} a metrics label`)
  if (options.now !== undefined && typeof options.now !== 'function') throw new TypeError(`linkMetrics now must be a function returning monotonic milliseconds, got ${typeof options.now}`)
  if (options.registry !== undefined && !isRegistry(options.registry)) throw new TypeError('linkMetrics registry must be a prom-client Registry')
  const prefix = checkPrefix(options.prefix ?? DEFAULT_METRICS_PREFIX)
  const registry = options.registry ?? new Registry()
  const now = options.now ?? (() => link.monotonic())
  const label = options.label ?? link.agentId
  const shared = sharedMetrics(registry, prefix)
  const previous = shared.followers.get(label)
  if (previous?.active) throw new RangeError(`a link labelled ${JSON.stringify(label)} is already followed into this registry; pass options.label`)
  const owner = {}
  const follower: Follower = previous ?? { now, accumulated: 0, since: null, reported: 0, active: true, reasons: new Set(), owner, unfollow: () => {} }
  follower.owner = owner
  follower.now = now
  follower.active = true
  follower.since = link.state === 'connected' ? now() : null
  shared.followers.set(label, follower)
  const setState = (current: string) => {
    for (const s of LINK_STATES) shared.state.set({ link: label, state: s }, s === current ? 1 : 0)
  }
  setState(link.state)
  const offState = link.on('state', (e) => {
    setState(e.state)
    if (e.state === 'connected' && follower.since === null) follower.since = now()
    if (e.state !== 'connected' && follower.since !== null) {
      follower.accumulated += now() - follower.since
      follower.since = null
    }
  })
  const offLoss = link.on('disconnected', (e) => {
    if (e.outcome !== 'reconnect') return
    follower.reasons.add(e.reason.kind)
    shared.reconnects.inc({ link: label, reason: e.reason.kind })
  })
  follower.unfollow = () => {
    if (!follower.active) return
    offState()
    offLoss()
    if (follower.since !== null) follower.accumulated += now() - follower.since
    follower.since = null
    follower.active = false
  }
  return {
    registry,
    stop(stopOptions = {}) {
      // A handle whose label was followed again since (after its stop) owns nothing any more.
      if (follower.owner !== owner) return
      follower.unfollow()
      if (stopOptions.forget !== true || shared.followers.get(label) !== follower) return
      shared.followers.delete(label)
      for (const state of LINK_STATES) shared.state.remove({ link: label, state })
      for (const reason of follower.reasons) shared.reconnects.remove({ link: label, reason })
      shared.connected.remove({ link: label })
    },
  }
}
