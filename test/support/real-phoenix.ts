/**
 * The reference peer: a real Phoenix 1.7.14 endpoint on Bandit 1.6.11 or Cowboy 2.12.0 that
 * models the platform (../shared/real-phoenix, its README says how it is built, started and
 * driven). This module finds its sources, builds it into an ignored folder of the checkout (or
 * `REAL_PHOENIX_OUT`), starts it on a free loopback port and drives its admin routes.
 *
 * Nothing here is shipped: the package's own simulator is what users run; this server is what
 * the simulator and the link are checked against (test/conformance).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { request } from 'node:http'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

import { until } from './until.js'

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..')

/** The web servers the reference peer runs on. */
export type RealServerName = 'bandit' | 'cowboy'

/** Where the reference peer's sources and build are, or why it cannot run here. */
export type RealPhoenixLocation = { ok: true; src: string; out: string } | { ok: false; why: string }

/**
 * Finds the reference peer's sources: `REAL_PHOENIX_SRC`, else `../shared/real-phoenix` beside
 * the checkout. The build goes to `REAL_PHOENIX_OUT`, else `.real-phoenix/` in the checkout
 * (git-ignored; the sources' folder may be read-only).
 */
export function locateRealPhoenix(): RealPhoenixLocation {
  if (process.env.REAL_PHOENIX === '0') return { ok: false, why: 'REAL_PHOENIX=0 is set' }
  const src = process.env.REAL_PHOENIX_SRC ?? resolve(REPO, '../shared/real-phoenix')
  if (!existsSync(join(src, 'build.sh'))) return { ok: false, why: `no real Phoenix sources at ${src} (set REAL_PHOENIX_SRC)` }
  return { ok: true, src, out: process.env.REAL_PHOENIX_OUT ?? join(REPO, '.real-phoenix') }
}

/** Whether a command is on PATH. */
function onPath(command: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0
}

/** Why the reference peer cannot run here (no sources, no toolchain), without building it; `ok` when it can. */
export function realPhoenixStatus(): RealPhoenixLocation {
  const where = locateRealPhoenix()
  if (!where.ok) return where
  if (!onPath('elixir') || !onPath('rebar3')) return { ok: false, why: NO_TOOLCHAIN }
  return where
}

const NO_TOOLCHAIN = "elixir or rebar3 is not installed (npm run real:build installs Debian's toolchain with apt-get, then builds)"

/**
 * Builds the reference peer with its `build.sh` (idempotent: under a second when up to date).
 * Installs nothing: without `elixir` on PATH it reports why instead (`npm run real:build` runs
 * build.sh, which installs Debian's toolchain with apt-get).
 *
 * @returns the location, or why it cannot run; never throws for a missing toolchain.
 * @throws {Error} when build.sh fails, with the tail of its output.
 */
export function buildRealPhoenix(): RealPhoenixLocation {
  const where = realPhoenixStatus()
  if (!where.ok) return where
  const run = spawnSync('bash', [join(where.src, 'build.sh'), where.out], { encoding: 'utf8', timeout: 600_000 })
  if (run.status !== 0) {
    const tail = `${run.stdout ?? ''}${run.stderr ?? ''}`.split('\n').slice(-30).join('\n')
    throw new Error(`real Phoenix: build.sh failed (status ${String(run.status)}):\n${tail}`)
  }
  return where
}

/** One event of the server's `/admin/events` log (see the real-phoenix README, "Event types"). */
export interface RealEvent {
  seq: number
  /** Wall time, milliseconds since the epoch (the server's clock; same machine). */
  t: number
  type: string
  [field: string]: unknown
}

/** Options of {@link RealServer.start}. */
export interface RealServerOptions {
  server: RealServerName
  /** `id -> key` of the agents it accepts. */
  agents: Record<string, string>
  /** Port; 0 picks a free one. @default 0 */
  port?: number
  /** `REJECT_MODE` of the server's own refusals. @default 'plain' (stock Phoenix: no body) */
  rejectMode?: 'plain' | 'json' | 'json_close'
  /**
   * `SUPERSEDE_CLOSE_DELAY_MS`: milliseconds between the supersede push and the "disconnect" of
   * the older socket (the two come from different server processes, so only this gap orders them).
   * @default 50 (the server's own default)
   */
  supersedeCloseDelayMs?: number
}

/** Lines of server output kept for a failure message. */
const LOG_LINES = 200

/**
 * A running reference server: a child process (the BEAM, via start.sh) on 127.0.0.1.
 * `stop()` sends SIGTERM (Phoenix's drain: every socket closed 1012) and waits for the exit.
 */
