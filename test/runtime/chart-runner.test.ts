/**
 * The chart runtime (src/runtime/chart-runner.ts) on small charts made for each point: when I/O
 * actions run and what they see, the one queue of a link's charts, io.failed ahead of the queue,
 * crashes, the one timer for every delay (order, ties, cancellation, stop), what it refuses,
 * inspection, observers, final states.
 */
import { describe, expect, it } from 'vitest'
import { assign, createMachine, enqueueActions, emit, fromCallback, sendTo, setup, type EventObject } from 'xstate'
import { checkChart, type RunningChart } from '../../src/runtime/chart-runner.js'
import { TestRuntime } from '../support/runtime.js'

/** A chart with one I/O action `io` (its params recorded), a counter, and a final state. */
const counter = setup({
  types: { context: {} as { n: number }, events: {} as { type: 'inc' } | { type: 'boom' } | { type: 'finish' } | { type: 'io.failed'; action: string; error: unknown } },
  actions: {
    io: (_: unknown, _params: { n: number; tag: string }) => {},
    bump: assign({ n: ({ context }) => context.n + 1 }),
    tell: enqueueActions(({ context, enqueue }) => enqueue({ type: 'io', params: { n: context.n, tag: 'after bump' } })),
  },
  guards: {
    explodes: () => {
      throw new Error('guard broke')
    },
  },
}).createMachine({
  id: 'counter',
  context: { n: 0 },
  entry: { type: 'io', params: { n: 0, tag: 'entry' } },
  initial: 'on',
  states: {
    on: {
      on: {
        inc: { actions: ['bump', 'tell'] },
        boom: { guard: 'explodes', target: 'done' },
        finish: 'done',
        'io.failed': { actions: { type: 'io', params: { n: -1, tag: 'failed' } } },
      },
    },
    done: { type: 'final' },
  },
})

describe('I/O actions', () => {
  it('run after the transition, in order, with their params; the initial entry too; the chart already reads its new snapshot', () => {
    const runtime = new TestRuntime()
    const seen: number[] = []
    runtime.onExecute = (chart) => void seen.push((chart.getSnapshot() as { context: { n: number } }).context.n)
    const chart = runtime.run(counter, undefined)
    chart.send({ type: 'inc' })
    chart.send({ type: 'inc' })
    expect(runtime.io.map((a) => a.params)).toEqual([
      { n: 0, tag: 'entry' },
      { n: 1, tag: 'after bump' },
      { n: 2, tag: 'after bump' },
    ])
    expect(seen).toEqual([0, 1, 2])
  })

  it("an event sent while one is processed waits its turn, across the link's charts, in the order sent", () => {
    const runtime = new TestRuntime()
    const order: string[] = []
    let other!: RunningChart
    runtime.onExecute = (chart, _type, params) => {
      order.push(`${chart.id}:${(params as { n: number }).n}`)
      // The first chart's action sends to both charts: each event is processed after this one ends.
      if (chart.id === 'a' && (params as { n: number }).n === 1) {
        other.send({ type: 'inc' })
        chart.send({ type: 'inc' })
        order.push('sent')
      }
    }
    const a = runtime.run(counter, undefined, 'a')
    other = runtime.run(counter, undefined, 'b')
    a.send({ type: 'inc' })
    expect(order).toEqual(['a:0', 'b:0', 'a:1', 'sent', 'b:1', 'a:2'])
  })

  it('one that throws is reported and fed back to its chart as io.failed, ahead of every event already queued', () => {
    const runtime = new TestRuntime()
    const fault = new Error('socket gone')
    const chart = runtime.run(counter, undefined)
    const b = runtime.run(counter, undefined, 'b')
    runtime.onExecute = (c, _type, params) => {
      if (c === chart && (params as { tag: string }).tag === 'after bump' && (params as { n: number }).n === 1) {
        b.send({ type: 'inc' }) // queued before the failure is known
        throw fault
      }
    }
    chart.send({ type: 'inc' })
    expect(runtime.failures).toEqual([{ chart: 'counter', type: 'io', error: fault }])
    expect(runtime.io.map((a) => `${a.chart}:${(a.params as { tag: string }).tag}`)).toEqual([
      'counter:entry',
      'b:entry',
      'counter:after bump',
      'counter:failed',
      'b:after bump',
    ])
    expect(runtime.crashes).toEqual([])
  })
})

