/**
 * phoenix-link/machines: the lifecycle statecharts, pure XState v5 machines with every action,
 * guard and delay named in setup(). Open them in Stately, walk them with xstate/graph, or run
 * them with your own adapter via `machine.provide()`.
 */
export * from './types.js'
export * from './reconnect.js'
export * from './channel.js'
export * from './control.js'
export * from './connection.js'
export * from './status.js'
export * from './presence.js'
