/**
 * One interface over every peer the lifecycle is proven against: the package's simulator (in
 * process, through its TypeScript controls) and the reference peer, a real Phoenix 1.7.14
 * endpoint on Bandit or Cowboy (a child process, through its admin routes). A scenario is
 * written once against {@link Peer} and runs on each (test/conformance/scenarios.ts).
 *
 * Every peer models the same platform app: agents with keys, the control channel
 * `agent_control:<agent>`, and an echo channel `room:*` whose join replies `{"joined": topic}`
 * and whose pushes reply `{"echo": payload, "event": event}` (the reference peer's app; the
 * simulator is scripted to match).
 */
import { startSimulator, SERVER_FLAVORS, type FlavorName, type PlatformSimulator, type ServerFlavor } from '../../src/node/server/index.js'
import { controlTopic, type Payload } from '../../src/protocol.js'
import { until } from '../support/until.js'
import { buildRealPhoenix, RealServer, type RealEvent, type RealServerName } from '../support/real-phoenix.js'

/** An agent id and its API key. */
export interface Agent {
  id: string
  key: string
}

/** An upgrade the server answered. */
export interface UpgradeSeen {
  /** 101 when upgraded, else the refusal status. */
  status: number
  /**
   * When the request arrived, in milliseconds on the peer's clock (only differences mean
   * anything). The reference peer logs a refusal after writing it, so its answer's time can
   * trail the client's next step; the arrival cannot.
   */
  at: number
}

/** A join the server accepted. */
export interface JoinSeen {
  socket: string
  topic: string
  joinRef: string
}

/** A refusal to queue: the next upgrade (of any agent) takes it. */
export interface RefusalSpec {
  status: number
  /** Seconds, sent as Retry-After. */
  retryAfterS?: number
  /** `none` (stock Phoenix: empty), or the platform's JSON error body. @default 'none' */
  body?: 'none' | 'platform'
  /** Ask for `Connection: close` (Cowboy closes; Bandit sends the header and keeps the connection). */
  connectionClose?: boolean
}

/** A peer's controls (what the server does) and records (what the server saw). */
export interface Peer {
  /** e.g. `simulator (bandit)`, `bandit`, `cowboy`. */
  readonly name: string
  /** The close codes this server sends; for real servers, the simulator flavor measured to match them. */
  readonly flavor: ServerFlavor
  /** The socket endpoint (phoenix.js appends `/websocket`). */
  readonly url: string
  /** The port it listens on. */
  readonly port: number
  /** An agent no other scenario on this peer used (so supersedes, conflicts and revocations never cross scenarios). */
  agent(): Agent

  /** The platform's "disconnect" broadcast to every live socket of the agent. */
  disconnect(agent: Agent): Promise<void>
  /** Supersedes every live socket of the agent (the supersede push, then the "disconnect"). */
  supersede(agent: Agent): Promise<void>
  /** Later upgrades of the agent are refused with 403; its live sockets stay up. */
  revoke(agent: Agent): Promise<void>
  /** Queues refusals for the next upgrades. */
  refuse(spec: RefusalSpec, count?: number): Promise<void>
  /** Pushes `event` on the agent's joined channels of `topic`, with their join_ref. @returns how many channels */
  push(agent: Agent, topic: string, event: string, payload: Payload): Promise<number>
  /** Sends `n` agent.control signals (correlation ids `<tag>-1`..`<tag>-n`), through the channel or as a fastlane broadcast. */
  control(agent: Agent, options: { n: number; via: 'push' | 'broadcast'; tag: string }): Promise<string[]>
  /** The agent's channel process of `topic` crashes: phx_error. */
  channelError(agent: Agent, topic: string): Promise<void>
  /** The agent's channel process of `topic` stops normally: phx_close. */
  channelClose(agent: Agent, topic: string): Promise<void>
  /** The next `count` joins of `topic` (any agent) reply with this status and body. */
  joinOutcome(topic: string, reply: 'ok' | 'error', body: Payload, count: number): Promise<void>
  /** A deploy: every socket is closed 1012 and the server listens again on the same port. */
  drain(): Promise<void>
  /** Freezes the whole server (SIGSTOP), resolving once it holds: nothing sent after it is read or answered. @returns the thaw (SIGCONT) */
  freeze(): Promise<() => Promise<void>>

