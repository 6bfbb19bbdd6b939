/**
 * Reconnect latency: the simulator closes the client's socket with 1001 (going away) and times,
 * on its own clock, how long until that client's control channel is joined again. Zero backoff
 * floor on both sides: phoenix-link with `initialDelayMs: 0` and `goingAwayFloorMs: [0, 0]`, raw
 * phoenix.js with `reconnectAfterMs: () => 0`. Median and p99 over 1,000 closes each, alternating.
 *
 * Run alone: `npm run bench -- latency`.
 */
import { createLink } from '../src/link.js'
import { percentile, rawClient, row, SimChild, printIfMain, type Row } from './common.js'

export const CLOSES = Number(process.env.BENCH_CLOSES ?? 1_000)

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
  try {
    await link.connect()
    const once = async (agent: string) => (await sim.send<{ ms: number }>({ cmd: 'close-until-rejoined', agent, code: 1001, timeoutMs: 5000 })).ms
    for (let i = 0; i < 20; i++) {
      await once('lat-raw')
      await once('lat-link')
    }
    const linkMs: number[] = []
    const rawMs: number[] = []
    for (let i = 0; i < CLOSES; i++) {
      rawMs.push(await once('lat-raw'))
      linkMs.push(await once('lat-link'))
    }
    linkMs.sort((a, b) => a - b)
    rawMs.sort((a, b) => a - b)
    const within1ms = { text: 'within 1 ms of raw', met: (l: number, r: number | null) => l - r! <= 1 }
    return [
      row('reconnect latency', `close 1001 to control rejoined, median of ${CLOSES.toLocaleString('en-US')}`, 'ms', percentile(linkMs, 50), percentile(rawMs, 50), within1ms),
      row('reconnect latency', 'p99', 'ms', percentile(linkMs, 99), percentile(rawMs, 99), within1ms),
    ]
  } finally {
    await link.disconnect()
    await raw.close()
    await sim.stop()
  }
}

await printIfMain(import.meta.url, run)
