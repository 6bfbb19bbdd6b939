/**
 * The link's chart runtime (src/runtime/chart-runner.ts) runs each chart as XState's own actor
 * would: random sequences of events and clock advances are applied to a chart under XState's
 * `createActor` (its I/O actions recorded through `provide`) and to the same chart on the
 * runtime (its I/O recorded by the test runtime), each on a SimulatedClock and the same seeded
 * random source; after every step both must hold the same state value and context, and must have
 * named the same I/O actions with the same params, in the same order, and emitted the same events.
 * This is the evidence that taking the actor away changed no decision of any chart.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { createActor, SimulatedClock, type AnyStateMachine, type EventObject } from 'xstate'
import { channelMachine, DEFAULT_CHANNEL_POLICY, type ChannelEvent } from '../../machines/channel.js'
import { connectionMachine, type ConnectionEvent } from '../../machines/connection.js'
import { controlMachine, DEFAULT_CONTROL_POLICY, type ControlEvent } from '../../machines/control.js'
import { DEFAULT_RECONNECT_POLICY, reconnectMachine, type ReconnectEvent } from '../../machines/reconnect.js'
import { suppressedReason, type ReasonLike } from '../../machines/types.js'
import { classifyClose, classifyControlChannelLoss, classifyJoinError, classifySupersede, classifyUpgrade } from '../../src/reasons.js'
import { seeded } from '../../scripts/seeded.js'
import { TestRuntime } from '../support/runtime.js'
import { normalLoss } from '../support/chart.js'

/** One step: an event for the chart, or the clock advancing by `ms`. */
type Step<E> = { event: E } | { advance: number }

const RUNS = Number(process.env.PROPERTY_RUNS ?? 150)

interface Trace {
  value: string
  context: string
  io: string[]
  emitted: string[]
  /** The delays pending, by their raise id, sorted. */
  pending: string[]
}

/** Context without what is not data (policies, env functions): what the chart decided. */
function contextOf(snapshot: { context: unknown }): string {
  return JSON.stringify(snapshot.context, (key, value: unknown) => (key === 'env' || key.endsWith('olicy') ? undefined : value))
}

/**
 * Runs `steps` on `machine` both ways and returns the two traces, one entry per step.
 * `io` names the chart's I/O actions (recorded on both sides).
 */
function both<E extends EventObject>(machine: AnyStateMachine, makeInput: (random: () => number) => unknown, io: readonly string[], steps: Array<Step<E>>, seed: number) {
  // XState's own actor, its I/O actions recorded.
  const actorClock = new SimulatedClock()
  const actorIo: string[] = []
  const actorEmitted: string[] = []
  const recorded = Object.fromEntries(io.map((name) => [name, (_args: unknown, params: unknown) => void actorIo.push(`${name} ${JSON.stringify(params)}`)]))
  const actor = createActor(machine.provide({ actions: recorded as never }), { clock: actorClock, input: makeInput(seeded(seed)) as never })
  actor.on('*', (e) => void actorEmitted.push(JSON.stringify(e)))
  actor.start()
  // The link's runtime.
  const runtime = new TestRuntime()
  const chart = runtime.run(machine, makeInput(seeded(seed)))
  const traces: Array<[Trace, Trace]> = []
  const snap = (s: { value: unknown; context: unknown }) => ({ value: JSON.stringify(s.value), context: contextOf(s) })
  for (const step of steps) {
    if ('advance' in step) {
      actorClock.increment(step.advance)
      runtime.clock.increment(step.advance)
    } else {
      // A chart that reached its final state takes no more events (XState would warn on each).
      if (actor.getSnapshot().status === 'active') actor.send(step.event as never)
      chart.send(step.event as never)
    }
    // XState keeps its pending delays in the system snapshot's `_scheduledEvents`, by `<session id>.<raise id>`.
    const scheduled = (actor.system as unknown as { getSnapshot(): { _scheduledEvents: Record<string, { id: string }> } }).getSnapshot()._scheduledEvents
    traces.push([
      { ...snap(actor.getSnapshot()), io: [...actorIo], emitted: [...actorEmitted], pending: Object.values(scheduled).map((e) => e.id).sort() },
      {
        ...snap(chart.getSnapshot()),
        io: runtime.io.map((a) => `${a.type} ${JSON.stringify(a.params)}`),
        emitted: runtime.emittedEvents.map((e) => JSON.stringify(e)),
        pending: chart.pendingDelays().sort(),
      },
    ])
  }
  expect(runtime.crashes).toEqual([])
  actor.stop()
  chart.stop()
  return traces
}

