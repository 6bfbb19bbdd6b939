/**
 * Where a link's heap and a connect's CPU go, beside the raw phoenix.js client:
 *
 * - **Heap by constructor**: a V8 heap snapshot after `CLIENTS` idle connected clients of one
 *   kind, minus one taken after the warm-up client, grouped by constructor (the node name V8
 *   records for objects; closures, arrays, strings and V8's internal kinds by their type), as
 *   bytes and objects per client.
 * - **Heap by chart**: each chart alone, `ACTORS` times with the input a link gives it (no
 *   sockets), heap per chart after GC, run two ways: as an XState actor (what a link ran before
 *   issue 17) and on the link's chart runtime (a snapshot, no actor; src/runtime/), so what the
 *   runtime saves per chart is read off directly.
 * - **CPU per connect**: the V8 CPU profiler (node:inspector) over `PROFILED` sequential connects
 *   (control channel and one app channel joined), self time grouped by package (xstate, phoenix,
 *   ws, zod, phoenix-link's own src/ and machines/, Node's own) and the top functions, as µs per
 *   connect. The profiler inflates code made of many small calls (the charts' transitions) more
 *   than native socket work, so the target row is measured apart, without the profiler: CPU per
 *   connect over `PROFILED` sequential connects, the median of three runs of each kind, run in
 *   alternating order, each after 20 warm-up connects (a process's first connects, with most of
 *   both clients' code not yet optimized by V8).
 * - **CPU per connect at steady state**: one process, both kinds: `STEADY_WARM` warm-up connects of
 *   each (held open, alternating), then `STEADY_ROUNDS` batches of `STEADY_BATCH` connects of each
 *   kind in alternating order, CPU per connect summed over the batches; both clients run the same
 *   optimized code paths and share the same machine load. In the same run the link's chart
 *   transitions are timed where they run (around each chart's `transition()` and initial
 *   transition), the XState interpreter's share of a connect without the profiler.
 *
 * Each kind runs in a fresh process with its own simulator child. Run alone:
 * `npm run bench -- breakdown`.
 */
import { Session } from 'node:inspector'
import { writeHeapSnapshot } from 'node:v8'
import { readFileSync, rmSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createActor, setup, type AnyStateMachine, type EventObject } from 'xstate'
import { connectionMachine } from '../machines/connection.js'
import { reconnectMachine, DEFAULT_RECONNECT_POLICY } from '../machines/reconnect.js'
import { controlMachine, DEFAULT_CONTROL_POLICY } from '../machines/control.js'
import { channelMachine, DEFAULT_CHANNEL_POLICY } from '../machines/channel.js'
import { ChartRuntime, type RunningChart } from '../src/runtime/chart-runner.js'
import { REAL_CLOCK } from '../src/runtime/clock.js'
import { BENCH_TOPIC, inFreshProcess, median, pool, row, settleHeap, SimChild, openClient, timeTransitions, type Row } from './common.js'

const CLIENTS = Number(process.env.BENCH_BREAKDOWN_CLIENTS ?? 500)
const ACTORS = Number(process.env.BENCH_BREAKDOWN_ACTORS ?? 2_000)
const PROFILED = Number(process.env.BENCH_BREAKDOWN_CONNECTS ?? 300)
const STEADY_WARM = Number(process.env.BENCH_BREAKDOWN_STEADY_WARM ?? 1_000)
const STEADY_ROUNDS = 10
const STEADY_BATCH = 100

/** Bytes and objects per client of one constructor (or V8 node type). */
export interface HeapGroup {
  name: string
  bytes: number
  count: number
}

/** Self time per connect of one package or function, µs. */
export interface CpuGroup {
  name: string
  us: number
}

interface HeapResult {
  kind: 'link' | 'raw'
  perClient: number
  groups: HeapGroup[]
}

interface CpuResult {
  kind: 'link' | 'raw'
  usPerConnect: number
  wallMsPerConnect: number
  packages: CpuGroup[]
  functions: CpuGroup[]
}

