/**
 * The charts' runtime without XState actors: each chart of a link is a snapshot advanced with
 * XState's own transition function (`machine.transition(snapshot, event, scope)`, the
 * ActorLogic interface every XState actor uses), so every decision is still the chart's,
 * computed by XState; what this file replaces is only the actor around it (mailbox, system
 * registration, scheduler, child actors), which cost a link about 20 KiB of heap and most of its
 * connect CPU (docs/performance.md).
 *
 * What it runs, and what it refuses:
 * - the built-in actions the charts use: `assign`, `raise` (immediate, and delayed: every `after`
 *   is a delayed raise with an id, cancelled on exit), `cancel`, `emit`, `enqueueActions`;
 * - every other named action is the chart's I/O: handed to the runtime ({@link ChartRuntime.execute})
 *   after the transition is committed, in order. A throwing I/O action is fed back to its chart
 *   as `{ type: 'io.failed', action, error }` (before any other queued event), as XState feeds an
 *   invoked actor's failure back as `xstate.error.actor.<id>`, so a host fault never crashes a chart;
 * - built-ins that need actors (`sendTo`, `sendParent`, `spawnChild`, `stopChild`, `log`,
 *   invoke) are not run: {@link checkChart} refuses a chart that names them, and the runtime treats
 *   one reaching it as a crash (a spawn or a send to a missing actor already throws inside
 *   XState's transition: a crash too).
 *
 * Every chart of a link shares one FIFO queue (run to completion: one event of one chart at a
 * time), so a message between charts is processed after the transition that sent it, in the
 * order sent, as XState's mailboxes order them. A transition that throws (a guard or an assign:
 * a phoenix-link bug) stops that chart and is reported ({@link ChartHost.crashed}).
 *
 * Delays run on the injected {@link Clock} (XState's `SimulatedClock` in tests); nothing here
 * reads a clock or a random source of its own.
 */
import type { AnyActorScope, AnyStateMachine, EventFromLogic, EventObject, SnapshotFrom } from 'xstate'
import type { Clock } from './clock.js'
import { MAX_TIMER_MS } from '../../machines/types.js'
import { settleReported } from '../emitter.js'
import { deepFreeze } from '../freeze.js'

export type { Clock } from './clock.js'

/** A pending `after` delay of a chart: due at `due` on the clock. */
interface Delay {
  due: number
  chart: RunningChart
  key: string
  event: EventObject
}

/** An XState inspection event as the runtime sends it (`@xstate.actor`, `@xstate.event`, `@xstate.snapshot`, `@xstate.microstep`, `@xstate.action`). */
export interface RuntimeInspectionEvent {
  type: string
  rootId: string
  actorRef: RunningChart
  sourceRef?: RunningChart | undefined
  event?: unknown
  snapshot?: unknown
  action?: { type: string; params: unknown }
}

/** An observer of a chart's snapshots, as XState's `Observer`: each method optional. */
export interface ChartObserver<S> {
  next?: (snapshot: S) => void
  error?: (error: unknown) => void
  complete?: () => void
}

/** The event a chart receives when one of its I/O actions threw. */
export interface IoFailedEvent {
  type: 'io.failed'
  /** The I/O action's name, e.g. `openTransport`. */
  action: string
  error: unknown
}

/** Built-in action types that need an actor system; a chart run here must not use them. */
const ACTOR_ACTIONS = new Set(['xstate.sendTo', 'xstate.sendParent', 'xstate.spawnChild', 'xstate.stopChild', 'xstate.log', 'xstate.forwardTo'])

interface ExecutableAction {
  type: string
  params: unknown
}

/** The actions of the transition being computed: set before each transition, read after. */
let collected: ExecutableAction[] = []
/** The inspection observer of the transition being computed (microsteps), or null. */
let inspecting: RunningChart | null = null

/**
 * One actor scope for every transition of every chart: transitions never nest (actions run after
 * a transition returns), so `self` is set before each one. Built-in actions resolve against it;
 * their `execute` is never called (the runtime carries them out itself from their params).
 */
