/**
 * Reconnect storm: 2,000 connected clients, then the simulator closes every socket at once,
 * with 1001 (going away: a deploy) and with 1012 (service restart). The simulator times every
 * upgrade request it receives; the histogram counts them per 100 ms window after the close, and
 * the run ends when all clients have rejoined their control channel. phoenix-link runs with its
 * default policy, raw phoenix.js with its defaults (reconnectAfterMs 10, 50, 100, ... ms, no jitter),
 * and raw phoenix.js once more with the link's jitter for its first try, as a control: on this
 * shared machine the arrivals bunch beyond the schedule for any client (see docs/performance.md).
 *
 * Run alone: `npm run bench -- storm`.
 */
import { createLink, type Link } from '../src/link.js'
import { DEFAULT_RECONNECT_POLICY } from '../machines/reconnect.js'
import { pool, rawClient, row, SimChild, type Row } from './common.js'

export const STORM_CLIENTS = Number(process.env.BENCH_CLIENTS ?? 2_000)
const WINDOW_MS = 100

export interface StormResult {
  code: number
  kind: StormKind
  clients: number
  /** Upgrade requests per 100 ms window, from the close. */
  histogram: number[]
  /** Largest window's share of the clients. */
  peakShare: number
  /** Reconnect delays the clients scheduled, per 100 ms window: the load the policy asks for. */
  scheduled: number[]
  /** Largest scheduled window's share of the clients. */
  scheduledPeakShare: number
  /** From the close until every client's control channel is joined again, ms. */
  allRejoinedMs: number
}

/**
 * The clients of a storm: phoenix-link with its default policy; raw phoenix.js with its defaults;
 * and raw phoenix.js given the link's jitter for its first try (a delay drawn uniformly from the
 * link's default range for the close code, phoenix.js's defaults after that): the control that
 * separates what the policy does from what the shared machine does to the arrivals.
 */
export type StormKind = 'link' | 'raw' | 'raw-jitter'

/** The link's default delay range after close `code` (machines/reconnect-policy.ts). */
function floorOf(code: number): readonly [number, number] {
  return code === 1012 ? DEFAULT_RECONNECT_POLICY.serviceRestartFloorMs : DEFAULT_RECONNECT_POLICY.goingAwayFloorMs
}

async function storm(kind: StormKind, code: number, clients: number): Promise<StormResult> {
  const sim = await SimChild.start()
  const closers: Array<() => Promise<void>> = []
  const delays: number[] = []
  try {
    await pool(
      Array.from({ length: clients }, (_, i) => i),
      50,
      async (i) => {
        const agent = `storm-${kind}-${i}`
        if (kind !== 'link') {
          // phoenix.js's default reconnectAfterMs (assets/js/phoenix/socket.js), recorded as it is
          // used; for raw-jitter the first try draws from the link's range instead.
          const [low, high] = floorOf(code)
          const reconnectAfterMs = (tries: number) => {
            const delay =
              kind === 'raw-jitter' && tries === 1 ? low + Math.random() * (high - low) : ([10, 50, 100, 150, 200, 250, 500, 1000, 2000][tries - 1] ?? 5000)
            if (tries === 1) delays.push(delay)
            return delay
          }
          closers.push((await rawClient(sim.url, agent, { reconnectAfterMs })).close)
        } else {
          const link: Link = createLink({ url: sim.url, agentId: agent, apiKey: 'bench-key' })
          await link.connect()
          link.on('disconnected', ({ nextDelayMs, attempt }) => {
            if (attempt === 1 && nextDelayMs !== null) delays.push(nextDelayMs)
          })
          closers.push(() => link.disconnect())
        }
      },
    )
    const { at: closedAt } = await sim.send<{ at: number }>({ cmd: 'close-all', code })
    let last: { upgrades: number[]; joins: number[]; firstJoins: number[] } = { upgrades: [], joins: [], firstJoins: [] }
    const bound = floorOf(code)[1] + 10_000
    const deadline = performance.now() + bound
    while (last.firstJoins.length < clients) {
      if (performance.now() > deadline) throw new Error(`${kind}: ${last.firstJoins.length} of ${clients} rejoined after close ${code} within ${bound} ms`)
      await new Promise((resolve) => setTimeout(resolve, 100))
      last = await sim.send({ cmd: 'timeline', since: closedAt })
    }
    const histogram = windows(last.upgrades.map((at) => at - closedAt))
    const scheduled = windows(delays)
    const allRejoinedMs = Math.max(...last.firstJoins.map((at) => at - closedAt))
    return {
      code,
      kind,
      clients,
      histogram,
      peakShare: Math.max(...histogram) / clients,
      scheduled,
      scheduledPeakShare: Math.max(...scheduled) / clients,
      allRejoinedMs,
    }
  } finally {
    await pool(closers, 100, (close) => close())
    await sim.stop()
  }
}

/** Counts of `ms` values per 100 ms window. */
function windows(ms: number[]): number[] {
  const histogram: number[] = []
  for (const at of ms) {
    const slot = Math.max(0, Math.floor(at / WINDOW_MS))
    while (histogram.length <= slot) histogram.push(0)
    histogram[slot]!++
  }
  return histogram
}

/** A histogram as one line: count per 100 ms window. */
export function sparkline(histogram: number[]): string {
  return histogram.map((n) => String(n)).join(' ')
}

export async function run(): Promise<Row[]> {
  const rows: Row[] = []
  const results: StormResult[] = []
  for (const code of [1001, 1012]) {
    const floor = floorOf(code)
    const raw = await storm('raw', code, STORM_CLIENTS)
    const link = await storm('link', code, STORM_CLIENTS)
    const jittered = await storm('raw-jitter', code, STORM_CLIENTS)
    results.push(raw, link, jittered)
    rows.push(
      row('reconnect storm', `close ${code} to ${STORM_CLIENTS.toLocaleString('en-US')}: peak 100 ms window of scheduled reconnects, share of clients`, '%', link.scheduledPeakShare * 100, raw.scheduledPeakShare * 100, {
        text: '<= 10% (link)',
        met: (l) => l <= 10,
      }),
      row('reconnect storm', `close ${code}: peak 100 ms window of upgrades the server saw, share of clients`, '%', link.peakShare * 100, raw.peakShare * 100, {
        text: '<= 10% (link)',
        met: (l) => l <= 10,
      }),
      row('reconnect storm', `close ${code}: all rejoined after`, 'ms', link.allRejoinedMs, raw.allRejoinedMs, {
        text: `<= ${floor[1] + 1000} ms (range cap ${floor[1]} + 1 s)`,
        met: (l) => l <= floor[1] + 1000,
      }),
      // The control: raw phoenix.js given the link's jitter, in the raw column.
      row('reconnect storm', `close ${code}: peak 100 ms window of upgrades the server saw; raw column: raw phoenix.js given the link's jitter`, '%', link.peakShare * 100, jittered.peakShare * 100, null),
    )
  }
  for (const r of results) process.stderr.write(`storm ${r.kind} close ${r.code}: scheduled per 100 ms: ${sparkline(r.scheduled)}\n  upgrades seen per 100 ms: ${sparkline(r.histogram)}\n`)
  ;(run as { histograms?: StormResult[] }).histograms = results
  return rows
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const rows = await run()
  console.log(JSON.stringify({ rows, histograms: (run as { histograms?: StormResult[] }).histograms }))
}
