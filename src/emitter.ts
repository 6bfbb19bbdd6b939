/**
 * The link's typed event emitter. Listeners run outside the chart's processing: events are
 * queued and delivered in order on a microtask, so a listener that calls connect() or
 * disconnect() sees a chart at rest, never one mid-transition with earlier commands still queued.
 * Listener errors are caught and reported, never thrown into the link: a throw, and the rejection
 * of a promise a listener returns (an `async` listener), alike.
 */
import { onAbort } from './abort.js'

/** Removes the listener it was returned for. */
export type Unsubscribe = () => void

type Tagged<Events> = { [K in keyof Events]: { type: K } & Events[K] }[keyof Events]

/** One registration of a listener for a type: whether it was made by once(). Compared by identity. */
interface Registration {
  readonly once: boolean
}

/** A typed emitter over an event map `{ name: payload }`, delivering asynchronously and in order. */
export class Emitter<Events extends { [K in keyof Events]: object }> {
  // Made on first use: an emitter nobody listens to holds no map, set or queue. Each type's
  // listeners map to whether they were registered with once(): a function is registered at most
  // once per type, as the DOM's addEventListener keeps its listeners.
  private listeners: Map<keyof Events, Map<(payload: never) => void, Registration>> | null = null
  private anyListeners: Set<(event: Tagged<Events>) => void> | null = null
  private queue: Array<Tagged<Events>> | null = null
  private draining = false

  constructor(private readonly onListenerError: (error: unknown, type: keyof Events) => void) {}

  /**
   * Calls `listener` for each `type` event until the returned function is called. A listener
   * already registered for `type` (by on() or once()) stays as it is: the call adds nothing.
   */
  on<K extends keyof Events>(type: K, listener: (payload: Events[K]) => void): Unsubscribe {
    return this.add(type, listener, false)
  }

  /**
   * Calls `listener` once, for the next `type` event. A listener already registered for `type`
   * stays as it is (one registered by on() is not made a once). {@link off}, or the returned
   * function, removes it.
   */
  once<K extends keyof Events>(type: K, listener: (payload: Events[K]) => void): Unsubscribe {
    return this.add(type, listener, true)
  }

  private add<K extends keyof Events>(type: K, listener: (payload: Events[K]) => void, once: boolean): Unsubscribe {
    const listeners = (this.listeners ??= new Map())
    let registered = listeners.get(type)
    if (!registered) listeners.set(type, (registered = new Map()))
    const fn = listener as (payload: never) => void
    const registration = registered.get(fn) ?? { once }
    registered.set(fn, registration)
    // Removes this registration only: called after a once() listener ran (its registration gone),
    // it leaves a later registration of the same function alone.
    return () => {
      const now = this.listeners?.get(type)
      if (now !== undefined && now.get(fn) === registration) now.delete(fn)
    }
  }

  /** Removes `listener` of `type`, added with on() or once(). Does nothing when it is not registered. */
  off<K extends keyof Events>(type: K, listener: (payload: Events[K]) => void): void {
    this.listeners?.get(type)?.delete(listener as (payload: never) => void)
  }

  /** Calls `listener` for every event, as `{ type, ...payload }`. */
  onAny(listener: (event: Tagged<Events>) => void): Unsubscribe {
    ;(this.anyListeners ??= new Set()).add(listener)
    return () => this.anyListeners!.delete(listener)
  }

  /** Listeners registered now (by type and for every event), iterators included: 0 once every one was removed. */
  listenerCount(): number {
    let n = this.anyListeners?.size ?? 0
    for (const set of this.listeners?.values() ?? []) n += set.size
    return n
  }

  /** Queues an event; listeners get it on a microtask, after every event queued before it. */
  emit<K extends keyof Events>(type: K, payload: Events[K]): void {
    ;(this.queue ??= []).push({ type, ...payload } as Tagged<Events>)
    if (!this.draining) {
      this.draining = true
      queueMicrotask(() => this.drain())
    }
  }

