/**
 * The control delivery chart: once each, in order, one at a time; a duplicate correlation id
 * delivered once; a failing handler reported and passed over.
 */
import { describe, expect, it } from 'vitest'
import { assign, createActor, fromPromise, sendTo, setup, waitFor } from 'xstate'
import { controlMachine, DEFAULT_CONTROL_POLICY, type ControlReport, type QueuedSignal } from '../../machines/control.js'

function harness(handler: (q: QueuedSignal) => Promise<void>, policy = DEFAULT_CONTROL_POLICY) {
  const control = controlMachine.provide({ actors: { deliverSignal: fromPromise<void, QueuedSignal>(({ input }) => handler(input)) } })
  const parent = setup({
    types: { context: {} as { reports: ControlReport[] }, events: {} as ControlReport | { type: 'enqueue'; id: string | null; seq: number } },
    actors: { control },
  }).createMachine({
    context: { reports: [] },
    invoke: { id: 'c', src: 'control', input: { policy } },
    on: {
      enqueue: {
        actions: sendTo('c', ({ event }) => {
          const e = event as { id: string | null; seq: number }
          return { type: 'control.enqueue' as const, signal: { correlationId: e.id }, sequence: e.seq, epoch: 1 }
        }),
      },
      'control.*': { actions: assign({ reports: ({ context, event }) => [...context.reports, event as ControlReport] }) },
    },
  })
  const actor = createActor(parent).start()
  return {
    actor,
    enqueue: (seq: number, id: string | null = null) => actor.send({ type: 'enqueue', id, seq }),
    idle: () => waitFor(actor.getSnapshot().children.c!, (s) => s.matches('idle') && s.context.queue.length === 0, { timeout: 2000 }),
    reports: () => actor.getSnapshot().context.reports,
  }
}

describe('control delivery chart', () => {
  it('delivers one at a time, in arrival order, even when the handler is slow', async () => {
    const delivered: number[] = []
    let running = 0
    let maxRunning = 0
    const gates: Array<() => void> = []
    const h = harness(async (q) => {
      running++
      maxRunning = Math.max(maxRunning, running)
      await new Promise<void>((resolve) => gates.push(resolve))
      delivered.push(q.sequence)
      running--
    })
    for (let i = 1; i <= 5; i++) h.enqueue(i)
    while (delivered.length < 5) {
      await Promise.resolve()
      gates.shift()?.()
      await new Promise<void>((r) => setImmediate(r))
    }
    await h.idle()
    expect(delivered).toEqual([1, 2, 3, 4, 5])
    expect(maxRunning).toBe(1)
    h.actor.stop()
  })

  it('delivers a repeated correlation id once and reports the duplicate', async () => {
    const delivered: number[] = []
    const h = harness(async (q) => void delivered.push(q.sequence))
    h.enqueue(1, 'x')
    h.enqueue(2, 'x')
    h.enqueue(3, null)
    h.enqueue(4, null)
    await h.idle()
    expect(delivered).toEqual([1, 3, 4])
    expect(h.reports()).toEqual([{ type: 'control.duplicate', signal: { correlationId: 'x' }, sequence: 2 }])
    h.actor.stop()
  })

  it('a signal arriving while maxQueued wait behind the handler is dropped and reported (overflow), its id not remembered; the rest are delivered in order', async () => {
    const delivered: number[] = []
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const h = harness(async (q) => {
      if (q.sequence === 1) await gate
      delivered.push(q.sequence)
    }, { ...DEFAULT_CONTROL_POLICY, maxQueued: 2 })
    h.enqueue(1, 'a')
    h.enqueue(2, 'b')
    h.enqueue(3, 'c')
    h.enqueue(4, 'd') // 2 and 3 wait behind 1: full
    expect(h.reports()).toEqual([{ type: 'control.dropped', signals: [{ signal: { correlationId: 'd' }, sequence: 4, epoch: 1 }], cause: 'overflow' }])
    expect(h.actor.getSnapshot().children.c!.getSnapshot().context.seen).toEqual(['a', 'b', 'c'])
    release()
    await h.idle()
    h.enqueue(5, 'd') // a resend of the dropped one is delivered
    await h.idle()
    expect(delivered).toEqual([1, 2, 3, 5])
    h.actor.stop()
  })

  it('maxQueued 0 drops every signal that arrives while the handler runs', async () => {
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const h = harness(() => gate, { ...DEFAULT_CONTROL_POLICY, maxQueued: 0 })
    h.enqueue(1)
    h.enqueue(2)
    expect(h.reports()).toMatchObject([{ type: 'control.dropped', signals: [{ sequence: 2 }], cause: 'overflow' }])
    release()
    await h.idle()
    h.actor.stop()
  })

  it('reports a handler that throws and goes on with the next signal', async () => {
    const delivered: number[] = []
    const h = harness(async (q) => {
      if (q.sequence === 1) throw new Error('boom')
      delivered.push(q.sequence)
    })
    h.enqueue(1)
    h.enqueue(2)
    await h.idle()
    expect(delivered).toEqual([2])
    expect(h.reports()).toMatchObject([{ type: 'control.handlerFailed', sequence: 1 }])
    h.actor.stop()
  })
})

