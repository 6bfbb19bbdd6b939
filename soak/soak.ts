/**
 * `npm run soak`: N links for M minutes against a simulator (in its own process) that injects
 * random faults: closes of every kind of code, aborts without a close frame, stalls (dead peer),
 * supersedes, and control signals to slow handlers. Checked throughout and at the end:
 *
 * - control signals reach the handler at most once and in order; every signal sent while no
 *   fault hit its link from 2 s before to 1 s after is delivered;
 * - a session that ended terminally (superseded, rejected, suppressed) never opens another
 *   connection until the host connects again (the simulator counts upgrades per agent);
 * - nothing reaches the process as an uncaught exception or unhandled rejection;
 * - heap (after GC) and active handles stay flat: the slope over the run after warm-up is
 *   reported, and the run fails when the heap grows by half and more than 512 KiB a minute, or
 *   handles grow past the links' own.
 *
 * Usage: npm run soak -- [--links 50] [--minutes 10] [--seed 1] [--fault-every-ms 40] [--json]
 * Exit code 0 when every check holds, 1 otherwise.
 */
import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Command, InvalidArgumentError } from 'commander'
import { createLink, type Link } from '../src/link.js'
import type { LinkPolicyInput } from '../src/policy.js'
import type { SoakCommand } from './sim-process.js'

function whole(min: number) {
  return (value: string) => {
    const n = Number(value)
    if (!Number.isFinite(n) || n < min) throw new InvalidArgumentError(`must be a number >= ${min}`)
    return n
  }
}

const program = new Command('soak')
  .description('links under random faults for a while; checks ordering, terminal sessions, crashes, heap and handles')
  .option('--links <n>', 'links', whole(1), 50)
  .option('--minutes <m>', 'duration in minutes (fractions allowed)', whole(0.05), 10)
  .option('--seed <n>', 'seed of the fault sequence', whole(0), 1)
  .option('--fault-every-ms <ms>', 'one fault or control signal every this many ms, across all links', whole(1), 40)
  .option('--json', 'print the summary as one JSON line', false)
  .parse()
const options = program.opts<{ links: number; minutes: number; seed: number; faultEveryMs: number; json: boolean }>()

const gc = (globalThis as { gc?: () => void }).gc
if (!gc) {
  console.error('soak: run with node --expose-gc (npm run soak does)')
  process.exit(1)
}

/** Heartbeat and close timeout of the soak's links: a stalled peer is noticed within a second. */
const SOAK_TRANSPORT = { heartbeatIntervalMs: 500, closeTimeoutMs: 300 }

/** Small delays so faults cycle fast; a stalled peer is noticed within a second. */
const SOAK_POLICY: LinkPolicyInput = {
  reconnect: {
    initialDelayMs: 50,
    maxDelayMs: 1_000,
    goingAwayFloorMs: [0, 200],
    serviceRestartFloorMs: [100, 300],
    tryAgainLaterFloorMs: [200, 400],
    rapidWindowMs: 200,
    stableAfterMs: 2_000,
    maxRetryAfterMs: 1_000,
  },
  transport: SOAK_TRANSPORT,
  connection: { connectTimeoutMs: 2_000, joinTimeoutMs: 1_000, leaveTimeoutMs: 300 },
}

