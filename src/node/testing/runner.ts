/**
 * The lifecycle path runner: executes one generated path on the real wire, a link the user's
 * host builds against the platform simulator on 127.0.0.1, with the chart delays on a
 * `SimulatedClock` and real sockets. Every upgrade and control-channel join of the kit's agents
 * is held until the path answers it (the runner waits for it to arrive first). After each step
 * the link's chart state, `link.state` and `link.lastDisconnectReason` must agree with the
 * chart's own transition, and every oracle must hold (at a step that leaves the link `connected`,
 * once the joins in flight of the host's app channels are answered, so the oracles read the
 * server's answer to each; app-channels-joined judges them); at the end the simulator must have
 * accepted exactly the sockets the path opened, before and after `disconnect()`.
 */
import { SimulatedClock } from 'xstate'
import { keyOf } from '../model/chart-info.js'
import { reasonCode } from '../model/connection-model.js'
import { Link, type ChartInspectionEvent, type ControlHandler } from '../../link.js'
import type { LinkPolicyInput } from '../../policy.js'
import { rejoinDelayMs } from '../../../machines/channel-policy.js'
import { controlTopic, SUPERSEDE_EVENT } from '../../protocol.js'
import { appChannelsOf, chartOf, waitForChart } from '../../chart-of.js'
import { startSimulator, type PlatformSimulator, type SimulatorOptions } from '../server/index.js'
import { APP_CHANNELS_ORACLE, LIFECYCLE_ORACLES, type AppChannelView, type LifecycleOracle, type OracleInput } from './oracles.js'
import { checkKnownKeys } from '../../call-checks.js'
import type { LifecyclePath, LifecycleStep, StepExpectation } from './paths.js'
import type { ChartDelay } from './stimuli.js'
import { thrownText } from '../../../machines/types.js'
import type { ChannelStatus } from '../../link-channel.js'
import type { DisconnectReason } from '../../reasons.js'
import { checkPath } from './check-path.js'

/**
 * Policy of path runs: heartbeats real and short (a stalled server is detected in about 200 ms:
 * phoenix.js times a heartbeat out when the next one is due, so the interval is also the longest
 * event-loop stall a loaded test machine may have without a false heartbeat timeout), quick close
 * handshakes, a Retry-After cap that fits the model's `Retry-After: 1`.
 */
export const PATH_POLICY = Object.freeze({
  transport: Object.freeze({ heartbeatIntervalMs: 100, closeTimeoutMs: 150 }),
  reconnect: Object.freeze({ maxRetryAfterMs: 2_000 }),
}) satisfies LinkPolicyInput

/**
 * Random source of path runs: every jitter draw is 0.5, the middle of its range. A path run is
 * then reproducible, and no drawn delay is 0 ms (a full-jitter draw below 1/ceiling rounds to 0,
 * and a 0 ms delay on the SimulatedClock fires inside the step that chose it, so the link passes
 * through `reconnecting.waiting` before the runner can see it there).
 */
export const PATH_RANDOM = (): number => 0.5

/**
 * What the runner hands the host factory: spread it into `createLink({ ...options, onControl,
 * ... })`. `url`, `agentId` and `apiKey` reach the kit's simulator; `clock` is the path's
 * SimulatedClock (the runner advances it for `clock.advance` steps); `env` holds
 * {@link PATH_RANDOM} (keep it: a random jitter can draw a 0 ms delay the runner cannot observe)
 * and a `monotonic` that reads `clock` (so `reconnected.downtimeMs` counts the path's time, as the
 * charts' delays do);
 * `policy` is
 * {@link PATH_POLICY} (merge your own over it: with a longer heartbeat a `server.stall` step takes
 * longer to be detected, and the runner waits that long); `inspect` records the transitions the
 * link crosses, for {@link PathReport}, and the upgrades it sends, which the runner's waits and
 * {@link PathKit.stop}'s late-upgrade check count: pass it on (a host with an observer of its own
 * calls it from there with every event, at once or later; a run whose link reported nothing through
 * it by the end fails, saying so). Return the link before connecting it: the path's `host.*` steps call its
 * `connect()` and `disconnect()` (a link the factory already started is refused). A control
 * handler the host sets later with `link.onControl()` is wrapped as the one it was made with.
 */
export interface PathHostOptions {
  url: string
  agentId: string
  apiKey: string
  clock: SimulatedClock
  /**
   * {@link PATH_RANDOM} as the link's random source (`env.random`), and `clock.now()` as its
   * monotonic clock (`env.monotonic`, ms); merge your own `env` over it.
   */
  env: { random: () => number; monotonic: () => number }
  policy: LinkPolicyInput
  /** An inspection observer, as createLink()'s `inspect` takes it (a host's own observer passes every event on to it). */
  inspect: (event: ChartInspectionEvent) => void
}

/** What a host factory returns: the link, or an object holding it (and optionally how to stop the rest of the host). */
export type PathHostResult = Link | { link: Link; stop?: () => void | Promise<void> }

/** Builds the user's host for one path run. Called once per run; may be async. */
export type PathHost<H extends PathHostResult = PathHostResult> = (options: PathHostOptions) => H | Promise<H>

/** Options of {@link PathKit.run}. */
export interface PathRunOptions<H> {
  /** The checks of every step; default {@link LIFECYCLE_ORACLES}. Extend: `[...LIFECYCLE_ORACLES, mine]`. */
  oracles?: ReadonlyArray<LifecycleOracle<H>>
  /**
   * Bound of each wait (a state, an upgrade to arrive, a signal handed over), and of the host
   * factory's return.
   * @default for the waits, the larger of 3000 and two heartbeat intervals plus the close timeout
   *   plus 1000, from the link's policy; for the factory, 10000. The link's `disconnect()` and the
   *   host's `stop()` at the end of a run are given this plus the link's `runs.hookTimeoutMs`
   *   (`disconnect()` waits for the abort hooks of the runs it ends).
   */
  timeoutMs?: number
  /**
   * How long the kit waits, at each step that leaves the link `connected` (and once more after the
   * path), for the joins in flight of the host's app channels before the oracles read them
   * (`OracleInput.channels`, judged by `app-channels-joined`). 0 waits for none: for a host that
   * holds joins on purpose (leave `app-channels-joined` out too).
   * @default the run's `timeoutMs` (as above).
   */
  channelWaitMs?: number
}

/** What one path run saw. */
export interface PathReport {
  path: string
  agentId: string
  /** Sockets the simulator accepted for the run's agent (equal to the path's `upgrade.accept` steps). */
  sockets: number
  /** Transition keys (`<source state id>|<event>|<index>`) the link's charts crossed. */
  transitions: Set<string>
  /** State node ids the link's charts visited. */
  states: Set<string>
}