function expectSame(traces: Array<[Trace, Trace]>, steps: unknown[]): void {
  for (const [i, [xstate, runtime]] of traces.entries()) {
    expect(runtime, `after step ${i + 1} of ${JSON.stringify(steps.slice(0, i + 1))}`).toEqual(xstate)
  }
}

const advance = fc.constantFrom(1, 50, 250, 499, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000, 300_000).map((ms) => ({ advance: ms }))
const reasons: ReasonLike[] = [
  classifyClose({ code: 1000, reason: '' }, 1, 0),
  classifyClose({ code: 1006, reason: '' }, 1, 0),
  classifyClose({ code: 1012, reason: '' }, 1, 0),
  classifyClose({ code: 1013, reason: '' }, 1, 0),
  classifyUpgrade({ status: 503, retryAfter: '2' }, 1, 0),
  classifyUpgrade({ status: 429, retryAfter: null }, 1, 0),
  classifyControlChannelLoss('phx_close', {}, 1, 0),
  { kind: 'timed-out', phase: 'join', retryable: true, generation: 1, at: 0 },
]

describe('the chart runtime decides as XState actors do', () => {
  it('the reconnect chart: backoff, floors, the rapid and stable windows, suspension, retry now', () => {
    const event = fc.oneof(
      fc.constant<ReconnectEvent>({ type: 'reconnect.opened' }),
      fc.constantFrom(...reasons).map((reason): ReconnectEvent => ({ type: 'reconnect.lost', reason })),
      fc.constant<ReconnectEvent>({ type: 'reconnect.retryNow' }),
    )
    fc.assert(
      fc.property(fc.array(fc.oneof(event.map((e) => ({ event: e })), advance), { maxLength: 40 }), fc.integer(), (steps, seed) => {
        const policy = { ...DEFAULT_RECONNECT_POLICY, rapidLimit: 3 }
        const input = (random: () => number) => ({ policy, env: { now: () => 0, monotonic: () => 0, random } })
        expectSame(both(reconnectMachine, input, ['report'], steps, seed), steps)
      }),
      { numRuns: RUNS },
    )
  })

  it('the channel chart: join attempts, rejoins, drops, leaves, timeouts, stale attempts', () => {
    const origin = fc.record({ generation: fc.integer({ min: 1, max: 3 }), attachId: fc.integer({ min: 0, max: 4 }) }).map((o) => ({ topic: 'room:1', ...o }))
    const event = fc.oneof(
      fc.integer({ min: 1, max: 3 }).map((generation): ChannelEvent => ({ type: 'transport.up', generation })),
      fc.constant<ChannelEvent>({ type: 'transport.down' }),
      fc.constant<ChannelEvent>({ type: 'host.leave' }),
      origin.map((o): ChannelEvent => ({ type: 'channel.joinOk', ...o })),
      origin.map((o): ChannelEvent => ({ type: 'channel.joinError', reason: classifyJoinError({ reason: 'unauthorized' }, o.generation, 0), ...o })),
      origin.map((o): ChannelEvent => ({ type: 'channel.error', ...o })),
      origin.map((o): ChannelEvent => ({ type: 'channel.close', reason: classifyControlChannelLoss('phx_close', {}, o.generation, 0), ...o })),
      origin.map((o): ChannelEvent => ({ type: 'channel.left', ...o })),
      origin.map((o): ChannelEvent => ({ type: 'channel.attachFailed', reason: { kind: 'other', retryable: true, generation: o.generation, at: 0 }, ...o })),
    )
    fc.assert(
      fc.property(fc.array(fc.oneof(event.map((e) => ({ event: e })), advance), { maxLength: 40 }), fc.integer(), (steps, seed) => {
        const input = (random: () => number) => ({ topic: 'room:1', policy: DEFAULT_CHANNEL_POLICY, env: { now: () => 7, monotonic: () => 0, random } })
        expectSame(both(channelMachine, input, ['joinAttempt', 'releaseAttempt', 'leaveAttempt', 'report'], steps, seed), steps)
      }),
      { numRuns: RUNS },
    )
  })

  it('the control chart: queueing, deduplication, overflow, delivery, flush and reset', () => {
    const sequence = fc.integer({ min: 1, max: 8 })
    const event = fc.oneof(
      fc.record({ id: fc.constantFrom(null, 'a', 'b', 'c'), sequence }).map(({ id, sequence: s }): ControlEvent => ({ type: 'control.enqueue', signal: { correlationId: id }, sequence: s, epoch: 1 })),
      fc.constant<ControlEvent>({ type: 'control.flush' }),
      fc.constant<ControlEvent>({ type: 'control.reset' }),
      sequence.map((s): ControlEvent => ({ type: 'control.delivered', sequence: s })),
      sequence.map((s): ControlEvent => ({ type: 'control.deliveryFailed', sequence: s, error: 'boom' })),
    )
    fc.assert(
      fc.property(fc.array(event.map((e) => ({ event: e })), { maxLength: 40 }), fc.integer(), (steps, seed) => {
        const input = () => ({ policy: { ...DEFAULT_CONTROL_POLICY, dedupeWindow: 2, maxQueued: 2 } })
        expectSame(both(controlMachine, input, ['deliver', 'abandonDelivery', 'report'], steps, seed), steps)
      }),
      { numRuns: RUNS },
    )
  })

  it('the connection chart: sessions, transports, losses, refusals, supersedes, control crashes, channels, stale events', () => {
    const origin = fc.record({ generation: fc.integer({ min: 0, max: 3 }), epoch: fc.integer({ min: 0, max: 2 }) })
    const event: fc.Arbitrary<ConnectionEvent> = fc.oneof(
      fc.constant<ConnectionEvent>({ type: 'host.connect' }),
      fc.constant<ConnectionEvent>({ type: 'host.disconnect' }),
      fc.constant<ConnectionEvent>({ type: 'host.reconnect' }),
      fc.constantFrom('room:1', 'room:2').map((topic): ConnectionEvent => ({ type: 'host.channel', topic })),
      fc.constantFrom('room:1', 'room:2').map((topic): ConnectionEvent => ({ type: 'host.leaveChannel', topic })),
      origin.map((o): ConnectionEvent => ({ type: 'socket.open', ...o })),
      fc.tuple(origin, fc.constantFrom(1000, 1001, 1006, 1008, 1012, 4500)).map(([o, code]): ConnectionEvent => ({ type: 'socket.close', reason: classifyClose({ code, reason: '' }, o.generation, 0), ...o })),
      fc.tuple(origin, fc.constantFrom(403, 409, 429, 503)).map(([o, status]): ConnectionEvent => ({ type: 'socket.upgradeRejected', reason: classifyUpgrade({ status, retryAfter: '1' }, o.generation, 0), ...o })),
      origin.map((o): ConnectionEvent => ({ type: 'control.joinOk', ...o })),
      origin.map((o): ConnectionEvent => ({ type: 'control.joinError', reason: classifyJoinError({ reason: 'unauthorized' }, o.generation, 0), ...o })),
      origin.map((o): ConnectionEvent => ({ type: 'control.crashed', reason: classifyControlChannelLoss('phx_error', {}, o.generation, 0), ...o })),
      origin.map((o): ConnectionEvent => ({ type: 'control.lost', reason: classifyControlChannelLoss('phx_close', {}, o.generation, 0), ...o })),
      origin.map((o): ConnectionEvent => ({ type: 'control.left', ...o })),
      origin.map((o): ConnectionEvent => ({ type: 'control.supersede', reason: classifySupersede({ reason: 'x' }, o.generation, 0), ...o })),
      origin.map((o): ConnectionEvent => ({ type: 'control.signal', signal: { correlationId: 'c' }, ...o })),
      fc.integer({ min: 0, max: 3000 }).map((delayMs): ConnectionEvent => ({ type: 'reconnect.scheduled', delayMs, attempt: 1 })),
      fc.constant<ConnectionEvent>({ type: 'reconnect.due' }),
      fc.constant<ConnectionEvent>({ type: 'reconnect.suspended', delayMs: 30_000, attempt: 10, reason: suppressedReason('rapid-disconnects', 10, normalLoss(1), 0, true) }),
      fc.constant<ConnectionEvent>({ type: 'reconnect.gaveUp', reason: suppressedReason('max-attempts', 4, normalLoss(1), 0) }),
      fc.constantFrom('joined', 'errored', 'dropped', 'left').map((status): ConnectionEvent => ({ type: 'channel.status', topic: 'room:1', status, reason: null })),
      fc.constant<ConnectionEvent>({ type: 'channel.joinOk', topic: 'room:1', generation: 1, attachId: 1 }),
    )
    const io = [
      'openTransport', 'endTransport', 'joinControl', 'rejoinControl', 'leaveControl', 'startReconnect', 'stopReconnect',
      'tellReconnect', 'tellControl', 'startChannel', 'tellChannel', 'stopChannel', 'redeliver',
    ] as const
    fc.assert(
      fc.property(fc.array(fc.oneof(event.map((e) => ({ event: e })), advance), { maxLength: 50 }), fc.integer(), (steps, seed) => {
        // Each side gets its own monotonic counter: both read it the same number of times, or the windows differ.
        const input = (random: () => number) => {
          let ticks = 0
          return { env: { now: () => 5, monotonic: () => (ticks += 1000), random } }
        }
        expectSame(both(connectionMachine, input, io, steps, seed), steps)
      }),
      { numRuns: RUNS },
    )
  })
})
