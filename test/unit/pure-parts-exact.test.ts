/**
 * The library's small pure parts, exactly: the emitter's counts, draining and iterators; the
 * logger wrapper's routing and what redact() copies or keeps; the run supervisor's bounds and
 * reports; the presence tracker's counts, flush and ignored reports.
 */
import { getEventListeners } from 'node:events'
import { describe, expect, it } from 'vitest'
import { Emitter } from '../../src/emitter.js'
import { redact, redacting } from '../../src/logger.js'
import { RunSupervisor, type AgentAborted } from '../../src/runs.js'
import { PresenceTracker, type PresenceCrossing } from '../../src/node/server/presence.js'
import { thrownText } from '../../machines/types.js'
import { onAbort } from '../../src/abort.js'
import { decodeTextFrame } from '../../src/protocol.js'
import { classifyClose } from '../../src/reasons.js'

type Events = { a: { n: number }; b: { n: number } }
const turn = () => new Promise<void>((resolve) => setImmediate(resolve))

describe('Emitter, exactly', () => {
  it('counts typed and catch-all listeners together', () => {
    const e = new Emitter<Events>(() => {})
    e.on('a', () => {})
    e.on('a', () => {})
    e.on('b', () => {})
    e.onAny(() => {})
    expect(e.listenerCount()).toBe(4)
  })

  it('delivers events emitted after a drain, and events a listener emits after the current one', async () => {
    const e = new Emitter<Events>(() => {})
    const seen: string[] = []
    e.on('a', (p) => {
      seen.push(`a${p.n}`)
      if (p.n === 1) e.emit('b', { n: 2 })
    })
    e.on('b', (p) => void seen.push(`b${p.n}`))
    e.emit('a', { n: 1 })
    e.emit('a', { n: 3 })
    await turn()
    expect(seen).toEqual(['a1', 'a3', 'b2'])
    e.emit('a', { n: 4 })
    await turn()
    expect(seen).toEqual(['a1', 'a3', 'b2', 'a4'])
  })

  it('an iterator waits for the next event, buffers the ones it has not asked for yet, and works with for await', async () => {
    const errors: unknown[] = []
    const e = new Emitter<Events>((error) => errors.push(error))
    const it = e.iterate()
    const first = it.next()
    e.emit('a', { n: 1 })
    expect(await first).toEqual({ value: { type: 'a', n: 1 }, done: false })
    e.emit('a', { n: 2 })
    e.emit('b', { n: 3 })
    await turn()
    expect(await it.next()).toEqual({ value: { type: 'a', n: 2 }, done: false })
    expect(await it.next()).toEqual({ value: { type: 'b', n: 3 }, done: false })
    expect(await it.return!()).toEqual({ value: undefined, done: true })
    expect(await it.next()).toEqual({ value: undefined, done: true })
    const collected: number[] = []
    const loop = (async () => {
      for await (const event of e.iterate({ until: (ev) => ev.type === 'b' })) collected.push(event.n)
    })()
    e.emit('a', { n: 4 })
    e.emit('b', { n: 5 })
    await loop
    expect(collected).toEqual([4, 5])
    expect(errors).toEqual([])
    expect(e.listenerCount()).toBe(0)
  })

  it('an iterator with an already aborted signal, or aborted while it waits, ends; with until and no signal it reports no error', async () => {
    const errors: unknown[] = []
    const e = new Emitter<Events>((error) => errors.push(error))
    expect(await e.iterate({ signal: AbortSignal.abort() }).next()).toEqual({ value: undefined, done: true })
    const controller = new AbortController()
    const waiting = e.iterate({ signal: controller.signal }).next()
    controller.abort()
    expect(await waiting).toEqual({ value: undefined, done: true })
    const once = e.iterate({ until: () => true })
    e.emit('a', { n: 1 })
    await turn()
    expect(await once.next()).toEqual({ value: { type: 'a', n: 1 }, done: false })
    expect(await once.next()).toEqual({ value: undefined, done: true })
    expect(errors).toEqual([])
    expect(e.listenerCount()).toBe(0)
  })
})