/** A path whose link did not do what the chart or an oracle says. */
export class PathFailure extends Error {
  override readonly name = 'PathFailure'
  /**
   * What the run's cleanup met after the failure, if anything (the failure is what is reported):
   * the host's own `stop()` throwing or not settling, or the link's `disconnect()` rejecting or not
   * settling within the run's timeout.
   */
  hostStopError: unknown = null
  constructor(
    /** The path's name. */
    readonly path: string,
    /** 0-based index of the step that failed (the last step for end-of-path checks). */
    readonly step: number,
    /** The failed step's stimulus name. */
    readonly stimulus: string,
    /** What went wrong. */
    readonly detail: string,
  ) {
    super(`path "${path}", step ${step + 1} (${stimulus}): ${detail}`)
  }
}

/** Options of {@link startPathKit}. */
export interface PathKitOptions {
  /** Options of the kit's own simulator (`agents` defaults to `'any'`). */
  simulator?: SimulatorOptions
  /** Prefix of the agent ids the kit gives its runs (`<prefix><n>`); its upgrades and control joins are held. @default 'path-' */
  agentPrefix?: string
  /**
   * How long (milliseconds of real time: a host's own timers run on it) a run watches the link
   * after its last step, before it judges where the link is and what the server saw: a host that
   * acts on its own sooner (`connect()` again 5 ms after a supersede or a 403) fails the path.
   * Later ones are caught by {@link PathKit.stop}, which rejects naming every path whose host
   * attempted an upgrade after its run ended. @default 100
   */
  settleMs?: number
}

/** The keys of {@link PathKitOptions}. */
const PATH_KIT_OPTION_KEYS: ReadonlySet<string> = new Set(['simulator', 'agentPrefix', 'settleMs'])
/** The keys of {@link PathRunOptions}. */
const PATH_RUN_OPTION_KEYS: ReadonlySet<string> = new Set(['oracles', 'timeoutMs', 'channelWaitMs'])

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

/**
 * Starts a path kit: its own platform simulator on 127.0.0.1 that holds every upgrade and
 * control-channel join of the kit's agents until a path answers it.
 *
 * @throws {Error} (rejects) when the simulator cannot listen.
 * @throws {TypeError} (rejects) for options that are not an object (`null` is none), an unknown
 *   option (a misspelt one would be ignored), an `agentPrefix` that is not a non-empty string, `simulator` options that are not an object or
 *   whose `agents` is not `'any'`; the simulator's own errors for its options (a `host` that is
 *   not loopback without an `adminToken`: a RangeError).
 */
export async function startPathKit(options: PathKitOptions | null = {}): Promise<PathKit> {
  const given: PathKitOptions = options ?? {}
  if (typeof given !== 'object') throw new TypeError(`startPathKit: options must be an object, got ${typeof given}`)
  // A misspelt option would be ignored and its default kept: a typo is an error, as the simulator's own options are.
  checkKnownKeys(given, PATH_KIT_OPTION_KEYS, 'startPathKit')
  const prefix = given.agentPrefix ?? 'path-'
  if (typeof prefix !== 'string' || prefix === '') throw new TypeError(`startPathKit: agentPrefix must be a non-empty string, got ${prefix === '' ? 'an empty string' : typeof prefix}`)
  const sim = given.simulator ?? {}
  if (sim === null || typeof sim !== 'object') throw new TypeError(`startPathKit: simulator must be an object of simulator options, got ${sim === null ? 'null' : typeof sim}`)
  // The kit's runs connect as agents it names (`<prefix><n>`) with its own key: a map of agents would refuse them.
  if (sim.agents !== undefined && sim.agents !== 'any') {
    throw new TypeError("startPathKit: simulator.agents must be 'any' (or left out): the kit's runs connect as agents it names, with its own key")
  }
  const settleMs = given.settleMs ?? 100
  if (!(Number.isInteger(settleMs) && settleMs >= 0 && settleMs <= 2 ** 31 - 1)) {
    throw new RangeError(`startPathKit: settleMs must be a whole number of milliseconds in [0, 2^31-1], got ${String(settleMs)}`)
  }
  const simulator = await startSimulator({ agents: 'any', recordLimit: 200, ...sim })
  simulator.holdUpgrades(new RegExp(`^${escape(prefix)}`))
  simulator.onJoin(new RegExp(`^${escape(controlTopic(prefix))}`), { reply: 'hold' })
  return new PathKit(simulator, prefix, settleMs)
}

/** Runs lifecycle paths against its simulator; see {@link startPathKit}. Runs may go concurrently. */
export class PathKit {
  private runs = 0
  /** Every finished run: its agent, link and the upgrades the server had seen of it at its end (stop() checks nothing came after). */
  private readonly finished: Array<{ path: string; agentId: string; link: WeakRef<Link>; attempts: number; sent: ReadonlySet<string>; sentAtEnd: number }> = []
  /** Set by stop(): a run started after it, or still going then, rejects saying so. */
  private stopped = false
  /** Resolves when stop() is called: a run waiting on a host factory stops waiting. */
  /**
   * What stop() tells: each run waiting on its host factory. A set, emptied as each wait ends: a
   * reaction on one long-lived promise per run would keep every run's host and link until the stop.
   */
  private readonly stopWaiters = new Set<() => void>()

  /** @internal use {@link startPathKit}. */
  constructor(
    /** The kit's simulator: read what it saw (`accepted(agentId)`, `closesSent`, ...) from oracles. */
    readonly simulator: PlatformSimulator,
    private readonly prefix: string,
    private readonly settleMs = 100,
  ) {
  }

