/** What the benchmarks share: the simulator child, raw phoenix.js clients, tables, the machine. */
import { fork, type ChildProcess } from 'node:child_process'
import { cpus } from 'node:os'
import { fileURLToPath } from 'node:url'
import { Socket, type Channel } from 'phoenix'
import WebSocket from 'isomorphic-ws'
import type { ChildCommand } from './sim-child.js'
import { createLink } from '../src/link.js'
import { within } from '../src/node/within.js'
import { connectionMachine } from '../machines/connection.js'
import { reconnectMachine } from '../machines/reconnect.js'
import { controlMachine } from '../machines/control.js'
import { channelMachine } from '../machines/channel.js'
export { within }

/** One line of the results table. */
export interface Row {
  bench: string
  metric: string
  link: number
  raw: number | null
  unit: string
  /** link / raw, or null. */
  ratio: number | null
  target: string
  met: boolean | null
}

/** The machine the figures come from. */
export function machine(): string {
  const cpu = cpus()
  return `${cpu.length} cores (${cpu[0]?.model.trim() ?? 'unknown'}), Node ${process.version}, ${process.platform}/${process.arch}`
}

/** A simulator in a child process (bench/sim-child.ts), driven over IPC. */
export class SimChild {
  private nextId = 1
  private readonly pending = new Map<number, (result: unknown) => void>()
  private constructor(
    private readonly child: ChildProcess,
    /** The endpoint for clients, e.g. `ws://127.0.0.1:41234/socket`. */
    readonly url: string,
  ) {
    child.on('message', (m: { id: number; result: unknown }) => {
      this.pending.get(m.id)?.(m.result)
      this.pending.delete(m.id)
    })
    // A child that dies answers every pending command with an error instead of leaving it hanging.
    child.once('exit', (code, signal) => {
      for (const answer of this.pending.values()) answer({ error: `the simulator child exited (${signal ?? code})` })
      this.pending.clear()
    })
  }

  /** Forks the child and resolves once its simulator listens. Rejects if the child fails to start. */
  static start(): Promise<SimChild> {
    // Compiled (npm run bench) the child is sim-child.js beside this file; from source (tsx, as
    // test/support/channel-cycles.ts runs it) it is sim-child.ts, loaded through tsx.
    const fromSource = import.meta.url.endsWith('.ts')
    const child = fork(fileURLToPath(new URL(fromSource ? './sim-child.ts' : './sim-child.js', import.meta.url)), [], {
      execArgv: fromSource ? ['--import', 'tsx'] : [],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    })
    return new Promise((resolve, reject) => {
      child.once('error', reject)
      child.once('exit', (code) => reject(new Error(`simulator child exited with ${code} before listening`)))
      child.once('message', (m: { result: { url: string } }) => resolve(new SimChild(child, m.result.url)))
    })
  }

  /**
   * Sends one command and resolves with the child's answer.
   * @throws {Error} (rejects) when the answer carries an `error`.
   */
  async send<T = Record<string, unknown>>(command: ChildCommand): Promise<T> {
    const id = this.nextId++
    const result = await new Promise<unknown>((resolve) => {
      if (this.child.exitCode !== null || this.child.signalCode !== null) return resolve({ error: 'the simulator child is not running' })
      this.pending.set(id, resolve)
      this.child.send({ ...command, id })
    })
    const error = (result as { error?: string } | null)?.error
    if (error) throw new Error(error)
    return result as T
  }

  /** Stops the simulator (aborting its sockets) and waits for the child to exit, at most 5 s. */
  async stop(): Promise<void> {
    const exited = new Promise<void>((resolve) => {
      if (this.child.exitCode !== null) resolve()
      else this.child.once('exit', () => resolve())
    })
    this.child.send({ cmd: 'stop', id: this.nextId++ })
    const timer = setTimeout(() => this.child.kill(), 5000)
    await exited
    clearTimeout(timer)
  }
}

/** A raw phoenix.js client: one Socket with its defaults (ws transport), joined to the control channel and optionally an app channel. */
export async function rawClient(url: string, agent: string, options: { app?: string; reconnectAfterMs?: (tries: number) => number; heartbeatIntervalMs?: number } = {}) {
  const socket = new Socket(url, {
    transport: WebSocket as never,
    params: { agent_id: agent, api_key: 'bench-key' },
    ...(options.reconnectAfterMs ? { reconnectAfterMs: options.reconnectAfterMs } : {}),
    ...(options.heartbeatIntervalMs ? { heartbeatIntervalMs: options.heartbeatIntervalMs } : {}),
  })
  socket.connect()
  const join = (channel: Channel) =>
    new Promise<void>((resolve, reject) => channel.join().receive('ok', () => resolve()).receive('error', reject).receive('timeout', reject))
  const control = socket.channel(`agent_control:${agent}`)
  await join(control)
  const app = options.app ? socket.channel(options.app) : null
  if (app) await join(app)
  return { socket, control, app, close: () => new Promise<void>((resolve) => socket.disconnect(() => resolve())) }
}

