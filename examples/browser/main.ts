/**
 * phoenix-link in a browser page: one agent's link to its platform, its state and its last
 * disconnect reason on the page, the messages of one channel listed as they arrive, and buttons
 * to connect and disconnect.
 *
 * Only the main entry (`phoenix-link`) runs in browsers; `phoenix-link/server`, `/metrics` and
 * `/visualizer` are Node-only. Bundle with Vite or esbuild (README.md). Try it against the
 * simulator: `npx phoenix-link serve --port 4000 --agent agent-7:key-7` (it needs prom-client),
 * then open the page with `?url=ws://127.0.0.1:4000/socket&agent=agent-7&key=key-7`.
 */
import { createLink, describeReason, isAgentDisconnectedError } from 'phoenix-link'

const query = new URLSearchParams(location.search)
const url = query.get('url') ?? 'wss://platform.example/socket'
const agentId = query.get('agent') ?? 'agent-7'
const demoKey = query.get('key')

/** An element of index.html, by id. */
function element(id: string): HTMLElement {
  const found = document.getElementById(id)
  if (!found) throw new Error(`index.html has no #${id}`)
  return found
}

const link = createLink({
  url, // ws:// only to loopback; use wss:// for anything else
  agentId,
  // A browser cannot set headers on a WebSocket upgrade, so the key travels as the `api_key`
  // socket param (the default in browsers; said here so nobody wonders).
  apiKeyIn: 'param',
  // Asked before every connection attempt: fetch a short-lived key from your own backend rather
  // than shipping a long-lived one in the page. (The `?key=` shortcut is for the simulator demo.)
  apiKey: async ({ signal }) => {
    if (demoKey) return demoKey
    const response = await fetch('/agent-key', { signal, credentials: 'same-origin' })
    if (!response.ok) throw new Error(`agent key: HTTP ${response.status}`) // a retryable failure of this attempt
    return (await response.text()).trim()
  },
  logger: console, // every line redacted of the key
})

element('agent').textContent = agentId
link.on('state', ({ state }) => {
  element('state').textContent = state // idle, connecting, joining, connected, reconnecting, suspended, stopping, stopped, terminated
})
link.on('disconnected', ({ reason, outcome, nextDelayMs }) => {
  const next = outcome === 'reconnect' ? ` (retrying in ${nextDelayMs} ms)` : outcome === 'terminated' ? ' (for good)' : ''
  element('reason').textContent = `${describeReason(reason)}${next}`
})

// The link retries on its own while the network is away: with backoff and jitter after a drop
// or a normal close, and it rejoins this channel on every new connection. When the browser says
// the network changed: reconnect() retries at once if the link is waiting out a backoff; if it
// still reads connected, ping() checks the socket now (a network change often leaves it
// half-open), and one that does not answer within 5 s is closed and replaced.
addEventListener('online', () => link.reconnect() || void link.ping())
const lobby = link.channel('room:lobby')
lobby.on('new_msg', (payload) => {
  const item = document.createElement('li')
  item.textContent = payload instanceof ArrayBuffer ? `${payload.byteLength} bytes` : JSON.stringify(payload)
  element('messages').append(item)
})

element('connect').addEventListener('click', () => {
  link.connect().catch((error: unknown) => {
    // A terminal reason: superseded (this agent connected elsewhere), rejected (wrong key), or
    // `graceful` when Disconnect was pressed while connecting.
    if (isAgentDisconnectedError(error)) element('reason').textContent = describeReason(error.reason)
    else throw error
  })
})
element('disconnect').addEventListener('click', () => void link.disconnect())
// The link registers no page listener (phoenix.js's own close and reopen the socket behind the
// lifecycle): close the socket when the page goes away (disconnect() never rejects, and has closed
// the socket when the handler returns: a socket still open then keeps the page out of the
// back/forward cache) and connect again when the page comes back from that cache.
addEventListener('pagehide', () => void link.disconnect())
addEventListener('pageshow', (event) => {
  if (event.persisted) link.connect().catch(() => {}) // a terminal reason shows in #reason
})