  /**
   * Runs `path` with a fresh agent id on a host `host` builds, and resolves with what it saw.
   * The link is disconnected (and `stop()` of the host called) before it settles, pass or fail.
   * At each step that leaves the link `connected` the run first waits, up to `channelWaitMs` (by
   * default its timeout), until none of the host's app channels is `joining` or `detached`
   * (OracleInput.channels); once more after the path, where only `app-channels-joined` is checked again.
   *
   * @throws {PathFailure} (rejects) naming the path, the step and what differed from the chart or broke an oracle;
   *   at the last step (`(end)`) when every step held but ending the run failed (the host's `stop()`
   *   or the link's `disconnect()` threw or did not settle: `hostStopError`).
   * @throws {Error} (rejects) when the host factory throws, does not settle within `timeoutMs`
   *   (10000 unless given), returns no link (or a Link of another copy of phoenix-link), or returns a
   *   link that connects as another agent than the kit's (what it returned is disconnected and its
   *   `stop()` called); when the kit has stopped, or stops during the run (whatever the path saw is
   *   not judged).
   * @throws {TypeError} (rejects) before anything runs, for a path that is not a lifecycle path the
   *   runner can carry out (checkPath: the step and the field named), a host that is not a
   *   function, options that are not an object (`null` is none) or that hold an unknown key (a
   *   misspelt `oracles` would run the default checks in place of the host's), or oracles that are not an array
   *   of `{ name, check }`.
   * @throws {RangeError} (rejects) for a `timeoutMs` that is not a whole number of milliseconds in [1, 2^31-1],
   *   or a `channelWaitMs` not one in [0, 2^31-1].
   */
  async run<H extends PathHostResult>(path: LifecyclePath, host: PathHost<H>, options: PathRunOptions<H> | null = {}): Promise<PathReport> {
    const named = typeof (path as { name?: unknown } | null)?.name === 'string' ? path.name : '(unnamed)'
    if (this.stopped) throw new Error(`the path kit has stopped: path "${named}" cannot run; start another with startPathKit()`)
    checkPath(path)
    if (typeof host !== 'function') throw new TypeError(`the path host must be a function that builds the link from the options it is given (options => createLink({ ...options })), got ${host === null ? 'null' : typeof host}`)
    const given: PathRunOptions<H> = options ?? {}
    if (typeof given !== 'object') throw new TypeError(`the run options must be an object, got ${typeof given}`)
    // A misspelt `oracles` would run the default checks in place of the host's, and pass.
    checkKnownKeys(given, PATH_RUN_OPTION_KEYS, '', 'run option')
    const requested = given.timeoutMs
    if (requested !== undefined && !(Number.isInteger(requested) && requested >= 1 && requested <= 2 ** 31 - 1)) {
      throw new RangeError(`timeoutMs must be a whole number of milliseconds in [1, 2^31-1], got ${String(requested)}`)
    }
    const channelWait = given.channelWaitMs
    if (channelWait !== undefined && !(Number.isInteger(channelWait) && channelWait >= 0 && channelWait <= 2 ** 31 - 1)) {
      throw new RangeError(`channelWaitMs must be a whole number of milliseconds in [0, 2^31-1], got ${String(channelWait)}`)
    }
    const oracles = given.oracles ?? (LIFECYCLE_ORACLES as ReadonlyArray<LifecycleOracle<H>>)
    if (!Array.isArray(oracles)) throw new TypeError(`oracles must be an array of { name, check } (e.g. [...LIFECYCLE_ORACLES, mine]), got ${oracles === null ? 'null' : typeof oracles}`)
    for (const [i, oracle] of oracles.entries()) {
      const o = oracle as Partial<LifecycleOracle<H>> | null
      if (o === null || typeof o !== 'object' || typeof o.name !== 'string' || typeof o.check !== 'function') {
        throw new TypeError(`oracles[${i}] must be an object with a string name and a check function, got ${o === null ? 'null' : typeof o !== 'object' ? typeof o : `{ ${Object.keys(o).join(', ')} }`}`)
      }
    }
    const sim = this.simulator
    const agentId = `${this.prefix}${++this.runs}`
    const clock = new SimulatedClock()
    const report: PathReport = { path: path.name, agentId, sockets: 0, transitions: new Set(), states: new Set() }
    // The upgrades the link sent (one per transport generation that reported its request written).
    const sent = new Set<string>()
    // Whether the kit's inspect option has been called at all (a host that leaves it out never calls it).
    let inspected = false
    const built = await this.build(host, requested ?? 10_000, path.name, {
      url: sim.url,
      agentId,
      apiKey: 'path-key',
      clock,
      // The link's elapsed times (reconnected.downtimeMs, a refusal body's budget) on the path's clock, as its delays.
      env: { random: PATH_RANDOM, monotonic: () => clock.now() },
      policy: PATH_POLICY,
      inspect: (event) => {
        inspected = true
        if (event.type === '@xstate.event') {
          const e = (event as { event?: { type?: string; epoch?: number; generation?: number } }).event
          if (e?.type === 'socket.upgradeSent') sent.add(`${e.epoch}:${e.generation}`)
          return
        }
        if (event.type !== '@xstate.microstep') return
        for (const t of (event as { _transitions?: unknown[] })._transitions ?? []) report.transitions.add(keyOf(t as never))
        for (const node of (event.snapshot as { _nodes?: Array<{ id: string }> })._nodes ?? []) report.states.add(node.id)
      },
    })
    const held = built instanceof Link ? built : built !== null && typeof built === 'object' ? (built as { link?: unknown }).link : undefined
    if (!(held instanceof Link)) {
      await release(built)
      throw new Error(
        looksLikeLink(held) || looksLikeLink(built)
          ? 'the path host returned a Link of another copy of phoenix-link (phoenix-link and phoenix-link/testing resolved to different files, e.g. one from source and one built): build it with the createLink of the package the kit comes from'
          : 'the path host returned no link: return the Link, or { link, stop? }',
      )
    }
    const link: Link = held
    // A link of another agent would be judged on nothing this path did (the simulator records it apart).
    if (link.agentId !== agentId) {
      await release(built)
      throw new Error(`the path host's link connects as ${JSON.stringify(link.agentId)}, not as the kit's ${JSON.stringify(agentId)}: build the link from the options the kit passes (url, agentId, apiKey, clock, env, policy, inspect)`)
    }
    // The path's first step is the kit's to take (host connect, or another stimulus of an idle link):
    // a link the factory already started would be judged on steps it did not take.
    if (link.state !== 'idle') {
      const state = link.state
      await release(built)
      throw new Error(`the path host's link is ${state}, not idle: return the link before connecting it (the kit calls connect() and disconnect() as the path's host.* steps say, in place of the code of your host that would connect it)`)
    }
    // A host's own policy may detect a stalled server later: wait long enough for two heartbeat
    // intervals and a close handshake (phoenix.js's heartbeat timeout is one interval after a send).
    const { transport } = link.policy
    const timeoutMs = requested ?? Math.max(3000, 2 * transport.heartbeatIntervalMs + transport.closeTimeoutMs + 1000)
    const fail = (index: number, detail: string): never => {
      throw new PathFailure(path.name, index, path.steps[index]?.name ?? '(end)', detail)
    }
    let world: World
    try {
      world = new World(link, sim, clock, agentId, timeoutMs, () => sent.size, channelWait ?? timeoutMs)
    } catch (error) {
      // A link whose control handler cannot be set (a frozen link): released, and said so.
      await release(built)
      throw new Error(`the path host's link does not take the kit's control handler (link.onControl() threw: ${thrownText(error)}); return a link that is not frozen`)
    }
    // The host's app channels, read for the oracles (and waited for at every connected step).
    const channels = new AppChannels(link, sim, agentId, channelWait ?? timeoutMs)
    let opens = 0
    // Every upgrade the link attempted: answered, or still held by the kit (a link that comes
    // back on its own after a terminal step shows here, never as an accepted socket).
    // Every upgrade the server saw: answered, still held, or ended unanswered (dropped, or given up by the link).
    const attempts = () => sim.upgradesSeenOf(agentId)
    // One upgrade per transport the chart opened (its generation counts them, across sessions):
    // answered by the path, timed out, given up by the host, or still in flight at the end.
    const allowed = path.steps.at(-1)?.expect.generation ?? 0
    let failure: unknown = null
    try {
      let before = observe(link)
      let wasConnected = false
      let wasAccepted = false
      let group = path.steps[0]
      for (const [index, step] of path.steps.entries()) {
        if (step.stimulus.type !== 'await') group = step
        try {
          await world.apply(step)
        } catch (error) {
          fail(index, thrownText(error))
        }
        if (step.stimulus.type === 'upgrade.accept') opens++
        if (path.steps[index + 1]?.stimulus.type === 'await') continue
        await expectStep(link, step, timeoutMs, (detail) => fail(index, detail))
        // On a connected link the host's app channels are (re)joining: their answers come before the checks.
        if (observe(link).state === 'connected') await channels.settled()
        const after = observe(link)
        const views = channels.views()
        for (const oracle of oracles) {
          const broken = verdictOf(oracle, { path, index, step: group!, before, after, wasConnected, wasAccepted, link, host: built, simulator: sim, agentId, channels: views })
          if (broken !== null) {
            const judged = group === step ? '' : ` (judged on step ${path.steps.indexOf(group!) + 1}, ${group!.name}, once the link settled)`
            fail(index, `${oracle.name}: ${broken}${judged}`)
          }
        }
        wasConnected ||= after.state === 'connected'
        wasAccepted ||= after.state === 'joining' || after.state === 'connected'
        before = after
      }
      // A host that acts on its own after the last step (connect() after a terminal reason, say):
      // watch it for settleMs of real time (its timers run on it), then the link must still be where
      // the path left it. A host that acts later is caught by stop().
      await new Promise<void>((resolve) => setTimeout(resolve, this.settleMs))
      // The kit reads what the link does through the inspect option it passes (the upgrades sent,
      // which its waits and stop()'s late-upgrade check count, and the report's transitions): a
      // link built without it would pass with those checks silently weaker. A host's observer may
      // pass events on later (batched); by the end of the run it has passed some.
      if (!inspected) {
        fail(path.steps.length - 1, "the link was built without the kit's inspect option: pass options.inspect to createLink(), or call it from your own observer with every event")
      }
      const settled = observe(link)
      if (settled.state !== path.steps.at(-1)!.expect.state) fail(path.steps.length - 1, `after the path the host moved the link from ${path.steps.at(-1)!.expect.state} to ${settled.state}`)
      // Channels the host asked for late (a few awaits after `connected`, or in a control handler's
      // work after the last step): app-channels-joined judges them once more, as the path left the link.
      if (settled.state === 'connected') {
        await channels.settled()
        const last = path.steps.length - 1
        const input = { path, index: last, step: group!, before: settled, after: settled, wasConnected, wasAccepted, link, host: built, simulator: sim, agentId, channels: channels.views() }
        for (const oracle of oracles) {
          if (oracle.name !== APP_CHANNELS_ORACLE) continue
          const broken = verdictOf(oracle, input)
          if (broken !== null) fail(last, `${oracle.name}: ${broken} (judged again ${this.settleMs} ms after the path)`)
        }
      }
      // The simulator saw exactly the sockets and attempts the path made: nothing reconnected on its own.
      const accepted = sim.accepted(agentId).length
      if (accepted !== opens) fail(path.steps.length - 1, `the simulator accepted ${accepted} sockets, the path opened ${opens}`)
      if (attempts() > allowed) fail(path.steps.length - 1, `the link attempted ${attempts()} upgrades, the path allows ${allowed}`)
      const last = path.steps.at(-1)!.expect
      if ((last.state === 'terminated' || last.state === 'stopped') && sim.live(agentId).length > 0) {
        await sim
          .waitFor(() => sim.live(agentId).length === 0, { timeoutMs, what: `${agentId} to have no live socket after ${last.state}` })
          .catch((error: Error) => fail(path.steps.length - 1, error.message))
      }
    } catch (error) {
      failure = error
    } finally {
      world.release()
      channels.release()
      let stopError: unknown = null
      // A host's disconnect() that rejects or never settles is reported after the path's own
      // outcome, and the cleanup below still runs.
      // disconnect() waits for the abort hooks of the runs it ends, each up to the link's runs.hookTimeoutMs.
      const stopMs = Math.min(2 ** 31 - 1, timeoutMs + link.runs.hookTimeoutMs)
      await within(link.disconnect(), stopMs, `the link's disconnect() did not settle within ${stopMs} ms (the run's timeout plus the link's runs.hookTimeoutMs)`).catch((error: unknown) => (stopError = error))
      try {
        await stopHost(built, stopMs)
      } catch (error) {
        stopError = error
      }
      const late = attempts() - allowed
      // Upgrades still held for this agent are ended, so nothing of the run stays open.
      while (sim.answerHeldUpgrade('drop', agentId)) {
        // one at a time, oldest first
      }
      // A stalled socket reads nothing, so it never sees the client go: end the simulator's side.
      for (const c of sim.accepted(agentId)) if (c.stalled && c.state !== 'closed') c.abort()
      await sim.settled(agentId, { timeoutMs })
      if (failure === null && late > 0) failure = new PathFailure(path.name, path.steps.length - 1, path.steps.at(-1)!.name, `the link attempted ${late} upgrade(s) the path did not answer`)
      // An upgrade the link sent during the run may reach the server after it (under load): the
      // link's own count of what it sent, when the host passed the kit's inspect on, covers it.
      // Weakly: a link its host let go of can make no upgrade, and a kit that runs many paths keeps none of them.
      this.finished.push({ path: path.name, agentId, link: new WeakRef(link), attempts: Math.max(attempts(), sent.size), sent, sentAtEnd: sent.size })
      if (failure === null && stopError !== null) {
        // The path held; ending the run did not: said as a failure of this path, with what threw.
        failure = new PathFailure(path.name, path.steps.length - 1, '(end)', `every step held, but ending the run failed: ${thrownText(stopError)}`)
        ;(failure as PathFailure).hostStopError = stopError
      } else if (failure instanceof PathFailure && stopError !== null) failure.hostStopError = stopError
    }
    // The kit's simulator stopped under the run: neither a pass nor a path failure can be trusted.
    if (this.stopped) throw new Error(`the path kit was stopped during path "${path.name}": the run was cut short and is not judged`, { cause: failure ?? undefined })
    if (failure !== null) throw failure
    report.sockets = sim.accepted(agentId).length
    // After the path and disconnect(): still no socket the path did not open.
    if (report.sockets !== opens) fail(path.steps.length - 1, 'a socket opened after the path ended')
    return report
  }

