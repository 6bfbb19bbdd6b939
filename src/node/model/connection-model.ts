/**
 * The test model of the connection chart: the stimuli a test world can apply in each state,
 * each with the chart event it produces, derived from the shipped chart's own snapshot (so the
 * model cannot drift from the chart). `wire` stimuli are the ones a real link and the simulator
 * can produce in that state; `pure` adds the ones only a direct event can reach (a state that is
 * transient on the wire, like `stopping`, whose leave settles at once).
 *
 * Every stimulus has a stable name; `phoenix-link paths` prints paths as these names.
 */
import { initialTransition, transition, type SnapshotFrom } from 'xstate'
import { connectionMachine, type ConnectionEvent } from '../../../machines/connection.js'
import { linkStateOf, type LinkState } from '../../../machines/status.js'
import { suppressedReason } from '../../../machines/types.js'
import {
  classifyClose,
  classifyControlChannelLoss,
  classifyJoinError,
  classifySupersede,
  classifyUpgrade,
  heartbeatTimeout,
  type DisconnectReason,
} from '../../reasons.js'

/** A snapshot of the connection chart. */
export type ConnectionSnapshot = SnapshotFrom<typeof connectionMachine>

/** How the test world applies a stimulus. */
export type StimulusKind =
  /** The host calls the link (connect, disconnect). */
  | 'host'
  /** The simulator does something on the wire (close, refuse, push, answer a join). */
  | 'server'
  /** Chart time passes (a SimulatedClock advances by the delay). */
  | 'clock'
  /** A late event delivered into the running link exactly as a delayed adapter would. */
  | 'inject'
  /** Nothing to do: the chart's own follow-up (the reconnect chart's answer, a leave settling). */
  | 'auto'

/** One stimulus applicable in a state. */
export interface Stimulus {
  /** Stable name, e.g. `close 1001`, `upgrade 403`, `supersede`. */
  name: string
  kind: StimulusKind
  /** The chart event it produces. */
  event: ConnectionEvent
}

/** What a path step expects after its stimulus. */
export interface Expectation {
  /** The chart state value. */
  value: unknown
  /** The public link state. */
  state: LinkState
  /** `lastDisconnectReason.kind`, or null. */
  reason: string | null
  /** Close code or HTTP status of the reason, when it has one. */
  code: number | null
  generation: number
  epoch: number
}

/** The close codes the model drives: normal closes of each server, restarts, an application code, a refusal. */
export const MODEL_CLOSE_CODES = [1000, 1001, 1011, 1012, 1013, 4001, 1008] as const
/** The upgrade statuses the model drives. */
export const MODEL_UPGRADE_STATUSES = [400, 403, 409, 429, 503] as const

const ENV = { now: () => 0, monotonic: () => 0, random: () => 0.5 }

/** The chart's initial snapshot with a fixed clock and jitter. */
export function initialModel(): ConnectionSnapshot {
  return initialTransition(connectionMachine, { env: ENV })[0]
}

/** Applies a stimulus to a model snapshot (pure). */
export function applyModel(snapshot: ConnectionSnapshot, stimulus: Stimulus): ConnectionSnapshot {
  return transition(connectionMachine, snapshot, stimulus.event)[0]
}

/** A reason's close code or HTTP status, when it has one (a path step's `code`), else null. */
export function reasonCode(reason: unknown): number | null {
  if (reason && typeof reason === 'object') {
    if ('closeCode' in reason && typeof reason.closeCode === 'number') return reason.closeCode
    if ('status' in reason && typeof reason.status === 'number') return reason.status
  }
  return null
}

/** What a snapshot shows the world. */
export function expectationOf(snapshot: ConnectionSnapshot): Expectation {
  const reason = snapshot.context.lastReason as DisconnectReason | null
  const code = reasonCode(reason)
  return {
    value: snapshot.value,
    state: linkStateOf(snapshot.value),
    reason: reason?.kind ?? null,
    code,
    generation: snapshot.context.generation,
    epoch: snapshot.context.epoch,
  }
}

/**
 * `|after-reset` from a reset of an accepted socket until the next upgrade's answer, whatever the
 * chart decided on it: the paths then follow every reset to the upgrades that must probe (the
 * test kit's oracle `unknown-supersede-probes` judges them), even for a chart that no longer
 * probes after one.
 */
export function afterReset(snapshot: ConnectionSnapshot): string {
  const reason = snapshot.context.lastReason as { reset?: unknown } | null
  const state = linkStateOf(snapshot.value)
  return reason?.reset === true && (state === 'reconnecting' || state === 'suspended' || state === 'connecting') ? '|after-reset' : ''
}

/**
 * Serializes what distinguishes a model state: the state value, the last reason, whether stale
 * events exist, whether the link has lost a socket the server accepted (a 409 may then be our own
 * conflict) and whether this session connected before, whether the current upgrade has left, and
 * whether a supersede is held until its outcome is known, and whether a reset came before the
 * next upgrade's answer ({@link afterReset}).
 */
