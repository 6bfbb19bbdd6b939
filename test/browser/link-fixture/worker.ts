/**
 * The dedicated Web Worker's script (bundled by test/browser/link.test.ts as an ES module): the
 * same driver as the page's, run on the worker's own global scope, driven by postMessage from
 * page.ts. Answers `{ ready: 'worker' }` once loaded, then `{ id, ok, value | error }` per call.
 */
import { createDriver, simulatorUrl, type Call } from './driver.js'

// The Node tsconfig that checks this file has no DOM/WebWorker lib: the worker's globals, typed by hand.
interface WorkerGlobals {
  location: { search: string }
  postMessage(message: unknown): void
  addEventListener(type: 'message', listener: (event: { data: { id: number; call: Call } }) => void): void
  /** Only a window has a document: proves this runs in a worker. */
  document?: unknown
  WorkerGlobalScope?: unknown
}
const g = globalThis as unknown as WorkerGlobals

if (g.document !== undefined || g.WorkerGlobalScope === undefined) throw new Error('worker.js must run in a Web Worker')
const driver = createDriver(simulatorUrl(g.location.search), 'worker')

g.addEventListener('message', ({ data }) => {
  const { id, call } = data
  driver.run(call).then(
    (value) => g.postMessage({ id, ok: true, value }),
    (error: unknown) => g.postMessage({ id, ok: false, error: error instanceof Error ? error.message : String(error) }),
  )
})
g.postMessage({ ready: 'worker' })
