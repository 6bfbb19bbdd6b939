/**
 * phoenix-link: keeps an AI agent connected to a Phoenix Channels platform; every lifecycle
 * decision is an XState v5 transition. Start with {@link createLink}.
 *
 * This entry is the client alone and runs in browsers, Web Workers and Node: nothing under
 * src/node/ is reachable from it. The Node-only parts are subpaths: `phoenix-link/server` (the
 * platform simulator), `phoenix-link/metrics` (Prometheus, needs the optional peer `prom-client`),
 * `phoenix-link/visualizer` (trace writer and chart page server) and the `phoenix-link` command.
 */
export { createLink, Link, type LinkOptions, type LinkEvents, type LinkEvent, type ControlHandler } from './link.js'
export { LinkChannel, type ChannelStatus, type MessageHandler, type MessageMeta } from './link-channel.js'
export * from './errors/index.js'
export * from './reasons.js'
export * from './protocol.js'
export { DEFAULT_LINK_POLICY, resolvePolicy, type LinkPolicy, type LinkPolicyInput } from './policy.js'
export { DEFAULT_TRANSPORT_POLICY, type TransportPolicy } from './adapter/transport-policy.js'
export { redact, type Logger } from './logger.js'
export type { Unsubscribe } from './emitter.js'
export { LINK_STATES, type LinkState } from '../machines/status.js'
export { RunSupervisor, type AgentAborted, type AbortOutcome, type RunOptions, type RunSupervisorOptions } from './runs.js'
