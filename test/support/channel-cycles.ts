/**
 * Heap kept per finished app channel on one link, for test/wire/long-life.test.ts: run in its own
 * process with --expose-gc (`node --expose-gc --import tsx test/support/channel-cycles.ts <mode>
 * <cycles>`, mode `left`, `refused` or `reconnect`), the simulator in a child process of its own
 * (bench/sim-child.ts), so the heap measured is the link's alone. Prints one JSON line
 * `{ mode, cycles, bytesPerCycle }`; the cycles are bench/channels.ts's.
 */
import { createLink } from '../../src/link.js'
import { SimChild } from '../../bench/common.js'
import { cycles, heapPerCycle, linkCycler } from '../../bench/channels.js'

const mode = process.argv[2] as 'left' | 'refused' | 'reconnect'
const count = Number(process.argv[3] ?? 3000)
const sim = await SimChild.start()
try {
  const link = createLink({
    url: sim.url,
    agentId: 'churn',
    apiKey: 'churn-key',
    policy: { reconnect: { initialDelayMs: 10, maxDelayMs: 50, goingAwayFloorMs: [0, 10], rapidWindowMs: 20 } },
  })
  await link.connect()
  const cycler = linkCycler(link)
  const reconnect = mode === 'reconnect' ? { every: 250, closeAll: async () => void (await sim.send({ cmd: 'close-all', code: 1000 })) } : undefined
  const bytesPerCycle = await heapPerCycle((start, n) => cycles(cycler, mode === 'refused' ? 'refused' : 'left', start, n, reconnect), count)
  await link.disconnect()
  console.log(JSON.stringify({ mode, cycles: count, bytesPerCycle }))
} finally {
  await sim.stop()
}
