/** What a wait rejects with when its AbortSignal aborts: the signal's reason, else an `AbortError` DOMException (as fetch and Node's APIs do). */
export function abortError(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The operation was aborted.', 'AbortError')
}
