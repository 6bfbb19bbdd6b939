/**
 * The lifecycle rules as oracles that do not come from the chart: given what a link showed before
 * a step and what it shows after it, each oracle says whether its rule held, written from
 * docs/design.md ("Lifecycle rules"), not from machines/. The path runner checks every oracle at
 * every step, so a chart that agrees with itself but breaks a rule (a flipped guard, a dropped
 * transition) fails a path. Hosts extend the list with their own checks (their host's state, what
 * the simulator saw): `[...LIFECYCLE_ORACLES, myOracle]`.
 */
import type { Link } from '../../link.js'
import type { PlatformSimulator } from '../server/index.js'
import type { LifecyclePath, LifecycleStep, StepExpectation } from './paths.js'
import { deepFreeze } from '../../freeze.js'
import type { ChannelStatus } from '../../link-channel.js'
import { describeReason, type DisconnectReason } from '../../reasons.js'

/**
 * An app channel of the run's link as the kit read it once a step settled: one the host asked
 * for with `link.channel(topic)` during the run and has not left (a channel the server refused or
 * closed for good stays here, `dropped`, until the host asks for its topic again).
 */
export interface AppChannelView {
  topic: string
  /** The handle's `status` (`joining`, `joined`, `detached`, `errored`, `dropped`). */
  status: ChannelStatus
  /** The handle's `reason`: the DisconnectReason of `errored` and `dropped`, else null. */
  reason: DisconnectReason | null
  /**
   * How many joins of the topic the kit's simulator received on the link's current socket (the
   * last it accepted; each socket's record keeps its first 200 joins, `SimulatorConnection.joinsReceived`):
   * 0 for a channel whose join never left on it (params that never settle, say).
   */
  joinsReceived: number
  /** How many times during the run a handle of this topic was dropped (the host asking for it again after each, say). */
  drops: number
  /** The reason of the last of those drops, else null. */
  lastDrop: DisconnectReason | null
}

/** The name of the oracle that judges the host's app channels (the kit runs it once more after a path). */
export const APP_CHANNELS_ORACLE = 'app-channels-joined'

/** What an oracle is given after a step has settled. `H` is what the host factory returned. */
export interface OracleInput<H = unknown> {
  path: LifecyclePath
  /**
   * The index in `path.steps` (0-based) of the last step this check follows: `step` itself, or
   * the `await` steps behind it (a step the chart follows up by itself is judged once it settled,
   * after them). A {@link PathFailure} names this index.
   */
  index: number
  /** The step judged: the stimulus that moved the link (never an `await` step). */
  step: LifecycleStep
  /** What the link showed before the step (for the first step: the link as created). */
  before: StepExpectation
  /** What the link shows once the step has settled. */
  after: StepExpectation
  /** Whether the link reached `connected` before this step, in any session of the path. */
  wasConnected: boolean
  /**
   * Whether the server accepted a socket of this link (the link reached `joining` or `connected`)
   * before this step, in any session of the path: a 409 may then come from that socket.
   */
  wasAccepted: boolean
  link: Link
  host: H
  /**
   * The app channels of the link, in the order the host asked for them (see {@link AppChannelView}).
   * At a step that leaves the link `connected`, the kit first waits, up to the run's `channelWaitMs`
   * (by default its timeout), for every join in flight (no channel `joining` or `detached`), so a
   * status here is the server's answer.
   * Undefined when a test replays a path on the chart alone (no link).
   */
  channels: readonly AppChannelView[] | undefined
  /** The kit's simulator: its records are what the server saw; undefined when a test replays a path on the chart alone, with no server (an oracle then skips what only the server can tell). */
  simulator: PlatformSimulator | undefined
  agentId: string
}

/**
 * One lifecycle rule as a check. `check` returns null when the rule holds or does not apply to
 * the step, or a sentence saying what broke it. It may throw: the runner reports a throw as a
 * broken rule, naming the oracle.
 */
export interface LifecycleOracle<H = unknown> {
  /** Stable id, e.g. `supersede-is-terminal`. */
  name: string
  /** The rule, one sentence. */
  rule: string
  /**
   * A property, not a method, so its parameter is checked strictly: an oracle written for a richer
   * host than the factory returns does not compile.
   */
  check: (input: OracleInput<H>) => string | null
}

