/**
 * linkStateOf, the public state of every chart state value: each value the connection chart can
 * take maps to its link state, and a value it cannot take is an error naming it (a drift between
 * the chart and the mapping), never a guess.
 */
import { describe, expect, it } from 'vitest'
import { linkStateOf } from '../../machines/status.js'

describe('linkStateOf', () => {
  it.each([
    ['idle', 'idle'],
    ['stopped', 'stopped'],
    ['terminated', 'terminated'],
    [{ session: 'lost' }, 'reconnecting'],
    [{ session: { reconnecting: 'waiting' } }, 'reconnecting'],
    [{ session: { reconnecting: 'deciding' } }, 'reconnecting'],
    [{ session: { reconnecting: 'suspended' } }, 'suspended'],
    [{ session: { online: 'connecting' } }, 'connecting'],
    [{ session: { online: { attached: 'joining' } } }, 'joining'],
    [{ session: { online: { attached: 'stopping' } } }, 'stopping'],
    [{ session: { online: { attached: { live: 'connected' } } } }, 'connected'],
    [{ session: { online: { attached: { live: 'controlErrored' } } } }, 'joining'],
    [{ session: { online: { attached: { live: 'controlRejoining' } } } }, 'joining'],
  ] as const)('maps %j to %s', (value, state) => {
    expect(linkStateOf(value as never)).toBe(state)
  })

  it.each([
    'session',
    'connecting',
    { session: 'online' },
    { session: { online: 'attached' } },
    { session: { online: { attached: { live: 'joined' } } } },
    { session: { online: { attached: 'connected' } } },
    { other: 'idle' },
    { session: null },
    { session: { online: null } },
    { session: { online: { attached: null } } },
  ])('refuses %j, naming it', (value) => {
    expect(() => linkStateOf(value as never)).toThrow(new Error(`no link state for chart state ${JSON.stringify(value)}`))
  })
})
