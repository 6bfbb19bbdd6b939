/**
 * Serves the visualizer page (visualizer/dist, built by Vite) on loopback, and the live feed of
 * trace records at `GET /events` (server-sent events; a late page first gets every record so
 * far). `GET /trace.jsonl` serves a recorded trace for replay when one is given.
 */
import { spawnSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { closeSync, constants, existsSync, fstatSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { dirname, extname, join, normalize, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { TraceRecord } from './trace.js'
import { MAX_TRACE_BYTES } from './parse-trace.js'
import { isLoopbackHost } from '../server/control-api.js'
import { checkKnownKeys, describeArgument } from '../../call-checks.js'

/** Records kept for pages that open later (a long `connect --visualize` must not grow without bound). */
const MAX_KEPT_RECORDS = 5_000
/** Bytes of kept records at most (a link with many channels writes long records): the oldest go first. */
const MAX_KEPT_BYTES = 4 * 1024 * 1024

/**
 * Bytes a page's live feed may have waiting to be sent beyond what it was sent on opening (the
 * kept records, at most 4 MiB): a page that stops reading (a tab in the background, a stalled
 * connection) is cut off past it rather than buffered without bound. Each record goes with its
 * `id:` (`<run>.<n>`, the run a token of this server), so the page's EventSource reconnects with
 * `Last-Event-ID` and is sent only what it missed; an id of another run (a page left open while
 * the command was started again on the same port) gets every kept record, after a `run` event
 * that tells the page to drop what it showed of the old run.
 */
export const MAX_FEED_BUFFER_BYTES = 8 * 1024 * 1024

/**
 * Reads a trace file whole, as the replay serves it: a regular file of at most
 * {@link MAX_TRACE_BYTES}. Opened without blocking, so a named pipe is refused at once rather than
 * waited on, and read with a byte limit, so a file that grows while it is read is refused too.
 *
 * @returns the file's text (UTF-8).
 * @throws {Error} when it cannot be opened, is not a regular file (a pipe, a device, a directory:
 *   save the trace to a file first), or is over {@link MAX_TRACE_BYTES}.
 */
export function readTraceFile(path: string): string {
  const fd = openSync(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0))
  try {
    if (!fstatSync(fd).isFile()) throw new Error('it is not a regular file (a pipe, a device or a directory): save the trace to a file and replay that')
    const chunks: Buffer[] = []
    const chunk = Buffer.allocUnsafe(1 << 20)
    let total = 0
    for (;;) {
      const read = readSync(fd, chunk, 0, chunk.length, null)
      if (read === 0) break
      total += read
      if (total > MAX_TRACE_BYTES) throw new Error(`it is over ${MAX_TRACE_BYTES / 2 ** 20} MiB, the most the replay reads`)
      chunks.push(Buffer.from(chunk.subarray(0, read)))
    }
    return Buffer.concat(chunks).toString('utf8')
  } finally {
    closeSync(fd)
  }
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.json': 'application/json',
  '.png': 'image/png',
}

/**
 * Builds the page with Vite when visualizer/dist is missing (a checkout; the published package
 * ships it built), when a checkout's page sources or charts changed since the last build, or
 * always with `force` (the browser tests, so they never test a stale build).
 *
 * @returns the directory of the built page.
 *
 * @throws {Error} when the build fails or Vite is not installed.
 */
export function ensurePageBuilt(options: { force?: boolean } = {}): string {
  const dir = pageDir()
  const root = join(dir, '..', '..')
  if (!options.force && existsSync(join(dir, 'index.html')) && !isStale(root, join(dir, 'index.html'))) return dir
  const vite = join(root, 'node_modules', 'vite', 'bin', 'vite.js')
  if (!existsSync(vite)) throw new Error(`the visualizer page is not built (${dir}) and Vite is not installed to build it`)
  const result = spawnSync(process.execPath, [vite, 'build', '--config', join(root, 'visualizer', 'vite.config.ts'), '--logLevel', 'warn'], { cwd: root, stdio: 'inherit' })
  if (result.status !== 0 || !existsSync(join(dir, 'index.html'))) throw new Error(`building the visualizer page failed (exit ${result.status})`)
  return dir
}

/**
 * In a checkout (the page's sources are present): whether any source the page is built from is
 * newer than the built page: the page's own files (visualizer/), and every module the page and
 * its chart data (src/node/model/visual.ts, which the build runs) import, followed through their
 * relative imports (a `./x.js` import is the source `./x.ts`). The published package has no page
 * sources, so its built page is never stale.
 */
function isStale(root: string, built: string): boolean {
  if (!existsSync(join(root, 'visualizer', 'main.ts'))) return false
  const builtAt = statSync(built).mtimeMs
  return pageSources(root).some((file) => statSync(file).mtimeMs > builtAt)
}

/**
 * A checkout's sources of the visualizer page (absolute paths): visualizer/'s .ts, .html and .css
 * files, and every module the page and its chart data import (see {@link isStale}). Exported for
 * the tests; not part of the package's API.
 */
export function pageSources(root: string): string[] {
  const own = readdirSync(join(root, 'visualizer'))
    .filter((name) => /\.(ts|html|css)$/.test(name))
    .map((name) => join(root, 'visualizer', name))
  return [...new Set([...own, ...pageModules([join(root, 'visualizer', 'main.ts'), join(root, 'src', 'node', 'model', 'visual.ts')])])]
}

/** The TypeScript sources `entries` import, directly or not, through relative imports (`from './x.js'`, `import('./x.js')`), entries included. */
function pageModules(entries: string[]): Set<string> {
  const seen = new Set<string>()
  const queue = [...entries]
  for (let file = queue.pop(); file !== undefined; file = queue.pop()) {
    if (seen.has(file) || !existsSync(file)) continue
    seen.add(file)
    const text = readFileSync(file, 'utf8')
    for (const match of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*)['"](\.{1,2}\/[^'"]+)['"]/g)) {
      const target = join(dirname(file), match[1]!).replace(/\.js$/, '.ts')
      if (target.endsWith('.ts')) queue.push(target)
    }
  }
  return seen
}

