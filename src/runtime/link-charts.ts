/**
 * The charts of one link and how their I/O actions are carried out: the connection chart for the
 * link's life, the control delivery chart beside it, a reconnect chart per session, and a channel
 * chart per app channel, all on one {@link ChartRuntime} queue. Each I/O action a chart names
 * becomes one call here: a socket or channel operation of the adapter, an event to another chart,
 * a control signal handed to the host's handler.
 *
 * Who talks to whom (every arrow an I/O action of the chart on its left):
 *
 *   connection --openTransport/endTransport/joinControl/rejoinControl/leaveControl--> adapter
 *   connection --startReconnect/stopReconnect/tellReconnect--> reconnect --report--> connection
 *   connection --tellControl--> control --report--> connection;  control --deliver/abandonDelivery--> host
 *   connection --startChannel/tellChannel/stopChannel--> channel --report--> connection
 *   connection --redeliver--> connection (a channel report held while the reconnect chart decided, queued again)
 *   channel --joinAttempt/releaseAttempt/leaveAttempt--> adapter
 *   adapter --socket.*, control.*, channel.* events--> connection (which forwards channel events)
 */
import type { EventObject } from 'xstate'
import { channelMachine, type ChannelEvent, type ChannelPolicy } from '../../machines/channel.js'
import { connectionMachine, type CarriedDoubt, type ConnectionEmitted, type ConnectionEvent, type ConnectionPolicy } from '../../machines/connection.js'
import { controlMachine, type ControlEvent, type ControlPolicy, type QueuedSignal } from '../../machines/control.js'
import { reconnectMachine, type ReconnectEvent, type ReconnectPolicy } from '../../machines/reconnect.js'
import type { AttachOrigin } from '../../machines/channel.js'
import type { Env, Origin, TransportOpen } from '../../machines/types.js'
import { ChartRuntime, checkChart, type Clock, type RunningChart, type RuntimeInspectionEvent } from './chart-runner.js'

/** The socket and channel operations the charts' I/O actions call (src/adapter/phoenix-adapter.ts). */
export interface ChartIo {
  openTransport(open: TransportOpen): void
  endTransport(origin: Origin): void
  joinControl(origin: Origin): void
  rejoinControl(origin: Origin): void
  leaveControl(origin: Origin): void
  joinAttempt(attempt: AttachOrigin): void
  releaseAttempt(attempt: AttachOrigin): void
  leaveAttempt(attempt: AttachOrigin): void
  /**
   * The channel chart of `topic` crashed (a phoenix-link bug): whatever attempt it had ends, and a
   * join the server accepted, or may still accept, is left on the wire.
   */
  dropTopic(topic: string): void
}

/** What the link hears from its charts. */
export interface LinkChartsHost {
  /** Calls the host's control handler with one signal; settles when the handler does. `signal` aborts when the link stops waiting for it. */
  deliver(queued: QueuedSignal, signal: AbortSignal): Promise<void>
  /** An event the connection chart emitted, for the link to publish. */
  emitted(event: ConnectionEmitted): void
  /** The connection chart committed a snapshot. */
  changed(): void
  /** A chart stopped with an error (a phoenix-link bug): no lifecycle can continue. */
  crashed(chart: string, error: unknown): void
  /** An I/O action threw (its chart handles `io.failed`); for the log. */
  actionFailed(chart: string, action: string, error: unknown): void
  /** A listener of a chart (`subscribe()`, an inspection observer) threw; nothing else changed. For the log. */
  listenerFailed(chart: string, error: unknown): void
}

/** What a link's charts are built from. */
export interface LinkChartsOptions {
  io: ChartIo
  host: LinkChartsHost
  clock: Clock
  inspect: ((event: RuntimeInspectionEvent) => void) | null
  env: Env
  policy: { connection: ConnectionPolicy; reconnect: ReconnectPolicy; channel: ChannelPolicy; control: ControlPolicy }
  /** The host's on_conflict socket param (LinkOptions.onConflict): with 'reject', no supersede can be the link's own doing. */
  onConflict?: 'supersede' | 'reject' | undefined
  /** A supersede of unknown cause another link left undecided (LinkOptions.supersedeDoubt), its times on env.monotonic; null: none. */
  supersedeDoubt?: CarriedDoubt | null | undefined
}

// Strict at configuration: the shipped charts hold no actor (checked once, when the module loads).
for (const chart of [connectionMachine, reconnectMachine, controlMachine, channelMachine]) checkChart(chart)