  private drain(): void {
    // Events emitted by listeners join the end of the queue: every listener sees every event in order.
    const queue = this.queue!
    for (let event = queue.shift(); event; event = queue.shift()) {
      // Over copies taken before any listener runs: a listener added meanwhile (for this type or
      // for every event, an events() iterator too) hears the next event; one removed meanwhile (by
      // a listener before it) is not called.
      const registered = this.listeners?.get(event.type)
      const typed = registered === undefined || registered.size === 0 ? null : [...registered]
      const any = this.anyListeners
      const every = any === null || any.size === 0 ? null : [...any]
      if (typed !== null) {
        for (const [listener, registration] of typed) {
          // The registration the copy was taken with: one removed meanwhile, and one made again
          // meanwhile (a new registration of the same function), do not hear this event.
          if (registered!.get(listener) !== registration) continue
          if (registration.once) registered!.delete(listener)
          this.call(() => (listener as (payload: object) => void)(event), event.type)
        }
      }
      if (every !== null) for (const listener of every) if (any!.has(listener)) this.call(() => listener(event), event.type)
    }
    // Drained: the link keeps no queue between bursts of events.
    this.queue = null
    this.draining = false
  }

  private call(fn: () => unknown, type: keyof Events): void {
    try {
      settleReported(fn(), (error) => this.onListenerError(error, type))
    } catch (error) {
      this.onListenerError(error, type)
    }
  }

  /**
   * An async iterator over every event from the moment of this call, as `{ type, ...payload }`,
   * in order. Ends when `signal` aborts, when the consumer breaks or calls `return()`, or, with
   * `until`, right after the first event for which `until(event)` is true.
   */
  iterate(options: { signal?: AbortSignal; until?: (event: Tagged<Events>) => boolean } = {}): AsyncIterableIterator<Tagged<Events>> {
    const { signal, until } = options
    const buffer: Array<Tagged<Events>> = []
    // next() calls not yet answered, oldest first: each gets the next event (or the end) in turn.
    const waiting: Array<(result: IteratorResult<Tagged<Events>>) => void> = []
    let finished = false
    let unwatch: (() => void) | null = null
    const finish = () => {
      if (finished) return
      finished = true
      off()
      unwatch?.()
      for (const resolve of waiting.splice(0)) resolve({ value: undefined, done: true })
    }
    const off = this.onAny((event) => {
      if (finished) return
      const resolve = waiting.shift()
      if (resolve) resolve({ value: event, done: false })
      else buffer.push(event)
      // The last event: what is buffered stays readable; calls made beyond it end at once.
      if (until?.(event)) finish()
    })
    if (signal?.aborted) finish()
    // An abort ends the iteration at once: events buffered and not yet read are dropped, as
    // Node's `events.on(emitter, name, { signal })` drops them (only `until` leaves them readable).
    else if (signal)
      unwatch = onAbort(signal, () => {
        buffer.length = 0
        finish()
      })
    const iterator: AsyncIterableIterator<Tagged<Events>> = {
      next: () => {
        if (buffer.length > 0) return Promise.resolve({ value: buffer.shift()!, done: false })
        if (finished) return Promise.resolve({ value: undefined, done: true })
        return new Promise((resolve) => waiting.push(resolve))
      },
      return: () => {
        buffer.length = 0
        finish()
        return Promise.resolve({ value: undefined, done: true })
      },
      [Symbol.asyncIterator]: () => iterator,
    }
    return iterator
  }
}

/**
 * When `result` is a promise (or any thenable), reports its rejection to `report`; anything else
 * is left alone. Never throws: a `then` that throws is reported too.
 */
export function settleReported(result: unknown, report: (error: unknown) => void): void {
  if ((typeof result !== 'object' || result === null) && typeof result !== 'function') return
  try {
    const then = (result as { then?: unknown }).then
    if (typeof then === 'function') (then as (ok: unknown, fail: (error: unknown) => void) => unknown).call(result, undefined, report)
  } catch (error) {
    report(error)
  }
}
