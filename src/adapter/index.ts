/** The thin adapter over the official `phoenix` client (see phoenix-adapter.ts). */
export * from './phoenix-adapter.js'
export * from './ws-transport.js'
