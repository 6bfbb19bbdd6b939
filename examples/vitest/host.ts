/**
 * A small agent host, written with the README's API only: a link with a control handler, one app
 * channel, and the host's own view of whether it is online (what it would show on a status page
 * or put in an alert). examples/vitest/lifecycle.test.ts runs every generated lifecycle path
 * against it.
 */
import { createLink, type LinkOptions, type DisconnectReason, type Link } from 'phoenix-link'

/** The host: its link, what it has seen, and how to stop it. */
export interface AgentHost {
  link: Link
  /** True exactly while the link is connected. */
  online: boolean
  /** The reason of the last terminal disconnect (what the host would alert on), or null. */
  terminal: DisconnectReason | null
  /** Correlation ids of the control signals the host handled, in order. */
  handled: Array<string | null>
  stop(): Promise<void>
}

/** Builds the host over `options` (url, agentId, apiKey and what a test kit adds). */
export function createAgentHost(options: Pick<LinkOptions, 'url' | 'agentId' | 'apiKey'> & Partial<LinkOptions>): AgentHost {
  const host: AgentHost = {
    link: createLink({
      ...options,
      onControl: async (signal) => {
        host.handled.push(signal.correlationId)
      },
    }),
    online: false,
    terminal: null,
    handled: [],
    async stop() {
      off.forEach((remove) => remove())
      await host.link.disconnect()
    },
  }
  host.link.channel('room:lobby')
  const off = [
    // Online from the state itself, not from connected/disconnected events: a control channel
    // crash takes the link to `joining` on the same socket with no disconnect.
    host.link.on('state', ({ state }) => {
      host.online = state === 'connected'
      if (state !== 'terminated') host.terminal = null
    }),
    host.link.on('disconnected', (event) => {
      if (event.terminal) host.terminal = event.reason
    }),
  ]
  return host
}