/** visualizer/dist at the package root, from src/node/visualize/ or from dist/src/node/visualize/. */
function pageDir(): string {
  let here = fileURLToPath(new URL('.', import.meta.url))
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(here, 'package.json')) && existsSync(join(here, 'visualizer'))) return join(here, 'visualizer', 'dist')
    here = join(here, '..')
  }
  return join(fileURLToPath(new URL('../../../..', import.meta.url)), 'visualizer', 'dist')
}

/**
 * Answers `GET /` and the page's assets from `dir`; returns false for any other path.
 * Paths are confined to `dir`.
 */
export function servePage(dir: string, req: IncomingMessage, res: ServerResponse): boolean {
  if (req.method !== 'GET' && req.method !== 'HEAD') return false
  const path = pathOf(req)
  if (path === null) return false
  const file = path === '/' ? 'index.html' : path.slice(1)
  if (file !== 'index.html' && !file.startsWith('assets/')) return false
  const full = normalize(join(dir, file))
  if (!full.startsWith(normalize(dir) + sep)) return false
  let body: Buffer
  try {
    if (!statSync(full).isFile()) return false
    body = readFileSync(full)
  } catch {
    return false // missing or unreadable: the caller answers 404
  }
  res.writeHead(200, { 'content-type': TYPES[extname(full)] ?? 'application/octet-stream', 'cache-control': 'no-store' })
  res.end(req.method === 'HEAD' ? undefined : body)
  return true
}

/** The request's path, or null for a request target that is not a valid URL path. */
function pathOf(req: IncomingMessage): string | null {
  try {
    return new URL(req.url ?? '/', 'http://loopback').pathname
  } catch {
    return null
  }
}

