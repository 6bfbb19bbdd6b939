/**
 * Conformance of any Phoenix Channels agent, in any language, to the lifecycle rules, judged from
 * what the server alone observes. {@link runConformance} starts the platform simulator on
 * 127.0.0.1, runs the agent's command once per scenario with the platform's URL, an agent id
 * and its API key in the environment, drives the scenario on the server side (closes, a
 * supersede, a revoked key, a 429 with Retry-After, a second instance with the same key, a
 * SIGTERM), and judges each rule from the simulator's records: upgrades and their timing,
 * sockets, joins and their join_refs, frames, closes. `phoenix-link conform -- <command…>`
 * prints the verdicts as a table.
 *
 * The agent's contract (its environment):
 * - `PHOENIX_LINK_URL`: the socket URL, `ws://127.0.0.1:<port>/socket` (connect to
 *   `<url>/websocket?vsn=2.0.0`, Phoenix's V2 JSON serializer, or `vsn=1.0.0` for V1, which
 *   Phoenix and the simulator serve too);
 * - `PHOENIX_LINK_AGENT_ID`: the `agent_id` socket param;
 * - `PHOENIX_LINK_API_KEY`: the key, as the `x-api-key` upgrade header or the `api_key` param;
 * - `PHOENIX_LINK_CONTROL_TOPIC`: the control channel to join, `agent_control:<agent_id>`.
 * The server refuses a wrong key with HTTP 403, supersedes an older socket of the same agent
 * with a `supersede` push on the control channel and then a close, as the platform does
 * (docs/design.md, "The platform").
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { startSimulator, type PlatformSimulator, type SimConnection, type SimulatorOptions } from '../server/index.js'
import { controlTopic, HEARTBEAT_EVENT, type WireRef } from '../../protocol.js'
import { deepFreeze } from '../../freeze.js'
import { thrownText } from '../../../machines/types.js'
import { checkSignal } from '../../abort.js'
import { checkKnownKeys } from '../../call-checks.js'
import { visible } from '../visible.js'
import { within } from '../within.js'
import { openGate, spawnGated } from './gate.js'

/** The rules a conformance run judges, in the order the report lists them. */
export const CONFORMANCE_RULES = deepFreeze([
  {
    id: 'connects',
    rule: 'Opens a socket and joins its control channel.',
  },
  {
    id: 'reconnects-after-normal-close',
    rule: 'After the server closes the socket with 1000 and with 1001, opens a new one and rejoins within the reconnect cap.',
  },
  {
    id: 'rejoins-with-fresh-join-ref',
    rule: 'Rejoins every channel of the closed socket on the new one, each with a join_ref the closed socket never used.',
  },
  {
    id: 'one-live-socket',
    rule: 'Never opens a socket while one of its own is still open.',
  },
  {
    id: 'no-reconnect-after-supersede',
    rule: 'After a supersede push (and the server’s close), never opens another socket.',
  },
  {
    id: 'no-reconnect-after-403',
    rule: 'After an upgrade refused with HTTP 403, never tries again.',
  },
  {
    id: 'honours-retry-after',
    rule: 'After an upgrade refused with 429 and Retry-After: N, waits at least N seconds before the next, then tries again.',
  },
  {
    id: 'same-key-instances-settle',
    rule: 'Two instances with one key settle to one live socket: the superseded instance does not come back to evict the newer one.',
  },
  {
    id: 'stops-heartbeats-after-stop',
    rule: 'Once stopped (SIGTERM) or superseded, closes its socket itself (its own close frame, not the server’s), sends no heartbeat on it after, and opens no other; after SIGTERM it exits.',
  },
] as const)

/** A rule's id. */
export type ConformanceRuleId = (typeof CONFORMANCE_RULES)[number]['id']

/** One rule's verdict. `detail` says what the server saw (a figure, or what broke the rule). */
export interface RuleVerdict {
  rule: ConformanceRuleId
  pass: boolean
  detail: string
}

/** What {@link runConformance} found. */
export interface ConformanceReport {
  /** One verdict per rule, in {@link CONFORMANCE_RULES} order. */
  verdicts: RuleVerdict[]
  /** Every verdict passed. */
  passed: boolean
  /** The tail of each scenario's agent output (stdout and stderr, at most 4,000 characters), for a failure's context. */
  output: Record<string, string>
  /**
   * The scenarios whose agent (every instance) ended before the simulator saw any upgrade from it,
   * with how it ended (`exited with code 1`, `could not start …`): an agent that cannot start (a
   * missing module, a wrong path) fails every rule for that one cause, said first by the table.
   */
  neverConnected: Record<string, string>
  ms: number
}

/** Options of {@link runConformance}. Times in milliseconds. */
export interface ConformanceOptions {
  /** The agent's command and arguments, e.g. `['python3', 'agent.py']`. */
  command: readonly string[]
  /** Working directory of the command. @default process.cwd() */
  cwd?: string
  /** Extra environment of the command (beside the process's own and the PHOENIX_LINK_* variables). */
  env?: Record<string, string>
  /** First connect and control join. @default 15000 */
  connectTimeoutMs?: number
  /** The reconnect cap: a new socket and join after a normal close within this. @default 10000 */
  reconnectCapMs?: number
  /**
   * How long the server watches for an attempt that must not come (after a supersede, a 403, two
   * same-key instances settling). An agent whose first retry comes later is not caught: raise it.
   * @default 6000
   */
  quietMs?: number
  /** Retry-After of the 429 scenario, seconds: 3, which a backoff doubling from 1 s does not meet by chance. @default 3 */
  retryAfterS?: number
  /** How long a superseded or SIGTERMed agent has to close its socket. @default 3000 */
  stopTimeoutMs?: number
  /** Scenarios run at once (each is its own agent id and process). @default 3 */
  concurrency?: number
  /** Options of the simulator (its `host` stays loopback). */
  simulator?: Omit<SimulatorOptions, 'agents'>
  /** Called as each scenario ends. What it throws ends the run (every agent stopped) and the run rejects with it. */
  onScenario?: (name: string, verdicts: RuleVerdict[]) => void
  /** Aborting it stops every agent and the simulator, and rejects the run with the signal's reason. */
  signal?: AbortSignal
}

/** The keys of {@link ConformanceOptions}: a misspelt one would be ignored and its default judged by. */
const CONFORMANCE_OPTION_KEYS: ReadonlySet<string> = new Set([
  'command',
  'cwd',
  'env',
  'connectTimeoutMs',
  'reconnectCapMs',
  'quietMs',
  'retryAfterS',
  'stopTimeoutMs',
  'concurrency',
  'simulator',
  'onScenario',
  'signal',
])