describe('redacting() and redact(), exactly', () => {
  it('routes each level to the same method of the host logger, redacted, with no fields argument when there are none', () => {
    const calls: unknown[][] = []
    const host = {
      debug: (...a: unknown[]) => void calls.push(['debug', ...a]),
      info: (...a: unknown[]) => void calls.push(['info', ...a]),
      warn: (...a: unknown[]) => void calls.push(['warn', ...a]),
      error: (...a: unknown[]) => void calls.push(['error', ...a]),
    }
    const log = redacting(host, 'sk-secret-123')
    log.debug('d sk-secret-123')
    log.info('i', { k: 'sk-secret-123' })
    log.warn('w')
    log.error('e')
    expect(calls).toEqual([['debug', 'd [redacted]'], ['info', { k: '[redacted]' }, 'i'], ['warn', 'w'], ['error', 'e']])
  })

  it('reads the keys at every line when given a function; a missing logger or level is a no-op', () => {
    const keys: string[] = []
    const lines: string[] = []
    const log = redacting({ info: (m: string) => void lines.push(m) }, () => keys)
    log.info('key-0000-1111')
    keys.push('key-0000-1111')
    log.info('key-0000-1111')
    expect(lines).toEqual(['key-0000-1111', '[redacted]'])
    expect(() => log.warn('no warn method')).not.toThrow()
    expect(() => redacting(undefined, 'k').error('no logger')).not.toThrow()
  })

  it('returns the same value when nothing holds a key; copies plain objects, null-prototype objects and arrays, not class instances; redacts Error messages', () => {
    const key = 'key-0000-1111'
    const untouched = { a: 'nothing here', b: [1, 'x'] }
    expect(redact(untouched, key)).toBe(untouched)
    class Holder {
      constructor(readonly secret: string) {}
    }
    const instance = new Holder(key)
    const bare = Object.assign(Object.create(null) as Record<string, unknown>, { k: key })
    const out = redact({ instance, bare, list: [key, 2], error: new TypeError(`bad ${key}`), n: null, count: 3 }, key)
    expect(out.instance).toBe(instance)
    expect(Object.getPrototypeOf(out.bare)).toBeNull()
    expect(out.bare.k).toBe('[redacted]')
    expect(out.list).toEqual(['[redacted]', 2])
    expect(out.error).toBeInstanceOf(Error)
    expect(out.error.message).toBe('bad [redacted]')
    expect(out.error.name).toBe('TypeError')
    expect(out.n).toBeNull()
    expect(out.count).toBe(3)
    const plainError = new Error('no key')
    expect(redact({ plainError, k: key }, key).plainError).toBe(plainError)
    expect(redact(new Error(`x ${key}`), key).message).toBe('x [redacted]')
    expect(redact(new Error('x'), [key, ''])).toBeInstanceOf(Error)
  })

  it('keeps cycles and shared objects as they were', () => {
    const key = 'key-0000-1111'
    const shared = { k: key }
    const root: Record<string, unknown> = { a: shared, b: shared }
    root.self = root
    const out = redact(root, key)
    expect(out.self).toBe(out)
    expect(out.a).toBe(out.b)
    expect(out.a).toEqual({ k: '[redacted]' })
  })

  it('a key of exactly 8 characters (SHORT_KEY) is redacted in identifier fields; one of 7 only when it fills the field whole; free text always', () => {
    expect(redact({ kind: 'abcdefgh', detail: 'abcdefgh' }, 'abcdefgh')).toEqual({ kind: '[redacted]', detail: '[redacted]' })
    expect(redact({ kind: 'abcdefg', detail: 'abcdefg' }, 'abcdefg')).toEqual({ kind: '[redacted]', detail: '[redacted]' })
    expect(redact({ kind: 'abcdefg-x', detail: 'abcdefg-x' }, 'abcdefg')).toEqual({ kind: 'abcdefg-x', detail: '[redacted]-x' })
    // An identifier field holding what is not an identifier (a number, free text) is redacted as any value.
    expect(redact({ state: 'abcdefg is here!', type: 7 }, 'abcdefg')).toEqual({ state: '[redacted] is here!', type: 7 })
  })

  it('the percent-, form- and JSON-encoded forms of a key are each redacted on their own', () => {
    const key = 'a b+c/d"e\\f-0123'
    expect(redact(`p=${encodeURIComponent(key)}`, key)).toBe('p=[redacted]')
    expect(redact(`f=${new URLSearchParams({ k: key }).toString().slice(2)}`, key)).toBe('f=[redacted]')
    expect(redact(`j=${JSON.stringify(key)}`, key)).toBe('j="[redacted]"')
    expect(redact(`jj=${JSON.stringify(JSON.stringify(key))}`, key)).toBe('jj="\\"[redacted]\\""')
  })
})

