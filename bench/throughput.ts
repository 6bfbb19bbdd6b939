/**
 * Push throughput: 200,000 small pushes on an app channel to one client; events per second
 * delivered to the handler, and the client's CPU time per event. The simulator runs in its own
 * process and writes all the pushes in one TCP write, so the client's reading and dispatching is
 * what is measured; the client process holds one phoenix-link link and one raw phoenix.js
 * socket, measured in alternating rounds so both see the same machine.
 *
 * Run alone: `npm run bench -- throughput`.
 */
import { createLink } from '../src/link.js'
import { median, rawClient, row, SimChild, within, printIfMain, type Row } from './common.js'

export const PUSHES = Number(process.env.BENCH_PUSHES ?? 200_000)
const ROUNDS = 5
const TOPIC = 'room:bench'

export async function run(): Promise<Row[]> {
  const sim = await SimChild.start()
  const link = createLink({ url: sim.url, agentId: 'tp-link', apiKey: 'bench-key' })
  const raw = await rawClient(sim.url, 'tp-raw', { app: TOPIC })
  try {
    await link.connect()
    const channel = link.channel(TOPIC)
    await within(channel.joined(), 5000, 'the link to join the app channel')

    let count = 0
    let done: (() => void) | null = null
    const onTick = () => {
      if (++count === PUSHES) done?.()
    }
    channel.on('tick', onTick)
    raw.app!.on('tick', onTick)

    const measure = async (agent: string) => {
      count = 0
      const finished = new Promise<void>((resolve) => (done = resolve))
      const cpu = process.cpuUsage()
      const started = performance.now()
      await sim.send({ cmd: 'push', agent, topic: TOPIC, count: PUSHES })
      await finished
      const ms = performance.now() - started
      const used = process.cpuUsage(cpu)
      return { perSecond: PUSHES / (ms / 1000), cpuUsPerEvent: (used.user + used.system) / PUSHES }
    }

    // Two warm-up rounds each (JIT, buffers), then rounds in alternating order so neither kind
    // always runs first.
    for (let i = 0; i < 2; i++) {
      await measure('tp-raw')
      await measure('tp-link')
    }
    const rawRuns: Array<{ perSecond: number; cpuUsPerEvent: number }> = []
    const linkRuns: Array<{ perSecond: number; cpuUsPerEvent: number }> = []
    for (let i = 0; i < ROUNDS; i++) {
      if (i % 2 === 0) {
        rawRuns.push(await measure('tp-raw'))
        linkRuns.push(await measure('tp-link'))
      } else {
        linkRuns.push(await measure('tp-link'))
        rawRuns.push(await measure('tp-raw'))
      }
    }
    const linkRate = median(linkRuns.map((r) => r.perSecond))
    const rawRate = median(rawRuns.map((r) => r.perSecond))
    return [
      row('push throughput', `${PUSHES.toLocaleString('en-US')} pushes, events/s (median of ${ROUNDS})`, 'events/s', linkRate, rawRate, {
        text: '>= 0.95x raw',
        met: (l, r) => l >= 0.95 * r!,
      }),
      row('push throughput', 'client CPU per event', 'µs', median(linkRuns.map((r) => r.cpuUsPerEvent)), median(rawRuns.map((r) => r.cpuUsPerEvent)), null),
    ]
  } finally {
    await link.disconnect()
    await raw.close()
    await sim.stop()
  }
}

await printIfMain(import.meta.url, run)
