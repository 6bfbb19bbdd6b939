/**
 * phoenix-link/server: the platform simulator, a Phoenix V2 protocol server for tests and demos.
 * Start it with {@link startSimulator}; script it with its named controls.
 */
export * from './simulator.js'
export * from './connection.js'
export * from './flavors.js'
export type { RequestParser } from './request-limits.js'
export { negotiateSerializer, type SerializerVersion } from './serializers.js'
export * from './presence.js'
export * from './metrics.js'
export * from './admin.js'
export * from './control-api.js'
export * from '../../runs.js'