/** mulberry32: a seeded random source, so a failing run can be replayed with --seed. */
function seeded(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
/** The fault sequence: the same --seed gives the same faults in the same order (how many fit depends on speed). */
const random = seeded(options.seed)
/** Slow control handlers draw from their own source, so handler timing never shifts the fault sequence. */
const handlerRandom = seeded(options.seed + 0x9e3779b9)
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!

// ---- the simulator process -------------------------------------------------------------------

const child = fork(fileURLToPath(new URL('./sim-process.ts', import.meta.url)), [], {
  execArgv: ['--import', 'tsx'],
  stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
})
const pending = new Map<number, (result: unknown) => void>()
let nextId = 1
child.on('message', (m: { id: number; result: unknown }) => {
  pending.get(m.id)?.(m.result)
  pending.delete(m.id)
})
function sim<T>(command: SoakCommand): Promise<T> {
  const id = nextId++
  return new Promise((resolve) => {
    pending.set(id, resolve as (r: unknown) => void)
    child.send({ ...command, id })
  })
}
const url = await new Promise<string>((resolve, reject) => {
  child.once('exit', (code) => reject(new Error(`simulator process exited with ${code}`)))
  pending.set(0, (r) => resolve(r as string))
})

// ---- the links and what is checked -----------------------------------------------------------

interface Tracked {
  agent: string
  link: Link
  /** Highest control sequence handed to the handler. */
  lastDelivered: number
  /** Signals sent in the last few seconds (older ones are settled and dropped, so the soak's own memory stays flat). */
  sent: Map<number, { at: number; sockets: number; delivered: boolean }>
  faults: number[]
  /** Upgrades the simulator had counted when the session ended terminally; null while not terminated. */
  upgradesAtTerminal: number | null
  /** A supersede pushed to a healthy connection: when, and the agent's upgrade count then. */
  superseded: { at: number; upgrades: number } | null
  /** When the session last ended terminally. */
  lastTerminalAt: number
  restarting: boolean
  terminals: number
}

const problems: string[] = []
const counts = { supersedesChecked: 0, faults: 0, signalsSent: 0, signalsDelivered: 0, terminals: 0, restarts: 0, disconnects: 0 }
const byFault: Record<string, number> = {}
process.on('uncaughtException', (error) => problems.push(`uncaught exception: ${error.stack ?? error}`))
process.on('unhandledRejection', (error) => problems.push(`unhandled rejection: ${String(error)}`))

const tracked: Tracked[] = []
for (let i = 0; i < options.links; i++) {
  const agent = `soak-${i}`
  const t: Tracked = { agent, link: null as unknown as Link, lastDelivered: 0, sent: new Map(), faults: [], upgradesAtTerminal: null, superseded: null, lastTerminalAt: -1, restarting: false, terminals: 0 }
  t.link = createLink({
    url,
    agentId: agent,
    apiKey: 'soak-key',
    policy: SOAK_POLICY,
    onControl: async (signal) => {
      const sequence = Number(String(signal.correlationId).split(':')[1])
      // Sequences rise per agent, so a repeat or a step back is a duplicate or a reordering.
      if (sequence === t.lastDelivered) problems.push(`${agent}: signal ${sequence} delivered twice`)
      else if (sequence < t.lastDelivered) problems.push(`${agent}: signal ${sequence} delivered after ${t.lastDelivered}`)
      const entry = t.sent.get(sequence)
      if (entry) entry.delivered = true
      t.lastDelivered = Math.max(t.lastDelivered, sequence)
      counts.signalsDelivered++
      // A slow handler now and then: it holds the queue while faults arrive.
      if (handlerRandom() < 0.2) await new Promise((resolve) => setTimeout(resolve, Math.floor(handlerRandom() * 150)))
    },
  })
  t.link.on('disconnected', ({ terminal }) => {
    counts.disconnects++
    if (!terminal) return
    counts.terminals++
    t.terminals++
    t.lastTerminalAt = performance.now()
    void (async () => {
      t.upgradesAtTerminal = await sim<number>({ cmd: 'upgrades', agent })
      restart(t)
    })()
  })
  tracked.push(t)
}

/** When the host connects again after a terminal end: a random 300-2500 ms later (past the supersede's retry_after of 1 s). */
const hostRandom = seeded(options.seed + 0x7f4a7c15)

/**
 * The host's answer to a terminal end: wait, check that nothing reconnected meanwhile (counted by
 * the simulator, not taken from the link), connect again.
 */
function restart(t: Tracked): void {
  if (t.restarting) return
  t.restarting = true
  setTimeout(() => {
    void (async () => {
      const now = await sim<number>({ cmd: 'upgrades', agent: t.agent })
      if (t.upgradesAtTerminal !== null && now !== t.upgradesAtTerminal) {
        problems.push(`${t.agent}: ${now - t.upgradesAtTerminal} connection(s) opened after a terminal end, before the host connected again`)
      }
      if (t.superseded) counts.supersedesChecked++
      if (t.superseded && now !== t.superseded.upgrades) {
        problems.push(`${t.agent}: ${now - t.superseded.upgrades} connection(s) opened after a supersede, before the host connected again`)
      }
      t.upgradesAtTerminal = null
      t.superseded = null
      t.restarting = false
      counts.restarts++
      await t.link.connect().catch(() => {}) // a terminal end during this connect is handled by the listener
    })()
  }, 300 + Math.floor(hostRandom() * 2_200))
}

/** A supersede pushed to a healthy connection must end the session: checked by the simulator's count, not the link's verdict. */
async function checkSupersedes(now: number): Promise<void> {
  for (const t of tracked) {
    const s = t.superseded
    if (!s || now - s.at < 3_000 || t.restarting) continue
    t.superseded = null
    counts.supersedesChecked++
    if (t.lastTerminalAt < s.at) problems.push(`${t.agent}: a supersede at ${Math.round(s.at)} ms did not end the session within 3 s (state ${t.link.state})`)
    const upgrades = await sim<number>({ cmd: 'upgrades', agent: t.agent })
    if (upgrades !== s.upgrades) problems.push(`${t.agent}: ${upgrades - s.upgrades} connection(s) opened after a supersede`)
  }
}

const started = performance.now()
for (let i = 0; i < tracked.length; i += 25) await Promise.all(tracked.slice(i, i + 25).map((t) => t.link.connect()))
const setupMs = performance.now() - started

// ---- faults ----------------------------------------------------------------------------------

const CLOSE_CODES = [1000, 1001, 1002, 1003, 1007, 1009, 1011, 1012, 1013, 4000, 4001, 1008, 4500] as const
let sequence = 0
async function injectOne(): Promise<void> {
  const t = pick(tracked)
  const roll = random()
  const now = performance.now()
  if (roll < 0.45) {
    sequence++
    // Recorded before sending: the handler may run before the simulator's answer comes back.
    const entry = { at: now, sockets: 0, delivered: false }
    t.sent.set(sequence, entry)
    entry.sockets = await sim<number>({ cmd: 'control', agent: t.agent, sequence })
    counts.signalsSent++
    return
  }
  counts.faults++
  t.faults.push(now)
  if (roll < 0.75) {
    const code = pick(CLOSE_CODES)
    byFault[`close ${code}`] = (byFault[`close ${code}`] ?? 0) + 1
    await sim({ cmd: 'close', agent: t.agent, code })
  } else if (roll < 0.87) {
    byFault.abort = (byFault.abort ?? 0) + 1
    await sim({ cmd: 'abort', agent: t.agent })
  } else if (roll < 0.93) {
    byFault.stall = (byFault.stall ?? 0) + 1
    await sim({ cmd: 'stall', agent: t.agent })
  } else {
    byFault.supersede = (byFault.supersede ?? 0) + 1
    // A clean supersede: no other fault on this link lately, so the push reaches a connection the link still reads.
    const clean = !t.faults.some((f) => f < now && f >= now - HEALTHY_BEFORE_MS) && t.link.state === 'connected'
    const result = await sim<{ sockets: number; upgrades: number }>({ cmd: 'supersede', agent: t.agent })
    if (clean && result.sockets > 0 && !t.superseded) t.superseded = { at: now, upgrades: result.upgrades }
  }
}

/**
 * A signal must be delivered when no fault hit its link from HEALTHY_BEFORE_MS before it was sent
 * to HEALTHY_AFTER_MS after. Before: a stalled socket stays open on the server until the client
 * has noticed (two heartbeat intervals) and given up on it (close timeout), so a signal pushed
 * to it in that time goes to a socket the client no longer reads. After: a close or supersede
 * soon after the push may end the socket or the session before the frame is read or handled.
 */
// Two heartbeat intervals to notice, the close timeout to give up, and 700 ms of slack for a busy loop.
const HEALTHY_BEFORE_MS = 2 * SOAK_TRANSPORT.heartbeatIntervalMs + SOAK_TRANSPORT.closeTimeoutMs + 700
const HEALTHY_AFTER_MS = 1_000
const mustDeliver = (t: Tracked, sent: { at: number; sockets: number }) =>
  sent.sockets > 0 && !t.faults.some((f) => f >= sent.at - HEALTHY_BEFORE_MS && f <= sent.at + HEALTHY_AFTER_MS)
/** Signals older than this are settled: counted, checked, and forgotten. */
const SETTLE_AFTER_MS = 8_000
let mustDeliverCount = 0
/** Checks and forgets signals sent more than SETTLE_AFTER_MS ago, and faults no signal can be judged by any more. */
function settleOld(now: number): void {
  for (const t of tracked) {
    for (const [sequence, entry] of t.sent) {
      if (now - entry.at < SETTLE_AFTER_MS) break // insertion order is send order
      if (mustDeliver(t, entry)) {
        mustDeliverCount++
        if (!entry.delivered) problems.push(`signal ${t.agent}:${sequence} was sent on a healthy connection and never delivered`)
      }
      t.sent.delete(sequence)
    }
    while (t.faults.length > 0 && now - t.faults[0]! > SETTLE_AFTER_MS + HEALTHY_BEFORE_MS) t.faults.shift()
  }
}

// ---- heap and handles ------------------------------------------------------------------------

const samples: Array<{ minute: number; heap: number; handles: number }> = []
function sample(): void {
  gc!()
  samples.push({
    minute: (performance.now() - started) / 60_000,
    heap: process.memoryUsage().heapUsed,
    handles: process.getActiveResourcesInfo().length,
  })
}

/** Least-squares slope of y over x. */
function slope(points: Array<[number, number]>): number {
  const n = points.length
  if (n < 2) return 0
  const mx = points.reduce((s, [x]) => s + x, 0) / n
  const my = points.reduce((s, [, y]) => s + y, 0) / n
  const num = points.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0)
  const den = points.reduce((s, [x]) => s + (x - mx) ** 2, 0)
  return den === 0 ? 0 : num / den
}

