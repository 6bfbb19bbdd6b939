/**
 * Idle memory: 2,000 connected clients (control channel + one app channel each), heap and RSS
 * per client after GC, just connected and again once they have stayed connected past the
 * reconnect policy's stable window (the state an agent spends its days in: every chart delay of
 * the connect has run out). Each kind runs in a fresh process (heap and RSS of one kind only),
 * each with its own simulator child; modules are loaded before the baseline so only per-client
 * memory is counted.
 *
 * Run alone: `npm run bench -- memory`.
 */
import { DEFAULT_RECONNECT_POLICY } from '../machines/reconnect-policy.js'
import { inFreshProcess, pool, row, settleHeap, SimChild, openClient, type Row } from './common.js'

export const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 2_000)
/** The large run: heap per link when a host runs this many agents in one process. */
export const MANY = Number(process.env.BENCH_MANY_CLIENTS ?? 10_000)

interface Measured {
  kind: 'link' | 'raw'
  clients: number
  heapPerClient: number
  rssPerClient: number
  setupMs: number
  /** Heap per client once every client stayed connected past the stable window; null when not measured. */
  steadyHeapPerClient: number | null
  /** RSS per client at that point, just after the forced GC; null when not measured. */
  steadyRssPerClient: number | null
  /** RSS per client {@link SETTLED_AFTER_MS} later, the process left idle for V8's own GC in between (then forced GC again); null when not measured. */
  settledRssPerClient: number | null
}

/**
 * How long the steady figures wait after the last client connected: the stable window and 20 s.
 * The margin matters for RSS: V8 shrinks its young generation (grown to about 32 MiB while the
 * clients connected) only once allocation has been quiet for a while, and with a 1 s margin the
 * last links' stable windows had run out only about a second before the reading; 20 s gives
 * V8 time to shrink it (docs/performance.md).
 */
const STEADY_AFTER_MS = DEFAULT_RECONNECT_POLICY.stableAfterMs + 20_000

/**
 * How long the settled RSS reading waits after the steady one, the process idle. A forced
 * `gc()` leaves the old space's holes in place (the objects a link's charts replaced when their
 * windows ran out); V8's own GC, left to run while the process idles (most likely its memory
 * reducer, which compacts once a process allocates little after a full GC), emptied them within
 * 30 s in some runs by hand and not in others (docs/performance.md): it decides when, not the bench.
 */
const SETTLED_AFTER_MS = 30_000

async function measure(kind: 'link' | 'raw', count: number, steady = false): Promise<Measured> {
  const sim = await SimChild.start()
  const closers: Array<() => Promise<void>> = []
  try {
    // Warm-up: one client of the kind, so lazily created module state is in the baseline.
    const warm = await openClient(kind, sim.url, 'mem-warm')
    await warm()
    await settleHeap()
    const before = process.memoryUsage()
    const started = performance.now()
    await pool(
      Array.from({ length: count }, (_, i) => i),
      50,
      async (i) => {
        closers.push(await openClient(kind, sim.url, `mem-${kind}-${i}`))
      },
    )
    const setupMs = performance.now() - started
    await settleHeap()
    const after = process.memoryUsage()
    let steadyHeapPerClient: number | null = null
    let steadyRssPerClient: number | null = null
    let settledRssPerClient: number | null = null
    if (steady) {
      await new Promise((resolve) => setTimeout(resolve, STEADY_AFTER_MS))
      await settleHeap()
      const idle = process.memoryUsage()
      steadyHeapPerClient = (idle.heapUsed - before.heapUsed) / count
      steadyRssPerClient = (idle.rss - before.rss) / count
      await new Promise((resolve) => setTimeout(resolve, SETTLED_AFTER_MS))
      await settleHeap()
      settledRssPerClient = (process.memoryUsage().rss - before.rss) / count
    }
    return {
      kind,
      clients: count,
      heapPerClient: (after.heapUsed - before.heapUsed) / count,
      rssPerClient: (after.rss - before.rss) / count,
      setupMs,
      steadyHeapPerClient,
      steadyRssPerClient,
      settledRssPerClient,
    }
  } finally {
    await pool(closers, 100, (close) => close())
    await sim.stop()
  }
}

