/**
 * A link's charts with their full XState types, for this repository's own tools (the trace
 * writer, the model runners, the tests). Not exported from the package's main entry: `Link.actor`
 * gives hosts a read-only view typed without XState, so a consumer's compiler never loads XState's
 * declarations through phoenix-link's.
 */
import { waitFor, type AnyActorRef, type AnyStateMachine, type SnapshotFrom } from 'xstate'
import type { Link } from './link.js'
import type { LinkChannel } from './link-channel.js'
import type { RunningChart } from './runtime/chart-runner.js'
import type { LinkCharts } from './runtime/link-charts.js'

/** Every chart of a link on its runtime: `connection`, `control`, the session's `reconnect`, `channels` by topic. */
export function chartsOf(link: Link): LinkCharts {
  return (link as unknown as { charts: LinkCharts }).charts
}

/**
 * The app channels a link holds now, by topic: every handle `link.channel()` made that is still
 * active (joining, joined, detached or errored). A channel left or dropped is no longer here.
 */
export function appChannelsOf(link: Link): ReadonlyMap<string, LinkChannel> {
  return (link as unknown as { channels: ReadonlyMap<string, LinkChannel> }).channels
}

/** The connection chart of a link (the object behind `link.actor`): its snapshot, `send()`, `subscribe()`. */
export function chartOf(link: Link): LinkCharts['connection'] {
  return chartsOf(link).connection
}

/**
 * Resolves with the chart's snapshot once `predicate` holds for it (now or at a later snapshot),
 * with XState's `waitFor` (a running chart offers the `getSnapshot()`/`subscribe()` it reads).
 *
 * @throws {Error} (rejects) after `timeoutMs` milliseconds.
 */
export function waitForChart<M extends AnyStateMachine>(chart: RunningChart<M>, predicate: (snapshot: SnapshotFrom<M>) => boolean, timeoutMs: number): Promise<SnapshotFrom<M>> {
  return waitFor(chart as unknown as AnyActorRef, predicate as (snapshot: unknown) => boolean, { timeout: timeoutMs }) as Promise<SnapshotFrom<M>>
}

/**
 * Resolves once `check()` is true: now, or after any later snapshot of any chart of the link (the
 * connection chart, the reconnect, control and channel charts), read through the link's inspection.
 *
 * @throws {Error} (rejects) after `timeoutMs` milliseconds, naming `what`.
 */
export function waitForCharts(link: Link, check: () => boolean, timeoutMs: number, what = 'the charts'): Promise<void> {
  if (check()) return Promise.resolve()
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      stop()
      reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`))
    }, timeoutMs)
    const stop = chartsOf(link).observe((event) => {
      if (event.type !== '@xstate.snapshot' || !check()) return
      clearTimeout(timer)
      stop()
      resolve()
    })
  })
}
