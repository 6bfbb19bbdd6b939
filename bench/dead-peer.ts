/**
 * Dead peer: the simulator stops answering heartbeats and reading (stalled, TCP still open), and
 * the client must notice on its own. Time from the stall until the client reports the loss
 * (phoenix-link: `disconnected` with reason `timed-out` (phase `heartbeat`); raw phoenix.js: the control
 * channel's onError, which socket.js heartbeatTimeout() triggers) and until the server sees the
 * client's next upgrade. Heartbeat interval 1,000 ms on both; 20 clients of each kind stalled at
 * once, at random points of their heartbeat cycle.
 *
 * Run alone: `npm run bench -- dead-peer`.
 */
import { createLink, type Link } from '../src/link.js'
import { median, percentile, rawClient, row, SimChild, printIfMain, type Row } from './common.js'

const HEARTBEAT_MS = 1_000
const CLIENTS = 20

export async function run(): Promise<Row[]> {
  const sim = await SimChild.start()
  const links: Link[] = []
  const raws: Array<Awaited<ReturnType<typeof rawClient>>> = []
  const detected = new Map<string, number>()
  try {
    for (let i = 0; i < CLIENTS; i++) {
      const agent = `dead-link-${i}`
      const link = createLink({
        url: sim.url,
        agentId: agent,
        apiKey: 'bench-key',
        policy: { transport: { heartbeatIntervalMs: HEARTBEAT_MS } },
      })
      link.on('disconnected', ({ reason }) => {
        if (reason.kind === 'timed-out' && reason.phase === 'heartbeat' && !detected.has(agent)) detected.set(agent, performance.now())
      })
      await link.connect()
      links.push(link)
      const rawAgent = `dead-raw-${i}`
      const raw = await rawClient(sim.url, rawAgent, { heartbeatIntervalMs: HEARTBEAT_MS })
      raw.control.onError(() => {
        if (!detected.has(rawAgent)) detected.set(rawAgent, performance.now())
      })
      raws.push(raw)
      // Spread the clients over the heartbeat cycle.
      await new Promise((resolve) => setTimeout(resolve, HEARTBEAT_MS / CLIENTS))
    }
    // Stalled one by one, link and raw interleaved; each is timed from its own stall, on the
    // client's clock (detection) and on the simulator's (next upgrade).
    const agents = Array.from({ length: CLIENTS }, (_, i) => [`dead-link-${i}`, `dead-raw-${i}`]).flat()
    const stalledAt = new Map<string, number>()
    const serverStalledAt = new Map<string, number>()
    const { at: since } = await sim.send<{ at: number }>({ cmd: 'now' })
    for (const agent of agents) {
      stalledAt.set(agent, performance.now())
      serverStalledAt.set(agent, (await sim.send<{ at: number }>({ cmd: 'stall', agent })).at)
    }
    const deadline = performance.now() + 4 * HEARTBEAT_MS + 5_000
    let first: Record<string, number> = {}
    while (Object.keys(first).length < agents.length || detected.size < agents.length) {
      if (performance.now() > deadline) throw new Error(`only ${detected.size} of ${agents.length} clients noticed the dead peer`)
      await new Promise((resolve) => setTimeout(resolve, 100))
      first = (await sim.send<{ first: Record<string, number> }>({ cmd: 'next-upgrades', agents, since })).first
    }
    const of = (prefix: string, values: Map<string, number> | Record<string, number>, from: Map<string, number>) =>
      Object.entries(values instanceof Map ? Object.fromEntries(values) : values)
        .filter(([agent]) => agent.startsWith(prefix))
        .map(([agent, at]) => at - from.get(agent)!)
        .sort((a, b) => a - b)
    const linkDetect = of('dead-link-', detected, stalledAt)
    const rawDetect = of('dead-raw-', detected, stalledAt)
    const linkRetry = of('dead-link-', first, serverStalledAt)
    const rawRetry = of('dead-raw-', first, serverStalledAt)
    const bound = { text: `<= ${2 * HEARTBEAT_MS} ms (interval + timeout)`, met: (l: number) => l <= 2 * HEARTBEAT_MS }
    return [
      row('dead peer', `stall to loss reported, median of ${CLIENTS} (heartbeat ${HEARTBEAT_MS} ms)`, 'ms', median(linkDetect), median(rawDetect), bound),
      row('dead peer', 'stall to loss reported, worst', 'ms', percentile(linkDetect, 100), percentile(rawDetect, 100), bound),
      row('dead peer', 'stall to next upgrade seen by the server, worst (link: default backoff, first delay <= 500 ms)', 'ms', percentile(linkRetry, 100), percentile(rawRetry, 100), null),
    ]
  } finally {
    await Promise.all(links.map((link) => link.disconnect()))
    await Promise.all(raws.map((raw) => raw.close()))
    await sim.stop()
  }
}

await printIfMain(import.meta.url, run)