const durationMs = options.minutes * 60_000
const sampleEveryMs = Math.min(5_000, Math.max(500, durationMs / 24))
let nextSample = performance.now() + sampleEveryMs
const faultStart = performance.now()
while (performance.now() - faultStart < durationMs) {
  await injectOne()
  if (performance.now() >= nextSample) {
    settleOld(performance.now())
    await checkSupersedes(performance.now())
    sample()
    nextSample += sampleEveryMs
  }
  await new Promise((resolve) => setTimeout(resolve, options.faultEveryMs))
}

// ---- quiet: every link back, every deliverable signal delivered ------------------------------

const quietDeadline = performance.now() + 15_000
while (tracked.some((t) => t.link.state !== 'connected' || t.restarting)) {
  if (performance.now() > quietDeadline) {
    problems.push(`after the faults stopped, ${tracked.filter((t) => t.link.state !== 'connected').length} link(s) were not connected within 15 s`)
    break
  }
  await new Promise((resolve) => setTimeout(resolve, 50))
}
const missing = () =>
  tracked.flatMap((t) => [...t.sent].filter(([, e]) => !e.delivered && mustDeliver(t, e)).map(([sq]) => `${t.agent}:${sq}`))
const drainDeadline = performance.now() + 5_000
while (missing().length > 0 && performance.now() < drainDeadline) await new Promise((resolve) => setTimeout(resolve, 50))
settleOld(Number.POSITIVE_INFINITY)
sample()