export class RealServer {
  readonly log: string[] = []
  private exited: Promise<number | null>
  private stopping = false

  private constructor(
    private readonly where: { src: string; out: string },
    readonly options: RealServerOptions,
    private child: ChildProcess,
    readonly port: number,
  ) {
    this.exited = exitOf(child)
  }

  /**
   * Starts a server and resolves once it prints its ready line.
   *
   * @throws {Error} (rejects) when it exits or prints nothing within 30 s, with its output.
   */
  static async start(where: { src: string; out: string }, options: RealServerOptions): Promise<RealServer> {
    const { child, port, log } = await launch(where, options, options.port ?? 0)
    const server = new RealServer(where, options, child, port)
    server.log.push(...log)
    server.capture()
    return server
  }

  /** The socket endpoint for clients (phoenix.js appends `/websocket`). */
  get url(): string {
    return `ws://127.0.0.1:${this.port}/socket`
  }

  /** The BEAM's OS pid, for SIGSTOP and SIGCONT. */
  get pid(): number {
    return this.child.pid!
  }

  /**
   * Calls an admin route (`POST` unless it starts with `GET `), e.g. `admin('/admin/refuse', { status: 429 })`.
   *
   * @returns the parsed JSON answer.
   * @throws {Error} (rejects) on a status other than 2xx, or a connection error.
   */
  async admin(route: string, params: Record<string, string | number | undefined> = {}, body?: object): Promise<any> {
    const get = route.startsWith('GET ')
    const path = get ? route.slice(4) : route
    const query = new URLSearchParams()
    for (const [k, v] of Object.entries(params)) if (v !== undefined) query.set(k, String(v))
    const answer = await http(this.port, get ? 'GET' : 'POST', `${path}${query.size > 0 ? `?${query}` : ''}`, body)
    if (answer.status < 200 || answer.status > 299) {
      throw new Error(`real Phoenix ${this.options.server}: ${route} ${query} answered ${answer.status}: ${answer.text}`)
    }
    return answer.text === '' ? {} : JSON.parse(answer.text)
  }

  /** Events after `seq` (all by default), oldest first. */
  async events(after = 0): Promise<RealEvent[]> {
    return ((await this.admin('GET /admin/events', { after })) as { events: RealEvent[] }).events
  }

  /**
   * Freezes the BEAM (SIGSTOP) and resolves once every one of its threads is stopped, so nothing
   * sent after it is read or answered. The kill alone does not stop a many-threaded process at
   * once: the kernel wakes one thread to start the group stop (signal(7), "group-stop" in
   * ptrace(2)), and until that thread is scheduled the others run on. On a loaded machine, 39 to
   * 70 of 150 heartbeats sent right after the kill were answered (by hand, 2026-12-07, three busy
   * loops on two cores); none once this waits. proc(5) is the only view of it: each thread's state
   * in /proc/PID/task/TID/stat, read every few milliseconds, bounded.
   *
   * @throws {Error} (rejects) when a thread still runs after 5 s, naming it.
   */
  async freeze(): Promise<void> {
    this.child.kill('SIGSTOP')
    const pid = this.child.pid!
    let running: string[] = []
    await until(() => (running = threadsNotStopped(pid)).length === 0, 5000, `every thread of the BEAM (pid ${pid}) to stop`).catch((error: Error) => {
      throw new Error(`${error.message}; still running: ${running.join(', ')}`)
    })
  }

  /** Thaws a frozen BEAM (SIGCONT). */
  thaw(): void {
    this.child.kill('SIGCONT')
  }

  /**
   * Stops with SIGTERM and resolves once the process has exited (Cowboy can take up to 5 s
   * while a keep-alive connection is open); SIGKILL after 15 s.
   */
  async stop(): Promise<void> {
    if (this.stopping) {
      await this.exited
      return
    }
    this.stopping = true
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGCONT') // a frozen BEAM cannot handle SIGTERM
      this.child.kill('SIGTERM')
    }
    let timer: NodeJS.Timeout | undefined
    await Promise.race([
      this.exited,
      new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          this.child.kill('SIGKILL')
          resolve()
        }, 15_000)
      }),
    ])
    clearTimeout(timer)
    await this.exited
  }

  /**
   * A deploy: SIGTERM (Phoenix's drainer closes every socket with 1012), then the same server
   * started again on the same port. Resolves once it listens again.
   */
  async restart(): Promise<void> {
    await this.stop()
    const { child, log } = await launch(this.where, this.options, this.port)
    this.child = child
    this.exited = exitOf(child)
    this.stopping = false
    this.log.push(...log)
    this.capture()
  }

  /** The last lines the server printed, for a failure message. */
  tail(lines = 40): string {
    return this.log.slice(-lines).join('\n')
  }

  private capture(): void {
    const keep = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) if (line) this.log.push(line)
      if (this.log.length > LOG_LINES) this.log.splice(0, this.log.length - LOG_LINES)
    }
    this.child.stdout!.on('data', keep)
    this.child.stderr!.on('data', keep)
  }
}