interface Settings {
  connectTimeoutMs: number
  reconnectCapMs: number
  quietMs: number
  retryAfterS: number
  stopTimeoutMs: number
}

/**
 * The `retry_after` (seconds) of conform's supersede push: 2 s short of the quiet window after it
 * (at least 1), so an agent that waits it out and comes back does so while the server watches.
 */
function supersedeRetryAfterS(quietMs: number): number {
  return Math.max(1, Math.floor(quietMs / 1000) - 2)
}

/** How often the group of an agent whose command has exited is looked at, while processes of it run on. */
const GROUP_POLL_MS = 100
/** How long after its SIGKILL an agent's group is waited for (a process in uninterruptible sleep dies when it wakes). */
const GROUP_KILL_WAIT_MS = 2000

/**
 * What is left of group `pgid`: `runs` while a process of it runs, `ended` when its only members
 * are processes that have exited and were not reaped, `none` when it has no member. `kill(-pgid,
 * 0)` finds a group while any member exists, and a member that has exited stays one until it is
 * reaped: an orphan (the agent a launcher left in the background) is reaped by PID 1, which in a
 * container may never do it (here, 2026-12-06: a backgrounded `sleep` outlived by its `sh` stayed
 * a zombie of its group for good). So on Linux the group's members are read from /proc (proc(5):
 * the state is the field after the command's closing parenthesis, the group two fields later) and
 * zombies do not run; elsewhere (macOS's launchd reaps orphans) the kill probe decides.
 */
function groupState(pgid: number, members: Set<string>): 'runs' | 'ended' | 'none' {
  try {
    process.kill(-pgid, 0)
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM' ? 'runs' : 'none'
  }
  if (process.platform !== 'linux') return 'runs'
  // The members found last time first: one file each, where a scan of /proc reads one per process
  // of the host (about 25 µs each, on the event loop the simulator runs on: a review measured 80 ms
  // stalls every 100 ms with 3,000 processes). The whole scan only when none of them runs.
  for (const pid of members) if (runsIn(pid, pgid)) return 'runs'
  let entries: string[]
  try {
    entries = readdirSync('/proc')
  } catch {
    return 'runs'
  }
  members.clear()
  for (const entry of entries) if (DIGITS.test(entry) && runsIn(entry, pgid)) members.add(entry)
  return members.size > 0 ? 'runs' : 'ended'
}
const DIGITS = /^\d+$/

/** Whether process `pid` runs (not a zombie) in group `pgid` (proc(5) stat: the state is the field after the command's closing parenthesis, the group two fields later). */
function runsIn(pid: string, pgid: number): boolean {
  let stat: string
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return false // gone
  }
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return Number(fields[2]) === pgid && fields[0] !== 'Z' && fields[0] !== 'X'
}

/**
 * One spawned agent: its command's process and every process the command starts in its group. The
 * agent runs while any of them does: a launcher that starts the agent in the background and exits
 * (`sh -c 'agent & exit 0'`, a wrapper script without `exec`) has not ended it. A process that
 * leaves the group (`setsid`, a daemonizing helper) is not followed.
 */
class Agent {
  private readonly child: ChildProcess
  private text = ''
  /** How the agent ended, once it has: `could not start …: …` or `exited …`. */
  private end: string | null = null
  /** How the command itself ended when processes of its group ran on after it (`its command exited with code 1`), else null. */
  commandEnded: string | null = null
  private poll: NodeJS.Timeout | undefined
  /** Set while the command has exited and processes of its group run on: ends the agent. */
  private groupGone: (() => void) | null = null
  /** Resolves once the agent has ended: its command exited (or never started) and no process of its group runs. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>

  constructor(command: readonly string[], cwd: string, env: NodeJS.ProcessEnv) {
    // Held until release(), after conform has given the reaper its group (./gate.ts): a conform
    // killed in between leaves no agent running that the reaper does not know.
    this.child = spawnGated(command, cwd, env)
    const keep = (chunk: Buffer) => {
      this.text = (this.text + chunk.toString()).slice(-4000)
    }
    this.child.stdout!.on('data', keep)
    this.child.stderr!.on('data', keep)
    this.exited = new Promise((resolve) => {
      this.child.once('error', (error) => {
        this.end = `could not start ${command[0]}: ${error.message}`
        this.text += `\n(${this.end})`
        resolve({ code: null, signal: null })
      })
      // 'exit', not 'close': a helper the agent left running (setsid) may hold its pipes open for ever.
      this.child.once('exit', (code, signal) => {
        const how = signal ? `on ${signal}` : `with code ${code}`
        const ended = (end: string) => {
          clearInterval(this.poll)
          this.groupGone = null
          this.end = end
          this.text = `${this.text}\n(${end})`.slice(-4000)
          this.child.stdout?.destroy()
          this.child.stderr?.destroy()
          resolve({ code, signal })
        }
        const afterGroup = `exited: its command ${how}, then the last process of its group`
        const pid = this.child.pid!
        const members = new Set<string>()
        const left = groupState(pid, members)
        // `ended`: processes it started in its group ran and exited before its own exit was read.
        if (left !== 'runs') return ended(left === 'none' ? `exited ${how}` : afterGroup)
        // The command is gone and its group runs on (an agent started in the background): the agent
        // ends when the last of them does, or when stop() gives up on them.
        this.commandEnded = `its command exited ${how}`
        this.groupGone = () => ended(afterGroup)
        this.poll = setInterval(() => {
          if (groupState(pid, members) !== 'runs') this.groupGone?.()
        }, GROUP_POLL_MS)
      })
    })
  }

  get output(): string {
    return this.text
  }

  /** Lets the agent's command run (its group is known to the reaper by now); once. */
  release(): void {
    openGate(this.child)
  }

  /** The id of the agent's process group (its command's pid), or undefined when it never started. */
  get pgid(): number | undefined {
    return this.child.pid
  }

  get running(): boolean {
    return this.groupGone !== null || (this.child.exitCode === null && this.child.signalCode === null && this.child.pid !== undefined)
  }

  /** Null while the agent runs; once it is gone, how: `could not start …: …`, `exited with code N` (`exited on SIGNAL`), or `exited: its command with code N, then the last process of its group`. */
  get gone(): string | null {
    return this.running ? null : (this.end ?? 'exited')
  }

