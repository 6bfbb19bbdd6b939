/**
 * The presence statechart: one principal's live connections, and the two boundary crossings a
 * platform acts on. It emits `principal-presence` only when the count crosses zero:
 * `first-connected` (0 -> 1) and `last-disconnected` (N -> 0, with the typed reason of the close
 * that ended it). Events come after the count changes, in count order. Every crossing is an event
 * (no debounce) unless a grace window is set: then a last close waits `graceWindow` and a new
 * connection within it cancels both the last-disconnected and the next first-connected.
 *
 *   absent --opened--> present --closed (last) [no grace]--> absent
 *                              --closed (last) [grace]----> grace --after graceWindow--> absent
 *                                                            grace --opened--> present (no event)
 */
import { assertEvent, assign, emit, setup } from 'xstate'
import type { ReasonLike } from './types.js'
import { DEFAULT_PRESENCE_POLICY, type PresencePolicy, type PrincipalPresence } from './presence-policy.js'

export { DEFAULT_PRESENCE_POLICY, validatePresencePolicy, type PresencePolicy } from './presence-policy.js'

/** Events of the presence chart; sent by the server that tracks the principal's sockets. */
export type PresenceEvent =
  /** A connection of the principal was accepted. */
  | { type: 'presence.opened'; connectionId: string; at: number }
  /** A connection of the principal closed, with the typed reason the server classified. */
  | { type: 'presence.closed'; connectionId: string; reason: ReasonLike; at: number }
  /** The server stops: a grace window still open ends now, reporting last-disconnected. */
  | { type: 'presence.flush' }

export type { PrincipalPresence } from './presence-policy.js'

/** Something the chart ignored: a close of a connection it does not know, an open it already counted. */
export interface PresenceIgnored {
  type: 'presence-ignored'
  principal: string
  event: string
  connectionId: string
}

/** Input of the presence chart. */
export interface PresenceInput {
  principal: string
  policy?: PresencePolicy
}

/** Context of the presence chart. */
export interface PresenceContext {
  principal: string
  policy: PresencePolicy
  /** Ids of the live connections, in the order they opened. */
  connections: string[]
  /** The close that last took the count to zero (read when last-disconnected is reported), or null before any and after a reconnect within the grace window. */
  lastClose: { reason: ReasonLike; at: number } | null
}

/** The presence statechart. Pure: the grace window is a named delay. */
export const presenceMachine = setup({
  types: {
    context: {} as PresenceContext,
    events: {} as PresenceEvent,
    input: {} as PresenceInput,
    emitted: {} as PrincipalPresence | PresenceIgnored,
  },
  guards: {
    /** The event is about a connection this chart counts. */
    isKnown: ({ context, event }) => 'connectionId' in event && context.connections.includes(event.connectionId),
    /** The closing connection is the last one. */
    isLast: ({ context, event }) => 'connectionId' in event && context.connections.length === 1 && context.connections[0] === event.connectionId,
    hasGraceWindow: ({ context }) => context.policy.graceWindowMs > 0,
  },
  actions: {
    add: assign({ connections: ({ context, event }) => ('connectionId' in event ? [...context.connections, event.connectionId] : context.connections) }),
    remove: assign({ connections: ({ context, event }) => ('connectionId' in event ? context.connections.filter((id) => id !== event.connectionId) : context.connections) }),
    rememberClose: assign({
      lastClose: ({ event }) => {
        assertEvent(event, 'presence.closed')
        return { reason: event.reason, at: event.at }
      },
    }),
    forgetClose: assign({ lastClose: null }),
    reportFirst: emit(({ context, event }) => ({
      type: 'principal-presence' as const,
      principal: context.principal,
      kind: 'first-connected' as const,
      count: context.connections.length,
      reason: null,
      at: 'at' in event ? event.at : 0,
    })),
    // Reached only through decidingLast, entered by the close that took the count to zero, whose
    // rememberClose set lastClose; forgetClose clears it only on the way back to present.
    reportLast: emit(({ context }) => ({
      type: 'principal-presence' as const,
      principal: context.principal,
      kind: 'last-disconnected' as const,
      count: 0,
      reason: context.lastClose!.reason,
      at: context.lastClose!.at,
    })),
    reportIgnored: emit(({ context, event }) => {
      assertEvent(event, ['presence.opened', 'presence.closed'])
      return { type: 'presence-ignored' as const, principal: context.principal, event: event.type, connectionId: event.connectionId }
    }),
  },
  delays: {
    graceWindow: ({ context }) => context.policy.graceWindowMs,
  },
}).createMachine({
  id: 'presence',
  context: ({ input }) => ({
    principal: input.principal,
    policy: input.policy ?? DEFAULT_PRESENCE_POLICY,
    connections: [],
    lastClose: null,
  }),
  initial: 'absent',
  on: {
    // A close of a connection the chart does not count, or a second open of one it does: reported, never counted.
    'presence.closed': { actions: 'reportIgnored' },
    'presence.opened': { guard: 'isKnown', actions: 'reportIgnored' },
    // Outside a grace window there is nothing to end early.
    'presence.flush': {},
  },
  states: {
    /** No live connection. */
    absent: {
      description: 'The principal has no live connection.',
      on: { 'presence.opened': { target: 'present', actions: ['add', 'reportFirst'] } },
    },
    /** One or more live connections. */
    present: {
      description: 'The principal has one or more live connections.',
      on: {
        'presence.opened': [{ guard: 'isKnown', actions: 'reportIgnored' }, { actions: 'add' }],
        'presence.closed': [
          { guard: 'isLast', target: 'decidingLast', actions: ['remove', 'rememberClose'] },
          { guard: 'isKnown', actions: 'remove' },
          { actions: 'reportIgnored' },
        ],
      },
    },
    /** Transient: the count just reached zero. */
    decidingLast: {
      description: 'Transient: the last connection closed; report now, or wait the grace window.',
      always: [{ guard: 'hasGraceWindow', target: 'grace' }, { target: 'absent', actions: 'reportLast' }],
    },
    /** The last connection closed; a new one within the grace window hides the blip. */
    grace: {
      description: 'The last connection closed; a new one within the grace window reports nothing.',
      on: {
        'presence.opened': { target: 'present', actions: ['add', 'forgetClose'] },
        // The server is stopping: nothing can reconnect within the window any more.
        'presence.flush': { target: 'absent', actions: 'reportLast' },
      },
      after: { graceWindow: { target: 'absent', actions: 'reportLast' } },
    },
  },
})