/** One link's charts on one runtime; see the file comment for the I/O each carries out. */
export class LinkCharts extends ChartRuntime {
  readonly clock: Clock
  /** Who watches the charts' inspection events (the link's `inspect` option, traces); null while nobody. */
  private inspectors: Set<(event: RuntimeInspectionEvent) => void> | null = null
  /** The connection chart: the link's session. */
  readonly connection: RunningChart<typeof connectionMachine>
  /**
   * The control delivery chart, started by the first control signal and kept for the link's life
   * (its dedupe window spans sessions); null before. Until then a flush or a reset has nothing to
   * drop, exactly as a chart that had received no signal, so it is not started for one.
   */
  control: RunningChart<typeof controlMachine> | null = null
  /** The reconnect chart of the current session; null outside a session. */
  reconnect: RunningChart<typeof reconnectMachine> | null = null
  /** The channel chart of each app channel topic. */
  readonly channels = new Map<string, RunningChart<typeof channelMachine>>()
  /** The control signal in the host's handler, with the controller of its AbortSignal. */
  private delivery: { sequence: number; controller: AbortController } | null = null
  private readonly io: ChartIo
  private readonly host: LinkChartsHost
  private readonly env: Env
  private readonly channelPolicy: ChannelPolicy
  private readonly controlPolicy: ControlPolicy

  constructor(options: LinkChartsOptions) {
    super()
    this.clock = options.clock
    if (options.inspect !== null) this.observe(options.inspect)
    this.io = options.io
    this.host = options.host
    this.env = options.env
    this.channelPolicy = options.policy.channel
    this.controlPolicy = options.policy.control
    const { policy, env } = options
    // The other charts start when the connection chart needs them (a session, a channel, a signal).
    this.connection = this.start(connectionMachine, 'connection', {
      env,
      ...(options.onConflict ? { onConflict: options.onConflict } : {}),
      ...(options.supersedeDoubt ? { supersedeDoubt: options.supersedeDoubt } : {}),
      policy: policy.connection,
      reconnectPolicy: policy.reconnect,
      channelPolicy: policy.channel,
      controlPolicy: policy.control,
    })
  }

  /** Sends a chart event to the connection chart (host calls, adapter events). */
  override send(event: ConnectionEvent): void
  override send(chart: RunningChart, event: EventObject): void
  override send(a: RunningChart | ConnectionEvent, b?: EventObject): void {
    if (b === undefined) super.send(this.connection, a as ConnectionEvent)
    else super.send(a as RunningChart, b)
  }

  /** The inspection observer the charts call, or null while nobody watches (then none is built). */
  get inspect(): ((event: RuntimeInspectionEvent) => void) | null {
    return this.inspectors === null ? null : this.dispatchInspection
  }

  /** Calls `listener` with every inspection event of every chart of the link; returns the function that stops it. */
  observe(listener: (event: RuntimeInspectionEvent) => void): () => void {
    ;(this.inspectors ??= new Set()).add(listener)
    return () => {
      this.inspectors?.delete(listener)
      if (this.inspectors?.size === 0) this.inspectors = null
    }
  }

  private readonly dispatchInspection = (event: RuntimeInspectionEvent): void => {
    if (this.inspectors === null) return
    for (const listener of [...this.inspectors]) {
      // One observer's throw is reported and hides the event from no other observer.
      try {
        listener(event)
      } catch (error) {
        this.host.listenerFailed(event.actorRef.id, error)
      }
    }
  }

  /**
   * Stops every chart (the link crashed): no delay of any chart fires again; a handler still
   * running is abandoned (the control delivery). Each chart is stopped
   * whatever the others did: a stop that throws (the host's clock failing to clear a timer) does
   * not leave the rest running.
   *
   * @throws the first error a stop threw, once every chart is stopped.
   */
  stopAll(): void {
    let failure: { error: unknown } | null = null
    const stop = (chart: RunningChart | null | undefined) => {
      try {
        chart?.stop()
      } catch (error) {
        failure ??= { error }
      }
    }
    stop(this.connection)
    stop(this.control)
    stop(this.reconnect)
    for (const chart of this.channels.values()) stop(chart)
    this.abandon(this.delivery?.sequence)
    if (failure !== null) throw (failure as { error: unknown }).error
  }