  /** Whether conform signalled the agent (a stop, a SIGTERM step): an exit after it is not the agent's own. */
  signalled = false

  /** Sends `signal` to the agent's process group. */
  signal(signal: NodeJS.Signals): void {
    if (this.running) this.signalled = true
    if (this.child.pid === undefined) return
    try {
      process.kill(-this.child.pid, signal)
    } catch {
      // Already gone.
    }
  }

  /**
   * Ends the agent: SIGTERM to its group, then SIGKILL after `graceMs`; resolves once it has ended
   * (its whole group killed), or `GROUP_KILL_WAIT_MS` after the SIGKILL when a process of its group
   * still runs (one that cannot die yet): it stops looking at the group then.
   */
  async stop(graceMs: number): Promise<void> {
    if (this.running) {
      this.signal('SIGTERM')
      if (!(await endsWithin(this, graceMs))) this.signal('SIGKILL')
    }
    if (!(await endsWithin(this, GROUP_KILL_WAIT_MS))) this.groupGone?.()
    await this.exited
    this.signal('SIGKILL') // whatever the command left behind in its group
  }
}

/**
 * The reaper's program: it reads `+<pgid>` and `-<pgid>` lines (an agent's process group started,
 * ended) on its stdin, and when the stdin ends with groups left (conform itself died, a SIGKILL or
 * an out-of-memory kill, and the pipe closed with it) sends each SIGTERM, then SIGKILL after the
 * grace (argv[1], ms), and exits. Any end of the pipe counts, its `error` and `close` as well as
 * its end (none is known to come alone: the reaper writes nothing to the pipe, so its read
 * cannot be reset, unix(7); an unhandled `error` would end the reaper with the agents running).
 * An ordinary end of conform removes every group first: then it just exits.
 */
const REAPER_PROGRAM = `
const graceMs = Number(process.argv[1])
const groups = new Set()
let text = ''
process.stdin.setEncoding('utf8')
process.stdin.on('data', (chunk) => {
  text += chunk
  for (let at = text.indexOf('\\n'); at >= 0; at = text.indexOf('\\n')) {
    const line = text.slice(0, at)
    text = text.slice(at + 1)
    const pgid = Number(line.slice(1))
    if (!(Number.isInteger(pgid) && pgid > 1)) continue
    if (line[0] === '+') groups.add(pgid)
    else groups.delete(pgid)
  }
})
let ended = false
const end = () => {
  if (ended) return
  ended = true
  if (groups.size === 0) return process.exit(0)
  const send = (signal) => { for (const pgid of groups) { try { process.kill(-pgid, signal) } catch {} } }
  send('SIGTERM')
  setTimeout(() => { send('SIGKILL'); process.exit(0) }, graceMs)
}
process.stdin.on('end', end)
process.stdin.on('error', end)
process.stdin.on('close', end)
`

/**
 * A process of its own that ends the agents' process groups if conform dies without stopping them
 * (a SIGKILL): each agent runs in a group of its own, so nothing else would, and an agent left
 * running would reconnect for ever to a port nobody listens on. Conform tells it each group that
 * starts and ends ({@link REAPER_PROGRAM}), and ends it with the run ({@link Reaper.close}).
 */
class Reaper {
  private readonly child: ChildProcess
  private readonly exited: Promise<void>

  constructor(graceMs: number) {
    // Detached: a Ctrl-C to conform's process group must not end it before conform has stopped its agents.
    this.child = spawn(process.execPath, ['-e', REAPER_PROGRAM, String(graceMs)], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] })
    this.exited = new Promise((resolve) => {
      this.child.once('exit', () => resolve())
      this.child.once('error', () => resolve())
    })
    this.child.stdin!.on('error', () => {})
  }

  /** An agent's group started (`true`) or ended. */
  track(pgid: number | undefined, started: boolean): void {
    if (pgid !== undefined && this.child.stdin!.writable) this.child.stdin!.write(`${started ? '+' : '-'}${pgid}\n`)
  }

  /** Ends it: every group tracked has ended, so it exits without signalling any. */
  async close(): Promise<void> {
    this.child.stdin!.end()
    await this.exited
  }
}

/** Whether the agent ends within `ms` (`within`, its timeout read as false). */
const endsWithin = (agent: { exited: Promise<unknown> }, ms: number): Promise<boolean> =>
  within(agent.exited, ms, 'the agent to end').then(
    () => true,
    () => false,
  )

/** What one scenario can use. */
interface Stage {
  sim: PlatformSimulator
  settings: Settings
  agentId: string
  start(): Agent
  /** Resolves true when `check` holds within `ms`, false otherwise. */
  until(check: () => boolean, ms: number): Promise<boolean>
  /** Resolves after `ms` of server time (a quiet window: the server watches for what must not come). */
  watch(ms: number): Promise<void>
}

const CONTROL = (agentId: string) => controlTopic(agentId)
/** The longest timer Node keeps: a longer one runs after 1 ms (a `TimeoutOverflowWarning`). */
const MAX_TIMER_MS = 2 ** 31 - 1
/** How long after the agent's exit the server is given to read the end of its sockets. */
const EXIT_SETTLE_MS = 1000

/**
 * Resolves true once `check()` holds (re-checked on every simulator record), false after `ms`,
 * or false once every agent process has exited and the server has had `EXIT_SETTLE_MS` (within
 * `ms`) to see what the exit did to its sockets: a process's exit can be reported before the
 * server reads the end of its TCP connections. Leaves no timer or listener.
 */
function untilOrExit(sim: PlatformSimulator, check: () => boolean, ms: number, agents: readonly Agent[]): Promise<boolean> {
  if (check()) return Promise.resolve(true)
  return new Promise((resolve) => {
    let done = false
    const finish = (value: boolean) => {
      if (done) return
      done = true
      clearTimeout(timer)
      sim.off('change', onChange)
      resolve(value)
    }
    const onChange = () => {
      if (check()) finish(true)
    }
    const started = sim.now()
    let timer = setTimeout(() => finish(check()), ms)
    sim.on('change', onChange)
    void Promise.all(agents.map((a) => a.exited)).then(() => {
      if (done) return
      if (check()) return finish(true)
      clearTimeout(timer)
      timer = setTimeout(() => finish(check()), Math.max(0, Math.min(EXIT_SETTLE_MS, ms - (sim.now() - started))))
    })
  })
}