/** CPU per connect at steady state, both kinds in one process (µs), and the link's chart transitions in that run. */
interface SteadyResult {
  link: number
  raw: number
  /** µs per connect of each batch, in the order run. */
  batches: { link: number[]; raw: number[] }
  /** Chart transitions per link connect (initial ones included), and their µs per connect. */
  transitions: number
  transitionUs: number
  /** Warm-up connects of each kind, and connects per batch. */
  warm: number
  batch: number
}

/** The result of `run()`: rows for the table, and the breakdowns for docs/performance.md. */
export interface BreakdownResult {
  rows: Row[]
  heap: { link: HeapResult; raw: HeapResult }
  /** Heap per chart as an XState actor and on the link's runtime, bytes. */
  actors: Array<{ actor: string; bytes: number; running: number }>
  cpu: { link: CpuResult; raw: CpuResult }
  steady: SteadyResult
}

/** Self sizes and counts of a heap snapshot file, by constructor (objects) or node type (the rest). */
function groupsOf(file: string): Map<string, { bytes: number; count: number }> {
  const snapshot = JSON.parse(readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } }
    nodes: number[]
    strings: string[]
  }
  const fields = snapshot.snapshot.meta.node_fields
  const types = snapshot.snapshot.meta.node_types[0]
  const width = fields.length
  const typeAt = fields.indexOf('type')
  const nameAt = fields.indexOf('name')
  const sizeAt = fields.indexOf('self_size')
  const out = new Map<string, { bytes: number; count: number }>()
  for (let i = 0; i < snapshot.nodes.length; i += width) {
    const type = types[snapshot.nodes[i + typeAt]!]!
    const name = type === 'object' ? snapshot.strings[snapshot.nodes[i + nameAt]!]! : `(${type})`
    const group = out.get(name) ?? { bytes: 0, count: 0 }
    group.bytes += snapshot.nodes[i + sizeAt]!
    group.count++
    out.set(name, group)
  }
  return out
}