  /** The agent's live socket ids, oldest first. */
  live(agent: Agent): Promise<string[]>
  /** The agent's upgrades, in order. */
  upgrades(agent: Agent): Promise<UpgradeSeen[]>
  /** The `on_conflict` param of each upgrade of the agent the server accepted (null: none), in order. */
  acceptedConflictModes(agent: Agent): Promise<Array<string | null>>
  /** Joins the server accepted for the agent (of `topic`, when given), in order. */
  joins(agent: Agent, topic?: string): Promise<JoinSeen[]>
  /** Pushes the server received from the agent on `topic` (event names), in order. */
  received(agent: Agent, topic: string): Promise<string[]>
  /**
   * Resolves once `check()` holds, re-checked on every change (simulator) or every 10 ms (a
   * real server, over HTTP).
   *
   * @throws {Error} (rejects) after `timeoutMs`, naming `what`.
   */
  until(check: () => Promise<boolean>, what: string, timeoutMs?: number): Promise<void>
  /** Stops the peer and releases everything it opened. */
  close(): Promise<void>
}

/** How a suite gets peers: one shared per file, and fresh ones for scenarios that stop or freeze the whole server. */
export interface PeerFactory {
  readonly name: string
  /** Why this peer cannot run here, or null. */
  readonly unavailable: string | null
  open(): Promise<Peer>
}

/** Agents every peer accepts: `c1`..`c<AGENTS>` with keys `key-c<n>`. */
const AGENTS = 1000
const AGENT_TABLE: Record<string, string> = Object.fromEntries(Array.from({ length: AGENTS }, (_, i) => [`c${i + 1}`, `key-c${i + 1}`]))

class AgentPool {
  private next = 1
  take(peer: string): Agent {
    if (this.next > AGENTS) throw new Error(`${peer}: all ${AGENTS} agents used; raise AGENTS in test/conformance/peer.ts`)
    const id = `c${this.next++}`
    return { id, key: AGENT_TABLE[id]! }
  }
}

// ---- the simulator -----------------------------------------------------------------------

/** The simulator behaving as `flavor`, scripted to the reference peer's app. */
export function simulatorPeer(flavor: FlavorName): PeerFactory {
  return { name: `simulator (${flavor})`, unavailable: null, open: () => SimulatorPeer.open(flavor) }
}

class SimulatorPeer implements Peer {
  private readonly pool = new AgentPool()

  private constructor(
    readonly sim: PlatformSimulator,
    readonly name: string,
  ) {}

  static async open(flavor: FlavorName): Promise<SimulatorPeer> {
    // The reference peer's socket routes room:* besides the control channel (platform/lib/realphx/user_socket.ex).
    const sim = await startSimulator({ agents: AGENT_TABLE, flavor, channels: ['room:*'] })
    // The reference peer's app: room:* echoes.
    sim.onJoin(/^room:/, { reply: 'ok', response: ({ topic }) => ({ joined: topic }) })
    sim.onPush(({ event, payload }) => ({ status: 'ok', response: { echo: payload as Payload, event } }))
    return new SimulatorPeer(sim, `simulator (${flavor})`)
  }

  get flavor(): ServerFlavor {
    return this.sim.flavor
  }
  get url(): string {
    return this.sim.url
  }
  get port(): number {
    return this.sim.port
  }
  agent(): Agent {
    return this.pool.take(this.name)
  }

