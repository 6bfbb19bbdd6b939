/**
 * Helpers for pure chart tests: drive the connection chart with `transition()` (no actors run,
 * no timers) and build the reasons the adapter would send, with the real classification tables.
 */
import { initialTransition, transition, type SnapshotFrom } from 'xstate'
import { connectionMachine, DEFAULT_CONNECTION_POLICY, type ConnectionEvent } from '../../machines/connection.js'
import { linkStateOf } from '../../machines/status.js'
import { classifyClose, classifySupersede, classifyUpgrade } from '../../src/reasons.js'

export type ConnSnapshot = SnapshotFrom<typeof connectionMachine>

export const env = { now: () => 1_000, monotonic: () => 1_000, random: () => 0.5 }

/**
 * The chart idle, on a fixed clock. Its helpers close sockets the instant their control channel
 * joins, so the unseen-supersede window after a join (connection.unseenSupersedeWindowMs) is off
 * here (0: only a close before the join is probed); test/machines/connection.test.ts tests the
 * window on its own.
 */
export function start(): ConnSnapshot {
  return initialTransition(connectionMachine, { env, policy: { ...DEFAULT_CONNECTION_POLICY, unseenSupersedeWindowMs: 0 } })[0]
}

/** Applies events in order; returns the last snapshot. */
export function run(snapshot: ConnSnapshot, ...events: ConnectionEvent[]): ConnSnapshot {
  let s = snapshot
  for (const e of events) s = transition(connectionMachine, s, e)[0]
  return s
}

/**
 * Applies one event; returns the snapshot, the action types it produced, what it emitted, and its
 * I/O actions (the named actions the link's runtime carries out: `openTransport`, `tellReconnect`, ...) with their params.
 */
export function step(snapshot: ConnSnapshot, event: ConnectionEvent): { s: ConnSnapshot; actions: string[]; emitted: unknown[]; io: Array<{ type: string; params: unknown }> } {
  const [s, actions] = transition(connectionMachine, snapshot, event)
  return {
    s,
    actions: actions.map((a) => a.type as string),
    emitted: actions.filter((a) => (a.type as string) === 'xstate.emit').map((a) => (a as unknown as { params: { event: unknown } }).params?.event ?? a),
    io: actions.filter((a) => !(a.type as string).startsWith('xstate.')).map((a) => ({ type: a.type as string, params: (a as { params?: unknown }).params })),
  }
}

export const state = (s: ConnSnapshot) => linkStateOf(s.value)

/** Origin of the chart's current transport. */
export function origin(s: ConnSnapshot) {
  return { generation: s.context.generation, epoch: s.context.epoch }
}

export function closeEvent(s: ConnSnapshot, code: number, reason = '', o = origin(s)): ConnectionEvent {
  return { type: 'socket.close', reason: classifyClose({ code, reason }, o.generation, 5), ...o }
}

export function upgradeEvent(s: ConnSnapshot, status: number, retryAfter?: string): ConnectionEvent {
  const o = origin(s)
  return { type: 'socket.upgradeRejected', reason: classifyUpgrade({ status, retryAfter: retryAfter ?? null }, o.generation, 5), ...o }
}

export function supersedeEvent(o: { generation: number; epoch: number }, payload: unknown = { reason: 'session.already_connected' }): ConnectionEvent {
  return { type: 'control.supersede', reason: classifySupersede(payload, o.generation, 5), ...o }
}

/** idle -> connected (first transport of a new session). */
export function connected(from: ConnSnapshot = start()): ConnSnapshot {
  let s = run(from, { type: 'host.connect' })
  s = run(s, { type: 'socket.open', ...origin(s) })
  return run(s, { type: 'control.joinOk', ...origin(s) })
}

/** connected -> reconnecting.waiting after a close 1000, with the reconnect chart's answer fed in. */
export function waiting(from: ConnSnapshot = connected()): ConnSnapshot {
  const s = run(from, closeEvent(from, 1000))
  return run(s, { type: 'reconnect.scheduled', delayMs: 100, attempt: 1 })
}

/** A drop (close 1006, no close frame) of transport `generation` of session `epoch`. */
export function dropEvent(generation: number, epoch = 1): ConnectionEvent {
  return { type: 'socket.close', reason: classifyClose({ code: 1006, reason: '' }, generation, 0), generation, epoch }
}

/** From the backoff after the first transport's loss (`waiting()`): the second transport opening, its upgrade sent. */
export function upgradeOut(from: ConnSnapshot = waiting()): ConnSnapshot {
  return run(from, { type: 'reconnect.due' }, { type: 'socket.upgradeSent', generation: from.context.generation + 1, epoch: from.context.epoch })
}

/** What the chart's `link.ignored` report of a held or ambiguous supersede it dismissed holds, for `toContainEqual`. */
export function supersedeIgnored(detail: string) {
  return { type: 'link.ignored', event: 'control.supersede', detail }
}

/** The end of a dismissed doubt's report when a conflict probe was accepted. */
export const PROBE_ACCEPTED = 'the server accepted a connection made with on_conflict=reject, so no other instance holds the key'

/** The report of an unseen doubt (raised by the close of the socket of `generation`) that an accepted probe settled: it names the close, as no supersede was read. */
export function unseenSettled(generation: number) {
  return {
    type: 'link.ignored',
    event: 'socket.close',
    detail: `a close that may have hidden a supersede the platform could not push (the server closed the socket of generation ${generation} before its control channel joined, or within unseenSupersedeWindowMs of the join): ${PROBE_ACCEPTED}`,
  }
}

/** A server close 1000 of transport `generation` at wall time `at`, as the adapter classifies it: the last loss a `suppressed` reason names. */
export function normalLoss(generation: number, at = 0) {
  return classifyClose({ code: 1000, reason: '' }, generation, at)
}