/** Resolves after `ms`, or at once when `signal` aborts (never rejects); leaves no timer or listener behind. */
function quietFor(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve()
    const done = () => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal?.addEventListener('abort', done, { once: true })
  })
}

/** The socket's joins, from the simulator's join record (not the frame record, which a chatty agent's pushes outrun). */
function joinsOf(c: SimConnection): Array<{ topic: string; joinRef: WireRef }> {
  return c.joinsReceived
}

function joinedControl(c: SimConnection, agentId: string): boolean {
  return c.state === 'open' && c.channels.has(CONTROL(agentId))
}

/** The agent's sockets that opened while one of its own was open (not closed, not being closed by the server). */
function overlaps(sim: PlatformSimulator, agentId: string): string[] {
  return sim.upgrades
    .filter((u) => u.agentId === agentId && (u.superseded?.length ?? 0) > 0)
    .map((u) => `at ${u.at} ms a socket opened while ${u.superseded!.join(', ')} was open`)
}

async function connected(stage: Stage, ms: number, after = 0): Promise<SimConnection | null> {
  const { sim, agentId } = stage
  const find = () => sim.accepted(agentId).slice(after).find((c) => joinedControl(c, agentId)) ?? null
  return (await stage.until(() => find() !== null, ms)) ? find() : null
}

/**
 * The socket to act on once the agent has settled: `socket` while it is still open, else the
 * agent's newest open socket joined to its control topic (a client that opened two at start
 * had its older one superseded by the newer in the meantime), else `socket` itself.
 */
function settledSocket(stage: Stage, socket: SimConnection): SimConnection {
  if (socket.state === 'open') return socket
  return stage.sim.accepted(stage.agentId).filter((c) => joinedControl(c, stage.agentId)).at(-1) ?? socket
}

/**
 * Why no socket of the agent joined its control channel, as the server saw it: no upgrade arrived;
 * every upgrade was refused (the statuses); or sockets were accepted and the agent sent no join
 * of its control topic on any (the topics it did join, if any).
 */
function notJoinedWhy(sim: PlatformSimulator, agentId: string): string {
  const upgrades = sim.upgrades.filter((u) => u.agentId === agentId)
  if (upgrades.length === 0) return ' (no upgrade arrived)'
  const accepted = sim.accepted(agentId)
  if (accepted.length === 0) return ` (${upgrades.length} upgrade(s), each refused: ${[...new Set(upgrades.map((u) => u.status))].join(', ')})`
  const topics = [...new Set(accepted.flatMap((c) => c.joinsReceived.map((j) => j.topic)))]
  if (topics.includes(CONTROL(agentId))) return ` (${accepted.length} socket(s) accepted; its phx_join of ${CONTROL(agentId)} was not answered ok)`
  // Frames the server could not read (it closed those sockets 1011): what the agent sent is not known, only that.
  const unread = accepted.filter((c) => c.closeCause === 'malformed')
  if (unread.length > 0) {
    return ` (${accepted.length} socket(s) accepted; the simulator closed ${unread.length} of them 1011 on a frame it could not read: ${visible(unread[0]!.problems[0] ?? 'malformed')}; see docs/field-notes.md for what it reads more strictly than Phoenix)`
  }
  return ` (${accepted.length} socket(s) accepted, no phx_join of ${CONTROL(agentId)} on any${topics.length > 0 ? `; phx_join of ${topics.map((t) => visible(t)).join(', ')}` : ''})`
}

/** Lets the agent finish its joins (app channels after the control channel), then {@link settledSocket}. */
async function afterJoins(stage: Stage, socket: SimConnection): Promise<SimConnection> {
  await stage.watch(300)
  return settledSocket(stage, socket)
}

type Verdicts = Partial<Record<ConformanceRuleId, RuleVerdict>>
const verdict = (rule: ConformanceRuleId, pass: boolean, detail: string): RuleVerdict => ({ rule, pass, detail })

