/**
 * `inspect` takes @statelyai/inspect's inspector as it is: a link's chart events reach a
 * Stately WebSocket inspector (here a receiving ws server on loopback, where Stately's own
 * inspector server would be), and the API key is in none of them.
 */
import { describe, expect, it } from 'vitest'
import { WebSocket, WebSocketServer } from 'ws'
import { createWebSocketInspector } from '@statelyai/inspect'
import { useWorld } from '../support/wire.js'

const world = useWorld()
const KEY = 'sk-stately-SECRET-key-123'

describe('@statelyai/inspect', () => {
  it("a WebSocket inspector's inspect observer receives the link's actors and snapshots, without the key", async () => {
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0 })
    await new Promise<void>((resolve) => server.once('listening', () => resolve()))
    const received: string[] = []
    let sawStopped!: () => void
    const stoppedSeen = new Promise<void>((resolve) => (sawStopped = resolve))
    server.on('connection', (ws) =>
      ws.on('message', (data) => {
        const text = String(data)
        received.push(text)
        if (text.includes('"@xstate.snapshot"') && text.includes('stopped')) sawStopped()
      }),
    )
    const inspector = createWebSocketInspector({ url: `ws://127.0.0.1:${(server.address() as { port: number }).port}` })
    try {
      const sim = await world().sim({ agents: { 'agent-1': KEY } })
      const link = world().link(sim, { apiKey: KEY, inspect: inspector.inspect })
      await link.connect()
      sim.close({ agent: 'agent-1' }, 1001)
      await new Promise<void>((resolve) => link.once('reconnected', () => resolve()))
      await link.disconnect()
      await stoppedSeen // the inspector sends asynchronously; the snapshot of the stopped link is the last one
      // The inspector defers each event with setTimeout(0) (idleCallback); a timer armed now runs
      // after every one queued before it (Node runs timers of one duration in order), so none is left.
      await new Promise((resolve) => setTimeout(resolve, 0))
      const types = new Set(received.map((m) => (JSON.parse(m) as { type: string }).type))
      expect(types).toContain('@xstate.actor')
      expect(types).toContain('@xstate.snapshot')
      expect(received.join('\n')).toContain('socket.close')
      expect(received.join('\n')).not.toContain(KEY)
    } finally {
      // stop() starts the closing handshake; its socket (and ws's close timer) ends when the server answers.
      const client = (inspector.adapter as unknown as { ws?: WebSocket }).ws
      const closed = client && client.readyState !== WebSocket.CLOSED ? new Promise<void>((resolve) => client.once('close', () => resolve())) : Promise.resolve()
      inspector.stop()
      await closed
      for (const client of server.clients) client.terminate()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  })
})