async function measureHeap(kind: 'link' | 'raw', count: number): Promise<HeapResult> {
  const sim = await SimChild.start()
  const dir = mkdtempSync(join(tmpdir(), 'phoenix-link-heap-'))
  const closers: Array<() => Promise<void>> = []
  try {
    const warm = await openClient(kind, sim.url, 'heap-warm')
    await warm()
    await settleHeap()
    const before = groupsOf(writeHeapSnapshot(join(dir, 'before.heapsnapshot')))
    // The snapshot and its parse allocate far more than a client: settle again before the baseline.
    await settleHeap()
    const beforeUsed = process.memoryUsage().heapUsed
    await pool(
      Array.from({ length: count }, (_, i) => i),
      50,
      async (i) => {
        closers.push(await openClient(kind, sim.url, `heap-${kind}-${i}`))
      },
    )
    await settleHeap()
    const perClient = (process.memoryUsage().heapUsed - beforeUsed) / count
    const after = groupsOf(writeHeapSnapshot(join(dir, 'after.heapsnapshot')))
    const groups: HeapGroup[] = []
    for (const [name, a] of after) {
      const b = before.get(name) ?? { bytes: 0, count: 0 }
      const bytes = (a.bytes - b.bytes) / count
      if (bytes > 16) groups.push({ name, bytes, count: (a.count - b.count) / count })
    }
    groups.sort((x, y) => y.bytes - x.bytes)
    return { kind, perClient, groups: groups.slice(0, 14) }
  } finally {
    await pool(closers, 100, (close) => close())
    await sim.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

const ENV = { now: () => Date.now(), monotonic: () => performance.now(), random: Math.random }

/** The charts measured alone, with the input a link gives each, and the events that bring each to where an idle connected link holds it. */
const ACTOR_KINDS = (): Array<[string, AnyStateMachine, unknown, Array<EventObject & Record<string, unknown>>]> => [
  [
    'connection, connected',
    connectionMachine as unknown as AnyStateMachine,
    { env: ENV },
    [{ type: 'host.connect' }, { type: 'socket.open', generation: 1, epoch: 1 }, { type: 'control.joinOk', generation: 1, epoch: 1 }],
  ],
  ['reconnect, up (its two windows pending)', reconnectMachine as unknown as AnyStateMachine, { policy: DEFAULT_RECONNECT_POLICY, env: ENV }, [{ type: 'reconnect.opened' }]],
  ['control, idle', controlMachine as unknown as AnyStateMachine, { policy: DEFAULT_CONTROL_POLICY }, []],
  [
    'channel, joined',
    channelMachine as unknown as AnyStateMachine,
    { topic: BENCH_TOPIC, policy: DEFAULT_CHANNEL_POLICY, env: ENV },
    [{ type: 'transport.up', generation: 1 }, { type: 'channel.joinOk', topic: BENCH_TOPIC, generation: 1, attachId: 1 }],
  ],
  ['floor: a chart of one state, no context', FLOOR as unknown as AnyStateMachine, undefined, []],
]

/** The least a chart costs, whatever its states: an actor, or a snapshot on the runtime. */
const FLOOR = setup({}).createMachine({ id: 'floor' })

/** A runtime whose charts do nothing outside themselves: what a chart costs on a link's runtime, I/O aside. */
class QuietRuntime extends ChartRuntime {
  readonly clock = REAL_CLOCK
  readonly inspect = null
  execute(): void {}
  actionFailed(): void {}
  emitted(): void {}
  changed(): void {}
  crashed(_chart: RunningChart, error: unknown): void {
    throw error
  }
  listenerFailed(_chart: RunningChart, error: unknown): void {
    throw error
  }
}

/**
 * Heap per chart of one kind (`index` into ACTOR_KINDS), in a process of its own: `count` of them
 * as XState actors, then `count` on the runtime (each its own runtime, as each link has one).
 */
async function measureActor(index: number, count: number): Promise<{ actor: string; bytes: number; running: number }> {
  const [name, machine, input, events] = ACTOR_KINDS()[index]!
  const perChart = async (make: () => { send(e: EventObject): void; stop(): void }) => {
    const warm = make()
    for (const event of events) warm.send(event)
    warm.stop()
    await settleHeap()
    const before = process.memoryUsage().heapUsed
    const charts = Array.from({ length: count }, () => {
      const chart = make()
      for (const event of events) chart.send(event)
      return chart
    })
    await settleHeap()
    const bytes = (process.memoryUsage().heapUsed - before) / count
    for (const chart of charts) chart.stop()
    return bytes
  }
  const bytes = await perChart(() => createActor(machine, { input } as never).start())
  const running = await perChart(() => new QuietRuntime().start(machine, machine.id, input))
  return { actor: name, bytes, running }
}

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  hitCount?: number
}

function packageOf(url: string): string {
  if (url === '') return '(V8: GC, idle, natives)'
  if (url.startsWith('node:')) return 'node (net, timers, streams)'
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (m) return m[1]!
  if (/\/machines\//.test(url)) return 'phoenix-link machines/'
  if (/\/src\/adapter\//.test(url)) return 'phoenix-link src/adapter/'
  if (/\/src\/runtime\//.test(url)) return 'phoenix-link src/runtime/'
  if (/\/src\//.test(url)) return 'phoenix-link src/'
  if (/\/bench\//.test(url)) return '(bench harness)'
  return url.replace(/^.*\//, '')
}

function post<T>(session: Session, method: string, params: object = {}): Promise<T> {
  return new Promise((resolve, reject) => session.post(method, params, (error, result) => (error ? reject(error) : resolve(result as T))))
}

async function measureCpu(kind: 'link' | 'raw', count: number, profiled = true): Promise<CpuResult> {
  const sim = await SimChild.start()
  const session = new Session()
  session.connect()
  const closers: Array<() => Promise<void>> = []
  try {
    for (let i = 0; i < 20; i++) closers.push(await openClient(kind, sim.url, `cpu-warm-${i}`))
    if (profiled) {
      await post(session, 'Profiler.enable')
      await post(session, 'Profiler.setSamplingInterval', { interval: 100 })
      await post(session, 'Profiler.start')
    }
    const cpuBefore = process.cpuUsage()
    const started = performance.now()
    for (let i = 0; i < count; i++) closers.push(await openClient(kind, sim.url, `cpu-${kind}-${i}`))
    const wallMs = performance.now() - started
    const cpu = process.cpuUsage(cpuBefore)
    const { profile } = profiled
      ? await post<{ profile: { nodes: ProfileNode[]; startTime: number; endTime: number; samples: number[] } }>(session, 'Profiler.stop')
      : { profile: { nodes: [] as ProfileNode[] } }
    const totalUs = cpu.user + cpu.system
    const hits = profile.nodes.reduce((n, node) => n + (node.hitCount ?? 0), 0)
    const idle = profile.nodes.filter((n) => n.callFrame.functionName === '(idle)' || n.callFrame.functionName === '(program)').reduce((n, node) => n + (node.hitCount ?? 0), 0)
    // Samples over the profiled wall time; the busy ones are apportioned to the process's CPU time.
    const usPerHit = hits - idle > 0 ? totalUs / (hits - idle) : 0
    const byPackage = new Map<string, number>()
    const byFunction = new Map<string, number>()
    for (const node of profile.nodes) {
      const name = node.callFrame.functionName
      if (!node.hitCount || name === '(idle)' || name === '(program)') continue
      const pkg = packageOf(node.callFrame.url)
      byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + node.hitCount)
      const fn = `${name || '(anonymous)'} (${pkg}${node.callFrame.url ? `:${node.callFrame.lineNumber + 1}` : ''})`
      byFunction.set(fn, (byFunction.get(fn) ?? 0) + node.hitCount)
    }
    const groups = (map: Map<string, number>, top: number) =>
      [...map]
        .map(([name, n]) => ({ name, us: (n * usPerHit) / count }))
        .sort((a, b) => b.us - a.us)
        .slice(0, top)
    return { kind, usPerConnect: totalUs / count, wallMsPerConnect: wallMs / count, packages: groups(byPackage, 10), functions: groups(byFunction, 12) }
  } finally {
    await post(session, 'Profiler.disable').catch(() => {})
    session.disconnect()
    await pool(closers, 100, (close) => close())
    await sim.stop()
  }
}

/** CPU per connect of both kinds in one process, after warm-up, in alternating batches. */
async function measureSteady(warm: number): Promise<SteadyResult> {
  const sim = await SimChild.start()
  const closers: Array<() => Promise<void>> = []
  let measuringLink = false
  const timed = timeTransitions(() => measuringLink)
  try {
    for (let i = 0; i < warm; i++) {
      closers.push(await openClient('raw', sim.url, `steady-warm-raw-${i}`))
      closers.push(await openClient('link', sim.url, `steady-warm-link-${i}`))
    }
    const total = { link: 0, raw: 0 }
    const batches: SteadyResult['batches'] = { link: [], raw: [] }
    for (let round = 0; round < STEADY_ROUNDS; round++) {
      for (const kind of round % 2 === 0 ? (['link', 'raw'] as const) : (['raw', 'link'] as const)) {
        measuringLink = kind === 'link'
        const before = process.cpuUsage()
        for (let i = 0; i < STEADY_BATCH; i++) closers.push(await openClient(kind, sim.url, `steady-${kind}-${round}-${i}`))
        const cpu = process.cpuUsage(before)
        measuringLink = false
        total[kind] += cpu.user + cpu.system
        batches[kind].push(Math.round((cpu.user + cpu.system) / STEADY_BATCH))
      }
    }
    const connects = STEADY_ROUNDS * STEADY_BATCH
    return { link: total.link / connects, raw: total.raw / connects, batches, transitions: timed.calls / connects, transitionUs: timed.us / connects, warm, batch: STEADY_BATCH }
  } finally {
    await pool(closers, 100, (close) => close())
    await sim.stop()
  }
}

export async function run(): Promise<BreakdownResult> {
  const file = './breakdown.js'
  const heapRaw = await inFreshProcess<HeapResult>(file, ['heap', 'raw', String(CLIENTS)])
  const heapLink = await inFreshProcess<HeapResult>(file, ['heap', 'link', String(CLIENTS)])
  const actors: Array<{ actor: string; bytes: number; running: number }> = []
  for (let i = 0; i < ACTOR_KINDS().length; i++) actors.push(await inFreshProcess(file, ['actor', String(i), String(ACTORS)]))
  const cpuRaw = await inFreshProcess<CpuResult>(file, ['cpu', 'raw', String(PROFILED)])
  const cpuLink = await inFreshProcess<CpuResult>(file, ['cpu', 'link', String(PROFILED)])
  const plain: Record<'raw' | 'link', number[]> = { raw: [], link: [] }
  for (let i = 0; i < 3; i++) {
    for (const kind of ['raw', 'link'] as const) plain[kind].push((await inFreshProcess<CpuResult>(file, ['cpu-plain', kind, String(PROFILED)])).usPerConnect)
  }
  const steady = await inFreshProcess<SteadyResult>(file, ['cpu-steady', String(STEADY_WARM)])
  const kib = (bytes: number) => bytes / 1024
  const rows = [
    row('breakdown', `heap per idle client in the snapshot run (${CLIENTS} clients)`, 'KiB', kib(heapLink.perClient), kib(heapRaw.perClient), { text: '<= 1.5x raw', met: (l, r) => l <= 1.5 * r! }),
    row('breakdown', `connect CPU (user + system), ${PROFILED} sequential connects after 20 warm-up connects, median of 3 runs`, 'µs', median(plain.link), median(plain.raw), { text: '<= 1.3x raw', met: (l, r) => l <= 1.3 * r! }),
    row('breakdown', `connect CPU at steady state: ${(STEADY_ROUNDS * STEADY_BATCH).toLocaleString('en-US')} connects of each in alternating batches of ${STEADY_BATCH}, one process, after ${STEADY_WARM.toLocaleString('en-US')} warm-up connects of each`, 'µs', steady.link, steady.raw, { text: '<= 1.3x raw', met: (l, r) => l <= 1.3 * r! }),
    row('breakdown', `of which the link's chart transitions (${steady.transitions.toFixed(1)} per connect; XState's transition(), timed in place)`, 'µs', steady.transitionUs, null, null),
    row('breakdown', `connect CPU, ${PROFILED} sequential connects, profiled`, 'µs', cpuLink.usPerConnect, cpuRaw.usPerConnect, null),
    row('breakdown', 'connect wall time, sequential, profiled', 'ms', cpuLink.wallMsPerConnect, cpuRaw.wallMsPerConnect, null),
  ]
  return { rows, heap: { link: heapLink, raw: heapRaw }, actors, cpu: { link: cpuLink, raw: cpuRaw }, steady }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [what, kind, n] = process.argv.slice(2)
  if (what === 'heap' && (kind === 'link' || kind === 'raw')) console.log(JSON.stringify(await measureHeap(kind, Number(n ?? CLIENTS))))
  else if (what === 'actor') console.log(JSON.stringify(await measureActor(Number(kind), Number(n ?? ACTORS))))
  else if (what === 'cpu' && (kind === 'link' || kind === 'raw')) console.log(JSON.stringify(await measureCpu(kind, Number(n ?? PROFILED))))
  else if (what === 'cpu-steady') console.log(JSON.stringify(await measureSteady(Number(kind ?? STEADY_WARM))))
  else if (what === 'cpu-plain' && (kind === 'link' || kind === 'raw')) console.log(JSON.stringify(await measureCpu(kind, Number(n ?? PROFILED), false)))
  else console.log(JSON.stringify(await run()))
}
