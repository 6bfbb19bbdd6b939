/**
 * What a conformance scenario opens besides its shared peer (links, fault proxies, fresh peers),
 * released after each test, before the leak check runs.
 */
import { afterAll, afterEach, beforeAll } from 'vitest'
import { createLink, type Link, type LinkEvent, type LinkOptions } from '../../src/link.js'
import type { LinkPolicyInput } from '../../src/policy.js'
import { FAST, merge } from '../support/wire.js'
import type { Agent, Peer, PeerFactory } from './peer.js'
import { FaultProxy } from './proxy.js'

/**
 * The wire tests' small delays, with joins given more room: a real server shares this machine's
 * two cores with the rest of the suite.
 */
export const CONFORMANCE_POLICY: LinkPolicyInput = merge(FAST, {
  connection: { connectTimeoutMs: 4_000, joinTimeoutMs: 3_000 },
  channel: { joinTimeoutMs: 2_000 },
})

/**
 * Whether `code`, the close a drain (SIGTERM) gave a socket that had joined a channel on the peer
 * named `peerName`, is real Bandit's own 1000 rather than the 1012 (service restart) of Phoenix's
 * drainer. Bandit's listener shutdown races the drainer, and a socket process that has not yet
 * handled its drain message when Bandit closes its connections gets Bandit's 1000 (seen in loaded
 * CI runs; docs/field-notes.md, "Real Phoenix 1.7.14", close codes). Either is a normal close the
 * link retries; Cowboy waits for the drainer, and the simulator always sends the drainer's 1012.
 */
export function banditClosedFirst(peerName: string, code: number): boolean {
  return peerName === 'bandit' && code === 1000
}

/** One test's links, proxies and fresh peers. */
export class Scene {
  private readonly links: Link[] = []
  private readonly proxies: FaultProxy[] = []
  private readonly peers: Peer[] = []
  readonly events = new Map<Link, LinkEvent[]>()

  /** A link of `agent` to `url` (the peer's own by default), on {@link CONFORMANCE_POLICY} with `options.policy` over it. */
  link(peer: Peer, agent: Agent, options: Partial<LinkOptions> & { policy?: LinkPolicyInput } = {}): Link {
    const link = createLink({ url: peer.url, agentId: agent.id, apiKey: agent.key, ...options, policy: merge(CONFORMANCE_POLICY, options.policy ?? {}) })
    const events: LinkEvent[] = []
    link.onAny((e) => events.push(e))
    this.events.set(link, events)
    this.links.push(link)
    return link
  }

  /** The events `link` emitted of `type`. */
  seen<T extends LinkEvent['type']>(link: Link, type: T): Array<Extract<LinkEvent, { type: T }>> {
    return (this.events.get(link) ?? []).filter((e): e is Extract<LinkEvent, { type: T }> => e.type === type)
  }

  /** A fault proxy in front of `peer`. */
  async proxy(peer: Peer): Promise<FaultProxy> {
    const proxy = await FaultProxy.start(peer.port)
    this.proxies.push(proxy)
    return proxy
  }

  /** A peer of its own, for a scenario that stops or freezes the whole server. */
  async fresh(factory: PeerFactory): Promise<Peer> {
    const peer = await factory.open()
    this.peers.push(peer)
    return peer
  }

  async release(): Promise<void> {
    await Promise.all(this.links.map((l) => l.disconnect()))
    await Promise.all(this.proxies.map((p) => p.close()))
    await Promise.all(this.peers.map((p) => p.close()))
  }
}

/** One peer of `factory` for a describe block: opened before its tests, closed after them. */
export function usePeer(factory: PeerFactory): () => Peer {
  let peer: Peer | undefined
  beforeAll(async () => {
    peer = await factory.open()
  }, 60_000)
  afterAll(async () => {
    await peer?.close()
  }, 30_000)
  return () => {
    if (peer === undefined) throw new Error(`${factory.name}: the peer is not open (usePeer's beforeAll did not run or failed)`)
    return peer
  }
}

/** A {@link Scene} per test, released after it. */
export function useScene(): () => Scene {
  let scene: Scene | null = null
  afterEach(async () => {
    const s = scene
    scene = null
    await s?.release()
  })
  return () => (scene ??= new Scene())
}