describe('RunSupervisor, exactly', () => {
  it('accepts hook bounds 0 and 2^31-1, refuses -1, 2^31 and fractions', () => {
    expect(() => new RunSupervisor({ hookTimeoutMs: 0 })).not.toThrow()
    expect(() => new RunSupervisor({ hookTimeoutMs: 2 ** 31 - 1 })).not.toThrow()
    for (const bad of [-1, 2 ** 31, 1.5]) {
      expect(() => new RunSupervisor({ hookTimeoutMs: bad })).toThrow(new RangeError(`hookTimeoutMs must be a whole number of milliseconds in [0, 2^31-1], got ${bad}`))
    }
  })

  it('stamps reports with the wall clock by default; an unsubscribed listener hears nothing more; an abort with no reason says why', async () => {
    const runs = new RunSupervisor()
    const heard: AgentAborted[] = []
    const off = runs.onAborted((r) => void heard.push(r))
    const before = Date.now()
    const [report] = await runs.abortPrincipal('p', null)
    expect(report).toMatchObject({ type: 'agent-aborted', outcome: 'nothing-to-abort', reason: null })
    expect(report!.at).toBeGreaterThanOrEqual(before)
    expect(report!.at).toBeLessThanOrEqual(Date.now())
    off()
    const signal = runs.startRun('p', 'r1')
    await runs.abortPrincipal('p', null)
    expect(heard).toHaveLength(1)
    expect((signal.reason as Error).message).toBe('the principal has no connection left')
  })

  it('a principal whose last run ended is forgotten; one with runs left is not', async () => {
    const runs = new RunSupervisor({ now: () => 1 })
    runs.startRun('p', 'a')
    runs.startRun('p', 'b')
    runs.startRun('q', 'c')
    runs.endRun('p', 'a')
    expect(runs.inFlight('p')).toEqual(['b'])
    expect(runs.principals()).toEqual(['p', 'q'])
    runs.endRun('p', 'b')
    runs.endRun('p', 'b')
    runs.endRun('nobody', 'x')
    expect(runs.inFlight('p')).toEqual([])
    expect(runs.principals()).toEqual(['q'])
    await runs.abortPrincipal('q', null)
    expect(runs.principals()).toEqual([])
    expect(await runs.abortPrincipal('p', null)).toEqual([{ type: 'agent-aborted', principal: 'p', runId: null, outcome: 'nothing-to-abort', reason: null, error: null, at: 1 }])
    // A run id may be used again once it ended.
    expect(() => runs.startRun('p', 'a')).not.toThrow()
  })
})