export function serializeModel(snapshot: ConnectionSnapshot): string {
  const e = expectationOf(snapshot)
  // Whether this session connected, for a 409 after a lost socket: retried (our own conflict)
  // whether or not the session connected first, and both are paths to walk.
  const lostAccepted = snapshot.context.acceptedLostAt === null ? '' : snapshot.context.connects > 0 ? '|lost-accepted|connected' : '|lost-accepted'
  // Connecting before its upgrade left (credentials pending, TCP opening): a supersede on the socket just lost still counts.
  const preUpgrade = e.state === 'connecting' && snapshot.context.keyHolder !== e.generation ? '|pre-upgrade' : ''
  // A supersede of the socket lost before, held until this upgrade's outcome is known; one whose
  // cause is unknown, probed; a key holder whose upgrade had no answer (a supersede on the socket before it is ambiguous).
  const c = snapshot.context
  const held = `${c.heldSupersede === null ? '' : '|held-supersede'}${c.ambiguousSupersede === null ? '' : '|probing'}${c.keyHolder !== 0 && c.keyHolder !== c.lastAccepted && !(e.state === 'connecting' && c.keyHolder === c.generation) ? '|unanswered-holder' : ''}`
  return `${JSON.stringify(e.value)}|${e.reason ?? '-'}${e.code ?? ''}|g${e.generation > 1 ? '+' : e.generation}|e${e.epoch > 1 ? '+' : e.epoch}${lostAccepted}${preUpgrade}${held}${afterReset(snapshot)}`
}

function afterEvent(delay: string, stateId: string): ConnectionEvent {
  return { type: `xstate.after.${delay}.${stateId}` } as unknown as ConnectionEvent
}

/**
 * The stimuli of a state. `mode: 'wire'` gives those a real link and the simulator can apply;
 * `mode: 'pure'` all of them, for the chart-only paths.
 */