  async disconnect(agent: Agent): Promise<void> {
    this.sim.disconnect({ agent: agent.id })
  }
  async supersede(agent: Agent): Promise<void> {
    this.sim.supersede(agent.id)
  }
  async revoke(agent: Agent): Promise<void> {
    this.sim.revoke(agent.id)
  }
  async refuse(spec: RefusalSpec, count = 1): Promise<void> {
    for (let i = 0; i < count; i++) {
      this.sim.refuseUpgrades({
        status: spec.status,
        ...(spec.retryAfterS !== undefined ? { retryAfter: String(spec.retryAfterS) } : {}),
        body: spec.body ?? 'none',
        ...(spec.connectionClose ? { connection: 'close' as const } : {}),
      })
    }
  }
  async push(agent: Agent, topic: string, event: string, payload: Payload): Promise<number> {
    return this.sim.push({ agent: agent.id }, topic, event, payload)
  }
  async control(agent: Agent, options: { n: number; via: 'push' | 'broadcast'; tag: string }): Promise<string[]> {
    const sent: string[] = []
    for (let k = 1; k <= options.n; k++) {
      const id = `${options.tag}-${k}`
      this.sim.control(agent.id, { mode: 'interrupt', execution_id: `exec-${k}`, correlation_id: id }, { via: options.via })
      sent.push(id)
    }
    return sent
  }
  async channelError(agent: Agent, topic: string): Promise<void> {
    this.sim.channelError({ agent: agent.id }, topic)
  }
  async channelClose(agent: Agent, topic: string): Promise<void> {
    this.sim.channelClose({ agent: agent.id }, topic)
  }
  async joinOutcome(topic: string, reply: 'ok' | 'error', body: Payload, count: number): Promise<void> {
    this.sim.onJoin(topic, reply === 'ok' ? { reply, response: body } : { reply, response: body }, count)
  }
  async drain(): Promise<void> {
    this.sim.restart()
  }
  async freeze(): Promise<() => Promise<void>> {
    const thaw = this.sim.freeze()
    return async () => thaw()
  }

  async live(agent: Agent): Promise<string[]> {
    return this.sim.live(agent.id).map((c) => c.id)
  }
  async upgrades(agent: Agent): Promise<UpgradeSeen[]> {
    return this.sim.upgrades.filter((u) => u.agentId === agent.id).map((u) => ({ status: u.status, at: u.at }))
  }
  async acceptedConflictModes(agent: Agent): Promise<Array<string | null>> {
    return this.sim.accepted(agent.id).map((c) => c.params.on_conflict ?? null)
  }
  async joins(agent: Agent, topic?: string): Promise<JoinSeen[]> {
    const out: JoinSeen[] = []
    for (const c of this.sim.accepted(agent.id)) {
      const oks = new Set(c.frames.filter((f) => f.dir === 'out' && f.frame?.event === 'phx_reply' && (f.frame.payload as { status?: unknown }).status === 'ok').map((f) => f.frame!.ref))
      for (const f of c.frames) {
        if (f.dir !== 'in' || f.frame?.event !== 'phx_join' || (topic !== undefined && f.frame.topic !== topic)) continue
        // phoenix-link and phoenix.js send string refs.
        if (oks.has(f.frame.ref)) out.push({ socket: c.id, topic: f.frame.topic, joinRef: f.frame.join_ref as string })
      }
    }
    return out
  }
  async received(agent: Agent, topic: string): Promise<string[]> {
    return this.sim
      .accepted(agent.id)
      .flatMap((c) => c.frames)
      .filter((f) => f.dir === 'in' && f.frame?.topic === topic && !f.frame.event.startsWith('phx_'))
      .map((f) => f.frame!.event)
  }
  async until(check: () => Promise<boolean>, what: string, timeoutMs = 5000): Promise<void> {
    // Re-checked on each change the simulator records (checks are async for the common interface).
    const deadline = performance.now() + timeoutMs
    while (!(await check())) {
      const left = deadline - performance.now()
      if (left <= 0) throw new Error(`${this.name}: timed out after ${timeoutMs} ms waiting for ${what}`)
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer)
          this.sim.off('change', done)
          resolve()
        }
        const timer = setTimeout(done, left)
        this.sim.once('change', done)
      })
    }
  }
  async close(): Promise<void> {
    await this.sim.stop()
  }
}

// ---- the reference peer ----------------------------------------------------------------

let build: ReturnType<typeof buildRealPhoenix> | null = null

/**
 * The reference peer's gap between a supersede push and the "disconnect" of the older socket, in
 * milliseconds. The push (the control channel's process) and the close (a task started by the
 * supersede) come from two server processes, so only this gap orders them; at the server's own
 * 50 ms a channel process held up by a loaded machine let the close arrive first, or let a join
 * sent after the supersede land after the close. 400 ms stays far inside the link's
 * unseenSupersedeWindowMs (5000), which the unseen-cause scenarios rely on.
 */