describe('PresenceTracker, exactly', () => {
  const reason = classifyClose({ code: 1000, reason: '' }, 0, 0)

  it('counts live connections per principal; flush ends every grace window at once; stop stops every chart', async () => {
    const crossings: PresenceCrossing[] = []
    const tracker = new PresenceTracker((c) => void crossings.push(c), { graceWindowMs: 60_000 })
    tracker.opened('p', 'c1', 1)
    tracker.opened('p', 'c2', 2)
    expect(tracker.count('p')).toBe(2)
    expect(tracker.count('nobody')).toBe(0)
    tracker.closed('p', 'c1', reason, 3)
    tracker.closed('p', 'c2', reason, 4)
    expect(tracker.count('p')).toBe(0)
    // Inside its grace window the principal is still tracked, and not yet reported gone.
    expect(tracker.tracked).toBe(1)
    expect(crossings.map((c) => c.kind)).toEqual(['first-connected'])
    tracker.flush()
    expect(crossings.map((c) => c.kind)).toEqual(['first-connected', 'last-disconnected'])
    await Promise.resolve()
    expect(tracker.tracked).toBe(0)
    tracker.opened('q', 'c3', 5)
    tracker.stop()
    expect(tracker.tracked).toBe(0)
  })

  it('reports a close of an unknown connection as ignored, naming it; a principal that comes back inside the grace window is kept', async () => {
    const ignored: string[] = []
    const crossings: PresenceCrossing[] = []
    const tracker = new PresenceTracker((c) => void crossings.push(c), { graceWindowMs: 0 }, (what) => void ignored.push(what))
    tracker.opened('p', 'c1', 1)
    tracker.closed('p', 'nope', reason, 2)
    expect(ignored).toEqual(['presence.closed of unknown connection nope (p)'])
    tracker.closed('p', 'c1', reason, 3)
    // Back before the forgetting microtask runs: its chart is the one kept.
    tracker.opened('p', 'c2', 4)
    await Promise.resolve()
    expect(tracker.tracked).toBe(1)
    expect(tracker.count('p')).toBe(1)
    tracker.stop()
  })
})

describe('the last survivors of the unit mutation run', () => {
  it('an iterator ended by return() or by until leaves no listener on the host\'s AbortSignal', async () => {
    const e = new Emitter<Events>(() => {})
    // A signal each: waits on one signal share one listener (src/abort.ts onAbort).
    const first = new AbortController().signal
    const second = new AbortController().signal
    const returned = e.iterate({ signal: first })
    const until = e.iterate({ signal: second, until: () => true })
    expect(getEventListeners(first, 'abort')).toHaveLength(1)
    expect(getEventListeners(second, 'abort')).toHaveLength(1)
    await returned.return!()
    expect(getEventListeners(first, 'abort')).toHaveLength(0)
    expect(getEventListeners(second, 'abort')).toHaveLength(1)
    e.emit('a', { n: 1 })
    await turn()
    expect(getEventListeners(second, 'abort')).toHaveLength(0)
    expect(await until.next()).toEqual({ value: { type: 'a', n: 1 }, done: false })
  })

  it('redact: matches of two keys in the text in the other order; an empty array; an identifier field holding a boolean; a value with an Error or a class instance and no key is returned as it is', () => {
    const a = 'key-aaaa-0000'
    const b = 'key-bbbb-1111'
    expect(redact(`${b} then ${a}`, [a, b])).toBe('[redacted] then [redacted]')
    expect(redact({ list: [], k: a }, a)).toEqual({ list: [], k: '[redacted]' })
    expect(redact({ kind: true, detail: a }, a)).toEqual({ kind: true, detail: '[redacted]' })
    class Holder {
      constructor(readonly secret: string) {}
    }
    const withError = { e: new Error('nothing secret') }
    expect(redact(withError, a)).toBe(withError)
    const withInstance = { h: new Holder(a) }
    expect(redact(withInstance, a)).toBe(withInstance)
    expect(redact('value undefined here', a)).toBe('value undefined here')
  })

  it('redact: a key shorter than SHORT_KEY is redacted only whole, in every form; one of 8 or more by runs of its encoded form too', () => {
    // 7 characters, percent-encoded to 13: 8 of them are not the key.
    expect(redact('a%20b%20c%20x', 'a b c d')).toBe('a%20b%20c%20x')
    expect(redact('a%20b%20c%20d', 'a b c d')).toBe('[redacted]')
    // 8 characters, percent-encoded to 14: a run of 8 or more of the encoded form counts.
    expect(redact('a%20b%20c%20xx', 'a b c de')).toBe('[redacted]xx')
  })

  it('a not-JSON position of two digits or more is kept whole', () => {
    const frame = `[1,2,3,4,5,6,7,8,9,10,11,12 13]`
    expect(decodeTextFrame(frame)).toMatchObject({ ok: false, problem: { detail: 'not JSON: a syntax error at position 28' } })
  })

  it('an aborted run is reported with its type', async () => {
    const runs = new RunSupervisor({ now: () => 2 })
    runs.startRun('p', 'r')
    const [report] = await runs.abortPrincipal('p', null)
    expect(report).toEqual({ type: 'agent-aborted', principal: 'p', runId: 'r', outcome: 'aborted', reason: null, error: null, at: 2 })
  })

  it('a principal whose connections open and close on different turns is forgotten; a chart replaced before the forgetting runs is kept', async () => {
    const reason = classifyClose({ code: 1000, reason: '' }, 0, 0)
    const tracker = new PresenceTracker(() => {})
    tracker.opened('p', 'c1', 1)
    await turn()
    tracker.closed('p', 'c1', reason, 2)
    await turn()
    expect(tracker.tracked).toBe(0)
    tracker.opened('q', 'c1', 3)
    tracker.closed('q', 'c1', reason, 4)
    // Stopped and tracked afresh before the forgetting of the old chart runs: the new one stays.
    tracker.stop()
    tracker.opened('q', 'c2', 5)
    await turn()
    expect(tracker.tracked).toBe(1)
    expect(tracker.count('q')).toBe(1)
    tracker.stop()
  })
})


