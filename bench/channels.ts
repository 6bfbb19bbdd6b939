/**
 * Channel churn: an agent that joins a room per task and leaves it when the task ends, for days.
 * Heap kept per finished channel (joined then left, or refused by the server), on one socket and
 * across reconnects, over 50,000 cycles, beside the raw phoenix.js client doing the same.
 * Each kind runs in a fresh process with the simulator in a child process; the slope is taken
 * after a warm-up and over the data spaces of the heap, so module state and JIT code are not counted.
 *
 * Run alone: `npm run bench -- channels`. test/wire/long-life.test.ts runs `cycles()` on a link.
 */
import { getHeapSpaceStatistics } from 'node:v8'
import type { Channel } from 'phoenix'
import { createLink, type Link } from '../src/link.js'
import { inFreshProcess, rawClient, row, settleHeap, SimChild, until, type Row } from './common.js'

export const CYCLES = Number(process.env.BENCH_CHANNEL_CYCLES ?? 50_000)
/** Cycles before the first heap reading. */
export const WARMUP = 1_000
/** How a cycle ends: the host leaves a joined channel, or the server refuses the join. */
export type CycleMode = 'left' | 'refused'
/** Topics the simulator refuses (bench/sim-child.ts and the wire test script their join rule). */
export const REFUSED_PREFIX = 'room:refused-'

/** One client that can run channel cycles: the link, or a raw phoenix.js socket. */
export interface Cycler {
  /** Joins `topic` and ends it as `mode` says; resolves when the channel is over. */
  cycle(topic: string, mode: CycleMode): Promise<void>
  /** Resolves when the client is connected again after a server close. */
  connected(): Promise<void>
  close(): Promise<void>
}

/** A link as a {@link Cycler}. */
export function linkCycler(link: Link): Cycler {
  return {
    async cycle(topic, mode) {
      const channel = link.channel(topic)
      await until(() => channel.status === 'joined' || channel.status === 'dropped', 10_000, `${topic} to join or drop`)
      if (mode === 'left') {
        channel.leave()
        await until(() => channel.status === 'left', 10_000, `${topic} to be left`)
      }
    },
    connected: () => until(() => link.state === 'connected', 20_000, 'the link to reconnect'),
    close: () => link.disconnect(),
  }
}

async function rawCycler(url: string, agent: string): Promise<Cycler> {
  const raw = await rawClient(url, agent)
  return {
    cycle(topic) {
      const channel: Channel = raw.socket.channel(topic)
      // A refused join retries for ever in phoenix.js (rejoin timer) until left; a joined one is left.
      return new Promise<void>((resolve, reject) => {
        const leave = () => channel.leave().receive('ok', () => resolve()).receive('timeout', () => resolve())
        channel.join().receive('ok', leave).receive('error', leave).receive('timeout', () => reject(new Error(`${topic}: join timed out`)))
      })
    },
    connected: () => until(() => raw.socket.isConnected() && raw.control.state === 'joined', 20_000, 'phoenix.js to reconnect'),
    close: raw.close,
  }
}

/**
 * Runs `count` cycles from `start`, and after every `reconnectEvery` (when given) has the server
 * close the socket (`closeAll`) and waits for the client to be connected again.
 */
export async function cycles(cycler: Cycler, mode: CycleMode, start: number, count: number, reconnect?: { every: number; closeAll: () => Promise<void> }): Promise<void> {
  for (let i = start; i < start + count; i++) {
    await cycler.cycle(mode === 'refused' ? `${REFUSED_PREFIX}${i}` : `room:task-${i}`, mode)
    if (reconnect && (i + 1) % reconnect.every === 0) {
      await reconnect.closeAll()
      await cycler.connected()
    }
  }
}

/**
 * Bytes of heap that hold data, after GC: every V8 space but the code spaces, whose size moves
 * with what the JIT compiles (the reconnect path compiles late), not with what a program keeps.
 */