  /**
   * Calls the host factory, bounded by `timeoutMs` and by the kit's stop. What a factory that
   * settles too late returns is released then (its link disconnected, its `stop()` called).
   *
   * @throws {Error} (rejects) what the factory threw, or that it did not settle in time, or that the kit stopped.
   */
  private async build<H extends PathHostResult>(host: PathHost<H>, timeoutMs: number, name: string, options: PathHostOptions): Promise<H> {
    const building = new Promise<H>((resolve) => resolve(host(options)))
    let timer: ReturnType<typeof setTimeout> | undefined
    let late = false
    const bound = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the path host did not return a link within ${timeoutMs} ms (path "${name}")`)), timeoutMs)
    })
    let onStop!: () => void
    const stopped = new Promise<never>((_, reject) => {
      onStop = () => reject(new Error(`the path kit was stopped while the host of path "${name}" was being built`))
    })
    stopped.catch(() => {})
    this.stopWaiters.add(onStop)
    try {
      return await Promise.race([building, bound, stopped])
    } catch (error) {
      late = true
      throw error
    } finally {
      clearTimeout(timer)
      this.stopWaiters.delete(onStop)
      if (late) building.then(release, () => {})
    }
  }

  /**
   * Stops the kit's simulator (every socket closed), after one last judgement: a host that acted on
   * its own after its run had ended (a `connect()` on a timer after a supersede or a 403, later
   * than the run's `settleMs`) made upgrades the server saw (the kit held them). The run's link,
   * when it made them, is disconnected here, so it does not retry against a stopped server, and
   * stop() then rejects. The kit knows only the link the factory returned: a host that made
   * another link of the agent (a fresh `createLink()` after a terminal reason) is caught by the
   * upgrades the server saw, and that link is the host's to stop.
   *
   * @throws {Error} (rejects, once everything is stopped) naming each path whose host attempted an
   *   upgrade after its run ended, and how many.
   */
  async stop(): Promise<void> {
    this.stopped = true
    for (const onStop of this.stopWaiters) onStop()
    const sim = this.simulator
    const late: string[] = []
    for (const run of this.finished) {
      const attempts = sim.upgradesSeenOf(run.agentId)
      const after = Math.max(attempts - run.attempts, run.sent.size - run.sentAtEnd)
      const link = run.link.deref()
      if (after > 0) late.push(`"${run.path}": ${after} upgrade(s) of ${run.agentId} after its run ended${link ? ` (the run's link is ${link.state}; a link the host made after it is not the kit's to see)` : ''}`)
      if (link && link.state !== 'stopped' && link.state !== 'terminated' && link.state !== 'idle') {
        await within(link.disconnect(), 5_000, '').catch(() => {})
      }
    }
    this.finished.length = 0
    await sim.stop()
    if (late.length > 0) {
      throw new Error(
        `after their runs ended, the hosts of ${late.length} path(s) connected again on their own (a host that reconnects after a terminal reason brings back the eviction loop the lifecycle rules forbid): ${late.join('; ')}`,
      )
    }
  }
}

/** What a link shows, in a step's terms. */
export function observe(link: Link): StepExpectation {
  const snapshot = chartOf(link).getSnapshot()
  const reason = link.lastDisconnectReason
  return {
    state: link.state,
    chartState: snapshot.value,
    reason: reason?.kind ?? null,
    code: reasonCode(reason),
    generation: snapshot.context.generation,
    epoch: snapshot.context.epoch,
  }
}

async function expectStep(link: Link, step: LifecycleStep, timeoutMs: number, fail: (detail: string) => never): Promise<void> {
  const want = step.expect
  const wanted = JSON.stringify(want.chartState)
  try {
    await waitForChart(chartOf(link), (s) => JSON.stringify(s.value) === wanted, timeoutMs)
  } catch {
    fail(`chart state ${JSON.stringify(chartOf(link).getSnapshot().value)}, the chart says ${wanted}`)
  }
  const seen = observe(link)
  if (seen.state !== want.state) fail(`link.state ${seen.state}, the chart says ${want.state}`)
  if (seen.reason !== want.reason) fail(`lastDisconnectReason ${seen.reason}, the chart says ${want.reason}`)
  if (seen.code !== want.code) fail(`reason code ${seen.code}, the chart says ${want.code}`)
}

/**
 * The app channels a run's link holds, and those the server refused or closed for good, as the
 * oracles read them ({@link AppChannelView}): the link's live handles, and the topics a `channel`
 * event reported `dropped` until the host asks for the topic again.
 */
class AppChannels {
  private readonly dropped = new Map<string, { status: ChannelStatus; reason: DisconnectReason | null }>()
  /** Per topic, how many times a handle of it was dropped during the run, and the last reason. */
  private readonly drops = new Map<string, { count: number; last: DisconnectReason | null }>()
  /** The order topics were first seen in (the host's order of asking, as the link keeps its handles). */
  private readonly order = new Map<string, number>()
  private readonly unsubscribe: () => void
  /** Ends the wait of settled() in progress, if any: release() calls it so no timer or listener outlives the run. */
  private endWait: (() => void) | null = null
  private released = false

  constructor(
    private readonly link: Link,
    private readonly sim: PlatformSimulator,
    private readonly agentId: string,
    /** How long settled() waits (PathRunOptions.channelWaitMs). */
    private readonly waitMs: number,
  ) {
    this.unsubscribe = link.on('channel', ({ topic, status, reason }) => {
      this.rank(topic)
      if (status === 'dropped') {
        this.dropped.set(topic, { status, reason })
        this.drops.set(topic, { count: (this.drops.get(topic)?.count ?? 0) + 1, last: reason })
      } else this.dropped.delete(topic)
    })
  }

  private rank(topic: string): void {
    if (!this.order.has(topic)) this.order.set(topic, this.order.size)
  }

  /** Every channel the host asked for and has not left, in the order it asked, with the joins of it the server received. */
  views(): AppChannelView[] {
    const views = new Map<string, AppChannelView>()
    const socket = this.sim.accepted(this.agentId).at(-1)
    const facts = (topic: string) => {
      let joinsReceived = 0
      for (const j of socket?.joinsReceived ?? []) if (j.topic === topic) joinsReceived++
      const drops = this.drops.get(topic)
      return { joinsReceived, drops: drops?.count ?? 0, lastDrop: drops?.last ?? null }
    }
    for (const [topic, { status, reason }] of this.dropped) views.set(topic, { topic, status, reason, ...facts(topic) })
    for (const [topic, handle] of appChannelsOf(this.link)) {
      this.rank(topic)
      views.set(topic, { topic, status: handle.status, reason: handle.reason, ...facts(topic) })
    }
    return [...views.values()].sort((a, b) => this.order.get(a.topic)! - this.order.get(b.topic)!)
  }

  /** Whether a channel's join is still to be answered on this connected link (`joining`, or `detached` until its rejoin leaves). */
  private inFlight(): boolean {
    if (this.link.state !== 'connected') return false
    for (const handle of appChannelsOf(this.link).values()) if (handle.status === 'joining' || handle.status === 'detached') return true
    return false
  }

  /**
   * Resolves once no join is in flight and none has started one macrotask later (a host may ask
   * for its next channel a few awaits after the last join's answer), or once `waitMs` has passed
   * (the oracle then reports the channel still joining). Never rejects.
   */
  async settled(): Promise<void> {
    const deadline = performance.now() + this.waitMs
    for (;;) {
      const left = deadline - performance.now()
      if (left > 0 && this.inFlight()) await this.quiet(left)
      // A macrotask later: the host's continuations of the last answer have run.
      await new Promise<void>((resolve) => setImmediate(resolve))
      if (this.released || !this.inFlight() || performance.now() >= deadline) return
    }
  }

  /** Resolves once no join is in flight (re-checked at every `channel` and `state` event of the link), or after `ms`. */
  private quiet(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const end = (): void => {
        clearTimeout(timer)
        offChannel()
        offState()
        this.endWait = null
        resolve()
      }
      const check = (): void => {
        if (!this.inFlight()) end()
      }
      const timer = setTimeout(end, Math.ceil(ms))
      const offChannel = this.link.on('channel', check)
      const offState = this.link.on('state', check)
      this.endWait = end
    })
  }

  release(): void {
    this.released = true
    this.unsubscribe()
    this.endWait?.()
  }
}

/** Applies stimuli to one run's link and the simulator. */
class World {
  private readonly handled: string[] = []
  private readonly waiters = new Set<() => void>()
  /** The cancel of each event wait still pending: release() ends them all, so no timer or listener outlives the run. */
  private readonly pending = new Set<() => void>()
  private readonly gate: { promise: Promise<void>; resolve: () => void }
  private readonly topic: string
  private signals = 0

  constructor(
    private readonly link: Link,
    private readonly sim: PlatformSimulator,
    private readonly clock: SimulatedClock,
    private readonly agent: string,
    private readonly timeoutMs: number,
    /** How many upgrades the link reported sent (read through the inspect option the kit passes; 0 when the host leaves it out). */
    private readonly upgradesSent: () => number = () => 0,
    /** How long a signal's step waits for the host's handler to return (PathRunOptions.channelWaitMs). */
    private readonly handlerWaitMs = timeoutMs,
  ) {
    this.topic = controlTopic(agent)
    let resolve!: () => void
    this.gate = { promise: new Promise<void>((r) => (resolve = r)), resolve }
    // The kit's own signals (`path-*` correlation ids) get its faults; every signal then reaches the
    // host's handler: the one the link was made with, and any the host sets later with onControl(),
    // which the kit wraps the same way while the run lasts (release() gives the link its own method back).
    const wrap = (hosts: ControlHandler | undefined): ControlHandler => {
      const wrapped: ControlHandler = async (signal, context) => {
        const id = signal.correlationId ?? ''
        if (id.startsWith('path-fail-')) throw new Error('handler failure (path kit)')
        if (id.startsWith('path-slow-')) await this.gate.promise
        try {
          await hosts?.(signal, context)
        } finally {
          // Handed over either way: a host handler that rejects (its work failed) is the host's
          // business (the link logs it and goes on), not a delivery the path waits for again.
          this.handled.push(id)
          for (const waiter of [...this.waiters]) waiter()
        }
      }
      this.wrappers.add(wrapped)
      return wrapped
    }
    // The link's own onControl (a subclass's override, or the host's patch of the instance, runs too).
    const setHandler = link.onControl
    setHandler.call(link, wrap((link as unknown as { controlHandler: ControlHandler | undefined }).controlHandler))
    this.ownOnControl = Object.getOwnPropertyDescriptor(link, 'onControl')
    // A sealed link takes no property of the kit's: its later onControl() calls are not wrapped.
    if (Object.isExtensible(link) || this.ownOnControl?.configurable === true) {
      Object.defineProperty(link, 'onControl', {
        configurable: true,
        writable: true,
        value: (handler: ControlHandler | undefined | null): void => {
          // What the link refuses (not a function) it refuses here too, the handler in place kept.
          if (handler !== undefined && handler !== null && typeof handler !== 'function') return setHandler.call(link, handler)
          setHandler.call(link, wrap(handler ?? undefined))
        },
      })
      this.wrapsOnControl = true
    }
  }

  /** The handlers the kit made around the host's: a signal's step waits for the host's return only through one of them. */
  private readonly wrappers = new WeakSet<ControlHandler>()

  /** The link's own `onControl` property before the run (a host's patch of the instance), put back by release(). */
  private readonly ownOnControl: PropertyDescriptor | undefined
  /** Whether the run gave the link an `onControl` of its own (not on a sealed link). */
  private wrapsOnControl = false

  /** Ends the run's world: the slow handler let go, every wait still pending cancelled (its timer and listener removed). */
  release(): void {
    if (this.wrapsOnControl) {
      if (this.ownOnControl) Object.defineProperty(this.link, 'onControl', this.ownOnControl)
      else delete (this.link as { onControl?: unknown }).onControl
      this.wrapsOnControl = false
    }
    this.gate.resolve()
    for (const cancel of [...this.pending]) cancel()
  }

  /** Waits for `promise`, bounded by the run's timeout. */
  private bounded(what: string, promise: Promise<unknown>): Promise<void> {
    return within(promise, this.timeoutMs, `timed out after ${this.timeoutMs} ms waiting for ${what}`)
  }

  private held(what: string, check: () => boolean): Promise<void> {
    return this.sim.waitFor(check, { timeoutMs: this.timeoutMs, what: `${what} (${this.agent})` })
  }

  /**
   * Waits for an event of the link, bounded by the run's timeout. Made before the stimulus that
   * causes it (so it cannot be missed); if that stimulus throws, the wait is left behind: it is
   * marked handled here (its rejection never reaches the process as unhandled) and release()
   * cancels it with the run, so its timer and listener end with the run too.
   */
  private event<T>(what: string, subscribe: (done: (value: T) => void) => () => void): Promise<T> {
    const waiting = new Promise<T>((resolve, reject) => {
      let off: (() => void) | null = null
      let ended = false
      const end = () => {
        ended = true
        clearTimeout(timer)
        off?.()
        this.pending.delete(cancel)
      }
      const cancel = () => {
        end()
        reject(new Error(`the run ended while waiting for ${what}`))
      }
      const timer = setTimeout(() => {
        end()
        reject(new Error(`timed out after ${this.timeoutMs} ms waiting for ${what}`))
      }, this.timeoutMs)
      this.pending.add(cancel)
      off = subscribe((value) => {
        end()
        resolve(value)
      })
      // Told during subscribe(): its unsubscribe arrived only now.
      if (ended) off()
    })
    waiting.catch(() => {})
    return waiting
  }

  async apply(step: LifecycleStep): Promise<void> {
    const { link, sim, agent, topic } = this
    const s = step.stimulus
    switch (s.type) {
      case 'await':
        // The upgrade left once the link's chart has taken it in (its key claim). Until then a
        // supersede read on the socket before (the next step, say) would race the TCP connect.
        if (s.what === 'upgrade sent') {
          await waitForChart(chartOf(link), (snapshot) => snapshot.context.keyHolder === snapshot.context.generation, this.timeoutMs).catch(() => {
            throw new Error(`timed out after ${this.timeoutMs} ms waiting for the link to send its upgrade`)
          })
        }
        return
      case 'adapter.late':
        chartOf(link).send(s.event as never)
        return
      case 'host.connect':
        void link.connect().catch(() => {})
        return
      case 'host.disconnect': {
        const opening = link.state === 'connecting'
        const stopping = link.disconnect().catch(() => {})
        if (!opening) return
        // The upgrade the link abandons may still reach the server after disconnect() (ws aborts
        // the handshake, but a request already on its way arrives, then closes): wait until the
        // link's transport has closed (disconnect() settles then, within closeTimeoutMs) and the
        // server has let go of every held upgrade of the agent, so a later step answers the next
        // session's upgrade, not this one (the oldest held).
        await this.bounded('disconnect() to settle', stopping)
        // Every upgrade the link sent has reached the server (answered, or held and let go): under
        // load the abandoned one can arrive after disconnect() settled, and must not be the one a
        // later step answers.
        await this.held('the abandoned upgrade to reach the server and close', () => sim.upgradesSeenOf(agent) >= this.upgradesSent() && sim.heldUpgradesOf(agent) === 0)
        return
      }
      case 'host.cancelWait': {
        const controller = new AbortController()
        const waiting = link.runForever({ signal: controller.signal }).catch((e: Error) => e.name)
        controller.abort()
        const outcome = await waiting
        if (outcome !== 'AbortError') throw new Error(`an aborted runForever() settled with ${String(outcome)}`)
        return
      }
      case 'clock.advance':
        this.clock.increment(this.delayOf(s.delay))
        return
      case 'upgrade.accept':
      case 'upgrade.refuse':
      case 'upgrade.drop': {
        // Every upgrade the link sent has reached the server, so the newest held is its current one.
        await this.held('the upgrade to arrive', () => sim.heldUpgradesOf(agent) > 0 && sim.upgradesSeenOf(agent) >= this.upgradesSent())
        // The newest: the link has one upgrade out at a time, so an older one still held is one it
        // gave up (a disconnect() or a connect timeout) that reached the server late, under load.
        if (s.type === 'upgrade.accept') sim.answerHeldUpgrade(undefined, agent, 'newest')
        else if (s.type === 'upgrade.drop') sim.answerHeldUpgrade('drop', agent, 'newest')
        else sim.answerHeldUpgrade({ status: s.status, ...(s.retryAfterS !== undefined ? { retryAfter: String(s.retryAfterS) } : {}) }, agent, 'newest')
        return
      }
      case 'join.reply': {
        await this.held('the control join to arrive', () => sim.heldJoins.some((j) => j.topic === topic))
        sim.answerHeldJoin(topic, s.status === 'ok' ? { reply: 'ok' } : { reply: 'error', response: { reason: s.reason } })
        return
      }
      case 'server.close':
        return void sim.close({ agent }, s.code)
      case 'server.drop':
        return void sim.abort({ agent })
      case 'server.reset':
        // The link's last frame (a join) went out on the path's clock, which has not moved since:
        // within transport.resetAfterSendMs, so the link reads the reset as one (reset: true).
        return void sim.abort({ agent }, { reset: true })
      case 'server.stall':
        return void sim.stall({ agent })
      case 'server.supersede': {
        // The platform pushes supersede on the control channel's join_ref. A joined channel: the
        // simulator's own supersede(). Otherwise (the control join held by this runner, or the
        // channel crashed and not rejoined) the simulator pushes nothing, as Phoenix does
        // (docs/field-notes.md "No supersede without a joined control channel"); the model's
        // `supersede` there is the chart's event, a push read before the join's reply (as when
        // it comes right behind it), so the runner sends it with the last join_ref of the topic.
        // A join (or rejoin) the chart has sent is waited for, so the push carries its join_ref.
        const value = JSON.stringify(chartOf(link).getSnapshot().value)
        if (value.includes('controlRejoining') || value.includes('"joining"')) {
          await this.held('the control join to arrive', () => sim.heldJoins.some((j) => j.topic === topic))
        }
        sim.supersede(agent, { close: null })
        for (const c of sim.live(agent)) {
          if (c.channels.has(topic)) continue
          const join = c.joinsReceived.filter((j) => j.topic === topic).at(-1)
          c.send({ join_ref: join?.joinRef ?? null, ref: null, topic, event: SUPERSEDE_EVENT, payload: { reason: 'session.already_connected', retryable: false, target_socket_id: c.id } })
        }
        return
      }
      case 'server.malformed': {
        const reported = this.event<void>('the malformed frame to be reported (ignored)', (done) => link.on('ignored', () => done()))
        sim.sendRaw({ agent }, s.data)
        return reported
      }
      case 'channel.error':
        return void sim.channelError({ agent }, topic)
      case 'channel.close':
        return void sim.channelClose({ agent }, topic)
      case 'control.signal':
        return this.signal(s.delivery)
      default: {
        // checkPath() refuses any other type before a run starts.
        const unknown: never = s
        throw new Error(`no world action for stimulus type ${JSON.stringify((unknown as { type?: unknown }).type)}`)
      }
    }
  }

  private delayOf(delay: ChartDelay): number {
    const { context } = chartOf(this.link).getSnapshot()
    const policy = this.link.policy
    switch (delay) {
      case 'backoff':
        return context.retry?.delayMs ?? 0
      case 'controlRejoin':
        return rejoinDelayMs(policy.channel, context.controlCrashes, 1) // the ceiling: at least the drawn delay
      case 'connectTimeout':
        return policy.connection.connectTimeoutMs
      case 'joinTimeout':
        return policy.connection.joinTimeoutMs
      case 'leaveTimeout':
        return policy.connection.leaveTimeoutMs
      default: {
        // checkPath() refuses any other delay before a run starts.
        const unknown: never = delay
        throw new Error(`no chart delay ${JSON.stringify(unknown)}`)
      }
    }
  }

  /**
   * Waits until the signal `id` was handled (the host's own control handler, when it has one,
   * returned for it), up to `handlerWaitMs`: what the handler did (a channel it asked for) is then
   * judged on this step. A handler slower than that is no failure (the link lets handlers run as
   * long as they need); nor is one the kit could not wrap (set with onControl() on a sealed link).
   */
  private async handledUp(id: string): Promise<void> {
    const current = (this.link as unknown as { controlHandler: ControlHandler | undefined }).controlHandler
    if (current === undefined || !this.wrappers.has(current) || this.handlerWaitMs === 0) return
    let timer: ReturnType<typeof setTimeout> | undefined
    let check: (() => void) | undefined
    let end: (() => void) | undefined
    await new Promise<void>((resolve) => {
      end = resolve
      check = () => {
        if (this.handled.includes(id)) resolve()
      }
      this.waiters.add(check)
      timer = setTimeout(resolve, this.handlerWaitMs)
      // release() ends the run: it ends this wait too.
      this.pending.add(resolve)
      check()
    }).finally(() => {
      clearTimeout(timer)
      this.waiters.delete(check!)
      this.pending.delete(end!)
    })
  }

  private async signal(delivery: 'once' | 'duplicate' | 'handler-throws' | 'queued'): Promise<void> {
    const { link, sim, agent } = this
    const n = ++this.signals
    if (delivery === 'once' || delivery === 'handler-throws') {
      const id = delivery === 'once' ? `path-once-${n}` : `path-fail-${n}`
      const delivered = this.event<void>(`signal ${id} to be handed to the host`, (done) => link.on('control', (e) => e.signal.correlationId === id && done()))
      sim.control(agent, { mode: 'interrupt', correlation_id: id })
      await delivered
      // The host's own handler returned (what it did, such as asking for a channel, is judged after the step).
      if (delivery === 'once') await this.handledUp(id)
      return
    }
    if (delivery === 'duplicate') {
      // The same correlation id twice: handed over once, the repeat reported.
      const id = `path-dup-${n}`
      const repeat = this.event<void>('the repeated signal to be reported (ignored)', (done) =>
        link.on('ignored', (e) => e.detail.includes('duplicate correlation_id') && done()),
      )
      sim.control(agent, { mode: 'stop', correlation_id: id })
      sim.control(agent, { mode: 'stop', correlation_id: id })
      await repeat
      await this.handledUp(id)
      return
    }
    // A slow handler holds the first; two queue behind it; when it ends, each goes once, in order.
    const from = this.handled.length
    const seq = chartOf(link).getSnapshot().context.signalSeq
    const ids = [`path-slow-${n}`, `path-queued-${n}-a`, `path-queued-${n}-b`]
    const started = this.event<void>('the first queued signal to be handed over', (done) => link.on('control', () => done()))
    for (const id of ids) sim.control(agent, { mode: 'stop', correlation_id: id })
    await started
    try {
      await waitForChart(chartOf(link), (snapshot) => snapshot.context.signalSeq >= seq + 3, this.timeoutMs)
    } catch {
      throw new Error(`the link queued ${chartOf(link).getSnapshot().context.signalSeq - seq} of 3 signals behind a slow handler`)
    }
    this.gate.resolve()
    await this.event<void>("the queued signals to be handled (the host's own control handler, when it has one, returning for each)", (done) => {
      const check = () => {
        if (this.handled.length >= from + 3) done()
      }
      this.waiters.add(check)
      queueMicrotask(check)
      return () => this.waiters.delete(check)
    })
    const got = this.handled.slice(from)
    if (got.join(',') !== ids.join(',')) throw new Error(`queued signals were handed over as [${got}], not once each in order [${ids}]`)
  }
}

/** Whether a value has a Link's shape (of this copy of phoenix-link or another). */
function looksLikeLink(value: unknown): value is { disconnect(): Promise<void> } {
  const v = value as { connect?: unknown; disconnect?: unknown; agentId?: unknown } | null
  return v !== null && typeof v === 'object' && typeof v.connect === 'function' && typeof v.disconnect === 'function' && typeof v.agentId === 'string'
}

/**
 * Releases what a host factory returned and the run will not use: its link disconnected (any
 * copy's), its `stop()` called; each bounded (5 s), what they throw ignored.
 */
async function release(built: unknown): Promise<void> {
  const link = looksLikeLink(built) ? built : built !== null && typeof built === 'object' ? (built as { link?: unknown }).link : undefined
  if (looksLikeLink(link)) {
    let timer: ReturnType<typeof setTimeout> | undefined
    await Promise.race([Promise.resolve().then(() => link.disconnect()), new Promise<void>((resolve) => (timer = setTimeout(resolve, 5000)))]).catch(() => {})
    clearTimeout(timer)
  }
  await stopHost(built, 5000).catch(() => {})
}

/**
 * Calls the `stop()` of a host that returned `{ link, stop }` (nothing for a bare Link, or for
 * anything without a `stop` function), bounded.
 *
 * @throws what `stop()` threw or rejected with, or an Error when it did not settle within `timeoutMs`.
 */
async function stopHost(built: unknown, timeoutMs: number): Promise<void> {
  // A host of the user's own may have a link's shape (connect, disconnect, agentId) and a stop():
  // only a Link itself is passed over.
  if (built === null || typeof built !== 'object' || built instanceof Link) return
  const stop = (built as { stop?: unknown }).stop
  if (typeof stop !== 'function') return
  const stopping = new Promise<unknown>((resolve) => resolve((stop as () => unknown).call(built)))
  await within(stopping, timeoutMs, `the host's stop() did not settle within ${timeoutMs} ms`)
}

/**
 * Settles as `promise` does, or rejects with `Error(message)` after `timeoutMs`; its timer is
 * cleared either way, so a bounded wait leaves nothing behind.
 *
 * @throws {Error} (rejects) what `promise` rejected with, or `message` once `timeoutMs` passed.
 */
async function within(promise: Promise<unknown>, timeoutMs: number, message: string): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), timeoutMs)
  })
  try {
    await Promise.race([promise, bound])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * What `oracle` says of `input`: null when its rule holds, else the sentence a failure carries
 * (`(broken, no message)` for an empty one; what it threw, named so, when the check or the reading
 * of its answer throws, such as a `then` that throws).
 */
function verdictOf<H>(oracle: LifecycleOracle<H>, input: OracleInput<H>): string | null {
  let broken: string | null
  try {
    broken = readAnswer(oracle.check(input))
  } catch (error) {
    broken = `the oracle threw: ${thrownText(error)}`
  }
  // Any string is a broken rule, even an empty one; only null (or undefined, read as null) holds.
  return broken === '' ? '(broken, no message)' : broken
}

/**
 * An oracle's answer as the runner reads it: a string (broken; even empty), or null/undefined
 * (holds). Anything else is an oracle defect, named as one: a Promise (an `async` check, which
 * JavaScript callers can write though the type forbids it: its outcome would come too late to
 * judge this step; a rejection of it is let go, having been reported here), a boolean, a number.
 */
function readAnswer(answer: unknown): string | null {
  if (answer === null || answer === undefined || typeof answer === 'string') return answer ?? null
  if (typeof (answer as { then?: unknown }).then === 'function') {
    ;(answer as Promise<unknown>).then(undefined, () => {})
    return 'the oracle returned a Promise: oracles are synchronous (return a string for a broken rule, null when it holds)'
  }
  return `the oracle returned ${typeof answer} ${thrownText(answer)}: return a string for a broken rule, null when it holds`
}
