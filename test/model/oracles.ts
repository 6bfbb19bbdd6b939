/**
 * The lifecycle rules as oracles that do not come from the chart: given what held before a
 * stimulus and what holds after it, each rule says what must be true, written from
 * docs/design.md, not from machines/. Generated paths check them at every step, so a chart that
 * agrees with itself but breaks a rule (a flipped guard, a dropped transition) fails a path.
 */
import type { Expectation } from '../../src/node/model/connection-model.js'

const SESSION = new Set(['connecting', 'joining', 'connected', 'reconnecting', 'suspended', 'stopping'])

/** Losses the design says are never a stop: they reconnect. */
const RETRIED = new Set([
  'close 1000',
  'close 1001',
  'close 1011',
  'close 1012',
  'close 1013',
  'close 4001',
  'drop',
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

/**
 * Returns the rule a step breaks, or null. `after` is what the link showed once the step
 * settled; `linkConnected` whether the link reached connected before this step, in any session
 * (tracked by the caller with {@link trackConnected}, from the states the path went through).
 */
export function ruleViolation(stimulus: string, before: Expectation, after: Expectation, linkConnected: boolean): string | null {
  const same = JSON.stringify(before.value) === JSON.stringify(after.value) && before.reason === after.reason
  if (stimulus === 'stale close' || stimulus === 'earlier-session supersede') {
    return same ? null : `stale generations are ignored: ${stimulus} moved ${before.state} to ${after.state}`
  }
  if (stimulus === 'malformed frame') return same ? null : `bad input changes nothing: a malformed frame moved ${before.state} to ${after.state}`
  if (stimulus === 'control signal' || stimulus === 'queued signals' || stimulus === 'duplicate signal' || stimulus === 'failing signal') {
    return same ? null : `control signals change no state: ${before.state} -> ${after.state}`
  }
  if (stimulus === 'cancelled wait') return same ? null : `cancelling a wait is not a stop: ${before.state} -> ${after.state}`
  // A control channel crash is a channel crash: rejoined on the same socket, the session not lost.
  if (stimulus === 'control phx_error' && (before.state === 'connected' || before.state === 'joining')) {
    return after.state === 'joining' && after.generation === before.generation && after.reason === before.reason
      ? null
      : `a control channel crash rejoins on the same socket: from ${before.state} (generation ${before.generation}) it led to ${after.state} (generation ${after.generation}, ${after.reason})`
  }
  // Giving up is not the default: past the rapid limit the link waits a cooldown and tries again.
  if (stimulus === 'backoff elapsed' && before.state === 'suspended') {
    return after.state === 'connecting' && after.generation === before.generation + 1
      ? null
      : `a suspended link tries again after its cooldown: it led to ${after.state}`
  }
  if (stimulus === 'supersede' || stimulus === 'late supersede') {
    if (!SESSION.has(before.state)) return null
    return after.state === 'terminated' && after.reason === 'superseded'
      ? null
      : `supersede is terminal: from ${before.state} it led to ${after.state} (${after.reason})`
  }
  // Our own conflict: a 409 after the link had a connection (well inside the 75 s window on a
  // path) may be the platform still holding our lost socket: retried, reported as rejected.
  if (stimulus === 'upgrade 409' && linkConnected && SESSION.has(before.state)) {
    return after.state === 'reconnecting' && after.reason === 'rejected'
      ? null
      : `our own conflict is retried: upgrade 409 after the link was connected led to ${after.state} (${after.reason})`
  }
  if (REFUSALS.has(stimulus) && SESSION.has(before.state) && before.state !== 'stopping') {
    return after.state === 'terminated' && after.reason === 'rejected'
      ? null
      : `a refusal is terminal: ${stimulus} led to ${after.state} (${after.reason})`
  }
  if (RETRIED.has(stimulus) && SESSION.has(before.state) && before.state !== 'stopping') {
    return after.state === 'reconnecting'
      ? null
      : `a normal close or drop reconnects: ${stimulus} from ${before.state} led to ${after.state} (${after.reason})`
  }
  if (stimulus === 'host disconnect') {
    if (before.state === 'terminated') {
      return after.state === 'terminated' && after.reason === before.reason ? null : 'disconnect() after a terminal reason keeps it'
    }
    if (before.state === 'idle') return after.state === 'idle' ? null : `disconnect() from idle led to ${after.state}`
    return after.state === 'stopped' || after.state === 'stopping'
      ? null
      : `disconnect() always stops: from ${before.state} it led to ${after.state}`
  }
  if (stimulus === 'leave settles' && before.state === 'stopping') {
    return after.state === 'stopped' && after.reason === 'graceful' ? null : `a stop ends stopped (graceful), got ${after.state} (${after.reason})`
  }
  if (stimulus === 'host connect') {
    if (before.state === 'idle' || before.state === 'stopped' || before.state === 'terminated') {
      return after.state === 'connecting' && after.reason === null && after.epoch === before.epoch + 1
        ? null
        : `connect() starts a new session with the reason cleared: got ${after.state} (${after.reason}), epoch ${after.epoch}`
    }
    return same ? null : `connect() during a session changes nothing: ${before.state} -> ${after.state}`
  }
  if (before.state === 'terminated' || before.state === 'stopped' || before.state === 'idle') {
    return same ? null : `only connect() leaves ${before.state}: ${stimulus} led to ${after.state}`
  }
  return null
}

/** Whether the link has reached connected, after a step (in any session: the platform may hold any lost socket). */
export function trackConnected(linkConnected: boolean, after: Expectation): boolean {
  return linkConnected || after.state === 'connected'
}
