/**
 * Every test releases what it opened, and awaits its own teardown: there is no grace period.
 * Each timer and TCP handle created while a test runs is tracked (async_hooks). When the test
 * ends, a timer still armed and keeping the process up fails it at once (a leaked 1 ms timer
 * included); a socket or server still open fails it after the event loop's pending close
 * notifications ran (a few turns of the immediate queue, no time: a socket the test closed and
 * awaited is gone by then; one it left closing is not). Listeners a test added to `process` and
 * left there fail it too. Vitest's own timers are unref'd and ignored.
 */
import { createHook } from 'node:async_hooks'
import { afterEach, beforeEach, expect } from 'vitest'

interface Tracked {
  type: string
  resource: { hasRef?: () => boolean | null; _idleTimeout?: number; _destroyed?: boolean }
  /** Where it was created: an Error whose stack is formatted only when read (V8 keeps the frames). */
  origin: Error
}

const DEBUG = process.env.LEAK_DEBUG === '1'
if (DEBUG) Error.stackTraceLimit = 40

const alive = new Map<number, Tracked>()
const TIMERS = new Set(['Timeout'])
const SOCKETS = new Set(['TCPWRAP', 'TCPSERVERWRAP', 'TCPCONNECTWRAP', 'PIPEWRAP'])

createHook({
  init(id, type, _trigger, resource) {
    if (TIMERS.has(type) || SOCKETS.has(type)) alive.set(id, { type, resource: resource as Tracked['resource'], origin: new Error('created') })
  },
  destroy(id) {
    alive.delete(id)
  },
}).enable()

let mark = 0
let nextId = 0

/**
 * Vitest's runner arms timers of its own while a test runs (its task-update throttle, 100 ms):
 * not the test's. A timer is the runner's when the first frame outside Node's internals that
 * created it is in vitest (a test's own timer has the test's frame first, the runner's below).
 */
function runnerOwned(t: Tracked): boolean {
  const frames = (t.origin.stack ?? '').split('\n').slice(1).filter((line) => !line.includes('node:') && !line.includes('no-leaks'))
  return /[\\/]@vitest[\\/]|[\\/]vitest[\\/]dist[\\/]/.test(frames[0] ?? '')
}

/**
 * Still due to fire and keeping the process up. A timer that fired or was cleared reads
 * `_destroyed` at once, though async_hooks reports its destroy later (Node lib/internal/timers.js).
 */
function armed(t: Tracked): boolean {
  return t.resource._destroyed !== true && t.resource.hasRef?.() === true && t.resource._idleTimeout !== -1 && !runnerOwned(t)
}

function leaks(kinds: 'timers' | 'sockets' | 'all' = 'all'): string[] {
  const out: string[] = []
  for (const [id, t] of alive) {
    if (id <= mark) continue
    if (TIMERS.has(t.type)) {
      if (kinds !== 'sockets' && armed(t)) out.push(`Timeout(${t.resource._idleTimeout} ms)${DEBUG ? ` ${t.origin.stack}` : ''}`)
    } else if (kinds !== 'timers') out.push(`${t.type}${DEBUG ? ` ${t.origin.stack}` : ''}`)
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

/** The listeners on `process`, by event, so a test that leaves one behind is found. */
function processListeners(): Map<string | symbol, number> {
  return new Map(process.eventNames().map((name) => [name, process.listenerCount(name)]))
}

let listenersBefore = processListeners()

beforeEach(() => {
  expect.hasAssertions()
  // Resources created before this point belong to earlier tests' teardown or to the runner.
  for (const id of alive.keys()) nextId = Math.max(nextId, id)
  mark = nextId
  setImmediate(() => {}) // ensure an async id boundary even if nothing else was created
  listenersBefore = processListeners()
})

/** Turns of the immediate queue in which Node reports handles already closed (async_hooks destroy runs from it). */
const CLOSE_NOTICE_TURNS = 3

afterEach(async () => {
  const timers = leaks('timers')
  if (timers.length > 0) throw new Error(`test left timers armed: ${timers.join(', ')}`)
  for (let i = 0; i < CLOSE_NOTICE_TURNS && leaks('sockets').length > 0; i++) await new Promise<void>((resolve) => setImmediate(resolve))
  const left = leaks()
  if (left.length > 0) throw new Error(`test left open handles (await their close before the test ends): ${left.join(', ')}`)
  const added = [...processListeners()].filter(([name, n]) => n > (listenersBefore.get(name) ?? 0)).map(([name, n]) => `${String(name)} (+${n - (listenersBefore.get(name) ?? 0)})`)
  if (added.length > 0) throw new Error(`test left listeners on process: ${added.join(', ')}`)
})