export const SUPERSEDE_CLOSE_DELAY_MS = 400

/** The reference peer on `server`; unavailable (with why) where it cannot be built. */
export function realPeer(server: RealServerName): PeerFactory {
  build ??= buildRealPhoenix()
  const where = build
  return {
    name: server,
    unavailable: where.ok ? null : where.why,
    open: async () => {
      if (!where.ok) throw new Error(where.why)
      return new RealPeer(await RealServer.start(where, { server, agents: AGENT_TABLE, supersedeCloseDelayMs: SUPERSEDE_CLOSE_DELAY_MS }), server)
    },
  }
}

/** How long a seq may stay missing from the reference peer's event log before a read fails (ms). */
const GAP_BOUND_MS = 1000

/** Socket ids the reference peer gives: `agent_socket:<agent>:<n>`. */
class RealPeer implements Peer {
  private readonly pool = new AgentPool()
  /** The event log, read incrementally (it survives nothing: a restart starts a new one). */
  private log: RealEvent[] = []
  /** Events of earlier server processes of this peer (before a drain), one list per process (seqs and upgrade numbers start again in each). */
  private earlier: RealEvent[][] = []
  /** When the log was first read with a seq missing before later ones (monotonic ms), or null. */
  private gapSince: number | null = null

  constructor(
    private readonly server: RealServer,
    readonly name: RealServerName,
  ) {}

  get flavor(): ServerFlavor {
    return SERVER_FLAVORS[this.name]
  }
  get url(): string {
    return this.server.url
  }
  get port(): number {
    return this.server.port
  }
  agent(): Agent {
    return this.pool.take(this.name)
  }

  async disconnect(agent: Agent): Promise<void> {
    await this.server.admin('/admin/disconnect', { agent: agent.id })
  }
  async supersede(agent: Agent): Promise<void> {
    await this.server.admin('/admin/supersede', { agent: agent.id })
  }
  async revoke(agent: Agent): Promise<void> {
    await this.server.admin('/admin/revoke', { agent: agent.id })
  }
  async refuse(spec: RefusalSpec, count = 1): Promise<void> {
    await this.server.admin('/admin/refuse', {
      status: spec.status,
      count,
      body: spec.body ?? 'none',
      retry_after: spec.retryAfterS,
      connection: spec.connectionClose ? 'close' : undefined,
    })
  }
  async push(agent: Agent, topic: string, event: string, payload: Payload): Promise<number> {
    try {
      return ((await this.server.admin('/admin/push', { agent: agent.id, topic, event }, payload)) as { channels: number }).channels
    } catch (error) {
      if (String(error).includes('answered 404')) return 0
      throw error
    }
  }
  async control(agent: Agent, options: { n: number; via: 'push' | 'broadcast'; tag: string }): Promise<string[]> {
    return ((await this.server.admin('/admin/control', { agent: agent.id, n: options.n, via: options.via, tag: options.tag })) as { sent: string[] }).sent
  }
  async channelError(agent: Agent, topic: string): Promise<void> {
    await this.server.admin('/admin/channel_error', { agent: agent.id, topic })
  }
  async channelClose(agent: Agent, topic: string): Promise<void> {
    await this.server.admin('/admin/channel_close', { agent: agent.id, topic })
  }
  async joinOutcome(topic: string, reply: 'ok' | 'error', body: Payload, count: number): Promise<void> {
    await this.server.admin('/admin/join_outcome', { topic, reply, count }, body)
  }
  async drain(): Promise<void> {
    this.earlier.push([...(await this.events())])
    this.log = []
    this.gapSince = null
    await this.server.restart()
  }
  async freeze(): Promise<() => Promise<void>> {
    await this.server.freeze()
    return async () => this.server.thaw()
  }

