/**
 * Presence policy of the presence chart (machines/presence.ts), and the crossing it reports.
 * Plain data, a validator and a type with no XState import, so the simulator's public types (phoenix-link/server) reach it without
 * pulling in a chart. Frozen: a default cannot be changed for later trackers.
 */
import { assertMs, type ReasonLike } from './types.js'

/** Presence policy. */
export const DEFAULT_PRESENCE_POLICY = {
  /**
   * Wait after the last connection closes before reporting `last-disconnected`; a reconnect
   * within it reports nothing. @default 0 — every crossing is an event; a platform that aborts
   * runs on a blip sets a few seconds.
   */
  graceWindowMs: 0,
}

/** Presence policy; see {@link DEFAULT_PRESENCE_POLICY}. */
export type PresencePolicy = typeof DEFAULT_PRESENCE_POLICY

/**
 * Checks a presence policy.
 *
 * @throws {RangeError} for a grace window that is not a whole number of milliseconds.
 */
export function validatePresencePolicy(policy: PresencePolicy): PresencePolicy {
  assertMs('presence.graceWindowMs', policy.graceWindowMs)
  return policy
}

Object.freeze(DEFAULT_PRESENCE_POLICY)

/** A boundary crossing. */
export interface PrincipalPresence {
  type: 'principal-presence'
  principal: string
  kind: 'first-connected' | 'last-disconnected'
  /** Live connections after the change (1 for first-connected, 0 for last-disconnected). */
  count: number
  /** The reason of the close that ended the last connection, for last-disconnected. */
  reason: ReasonLike | null
  /** When the crossing happened (the event's time; for a grace window, the last close's). */
  at: number
}
