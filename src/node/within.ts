/**
 * Resolves or rejects as `promise` does, or rejects with `Error('timed out after <timeoutMs> ms
 * waiting for <what>')` when it has not settled within `timeoutMs` (milliseconds). The timer is
 * cleared either way, so nothing is left armed. The demo bounds each of its steps with it,
 * conform its wait for an agent to end, and bench/ each client's join (a pending timer per client
 * would count in the heap figures, and awaiting a promise lets the event loop sleep where polling
 * would spend CPU counted against the client).
 */
export function within<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const expiry = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs)
  })
  return Promise.race([promise, expiry]).finally(() => clearTimeout(timer))
}
