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
 * `--profile week` compresses a week of agent life into the run, on real sockets: every link
 * also works through tasks (a channel joined, pushed to and left per task: tens of thousands of
 * channel cycles), its wall clock steps by hours forward and back every second, its key rotates
 * (the platform accepts old and new for a while, then only the new), its control channel
 * crashes, rival instances of it supersede it, and for a fifth of the run the server accepts and
 * closes every socket (an hour of flapping). Also checked: no session ends but by a supersede (no
 * rejection, no give-up), every link is back within a cooldown once the server holds sockets
 * again, and the time each link spent offline against the time the server refused it.
 *
 * Usage: npm run soak -- [--links 50] [--minutes 10] [--seed 1] [--fault-every-ms 40] [--profile default|week] [--json]
 * Exit code 0 when every check holds, 1 otherwise.
 */
import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Command, InvalidArgumentError, Option } from 'commander'
import { createLink, type Link } from '../src/link.js'
import type { LinkChannel } from '../src/link-channel.js'
import type { LinkPolicyInput } from '../src/policy.js'
import type { SoakCommand } from './sim-process.js'
import { seeded } from '../scripts/seeded.js'

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
  .addOption(new Option('--profile <name>', 'default: random faults; week: a week of agent life compressed (channel churn, clock steps, key rotations, control channel crashes, rival supersedes, a flapping server)').choices(['default', 'week']).default('default'))
  .option('--json', 'print the summary as one JSON line', false)
  .parse()
const options = program.opts<{ links: number; minutes: number; seed: number; faultEveryMs: number; profile: 'default' | 'week'; json: boolean }>()
const week = options.profile === 'week'

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

/**
 * The week's compression: past the rapid limit a link waits 0.3 s doubling to 1.5 s instead of
 * 30 s doubling to 5 min (1:200), so a fifth of a few minutes of flapping is the hour of it.
 */
const WEEK_POLICY: LinkPolicyInput = {
  ...SOAK_POLICY,
  reconnect: { ...SOAK_POLICY.reconnect, suspendInitialDelayMs: 300, suspendMaxDelayMs: 1_500 },
  channel: { joinTimeoutMs: 1_000, rejoinInitialDelayMs: 50, rejoinMaxDelayMs: 300, leaveTimeoutMs: 300 },
}

/** The fault sequence: the same --seed gives the same faults in the same order (how many fit depends on speed). */
const random = seeded(options.seed)
/** Slow control handlers draw from their own source, so handler timing never shifts the fault sequence. */
const handlerRandom = seeded(options.seed + 0x9e3779b9)
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!

// ---- the simulator process -------------------------------------------------------------------

