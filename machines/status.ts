/**
 * The link's public state: a small, stable set of names mapped from the connection chart's
 * nested states by one exhaustive function. Hosts switch on these; the chart may grow states
 * without breaking them.
 */

/**
 * A chart state value, as XState writes it (xstate's `StateValue`, restated so this file imports
 * no XState and the package's public types stay free of it). Read-only: on a link the value is
 * frozen and shared by every snapshot of that configuration (src/runtime/chart-runner.ts).
 */
export type ChartStateValue = string | { readonly [region: string]: ChartStateValue | undefined }

/** Every public state of a link, in lifecycle order. */
export const LINK_STATES = [
  'idle',
  'connecting',
  'joining',
  'connected',
  'reconnecting',
  'suspended',
  'stopping',
  'stopped',
  'terminated',
] as const
Object.freeze(LINK_STATES)

/** A public link state: one of {@link LINK_STATES}. */
export type LinkState = (typeof LINK_STATES)[number]

/**
 * Maps a connection chart state value to the public link state. `joining` covers the control
 * channel's first join and its rejoin after a crash (the socket stays up meanwhile);
 * `suspended` is the slow retry past the rapid-disconnect limit: alert on it.
 *
 * @example linkStateOf({ session: { online: 'connecting' } }) // 'connecting'
 * @throws {Error} for a state value the chart cannot produce (a chart/mapping drift, caught by tests).
 */
export function linkStateOf(value: ChartStateValue): LinkState {
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
    if ('reconnecting' in session) return session.reconnecting === 'suspended' ? 'suspended' : 'reconnecting'
    const online = session.online
    if (online === 'connecting') return 'connecting'
    if (online && typeof online === 'object') {
      const attached = online.attached
      if (attached === 'joining') return 'joining'
      if (attached === 'stopping') return 'stopping'
      if (attached && typeof attached === 'object') {
        switch (attached.live) {
          case 'connected':
            return 'connected'
          case 'controlErrored':
          case 'controlRejoining':
            return 'joining'
        }
      }
    }
  }
  throw new Error(`no link state for chart state ${JSON.stringify(value)}`)
}