/** Scenario: connect, close 1000, close 1001 (reconnect and rejoin each time), then SIGTERM. */
async function closes(stage: Stage): Promise<Verdicts> {
  const { sim, agentId, settings } = stage
  const agent = stage.start()
  const out: Verdicts = {}
  const first = await connected(stage, settings.connectTimeoutMs)
  out.connects = first
    ? verdict('connects', true, `socket and ${CONTROL(agentId)} joined ${first.openedAt} ms after start`)
    : verdict(
        'connects',
        false,
        `no socket joined ${CONTROL(agentId)} ${agent.gone === null ? `within ${settings.connectTimeoutMs} ms` : `before the agent ${agent.gone}`}${notJoinedWhy(sim, agentId)}${agent.gone === null && agent.commandEnded !== null ? `; ${agent.commandEnded} and processes it left in its group ran on` : ''}`,
      )
  if (!first) {
    await agent.stop(settings.stopTimeoutMs)
    return out
  }
  const delays: string[] = []
  const rejoins: string[] = []
  let current = first
  let reconnectFailure: string | null = null
  for (const code of [1000, 1001]) {
    current = await afterJoins(stage, current)
    const before = sim.accepted(agentId).length
    const closedAt = sim.now()
    sim.close(current, code)
    const next = await connected(stage, settings.reconnectCapMs, before)
    if (!next) {
      reconnectFailure = `after close ${code}, no new socket joined ${CONTROL(agentId)} ${agent.gone === null ? `within ${settings.reconnectCapMs} ms` : `before the agent ${agent.gone}`}`
      break
    }
    delays.push(`${code}: ${next.openedAt - closedAt} ms`)
    const old = joinsOf(current)
    const topics = [...new Set(old.map((j) => j.topic))]
    // Every topic of the closed socket joined on the new one (an agent may join its app channels
    // some time after the control channel), within the cap; then a moment for a second join of one.
    await stage.until(() => topics.every((topic) => joinsOf(next).some((j) => j.topic === topic)), settings.reconnectCapMs)
    await stage.watch(300)
    const fresh = joinsOf(next)
    const usedRefs = new Set(old.map((j) => j.joinRef))
    for (const topic of new Set(old.map((j) => j.topic))) {
      const again = fresh.filter((j) => j.topic === topic)
      if (again.length === 0) rejoins.push(`after close ${code}, ${topic} was not rejoined within ${settings.reconnectCapMs} ms`)
      // A join with no join_ref (V1 allows it) names no join: replies and pushes of the old one cannot be told from the new one's.
      else if (again.some((j) => j.joinRef === null)) rejoins.push(`after close ${code}, ${topic} was rejoined with no join_ref`)
      else if (again.some((j) => usedRefs.has(j.joinRef))) rejoins.push(`after close ${code}, ${topic} was rejoined with join_ref ${again[0]!.joinRef}, used on the closed socket`)
    }
    current = next
  }
  out['reconnects-after-normal-close'] = reconnectFailure
    ? verdict('reconnects-after-normal-close', false, reconnectFailure)
    : verdict('reconnects-after-normal-close', true, `reconnected and rejoined after ${delays.join(', ')}`)
  out['rejoins-with-fresh-join-ref'] = reconnectFailure
    ? verdict('rejoins-with-fresh-join-ref', false, 'not judged: the agent did not reconnect')
    : rejoins.length > 0
      ? verdict('rejoins-with-fresh-join-ref', false, rejoins.join('; '))
      : verdict('rejoins-with-fresh-join-ref', true, `${new Set(joinsOf(first).map((j) => j.topic)).size} topic(s) rejoined with fresh join_refs after each close`)
  // Stop: SIGTERM, and the agent must close its own socket and then send nothing: no heartbeat on
  // it, and no upgrade after it (an agent that reconnects, or opens a new socket and leaves the
  // server to supersede the old one, has not stopped).
  const socket = current
  const termAt = sim.now()
  if (!reconnectFailure) {
    const signalledAt = performance.now()
    agent.signal('SIGTERM')
    const closedItself = await stage.until(() => socket.state === 'closed', settings.stopTimeoutMs)
    // A heartbeat already on its way when the signal came is not the agent's fault; later ones are.
    const beats = socket.frames.filter((f) => f.dir === 'in' && f.at > termAt + 200 && f.frame?.event === HEARTBEAT_EVENT)
    const code = socket.closeSeen?.code
    // The contract: on SIGTERM, close the socket and exit, within stopTimeoutMs of that one signal.
    // One that lives on after closing its socket has not stopped (it may come back later than
    // conform watches: a 5 s timer). Judged before stop() signals again: a second SIGTERM would
    // end, by the default action, an agent that handled only the first (`process.once`).
    const exitedItself = await endsWithin(agent, Math.max(0, settings.stopTimeoutMs - (performance.now() - signalledAt)))
    await agent.stop(1)
    const later = sim.upgrades.filter((u) => u.agentId === agentId && u.at > termAt)
    out['stops-heartbeats-after-stop'] = !closedItself
      ? verdict('stops-heartbeats-after-stop', false, `after SIGTERM its socket was still open ${settings.stopTimeoutMs} ms later${beats.length > 0 ? `, with ${beats.length} heartbeat(s)` : ''}`)
      : socket.clientClosed === null && socket.closeSent !== null
        ? verdict('stops-heartbeats-after-stop', false, `after SIGTERM its socket was closed by the server (close ${socket.closeSent.code}${later.length > 0 ? ': a newer socket of the agent superseded it' : ''}), not by the agent`)
        : socket.clientClosed === null
          ? verdict('stops-heartbeats-after-stop', false, `after SIGTERM its socket ended with no close frame (${code ?? 1006}): the process died without closing it`)
          : beats.length > 0
            ? verdict('stops-heartbeats-after-stop', false, `${beats.length} heartbeat(s) after SIGTERM, before its socket closed`)
            : later.length > 0
              ? verdict('stops-heartbeats-after-stop', false, `${later.length} upgrade(s) after SIGTERM, the first ${later[0]!.at - termAt} ms after it: the agent closed its socket (close ${code ?? '?'}) and came back`)
              : !exitedItself
                ? verdict('stops-heartbeats-after-stop', false, `after SIGTERM it closed its socket (close ${code ?? '?'}) but was still running ${sim.now() - termAt} ms later, until conform stopped it (a second SIGTERM, then SIGKILL): an agent that stops exits`)
                : verdict('stops-heartbeats-after-stop', true, `after SIGTERM its socket closed in ${(socket.closedAt ?? termAt) - termAt} ms (close ${code ?? '?'}), no upgrade followed, and it exited`)
  } else {
    await agent.stop(settings.stopTimeoutMs)
    // Its half of the rule is not judged, and says so: a PASS from the supersede half alone would hide it.
    out['stops-heartbeats-after-stop'] = verdict('stops-heartbeats-after-stop', false, 'not judged after SIGTERM: the agent did not reconnect')
  }
  const overlapping = overlaps(sim, agentId)
  out['one-live-socket'] = verdict('one-live-socket', overlapping.length === 0, overlapping.length === 0 ? `${sim.accepted(agentId).length} sockets, never two at once` : overlapping.join('; '))
  return out
}

/** Scenario: connect, a supersede push with the socket left open, then the server's close; the agent must go and stay gone. */
async function supersede(stage: Stage): Promise<Verdicts> {
  const { sim, agentId, settings } = stage
  const agent = stage.start()
  const out: Verdicts = {}
  const joined = await connected(stage, settings.connectTimeoutMs)
  if (!joined) {
    await agent.stop(settings.stopTimeoutMs)
    return { 'no-reconnect-after-supersede': verdict('no-reconnect-after-supersede', false, 'not judged: the agent never connected') }
  }
  const socket = await afterJoins(stage, joined)
  // Both rules of this scenario fail, saying why, when the supersede cannot be judged.
  const notJudged = async (why: string): Promise<Verdicts> => {
    await agent.stop(settings.stopTimeoutMs)
    return Object.fromEntries(SCENARIO_RULES.supersede!.map((rule) => [rule, verdict(rule, false, `not judged: ${why}`)]))
  }
  if (socket.state !== 'open') {
    return notJudged(`the agent's socket was ${socket.state} before the supersede (it closed by itself ${socket.closedAt === null ? '' : `${socket.closedAt - socket.openedAt} ms after opening`})`)
  }
  const pushedAt = sim.now()
  const sent = sim.supersede(agentId, { close: null })
  if (sent !== 1) return notJudged(`the supersede reached ${sent} sockets, not the agent's one`)
  const closedItself = await stage.until(() => socket.state === 'closed', settings.stopTimeoutMs)
  const beats = socket.frames.filter((f) => f.dir === 'in' && f.at > pushedAt + 1000 && f.frame?.event === HEARTBEAT_EVENT).length
  if (!closedItself && socket.state === 'open') sim.close(socket, sim.flavor.supersede)
  const sockets = sim.accepted(agentId).length
  const attempts = () => sim.upgrades.filter((u) => u.agentId === agentId && u.at > pushedAt)
  await stage.watch(settings.quietMs)
  const later = attempts()
  out['no-reconnect-after-supersede'] =
    later.length === 0
      ? verdict('no-reconnect-after-supersede', true, `no upgrade in ${settings.quietMs} ms after the supersede`)
      : verdict('no-reconnect-after-supersede', false, `${later.length} upgrade(s) after the supersede, the first ${later[0]!.at - pushedAt} ms after it (${sim.accepted(agentId).length - sockets} accepted)`)
  // As after SIGTERM: the agent closes its socket itself, with a close frame; a process that died
  // (1006, no close frame) did not.
  const supersedeStop = !closedItself
    ? `a superseded socket left open by the server was still open ${settings.stopTimeoutMs} ms after the push${beats > 0 ? `, with ${beats} heartbeat(s)` : ''}`
    : socket.clientClosed === null && socket.closeSent !== null
      ? `after the supersede its socket was closed by the server (close ${socket.closeSent.code}), not by the agent`
      : socket.clientClosed === null
        ? `after the supersede its socket ended with no close frame (${socket.closeSeen?.code ?? 1006}), ${(socket.closedAt ?? pushedAt) - pushedAt} ms after the push: the process died without closing it`
        : beats > 0
          ? `${beats} heartbeat(s) on the superseded socket more than 1 s after the push, before the agent closed it ${(socket.closedAt ?? pushedAt) - pushedAt} ms after the push`
          : null
  out['stops-heartbeats-after-stop'] = supersedeStop
    ? verdict('stops-heartbeats-after-stop', false, supersedeStop)
    : verdict('stops-heartbeats-after-stop', true, `closed its superseded socket ${(socket.closedAt ?? pushedAt) - pushedAt} ms after the push`)
  await agent.stop(settings.stopTimeoutMs)
  return out
}

