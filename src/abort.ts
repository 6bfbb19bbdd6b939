import { ConfigurationError } from './errors/configuration-error.js'

/** What a wait rejects with when its AbortSignal aborts: the signal's reason, else an `AbortError` DOMException (as fetch and Node's APIs do). */
export function abortError(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The operation was aborted.', 'AbortError')
}

/**
 * Checks the `signal` option a host passed to one of the link's calls, before the call does
 * anything: absent (`undefined`, or `null` as `fetch` accepts) or an AbortSignal (an object with a
 * boolean `aborted` and `addEventListener`, so a signal of another realm passes). Checked first so a
 * wrong value registers no listener, timer or push that the rejected call would leave behind.
 *
 * @param where the call, for the message, e.g. `link.once`.
 * @throws {ConfigurationError} (`INVALID_OPTIONS`) `<where>: options.signal must be an AbortSignal, got <type>`.
 */
export function checkSignal(signal: unknown, where: string): asserts signal is AbortSignal | null | undefined {
  if (signal === undefined || signal === null || isAbortSignal(signal)) return
  throw new ConfigurationError(`${where}: options.signal must be an AbortSignal, got ${typeof signal === 'object' ? 'an object that is not one' : typeof signal}`)
}

/** Whether `value` looks like an AbortSignal (of this realm or another): an object with a boolean `aborted` and `addEventListener`. */
export function isAbortSignal(value: unknown): value is AbortSignal {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { aborted?: unknown }).aborted === 'boolean' &&
    typeof (value as { addEventListener?: unknown }).addEventListener === 'function'
  )
}

/** phoenix-link's waits on one signal: the callbacks, and the one `abort` listener that calls them. */
interface SignalWaits {
  callbacks: Set<() => void>
  listener: () => void
}

/** Every signal some wait of phoenix-link is watching (weak: a signal nobody holds goes with its entry). */
const watched = new WeakMap<AbortSignal, SignalWaits>()

/**
 * Calls `callback` once when `signal` aborts; returns the function that stops watching. All of
 * phoenix-link's waits on one signal (every link's pushes, joins and state waits that a host gives
 * the same signal, such as `link.runSignal()`'s) share one `abort` listener on it, added with the
 * first and removed with the last, so a signal shared by many waits at once stays under Node's
 * listener warning (`MaxListenersExceededWarning` past 10 listeners of one EventTarget) and
 * keeps no listener once none waits. Callbacks run in the order they were added; one removed
 * while the abort is being told (by a callback before it) is not called.
 *
 * A signal that has aborted already is not watched: the callback never runs (check `aborted`
 * first). A callback that throws does not keep the others from running; what it threw is
 * re-thrown on a microtask, as an EventTarget reports a listener's throw.
 *
 * @throws {TypeError} when `signal` is not an AbortSignal (or an object with `aborted` and
 *   `addEventListener`, as a signal of another realm).
 */
export function onAbort(signal: AbortSignal, callback: () => void): () => void {
  if (signal === null || typeof signal !== 'object' || typeof (signal as { addEventListener?: unknown }).addEventListener !== 'function') {
    throw new TypeError(`signal must be an AbortSignal, got ${signal === null ? 'null' : typeof signal}`)
  }
  if (signal.aborted) return () => {}
  let waits = watched.get(signal)
  if (waits === undefined) {
    const callbacks = new Set<() => void>()
    const listener = () => {
      watched.delete(signal)
      for (const next of [...callbacks]) {
        if (!callbacks.delete(next)) continue
        try {
          next()
        } catch (error) {
          queueMicrotask(() => {
            throw error
          })
        }
      }
    }
    waits = { callbacks, listener }
    watched.set(signal, waits)
    signal.addEventListener('abort', listener, { once: true })
  }
  const { callbacks, listener } = waits
  callbacks.add(callback)
  return () => {
    if (!callbacks.delete(callback) || callbacks.size > 0) return
    if (watched.get(signal)?.callbacks === callbacks) watched.delete(signal)
    signal.removeEventListener('abort', listener)
  }
}
