/**
 * Every test releases what it opened. Each timer and TCP handle created while a test runs is
 * tracked (async_hooks); after the test, any still alive (a timer still armed and keeping the
 * process up, a socket or server not closed) fails it, named with its type and, for timers, its
 * delay. Closing a socket finishes on a later turn of the event loop, so the check waits for the
 * handles to go (bounded at 3 s), never for a fixed time. Vitest's own timers are unref'd and
 * ignored.
 */
import { createHook } from 'node:async_hooks'
import { afterEach, beforeEach } from 'vitest'

interface Tracked {
  type: string
  resource: { hasRef?: () => boolean; _idleTimeout?: number; _onTimeout?: unknown }
}

const alive = new Map<number, Tracked>()
const TYPES = new Set(['Timeout', 'TCPWRAP', 'TCPSERVERWRAP', 'TCPCONNECTWRAP', 'PIPEWRAP'])

createHook({
  init(id, type, _trigger, resource) {
    if (TYPES.has(type)) alive.set(id, { type, resource: resource as Tracked['resource'] })
  },
  destroy(id) {
    alive.delete(id)
  },
}).enable()

let mark = 0
let nextId = 0

function leaks(): string[] {
  const out: string[] = []
  for (const [id, t] of alive) {
    if (id <= mark) continue
    if (t.type === 'Timeout') {
      const armed = t.resource._idleTimeout !== undefined && t.resource._idleTimeout !== -1
      if (!armed || t.resource.hasRef?.() === false) continue
      out.push(`Timeout(${t.resource._idleTimeout} ms)`)
    } else {
      out.push(t.type)
    }
  }
  return out
}

/**
 * The timers and TCP handles created since `since` (an async id from {@link handleMark}) that are
 * still open: for tests that must check in the middle, e.g. after each property run.
 */
export function openHandlesSince(since: number): string[] {
  const saved = mark
  mark = since
  try {
    return leaks()
  } finally {
    mark = saved
  }
}

/** A mark for {@link openHandlesSince}: handles created after this call count. */
export function handleMark(): number {
  let max = 0
  for (const id of alive.keys()) max = Math.max(max, id)
  return max
}

beforeEach(() => {
  // Resources created before this point belong to earlier tests' teardown or to the runner.
  for (const id of alive.keys()) nextId = Math.max(nextId, id)
  mark = nextId
  setImmediate(() => {}) // ensure an async id boundary even if nothing else was created
})

afterEach(async () => {
  const deadline = performance.now() + 3000
  let left = leaks()
  while (left.length > 0 && performance.now() < deadline) {
    await new Promise<void>((resolve) => setImmediate(resolve))
    left = leaks()
  }
  if (left.length > 0) throw new Error(`test left open handles: ${left.join(', ')}`)
})