/** Scenario: connect, the key revoked and the socket closed 1000: one 403, then nothing. */
async function refusal(stage: Stage): Promise<Verdicts> {
  const { sim, agentId, settings } = stage
  const agent = stage.start()
  const joined = await connected(stage, settings.connectTimeoutMs)
  const rule = 'no-reconnect-after-403'
  if (!joined) {
    await agent.stop(settings.stopTimeoutMs)
    return { [rule]: verdict(rule, false, 'not judged: the agent never connected') }
  }
  const socket = await afterJoins(stage, joined)
  sim.revoke(agentId)
  sim.close(socket, 1000)
  const refused = () => sim.upgrades.filter((u) => u.agentId === agentId && u.status === 403)
  let result: RuleVerdict
  if (!(await stage.until(() => refused().length > 0, settings.reconnectCapMs))) {
    result = verdict(rule, false, `not judged: no upgrade within ${settings.reconnectCapMs} ms of the close 1000`)
  } else {
    const firstAt = refused()[0]!.at
    await stage.watch(settings.quietMs)
    const more = sim.upgrades.filter((u) => u.agentId === agentId && u.at > firstAt)
    result =
      more.length === 0
        ? verdict(rule, true, `one upgrade refused 403, none in the ${settings.quietMs} ms after`)
        : verdict(rule, false, `${more.length} more upgrade(s) after the 403, the first ${more[0]!.at - firstAt} ms after it`)
  }
  await agent.stop(settings.stopTimeoutMs)
  return { [rule]: result }
}

/** Scenario: connect, close 1000, the next upgrade refused 429 with Retry-After; the one after must wait. */
async function retryAfter(stage: Stage): Promise<Verdicts> {
  const { sim, agentId, settings } = stage
  const agent = stage.start()
  const rule = 'honours-retry-after'
  const joined = await connected(stage, settings.connectTimeoutMs)
  if (!joined) {
    await agent.stop(settings.stopTimeoutMs)
    return { [rule]: verdict(rule, false, 'not judged: the agent never connected') }
  }
  const socket = await afterJoins(stage, joined)
  sim.refuseUpgradesOf(agentId, { status: 429, retryAfter: String(settings.retryAfterS) })
  sim.close(socket, 1000)
  const ofAgent = () => sim.upgrades.filter((u) => u.agentId === agentId)
  const refusedAt = () => ofAgent().find((u) => u.status === 429)?.at ?? null
  let result: RuleVerdict
  if (!(await stage.until(() => refusedAt() !== null, settings.reconnectCapMs))) {
    result = verdict(rule, false, `not judged: no upgrade within ${settings.reconnectCapMs} ms of the close 1000`)
  } else {
    const at = refusedAt()!
    const next = () => ofAgent().find((u) => u.at > at || (u.at === at && u.status !== 429)) ?? null
    const wantMs = settings.retryAfterS * 1000
    await stage.until(() => next() !== null, wantMs + settings.reconnectCapMs)
    const n = next()
    // Records are whole milliseconds: a next attempt 1 ms early is rounding, not a broken rule.
    result = !n
      ? verdict(rule, false, agent.gone === null ? `no attempt within ${wantMs + settings.reconnectCapMs} ms of the 429: it never tried again` : `no attempt after the 429 before the agent ${agent.gone}`)
      : n.at - at >= wantMs - 1
        ? verdict(rule, true, `next attempt ${n.at - at} ms after a 429 with Retry-After: ${settings.retryAfterS}`)
        : verdict(rule, false, `next attempt ${n.at - at} ms after a 429 with Retry-After: ${settings.retryAfterS}`)
    // A moment for a second socket the retry may have opened beside the first (both the error and
    // the close path of a refused upgrade scheduling a reconnect): one-live-socket judges it.
    if (n) await stage.watch(300)
  }
  await agent.stop(settings.stopTimeoutMs)
  return { [rule]: result }
}