export function stimuliOf(snapshot: ConnectionSnapshot, mode: 'wire' | 'pure'): Stimulus[] {
  const { generation: g, epoch: e, keyHolder, priorKeyHolder, lastAccepted } = snapshot.context
  const origin = { generation: g, epoch: e }
  const state = linkStateOf(snapshot.value)
  const value = JSON.stringify(snapshot.value)
  const out: Stimulus[] = []
  const add = (name: string, kind: StimulusKind, event: ConnectionEvent) => out.push({ name, kind, event })
  const closes = () => {
    for (const code of MODEL_CLOSE_CODES) add(`close ${code}`, 'server', { type: 'socket.close', reason: classifyClose({ code, reason: '' }, g, 0), ...origin })
    add('drop', 'server', { type: 'socket.close', reason: classifyClose({ code: 1006, reason: '' }, g, 0), ...origin })
  }
  // The server's close with the link's bytes unread (it had just sent: the control join, a push):
  // a TCP reset, which may have discarded a supersede push; probed (docs/rules.md).
  const reset = () => add('reset', 'server', { type: 'socket.close', reason: classifyClose({ code: 1006, reason: '', error: 'read ECONNRESET', reset: true }, g, 0), ...origin })
  const supersede = () => add('supersede', 'server', { type: 'control.supersede', reason: classifySupersede({ reason: 'session.already_connected' }, g, 0), ...origin })
  const lateSupersede = (from: number) => {
    // A supersede read late on the transport just lost (its close not yet complete), before the
    // next one's upgrade was sent: another instance holds the key; still terminal.
    if (from >= 1) add('late supersede', 'inject', { type: 'control.supersede', reason: classifySupersede({}, from, 0), generation: from, epoch: e })
  }
  const ambiguousSupersede = () => {
    // A supersede read on the socket before the key holder while the key holder's upgrade left and
    // had no answer (dropped, timed out): perhaps the platform evicting it because that upgrade was
    // accepted (its 101 lost), perhaps another instance. The next attempts probe.
    // It comes on the newest socket the server accepted (only an accepted socket can be read at all).
    // With the current upgrade out, only behind an unanswered one (else it is held: `stale supersede`).
    const behindUnanswered = keyHolder !== g || priorKeyHolder !== lastAccepted
    if (lastAccepted >= 1 && keyHolder !== lastAccepted && behindUnanswered) {
      add('ambiguous supersede', 'inject', { type: 'control.supersede', reason: classifySupersede({}, lastAccepted, 0), generation: lastAccepted, epoch: e })
    }
  }
  const staleSupersede = () => {
    // A supersede read on the previous transport once this one's upgrade was sent: perhaps the
    // platform evicting that socket because this one connected. Held: it changes nothing until
    // this upgrade's outcome is known (the model's next steps: accepted, refused, dropped, timed out).
    // It comes on the transport that held the key before this one claimed it (the only older one
    // the server may still hold for this session).
    const prior = snapshot.context.priorKeyHolder
    if (prior >= 1 && prior === lastAccepted) add('stale supersede', 'inject', { type: 'control.supersede', reason: classifySupersede({}, prior, 0), generation: prior, epoch: e })
  }
  const stale = () => {
    if (g > 1) add('stale close', 'inject', { type: 'socket.close', reason: classifyClose({ code: 1000, reason: '' }, g - 1, 0), generation: g - 1, epoch: e })
    // Generations grow across sessions: an earlier session's transport is an older generation.
    // Generation 1 is the first session's first transport, surely an earlier session's once e > 1
    // (g - 1 may be this session's own previous socket, whose supersede is another stimulus).
    // Only a socket the server accepted can be read, so only once one was (or one whose upgrade left
    // and had no answer: it may have been accepted) and then lost (`acceptedLostAt`).
    if (e > 1 && snapshot.context.acceptedLostAt !== null) add('earlier-session supersede', 'inject', { type: 'control.supersede', reason: classifySupersede({}, 1, 0), generation: 1, epoch: 1 })
  }
  const host = () => {
    add('host connect', 'host', { type: 'host.connect' })
    add('host disconnect', 'host', { type: 'host.disconnect' })
  }

  switch (state) {
    case 'suspended':
      add('backoff elapsed', 'clock', { type: 'reconnect.due' })
      add('host disconnect', 'host', { type: 'host.disconnect' })
      lateSupersede(keyHolder)
      ambiguousSupersede()
      stale()
      break
    case 'idle':
    case 'stopped':
    case 'terminated':
      host()
      stale()
      // A supersede read after the session ended on its last accepted socket, still closing (a
      // stalled server never read the link's close): the next session probes, unless it ended superseded.
      if (state !== 'idle') lateSupersede(lastAccepted)
      break
    case 'connecting':
      if (keyHolder !== g) {
        // No upgrade of this transport has left yet (its TCP connection opening, or the host's
        // credentials pending): a supersede read on the socket just lost is another instance's.
        // On the wire the upgrade leaves by itself within a tick, so the rest is pure only.
        add('upgrade sent', 'auto', { type: 'socket.upgradeSent', ...origin })
        if (mode === 'pure') {
          lateSupersede(keyHolder)
          ambiguousSupersede()
          // The TCP connection refused: the server saw nothing; the socket lost before keeps the key.
          add('drop', 'server', { type: 'socket.close', reason: classifyClose({ code: 1006, reason: '' }, g, 0), ...origin })
          add('host disconnect', 'host', { type: 'host.disconnect' })
        }
        break
      }
      add('open', 'server', { type: 'socket.open', ...origin })
      for (const status of MODEL_UPGRADE_STATUSES) {
        add(`upgrade ${status}`, 'server', { type: 'socket.upgradeRejected', reason: classifyUpgrade({ status, retryAfter: status === 429 || status === 503 ? '1' : null }, g, 0), ...origin })
      }
      add('drop', 'server', { type: 'socket.close', reason: classifyClose({ code: 1006, reason: '' }, g, 0), ...origin })
      add('connect timeout', 'clock', afterEvent('connectTimeout', 'connection.session.online.connecting'))
      add('host disconnect', 'host', { type: 'host.disconnect' })
      // The link sends no host.connect during a session; the chart ignores one anyway.
      if (mode === 'pure') add('host connect', 'host', { type: 'host.connect' })
      staleSupersede()
      ambiguousSupersede()
      stale()
      break
    case 'joining':
      if (value.includes('controlErrored')) {
        // The control channel crashed: the rejoin waits out its delay; the socket is still up.
        add('rejoin delay', 'clock', afterEvent('controlRejoinDelay', 'connection.session.online.attached.live.controlErrored'))
        closes()
        reset()
        add('heartbeat timeout', 'server', { type: 'socket.heartbeatTimeout', reason: heartbeatTimeout(g, 0), ...origin })
        supersede()
        add('host disconnect', 'host', { type: 'host.disconnect' })
        stale()
        break
      }
      if (value.includes('controlRejoining')) {
        add('join ok', 'server', { type: 'control.joinOk', ...origin })
        add('join refused', 'server', { type: 'control.joinError', reason: classifyJoinError({ reason: 'unauthorized' }, g, 0), ...origin })
        add('join timeout', 'clock', afterEvent('joinTimeout', 'connection.session.online.attached.live.controlRejoining'))
        if (mode === 'pure') add('control phx_error', 'server', { type: 'control.crashed', reason: classifyControlChannelLoss('phx_error', {}, g, 0), ...origin })
        supersede()
        add('host disconnect', 'host', { type: 'host.disconnect' })
        break
      }
      add('join ok', 'server', { type: 'control.joinOk', ...origin })
      add('join refused', 'server', { type: 'control.joinError', reason: classifyJoinError({ reason: 'unauthorized' }, g, 0), ...origin })
      add('join crashed', 'server', { type: 'control.joinError', reason: classifyJoinError({ reason: 'join crashed' }, g, 0), ...origin })
      add('join timeout', 'clock', afterEvent('joinTimeout', 'connection.session.online.attached.joining'))
      closes()
      reset()
      supersede()
      add('host disconnect', 'host', { type: 'host.disconnect' })
      stale()
      break
    case 'connected':
      closes()
      reset()
      add('heartbeat timeout', 'server', { type: 'socket.heartbeatTimeout', reason: heartbeatTimeout(g, 0), ...origin })
      add('control phx_error', 'server', { type: 'control.crashed', reason: classifyControlChannelLoss('phx_error', {}, g, 0), ...origin })
      add('control phx_close', 'server', { type: 'control.lost', reason: classifyControlChannelLoss('phx_close', {}, g, 0), ...origin })
      supersede()
      add('control signal', 'server', { type: 'control.signal', signal: { correlationId: null }, ...origin })
      // The control delivery chart's other paths: a repeated correlation id, a handler that throws.
      add('duplicate signal', 'server', { type: 'control.signal', signal: { correlationId: 'dup' }, ...origin })
      add('failing signal', 'server', { type: 'control.signal', signal: { correlationId: 'fail' }, ...origin })
      // Two signals queued behind a slow handler: handed over once each, in order, when it ends.
      add('queued signals', 'server', { type: 'control.signal', signal: { correlationId: 'queued' }, ...origin })
      // A frame the adapter cannot use: reported (ignored), never acted on.
      add('malformed frame', 'server', { type: 'socket.malformed', detail: 'not-json', ...origin })
      // The host aborts a runForever() wait: nothing reaches the chart (a pseudo event it ignores).
      add('cancelled wait', 'host', { type: 'host.wait' } as unknown as ConnectionEvent)
      add('host disconnect', 'host', { type: 'host.disconnect' })
      stale()
      if (mode === 'pure') add('host connect', 'host', { type: 'host.connect' })
      break
    case 'stopping':
      // On the wire phoenix.js settles a leave at once (channel.js leave), so stopping only ever
      // sees the leave's own answer; the rest is reachable by direct events alone.
      add('leave settles', 'auto', { type: 'control.left', ...origin })
      if (mode === 'pure') {
        add('leave timeout', 'clock', afterEvent('leaveTimeout', 'connection.session.online.attached.stopping'))
        add('close 1000', 'server', { type: 'socket.close', reason: classifyClose({ code: 1000, reason: '' }, g, 0), ...origin })
        // A close 1000 there may be a supersede no push carried (just after the control join); a drop is not.
        add('drop', 'server', { type: 'socket.close', reason: classifyClose({ code: 1006, reason: '' }, g, 0), ...origin })
        add('control phx_error', 'server', { type: 'control.crashed', reason: classifyControlChannelLoss('phx_error', {}, g, 0), ...origin })
        add('control phx_close', 'server', { type: 'control.lost', reason: classifyControlChannelLoss('phx_close', {}, g, 0), ...origin })
        add('heartbeat timeout', 'server', { type: 'socket.heartbeatTimeout', reason: heartbeatTimeout(g, 0), ...origin })
        add('control signal', 'server', { type: 'control.signal', signal: { correlationId: null }, ...origin })
        add('host disconnect', 'host', { type: 'host.disconnect' })
        supersede()
      }
      break
    case 'reconnecting':
      if (value.includes('deciding')) {
        // The reconnect chart answers within the same turn: deciding is transient on the wire.
        add('backoff chosen', 'auto', { type: 'reconnect.scheduled', delayMs: 0, attempt: 1 })
        if (mode === 'pure') {
          // Past the rapid limit (ten accept-then-close connections: too long a path for the wire).
          add('suspended', 'auto', { type: 'reconnect.suspended', delayMs: 30_000, attempt: 10, reason: suppressedReason('rapid-disconnects', 10, classifyClose({ code: 1000, reason: '' }, g, 0), 0, true) })
          add('gave up', 'auto', { type: 'reconnect.gaveUp', reason: suppressedReason('rapid-disconnects', 10, classifyClose({ code: 1000, reason: '' }, g, 0), 0) })
          add('host disconnect', 'host', { type: 'host.disconnect' })
          lateSupersede(keyHolder)
        }
      } else {
        add('backoff elapsed', 'clock', { type: 'reconnect.due' })
        add('host disconnect', 'host', { type: 'host.disconnect' })
        lateSupersede(keyHolder)
        ambiguousSupersede()
        stale()
      }
      break
  }
  return out
}
