/**
 * Idle past the server's 60 s timeout (Phoenix's default; neither server lets a client change
 * it), on every peer at once so the suite waits the minute only once. A link on the default
 * heartbeat (30 s) stays up through 65 s of silence; a link whose heartbeat is slower than the
 * timeout is closed by the server with its idle code (1002 Bandit, 1000 Cowboy) and reconnects.
 */
import { describe, expect, it } from 'vitest'
import type { Link, LinkEvents } from '../../src/link.js'
import { next } from '../support/wire.js'
import { useScene, type Scene } from './harness.js'
import { realPeer, simulatorPeer, type PeerFactory } from './peer.js'

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

async function idleOn(scene: Scene, factory: PeerFactory): Promise<void> {
  const peer = await scene.fresh(factory)
  const held = peer.agent()
  const slow = peer.agent()
  const heldLink = scene.link(peer, held, { policy: { transport: { heartbeatIntervalMs: 30_000 } } })
  const slowLink = scene.link(peer, slow, { policy: { transport: { heartbeatIntervalMs: 90_000 } } })
  await Promise.all([heldLink.connect(), slowLink.connect()])
  const [heldSocket] = await peer.live(held)
  const started = performance.now()
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
  }, 120_000)
})