/** A running visualizer server. */
export interface VisualizerServer {
  /** e.g. `http://127.0.0.1:41234/` */
  url: string
  /** Pages following the live feed right now. */
  viewers(): number
  /**
   * Resolves true once a page follows the live feed, or false after `timeoutMs` (milliseconds),
   * or false as soon as the server is closed (a wait pending at `close()` too).
   *
   * @throws {RangeError} (rejects) for a timeoutMs that is not a whole number in [0, 2^31-1].
   */
  waitForViewer(timeoutMs: number): Promise<boolean>
  /** Sends a record to every open page (and to pages that open later). */
  publish(record: TraceRecord): void
  /** Closes the feed and the server. */
  close(): Promise<void>
}

/** The options {@link startVisualizer} reads: a misspelt one (`hots`) would be ignored and its default used. */
const VISUALIZER_OPTION_KEYS: ReadonlySet<string> = new Set(['port', 'host', 'trace', 'traceText'])

/**
 * Starts the visualizer server on loopback: it answers only to a loopback Host (a page of another
 * site reaching it under a name of its own, DNS rebinding, gets 403).
 *
 * @param options.port 0 (default) picks a free port.
 * @param options.host a loopback address (default `127.0.0.1`; `::1`, `localhost`, any of
 *   127.0.0.0/8): the feed carries a link's states and reasons, which only this machine may read.
 * @param options.trace a JSON-lines trace file to serve at `/trace.jsonl`, read once now
 *   ({@link readTraceFile}): what the page replays is what was read, whatever happens to the file.
 * @param options.traceText the trace's text itself (instead of `trace`), served as it is: the
 *   replay passes the text it checked.
 * @throws {TypeError} (rejects) for options of the wrong type, and an unknown option.
 * @throws {RangeError} (rejects) for a port that is not a whole number in [0, 65535] or a host that is not loopback.
 * @throws {Error} (rejects) when the page cannot be built, the trace file cannot be read
 *   ({@link readTraceFile}), or the port cannot be bound.
 */