  async live(agent: Agent): Promise<string[]> {
    return ((await this.server.admin('GET /admin/live', { agent: agent.id })) as { live: string[] }).live
  }
  async acceptedConflictModes(agent: Agent): Promise<Array<string | null>> {
    return (await this.allEvents()).filter((e) => e.type === 'connect_accepted' && e.agent === agent.id).map((e) => (typeof e.on_conflict === 'string' ? e.on_conflict : null))
  }
  /**
   * The agent's upgrades the server answered. The server logs `upgrade_attempt` when a request
   * starts and `upgrade_result` when Phoenix returns, which for a refusal is after the response
   * was written (endpoint.ex): a client can see its 403 before the server logged it. So this waits
   * (bounded, 2 s) until every attempt of the agent has its result, then answers, in the order the
   * requests arrived; an attempt of the running server still unanswered past the bound is given
   * status 0, which no assertion of a status expects (an attempt cut short by a restart is left out:
   * that server will never answer it).
   */
  async upgrades(agent: Agent): Promise<UpgradeSeen[]> {
    const answered = async () => {
      const mine = (await this.events()).filter((e) => e.agent === agent.id)
      const results = new Set(mine.filter((e) => e.type === 'upgrade_result').map((e) => e.upgrade))
      return mine.filter((e) => e.type === 'upgrade_attempt').every((e) => results.has(e.upgrade))
    }
    await this.until(answered, 'every upgrade answered in the log', 2000).catch(() => undefined)
    const processes = await this.processes()
    return processes.flatMap((events, index) => {
      const mine = events.filter((e) => e.agent === agent.id)
      const answers = new Map(mine.filter((e) => e.type === 'upgrade_result').map((e) => [e.upgrade, e.status as number]))
      const running = index === processes.length - 1
      return mine
        .filter((e) => e.type === 'upgrade_attempt' && (running || answers.has(e.upgrade)))
        .map((e) => ({ status: answers.get(e.upgrade) ?? 0, at: e.t }))
    })
  }
  async joins(agent: Agent, topic?: string): Promise<JoinSeen[]> {
    const prefix = `agent_socket:${agent.id}:`
    return (await this.allEvents())
      .filter((e) => (e.type === 'control_joined' || e.type === 'room_joined') && String(e.socket_id).startsWith(prefix))
      .filter((e) => topic === undefined || e.topic === topic)
      .map((e) => ({ socket: String(e.socket_id), topic: String(e.topic), joinRef: String(e.join_ref) }))
  }
  async received(agent: Agent, topic: string): Promise<string[]> {
    const prefix = `agent_socket:${agent.id}:`
    return (await this.allEvents())
      .filter((e) => (e.type === 'room_in' || e.type === 'control_in') && String(e.socket_id).startsWith(prefix))
      .filter((e) => e.type === 'control_in' ? topic === controlTopic(agent.id) : e.topic === topic)
      .map((e) => String(e.event))
  }
  until(check: () => Promise<boolean>, what: string, timeoutMs = 5000): Promise<void> {
    return until(check, timeoutMs, `${what} on ${this.name}`)
  }
  async close(): Promise<void> {
    await this.server.stop()
  }

  /** The server's output, for a failure message. */
  tail(): string {
    return this.server.tail()
  }

  /**
   * The log read so far, extended by what the server logged since. The server takes an event's
   * `seq` and then stores the event (two steps, events.ex), so a read between another process's
   * two steps can return `seq + 1` without `seq`: only a run of consecutive seqs is kept, and the
   * rest is read again next time. Seqs have no holes (nothing here clears the log).
   */
  private async events(): Promise<RealEvent[]> {
    const after = this.log.at(-1)?.seq ?? 0
    const fresh = (await this.server.events(after)).sort((a, b) => a.seq - b.seq)
    let next = after + 1
    for (const event of fresh) {
      if (event.seq !== next) break
      this.log.push(event)
      next++
    }
    // A seq the server took and never stored would stop the log here for good, and every later
    // "nothing more happened" would hold: past a bound, that is an error, not a quiet log.
    if (next - after - 1 === fresh.length) this.gapSince = null
    else if (this.gapSince === null) this.gapSince = performance.now()
    else if (performance.now() - this.gapSince > GAP_BOUND_MS) throw new Error(`the ${this.name} event log has no seq ${next} ${GAP_BOUND_MS} ms after seq ${next + 1} was read`)
    return this.log
  }

  private async allEvents(): Promise<RealEvent[]> {
    return (await this.processes()).flat()
  }

  /** The event log of each server process of this peer, the current one last. */
  private async processes(): Promise<RealEvent[][]> {
    return [...this.earlier, [...(await this.events())]]
  }
}
