/**
 * A link's whole policy: one defaults object per concern, each beside the code that uses it,
 * gathered here. createLink() merges the host's partial policy over the defaults and checks
 * every field (strict at configuration). docs/lifecycle.md's policy tables are generated from
 * {@link DEFAULT_LINK_POLICY}.
 */
import { DEFAULT_CHANNEL_POLICY, validateChannelPolicy, type ChannelPolicy } from '../machines/channel-policy.js'
import { DEFAULT_CONNECTION_POLICY, validateConnectionPolicy, type ConnectionPolicy } from '../machines/connection-policy.js'
import { DEFAULT_CONTROL_POLICY, type ControlPolicy } from '../machines/control-policy.js'
import { DEFAULT_RECONNECT_POLICY, validateReconnectPolicy, type ReconnectPolicy } from '../machines/reconnect-policy.js'
import { DEFAULT_TRANSPORT_POLICY, validateTransportPolicy, type TransportPolicy } from './adapter/transport-policy.js'
import { ConfigurationError } from './errors/configuration-error.js'
import { describeArgument } from './call-checks.js'
import { thrownText } from '../machines/types.js'

/** A link's policy, by concern. Milliseconds unless a field says otherwise. */
export interface LinkPolicy {
  /** Session timeouts (machines/connection.ts). */
  connection: ConnectionPolicy
  /** Backoff and give-up (machines/reconnect.ts). */
  reconnect: ReconnectPolicy
  /** App channel join and rejoin (machines/channel.ts). */
  channel: ChannelPolicy
  /** Control signal delivery (machines/control.ts). */
  control: ControlPolicy
  /** Heartbeat, frame limit, close and push timeouts (src/adapter). */
  transport: TransportPolicy
}

/** A partial policy: any field of any concern may be left out. */
export type LinkPolicyInput = { [K in keyof LinkPolicy]?: Partial<LinkPolicy[K]> }

/** Every default, by concern. Frozen, each concern too: changing a default for later links throws a TypeError. */
export const DEFAULT_LINK_POLICY: { readonly [K in keyof LinkPolicy]: Readonly<LinkPolicy[K]> } = {
  connection: DEFAULT_CONNECTION_POLICY,
  reconnect: DEFAULT_RECONNECT_POLICY,
  channel: DEFAULT_CHANNEL_POLICY,
  control: DEFAULT_CONTROL_POLICY,
  transport: DEFAULT_TRANSPORT_POLICY,
}
Object.freeze(DEFAULT_LINK_POLICY)

/**
 * Merges `input` over the defaults and checks every field. The result is frozen, each concern
 * too; a concern with no override is the default object itself, so links on the defaults share
 * one policy (a link's heap holds no copy of it).
 *
 * @throws {ConfigurationError} naming the field for an unknown concern or field, a concern that
 *   is not an object, or a value of the wrong type or out of range; or saying that reading the
 *   policy threw (a getter, a Proxy).
 */
export function resolvePolicy(input: LinkPolicyInput = {}): LinkPolicy {
  try {
    return mergePolicy(input)
  } catch (error) {
    if (error instanceof ConfigurationError) throw error
    throw new ConfigurationError(`reading policy threw: ${thrownText(error)}`, { cause: error })
  }
}

function mergePolicy(input: LinkPolicyInput): LinkPolicy {
  for (const [concern, fields] of Object.entries(input)) {
    const defaults = (DEFAULT_LINK_POLICY as unknown as Record<string, Record<string, unknown>>)[concern]
    if (!defaults) {
      throw new ConfigurationError(`policy.${concern} is not a policy concern; use one of ${Object.keys(DEFAULT_LINK_POLICY).join(', ')}`)
    }
    if (fields === undefined) continue
    if (fields === null || typeof fields !== 'object' || Array.isArray(fields)) {
      throw new ConfigurationError(`policy.${concern} must be an object of ${concern} policy fields, got ${describeArgument(fields)}`)
    }
    for (const field of Object.keys(fields)) {
      if (!(field in defaults)) {
        throw new ConfigurationError(`policy.${concern}.${field} is not a policy field; use one of ${Object.keys(defaults).join(', ')}`)
      }
    }
  }
  const overridden = (concern: keyof LinkPolicy) => Object.keys(input[concern] ?? {}).length > 0
  if (!(Object.keys(DEFAULT_LINK_POLICY) as Array<keyof LinkPolicy>).some(overridden)) return DEFAULTS_RESOLVED
  // The host's own arrays (the reconnect floors' [low, high] ranges) are copied and frozen, so a
  // later change to the array it passed cannot reach the resolved, checked policy.
  const copyOf = (fields: object): object =>
    Object.fromEntries(Object.entries(fields).map(([field, value]) => [field, Array.isArray(value) ? Object.freeze([...value]) : value]))
  const merge = <T extends object>(concern: keyof LinkPolicy, defaults: T): T =>
    overridden(concern) ? Object.freeze({ ...defaults, ...copyOf(input[concern]!) }) : defaults
  const policy: LinkPolicy = {
    connection: merge('connection', DEFAULT_CONNECTION_POLICY),
    reconnect: merge('reconnect', DEFAULT_RECONNECT_POLICY),
    channel: merge('channel', DEFAULT_CHANNEL_POLICY),
    control: merge('control', DEFAULT_CONTROL_POLICY),
    transport: merge('transport', DEFAULT_TRANSPORT_POLICY),
  }
  Object.freeze(policy)
  try {
    validateConnectionPolicy(policy.connection)
    validateReconnectPolicy(policy.reconnect)
    validateChannelPolicy(policy.channel)
    validateTransportPolicy(policy.transport)
    for (const name of ['dedupeWindow', 'maxQueued', 'maxQueuedBytes'] as const) {
      const value = policy.control[name]
      if (!(Number.isInteger(value) && value >= 0)) throw new RangeError(`control.${name} must be a whole number >= 0, got ${value}`)
    }
  } catch (error) {
    throw new ConfigurationError(`invalid policy: ${(error as Error).message}`, { cause: error })
  }
  return policy
}

/** The policy of every link created with no override: the defaults, checked once. */
const DEFAULTS_RESOLVED: LinkPolicy = Object.freeze({ ...DEFAULT_LINK_POLICY }) as LinkPolicy