/** What the app-channels-joined oracle says of a channel that is not joined. */
function notJoined(c: AppChannelView): string {
  // A reason's line ends "will reconnect" or "terminal", said of the link; the status says what the channel does.
  const line = (reason: DisconnectReason): string => describeReason(reason).replace(/, (will reconnect|terminal)$/, '')
  const why = c.reason === null ? null : line(c.reason)
  switch (c.status) {
    case 'errored':
      return `${c.topic} is errored, to be rejoined on this socket after its backoff${why === null ? '' : ` (${why})`}`
    case 'dropped':
      return `${c.topic} is dropped, not rejoined until the host asks for it again${why === null ? '' : ` (${why})`}`
    default: {
      const joins =
        c.joinsReceived === 0
          ? 'the server received no join of it on this socket (its join never left: params that never settle?)'
          : `the server received ${c.joinsReceived} join${c.joinsReceived === 1 ? '' : 's'} of it on this socket, and none is joined yet`
      const dropped = c.drops === 0 || c.lastDrop === null ? '' : `; dropped ${c.drops === 1 ? 'once' : `${c.drops} times`} during the run, the last ${line(c.lastDrop)}`
      return `${c.topic} is still ${c.status} when the kit stopped waiting: ${joins}${dropped}`
    }
  }
}

const SESSION = new Set(['connecting', 'joining', 'connected', 'reconnecting', 'suspended', 'stopping'])
const OFFLINE = new Set(['idle', 'stopped', 'terminated'])

/** Losses the design says are never a stop: they reconnect. */
const RETRIED = new Set([
  'close 1000',
  'close 1001',
  'close 1011',
  'close 1012',
  'close 1013',
  'close 4001',
  'drop',
  'reset',
  'heartbeat timeout',
  'control phx_close',
  'join crashed',
  'connect timeout',
  'join timeout',
  'upgrade 429',
  'upgrade 503',
])

/** Refusals the design says end the session. */
const REFUSALS = new Set(['upgrade 400', 'upgrade 403', 'upgrade 409', 'close 1008', 'join refused'])

const UNCHANGING = new Set([
  'stale close',
  'stale supersede',
  'ambiguous supersede',
  'earlier-session supersede',
  'malformed frame',
  'control signal',
  'queued signals',
  'duplicate signal',
  'failing signal',
  'cancelled wait',
])

function same(a: StepExpectation, b: StepExpectation): boolean {
  return JSON.stringify(a.chartState) === JSON.stringify(b.chartState) && a.reason === b.reason
}

/**
 * The server's refusals of the upgrade a held supersede waits on that say it caused nothing: the
 * platform answers a 4xx before it supersedes. (A drop or the connect timeout may follow an upgrade
 * the server accepted, its 101 lost, and the platform's 503 comes after it superseded: those
 * reconnect, as every drop, timeout and 503 does, and the supersede's cause is unknown.)
 */
const UPGRADE_REFUSALS = new Set(['upgrade 400', 'upgrade 403', 'upgrade 409', 'upgrade 429'])

/** How the upgrade a held supersede waits on may end and leave its cause unknown (the host's disconnect() abandons it unanswered). */
const UNKNOWN_OUTCOMES = new Set(['drop', 'connect timeout', 'upgrade 503', 'host disconnect'])

/**
 * Whether a supersede of the socket lost before was read during this connecting attempt, after
 * its upgrade left (the `stale supersede` stimulus): the platform may have sent it because of
 * that upgrade, so its outcome decides (docs/design.md, "supersede is terminal").
 */
function supersedeHeld({ path, index, before }: OracleInput): boolean {
  if (before.state !== 'connecting') return false
  for (let j = index - 1; j >= 0; j--) {
    const earlier = path.steps[j]!
    if (earlier.expect.generation !== before.generation || earlier.expect.state !== 'connecting') return false
    if (earlier.name === 'stale supersede') return true
  }
  return false
}

/**
 * A 409 after the server accepted a socket of this link (joined or not), during a session: the
 * platform may still hold that socket (it tracks the agent from the upgrade on).
 */
function ownConflict({ path, index, step, before, wasAccepted }: OracleInput): boolean {
  return step.name === 'upgrade 409' && (wasAccepted || unansweredBefore(path, index)) && SESSION.has(before.state)
}

