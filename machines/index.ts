/**
 * phoenix-link/machines: the lifecycle statecharts, pure XState v5 machines with every action,
 * guard and delay named in setup(). No chart invokes or spawns an actor: what a chart does
 * outside itself is a named I/O action (`openTransport`, `tellReconnect`, `report`, ...), a no-op
 * unless given an implementation. Open them in Stately, walk them with xstate/graph, or run one
 * on XState's own actor with your I/O via `machine.provide({ actions })`.
 */
export * from './types.js'
export * from './reconnect.js'
export * from './channel.js'
export * from './control.js'
export * from './connection.js'
export * from './status.js'
export * from './presence.js'
