/**
 * The chart runtime (src/runtime/chart-runner.ts) on small charts made for each point: when I/O
 * actions run and what they see, the one queue of a link's charts, io.failed ahead of the queue,
 * crashes, the one timer for every delay (order, ties, cancellation, stop), what it refuses,
 * inspection, observers, final states.
 */
import { describe, expect, it } from 'vitest'
import { assign, createMachine, enqueueActions, emit, fromCallback, log, raise, sendTo, setup, waitFor, type EventObject } from 'xstate'
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

  it("a chart started by an I/O action does not make the queue run inside that transition: the actions after it run first", () => {
    const twoSteps = setup({ types: { events: {} as { type: 'go' } }, actions: { io: (_: unknown, _params: { n: number; tag: string }) => {} } }).createMachine({
      id: 'two-steps',
      on: { go: { actions: [{ type: 'io', params: { n: 0, tag: 'first' } }, { type: 'io', params: { n: 0, tag: 'second' } }] } },
    })
    const runtime = new TestRuntime()
    const other = runtime.run(counter, undefined, 'other')
    const order: string[] = []
    runtime.onExecute = (chart, _type, params) => {
      const { tag } = params as { tag: string }
      order.push(`${chart.id} ${tag}`)
      // The parent's first action queues an event for another chart and starts a chart.
      if (chart.id === 'parent' && tag === 'first') {
        runtime.send(other, { type: 'inc' })
        runtime.run(counter, undefined, 'child', chart)
      }
    }
    const parent = runtime.run(twoSteps, undefined, 'parent')
    order.length = 0
    parent.send({ type: 'go' })
    expect(order).toEqual(['parent first', 'child entry', 'parent second', 'other after bump'])
    // A chart so started whose entry I/O throws: its io.failed comes after the transition that started it, ahead of the queue.
    order.length = 0
    runtime.onExecute = (chart, _type, params) => {
      const { tag } = params as { tag: string }
      order.push(`${chart.id} ${tag}`)
      if (chart.id === 'child2' && tag === 'entry') throw new Error('entry broke')
      if (chart.id === 'parent' && tag === 'first') {
        runtime.send(other, { type: 'inc' })
        runtime.run(counter, undefined, 'child2', chart)
      }
    }
    parent.send({ type: 'go' })
    expect(order).toEqual(['parent first', 'child2 entry', 'parent second', 'child2 failed', 'other after bump'])
  })

  it('an I/O action that stops its own chart ends that transition: the actions after it do not run', () => {
    const runtime = new TestRuntime()
    const chart = runtime.run(counter, undefined)
    runtime.onExecute = (c, _type, params) => {
      if ((params as { tag: string }).tag === 'after bump') c.stop()
    }
    const twice = setup({ actions: { io: (_: unknown, _p: string) => {} } }).createMachine({
      id: 'twice',
      on: { go: { actions: [{ type: 'io', params: 'first' }, { type: 'io', params: 'second' }] } },
    })
    const other = runtime.run(twice, undefined)
    runtime.onExecute = (c, _type, params) => {
      if (params === 'first') c.stop()
    }
    other.send({ type: 'go' })
    expect(runtime.io.filter((a) => a.chart === 'twice').map((a) => a.params)).toEqual(['first'])
    expect(chart.isStopped).toBe(false)
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
    // Not even computed: the snapshot is the last one committed.
    expect(chart.getSnapshot().context.n).toBe(0)
    expect(runtime.crashes).toHaveLength(1)
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

/** The delays, in ms, the runtime asks its clock's setTimeout for, in order. */
function timerRequests(runtime: TestRuntime): number[] {
  const sets: number[] = []
  const set = runtime.clock.setTimeout.bind(runtime.clock)
  runtime.clock.setTimeout = (fn, ms) => {
    sets.push(ms)
    return set(fn, ms)
  }
  return sets
}

describe("the host's clock failing", () => {
  const waiting = setup({ actions: { io: (_: unknown, _p: string) => {} }, delays: { d: 100 } }).createMachine({ id: 'waiting', initial: 'w', states: { w: { after: { d: { target: 'x', actions: { type: 'io', params: 'fired' } } } }, x: {} } })

  it('a clock that throws when a delay is armed crashes that chart alone; no timer is armed for it', () => {
    const runtime = new TestRuntime()
    const sets = timerRequests(runtime)
    // The delay is scheduled on the first reading; the second, to arm its timer, throws.
    let reads = 0
    runtime.clock.now = () => {
      if (++reads > 1) throw new Error('clock broke')
      return 0
    }
    const chart = runtime.run(waiting, undefined)
    expect(runtime.crashes).toEqual([{ chart: 'waiting', error: new Error('clock broke') }])
    expect(chart.isStopped).toBe(true)
    expect(sets).toEqual([])
  })

  it('a timer whose clearTimeout threw and that fires anyway is ignored: only the armed timer delivers', () => {
    const runtime = new TestRuntime()
    const callbacks: Array<() => void> = []
    runtime.clock.setTimeout = (fn) => {
      callbacks.push(fn as () => void)
      return callbacks.length
    }
    let clears = 0
    runtime.clock.clearTimeout = () => {
      clears++
      throw new Error('clear broke')
    }
    const first = runtime.run(waiting, undefined, 'first')
    expect(callbacks).toHaveLength(1)
    // A delay due sooner re-arms: the first timer's clearTimeout throws, and that timer stays live in the clock.
    const sooner = setup({ actions: { io: (_: unknown, _p: string) => {} }, delays: { d: 10 } }).createMachine({ id: 'sooner', initial: 'w', states: { w: { after: { d: { target: 'x', actions: { type: 'io', params: 'sooner' } } } }, x: {} } })
    expect(() => runtime.run(sooner, undefined)).toThrow('clear broke')
    expect(clears).toBe(1)
    // The runtime forgot the first timer before clearing it: it is no longer the armed one.
    expect(callbacks).toHaveLength(1)
    // It fires anyway, once both delays are due: ignored, nothing is delivered by it.
    runtime.clock.increment(100)
    callbacks[0]!()
    expect(runtime.paramsOf('io')).toEqual([])
    expect(first.getSnapshot().value).toBe('w')
  })
})

describe('delays', () => {
  it('a delay scheduled later but due sooner fires first, on its own deadline; a later delay does not re-arm the timer', () => {
    const runtime = new TestRuntime()
    const sets = timerRequests(runtime)
    const slow = setup({ actions: { io: (_: unknown, _p: string) => {} }, delays: { d: 1000 } }).createMachine({ id: 'slow', initial: 'w', states: { w: { after: { d: { target: 'x', actions: { type: 'io', params: 'slow' } } } }, x: {} } })
    const fast = setup({ actions: { io: (_: unknown, _p: string) => {} }, delays: { d: 100 } }).createMachine({ id: 'fast', initial: 'w', states: { w: { after: { d: { target: 'x', actions: { type: 'io', params: 'fast' } } } }, x: {} } })
    runtime.run(slow, undefined)
    runtime.run(slow, undefined, 'slow too')
    expect(sets).toEqual([1000])
    runtime.run(fast, undefined)
    expect(sets).toEqual([1000, 100])
    runtime.clock.increment(100)
    expect(runtime.paramsOf('io')).toEqual(['fast'])
    expect(sets).toEqual([1000, 100, 900])
    runtime.clock.increment(899)
    expect(runtime.paramsOf('io')).toEqual(['fast'])
    runtime.clock.increment(1)
    expect(runtime.paramsOf('io')).toEqual(['fast', 'slow', 'slow'])
  })

  it('a delay longer than a timer takes (2^31-1 ms) is armed in steps and delivered at its own deadline, not after 1 ms', () => {
    const runtime = new TestRuntime()
    const sets = timerRequests(runtime)
    const long = 2 ** 31 + 5_000
    const chart = setup({ actions: { io: (_: unknown, _p: string) => {} }, delays: { d: long } }).createMachine({ id: 'long', initial: 'w', states: { w: { after: { d: { target: 'x', actions: { type: 'io', params: 'due' } } } }, x: {} } })
    runtime.run(chart, undefined)
    expect(sets).toEqual([2 ** 31 - 1])
    runtime.clock.increment(2 ** 31 - 1)
    expect(runtime.paramsOf('io')).toEqual([])
    expect(sets).toEqual([2 ** 31 - 1, 5_001])
    runtime.clock.increment(5_000)
    expect(runtime.paramsOf('io')).toEqual([])
    runtime.clock.increment(1)
    expect(runtime.paramsOf('io')).toEqual(['due'])
  })

  it('a delay due a millisecond after the one the timer fired for waits for its own deadline', () => {
    const runtime = new TestRuntime()
    const a = setup({ actions: { io: (_: unknown, _p: string) => {} }, delays: { d: 100 } }).createMachine({ id: 'a', initial: 'w', states: { w: { after: { d: { target: 'x', actions: { type: 'io', params: 'a' } } } }, x: {} } })
    runtime.run(a, undefined)
    runtime.clock.increment(1)
    runtime.run(a, undefined, 'b')
    runtime.clock.increment(99)
    expect(runtime.io.map((x) => x.chart)).toEqual(['a'])
    runtime.clock.increment(1)
    expect(runtime.io.map((x) => x.chart)).toEqual(['a', 'b'])
  })

  it('a delayed raise without an id, and an immediate raise (handled inside the transition, nothing scheduled); two delayed raises without an id both fire', () => {
    const raising = setup({ types: { events: {} as { type: 'go' } | { type: 'now' } | { type: 'later' } }, actions: { io: (_: unknown, _p: string) => {} } }).createMachine({
      id: 'raising',
      on: {
        go: { actions: [raise({ type: 'now' }), raise({ type: 'later' }, { delay: 50 }), raise({ type: 'later' }, { delay: 60 })] },
        now: { actions: { type: 'io', params: 'now' } },
        later: { actions: { type: 'io', params: 'later' } },
      },
    })
    const runtime = new TestRuntime()
    const chart = runtime.run(raising, undefined)
    chart.send({ type: 'go' })
    expect(runtime.paramsOf('io')).toEqual(['now'])
    expect(chart.pendingDelays()).toHaveLength(2)
    runtime.clock.increment(50)
    expect(runtime.paramsOf('io')).toEqual(['now', 'later'])
    runtime.clock.increment(10)
    expect(runtime.paramsOf('io')).toEqual(['now', 'later', 'later'])
    expect(chart.pendingDelays()).toEqual([])
  })

  it('a delay scheduled while due delays are delivered waits for a timer of its own, even at 0 ms (the event loop runs before it)', () => {
    const looping = setup({ types: { context: {} as { n: number } }, actions: { io: (_: unknown, _p: number) => {} } }).createMachine({
      id: 'looping',
      context: { n: 0 },
      initial: 'a',
      states: {
        a: {
          after: {
            0: { target: 'a', reenter: true, actions: [assign({ n: ({ context }) => context.n + 1 }), { type: 'io', params: ({ context }) => context.n }] },
          },
        },
      },
    })
    const runtime = new TestRuntime()
    const clock = counting(runtime)
    runtime.run(looping, undefined)
    expect(clock.armed()).toBe(1)
    runtime.clock.increment(0)
    // One turn per timer: the re-entered state's 0 ms delay is armed on a new timer, not run in this one.
    expect(runtime.paramsOf('io')).toEqual([1])
    expect(clock.armed()).toBe(1)
    runtime.clock.increment(0)
    expect(runtime.paramsOf('io')).toEqual([1, 2])
  })

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
    expect(b.pendingDelays()).toEqual([])
    b.stop()
    runtime.clock.increment(2000)
    expect(runtime.io).toEqual([])
  })
})

