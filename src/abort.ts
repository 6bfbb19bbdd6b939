import { ConfigurationError } from './errors/configuration-error.js'

/** What a wait rejects with when its AbortSignal aborts: the signal's reason, else an `AbortError` DOMException (as fetch and Node's APIs do). */
export function abortError(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The operation was aborted.', 'AbortError')
}

/**
 * Checks the `signal` option a host passed to one of the link's calls, before the call does
 * anything: absent (`undefined`, or `null` as `fetch` accepts) or an AbortSignal (an object with a
 * boolean `aborted`, `addEventListener` and `removeEventListener`, so a signal of another realm
 * passes). Checked first so a
 * wrong value registers no listener, timer or push that the rejected call would leave behind.
 *
 * @param where the call, for the message, e.g. `link.once`.
 * @throws {ConfigurationError} (`INVALID_OPTIONS`) `<where>: options.signal must be an AbortSignal, got <type>`.
 */
export function checkSignal(signal: unknown, where: string): asserts signal is AbortSignal | null | undefined {
  if (signal === undefined || signal === null || isAbortSignal(signal)) return
  throw new ConfigurationError(`${where}: options.signal must be an AbortSignal, got ${typeof signal === 'object' ? 'an object that is not one' : typeof signal}`)
}

/**
 * Whether `value` looks like an AbortSignal (of this realm or another): an object with a boolean
 * `aborted`, and `addEventListener` and `removeEventListener` functions (a wait removes its
 * listener when it ends). Never throws: a value whose fields cannot be read (a getter that throws,
 * a revoked proxy) is not one.
 */
export function isAbortSignal(value: unknown): value is AbortSignal {
  if (typeof value !== 'object' || value === null) return false
  try {
    const signal = value as { aborted?: unknown; addEventListener?: unknown; removeEventListener?: unknown }
    return typeof signal.aborted === 'boolean' && typeof signal.addEventListener === 'function' && typeof signal.removeEventListener === 'function'
  } catch {
    return false
  }
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
 * first); nor is a signal-like object whose `addEventListener` throws (the wait ends as it would
 * with no signal), and one whose `removeEventListener` throws keeps its listener, which then finds
 * no callback. A callback that throws does not keep the others from running; what it threw is
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
    try {
      signal.addEventListener('abort', listener, { once: true })
    } catch {
      // A host's signal-like object whose addEventListener throws: it cannot abort this wait, which
      // ends as it would with no signal (its reply, its timeout). Thrown here, it would escape
      // from wherever the wait started (after a push went out, say) and leave it half made.
      return () => {}
    }
    watched.set(signal, waits)
  }
  const { callbacks, listener } = waits
  callbacks.add(callback)
  return () => {
    if (!callbacks.delete(callback) || callbacks.size > 0) return
    if (watched.get(signal)?.callbacks === callbacks) watched.delete(signal)
    // Runs where a wait ends (a reply, a timeout, a state reached), inside phoenix-link's own
    // handlers: a host's signal whose removeEventListener throws must not throw there.
    try {
      signal.removeEventListener('abort', listener)
    } catch {
      // Nothing more to undo: its listener stays registered, and finds no callback when it runs.
    }
  }
}