function dataHeapUsed(): number {
  return getHeapSpaceStatistics()
    .filter((space) => !space.space_name.startsWith('code_'))
    .reduce((sum, space) => sum + space.space_used_size, 0)
}

/**
 * Data heap (after GC) kept per cycle, in bytes: the least-squares slope of five readings, the
 * first after the warm-up and one after each fifth of `count` more cycles (one reading's GC noise
 * moves a two-point difference by tens of bytes per cycle at ten thousand cycles).
 */
export async function heapPerCycle(run: (start: number, count: number) => Promise<void>, count: number): Promise<number> {
  await run(0, WARMUP)
  const readings: Array<[number, number]> = []
  const read = async (done: number) => {
    await settleHeap()
    readings.push([done, dataHeapUsed()])
  }
  await read(0)
  const step = Math.ceil(count / 4)
  for (let done = 0; done < count; done += step) {
    const n = Math.min(step, count - done)
    await run(WARMUP + done, n)
    await read(done + n)
  }
  const mx = readings.reduce((s, [x]) => s + x, 0) / readings.length
  const my = readings.reduce((s, [, y]) => s + y, 0) / readings.length
  const num = readings.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0)
  const den = readings.reduce((s, [x]) => s + (x - mx) ** 2, 0)
  return den === 0 ? 0 : num / den
}

interface Measured {
  kind: 'link' | 'raw'
  left: number
  refused: number
  acrossReconnects: number
}

async function measure(kind: 'link' | 'raw', count: number): Promise<Measured> {
  const sim = await SimChild.start()
  const open = async (agent: string): Promise<Cycler> => {
    if (kind === 'raw') return rawCycler(sim.url, agent)
    const link = createLink({ url: sim.url, agentId: agent, apiKey: 'bench-key', policy: { reconnect: { initialDelayMs: 10, maxDelayMs: 50, goingAwayFloorMs: [0, 10], rapidWindowMs: 20 } } })
    await link.connect()
    return linkCycler(link)
  }
  try {
    const out: Partial<Measured> = { kind }
    for (const [key, mode, reconnect] of [
      ['left', 'left', false],
      ['refused', 'refused', false],
      ['acrossReconnects', 'left', true],
    ] as const) {
      const cycler = await open(`churn-${kind}-${key}`)
      const closeAll = async () => void (await sim.send({ cmd: 'close-all', code: 1000 }))
      out[key] = await heapPerCycle((start, n) => cycles(cycler, mode, start, n, reconnect ? { every: 500, closeAll } : undefined), count)
      await cycler.close()
    }
    return out as Measured
  } finally {
    await sim.stop()
  }
}

export async function run(): Promise<Row[]> {
  const file = './channels.js'
  const raw = await inFreshProcess<Measured>(file, ['raw', String(CYCLES)])
  const link = await inFreshProcess<Measured>(file, ['link', String(CYCLES)])
  const per10k = (bytes: number) => (bytes * 10_000) / 1024
  // Noise: a slope of a few bytes per cycle either way (a leak of one small object per channel is ~100 bytes).
  const target = { text: 'within noise of 0 (|x| <= 100 KiB: 10 bytes a channel)', met: (l: number) => Math.abs(l) <= 100 }
  const n = CYCLES.toLocaleString('en-US')
  return [
    row('channel churn', `heap kept per 10,000 channels joined and left (${n} cycles, one socket)`, 'KiB', per10k(link.left), per10k(raw.left), target),
    row('channel churn', 'heap kept per 10,000 channels the server refused', 'KiB', per10k(link.refused), per10k(raw.refused), target),
    row('channel churn', 'heap kept per 10,000 channels joined and left, the socket closed every 500', 'KiB', per10k(link.acrossReconnects), per10k(raw.acrossReconnects), target),
  ]
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const kind = process.argv[2]
  if (kind === 'link' || kind === 'raw') console.log(JSON.stringify(await measure(kind, Number(process.argv[3] ?? CYCLES))))
  else console.log(JSON.stringify(await run()))
}