describe('a crash', () => {
  it('a guard that throws stops the chart, reports it, cancels its delays; later events change nothing', () => {
    const runtime = new TestRuntime()
    const chart = runtime.run(counter, undefined)
    chart.send({ type: 'boom' })
    expect(runtime.crashes).toHaveLength(1)
    expect(runtime.crashes[0]).toMatchObject({ chart: 'counter', error: { message: expect.stringContaining('guard broke') } })
    expect(chart.isStopped).toBe(true)
    chart.send({ type: 'inc' })
    expect(runtime.io).toHaveLength(1)
  })

  it('an initial transition that throws is a crash too: the chart is stopped before it runs anything', () => {
    const runtime = new TestRuntime()
    const broken = createMachine({
      context: () => {
        throw new Error('no context')
      },
    })
    const chart = runtime.run(broken, undefined, 'broken')
    expect(runtime.crashes).toEqual([{ chart: 'broken', error: new Error('no context') }])
    expect(chart.isStopped).toBe(true)
  })

  it('a final state stops the chart: its last actions run, then events are dropped', () => {
    const runtime = new TestRuntime()
    const chart = runtime.run(counter, undefined)
    chart.send({ type: 'finish' })
    expect(chart.getSnapshot().status).toBe('done')
    expect(chart.isStopped).toBe(true)
    chart.send({ type: 'inc' })
    expect(runtime.io).toHaveLength(1)
  })
})

/** A chart of two regions that wait on delays and record, with `io`, each delay that fired. */
const timers = setup({
  types: { events: {} as { type: 'leave' } | { type: 'back' } },
  actions: { io: (_: unknown, _params: string) => {} },
  delays: { short: 100, same: 100, long: 1000 },
}).createMachine({
  id: 'timers',
  type: 'parallel',
  states: {
    first: {
      initial: 'waiting',
      states: {
        waiting: {
          after: {
            short: { target: 'fired', actions: { type: 'io', params: 'first short' } },
          },
          on: { leave: 'left' },
        },
        fired: {},
        left: { on: { back: 'waiting' } },
      },
    },
    second: {
      initial: 'waiting',
      states: {
        waiting: {
          after: {
            same: { target: 'fired', actions: { type: 'io', params: 'second same' } },
            long: { target: 'late', actions: { type: 'io', params: 'second long' } },
          },
        },
        fired: {},
        late: {},
      },
    },
  },
})

/** A SimulatedClock that counts the timers it holds. */
function counting(runtime: TestRuntime): { armed: () => number } {
  const clock = runtime.clock
  let armed = 0
  const set = clock.setTimeout.bind(clock)
  const clear = clock.clearTimeout.bind(clock)
  clock.setTimeout = (fn, ms) => {
    armed++
    const id = set(() => {
      armed--
      fn()
    }, ms)
    return id
  }
  clock.clearTimeout = (id) => {
    armed--
    clear(id)
  }
  return { armed: () => armed }
}

describe('delays', () => {
  it('one clock timer for every pending delay of every chart; none once nothing is pending', () => {
    const runtime = new TestRuntime()
    const clock = counting(runtime)
    const a = runtime.run(timers, undefined, 'a')
    runtime.run(timers, undefined, 'b')
    expect(a.pendingDelays()).toEqual(['xstate.after.short.timers.first.waiting', 'xstate.after.same.timers.second.waiting', 'xstate.after.long.timers.second.waiting'])
    expect(clock.armed()).toBe(1)
    runtime.clock.increment(1000)
    expect(clock.armed()).toBe(0)
    expect(a.pendingDelays()).toEqual([])
  })

  it('fire in the order they are due; delays due together fire in the order they were scheduled', () => {
    const runtime = new TestRuntime()
    runtime.run(timers, undefined, 'a')
    runtime.clock.increment(100)
    expect(runtime.paramsOf('io')).toEqual(['first short', 'second same'])
    runtime.clock.increment(900)
    expect(runtime.paramsOf('io')).toEqual(['first short', 'second same'])
  })

  it('a delay of a state left is cancelled; entering it again starts it over', () => {
    const runtime = new TestRuntime()
    const chart = runtime.run(timers, undefined)
    runtime.clock.increment(60)
    chart.send({ type: 'leave' })
    runtime.clock.increment(60)
    expect(runtime.paramsOf('io')).toEqual(['second same'])
    chart.send({ type: 'back' })
    runtime.clock.increment(99)
    expect(runtime.paramsOf('io')).toEqual(['second same'])
    runtime.clock.increment(1)
    expect(runtime.paramsOf('io')).toEqual(['second same', 'first short'])
  })

  it('a delay cancelled by the transition of one that fired just before it, at the same instant, does not fire', () => {
    const race = setup({ actions: { io: (_: unknown, _p: string) => {} }, delays: { d: 100 } }).createMachine({
      id: 'race',
      type: 'parallel',
      states: {
        a: { initial: 'w', states: { w: { after: { d: { target: 'x', actions: { type: 'io', params: 'a' } } } }, x: {} } },
        b: { initial: 'w', states: { w: { after: { d: { target: 'x', actions: { type: 'io', params: 'b' } } }, on: { '*': {} } }, x: {} } },
      },
      on: { 'xstate.after.d.race.a.w': {} },
    })
    // Region a's delay fires first; its transition does not touch b, so both fire. Now a chart where it does:
    const cancelling = setup({ actions: { io: (_: unknown, _p: string) => {} }, delays: { d: 100 } }).createMachine({
      id: 'cancelling',
      initial: 'w',
      states: {
        w: {
          type: 'parallel',
          states: {
            a: { initial: 'w', states: { w: { after: { d: { target: '#cancelling.gone', actions: { type: 'io', params: 'a' } } } } } },
            b: { initial: 'w', states: { w: { after: { d: { actions: { type: 'io', params: 'b' } } } } } },
          },
        },
        gone: {},
      },
    })
    const runtime = new TestRuntime()
    runtime.run(race, undefined)
    const chart = runtime.run(cancelling, undefined)
    runtime.clock.increment(100)
    expect(runtime.io.filter((a) => a.chart === 'race').map((a) => a.params)).toEqual(['a', 'b'])
    expect(runtime.io.filter((a) => a.chart === 'cancelling').map((a) => a.params)).toEqual(['a'])
    expect(chart.pendingDelays()).toEqual([])
  })

  it('stop() cancels every delay of that chart and only of that chart', () => {
    const runtime = new TestRuntime()
    const clock = counting(runtime)
    const a = runtime.run(timers, undefined, 'a')
    const b = runtime.run(timers, undefined, 'b')
    a.stop()
    expect(a.pendingDelays()).toEqual([])
    expect(b.pendingDelays()).toHaveLength(3)
    b.stop()
    expect(clock.armed()).toBe(0)
    runtime.clock.increment(2000)
    expect(runtime.io).toEqual([])
  })
})