/**
 * Whether an upgrade of the link left and ended with no answer (a drop, the connect timeout, or
 * the host's disconnect() after `upgrade sent`) before step `index`: the server may have accepted
 * it, its 101 lost, and may hold that socket as it holds one it accepted.
 */
function unansweredBefore(path: OracleInput['path'], index: number): boolean {
  for (let j = 1; j < index; j++) {
    const { name } = path.steps[j]!
    if (name !== 'drop' && name !== 'connect timeout' && name !== 'host disconnect') continue
    const before = path.steps[j - 1]!.expect
    if (before.state !== 'connecting') continue
    for (let k = j - 1; k >= 0 && path.steps[k]!.expect.generation === before.generation; k--) {
      if (path.steps[k]!.name === 'upgrade sent') return true
    }
  }
  return false
}

/**
 * The step from which a supersede's cause is unknown to the link, for the attempt answered at step
 * `index`, or -1: a supersede of the socket accepted last read while an upgrade of ours had no
 * answer (`ambiguous supersede`), or a supersede held on an upgrade that then ended with no answer
 * or a 503 (a drop, the connect timeout or `upgrade 503` after `stale supersede`), or a server's
 * close with a code a Phoenix "disconnect" sends (`close 1000`, `close 1001`, `close 1011`) of a
 * socket it accepted while its control channel was not joined (from
 * `joining`, which includes a rejoin after a crash, to a reconnect): the platform pushes
 * `supersede` only through a joined control channel, so one there is seen as a close alone; or a
 * `reset` of an accepted socket (joining or connected: the link had just sent), which may have
 * discarded the supersede push; or a
 * supersede read after a session ended other than `superseded` on its last accepted socket
 * (`late supersede`), or read on an earlier session's socket (`earlier-session supersede`) while
 * the current or just-ended session has no socket the server accepted. Only an attempt
 * started after it counts (a higher generation than before that step; one whose upgrade was
 * already out then is judged by an earlier such step, if any), and only until the server accepts
 * an upgrade of the link or a session ends `superseded`: a session the host stops, or that ends
 * another way, before deciding it leaves it to the next session.
 */
function causeUnknownSince(input: OracleInput): number {
  const { path, index, before } = input
  for (let k = index - 1; k >= 1; k--) {
    const step = path.steps[k]!
    const prior = path.steps[k - 1]!.expect
    if (step.name === 'open' || (step.expect.state === 'terminated' && step.expect.reason === 'superseded')) return -1
    const ended = prior.state === 'stopped' || (prior.state === 'terminated' && prior.reason !== 'superseded')
    const reconnects = step.expect.state === 'reconnecting' || step.expect.state === 'suspended'
    const unknown =
      (step.name === 'ambiguous supersede' && SESSION.has(prior.state) && prior.state !== 'stopping') ||
      // Read after the session ended (not superseded) on a socket still closing, or on an earlier
      // session's socket before this session had one accepted: another instance, or an upgrade of ours.
      (step.name === 'late supersede' && ended) ||
      (step.name === 'earlier-session supersede' && (ended || SESSION.has(prior.state)) && !acceptedIn(path, k, prior.epoch)) ||
      (UNKNOWN_OUTCOMES.has(step.name) && supersedeHeld({ ...input, index: k, step, before: prior })) ||
      (prior.state === 'joining' && DISCONNECT_CLOSES.has(step.name) && reconnects) ||
      // A reset of an accepted socket just after the link sent, joined or not: the reset may have discarded the push.
      (step.name === 'reset' && (prior.state === 'joining' || prior.state === 'connected') && reconnects)
    if (unknown && before.generation > prior.generation) return k
  }
  return -1
}

/** Whether the server accepted an upgrade of session `epoch` before step `k` (an `open` step of that session). */
function acceptedIn(path: OracleInput['path'], k: number, epoch: number): boolean {
  for (let j = k - 1; j >= 0; j--) {
    const step = path.steps[j]!
    if (step.name === 'open' && step.expect.epoch === epoch) return true
  }
  return false
}

/** The closes a Phoenix "disconnect" sends (1011 Bandit, 1000 Cowboy, 1001 Phoenix 1.8.8+), as the platform ends a superseded socket. */
const DISCONNECT_CLOSES = new Set(['close 1000', 'close 1001', 'close 1011'])

