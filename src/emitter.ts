/**
 * A small typed event emitter with an async iterator, for the link's events. Listener errors are
 * caught and reported, never thrown into the link.
 */

/** Removes the listener it was returned for. */
export type Unsubscribe = () => void

/** A typed emitter over an event map `{ name: payload }`. */
export class Emitter<Events extends { [K in keyof Events]: object }> {
  private readonly listeners = new Map<keyof Events, Set<(payload: never) => void>>()
  private readonly anyListeners = new Set<(event: { [K in keyof Events]: { type: K } & Events[K] }[keyof Events]) => void>()

  constructor(private readonly onListenerError: (error: unknown, type: keyof Events) => void) {}

  /** Calls `listener` for each `type` event until the returned function is called. */
  on<K extends keyof Events>(type: K, listener: (payload: Events[K]) => void): Unsubscribe {
    let set = this.listeners.get(type)
    if (!set) this.listeners.set(type, (set = new Set()))
    set.add(listener as (payload: never) => void)
    return () => set!.delete(listener as (payload: never) => void)
  }

  /** Calls `listener` once, for the next `type` event. */
  once<K extends keyof Events>(type: K, listener: (payload: Events[K]) => void): Unsubscribe {
    const off = this.on(type, (payload) => {
      off()
      listener(payload)
    })
    return off
  }

  /** Calls `listener` for every event, as `{ type, ...payload }`. */
  onAny(listener: (event: { [K in keyof Events]: { type: K } & Events[K] }[keyof Events]) => void): Unsubscribe {
    this.anyListeners.add(listener)
    return () => this.anyListeners.delete(listener)
  }

  /** Publishes an event to its listeners, then to the any-listeners. */
  emit<K extends keyof Events>(type: K, payload: Events[K]): void {
    const set = this.listeners.get(type)
    if (set) {
      for (const listener of [...set]) {
        try {
          ;(listener as (payload: Events[K]) => void)(payload)
        } catch (error) {
          this.onListenerError(error, type)
        }
      }
    }
    if (this.anyListeners.size > 0) {
      const event = { type, ...payload } as { [K in keyof Events]: { type: K } & Events[K] }[keyof Events]
      for (const listener of [...this.anyListeners]) {
        try {
          listener(event)
        } catch (error) {
          this.onListenerError(error, type)
        }
      }
    }
  }

  /**
   * Iterates over every event from now on, as `{ type, ...payload }`, in order. Ends when
   * `signal` aborts or the consumer breaks out of the loop. Events wait in memory until read.
   */
  async *iterate(signal?: AbortSignal): AsyncGenerator<{ [K in keyof Events]: { type: K } & Events[K] }[keyof Events]> {
    type Item = { [K in keyof Events]: { type: K } & Events[K] }[keyof Events]
    const queue: Item[] = []
    let wake: (() => void) | null = null
    const off = this.onAny((event) => {
      queue.push(event)
      wake?.()
    })
    const onAbort = () => wake?.()
    signal?.addEventListener('abort', onAbort)
    try {
      while (!signal?.aborted) {
        if (queue.length > 0) {
          yield queue.shift()!
          continue
        }
        await new Promise<void>((resolve) => (wake = resolve))
        wake = null
      }
    } finally {
      off()
      signal?.removeEventListener('abort', onAbort)
    }
  }
}
