/** The link's event emitter: order, once, and iterators that leave nothing registered when they end. */
import { describe, expect, it } from 'vitest'
import { Emitter, settleReported } from '../../src/emitter.js'

type Events = { a: { n: number }; b: { n: number } }

describe('Emitter', () => {
  it('an iterator ended by return(), by its signal or by `until` removes its listener', async () => {
    const e = new Emitter<Events>(() => {})
    const broken = e.iterate()
    const controller = new AbortController()
    const aborted = e.iterate({ signal: controller.signal })
    const until = e.iterate({ until: (ev) => ev.type === 'b' })
    expect(e.listenerCount()).toBe(3)
    await broken.return!()
    controller.abort()
    e.emit('b', { n: 1 })
    await Promise.resolve()
    expect(await until.next()).toEqual({ value: { type: 'b', n: 1 }, done: false })
    expect(await until.next()).toEqual({ value: undefined, done: true })
    expect(await aborted.next()).toEqual({ value: undefined, done: true })
    expect(e.listenerCount()).toBe(0)
  })

  it('an abort ends an iterator at once: events buffered and not read are dropped (return() drops them too; `until` keeps them readable)', async () => {
    const e = new Emitter<Events>(() => {})
    const controller = new AbortController()
    const aborted = e.iterate({ signal: controller.signal })
    e.emit('a', { n: 1 })
    e.emit('a', { n: 2 })
    controller.abort()
    e.emit('a', { n: 3 })
    expect(await aborted.next()).toEqual({ value: undefined, done: true })
    expect(e.listenerCount()).toBe(0)
  })

  it('once() and an unsubscribe leave nothing registered; every listener sees every event in order', async () => {
    const e = new Emitter<Events>(() => {})
    const seen: string[] = []
    e.once('a', (p) => seen.push(`once ${p.n}`))
    const off = e.on('a', (p) => seen.push(`on ${p.n}`))
    e.emit('a', { n: 1 })
    e.emit('a', { n: 2 })
    await Promise.resolve()
    off()
    expect(seen).toEqual(['once 1', 'on 1', 'on 2'])
    expect(e.listenerCount()).toBe(0)
  })

  it('listeners form a set per type, as addEventListener keeps them: a function registered again (by on() or once()) stays as it was; one off() removes it; off() of an unknown type or listener does nothing', async () => {
    const e = new Emitter<Events>(() => {})
    const seen: string[] = []
    const f = (p: { n: number }) => seen.push(`f ${p.n}`)
    const g = (p: { n: number }) => seen.push(`g ${p.n}`)
    const h = (p: { n: number }) => seen.push(`h ${p.n}`)
    e.once('a', f)
    e.off('a', f)
    expect(e.listenerCount()).toBe(0)
    // f plainly, then again as a once (stays plain); g twice as a once (called once); h plainly, then removed.
    e.on('a', f)
    e.once('a', f)
    e.once('a', g)
    e.once('a', g)
    const offH = e.on('a', h)
    e.on('a', h)
    expect(e.listenerCount()).toBe(3)
    offH()
    e.off('b', f)
    e.off('a', () => {})
    expect(e.listenerCount()).toBe(2)
    e.emit('a', { n: 1 })
    e.emit('a', { n: 2 })
    await Promise.resolve()
    expect(seen).toEqual(['f 1', 'g 1', 'f 2'])
    e.off('a', f)
    expect(e.listenerCount()).toBe(0)
  })

  it('a listener added while an event is delivered, for its type or for every event (an iterator too), hears the next event, not that one', async () => {
    const e = new Emitter<Events>(() => {})
    const seen: string[] = []
    let iterator: AsyncIterableIterator<{ type: string }> | null = null
    e.on('a', (p) => {
      seen.push(`first ${p.n}`)
      if (p.n !== 1) return
      e.on('a', (q) => seen.push(`typed ${q.n}`))
      e.onAny((q) => seen.push(`any ${q.type}`))
      iterator = e.iterate()
    })
    e.emit('a', { n: 1 })
    e.emit('a', { n: 2 })
    await Promise.resolve()
    expect(seen).toEqual(['first 1', 'first 2', 'typed 2', 'any a'])
    const first = await iterator!.next()
    expect(first).toEqual({ value: { type: 'a', n: 2 }, done: false })
    await iterator!.return!()
  })

  it('a throwing listener is reported and the others still run', async () => {
    const errors: unknown[] = []
    const e = new Emitter<Events>((error) => errors.push(error))
    const seen: number[] = []
    e.on('a', () => {
      throw new Error('listener bug')
    })
    e.on('a', (p) => seen.push(p.n))
    e.emit('a', { n: 7 })
    await Promise.resolve()
    expect(seen).toEqual([7])
    expect(errors).toHaveLength(1)
  })

  it('a listener removed while an event is delivered (by one before it) is not called for it; one added meanwhile hears the next', async () => {
    const e = new Emitter<Events>(() => {})
    const seen: string[] = []
    const b = (p: { n: number }) => void seen.push(`b ${p.n}`)
    const c = (p: { n: number }) => void seen.push(`c ${p.n}`)
    e.on('a', (p) => {
      seen.push(`a ${p.n}`)
      if (p.n === 1) {
        e.off('a', b)
        e.on('a', c)
      }
    })
    e.on('a', b)
    const offAny = e.onAny(() => void seen.push('any'))
    e.onAny(() => offAny())
    e.emit('a', { n: 1 })
    e.emit('a', { n: 2 })
    await Promise.resolve()
    expect(seen).toEqual(['a 1', 'any', 'a 2', 'c 2'])
  })

  it("an async listener's rejection is reported as a throw is, and escapes nowhere", async () => {
    const errors: unknown[] = []
    let reportedOne!: () => void
    const reported = new Promise<void>((resolve) => (reportedOne = resolve))
    const e = new Emitter<Events>((error) => {
      errors.push(error)
      reportedOne()
    })
    e.on('a', async () => {
      await Promise.resolve()
      throw new Error('async listener bug')
    })
    e.emit('a', { n: 1 })
    await reported
    expect(errors).toEqual([new Error('async listener bug')])
  })

  it('concurrent next() calls on an iterator are answered in order, each with its own event, and all end on return()', async () => {
    const e = new Emitter<Events>(() => {})
    const it = e.iterate()
    const first = it.next()
    const second = it.next()
    const third = it.next()
    e.emit('a', { n: 1 })
    e.emit('b', { n: 2 })
    expect(await first).toEqual({ value: { type: 'a', n: 1 }, done: false })
    expect(await second).toEqual({ value: { type: 'b', n: 2 }, done: false })
    await it.return!()
    expect(await third).toEqual({ value: undefined, done: true })
    const until = e.iterate({ until: (event) => event.type === 'a' })
    const [one, two] = [until.next(), until.next()]
    e.emit('a', { n: 3 })
    expect(await one).toEqual({ value: { type: 'a', n: 3 }, done: false })
    expect(await two).toEqual({ value: undefined, done: true })
    expect(e.listenerCount()).toBe(0)
  })

  it('off() on an emitter that never had a listener does nothing', () => {
    const e = new Emitter<Events>(() => {})
    expect(() => e.off('a', () => {})).not.toThrow()
    expect(e.listenerCount()).toBe(0)
  })

  it('a catch-all listener removed by an earlier one while an event is delivered is not called for it', async () => {
    const e = new Emitter<Events>(() => {})
    const seen: string[] = []
    let offSecond = () => {}
    e.onAny((ev) => {
      seen.push(`first ${ev.n}`)
      offSecond()
    })
    offSecond = e.onAny((ev) => void seen.push(`second ${ev.n}`))
    e.emit('a', { n: 1 })
    await Promise.resolve()
    expect(seen).toEqual(['first 1'])
  })

  it('a listener returning null, a number, an object without then or an object whose then is not a function is not an error', async () => {
    const errors: unknown[] = []
    const e = new Emitter<Events>((error) => errors.push(error))
    for (const value of [null, 7, {}, { then: 'later' }]) e.on('a', () => value as never)
    e.emit('a', { n: 1 })
    await new Promise((resolve) => setImmediate(resolve))
    expect(errors).toEqual([])
  })

  it("settleReported reports the rejection of any thenable, a function with a then included, and a then that throws as it is read or called", async () => {
    const reported: unknown[] = []
    const report = (error: unknown) => void reported.push(error)
    const thenableFunction = Object.assign(() => {}, { then: (_ok: unknown, fail: (error: unknown) => void) => fail(new Error('function thenable')) })
    settleReported(thenableFunction, report)
    settleReported(
      Object.defineProperty({}, 'then', {
        get() {
          throw new Error('then getter')
        },
      }),
      report,
    )
    settleReported(
      {
        then() {
          throw new Error('then call')
        },
      },
      report,
    )
    settleReported(Promise.reject(new Error('rejected')), report)
    for (const value of [undefined, null, 0, 'text', {}, { then: 1 }, () => {}]) settleReported(value, report)
    await new Promise((resolve) => setImmediate(resolve))
    expect(reported).toEqual([new Error('function thenable'), new Error('then getter'), new Error('then call'), new Error('rejected')])
  })
})

describe('Emitter registrations', () => {
  it("the function once() returned, called after its listener ran, leaves a later registration of the same function alone; a once listener removed and registered again during an event hears the next event, not that one", async () => {
    const e = new Emitter<Events>(() => {})
    const seen: number[] = []
    const f = (p: { n: number }) => seen.push(p.n)
    const offOnce = e.once('a', f)
    e.emit('a', { n: 1 })
    await Promise.resolve()
    e.on('a', f)
    offOnce()
    e.emit('a', { n: 2 })
    await Promise.resolve()
    expect(seen).toEqual([1, 2])
    e.off('a', f)
    const g = (p: { n: number }) => seen.push(p.n * 10)
    e.on('a', (p) => {
      if (p.n !== 3) return
      e.off('a', g)
      e.once('a', g)
    })
    e.once('a', g)
    e.emit('a', { n: 3 })
    e.emit('a', { n: 4 })
    await Promise.resolve()
    // g's registration was replaced while event 3 was delivered: it hears 4, once.
    expect(seen).toEqual([1, 2, 40])
  })
})