const SCOPE = {
  self: null as unknown,
  id: '',
  sessionId: '',
  logger: () => {},
  defer: (fn: () => void) => fn(),
  emit: () => {},
  stopChild: () => {},
  actionExecutor: (action: ExecutableAction) => {
    collected.push(action)
  },
  system: {
    _sendInspectionEvent: (event: { type: string; snapshot?: unknown; event?: unknown }) => {
      const chart = inspecting
      if (chart === null) return
      // A microstep's snapshot reaches the observer while the transition runs, before compute()
      // shares its configuration: shared (and frozen) now, so no observer can write into a value
      // other links will share.
      if (Array.isArray((event.snapshot as { _nodes?: unknown } | undefined)?._nodes)) shareParts(chart.logic, event.snapshot as SnapshotParts, undefined)
      chart.inspectEvent({ ...event, type: event.type, actorRef: chart })
    },
  },
} as unknown as Omit<AnyActorScope, 'self'> & { self: unknown }

/** What the runtime reads of any chart's snapshot. */
interface SnapshotStatus {
  status: 'active' | 'done' | 'error' | 'stopped'
  error?: unknown
}
const statusOf = (snapshot: unknown) => snapshot as SnapshotStatus

let serial = 0

/** The tags of a snapshot of a state with none: XState only reads them (`hasTag`). */
const NO_TAGS: ReadonlySet<string> = new Set()
/** The children and the history of a chart that has none. */
const NONE: object = Object.freeze({})

function isEmpty(value: object): boolean {
  for (const _ in value) return false
  return true
}

/** What a snapshot says of its configuration: its active state nodes and its state value. */
interface ConfigurationParts {
  _nodes: readonly unknown[]
  value: unknown
}

/**
 * A chart's configurations seen so far, as a trie over the state nodes of a snapshot's `_nodes`
 * in order: the leaf holds the `_nodes` array and the state `value` every snapshot of that
 * configuration, listed in that order, shares, frozen. The order is XState's (it may list one
 * configuration's nodes in another order after another path, and reads them in that order to pick
 * transitions in parallel regions), so it is kept: the trie is bounded by the chart (its
 * configurations, each in the orders XState lists it in), whatever the number of links.
 */
interface Configurations {
  next: Map<unknown, Configurations> | null
  shared: ConfigurationParts | null
}
const CONFIGURATIONS = new WeakMap<AnyStateMachine, Configurations>()

/**
 * The shared `_nodes` and `value` of `snapshot`'s configuration: the first snapshot of it (in any
 * link) provides them, frozen. XState computes both anew for every transition that changes the
 * configuration and only reads them after (machines/ never write to a snapshot), so one of each
 * serves every snapshot of that configuration: about 0.7 KiB per idle link (docs/performance.md).
 */
function sharedConfiguration(machine: AnyStateMachine, snapshot: ConfigurationParts): ConfigurationParts {
  let node = CONFIGURATIONS.get(machine)
  if (node === undefined) CONFIGURATIONS.set(machine, (node = { next: null, shared: null }))
  for (const stateNode of snapshot._nodes) {
    const next: Map<unknown, Configurations> = (node.next ??= new Map())
    let child = next.get(stateNode)
    if (child === undefined) next.set(stateNode, (child = { next: null, shared: null }))
    node = child
  }
  return (node.shared ??= { _nodes: deepFreeze(snapshot._nodes), value: deepFreeze(snapshot.value) })
}

/** The parts of a snapshot the runtime shares between snapshots ({@link shareParts}). */
interface SnapshotParts extends ConfigurationParts {
  tags: ReadonlySet<string>
  children: object
  historyValue: object
}

/**
 * Gives `snapshot` the parts it can share: one empty `tags`, `children` and `historyValue` for
 * every chart (the charts tag no state, spawn nothing and have no history state), and its
 * configuration's `_nodes` and `value` ({@link sharedConfiguration}; `previous`'s when the
 * transition kept the configuration, as XState keeps `_nodes` then but computes `value` again).
 * XState only reads them, and copies before it writes (a spawn, a history state): about 0.9 KiB
 * per idle link.
 */