// ---- verdict ---------------------------------------------------------------------------------

const warm = samples.filter((s) => s.minute >= samples[0]!.minute + (samples.at(-1)!.minute - samples[0]!.minute) * 0.2)
const heapSlope = slope(warm.map((s) => [s.minute, s.heap]))
const handleSlope = slope(warm.map((s) => [s.minute, s.handles]))
const firstWarm = warm[0]!
const last = samples.at(-1)!
// Bounded structures fill during a run (each link's dedupe window of up to 1,024 correlation
// ids, the soak's own last seconds of bookkeeping), so a healthy run shows some slope; a leak of
// even a few KiB per disconnect shows a steeper one and a heap a quarter larger.
if (heapSlope > 1024 * 1024 && last.heap > firstWarm.heap * 1.25) {
  problems.push(`heap grows: ${(heapSlope / 1024).toFixed(0)} KiB/min, ${(firstWarm.heap / 2 ** 20).toFixed(1)} -> ${(last.heap / 2 ** 20).toFixed(1)} MiB`)
}
if (last.handles > firstWarm.handles + options.links) {
  problems.push(`handles grow: ${firstWarm.handles} -> ${last.handles} (slope ${handleSlope.toFixed(1)}/min)`)
}

await Promise.all(tracked.map((t) => t.link.disconnect()))
await sim({ cmd: 'stop' })
// Give closing sockets and the simulator process a moment to go, then count what is left.
const settleDeadline = performance.now() + 3_000
const leftOpen = () => process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap' && r !== 'PipeWrap' && r !== 'ProcessWrap' && r !== 'FSReqCallback')
while (leftOpen().length > 0 && performance.now() < settleDeadline) await new Promise((resolve) => setImmediate(resolve))
const afterStop = leftOpen()
if (afterStop.length > 0) problems.push(`handles left after every link stopped: ${afterStop.join(', ')}`)
const summary = {
  ok: problems.length === 0,
  links: options.links,
  minutes: options.minutes,
  seed: options.seed,
  setupMs: Math.round(setupMs),
  faults: counts.faults,
  byFault,
  signals: { sent: counts.signalsSent, delivered: counts.signalsDelivered, mustDeliver: mustDeliverCount },
  disconnects: counts.disconnects,
  terminalEnds: counts.terminals,
  supersedesChecked: counts.supersedesChecked,
  hostRestarts: counts.restarts,
  heap: { firstMiB: +(firstWarm.heap / 2 ** 20).toFixed(2), lastMiB: +(last.heap / 2 ** 20).toFixed(2), slopeKiBPerMin: +(heapSlope / 1024).toFixed(1) },
  handles: { first: firstWarm.handles, last: last.handles, slopePerMin: +handleSlope.toFixed(2), afterStop: afterStop.length },
  samples: samples.length,
  problems: problems.slice(0, 20),
}
if (options.json) {
  console.log(JSON.stringify(summary))
} else {
  console.log(`soak: ${options.links} links, ${options.minutes} min, seed ${options.seed}`)
  console.log(`  faults ${summary.faults} (${Object.entries(byFault).map(([k, v]) => `${k}: ${v}`).join(', ')})`)
  console.log(`  control signals sent ${summary.signals.sent}, delivered ${summary.signals.delivered}, of which sent on a healthy connection ${summary.signals.mustDeliver}`)
  console.log(`  disconnects ${summary.disconnects}, terminal ends ${summary.terminalEnds}, host restarts ${summary.hostRestarts}; supersedes on healthy connections checked by the server's count ${summary.supersedesChecked}`)
  console.log(`  heap ${summary.heap.firstMiB} -> ${summary.heap.lastMiB} MiB, slope ${summary.heap.slopeKiBPerMin} KiB/min (${samples.length} samples after GC)`)
  console.log(`  handles ${summary.handles.first} -> ${summary.handles.last}, slope ${summary.handles.slopePerMin}/min; after stop ${summary.handles.afterStop}`)
  console.log(problems.length === 0 ? '  every check held' : `  PROBLEMS:\n    ${problems.slice(0, 20).join('\n    ')}`)
}
// Exit explicitly: a leaked handle must fail the run, not keep it waiting forever.
process.stdout.write('', () => process.exit(problems.length === 0 ? 0 : 1))