describe('observers and listeners', () => {
  it('an async snapshot observer or inspection observer that rejects is reported as a throw is, never an unhandled rejection', async () => {
    const runtime = new TestRuntime()
    let inspections = 0
    runtime.inspect = async (e) => {
      if (e.type === '@xstate.event' && ++inspections === 1) throw new Error('async inspect broke')
    }
    const a = runtime.run(timers, undefined, 'a')
    a.subscribe({
      next: async () => {
        throw new Error('async next broke')
      },
      complete: async () => {
        throw new Error('async complete broke')
      },
    })
    a.send({ type: 'leave' })
    a.stop()
    // The rejections settle a microtask later.
    await Promise.resolve()
    await Promise.resolve()
    expect(runtime.listenerErrors).toEqual([
      { chart: 'a', error: new Error('async inspect broke') },
      { chart: 'a', error: new Error('async next broke') },
      { chart: 'a', error: new Error('async complete broke') },
    ])
  })

  it('a snapshot listener that throws is reported; the chart, the other listeners and its delays go on', () => {
    const runtime = new TestRuntime()
    const a = runtime.run(timers, undefined, 'a')
    const seen: unknown[] = []
    a.subscribe(() => {
      throw new Error('listener broke')
    })
    a.subscribe((s) => void seen.push(s.value))
    a.send({ type: 'leave' })
    expect(runtime.listenerErrors).toEqual([{ chart: 'a', error: new Error('listener broke') }])
    expect(seen).toHaveLength(1)
    // A delay's transition calls the throwing listener from the clock's timer: every later delay still fires.
    runtime.clock.increment(100)
    expect(runtime.paramsOf('io')).toEqual(['second same'])
    runtime.clock.increment(900)
    expect(a.pendingDelays()).toEqual([])
    expect(runtime.listenerErrors).toHaveLength(2)
    a.send({ type: 'back' })
    expect(seen).toHaveLength(3)
  })

  it('observers complete when the chart reaches a final state (after seeing it) or is stopped, and error when it crashes; a late one completes at once', () => {
    const runtime = new TestRuntime()
    const log: string[] = []
    const observer = (name: string) => ({
      next: (s: { value: unknown }) => void log.push(`${name} next ${String(s.value)}`),
      error: (e: unknown) => void log.push(`${name} error ${(e as Error).message.split('\n').at(-1)}`),
      complete: () => void log.push(`${name} complete`),
    })
    const finishing = runtime.run(counter, undefined, 'finishing')
    finishing.subscribe(observer('f'))
    finishing.send({ type: 'finish' })
    const crashing = runtime.run(counter, undefined, 'crashing')
    crashing.subscribe(observer('c'))
    crashing.send({ type: 'boom' })
    const stopped = runtime.run(counter, undefined, 'stopped')
    stopped.subscribe(observer('s'))
    stopped.stop()
    stopped.stop()
    stopped.subscribe(observer('late'))
    expect(log).toEqual(['f next done', 'f complete', 'c error guard broke', 's complete', 'late complete'])
    // Observers without error or complete are no listener fault; a late subscription unsubscribes.
    const bare = runtime.run(counter, undefined, 'bare')
    bare.subscribe({ next: () => {} })
    bare.send({ type: 'boom' })
    const bareStopped = runtime.run(counter, undefined, 'bare-stopped')
    bareStopped.subscribe({ next: () => {} })
    bareStopped.stop()
    bareStopped.subscribe({ next: () => {} }).unsubscribe()
    expect(runtime.listenerErrors).toEqual([])
  })

  it('a chart in a final state whose host callback throws is still reported, once', () => {
    class Breaking extends TestRuntime {
      override changed(chart: RunningChart): void {
        if (chart.isStopped) throw new Error('changed broke')
      }
    }
    const runtime = new Breaking()
    const chart = runtime.run(counter, undefined, 'finishing')
    chart.send({ type: 'finish' })
    expect(runtime.crashes).toEqual([{ chart: 'finishing', error: new Error('changed broke') }])
  })

  it('a crash is reported once, and the queue goes on', () => {
    const runtime = new TestRuntime()
    const a = runtime.run(counter, undefined, 'a')
    const b = runtime.run(counter, undefined, 'b')
    runtime.send(a, { type: 'boom' })
    runtime.send(b, { type: 'inc' })
    expect(runtime.crashes.map((c) => c.chart)).toEqual(['a'])
    expect(b.getSnapshot().context.n).toBe(1)
  })

  it("XState's waitFor on a chart that finishes without meeting the predicate rejects at once, not after its timeout", async () => {
    const runtime = new TestRuntime()
    const chart = runtime.run(counter, undefined)
    const waiting = waitFor(chart as never, (s: { context: { n: number } }) => s.context.n > 5, { timeout: 60_000 })
    chart.send({ type: 'finish' })
    await expect(waiting).rejects.toThrow()
  })

  it('a host callback around a step that throws (a phoenix-link bug) crashes that chart alone; the queue goes on', () => {
    class Breaking extends TestRuntime {
      override changed(chart: RunningChart): void {
        if (chart.id === 'bad') throw new Error('changed broke')
      }
    }
    const runtime = new Breaking()
    const good = runtime.run(counter, undefined, 'good')
    const bad = runtime.run(counter, undefined, 'bad-later')
    ;(bad as { id: string }).id = 'bad'
    runtime.send(bad, { type: 'inc' })
    runtime.send(good, { type: 'inc' })
    expect(runtime.crashes).toEqual([{ chart: 'bad', error: new Error('changed broke') }])
    expect(bad.isStopped).toBe(true)
    expect(good.getSnapshot().context.n).toBe(1)
  })

  it("a chart started outside the queue's processing whose entry I/O throws gets its io.failed at once", () => {
    const runtime = new TestRuntime()
    runtime.onExecute = (_chart, _type, params) => {
      if ((params as { tag: string }).tag === 'entry') throw new Error('entry broke')
    }
    runtime.run(counter, undefined)
    expect(runtime.failures).toHaveLength(1)
    expect(runtime.io.map((a) => (a.params as { tag: string }).tag)).toEqual(['entry', 'failed'])
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

  it('a built-in that runs on an actor (a log, a stop) reaching it at run time is a crash that says so; a spawn already throws inside XState', () => {
    const logging = setup({}).createMachine({ id: 'logging', on: { go: { actions: enqueueActions(({ enqueue }) => enqueue(log('hello'))) } } })
    const runtime = new TestRuntime()
    const chart = runtime.run(logging, undefined)
    chart.send({ type: 'go' })
    expect(runtime.crashes).toEqual([{ chart: 'logging', error: new Error("the logging chart used xstate.log, which needs an actor; phoenix-link's runtime runs charts without actors") }])
    expect(chart.isStopped).toBe(true)
    const spawning = setup({ actors: { child: fromCallback(() => {}) } }).createMachine({
      id: 'spawning',
      on: { go: { actions: enqueueActions(({ enqueue }) => enqueue.spawnChild('child')) } },
    })
    const spawned = runtime.run(spawning, undefined)
    spawned.send({ type: 'go' })
    expect(runtime.crashes.map((c) => c.chart)).toEqual(['logging', 'spawning'])
    expect(spawned.isStopped).toBe(true)
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

  it("an I/O action's inspection event carries its type and params; an observer that throws is reported and the chart goes on", () => {
    const runtime = new TestRuntime()
    const actions: unknown[] = []
    runtime.inspect = (e) => {
      if (e.type === '@xstate.action') actions.push(e.action)
      throw new Error('observer broke')
    }
    const chart = runtime.run(counter, undefined)
    chart.send({ type: 'inc' })
    expect(actions).toEqual([
      { type: 'io', params: { n: 0, tag: 'entry' } },
      { type: 'io', params: { n: 1, tag: 'after bump' } },
    ])
    expect(runtime.listenerErrors.length).toBeGreaterThan(0)
    expect(runtime.listenerErrors.every((e) => e.chart === 'counter')).toBe(true)
    expect(chart.getSnapshot().context.n).toBe(1)
  })

  it('an observer that stops observing at a microstep is not called for the rest of that transition, and nothing is reported', () => {
    const stepping = setup({ types: { events: {} as { type: 'go' } | { type: 'then' } } }).createMachine({
      id: 'stepping',
      initial: 'a',
      states: { a: { on: { go: { target: 'b', actions: raise({ type: 'then' }) } } }, b: { on: { then: 'c' } }, c: {} },
    })
    const runtime = new TestRuntime()
    const chart = runtime.run(stepping, undefined)
    const seen: string[] = []
    runtime.inspect = (e) => {
      seen.push(e.type)
      if (e.type === '@xstate.microstep') runtime.inspect = null
    }
    chart.send({ type: 'go' })
    expect(seen).toEqual(['@xstate.event', '@xstate.microstep'])
    expect(runtime.listenerErrors).toEqual([])
    expect(chart.getSnapshot().value).toBe('c')
  })

  it('a chart with a history state keeps its own history (only an empty one is shared)', () => {
    const remembering = setup({ types: { events: {} as { type: 'next' } | { type: 'out' } | { type: 'back' } } }).createMachine({
      id: 'remembering',
      initial: 'a',
      states: {
        a: {
          initial: 'one',
          states: { one: { on: { next: 'two' } }, two: {}, hist: { type: 'history' } },
          on: { out: 'b' },
        },
        b: { on: { back: 'a.hist' } },
      },
    })
    const runtime = new TestRuntime()
    const chart = runtime.run(remembering, undefined)
    chart.send({ type: 'next' })
    chart.send({ type: 'out' })
    chart.send({ type: 'back' })
    expect(chart.getSnapshot().value).toEqual({ a: 'two' })
  })

  it("a chart started by another is inspected under the root's session id; each chart has its own", () => {
    const runtime = new TestRuntime()
    const roots: Array<[string, string]> = []
    runtime.inspect = (e) => void roots.push([e.actorRef.id, e.rootId])
    const parent = runtime.run(counter, undefined, 'parent')
    const child = runtime.run(counter, undefined, 'child', parent)
    const grandchild = runtime.run(counter, undefined, 'grandchild', child)
    expect(new Set([parent.sessionId, child.sessionId, grandchild.sessionId]).size).toBe(3)
    expect(parent.sessionId).toMatch(/^phoenix-link:\d+$/)
    expect(grandchild._parent).toBe(child)
    expect(new Set(roots.map(([, root]) => root))).toEqual(new Set([parent.sessionId]))
    expect(roots.map(([id]) => id)).toContain('grandchild')
  })

  it('emit() reaches the runtime; observers see every committed snapshot until they unsubscribe', () => {
    const emitting = setup({ types: { events: {} as { type: 'go' } } }).createMachine({ id: 'emitting', on: { go: { actions: emit({ type: 'went' }) } } })
    const runtime = new TestRuntime()
    const chart = runtime.run(emitting, undefined)
    const seen: unknown[] = []
    const sub = chart.subscribe((s) => void seen.push(s.value))
    const observed: unknown[] = []
    const other = chart.subscribe({ next: (s) => void observed.push(s.value) })
    const silent = chart.subscribe({})
    chart.send({ type: 'go' })
    // An observer without `next` is no listener fault.
    expect(runtime.listenerErrors).toEqual([])
    sub.unsubscribe()
    chart.send({ type: 'go' })
    other.unsubscribe()
    silent.unsubscribe()
    sub.unsubscribe()
    chart.send({ type: 'go' })
    expect(runtime.emittedEvents).toEqual([{ type: 'went' }, { type: 'went' }, { type: 'went' }])
    expect(seen).toHaveLength(1)
    expect(observed).toHaveLength(2)
  })

  it('every chart of every runtime shares one empty tags set, children and history (XState only reads them); a tagged state keeps its own', () => {
    const a = new TestRuntime().run(counter, undefined)
    const b = new TestRuntime().run(timers, undefined)
    a.send({ type: 'inc' })
    type Parts = { tags: Set<string>; children: object; historyValue: object }
    const sa = a.getSnapshot() as unknown as Parts
    const sb = b.getSnapshot() as unknown as Parts
    expect(sa.tags).toBe(sb.tags)
    expect(sa.children).toBe(sb.children)
    expect(sa.historyValue).toBe(sb.children)
    expect(Object.isFrozen(sa.children)).toBe(true)
    const tagged = createMachine({ id: 'tagged', initial: 'a', states: { a: { tags: ['busy'] } } })
    const t = new TestRuntime().run(tagged, undefined)
    expect(t.getSnapshot().hasTag('busy')).toBe(true)
    expect(t.getSnapshot().tags).not.toBe(sa.tags)
  })

  it('every snapshot of a configuration, in every runtime, shares one frozen state value and state-node list; another configuration has its own', () => {
    type Parts = { value: unknown; _nodes: unknown[] }
    const nested = createMachine({ id: 'nested', initial: 'up', states: { up: { initial: 'idle', states: { idle: { on: { go: 'busy' } }, busy: { on: { back: 'idle', stay: { actions: assign({}) } } } } } } })
    const a = new TestRuntime().run(nested, undefined)
    const b = new TestRuntime().run(nested, undefined)
    const first = a.getSnapshot() as unknown as Parts
    expect(first.value).toEqual({ up: 'idle' })
    expect((b.getSnapshot() as unknown as Parts).value).toBe(first.value)
    expect((b.getSnapshot() as unknown as Parts)._nodes).toBe(first._nodes)
    expect(Object.isFrozen(first.value) && Object.isFrozen(first._nodes)).toBe(true)
    a.send({ type: 'go' })
    const busy = a.getSnapshot() as unknown as Parts
    expect(busy.value).toEqual({ up: 'busy' })
    expect(busy.value).not.toBe(first.value)
    // A transition that keeps the configuration (XState computes the value again) keeps the shared one.
    a.send({ type: 'stay' })
    expect((a.getSnapshot() as unknown as Parts).value).toBe(busy.value)
    b.send({ type: 'go' })
    expect((b.getSnapshot() as unknown as Parts).value).toBe(busy.value)
    a.send({ type: 'back' })
    expect((a.getSnapshot() as unknown as Parts).value).toBe(first.value)
    expect(a.getSnapshot().matches({ up: 'idle' })).toBe(true)
  })

  it("an inspector sees a microstep's snapshot with its configuration already shared and frozen: what it would write into the value never reaches another runtime", () => {
    type Parts = { value: Record<string, unknown>; _nodes: unknown[] }
    // A chart of its own: its configurations are new to the process, so the microstep's are the first of them.
    const fresh = createMachine({ id: 'fresh', initial: 'one', states: { one: { initial: 'a', states: { a: { on: { go: 'b' } }, b: {} } } } })
    const runtime = new TestRuntime()
    const writes: string[] = []
    runtime.inspect = (e) => {
      if (e.type !== '@xstate.microstep') return
      const value = (e.snapshot as Parts).value
      try {
        value.poisoned = true
        writes.push('written')
      } catch (error) {
        writes.push((error as Error).constructor.name)
      }
    }
    const chart = runtime.run(fresh, undefined)
    chart.send({ type: 'go' })
    expect(writes).toEqual(['TypeError'])
    const other = new TestRuntime().run(fresh, undefined)
    other.send({ type: 'go' })
    expect((other.getSnapshot() as unknown as Parts).value).toEqual({ one: 'b' })
    expect((other.getSnapshot() as unknown as Parts).value).toBe((chart.getSnapshot() as unknown as Parts).value)
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