describe('control delivery chart details', () => {
  it('an empty correlation id is never deduplicated; a window of 2 forgets the oldest', async () => {
    const delivered: number[] = []
    const duplicates: number[] = []
    const control = controlMachine.provide({
      actors: { deliverSignal: fromPromise<void, QueuedSignal>(async ({ input }) => void delivered.push(input.sequence)) },
      actions: { reportDuplicate: ({ event }) => void duplicates.push((event as { sequence: number }).sequence) },
    })
    const actor = createActor(control, { input: { policy: { ...DEFAULT_CONTROL_POLICY, dedupeWindow: 2 } } }).start()
    const send = (sequence: number, correlationId: string | null) => actor.send({ type: 'control.enqueue', signal: { correlationId }, sequence, epoch: 1 })
    send(1, '')
    send(2, '')
    send(3, 'a')
    send(4, 'b')
    send(5, 'c')
    send(6, 'a') // 'a' left the window of 2
    send(7, 'c') // still in it
    await waitFor(actor, (s) => s.matches('idle') && s.context.queue.length === 0, { timeout: 2000 })
    expect(delivered).toEqual([1, 2, 3, 4, 5, 6])
    expect(duplicates).toEqual([7])
    expect(actor.getSnapshot().context.seen).toEqual(['c', 'a'])
    actor.stop()
  })

  it('a flush drops the waiting signals, reports them and forgets their ids; the one in the handler finishes', async () => {
    const reports: ControlReport[] = []
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const delivered: number[] = []
    const control = controlMachine.provide({
      actors: {
        deliverSignal: fromPromise<void, QueuedSignal>(async ({ input }) => {
          if (input.sequence === 1) await gate
          delivered.push(input.sequence)
        }),
      },
      actions: {
        reportWaitingDropped: ({ context }) => void reports.push({ type: 'control.dropped', signals: context.queue.slice(1), cause: 'stopped' }),
        reportAllDropped: ({ context }) => void reports.push({ type: 'control.dropped', signals: context.queue, cause: 'reset' }),
      },
    })
    const actor = createActor(control, { input: { policy: { ...DEFAULT_CONTROL_POLICY, dedupeWindow: 10 } } }).start()
    actor.send({ type: 'control.enqueue', signal: { correlationId: 'x' }, sequence: 1, epoch: 1 })
    actor.send({ type: 'control.enqueue', signal: { correlationId: 'y' }, sequence: 2, epoch: 1 })
    actor.send({ type: 'control.flush' })
    expect(reports).toEqual([{ type: 'control.dropped', signals: [{ signal: { correlationId: 'y' }, sequence: 2, epoch: 1 }], cause: 'stopped' }])
    expect(actor.getSnapshot().context.seen).toEqual(['x'])
    release()
    await waitFor(actor, (s) => s.matches('idle'), { timeout: 2000 })
    expect(delivered).toEqual([1])
    // A reset while a handler runs abandons it and drops everything.
    let never!: () => void
    const stuck = controlMachine.provide({
      actors: { deliverSignal: fromPromise<void, QueuedSignal>(() => new Promise<void>((resolve) => (never = resolve))) },
      actions: { reportAllDropped: ({ context }) => void reports.push({ type: 'control.dropped', signals: context.queue, cause: 'reset' }) },
    })
    const other = createActor(stuck, { input: { policy: { ...DEFAULT_CONTROL_POLICY, dedupeWindow: 10 } } }).start()
    other.send({ type: 'control.enqueue', signal: { correlationId: 'p' }, sequence: 1, epoch: 1 })
    other.send({ type: 'control.reset' })
    expect(other.getSnapshot().value).toBe('idle')
    expect(other.getSnapshot().context.seen).toEqual([])
    expect(reports.at(-1)).toEqual({ type: 'control.dropped', signals: [{ signal: { correlationId: 'p' }, sequence: 1, epoch: 1 }], cause: 'reset' })
    never()
    other.stop()
    actor.stop()
  })
})

