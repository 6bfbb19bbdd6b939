/**
 * The page's script (bundled by test/browser/link.test.ts): a driver for links on the page
 * itself, and a proxy to the same driver in a dedicated Web Worker (worker.ts, an ES module
 * worker) that it starts and talks to by postMessage. Both are on `window.fixture`.
 */
import { createDriver, simulatorUrl, type Call, type Driver } from './driver.js'

// The Node tsconfig that checks this file has no DOM lib: the page's globals, typed by hand.
interface WorkerLike {
  postMessage(message: unknown): void
  addEventListener(type: 'message', listener: (event: { data: unknown }) => void): void
  addEventListener(type: 'error', listener: (event: { message: string }) => void): void
  terminate(): void
}
interface PageGlobals {
  location: { search: string }
  Worker: new (url: string, options: { type: 'module' }) => WorkerLike
  fixture?: FixtureApi
}

/** What the page puts on `window.fixture`: the page's own driver, and the worker's behind postMessage. */
export interface FixtureApi {
  page: Driver
  worker: {
    /** Resolves with the worker's scope name once its script loaded; rejects when it failed to. */
    ready(): Promise<string>
    run(call: Call): Promise<unknown>
  }
}
const g = globalThis as unknown as PageGlobals

type Reply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: string } | { ready: string }

const sim = simulatorUrl(g.location.search)
const worker = new g.Worker(`/worker.js?sim=${encodeURIComponent(sim)}`, { type: 'module' })
const pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>()
let nextId = 1
let readyScope: string | null = null
let workerError: string | null = null
const readyWaiters: Array<(scope: string) => void> = []
const failWaiters: Array<(error: Error) => void> = []

worker.addEventListener('message', ({ data }) => {
  const reply = data as Reply
  if ('ready' in reply) {
    readyScope = reply.ready
    for (const w of readyWaiters.splice(0)) w(reply.ready)
    return
  }
  const call = pending.get(reply.id)
  if (!call) return
  pending.delete(reply.id)
  if (reply.ok) call.resolve(reply.value)
  else call.reject(new Error(reply.error))
})
worker.addEventListener('error', (event) => {
  // A worker that fails to load or throws at the top: every call still waiting fails with it.
  workerError = `worker error: ${event.message}`
  for (const call of pending.values()) call.reject(new Error(workerError))
  pending.clear()
  for (const w of failWaiters.splice(0)) w(new Error(workerError))
})

g.fixture = {
  page: createDriver(sim, 'page'),
  worker: {
    ready() {
      if (readyScope !== null) return Promise.resolve(readyScope)
      if (workerError !== null) return Promise.reject(new Error(workerError))
      return new Promise<string>((resolve, reject) => {
        readyWaiters.push(resolve)
        failWaiters.push(reject)
      })
    },
    run(call) {
      if (workerError !== null) return Promise.reject(new Error(workerError))
      const id = nextId++
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject })
        worker.postMessage({ id, call })
      })
    },
  },
}
