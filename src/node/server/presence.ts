/**
 * Presence per principal on the server: one presence chart (machines/presence.ts) per agent id,
 * fed the simulator's socket opens and closes, and the crossings it reports.
 */
import { createActor, type Actor } from 'xstate'
import { presenceMachine } from '../../../machines/presence.js'
import { DEFAULT_PRESENCE_POLICY, validatePresencePolicy, type PresencePolicy, type PrincipalPresence } from '../../../machines/presence-policy.js'
import type { DisconnectReason } from '../../reasons.js'

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

  /**
   * A socket of `principal` closed for `reason`. The close of a principal with no chart (never
   * opened here, or forgotten since: a duplicate or late close) changes nothing and is reported to
   * `onIgnored`; no chart is made for it, so such closes keep nothing.
   */
  closed(principal: string, connectionId: string, reason: DisconnectReason, at: number): void {
    const actor = this.actors.get(principal)
    if (actor === undefined) {
      this.onIgnored(`presence.closed of unknown connection ${connectionId} (${principal})`)
      return
    }
    actor.send({ type: 'presence.closed', connectionId, reason, at })
  }

  /** Principals with a chart: those with a live connection or an open grace window (the others are forgotten). */
  get tracked(): number {
    return this.actors.size
  }

  /** Live connections of a principal. */
  count(principal: string): number {
    return this.actors.get(principal)?.getSnapshot().context.connections.length ?? 0
  }

  /** Ends every open grace window now, reporting each principal's last-disconnected (the server is stopping). */
  flush(): void {
    for (const actor of [...this.actors.values()]) actor.send({ type: 'presence.flush' })
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
      const started = actor
      actor.on('principal-presence', (e) => {
        this.onCrossing(e as PresenceCrossing)
        // A principal with no connection left and no grace window open is forgotten, so a
        // simulator that sees many agents come and go keeps no chart per agent ever seen.
        if (e.kind === 'last-disconnected') {
          queueMicrotask(() => {
            if (this.actors.get(principal) !== started) return
            const snapshot = started.getSnapshot()
            if (snapshot.value === 'absent' && snapshot.context.connections.length === 0) {
              started.stop()
              this.actors.delete(principal)
            }
          })
        }
      })
      actor.on('presence-ignored', (e) => this.onIgnored(`${e.event} of unknown connection ${e.connectionId} (${e.principal})`))
      actor.start()
      this.actors.set(principal, actor)
    }
    return actor
  }
}
