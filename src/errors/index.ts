export * from './base.js'
export * from './agent-disconnected.js'
export * from './push-error.js'
export * from './configuration-error.js'