const child = fork(fileURLToPath(new URL('./sim-process.ts', import.meta.url)), week ? [String(options.links)] : [], {
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
/**
 * One-shot timers of the soak's own host logic (a restart, a key retirement), cleared when the
 * faults stop: one that fired after the simulator process exited would write to a closed IPC
 * channel (ERR_IPC_CHANNEL_CLOSED, seen in a CI run). A timer that fires once the faults stopped does nothing.
 */
const laterTimers = new Set<ReturnType<typeof setTimeout>>()
function later(ms: number, fn: () => void): void {
  const timer = setTimeout(() => {
    laterTimers.delete(timer)
    if (running) fn()
  }, ms)
  laterTimers.add(timer)
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
  /** The key this link's apiKey function gives now (week: rotated). */
  key: string
  /** Since when the link has not been connected (monotonic ms), or null while connected. */
  offlineSince: number | null
  /** Milliseconds not connected, summed. */
  offlineMs: number
  /** The link's own wall-clock offset (week: stepped by hours). */
  wallOffset: number
}

const problems: string[] = []
const counts = {
  supersedesChecked: 0,
  faults: 0,
  signalsSent: 0,
  signalsDelivered: 0,
  terminals: 0,
  restarts: 0,
  disconnects: 0,
  channelCycles: 0,
  clockSteps: 0,
  rotations: 0,
  rivals: 0,
}
/** Terminal ends by reason kind: in the week, only `superseded` may appear. */
const terminalKinds: Record<string, number> = {}
const byFault: Record<string, number> = {}
process.on('uncaughtException', (error) => problems.push(`uncaught exception: ${error.stack ?? error}`))
process.on('unhandledRejection', (error) => problems.push(`unhandled rejection: ${String(error)}`))

const tracked: Tracked[] = []
for (let i = 0; i < options.links; i++) {
  const agent = `soak-${i}`
  const t: Tracked = {
    agent,
    link: null as unknown as Link,
    lastDelivered: 0,
    sent: new Map(),
    faults: [],
    upgradesAtTerminal: null,
    superseded: null,
    lastTerminalAt: -1,
    restarting: false,
    terminals: 0,
    key: 'soak-key',
    offlineSince: performance.now(),
    offlineMs: 0,
    wallOffset: 0,
  }
  t.link = createLink({
    url,
    agentId: agent,
    // The week's keys rotate: asked for every attempt.
    apiKey: week ? () => t.key : 'soak-key',
    ...(week ? { env: { now: () => Date.now() + t.wallOffset } } : {}),
    policy: week ? WEEK_POLICY : SOAK_POLICY,
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
  t.link.on('state', ({ state }) => {
    const now = performance.now()
    if (state === 'connected' && t.offlineSince !== null) {
      t.offlineMs += now - t.offlineSince
      t.offlineSince = null
    } else if (state !== 'connected' && t.offlineSince === null) t.offlineSince = now
  })
  t.link.on('disconnected', ({ terminal, reason }) => {
    counts.disconnects++
    if (!terminal) return
    terminalKinds[reason.kind] = (terminalKinds[reason.kind] ?? 0) + 1
    // Only a supersede, or the server's own refusal of the agent (the soak's 1008 and 4500
    // closes), may end a session: never a refused key (the rotations), never a give-up.
    const refusedByClose = reason.kind === 'rejected' && reason.phase === 'close'
    if (week && reason.kind !== 'superseded' && !refusedByClose) problems.push(`${agent}: the session ended ${reason.kind}: ${JSON.stringify(reason)}; only a supersede or a refusal close may end one`)
    counts.terminals++
    t.terminals++
    t.lastTerminalAt = performance.now()
    void (async () => {
      t.upgradesAtTerminal = (await sim<number>({ cmd: 'upgrades', agent }))
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
  later(300 + Math.floor(hostRandom() * 2_200), () => {
    void (async () => {
      const now = (await sim<number>({ cmd: 'upgrades', agent: t.agent }))
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
  })
}

/** A supersede pushed to a healthy connection must end the session: checked by the simulator's count, not the link's verdict. */
async function checkSupersedes(now: number): Promise<void> {
  for (const t of tracked) {
    const s = t.superseded
    if (!s || now - s.at < 3_000 || t.restarting) continue
    t.superseded = null
    counts.supersedesChecked++
    if (t.lastTerminalAt < s.at) problems.push(`${t.agent}: a supersede at ${Math.round(s.at)} ms did not end the session within 3 s (state ${t.link.state})`)
    const upgrades = (await sim<number>({ cmd: 'upgrades', agent: t.agent }))
    if (upgrades !== s.upgrades) problems.push(`${t.agent}: ${upgrades - s.upgrades} connection(s) opened after a supersede`)
  }
}

const started = performance.now()
for (let i = 0; i < tracked.length; i += 25) await Promise.all(tracked.slice(i, i + 25).map((t) => t.link.connect()))
const setupMs = performance.now() - started

// ---- the week: tasks, clock steps, key rotations, a flapping server --------------------------

let running = true
const taskRandom = seeded(options.seed + 0x2545f491)
/** Resolves when `listen` calls back (given the wake-up; it returns its unsubscribe), or after `ms`. */
function wake(listen: (done: () => void) => () => void, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer)
      off()
      resolve()
    }
    const timer = setTimeout(done, ms)
    const off = listen(done)
  })
}
/** Resolves when `channel` reaches one of `statuses`, or after `ms`. */
const untilStatus = (channel: LinkChannel, statuses: readonly string[], ms: number): Promise<void> =>
  statuses.includes(channel.status) ? Promise.resolve() : wake((done) => channel.onStatus((status) => void (statuses.includes(status) && done())), ms)
/** Resolves at the link's next state change, or after `ms`. */
const nextState = (link: Link, ms: number): Promise<void> => wake((done) => link.once('state', done), ms)
/** An agent's work: a room per task, joined, pushed to, left; for as long as the run lasts. */
async function tasks(t: Tracked): Promise<void> {
  let n = 0
  while (running) {
    if (t.link.state !== 'connected') {
      await nextState(t.link, 1_000)
      continue
    }
    const channel = t.link.channel(`room:${t.agent}-task-${n++}`)
    await untilStatus(channel, ['joined', 'dropped', 'errored'], 2_000)
    if (channel.status === 'joined' && taskRandom() < 0.5) await channel.push('progress', { n }, { timeoutMs: 1_000 }).catch(() => {})
    channel.leave()
    await untilStatus(channel, ['left', 'dropped'], 2_000)
    counts.channelCycles++
  }
}
const working = week ? tracked.map((t) => tasks(t)) : []
const timers: Array<ReturnType<typeof setInterval>> = []
if (week) {
  // NTP, resumed VMs, waking laptops: every second each link's wall clock jumps by up to two days, either way.
  timers.push(
    setInterval(() => {
      for (const t of tracked) t.wallOffset = Math.round((taskRandom() * 2 - 1) * 48 * 3_600_000)
      counts.clockSteps += tracked.length
    }, 1_000),
  )
}
let keyVersion = 0
/** A key rotation: the platform takes the old and the new key, the agent switches, then only the new one works. */
async function rotate(t: Tracked): Promise<void> {
  const fresh = `soak-key-${++keyVersion}`
  await sim({ cmd: 'keys', agent: t.agent, keys: [t.key, fresh] })
  t.key = fresh
  counts.rotations++
  // The old key stops working 1.5 s later, unless a newer rotation of this link came meanwhile.
  later(1_500, () => t.key === fresh && void sim({ cmd: 'keys', agent: t.agent, keys: [fresh] }))
}
/** A newer instance of the agent connects (superseding this one) and exits soon after. */
async function rival(t: Tracked): Promise<void> {
  counts.rivals++
  // Marked by a socket param, so the server does not count its upgrades as the link's; one attempt only.
  const other = createLink({ url, agentId: t.agent, apiKey: t.key, params: { rival: '1' }, policy: { ...SOAK_POLICY, reconnect: { ...SOAK_POLICY.reconnect, maxAttempts: 0 } } })
  await other.connect().catch(() => {})
  await new Promise((resolve) => setTimeout(resolve, 200))
  await other.disconnect()
}
/** The flapping window (monotonic ms): the server accepts and closes every socket. */
const flap = { start: Number.POSITIVE_INFINITY, end: Number.POSITIVE_INFINITY, recoveredMs: null as number | null, suspendedLinks: new Set<string>() }
for (const t of tracked) t.link.on('state', ({ state }) => state === 'suspended' && flap.suspendedLinks.add(t.agent))

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
  if (week && roll < 0.55) {
    // The week's own faults, a tenth of the time each: a key rotation (then a reconnect with
    // the new key), a control channel crash, a rival instance.
    if (roll < 0.483) {
      byFault.rotation = (byFault.rotation ?? 0) + 1
      await rotate(t)
      await sim({ cmd: 'close', agent: t.agent, code: 1000 })
    } else if (roll < 0.517) {
      byFault['control crash'] = (byFault['control crash'] ?? 0) + 1
      await sim({ cmd: 'crash-control', agent: t.agent })
    } else {
      byFault.rival = (byFault.rival ?? 0) + 1
      void rival(t)
    }
    return
  }
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
  sent.sockets > 0 &&
  !t.faults.some((f) => f >= sent.at - HEALTHY_BEFORE_MS && f <= sent.at + HEALTHY_AFTER_MS) &&
  !(sent.at >= flap.start - HEALTHY_BEFORE_MS && sent.at <= flap.end + HEALTHY_AFTER_MS)
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
  const elapsed = performance.now() - faultStart
  if (week && flap.start === Number.POSITIVE_INFINITY && elapsed >= durationMs * 0.35) {
    flap.start = performance.now()
    await sim({ cmd: 'flap', on: true })
  }
  if (week && flap.end === Number.POSITIVE_INFINITY && elapsed >= durationMs * 0.55) {
    flap.end = performance.now()
    await sim({ cmd: 'flap', on: false })
    void (async () => {
      // Every link back within its longest cooldown (1.5 s) plus a reconnect, or it is a problem.
      const deadline = flap.end + 6_000
      while (tracked.some((t) => t.link.state !== 'connected' && !t.restarting) && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
      const stuck = tracked.filter((t) => t.link.state !== 'connected' && !t.restarting)
      if (stuck.length > 0) problems.push(`${stuck.length} link(s) not connected 6 s after the server stopped flapping (${stuck.map((t) => `${t.agent}: ${t.link.state}`).slice(0, 5).join(', ')})`)
      else flap.recoveredMs = performance.now() - flap.end
    })()
  }
  // While the server flaps, faults aimed at links mean nothing: only the flapping runs.
  if (!(performance.now() >= flap.start && performance.now() < flap.end)) await injectOne()
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

running = false
for (const timer of timers) clearInterval(timer)
for (const timer of laterTimers) clearTimeout(timer)
laterTimers.clear()
await Promise.all(working)
for (const t of tracked) if (t.offlineSince !== null) t.offlineMs += performance.now() - t.offlineSince
if (week) {
  if (flap.suspendedLinks.size === 0) problems.push('no link was ever suspended: the flapping server did not reach the rapid-disconnect limit')
  if (counts.channelCycles === 0) problems.push('no task channel was ever joined and left')
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
  ...(week
    ? {
        week: {
          channelCycles: counts.channelCycles,
          clockSteps: counts.clockSteps,
          rotations: counts.rotations,
          rivals: counts.rivals,
          terminalKinds,
          flapSeconds: +((flap.end - flap.start) / 1000).toFixed(1),
          suspendedLinks: flap.suspendedLinks.size,
          recoveredAfterFlapMs: flap.recoveredMs === null ? null : Math.round(flap.recoveredMs),
          offlineSecondsPerLink: +(tracked.reduce((s, t) => s + t.offlineMs, 0) / tracked.length / 1000).toFixed(1),
          runSeconds: +(options.minutes * 60).toFixed(0),
        },
      }
    : {}),
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
  if (summary.week) {
    const w = summary.week
    console.log(`  week: ${w.channelCycles} task channels joined and left, ${w.clockSteps} clock steps, ${w.rotations} key rotations, ${w.rivals} rival instances; terminal ends ${JSON.stringify(w.terminalKinds)}`)
    console.log(`  the server flapped ${w.flapSeconds} s: ${w.suspendedLinks}/${options.links} links suspended, all back ${w.recoveredAfterFlapMs ?? '?'} ms after it held sockets again; offline ${w.offlineSecondsPerLink} s per link over ${w.runSeconds} s`)
  }
  console.log(problems.length === 0 ? '  every check held' : `  PROBLEMS:\n    ${problems.slice(0, 20).join('\n    ')}`)
}
// Exit explicitly: a leaked handle must fail the run, not keep it waiting forever.
process.stdout.write('', () => process.exit(problems.length === 0 ? 0 : 1))