describe('what the runtime refuses', () => {
  it('checkChart refuses a chart that invokes an actor or names an action that needs one', () => {
    const invoking = setup({ actors: { x: fromCallback(() => {}) } }).createMachine({ id: 'invoking', invoke: { src: 'x' } })
    expect(() => checkChart(invoking)).toThrow('chart invoking: state invoking invokes an actor')
    const sending = setup({ actions: { tellIt: sendTo('x', { type: 'y' }) } }).createMachine({ id: 'sending' })
    expect(() => checkChart(sending)).toThrow('chart sending: action tellIt is xstate.sendTo, which needs an actor')
    expect(() => checkChart(counter)).not.toThrow()
  })

  it('an actor action reaching it at run time is a crash that says so', () => {
    const sneaky = setup({}).createMachine({ id: 'sneaky', on: { go: { actions: enqueueActions(({ enqueue }) => enqueue.sendTo('x' as never, { type: 'y' } as never)) } } })
    const runtime = new TestRuntime()
    const chart = runtime.run(sneaky, undefined)
    chart.send({ type: 'go' } as EventObject as never)
    expect(runtime.crashes).toHaveLength(1)
    expect(String(runtime.crashes[0]!.error)).toMatch(/sneaky|Unable to send/)
    expect(chart.isStopped).toBe(true)
  })
})

describe('what it shows', () => {
  it('inspection: the chart, each event, each microstep, each I/O action and each snapshot, under the root chart (as XState, no microstep for the initial state)', () => {
    const runtime = new TestRuntime()
    const events: Array<{ type: string; actor: string; root: string }> = []
    runtime.inspect = (e) => void events.push({ type: e.type, actor: e.actorRef.id, root: e.rootId })
    const chart = runtime.run(counter, undefined)
    chart.send({ type: 'inc' })
    const root = chart.sessionId
    expect(events).toEqual([
      { type: '@xstate.actor', actor: 'counter', root },
      { type: '@xstate.action', actor: 'counter', root },
      { type: '@xstate.snapshot', actor: 'counter', root },
      { type: '@xstate.event', actor: 'counter', root },
      { type: '@xstate.microstep', actor: 'counter', root },
      { type: '@xstate.action', actor: 'counter', root },
      { type: '@xstate.snapshot', actor: 'counter', root },
    ])
  })

  it('emit() reaches the runtime; observers see every committed snapshot until they unsubscribe', () => {
    const emitting = setup({ types: { events: {} as { type: 'go' } } }).createMachine({ id: 'emitting', on: { go: { actions: emit({ type: 'went' }) } } })
    const runtime = new TestRuntime()
    const chart = runtime.run(emitting, undefined)
    const seen: unknown[] = []
    const sub = chart.subscribe((s) => void seen.push(s.value))
    chart.send({ type: 'go' })
    sub.unsubscribe()
    chart.send({ type: 'go' })
    expect(runtime.emittedEvents).toEqual([{ type: 'went' }, { type: 'went' }])
    expect(seen).toHaveLength(1)
  })

  it('snapshots read as XState snapshots: matches(), hasTag(), value, context', () => {
    const runtime = new TestRuntime()
    const chart = runtime.run(counter, undefined)
    chart.send({ type: 'inc' })
    const snapshot = chart.getSnapshot()
    expect(snapshot.matches('on')).toBe(true)
    expect(snapshot.hasTag('anything')).toBe(false)
    expect(snapshot.value).toBe('on')
    expect(snapshot.context).toEqual({ n: 1 })
  })
})
