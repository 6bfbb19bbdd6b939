/**
 * Presence policy of the presence chart (machines/presence.ts). Plain data and a validator with
 * no XState import, so the simulator's public types (phoenix-link/server) reach it without
 * pulling in a chart. Frozen: a default cannot be changed for later trackers.
 */
import { assertMs } from './types.js'

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