function shareParts(machine: AnyStateMachine, snapshot: SnapshotParts, previous: SnapshotParts | undefined): void {
  if (snapshot.tags.size === 0) snapshot.tags = NO_TAGS
  if (snapshot.children !== NONE && isEmpty(snapshot.children)) snapshot.children = NONE
  if (snapshot.historyValue !== NONE && isEmpty(snapshot.historyValue)) snapshot.historyValue = NONE
  const shared = previous !== undefined && snapshot._nodes === previous._nodes ? previous : sharedConfiguration(machine, snapshot)
  snapshot._nodes = shared._nodes
  snapshot.value = shared.value
}

/**
 * The runtime of one link's charts: their shared queue (events are processed one at a time, in
 * the order sent, each to completion: the chart's transition and its actions, before the next),
 * and what the charts' actions reach. A subclass (src/runtime/link-charts.ts) says how each I/O
 * action is carried out.
 */
export abstract class ChartRuntime {
  /** Pairs: chart, event, chart, event, ...; null when empty (an idle link keeps no queue). */
  private queue: Array<RunningChart | EventObject> | null = null
  /** io.failed events of the step being carried out: processed before the queue; null when empty. */
  private urgent: Array<RunningChart | EventObject> | null = null
  private draining = false
  /**
   * Every pending delay of every chart of the link, soonest first (ties in the order they were
   * scheduled), on one timer of the clock armed for the soonest: a link keeps one timer however
   * many `after` delays its charts wait on (a just-connected link waits on four). Null while none.
   */
  private delays: Delay[] | null = null
  /** The clock timer armed for the soonest delay, and when it is due. */
  private timer: unknown = null
  private timerDue = Number.POSITIVE_INFINITY

  /** The scheduler of every chart's delays. */
  abstract readonly clock: Clock
  /** Inspection observer, or null (then no inspection event is even built). */
  abstract readonly inspect: ((event: RuntimeInspectionEvent) => void) | null
  /**
   * Carries out a chart's I/O action `type` with its resolved `params` (a custom action of the
   * chart's setup()). A throw is fed back to the chart as `io.failed` and reported to
   * {@link ChartRuntime.actionFailed}.
   */
  abstract execute(chart: RunningChart, type: string, params: unknown): void
  /** An I/O action threw (for the log); the chart gets `io.failed` too. */
  abstract actionFailed(chart: RunningChart, type: string, error: unknown): void
  /** The chart's `emit()`. */
  abstract emitted(chart: RunningChart, event: EventObject): void
  /** The chart committed a new snapshot (after its actions ran). */
  abstract changed(chart: RunningChart): void
  /** A transition of the chart threw, or it used an action this runtime does not run: it is stopped. */
  abstract crashed(chart: RunningChart, error: unknown): void
  /**
   * A listener the chart was given (`subscribe()`: a snapshot observer, `waitFor`'s predicate)
   * threw; the chart and the other listeners go on, as under an XState actor (which reports it
   * as unhandled).
   */
  abstract listenerFailed(chart: RunningChart, error: unknown): void

  /**
   * Starts a chart: its initial transition is computed and its entry actions run at once, before
   * this returns (also while another event is being processed: the chart that started it is
   * mid-actions). An I/O action of that entry which throws is fed back before any queued event.
   */
  start<M extends AnyStateMachine>(machine: M, id: string, input: unknown, parent: RunningChart | null = null): RunningChart<M> {
    const chart = new RunningChart(this, machine, id, input, parent)
    // Outside the queue's processing (the link's first chart), an io.failed of the entry is processed now.
    if (!this.draining && this.urgent !== null) this.drain()
    return chart
  }

  /**
   * True while the queue is being processed: a chart's transition or one of its actions is running
   * (and whatever it calls: a listener, a host callback). The charts' snapshots may then be behind
   * the events already queued, so a decision read from them waits until the queue is processed
   * (which happens before any promise callback runs: the processing is synchronous).
   */
  get busy(): boolean {
    return this.draining
  }

