/**
 * The link's public state: a small, stable set of names mapped from the connection chart's
 * nested states by one exhaustive function. Hosts switch on these; the chart may grow states
 * without breaking them.
 */
import type { StateValue } from 'xstate'

/** Every public state of a link, in lifecycle order. */
export const LINK_STATES = [
  'idle',
  'connecting',
  'joining',
  'connected',
  'reconnecting',
  'stopping',
  'stopped',
  'terminated',
] as const

/** A public link state: one of {@link LINK_STATES}. */
export type LinkState = (typeof LINK_STATES)[number]

/**
 * Maps a connection chart state value to the public link state.
 *
 * @example linkStateOf({ session: { online: 'connecting' } }) // 'connecting'
 * @throws {Error} for a state value the chart cannot produce (a chart/mapping drift, caught by tests).
 */
export function linkStateOf(value: StateValue): LinkState {
  if (typeof value === 'string') {
    switch (value) {
      case 'idle':
      case 'stopped':
      case 'terminated':
        return value
    }
    throw new Error(`no link state for chart state ${JSON.stringify(value)}`)
  }
  const session = value.session
  if (session === 'lost') return 'reconnecting'
  if (session && typeof session === 'object') {
    if ('reconnecting' in session) return 'reconnecting'
    const online = session.online
    if (online === 'connecting') return 'connecting'
    if (online && typeof online === 'object' && typeof online.attached === 'string') {
      switch (online.attached) {
        case 'joining':
          return 'joining'
        case 'connected':
          return 'connected'
        case 'stopping':
          return 'stopping'
      }
    }
  }
  throw new Error(`no link state for chart state ${JSON.stringify(value)}`)
}