describe('control delivery chart, what each report and guard holds', () => {
  it('signals with no correlation id are never deduplicated and never remembered; with dedupeWindow 0 nothing is', async () => {
    const delivered: number[] = []
    const h = harness(async (q) => void delivered.push(q.sequence))
    h.actor.send({ type: 'enqueue', id: null, seq: 1 })
    // A signal whose correlationId is missing altogether, not null.
    h.actor.getSnapshot().children.c!.send({ type: 'control.enqueue', signal: {}, sequence: 2, epoch: 1 })
    h.actor.getSnapshot().children.c!.send({ type: 'control.enqueue', signal: {}, sequence: 3, epoch: 1 })
    await h.idle()
    expect(delivered).toEqual([1, 2, 3])
    expect(h.actor.getSnapshot().children.c!.getSnapshot().context.seen).toEqual([])
    h.actor.stop()
    const again: number[] = []
    const off = harness(async (q) => void again.push(q.sequence), { ...DEFAULT_CONTROL_POLICY, dedupeWindow: 0 })
    off.enqueue(1, 'x')
    off.enqueue(2, 'x')
    await off.idle()
    expect(again).toEqual([1, 2])
    expect(off.actor.getSnapshot().children.c!.getSnapshot().context.seen).toEqual([])
    expect(off.reports()).toEqual([])
    off.actor.stop()
  })

  it('the real reports of a flush and a reset, with their causes; a flush with nothing waiting reports nothing', async () => {
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const h = harness(async (q) => {
      if (q.sequence === 1) await gate
    })
    const control = () => h.actor.getSnapshot().children.c!
    h.enqueue(1, 'a')
    control().send({ type: 'control.flush' })
    expect(h.reports()).toEqual([])
    h.enqueue(2, 'b')
    h.enqueue(3, 'c')
    control().send({ type: 'control.flush' })
    expect(h.reports()).toEqual([
      { type: 'control.dropped', cause: 'stopped', signals: [{ signal: { correlationId: 'b' }, sequence: 2, epoch: 1 }, { signal: { correlationId: 'c' }, sequence: 3, epoch: 1 }] },
    ])
    expect(control().getSnapshot().context.seen).toEqual(['a'])
    h.enqueue(4, 'd')
    control().send({ type: 'control.reset' })
    expect(h.reports().at(-1)).toEqual({
      type: 'control.dropped',
      cause: 'reset',
      signals: [{ signal: { correlationId: 'a' }, sequence: 1, epoch: 1 }, { signal: { correlationId: 'd' }, sequence: 4, epoch: 1 }],
    })
    expect(control().getSnapshot().context.seen).toEqual([])
    release()
    h.actor.stop()
  })

  it('a failed handler is reported with its signal, sequence and error; a duplicate with its signal and sequence', async () => {
    const failure = new Error('handler broke')
    const h = harness(async (q) => {
      if (q.sequence === 7) throw failure
    })
    h.enqueue(7, 'k')
    await h.idle()
    h.enqueue(8, 'k')
    expect(h.reports()).toEqual([
      { type: 'control.handlerFailed', signal: { correlationId: 'k' }, sequence: 7, error: failure },
      { type: 'control.duplicate', signal: { correlationId: 'k' }, sequence: 8 },
    ])
    h.actor.stop()
  })

  it('without a deliverSignal provided, each signal fails with an error that says so', async () => {
    const reports: ControlReport[] = []
    const parent = setup({ actors: { control: controlMachine } }).createMachine({
      invoke: { id: 'c', src: 'control', input: { policy: DEFAULT_CONTROL_POLICY } },
      on: { 'control.*': { actions: ({ event }) => void reports.push(event as ControlReport) } },
    })
    const actor = createActor(parent).start()
    actor.getSnapshot().children.c!.send({ type: 'control.enqueue', signal: { correlationId: 'z' }, sequence: 1, epoch: 1 })
    await waitFor(actor.getSnapshot().children.c!, (s) => s.matches('idle') && s.context.queue.length === 0, { timeout: 2000 })
    expect(reports).toHaveLength(1)
    expect((reports[0] as { error: Error }).error.message).toBe('deliverSignal must be provided (machine.provide) by the link')
    actor.stop()
  })
})