  /** Queues `event` for `chart` and processes the queue unless it is being processed already. */
  send(chart: RunningChart, event: EventObject): void {
    ;(this.queue ??= []).push(chart, event)
    if (!this.draining) this.drain()
  }

  /**
   * @internal Queues a chart's `io.failed` ahead of every other event, while a transition's
   * actions run: it is processed next (by the queue being processed, or by {@link start}).
   */
  sendUrgent(chart: RunningChart, event: EventObject): void {
    ;(this.urgent ??= []).push(chart, event)
  }

  /** @internal Schedules `event` for `chart` after `delay` ms under `key` (a chart's raise id), replacing one under the same key. */
  schedule(chart: RunningChart, key: string, delay: number, event: EventObject): void {
    this.cancel(chart, key)
    const due = this.clock.now() + delay
    const delays = (this.delays ??= [])
    let i = delays.length
    while (i > 0 && delays[i - 1]!.due > due) i--
    delays.splice(i, 0, { due, chart, key, event })
    this.arm()
  }

  /** @internal Cancels the delay of `chart` under `key`, if it is pending. */
  cancel(chart: RunningChart, key: string): void {
    const delays = this.delays
    if (delays === null) return
    const i = delays.findIndex((d) => d.chart === chart && d.key === key)
    if (i < 0) return
    delays.splice(i, 1)
    this.arm()
  }

  /** @internal Cancels every pending delay of `chart`. */
  cancelAll(chart: RunningChart): void {
    if (this.delays === null) return
    this.delays = this.delays.filter((d) => d.chart !== chart)
    this.arm()
  }

  /** @internal The keys of `chart`'s pending delays, soonest first. */
  pendingOf(chart: RunningChart): string[] {
    return (this.delays ?? []).filter((d) => d.chart === chart).map((d) => d.key)
  }

  /** Keeps the clock timer armed for the soonest pending delay, or none when nothing is pending. */
  private arm(): void {
    const next = this.delays?.[0]
    if (next === undefined) {
      this.delays = null
      this.disarm()
      return
    }
    if (next.due === this.timerDue) return
    this.disarm()
    const now = this.readClock(next.chart)
    // The clock failed: that delay's chart crashed (its delays cancelled, and this ran again for the rest).
    if (now === null) return
    this.timerDue = next.due
    // A timer runs a delay over 2^31-1 ms after 1 ms: one that long is armed in steps (fire() re-arms).
    const timer = this.clock.setTimeout(() => {
      // A timer whose clearTimeout failed (the host's clock threw) may still fire: only the armed one counts.
      if (this.timer === timer) this.fire()
    }, Math.min(MAX_TIMER_MS, Math.max(0, next.due - now)))
    this.timer = timer
  }

  /**
   * The clock's reading where no transition runs (arming or firing a timer): when the host's clock
   * throws (or, through the link's check, reads no finite number), `chart`, whose delay it was to
   * time, crashes with that error, as it would had the read been in its transition, and null is
   * returned. A throw here would escape a timer callback and end the host's process.
   */
  private readClock(chart: RunningChart): number | null {
    try {
      return this.clock.now()
    } catch (error) {
      chart.crash(error)
      return null
    }
  }

  private disarm(): void {
    if (this.timer === null) return
    const timer = this.timer
    // Forgotten before it is cleared: a clearTimeout that throws (the host's clock) leaves no armed
    // timer behind to be cleared again by every later arm(), and the timer, if it fires, is ignored.
    this.timer = null
    this.timerDue = Number.POSITIVE_INFINITY
    this.clock.clearTimeout(timer)
  }

