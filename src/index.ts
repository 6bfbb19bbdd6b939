/**
 * phoenix-link: keeps an AI agent connected to a Phoenix Channels platform; every lifecycle
 * decision is an XState v5 transition. Start with {@link createLink}.
 */
export { createLink, Link, type LinkOptions, type LinkEvents, type LinkEvent, type ControlHandler } from './link.js'
export { LinkChannel, type ChannelStatus, type MessageHandler, type MessageMeta } from './link-channel.js'
export * from './errors/index.js'
export * from './reasons.js'
export * from './protocol.js'
export { DEFAULT_LINK_POLICY, resolvePolicy, type LinkPolicy, type LinkPolicyInput } from './policy.js'
export { DEFAULT_TRANSPORT_POLICY, type TransportPolicy } from './adapter/phoenix-adapter.js'
export { redact, type Logger } from './logger.js'
export type { Unsubscribe } from './emitter.js'
export { LINK_STATES, type LinkState } from '../machines/status.js'
export { linkMetrics, type LinkMetrics } from './metrics.js'
export { traceLink, traceToFile, type TraceRecord } from './visualize/trace.js'
export { startVisualizer, type VisualizerServer } from './visualize/server.js'
export { RunSupervisor, type AgentAborted, type AbortOutcome, type RunOptions, type RunSupervisorOptions } from './runs.js'
