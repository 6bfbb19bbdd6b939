/**
 * An agent on the official `phoenix` client with its defaults, for `phoenix-link conform`: one
 * socket (the API key as the `api_key` param), the control channel joined, a disconnect on
 * SIGTERM. Nothing about supersede, refusals or Retry-After: the client decides with its own
 * defaults (reconnectAfterMs, rejoinAfterMs), which is what conform judges.
 *
 * Run: `npx phoenix-link conform -- node examples/conform/phoenix-js-agent.mjs`
 * (dependencies: phoenix, ws).
 */
import { Socket } from 'phoenix'
import WebSocket from 'ws'

const socket = new Socket(process.env.PHOENIX_LINK_URL, {
  transport: WebSocket,
  params: { agent_id: process.env.PHOENIX_LINK_AGENT_ID, api_key: process.env.PHOENIX_LINK_API_KEY },
})
socket.connect()
const control = socket.channel(process.env.PHOENIX_LINK_CONTROL_TOPIC, {})
control.on('agent.control', (payload) => console.log('control', JSON.stringify(payload)))
control.join().receive('ok', () => console.log('joined')).receive('error', (e) => console.log('join refused', JSON.stringify(e)))

process.once('SIGTERM', () => socket.disconnect(() => process.exit(0), 1000))