  /**
   * The timer armed for the soonest delay fired: that delay is delivered (a Node timer may fire a
   * fraction of a millisecond before performance.now() reads its deadline: it is due; more than
   * 1 ms before it, the timer was one step of a longer delay, and is armed again), then each
   * other delay that was pending when the timer fired and that the clock reads as due, in order,
   * each event processed before the next is taken (a transition that cancels a later delay, by
   * leaving its state, cancels it in time); then the timer is armed for the next. A delay
   * scheduled while these are delivered waits for a timer of its own, even a 0 ms one: the event
   * loop runs before it, as under XState, where each delay has its own timer (so a chart that
   * re-enters a state with a 0 ms `after` never holds the event loop).
   */
  private fire(): void {
    this.timer = null
    this.timerDue = Number.POSITIVE_INFINITY
    try {
      const delays = this.delays
      if (delays === null) return
      const now = this.readClock(delays[0]!.chart)
      if (now === null) return
      // Armed for a step of a delay longer than a timer takes: not due yet (finally re-arms).
      if (delays[0]!.due - now > 1) return
      let end = 1
      while (end < delays.length && delays[end]!.due <= now) end++
      for (const delay of delays.slice(0, end)) {
        // Cancelled (or rescheduled) by the transition of one delivered before it: not delivered.
        const i = this.delays?.indexOf(delay) ?? -1
        if (i < 0) continue
        this.delays!.splice(i, 1)
        this.send(delay.chart, delay.event)
      }
    } finally {
      this.arm()
    }
  }

  private drain(): void {
    this.draining = true
    try {
      for (;;) {
        const from = this.urgent !== null && this.urgent.length > 0 ? this.urgent : this.queue
        if (from === null || from.length === 0) break
        const chart = from.shift() as RunningChart
        const event = from.shift() as EventObject
        try {
          chart.process(event)
        } catch (error) {
          // What the host's callbacks around a step threw (they are guarded: a phoenix-link bug):
          // that chart is stopped and reported, and the queue goes on.
          chart.crash(error)
        }
      }
      // Drained: an idle link keeps no queue.
      this.queue = null
      this.urgent = null
    } finally {
      this.draining = false
    }
  }

}

/**
 * One chart of a link, run by a {@link ChartRuntime}: its snapshot and its pending delays. It
 * looks enough like an XState actor (`id`, `sessionId`, `logic`, `getSnapshot()`, `subscribe()`,
 * `send()`) for XState's `waitFor`, for inspection tools (Stately's inspector reads `logic`,
 * `_parent`, `sessionId`) and for the link's read-only `link.actor`.
 */
export class RunningChart<M extends AnyStateMachine = AnyStateMachine> {
  /** The chart's current snapshot (unset only when its initial transition crashed: then it is stopped). */
  snapshot!: SnapshotFrom<M>
  private observers: Set<ChartObserver<SnapshotFrom<M>>> | null = null
  private stopped = false
  private readonly serial = ++serial

  constructor(
    readonly runtime: ChartRuntime,
    /** The chart (XState names it the actor's logic). */
    readonly logic: M,
    /** The chart's id in its link: `connection`, `reconnect`, `control`, `channel:<topic>`. */
    readonly id: string,
    input: unknown,
    /** The chart that started this one (the connection chart for the others); null for the root. */
    readonly _parent: RunningChart | null,
  ) {
    if (runtime.inspect !== null) this.inspectEvent({ type: '@xstate.actor', actorRef: this })
    // getInitialSnapshot catches what the initial transition throws into an `error` snapshot: a crash.
    const actions = this.compute(() => logic.getInitialSnapshot(SCOPE as AnyActorScope, input) as SnapshotFrom<M>)
    if (actions !== null) this.commit(actions, { type: 'xstate.init', input } as EventObject)
  }

  /** The session id an inspector names this chart by. */
  get sessionId(): string {
    return `phoenix-link:${this.serial}`
  }

  /** Whether the chart stopped (its link stopped it, it reached a final state, or it crashed). */
  get isStopped(): boolean {
    return this.stopped
  }

  getSnapshot(): SnapshotFrom<M> {
    return this.snapshot
  }

  /** Queues an event for the chart (processed after the event being processed, if any). */
  send(event: EventFromLogic<M>): void {
    this.runtime.send(this, event)
  }