describe('thrownText, exactly', () => {
  it("gives a thrown value's message, else its String(), and never throws itself", () => {
    expect(thrownText(new Error('boom'))).toBe('boom')
    expect(thrownText({ message: 'plain' })).toBe('plain')
    expect(thrownText({ message: 7 })).toBe('[object Object]')
    expect(thrownText('text')).toBe('text')
    expect(thrownText(null)).toBe('null')
    expect(thrownText(undefined)).toBe('undefined')
    expect(thrownText(Symbol('s'))).toBe('Symbol(s)')
    expect(thrownText(Object.create(null))).toBe('an unprintable object')
    const getterThrows = Object.defineProperty({}, 'message', {
      get() {
        throw new Error('getter')
      },
    })
    expect(thrownText(getterThrows)).toBe('[object Object]')
    expect(thrownText({ toString: () => { throw new Error('toString') } })).toBe('an unprintable object')
  })
})

describe('onAbort, exactly', () => {
  it('one listener per signal for every wait; in order; a callback removed by an earlier one is not called; the last removal removes the listener', () => {
    const controller = new AbortController()
    const { signal } = controller
    const calls: string[] = []
    const offA = onAbort(signal, () => {
      calls.push('a')
      offC()
    })
    const offB = onAbort(signal, () => calls.push('b'))
    const offC = onAbort(signal, () => calls.push('c'))
    expect(getEventListeners(signal, 'abort')).toHaveLength(1)
    offB()
    expect(getEventListeners(signal, 'abort')).toHaveLength(1)
    controller.abort()
    expect(calls).toEqual(['a'])
    expect(getEventListeners(signal, 'abort')).toHaveLength(0)
    offA() // after the abort: nothing to remove, nothing thrown

    const quiet = new AbortController().signal
    const off1 = onAbort(quiet, () => {})
    const off2 = onAbort(quiet, () => {})
    off1()
    off2()
    off2()
    expect(getEventListeners(quiet, 'abort')).toHaveLength(0)
    const again: string[] = []
    onAbort(quiet, () => again.push('again'))
    expect(getEventListeners(quiet, 'abort')).toHaveLength(1)

    // An aborted signal is not watched (no listener that could never fire); a non-signal is refused.
    onAbort(signal, () => calls.push('late'))
    expect(getEventListeners(signal, 'abort')).toHaveLength(0)
    expect(() => onAbort('stop' as unknown as AbortSignal, () => {})).toThrow(new TypeError('signal must be an AbortSignal, got string'))
  })
})