/** Runs each measurement in a fresh process (both kinds, 2,000 and 10,000 clients) and returns the idle-memory rows. */
export async function run(): Promise<Row[]> {
  const file = './memory.js'
  const raw = await inFreshProcess<Measured>(file, ['raw', String(CLIENTS), 'steady'])
  const link = await inFreshProcess<Measured>(file, ['link', String(CLIENTS), 'steady'])
  const rawMany = await inFreshProcess<Measured>(file, ['raw', String(MANY), 'steady'])
  const linkMany = await inFreshProcess<Measured>(file, ['link', String(MANY), 'steady'])
  const kib = (bytes: number) => bytes / 1024
  const target = { text: '<= 1.5x raw', met: (l: number, r: number | null) => l <= 1.5 * r! }
  const connectTarget = { text: '<= 1.3x raw', met: (l: number, r: number | null) => l <= 1.3 * r! }
  return [
    row('idle memory', `heap per connected client (${CLIENTS.toLocaleString('en-US')} clients, after GC)`, 'KiB', kib(link.heapPerClient), kib(raw.heapPerClient), target),
    row('idle memory', 'RSS per connected client', 'KiB', kib(link.rssPerClient), kib(raw.rssPerClient), target),
    row('idle memory', `heap per client connected ${Math.round(STEADY_AFTER_MS / 1000)} s (past the stable window, after GC)`, 'KiB', kib(link.steadyHeapPerClient!), kib(raw.steadyHeapPerClient!), target),
    row('idle memory', `RSS per client connected ${Math.round(STEADY_AFTER_MS / 1000)} s (past the stable window, just after a forced GC)`, 'KiB', kib(link.steadyRssPerClient!), kib(raw.steadyRssPerClient!), null),
    row('idle memory', `RSS per client connected ${Math.round((STEADY_AFTER_MS + SETTLED_AFTER_MS) / 1000)} s (the last ${SETTLED_AFTER_MS / 1000} s left idle for V8's own GC)`, 'KiB', kib(link.settledRssPerClient!), kib(raw.settledRssPerClient!), target),
    row('idle memory', `time to connect ${CLIENTS.toLocaleString('en-US')} clients (50 at a time)`, 'ms', link.setupMs, raw.setupMs, connectTarget),
    // Just after the last of 10,000 connected, the clients that connected last still hold their
    // pending chart delays (rapid and stable windows), so that figure moves with how long setup
    // took; the target is judged idle, once every client is past its windows.
    row('idle memory', `heap per connected client (${MANY.toLocaleString('en-US')} clients, just connected, after GC)`, 'KiB', kib(linkMany.heapPerClient), kib(rawMany.heapPerClient), null),
    row('idle memory', `heap per client (${MANY.toLocaleString('en-US')} clients, connected ${Math.round(STEADY_AFTER_MS / 1000)} s, after GC)`, 'KiB', kib(linkMany.steadyHeapPerClient!), kib(rawMany.steadyHeapPerClient!), target),
    row('idle memory', `RSS per connected client (${MANY.toLocaleString('en-US')} clients)`, 'KiB', kib(linkMany.rssPerClient), kib(rawMany.rssPerClient), null),
    row('idle memory', `RSS per client (${MANY.toLocaleString('en-US')} clients, connected ${Math.round(STEADY_AFTER_MS / 1000)} s, just after a forced GC)`, 'KiB', kib(linkMany.steadyRssPerClient!), kib(rawMany.steadyRssPerClient!), null),
    row('idle memory', `RSS per client (${MANY.toLocaleString('en-US')} clients, connected ${Math.round((STEADY_AFTER_MS + SETTLED_AFTER_MS) / 1000)} s, the last ${SETTLED_AFTER_MS / 1000} s left idle for V8's own GC)`, 'KiB', kib(linkMany.settledRssPerClient!), kib(rawMany.settledRssPerClient!), null),
    row('idle memory', `time to connect ${MANY.toLocaleString('en-US')} clients (50 at a time)`, 'ms', linkMany.setupMs, rawMany.setupMs, connectTarget),
  ]
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const kind = process.argv[2]
  if (kind === 'link' || kind === 'raw') console.log(JSON.stringify(await measure(kind, Number(process.argv[3] ?? CLIENTS), process.argv[4] === 'steady')))
  else console.log(JSON.stringify(await run()))
}