  /**
   * Calls `listener` (or its `next`) with every snapshot the chart commits until unsubscribed;
   * its `complete` once when the chart stops (a final state, or stopped by its link), its
   * `error` once when the chart crashes, as an XState actor's observers. What a listener throws
   * is reported ({@link ChartRuntime.listenerFailed}) and changes nothing for the chart.
   */
  subscribe(listener: ((snapshot: SnapshotFrom<M>) => void) | ChartObserver<SnapshotFrom<M>>): { unsubscribe(): void } {
    const observer = typeof listener === 'function' ? { next: listener } : listener
    if (this.stopped) {
      this.call(observer, 'complete', undefined)
      return { unsubscribe: () => {} }
    }
    ;(this.observers ??= new Set()).add(observer)
    return { unsubscribe: () => void this.observers?.delete(observer) }
  }

  /** Stops the chart: its pending delays are cancelled, events sent later are dropped, observers complete. */
  stop(): void {
    if (this.halt()) this.finish('complete', undefined)
  }

  /** Marks the chart stopped and cancels its delays; false when it already was. */
  private halt(): boolean {
    if (this.stopped) return false
    this.stopped = true
    this.runtime.cancelAll(this)
    return true
  }

  /** Ends every observer with `complete` or `error`. */
  private finish(how: 'complete' | 'error', error: unknown): void {
    const observers = this.observers
    if (observers === null) return
    this.observers = null
    for (const observer of observers) this.call(observer, how, error)
  }

  /** Calls one method of an observer; what it throws is reported, never raised. */
  private call(observer: ChartObserver<SnapshotFrom<M>>, how: 'next' | 'complete' | 'error', value: unknown): void {
    try {
      const result: unknown = how === 'next' ? observer.next?.(value as SnapshotFrom<M>) : how === 'error' ? observer.error?.(value) : observer.complete?.()
      // An async observer's rejection is reported as its throw is (never an unhandled rejection).
      if (result !== undefined) settleReported(result, (error) => this.runtime.listenerFailed(this as RunningChart, error))
    } catch (error) {
      this.runtime.listenerFailed(this as RunningChart, error)
    }
  }

  /** @internal Processes one event (called by the runtime's queue). */
  process(event: EventObject): void {
    // A chart whose snapshot is no longer active (done, crashed) was stopped when it became so.
    if (this.stopped) return
    if (this.runtime.inspect !== null) this.inspectEvent({ type: '@xstate.event', actorRef: this, event })
    const actions = this.compute(() => this.logic.transition(this.snapshot, event, SCOPE as AnyActorScope) as SnapshotFrom<M>)
    if (actions !== null) this.commit(actions, event)
  }

  /** @internal Sends an inspection event about this chart to the runtime's observer, if there still is one. */
  inspectEvent(event: Omit<RuntimeInspectionEvent, 'rootId'>): void {
    // An observer may have stopped observing during this very step: then there is none to tell.
    const inspect = this.runtime.inspect
    if (inspect === null) return
    let root: RunningChart = this
    while (root._parent !== null) root = root._parent
    try {
      const result: unknown = inspect({ ...event, rootId: root.sessionId } as RuntimeInspectionEvent)
      if (result !== undefined) settleReported(result, (error) => this.runtime.listenerFailed(this, error))
    } catch (error) {
      // Nothing an observer throws reaches a chart; it is reported.
      this.runtime.listenerFailed(this, error)
    }
  }

  /** Runs one transition with the shared scope; the new snapshot is stored, its actions returned (null: it crashed). */
  private compute(step: () => SnapshotFrom<M>): ExecutableAction[] | null {
    const actions: ExecutableAction[] = []
    collected = actions
    inspecting = this.runtime.inspect !== null ? this : null
    SCOPE.self = this
    let next: SnapshotFrom<M>
    try {
      next = step()
    } catch (error) {
      this.crash(error)
      return null
    } finally {
      collected = []
      inspecting = null
      SCOPE.self = null
    }
    if (statusOf(next).status === 'error') {
      this.crash(statusOf(next).error)
      return null
    }
    shareParts(this.logic, next as unknown as SnapshotParts, this.snapshot as unknown as SnapshotParts | undefined)
    this.snapshot = next
    return actions
  }

