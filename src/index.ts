/**
 * phoenix-link: keeps an AI agent connected to a Phoenix Channels platform; every lifecycle
 * decision is an XState v5 transition. Start with {@link createLink}.
 *
 * This entry is the client alone and runs in browsers, Web Workers and Node: nothing under
 * src/node/ is reachable from it. The Node-only parts are subpaths: `phoenix-link/server` (the
 * platform simulator), `phoenix-link/metrics` (Prometheus, needs the optional peer `prom-client`),
 * `phoenix-link/visualizer` (trace writer and chart page server), `phoenix-link/testing` (the generated
 * lifecycle paths, their runner and the rule oracles) and the `phoenix-link` command;
 * `phoenix-link/machines` holds the pure charts, as browser-safe as this entry.
 */
export {
  createLink,
  Link,
  LINK_EVENT_TYPES,
  DEFAULT_PING_TIMEOUT_MS,
  type PingResult,
  type LinkOptions,
  type LinkEvents,
  type LinkEvent,
  type ControlHandler,
  type AttemptInfo,
  type SupersedeDoubt,
  type Clock,
  type ChartActor,
  type ChartSnapshot,
  type ChartInspectionEvent,
  type InspectListener,
} from './link.js'
export { traceSpans, type TracerLike, type SpanLike, type SpanAttributeValue, type TracedLink } from './tracing.js'
export { LinkChannel, type ChannelStatus, type MessageHandler, type MessageMeta } from './link-channel.js'
export * from './errors/index.js'
export * from './reasons.js'
export * from './protocol.js'
export { DEFAULT_LINK_POLICY, resolvePolicy, type LinkPolicy, type LinkPolicyInput } from './policy.js'
export { DEFAULT_TRANSPORT_POLICY, type TransportPolicy } from './adapter/transport-policy.js'
export { redact, REDACTED, SHORT_KEY, type Logger, type LogMethod } from './logger.js'
export type { Unsubscribe } from './emitter.js'
export { LINK_STATES, type LinkState, type ChartStateValue } from '../machines/status.js'
export type { Env } from '../machines/types.js'
export { RunSupervisor, type AgentAborted, type AbortOutcome, type RunOptions, type RunSupervisorOptions } from './runs.js'