  execute(chart: RunningChart, type: string, params: unknown): void {
    switch (type) {
      // ---- the connection chart's I/O
      case 'openTransport':
        return this.io.openTransport(params as TransportOpen)
      case 'endTransport':
        return this.io.endTransport(params as Origin)
      case 'joinControl':
        return this.io.joinControl(params as Origin)
      case 'rejoinControl':
        return this.io.rejoinControl(params as Origin)
      case 'leaveControl':
        return this.io.leaveControl(params as Origin)
      case 'startReconnect':
        this.reconnect?.stop()
        this.reconnect = this.start(reconnectMachine, 'reconnect', params, this.connection)
        return
      case 'stopReconnect':
        this.reconnect?.stop()
        this.reconnect = null
        return
      case 'tellReconnect':
        if (this.reconnect !== null) super.send(this.reconnect, params as ReconnectEvent)
        return
      case 'tellControl': {
        const event = params as ControlEvent
        if (this.control === null) {
          if (event.type !== 'control.enqueue') return
          this.control = this.start(controlMachine, 'control', { policy: this.controlPolicy }, this.connection)
        }
        return super.send(this.control, event)
      }
      case 'startChannel': {
        const { topic } = params as { topic: string }
        this.channels.get(topic)?.stop()
        this.channels.delete(topic)
        const started = this.start(channelMachine, `channel:${topic}`, { topic, policy: this.channelPolicy, env: this.env }, this.connection)
        // A chart whose initial transition crashed was reported (channel.failed) and is not kept.
        if (!started.isStopped) this.channels.set(topic, started)
        return
      }
      case 'tellChannel': {
        const { topic, event } = params as { topic: string; event: ChannelEvent }
        const target = this.channels.get(topic)
        if (target !== undefined) super.send(target, event)
        return
      }
      case 'stopChannel': {
        const { topic } = params as { topic: string }
        this.channels.get(topic)?.stop()
        this.channels.delete(topic)
        return
      }
      // ---- the other charts' I/O (and the connection chart's own redeliver: a report queued again)
      case 'report':
      case 'redeliver':
        return super.send(this.connection, params as ConnectionEvent)
      case 'deliver':
        return this.deliver(params as QueuedSignal)
      case 'abandonDelivery':
        return this.abandon((params as { sequence: number }).sequence)
      case 'joinAttempt':
        return this.io.joinAttempt(params as AttachOrigin)
      case 'releaseAttempt':
        return this.io.releaseAttempt(params as AttachOrigin)
      case 'leaveAttempt':
        return this.io.leaveAttempt(params as AttachOrigin)
    }
    throw new Error(`the ${chart.id} chart named an I/O action this link does not carry out: ${type}`)
  }

  actionFailed(chart: RunningChart, type: string, error: unknown): void {
    this.host.actionFailed(chart.id, type, error)
  }

  listenerFailed(chart: RunningChart, error: unknown): void {
    this.host.listenerFailed(chart.id, error)
  }

  emitted(chart: RunningChart, event: EventObject): void {
    if (chart === this.connection) this.host.emitted(event as ConnectionEmitted)
  }

  changed(chart: RunningChart): void {
    if (chart === this.connection) this.host.changed()
  }

  crashed(chart: RunningChart, error: unknown): void {
    // A channel chart's failure is that channel's: the connection chart reports it dropped and goes on.
    if (chart.logic === channelMachine) {
      const topic = chart.id.slice('channel:'.length)
      const current = this.channels.get(topic)
      // Another chart holds the topic now: nothing of this one is left to drop. (None does while
      // this one starts: a crash of its initial transition is that channel's failure too.)
      if (current !== undefined && current !== chart) return
      this.channels.delete(topic)
      // Its exit actions will not run: its join attempt is ended here, and the topic left.
      this.io.dropTopic(topic)
      super.send(this.connection, { type: 'channel.failed', topic, error } satisfies ConnectionEvent as EventObject)
      return
    }
    this.host.crashed(chart.id, error)
  }

  private deliver(queued: QueuedSignal): void {
    const controller = new AbortController()
    const { sequence } = queued
    this.delivery = { sequence, controller }
    this.host.deliver(queued, controller.signal).then(
      () => this.settle({ type: 'control.delivered', sequence }),
      (error: unknown) => this.settle({ type: 'control.deliveryFailed', sequence, error }),
    )
  }

  private settle(event: Extract<ControlEvent, { type: 'control.delivered' | 'control.deliveryFailed' }>): void {
    if (this.delivery?.sequence === event.sequence) this.delivery = null
    // A delivery exists only once the control chart started it.
    super.send(this.control!, event)
  }

  private abandon(sequence: number | undefined): void {
    if (sequence === undefined || this.delivery?.sequence !== sequence) return
    this.delivery.controller.abort()
    this.delivery = null
  }
}