/** The steps at which the server answers an upgrade of the link. */
const UPGRADE_ANSWERS = new Set(['open', ...UPGRADE_REFUSALS, 'upgrade 503'])

/** The lifecycle rules of docs/design.md, each an oracle; the path runner checks them all by default. */
export const LIFECYCLE_ORACLES: readonly LifecycleOracle[] = deepFreeze([
  {
    name: 'late-and-bad-input-change-nothing',
    rule: 'A stale generation, a malformed frame, a control signal and a cancelled wait change no state.',
    check: ({ step, before, after }) => (!UNCHANGING.has(step.name) || same(before, after) ? null : `${step.name} moved ${before.state} to ${after.state}`),
  },
  {
    name: 'control-crash-rejoins',
    rule: 'A control channel crash (phx_error) rejoins the control channel on the same socket; the session is not lost.',
    check: ({ step, before, after }) => {
      if (step.name !== 'control phx_error' || (before.state !== 'connected' && before.state !== 'joining')) return null
      return after.state === 'joining' && after.generation === before.generation && after.reason === before.reason
        ? null
        : `from ${before.state} (generation ${before.generation}) it led to ${after.state} (generation ${after.generation}, ${after.reason})`
    },
  },
  {
    name: 'suspended-retries',
    rule: 'Giving up is not the default: a suspended link tries again after its cooldown.',
    check: ({ step, before, after }) => {
      if (step.name !== 'backoff elapsed' || before.state !== 'suspended') return null
      return after.state === 'connecting' && after.generation === before.generation + 1 ? null : `after its cooldown it led to ${after.state}`
    },
  },
  {
    name: 'supersede-is-terminal',
    rule:
      'A supersede ends the session for good, in every state of a session, read during the backoff on the socket just lost too; one read on the socket lost before while the next upgrade is out ends it once the server refuses that upgrade with a 4xx, and changes nothing once the server accepts it; one whose cause is unknown (an upgrade of ours unanswered, or refused 503) changes no state by itself.',
    check: (input) => {
      const { step, before, after } = input
      if (supersedeHeld(input)) {
        if (UPGRADE_REFUSALS.has(step.name)) {
          return after.state === 'terminated' && after.reason === 'superseded' ? null : `${step.name} after a supersede held on the upgrade led to ${after.state} (${after.reason})`
        }
        if (step.name === 'open') return after.state === 'joining' ? null : `the upgrade a supersede was held on was accepted, and it led to ${after.state} (${after.reason})`
        return null
      }
      if ((step.name !== 'supersede' && step.name !== 'late supersede') || !SESSION.has(before.state)) return null
      return after.state === 'terminated' && after.reason === 'superseded' ? null : `from ${before.state} it led to ${after.state} (${after.reason})`
    },
  },
  {
    name: 'unknown-supersede-probes',
    rule:
      'After a supersede whose cause is unknown (an upgrade of ours unanswered, or refused 503), or a close by the server of an accepted socket before its control channel joined (where the platform cannot push a supersede), or a reset of an accepted socket just after the link sent (which may have discarded the supersede push), every upgrade of the link that leaves later, until one is accepted or a session ends superseded, asks on_conflict=reject, those of the next session too if the host stops this one (or it ends another way) first, so no other instance of the agent is evicted to find out. Judged from what the server saw: the last of `simulator.upgrades` of the agent (UpgradeRecord.onConflict) at each step that answers an upgrade; skipped with no simulator (a replay on the chart alone).',
    check: (input) => {
      const { path, step, before, simulator, agentId } = input
      if (simulator === undefined || before.state !== 'connecting' || !UPGRADE_ANSWERS.has(step.name)) return null
      const since = causeUnknownSince(input)
      if (since < 0) return null
      const answered = simulator.upgrades.filter((u) => u.agentId === agentId).at(-1)
      if (answered === undefined) return `no upgrade of ${agentId} is recorded as answered at ${step.name} (a simulator keeps only historyLimit upgrades)`
      return answered.onConflict === 'reject'
        ? null
        : `the upgrade answered ${answered.status} at ${step.name} asked on_conflict=${answered.onConflict ?? '(absent)'}, not reject, though a supersede's cause was unknown since step ${since + 1} (${path.steps[since]!.name})`
    },
  },
  {
    name: 'own-conflict-retries',
    rule: 'A 409 after the server accepted a socket of this link, or after an upgrade of it ended with no answer (dropped, timed out, abandoned by disconnect(): the server may have accepted it), may be the platform still holding that socket: retried, reported as rejected.',
    check: (input) => {
      if (!ownConflict(input) || supersedeHeld(input)) return null // a refusal after a held supersede ends the session: supersede-is-terminal
      const { after } = input
      return after.state === 'reconnecting' && after.reason === 'rejected' ? null : `upgrade 409 after a socket of this link was accepted led to ${after.state} (${after.reason})`
    },
  },
  {
    name: 'refusal-is-terminal',
    rule: 'An upgrade refused with 400/403/409, a close 1008 and a refused control join end the session.',
    check: (input) => {
      const { step, before, after } = input
      if (!REFUSALS.has(step.name) || !SESSION.has(before.state) || before.state === 'stopping' || ownConflict(input) || supersedeHeld(input)) return null
      return after.state === 'terminated' && after.reason === 'rejected' ? null : `${step.name} led to ${after.state} (${after.reason})`
    },
  },
  {
    name: 'normal-close-reconnects',
    rule: 'A normal close (1000, 1001, 1011, 1012, 1013, 4001), a drop, a reset, a heartbeat timeout, a 429/503 and every timeout reconnect.',
    check: (input) => {
      const { step, before, after } = input
      // A 429 after a held supersede ends the session (supersede-is-terminal); a drop, a timeout or a 503 still reconnects.
      if (!RETRIED.has(step.name) || !SESSION.has(before.state) || before.state === 'stopping' || (supersedeHeld(input) && UPGRADE_REFUSALS.has(step.name))) return null
      return after.state === 'reconnecting' ? null : `${step.name} from ${before.state} led to ${after.state} (${after.reason})`
    },
  },
  {
    name: 'disconnect-stops',
    rule: 'disconnect() always stops a session; after a terminal reason it keeps that reason; from idle it does nothing.',
    check: ({ step, before, after }) => {
      if (step.name !== 'host disconnect') return null
      if (before.state === 'terminated') return after.state === 'terminated' && after.reason === before.reason ? null : 'disconnect() after a terminal reason lost it'
      if (before.state === 'idle') return after.state === 'idle' ? null : `disconnect() from idle led to ${after.state}`
      return after.state === 'stopped' || after.state === 'stopping' ? null : `from ${before.state} it led to ${after.state}`
    },
  },
  {
    name: 'stop-is-graceful',
    rule: 'A stop whose leave settles ends stopped with the graceful reason.',
    check: ({ step, before, after }) => {
      if (step.name !== 'leave settles' || before.state !== 'stopping') return null
      return after.state === 'stopped' && after.reason === 'graceful' ? null : `got ${after.state} (${after.reason})`
    },
  },
  {
    name: 'connect-starts-a-session',
    rule: 'connect() from idle, stopped or terminated starts a new session with the reason cleared; during a session it changes nothing.',
    check: ({ step, before, after }) => {
      if (step.name !== 'host connect') return null
      if (OFFLINE.has(before.state)) {
        return after.state === 'connecting' && after.reason === null && after.epoch === before.epoch + 1
          ? null
          : `got ${after.state} (${after.reason}), epoch ${after.epoch}`
      }
      return same(before, after) ? null : `during a session it moved ${before.state} to ${after.state}`
    },
  },
  {
    name: APP_CHANNELS_ORACLE,
    rule:
      "Every app channel the host asked for and has not left is joined at every step that leaves the link connected, once its join is answered: the link rejoins each one on every new socket, and a channel the server refused or closed (a mistyped topic, a route the platform lacks), a join that crashed or params that failed are the host's to see. Skipped with no record of the channels (a replay on the chart alone).",
    check: ({ after, channels }) => {
      if (channels === undefined || after.state !== 'connected') return null
      const off = channels.filter((c) => c.status !== 'joined')
      if (off.length === 0) return null
      return off.map(notJoined).join('; ')
    },
  },
  {
    name: 'only-connect-leaves-offline',
    rule: 'Only connect() leaves idle, stopped or terminated.',
    check: ({ step, before, after }) => {
      if (!OFFLINE.has(before.state) || step.name === 'host connect' || step.name === 'host disconnect') return null
      return same(before, after) ? null : `${step.name} led to ${after.state}`
    },
  },
] satisfies LifecycleOracle[])