/** Scenario: a second instance with the same key starts; the two must settle to one live socket. */
async function sameKey(stage: Stage): Promise<Verdicts> {
  const { sim, agentId, settings } = stage
  const rule = 'same-key-instances-settle'
  const older = stage.start()
  const first = await connected(stage, settings.connectTimeoutMs)
  if (!first) {
    await older.stop(settings.stopTimeoutMs)
    return { [rule]: verdict(rule, false, 'not judged: the first instance never connected') }
  }
  await stage.watch(300)
  const newer = stage.start()
  const before = sim.accepted(agentId).length
  let result: RuleVerdict
  const second = await connected(stage, settings.connectTimeoutMs, before)
  if (!second) {
    result = verdict(rule, false, 'not judged: the second instance never connected')
  } else {
    // The newer instance's own start-up (a double connect superseding itself) is not an eviction.
    await stage.watch(300)
    const settledFrom = sim.accepted(agentId).length
    const fromAt = sim.now()
    await stage.watch(settings.quietMs)
    const evictions = sim.accepted(agentId).length - settledFrom
    const live = sim.live(agentId).length
    result =
      evictions === 0 && live === 1
        ? verdict(rule, true, `one live socket, no new one in the ${settings.quietMs} ms after the second instance took the key`)
        : evictions === 0 && live === 0
          ? verdict(rule, false, `no live socket at the end, and no new one in the ${sim.now() - fromAt} ms after the second instance took the key: the instance holding the key let it go (did it exit?)`)
          : verdict(
            rule,
            false,
            `${evictions} more socket(s) in the ${sim.now() - fromAt} ms after the second instance took the key (each evicting the other), ${live} live at the end`,
          )
  }
  await Promise.all([older.stop(settings.stopTimeoutMs), newer.stop(settings.stopTimeoutMs)])
  return { [rule]: result }
}

const SCENARIOS: Record<string, (stage: Stage) => Promise<Verdicts>> = {
  closes,
  supersede,
  refusal,
  'retry-after': retryAfter,
  'same-key': sameKey,
}

/** The rules each scenario judges (a scenario that fails to run breaks each of them, saying why). */
const SCENARIO_RULES: Record<string, ConformanceRuleId[]> = {
  closes: ['connects', 'reconnects-after-normal-close', 'rejoins-with-fresh-join-ref', 'one-live-socket', 'stops-heartbeats-after-stop'],
  supersede: ['no-reconnect-after-supersede', 'stops-heartbeats-after-stop'],
  refusal: ['no-reconnect-after-403'],
  'retry-after': ['honours-retry-after'],
  'same-key': ['same-key-instances-settle'],
}

/**
 * Runs every scenario against the agent `options.command` and judges every rule.
 *
 * @returns the verdicts (it resolves whether or not they pass).
 * @throws {TypeError} (rejects) when `options` is not an object, or holds an unknown key (a misspelt option would be ignored).
 * @throws {RangeError} (rejects) for a `concurrency` that is not a whole number >= 1; a
 *   `connectTimeoutMs`, `reconnectCapMs`, `quietMs` or `stopTimeoutMs` that is not a whole number
 *   of milliseconds in [1, 2^31-1]; a `retryAfterS` that is not a whole number >= 1, or whose
 *   wait with the reconnect cap (`retryAfterS * 1000 + reconnectCapMs`) passes 2^31-1 ms (the
 *   longest timer Node keeps). Before the simulator starts or any agent is spawned.
 * @throws {Error} (rejects) when the command is empty or the simulator cannot listen.
 * @throws {ConfigurationError} (rejects) when `options.signal` is given and is not an AbortSignal
 *   (before the simulator starts or any agent is spawned).
 */
