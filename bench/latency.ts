/**
 * Reconnect latency: the simulator closes the client's socket with 1001 (going away) and times,
 * on its own clock, how long until that client's control channel is joined again. Zero backoff
 * floor on both sides: phoenix-link with `initialDelayMs: 0` and `goingAwayFloorMs: [0, 0]`, raw
 * phoenix.js with `reconnectAfterMs: () => 0`. Median, p90 and p99 over 1,000 closes each, alternating,
 * and the same split into three stages the server can time; and the client process's CPU per
 * reconnect (user + system, `process.cpuUsage()` around each close-until-rejoined: the other client
 * only idles meanwhile), with the link's chart transitions timed where they run.
 *
 * Run alone: `npm run bench -- latency`.
 */
import { createLink } from '../src/link.js'
import { percentile, rawClient, row, SimChild, printIfMain, timeTransitions, type Row } from './common.js'

export const CLOSES = Number(process.env.BENCH_CLOSES ?? 1_000)

/** One close-until-rejoined as the simulator timed it (bench/sim-child.ts), ms; a stage not seen is null. */
interface Stages {
  /** Close sent to control channel joined again. */
  ms: number
  /** Close sent until the old socket's TCP connection ended on the server (after the client's close frame and its end of the connection). */
  closeSeenMs: number | null
  /** That end to the client's next upgrade the server accepted: the client's close handling, reconnect decision, delay, new socket and handshake. */
  toUpgradeMs: number | null
  /** That upgrade to the control channel joined. */
  toJoinMs: number | null
}

const STAGES = [
  ['closeSeenMs', 'stage 1: close sent to old socket ended'],
  ['toUpgradeMs', 'stage 2: old socket ended to next upgrade accepted'],
  ['toJoinMs', 'stage 3: upgrade to control joined'],
] as const

/** The stage's figures that were seen, ascending. */
function sorted(stages: Stages[], stage: keyof Stages): number[] {
  return stages
    .map((s) => s[stage])
    .filter((ms): ms is number => typeof ms === 'number')
    .sort((a, b) => a - b)
}

export async function run(): Promise<Row[]> {
  const sim = await SimChild.start()
  const link = createLink({
    url: sim.url,
    agentId: 'lat-link',
    apiKey: 'bench-key',
    policy: {
      // Zero floors, and no rapid-loop give-up: this benchmark closes the same socket 1,000 times in a row on purpose.
      reconnect: { initialDelayMs: 0, goingAwayFloorMs: [0, 0], rapidLimit: 1_000_000 },
    },
  })
  const raw = await rawClient(sim.url, 'lat-raw', { reconnectAfterMs: () => 0 })
  let measuringLink = false
  const timed = timeTransitions(() => measuringLink)
  try {
    await link.connect()
    const once = (agent: string) => sim.send<Stages>({ cmd: 'close-until-rejoined', agent, code: 1001, timeoutMs: 5000 })
    for (let i = 0; i < 20; i++) {
      await once('lat-raw')
      await once('lat-link')
    }
    const linkStages: Stages[] = []
    const rawStages: Stages[] = []
    const cpu = { link: 0, raw: 0 }
    const cpuOf = async (agent: string, kind: 'link' | 'raw') => {
      measuringLink = kind === 'link'
      const before = process.cpuUsage()
      const stages = await once(agent)
      const used = process.cpuUsage(before)
      measuringLink = false
      cpu[kind] += used.user + used.system
      return stages
    }
    for (let i = 0; i < CLOSES; i++) {
      rawStages.push(await cpuOf('lat-raw', 'raw'))
      linkStages.push(await cpuOf('lat-link', 'link'))
    }
    const within1ms = { text: 'within 1 ms of raw', met: (l: number, r: number | null) => l - r! <= 1 }
    // Each client's figures of each stage, sorted once.
    const ordered = (stages: Stages[]) => Object.fromEntries((['ms', ...STAGES.map(([stage]) => stage)] as const).map((stage) => [stage, sorted(stages, stage)])) as Record<keyof Stages, number[]>
    const linkMs = ordered(linkStages)
    const rawMs = ordered(rawStages)
    const rows = [
      row('reconnect latency', `close 1001 to control rejoined, median of ${CLOSES.toLocaleString('en-US')}`, 'ms', percentile(linkMs.ms, 50), percentile(rawMs.ms, 50), within1ms),
      row('reconnect latency', 'p90', 'ms', percentile(linkMs.ms, 90), percentile(rawMs.ms, 90), null),
      row('reconnect latency', 'p99', 'ms', percentile(linkMs.ms, 99), percentile(rawMs.ms, 99), within1ms),
    ]
    rows.push(
      row('reconnect latency', `client CPU per reconnect (user + system, mean of ${CLOSES.toLocaleString('en-US')})`, 'µs', cpu.link / CLOSES, cpu.raw / CLOSES, null),
      row('reconnect latency', `of which the link's chart transitions (${(timed.calls / CLOSES).toFixed(1)} per reconnect; XState's transition(), timed in place)`, 'µs', timed.us / CLOSES, null, null),
    )
    // Where the time goes, as the server alone sees it (the same three stages for both clients).
    for (const [stage, what] of STAGES) {
      for (const p of [50, 99]) rows.push(row('reconnect latency', `${what}, p${p}`, 'ms', percentile(linkMs[stage], p), percentile(rawMs[stage], p), null))
    }
    return rows
  } finally {
    await link.disconnect()
    await raw.close()
    await sim.stop()
  }
}

await printIfMain(import.meta.url, run)