export async function startVisualizer(options: { port?: number; host?: string; trace?: string; traceText?: string } = {}): Promise<VisualizerServer> {
  if (options === null || typeof options !== 'object') throw new TypeError(`startVisualizer options must be an object, got ${options === null ? 'null' : typeof options}`)
  checkKnownKeys(options, VISUALIZER_OPTION_KEYS, 'startVisualizer')
  const port = options.port ?? 0
  if (!(Number.isInteger(port) && port >= 0 && port <= 65_535)) throw new RangeError(`startVisualizer port must be a whole number in [0, 65535], got ${describeArgument(options.port)}`)
  const given = options.host ?? '127.0.0.1'
  if (typeof given !== 'string' || !isLoopbackHost(given.includes(':') && !given.startsWith('[') ? `[${given}]` : given)) {
    throw new RangeError(`startVisualizer host must be a loopback address (127.0.0.1, ::1, localhost): the feed is for this machine only; got ${JSON.stringify(given)}`)
  }
  // `[::1]` as a URL writes it: listened on as `::1`.
  const host = given.startsWith('[') && given.endsWith(']') ? given.slice(1, -1) : given
  for (const name of ['trace', 'traceText'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'string') throw new TypeError(`startVisualizer ${name} must be a string, got ${typeof options[name]}`)
  }
  const trace = options.traceText ?? (options.trace !== undefined ? readTraceFile(options.trace) : null)
  const dir = ensurePageBuilt()
  // Kept records as the frames sent (`id:` and `data:` lines), oldest first, with their ids.
  const kept: Array<{ id: number; frame: string }> = []
  let keptBytes = 0
  let lastId = 0
  // This server's run, in every record's id: a page's Last-Event-ID from another run is not ours.
  const run = randomUUID().slice(0, 8)
  const feeds = new Set<ServerResponse>()
  const viewerWaiters = new Set<(seen?: boolean) => void>()
  const notFound = (res: ServerResponse) => {
    res.writeHead(404, { 'content-type': 'text/plain' })
    res.end('not found')
  }
  const server: Server = createServer((req, res) => {
    // On loopback, a page of another site can reach the server under a name of its own (DNS
    // rebinding) and read the feed and the trace: only a loopback Host is answered, as the
    // simulator's admin routes do.
    if (!isLoopbackHost(req.headers.host)) {
      res.writeHead(403, { 'content-type': 'text/plain' })
      res.end(`the visualizer answers only to a loopback Host, not ${JSON.stringify(req.headers.host ?? '')}`)
      return
    }
    const path = pathOf(req)
    if (path === null) {
      res.writeHead(400, { 'content-type': 'text/plain' })
      res.end('bad request target')
      return
    }
    if (path === '/events') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' })
      // Which run this is (no id: the page's Last-Event-ID stays that of its last record), and a
      // reconnection delay of 1 s instead of the browser's default (3 s in Chromium): the server is
      // on this machine, and a command started again should show at once.
      res.write(`retry: 1000\nevent: run\ndata: ${run}\n\n`)
      // A reconnecting EventSource says what it saw last: only what came after is sent again. An
      // id of another run (this port's previous server) or none: everything kept.
      const header = req.headers['last-event-id']
      const ours = typeof header === 'string' && header.startsWith(`${run}.`) ? header.slice(run.length + 1) : ''
      const seen = /^\d+$/.test(ours) ? Number(ours) : 0
      for (const { id, frame } of kept) if (id > seen) res.write(frame)
      feeds.add(res)
      for (const wake of [...viewerWaiters]) wake()
      req.on('close', () => feeds.delete(res))
      return
    }
    if (path === '/trace.jsonl' && trace !== null) {
      res.writeHead(200, { 'content-type': 'application/x-ndjson; charset=utf-8', 'cache-control': 'no-store' })
      res.end(trace)
      return
    }
    if (servePage(dir, req, res)) return
    notFound(res)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => resolve())
  })
  const bound = (server.address() as { port: number }).port
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}/`,
    viewers: () => feeds.size,
    waitForViewer(timeoutMs) {
      if (!(Number.isInteger(timeoutMs) && timeoutMs >= 0 && timeoutMs <= 2 ** 31 - 1)) {
        return Promise.reject(new RangeError(`waitForViewer timeoutMs must be a whole number of milliseconds in [0, 2^31-1], got ${String(timeoutMs)}`))
      }
      if (feeds.size > 0) return Promise.resolve(true)
      // No page can connect to a closed server: nothing to wait for.
      if (!server.listening) return Promise.resolve(false)
      return new Promise((resolve) => {
        const done = (seen: boolean) => {
          clearTimeout(timer)
          viewerWaiters.delete(wake)
          resolve(seen)
        }
        const wake = (seen = true) => done(seen)
        const timer = setTimeout(() => done(false), timeoutMs)
        viewerWaiters.add(wake)
      })
    },
    publish(record) {
      const frame = `id: ${run}.${++lastId}\ndata: ${JSON.stringify(record)}\n\n`
      kept.push({ id: lastId, frame })
      keptBytes += frame.length
      // A page that opens late gets the most recent records, not an unbounded history.
      while (kept.length > MAX_KEPT_RECORDS || (keptBytes > MAX_KEPT_BYTES && kept.length > 1)) keptBytes -= kept.shift()!.frame.length
      for (const res of feeds) {
        // What waits beyond the kept records sent on opening: a page still reading those is not cut off.
        if (res.writableLength > MAX_FEED_BUFFER_BYTES + MAX_KEPT_BYTES) {
          // The page stopped reading: cut off, not buffered without bound (it reconnects for what it missed).
          feeds.delete(res)
          res.destroy()
        } else res.write(frame)
      }
    },
    close() {
      // A wait for a viewer ends (unmet) with the server, so its timer keeps nothing alive.
      for (const wake of [...viewerWaiters]) wake(false)
      for (const res of feeds) res.end()
      feeds.clear()
      return new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      })
    },
  }
}