export async function runConformance(options: ConformanceOptions): Promise<ConformanceReport> {
  if (options === null || typeof options !== 'object') throw new TypeError(`runConformance needs an options object with the agent command, got ${options === null ? 'null' : typeof options}`)
  checkKnownKeys(options, CONFORMANCE_OPTION_KEYS, 'runConformance')
  if (!Array.isArray(options.command) || options.command.length === 0 || !options.command[0]) throw new Error('conform needs the agent command, e.g. phoenix-link conform -- python3 agent.py')
  checkSignal(options.signal, 'runConformance')
  const concurrency = options.concurrency ?? 3
  if (!(Number.isInteger(concurrency) && concurrency >= 1)) throw new RangeError(`conform concurrency must be a whole number >= 1, got ${String(options.concurrency)}`)
  const settings: Settings = {
    connectTimeoutMs: options.connectTimeoutMs ?? 15_000,
    reconnectCapMs: options.reconnectCapMs ?? 10_000,
    quietMs: options.quietMs ?? 6_000,
    retryAfterS: options.retryAfterS ?? 3,
    stopTimeoutMs: options.stopTimeoutMs ?? 3_000,
  }
  // Each is a timer's length (Node keeps at most 2^31-1 ms and runs a longer one at once, which
  // would judge a quiet window as passed); 0 would judge nothing.
  for (const name of ['connectTimeoutMs', 'reconnectCapMs', 'quietMs', 'stopTimeoutMs'] as const) {
    const value = settings[name]
    if (!(Number.isInteger(value) && value >= 1 && value <= MAX_TIMER_MS)) throw new RangeError(`conform ${name} must be a whole number of milliseconds in [1, ${MAX_TIMER_MS}], got ${String(value)}`)
  }
  const { retryAfterS, reconnectCapMs } = settings
  if (!(Number.isInteger(retryAfterS) && retryAfterS >= 1)) throw new RangeError(`conform retryAfterS must be a whole number of seconds >= 1, got ${String(retryAfterS)}`)
  // The 429 scenario waits for the next attempt up to the Retry-After plus the reconnect cap.
  if (retryAfterS * 1000 + reconnectCapMs > MAX_TIMER_MS) {
    throw new RangeError(`conform reconnectCapMs plus the 429 scenario's Retry-After (retryAfterS * 1000) must be at most ${MAX_TIMER_MS} ms, got ${reconnectCapMs} + ${retryAfterS * 1000}`)
  }
  const started = performance.now()
  const apiKey = `conform-${randomBytes(8).toString('hex')}`
  const sim = await startSimulator({
    recordLimit: 5_000,
    // The supersede push's retry_after (the platform's is 30 s) inside the quiet window: an agent
    // that misreads it as "come back after" is caught coming back (a review, 2026-12-07: with 30
    // and a 6 s window it passed).
    supersedeRetryAfterS: supersedeRetryAfterS(settings.quietMs),
    ...options.simulator,
    host: '127.0.0.1',
    agents: 'any',
  })
  const reaper = new Reaper(settings.stopTimeoutMs)
  const found: Verdicts[] = []
  const output: Record<string, string> = {}
  const neverConnected: Record<string, string> = {}
  const running = new Set<Agent>()
  /** What the host's onScenario threw, which ends the run. */
  let hostFailure: { error: unknown } | null = null
  let workers: Promise<unknown> | null = null
  let aborted: (() => void) | null = null
  const abortedRun = new Promise<never>((_, reject) => {
    if (!options.signal) return
    aborted = () => reject(options.signal!.reason ?? new Error('aborted'))
    if (options.signal.aborted) aborted()
    else options.signal.addEventListener('abort', aborted, { once: true })
  })
  abortedRun.catch(() => {})
  try {
    const names = Object.keys(SCENARIOS)
    let next = 0
    const worker = async () => {
      while (next < names.length && !options.signal?.aborted && hostFailure === null) {
        const name = names[next++]!
        const agentId = `conform-${name}-${randomBytes(3).toString('hex')}`
        const agents: Agent[] = []
        const stage: Stage = {
          sim,
          settings,
          agentId,
          start: () => {
            if (options.signal?.aborted) throw new Error('the run was stopped')
            const agent = new Agent(options.command, options.cwd ?? process.cwd(), {
              ...process.env,
              ...options.env,
              PHOENIX_LINK_URL: sim.url,
              PHOENIX_LINK_AGENT_ID: agentId,
              PHOENIX_LINK_API_KEY: apiKey,
              PHOENIX_LINK_CONTROL_TOPIC: controlTopic(agentId),
            })
            agents.push(agent)
            running.add(agent)
            reaper.track(agent.pgid, true)
            agent.release()
            // Forgotten as soon as its group has ended (by itself too, as a well-behaved agent ends on
            // a supersede): its id may then be taken by another process group, which is not ours to end.
            void agent.exited.then(() => reaper.track(agent.pgid, false))
            return agent
          },
          // Gives up early once every agent process of the scenario has exited: nothing more will come.
          until: (check, ms) => untilOrExit(sim, check, ms, agents),
          // A quiet window ends early when the run is stopped: nothing after it is judged.
          watch: (ms) => quietFor(ms, options.signal),
        }
        let verdicts: Verdicts
        try {
          verdicts = await SCENARIOS[name]!(stage)
        } catch (error) {
          const why = `not judged: the ${name} scenario failed (${thrownText(error)})`
          verdicts = Object.fromEntries(SCENARIO_RULES[name]!.map((rule) => [rule, verdict(rule, false, why)]))
        }
        // Two sockets of the agent open at once, in any scenario but the one that starts two instances.
        if (name !== 'same-key' && name !== 'closes' && !options.signal?.aborted) {
          const overlapping = overlaps(sim, agentId)
          if (overlapping.length > 0) verdicts['one-live-socket'] = verdict('one-live-socket', false, `in the ${name} scenario: ${overlapping.join('; ')}`)
        }
        // Every instance ended on its own (not stopped by conform after a wait) before any upgrade.
        const ended = agents.length > 0 && agents.every((a) => a.gone !== null && !a.signalled) && sim.upgradeCounts(agentId).upgrades === 0 ? agents[0]!.gone! : null
        for (const agent of agents) {
          await agent.stop(settings.stopTimeoutMs)
          running.delete(agent)
          reaper.track(agent.pgid, false)
        }
        if (ended !== null && !options.signal?.aborted) neverConnected[name] = ended
        // A scenario the stop cut short judged nothing: no verdict, no report after the run rejected.
        if (options.signal?.aborted || hostFailure !== null) return
        output[name] = agents.map((a, i) => (agents.length > 1 ? `[instance ${i + 1}]\n${a.output}` : a.output)).join('\n')
        found.push(verdicts)
        try {
          options.onScenario?.(name, Object.values(verdicts))
        } catch (error) {
          // The host's callback failed: the run stops as on an abort (no scenario starts after it,
          // every agent is stopped) and rejects with what it threw.
          hostFailure ??= { error }
          return
        }
      }
    }
    workers = Promise.all(Array.from({ length: concurrency }, worker))
    await Promise.race([workers, abortedRun])
  } finally {
    if (aborted) options.signal?.removeEventListener('abort', aborted)
    await Promise.all(
      [...running].map(async (agent) => {
        await agent.stop(settings.stopTimeoutMs)
        reaper.track(agent.pgid, false)
      }),
    )
    await reaper.close()
    await sim.stop()
    // On a stop, the scenarios still running end now (their agents gone, the simulator stopped, their
    // quiet windows cut): wait for them, bounded, so nothing of the run happens after it returns.
    if (workers && options.signal?.aborted) {
      const bound = new AbortController()
      await Promise.race([workers.catch(() => {}), quietFor(settings.stopTimeoutMs + EXIT_SETTLE_MS, bound.signal)])
      bound.abort()
    }
  }
  if (hostFailure !== null) throw (hostFailure as { error: unknown }).error
  const verdicts = CONFORMANCE_RULES.map(({ id }) => {
    const all = found.map((v) => v[id]).filter((v): v is RuleVerdict => v !== undefined)
    if (all.length === 0) return verdict(id, false, 'not judged')
    const failed = all.filter((v) => !v.pass)
    return failed.length > 0 ? verdict(id, false, failed.map((v) => v.detail).join('; ')) : verdict(id, true, all.map((v) => v.detail).join('; '))
  })
  return { verdicts, passed: verdicts.every((v) => v.pass), output, neverConnected, ms: Math.round(performance.now() - started) }
}

/**
 * The report as a fixed-width table, one line per rule: `PASS|FAIL  rule  detail`. A detail quotes
 * what the agent sent (a topic, a join_ref): its control characters are shown as `\xNN`
 * ({@link visible}), so an agent cannot rewrite the table on a terminal.
 */
export function formatConformance(report: ConformanceReport): string {
  const width = Math.max(...report.verdicts.map((v) => v.rule.length))
  const lines: string[] = []
  const unconnected = Object.entries(report.neverConnected ?? {})
  if (unconnected.length > 0) {
    const all = unconnected.length === Object.keys(report.output).length
    const hows = [...new Set(unconnected.map(([, how]) => how))].join(', ')
    lines.push(
      all
        ? `the agent never connected: in every scenario (${unconnected.length}) it ended before any upgrade (${visible(hows)}); the rules below fail for that alone: read its output below`
        : `the agent ended before any upgrade in scenario ${unconnected.map(([name]) => name).join(', ')} (${visible(hows)}); read its output below`,
    )
  }
  lines.push(...report.verdicts.map((v) => `${v.pass ? 'PASS' : 'FAIL'}  ${v.rule.padEnd(width)}  ${visible(v.detail)}`))
  const failed = report.verdicts.filter((v) => !v.pass).length
  lines.push(`${report.verdicts.length - failed} of ${report.verdicts.length} rules held (${(report.ms / 1000).toFixed(1)} s)`)
  return lines.join('\n')
}

export { visible }
