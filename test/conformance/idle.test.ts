/**
 * Idle past the server's 60 s timeout (Phoenix's default; neither server lets a client change
 * it), on every peer at once so the suite waits the minute only once. A link on the default
 * heartbeat (30 s) stays up through 65 s of silence; a link whose heartbeat is slower than the
 * timeout is closed by the server with its idle code (1002 Bandit, 1000 Cowboy) and reconnects;
 * a raw socket that sends one message in fragments, 17 s apart, for longer than the timeout is
 * kept (any bytes received restart the timeout, not only whole messages).
 */
import { WebSocket } from 'ws'
import { describe, expect, it } from 'vitest'
import type { Link, LinkEvents } from '../../src/link.js'
import { next } from '../support/wire.js'
import { useScene, type Scene } from './harness.js'
import { realPeer, simulatorPeer, type Peer, type PeerFactory } from './peer.js'

const SERVER_IDLE_MS = 60_000
const QUIET_MS = 65_000

/**
 * Resolves once `ms` pass with no `type` event on `link`.
 *
 * @throws {Error} (rejects) as soon as one comes, with it.
 */
function quiet<K extends keyof LinkEvents>(link: Link, type: K, ms: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off()
      resolve()
    }, ms)
    const off = link.on(type, (event) => {
      clearTimeout(timer)
      off()
      reject(new Error(`expected no ${String(type)} event for ${ms} ms, got ${JSON.stringify(event)}`))
    })
  })
}

/** The first fragment of a heartbeat, its continuations (JSON whitespace), and its last. */
const HEARTBEAT_FRAGMENTS = ['["1","1","phoenix","heartbeat"', ' ', ' ', ' ', ',{}]']
const FRAGMENT_GAP_MS = 17_000

/**
 * Sends one heartbeat as {@link HEARTBEAT_FRAGMENTS}, {@link FRAGMENT_GAP_MS} apart (the whole
 * message takes 68 s, past the server's idle timeout), on a raw socket of a fresh agent.
 *
 * @returns the heartbeat's reply frame and the socket's close code (null: still open when the
 *   reply came); rejects if the socket ends first.
 */
async function slowHeartbeat(peer: Peer): Promise<{ reply: unknown; closedWith: number | null }> {
  const agent = peer.agent()
  const ws = new WebSocket(`${peer.url}/websocket?agent_id=${agent.id}&api_key=${agent.key}&vsn=2.0.0`)
  let closedWith: number | null = null
  let timer: NodeJS.Timeout | undefined
  try {
    await new Promise((resolve, reject) => {
      ws.once('open', resolve)
      ws.once('error', reject)
    })
    const reply = await new Promise((resolve, reject) => {
      ws.on('message', (data: Buffer) => resolve(JSON.parse(data.toString())))
      ws.once('close', (code) => {
        closedWith = code
        reject(new Error(`closed ${code} before the last fragment's reply`))
      })
      let i = 0
      const sendNext = () => {
        const fin = i === HEARTBEAT_FRAGMENTS.length - 1
        ws.send(HEARTBEAT_FRAGMENTS[i++]!, { fin })
        if (!fin) timer = setTimeout(sendNext, FRAGMENT_GAP_MS)
      }
      sendNext()
    })
    return { reply, closedWith }
  } finally {
    clearTimeout(timer)
    if (ws.readyState !== WebSocket.CLOSED) {
      const ended = new Promise((resolve) => ws.once('close', resolve))
      ws.terminate()
      await ended
    }
  }
}

async function idleOn(scene: Scene, factory: PeerFactory): Promise<void> {
  const peer = await scene.fresh(factory)
  const held = peer.agent()
  const slow = peer.agent()
  const fragments = slowHeartbeat(peer)
  fragments.catch(() => {}) // awaited below; a failure before then must not go unhandled
  const heldLink = scene.link(peer, held, { policy: { transport: { heartbeatIntervalMs: 30_000 } } })
  const slowLink = scene.link(peer, slow, { policy: { transport: { heartbeatIntervalMs: 90_000 } } })
  // Taken before the connects: the server's idle clock starts at the last frame it read (the
  // control join), which cannot come before this, so the close comes at least SERVER_IDLE_MS
  // later whatever else holds up this process between the join and the next line.
  const started = performance.now()
  await Promise.all([heldLink.connect(), slowLink.connect()])
  const [heldSocket] = await peer.live(held)
  const closed = next(slowLink, 'disconnected', { timeoutMs: SERVER_IDLE_MS + 10_000 })
  const back = next(slowLink, 'reconnected', { timeoutMs: SERVER_IDLE_MS + 12_000 })
  await Promise.all([
    quiet(heldLink, 'disconnected', QUIET_MS),
    (async () => {
      const { reason, outcome } = await closed
      expect(performance.now() - started).toBeGreaterThanOrEqual(SERVER_IDLE_MS - 1_000)
      expect(reason).toMatchObject({ kind: 'closed', closeCode: peer.flavor.idle, closeReason: '' })
      expect(outcome).toBe('reconnect')
      await back
    })(),
  ])
  expect(heldLink.state).toBe('connected')
  expect(await fragments).toEqual({ reply: [null, '1', 'phoenix', 'phx_reply', { response: {}, status: 'ok' }], closedWith: null })
  expect(await peer.live(held)).toEqual([heldSocket])
  expect((await peer.upgrades(held)).map((u) => u.status)).toEqual([101])
  expect((await peer.upgrades(slow)).map((u) => u.status)).toEqual([101, 101])
}

const factories = [simulatorPeer('bandit'), simulatorPeer('cowboy'), realPeer('bandit'), realPeer('cowboy')].filter((f) => f.unavailable === null)

describe("idle past the server's 60 s timeout", () => {
  const scene = useScene()
  it(`on ${factories.map((f) => f.name).join(', ')} at once: heartbeats hold an idle link; a slower heartbeat is closed with the server's idle code and reconnects`, async () => {
    const results = await Promise.allSettled(factories.map((f) => idleOn(scene(), f)))
    const failed = results.flatMap((r, i) => (r.status === 'rejected' ? [`${factories[i]!.name}: ${String(r.reason)}`] : []))
    expect(failed).toEqual([])
  }, 150_000)
})