/** Percentile of sorted numbers, nearest rank: the smallest value with at least p% of values at or below it. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
}

/** Resolves when `check()` is true, polling on each turn of the event loop, bounded. */
export async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise<void>((resolve) => setImmediate(resolve))
  }
}

/** The app channel topic every benchmark client joins. */
export const BENCH_TOPIC = 'room:bench'

/**
 * Opens one idle client of `kind` against the simulator at `url` as agent `agent`: its socket, its
 * control channel and {@link BENCH_TOPIC}, joined (the link waits on `joined()`, bounded at 10 s).
 * Resolves to its close function.
 *
 * @throws {Error} (rejects) when a join fails or the link's join takes longer than 10 s.
 */
export async function openClient(kind: 'link' | 'raw', url: string, agent: string): Promise<() => Promise<void>> {
  if (kind === 'raw') return (await rawClient(url, agent, { app: BENCH_TOPIC })).close
  const link = createLink({ url, agentId: agent, apiKey: 'bench-key' })
  await link.connect()
  await within(link.channel(BENCH_TOPIC).joined(), 10_000, `${agent} to join ${BENCH_TOPIC}`)
  return () => link.disconnect()
}

/** Runs `tasks` at most `limit` at a time. */
export async function pool<T>(items: T[], limit: number, task: (item: T, i: number) => Promise<void>): Promise<void> {
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++
        await task(items[i]!, i)
      }
    }),
  )
}

/**
 * Runs `bench/<file>` in a fresh Node process (with --expose-gc) and resolves with the JSON it
 * prints on its last stdout line. Used where one process must hold only one kind of client.
 * @throws {Error} (rejects) when the process exits non-zero or prints no JSON.
 */
export function inFreshProcess<T>(file: string, args: string[]): Promise<T> {
  const child = fork(fileURLToPath(new URL(file, import.meta.url)), args, {
    execArgv: ['--expose-gc'],
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  })
  let out = ''
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()))
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code) => {
      const last = out.trim().split('\n').at(-1) ?? ''
      if (code !== 0) return reject(new Error(`${file} ${args.join(' ')} exited with ${code}: ${out.slice(-500)}`))
      try {
        resolve(JSON.parse(last) as T)
      } catch {
        reject(new Error(`${file} ${args.join(' ')} printed no JSON result: ${out.slice(-500)}`))
      }
    })
  })
}

/** Runs the garbage collector until the heap stops shrinking (needs --expose-gc). */
export async function settleHeap(): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc
  if (!gc) throw new Error('run with node --expose-gc (npm run bench does)')
  let last = Number.POSITIVE_INFINITY
  for (let i = 0; i < 10; i++) {
    gc()
    await new Promise<void>((resolve) => setImmediate(resolve))
    const used = process.memoryUsage().heapUsed
    if (used >= last * 0.999) return
    last = used
  }
}

/** A row with its ratio and whether the target holds; `better` says which direction wins. */
export function row(
  bench: string,
  metric: string,
  unit: string,
  link: number,
  raw: number | null,
  target: { text: string; met: (link: number, raw: number | null) => boolean } | null,
): Row {
  return {
    bench,
    metric,
    unit,
    link,
    raw,
    ratio: raw === null || raw === 0 ? null : link / raw,
    target: target?.text ?? '',
    met: target ? target.met(link, raw) : null,
  }
}

/** Median of numbers. */
export function median(values: number[]): number {
  return percentile([...values].sort((a, b) => a - b), 50)
}

/**
 * When `moduleUrl` is the script Node was started with (`import.meta.url` of a benchmark),
 * runs it and prints its rows as one JSON line, which bench/run.ts reads.
 */
export async function printIfMain(moduleUrl: string, run: () => Promise<unknown>): Promise<void> {
  if (moduleUrl === `file://${process.argv[1]}`) console.log(JSON.stringify(await run()))
}

/**
 * Times every call of the charts' `transition()` and `getInitialSnapshot()` (XState's
 * interpreter, as the link's runtime calls it: src/runtime/chart-runner.ts) while `on()` is true.
 * Bench-only instrumentation of this process's chart objects.
 */
export function timeTransitions(on: () => boolean): { calls: number; us: number } {
  const totals = { calls: 0, us: 0 }
  for (const machine of [connectionMachine, reconnectMachine, controlMachine, channelMachine] as unknown as Array<Record<string, (...args: unknown[]) => unknown>>) {
    for (const name of ['transition', 'getInitialSnapshot']) {
      const original = machine[name]!
      machine[name] = function (this: unknown, ...args: unknown[]) {
        if (!on()) return original.apply(this, args)
        const started = performance.now()
        try {
          return original.apply(this, args)
        } finally {
          totals.us += (performance.now() - started) * 1000
          totals.calls++
        }
      }
    }
  }
  return totals
}