  /** Carries out a committed transition's actions in order, then tells the host and observers. */
  private commit(actions: ExecutableAction[], event: EventObject): void {
    const host = this.runtime
    for (const action of actions) {
      if (this.stopped) break
      const params = action.params as Record<string, unknown> | undefined
      switch (action.type) {
        case 'xstate.raise':
          // An immediate raise was handled inside the transition; a delayed one is an `after`.
          if (typeof params!.delay === 'number') {
            const event = params!.event as EventObject
            // An `after` names its delay; a delayed raise without an id gets one of its own (XState
            // gives it a random id), so two of them are both delivered.
            this.runtime.schedule(this, (params!.id as string | undefined) ?? `xstate.delayed.${++serial}`, params!.delay, event)
          }
          break
        case 'xstate.cancel':
          this.runtime.cancel(this, params!.sendId as string)
          break
        case 'xstate.emit':
          host.emitted(this, params!.event as EventObject)
          break
        default:
          // Any other built-in (a log, a stop or a send that resolved): XState would run it on an
          // actor's system; this runtime has none to run it on.
          if (action.type.startsWith('xstate.')) {
            this.crash(new Error(`the ${this.id} chart used ${action.type}, which needs an actor; phoenix-link's runtime runs charts without actors`))
            return
          }
          if (host.inspect !== null) this.inspectEvent({ type: '@xstate.action', actorRef: this, action: { type: action.type, params } })
          try {
            host.execute(this, action.type, params)
          } catch (error) {
            host.actionFailed(this, action.type, error)
            this.runtime.sendUrgent(this, { type: 'io.failed', action: action.type, error } satisfies IoFailedEvent as EventObject)
          }
      }
    }
    // A final state: the chart stops; its observers see the final snapshot, then complete.
    const done = statusOf(this.snapshot).status !== 'active' && this.halt()
    host.changed(this)
    if (this.observers !== null) {
      for (const observer of [...this.observers]) this.call(observer, 'next', this.snapshot)
    }
    if (host.inspect !== null) this.inspectEvent({ type: '@xstate.snapshot', actorRef: this, event, snapshot: this.snapshot })
    if (done) this.finish('complete', undefined)
  }

  /**
   * @internal Stops the chart and reports `error`: its transition threw, or a host callback around
   * one of its steps did (reported even when that step had just stopped it in a final state).
   */
  crash(error: unknown): void {
    this.halt()
    this.runtime.crashed(this, error)
    this.finish('error', error)
  }

  /** The ids of the chart's pending delays, soonest first (for tests and tools). */
  pendingDelays(): string[] {
    return this.runtime.pendingOf(this)
  }
}

/**
 * Throws when `machine` uses anything this runtime does not run: an `invoke`, or an action
 * that needs an actor (`sendTo`, `sendParent`, `spawnChild`, `stopChild`, `log`, `forwardTo`),
 * anywhere in its states or its named actions. Strict at configuration: a chart that would need
 * an actor fails when the link is built, not when the transition first runs.
 *
 * @throws {Error} naming the state or action.
 */
export function checkChart(machine: AnyStateMachine): void {
  const implementations = machine.implementations.actions as Record<string, unknown>
  for (const [name, action] of Object.entries(implementations)) {
    const type = (action as { type?: unknown }).type
    if (typeof type === 'string' && ACTOR_ACTIONS.has(type)) throw new Error(`chart ${machine.id}: action ${name} is ${type}, which needs an actor`)
  }
  const visit = (node: { id: string; invoke: unknown[]; states: Record<string, unknown> }) => {
    if (node.invoke.length > 0) throw new Error(`chart ${machine.id}: state ${node.id} invokes an actor`)
    for (const child of Object.values(node.states)) visit(child as typeof node)
  }
  visit(machine.root as never)
}
