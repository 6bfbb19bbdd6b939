/**
 * Presence per principal on the server: one presence chart (machines/presence.ts) per agent id,
 * fed the simulator's socket opens and closes, and the crossings it reports.
 */
import { createActor, type Actor } from 'xstate'
import { DEFAULT_PRESENCE_POLICY, presenceMachine, validatePresencePolicy, type PresencePolicy, type PrincipalPresence } from '../../machines/presence.js'
import type { DisconnectReason } from '../reasons.js'

/** A crossing, with the typed reason of the close that ended the principal's presence. */
export type PresenceCrossing = Omit<PrincipalPresence, 'reason'> & { reason: DisconnectReason | null }

/** Tracks every principal's presence; calls `onCrossing` for each crossing, in order. */
export class PresenceTracker {
  private readonly actors = new Map<string, Actor<typeof presenceMachine>>()
  private readonly policy: PresencePolicy

  /**
   * @throws {RangeError} for a grace window that is not a whole number of milliseconds.
   */
  constructor(
    private readonly onCrossing: (crossing: PresenceCrossing) => void,
    policy: Partial<PresencePolicy> = {},
    private readonly onIgnored: (what: string) => void = () => {},
  ) {
    this.policy = validatePresencePolicy({ ...DEFAULT_PRESENCE_POLICY, ...policy })
  }

  /** A socket of `principal` was accepted. */
  opened(principal: string, connectionId: string, at: number): void {
    this.actorOf(principal).send({ type: 'presence.opened', connectionId, at })
  }

  /** A socket of `principal` closed for `reason`. */
  closed(principal: string, connectionId: string, reason: DisconnectReason, at: number): void {
    this.actorOf(principal).send({ type: 'presence.closed', connectionId, reason, at })
  }

  /** Live connections of a principal. */
  count(principal: string): number {
    return this.actors.get(principal)?.getSnapshot().context.connections.length ?? 0
  }

  /** Stops every chart (and its grace timer). */
  stop(): void {
    for (const actor of this.actors.values()) actor.stop()
    this.actors.clear()
  }

  private actorOf(principal: string): Actor<typeof presenceMachine> {
    let actor = this.actors.get(principal)
    if (!actor) {
      actor = createActor(presenceMachine, { input: { principal, policy: this.policy } })
      actor.on('principal-presence', (e) => this.onCrossing(e as PresenceCrossing))
      actor.on('presence-ignored', (e) => this.onIgnored(`${e.event} of unknown connection ${e.connectionId} (${e.principal})`))
      actor.start()
      this.actors.set(principal, actor)
    }
    return actor
  }
}