function exitOf(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode)
    // 'close' comes after the stdio pipes closed, so no handle of the child outlives this promise.
    else child.once('close', (code) => resolve(code))
  })
}

/**
 * The BEAM's schedulers spin for work before they sleep (erl(1), `+sbwt`, `+sbwtdcpu`, `+sbwtdio`).
 * On a machine whose cores are all busy that starves the thread they wait on: with two busy loops
 * on two cores the server printed no ready line within 30 s in 6 of 8 starts, and started in 7 of
 * 7 (2.7 to 8.0 s) with the spinning off (by hand, 2026-12-07). Off here: it changes when an idle
 * scheduler sleeps, nothing a client sees on the wire.
 */
const NO_BUSY_WAIT = '+sbwt none +sbwtdcpu none +sbwtdio none'

/** The threads of process `pid` not stopped (proc(5) stat: `T` stopped by a signal, `t` traced; an exited thread counts as stopped), as `TID state`. */
function threadsNotStopped(pid: number): string[] {
  const out: string[] = []
  let tids: string[]
  try {
    tids = readdirSync(`/proc/${pid}/task`)
  } catch (error) {
    throw new Error(`the BEAM (pid ${pid}) is gone: ${(error as Error).message}`)
  }
  for (const tid of tids) {
    let stat: string
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
    } catch {
      continue
    }
    const state = stat[stat.lastIndexOf(')') + 2]!
    if (state !== 'T' && state !== 't' && state !== 'Z' && state !== 'X') out.push(`${tid} ${state}`)
  }
  return out
}

async function launch(where: { src: string; out: string }, options: RealServerOptions, port: number): Promise<{ child: ChildProcess; port: number; log: string[] }> {
  const agents = Object.entries(options.agents)
    .map(([id, key]) => `${id}:${key}`)
    .join(',')
  const child = spawn('bash', [join(where.src, 'start.sh'), where.out], {
    env: { ...process.env, SERVER: options.server, PORT: String(port), AGENTS: agents, REJECT_MODE: options.rejectMode ?? 'plain', SUPERSEDE_CLOSE_DELAY_MS: String(options.supersedeCloseDelayMs ?? 50), ERL_AFLAGS: [process.env.ERL_AFLAGS, NO_BUSY_WAIT].filter(Boolean).join(' ') },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const log: string[] = []
  return new Promise((resolve, reject) => {
    let buffered = ''
    const timer = setTimeout(() => fail(new Error('no ready line within 30 s')), 30_000)
    const onData = (chunk: Buffer) => {
      buffered += chunk.toString('utf8')
      const lines = buffered.split('\n')
      buffered = lines.pop()!
      for (const line of lines) {
        log.push(line)
        const ready = /^realphx listening on 127\.0\.0\.1:(\d+) server=(\w+)/.exec(line)
        if (ready) {
          clearTimeout(timer)
          child.stdout!.off('data', onData)
          child.stderr!.off('data', onData)
          child.off('close', onClose)
          resolve({ child, port: Number(ready[1]), log })
          return
        }
      }
    }
    const onClose = (code: number | null) => fail(new Error(`exited with ${String(code)} before it listened`))
    const fail = (error: Error) => {
      clearTimeout(timer)
      child.kill('SIGKILL')
      reject(new Error(`real Phoenix ${options.server}: ${error.message}\n${log.slice(-30).join('\n')}`))
    }
    child.stdout!.on('data', onData)
    child.stderr!.on('data', onData)
    child.once('close', onClose)
  })
}

/**
 * One HTTP request on its own connection (`agent: false`, so `Connection: close`): a pooled
 * keep-alive connection would hold Cowboy's drain open for 5 s (real-phoenix README).
 */
function http(port: number, method: string, path: string, body?: object): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body)
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent: false,
        headers: payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }))
        res.on('error', reject)
      },
    )
    req.setTimeout(10_000, () => req.destroy(new Error(`${method} ${path}: no answer within 10 s`)))
    req.on('error', reject)
    req.end(payload)
  })
}
