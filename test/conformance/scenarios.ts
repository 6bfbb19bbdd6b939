/**
 * The lifecycle scenarios, written once against {@link Peer} and run on every peer: the
 * simulator and the reference peer (real Phoenix on Bandit and on Cowboy). Each asserts what the
 * host sees (state, reason kind and cause, events) and what the server saw (upgrades, live
 * sockets, joins). Numbers in titles are ../shared/SCENARIOS.md's.
 */
import { beforeAll, describe, expect, it } from 'vitest'
import { AgentDisconnectedError } from '../../src/errors/agent-disconnected.js'
import { chartOf, waitForChart } from '../../src/chart-of.js'
import type { Link } from '../../src/link.js'
import type { LinkChannel, ChannelStatus } from '../../src/link-channel.js'
import { CONTROL_EVENT, SUPERSEDE_EVENT, controlTopic } from '../../src/protocol.js'
import type { DisconnectReason } from '../../src/reasons.js'
import { FAST, gatedControl, next, OWN_SUPERSEDE_IGNORED, settle, untilState } from '../support/wire.js'
import { banditClosedFirst, usePeer, useScene } from './harness.js'
import type { Agent, Peer, PeerFactory } from './peer.js'

/** Resolves once `channel` reaches `status` (now or later). */
function channelStatus(channel: LinkChannel, status: ChannelStatus, timeoutMs = 6000): Promise<void> {
  if (channel.status === status) return Promise.resolve()
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off()
      reject(new Error(`timed out after ${timeoutMs} ms waiting for ${channel.topic} to be ${status} (it is ${channel.status})`))
    }, timeoutMs)
    const off = channel.onStatus((s) => {
      if (s !== status) return
      clearTimeout(timer)
      off()
      resolve()
    })
  })
}

/** The reason a settled `runForever()`/`connect()` rejected with. */
function reasonOf(result: { ok: true } | { ok: false; error: unknown }): DisconnectReason {
  if (result.ok) throw new Error('expected the wait to reject with AgentDisconnectedError, it resolved')
  expect(result.error).toBeInstanceOf(AgentDisconnectedError)
  return (result.error as AgentDisconnectedError).reason
}

/** The statuses the server answered `agent`, in the order the requests arrived (a real peer's upgrades() waits until each is logged). */
async function statuses(peer: Peer, agent: Agent): Promise<number[]> {
  return (await peer.upgrades(agent)).map((u) => u.status)
}

/**
 * The statuses the server answered `agent`, 409s left out, after checking that any 409 met a probe.
 * A reconnect soon after a close the link cannot tell from a supersede's (a "disconnect" within
 * unseenSupersedeWindowMs of the control join, a reset within resetAfterSendMs of it) probes with
 * on_conflict=reject, and the server refuses it 409 while it still holds the closed socket (its
 * transport process has not exited yet); the link retries within conflictRetryWindowMs.
 */
async function acceptedStatuses(peer: Peer, agent: Agent): Promise<number[]> {
  const seen = await statuses(peer, agent)
  if (seen.includes(409)) expect(await peer.acceptedConflictModes(agent)).toContain('reject')
  // The old socket's process exits within milliseconds: a few retries at most, never a hot loop.
  expect(seen.filter((status) => status === 409).length).toBeLessThanOrEqual(MAX_PROBE_CONFLICTS)
  return seen.filter((status) => status !== 409)
}

/** How many 409s a probe may meet before the closed socket's process has exited (see acceptedStatuses). */
const MAX_PROBE_CONFLICTS = 5

/** Waits until the server holds exactly one live socket of `agent`, and it is not `gone` (a socket replaced). */
function untilOnlyNewerLive(peer: Peer, agent: Agent, gone: string | undefined, what: string): Promise<void> {
  return peer.until(async () => {
    const live = await peer.live(agent)
    return live.length === 1 && live[0] !== gone
  }, what)
}

/** Registers the scenario suite for one peer. */
export function conformance(factory: PeerFactory): void {
  describe.skipIf(factory.unavailable !== null)(`lifecycle on ${factory.name}`, () => {
    const scene = useScene()
    const peerOf = usePeer(factory)
    let peer: Peer
    beforeAll(() => {
      peer = peerOf()
    })

    async function connected(options: Parameters<ReturnType<typeof scene>['link']>[2] = {}): Promise<{ agent: Agent; link: Link; socket: string }> {
      const agent = peer.agent()
      const link = scene().link(peer, agent, options)
      await link.connect()
      const [socket] = await peer.live(agent)
      return { agent, link, socket: socket! }
    }

    describe('normal closes reconnect', () => {
      it('the "disconnect" broadcast closes with the server\'s code; the link reconnects and rejoins every channel (scenarios 1, 2)', async () => {
        const { agent, link, socket } = await connected()
        const room = link.channel(`room:${agent.id}`)
        await channelStatus(room, 'joined')
        const lost = next(link, 'disconnected')
        const back = next(link, 'reconnected')
        await peer.disconnect(agent)
        const { reason, outcome } = await lost
        expect(reason).toMatchObject({ kind: 'closed', closeCode: peer.flavor.disconnect, closeReason: '', retryable: true })
        expect(outcome).toBe('reconnect')
        await back
        await channelStatus(room, 'joined')
        expect(link.state).toBe('connected')
        await untilOnlyNewerLive(peer, agent, socket, 'exactly one live socket, a new one')
        expect(await acceptedStatuses(peer, agent)).toEqual([101, 101])
        const control = await peer.joins(agent, controlTopic(agent.id))
        const rooms = await peer.joins(agent, room.topic)
        expect(control.map((j) => j.socket)).toEqual([socket, (await peer.live(agent))[0]])
        expect(rooms).toHaveLength(2)
        expect(rooms[0]!.joinRef).not.toBe(rooms[1]!.joinRef)
      })

      it('a drop with no close frame (the network cut) is `dropped` and reconnects (scenario 3)', async () => {
        const agent = peer.agent()
        const proxy = await scene().proxy(peer)
        const link = scene().link(peer, agent, { url: proxy.url })
        await link.connect()
        const [socket] = await peer.live(agent)
        const lost = next(link, 'disconnected')
        const back = next(link, 'reconnected')
        proxy.cut()
        expect((await lost).reason).toMatchObject({ kind: 'dropped', source: 'socket', retryable: true })
        await back
        await untilOnlyNewerLive(peer, agent, socket, 'the cut socket gone and one new socket live')
        // A reset within resetAfterSendMs of the control join makes the reconnect a probe, which
        // meets the cut socket 409 if the server has not yet seen the reset.
        expect(await acceptedStatuses(peer, agent)).toEqual([101, 101])
        expect(proxy.accepted).toBe((await statuses(peer, agent)).length)
      })

      it('disconnect() leaves and closes; the server saw exactly one connection and no reconnect (scenario 5)', async () => {
        const { agent, link } = await connected()
        await link.disconnect()
        expect(link.state).toBe('stopped')
        expect(link.lastDisconnectReason).toMatchObject({ kind: 'graceful' })
        await peer.until(async () => (await peer.live(agent)).length === 0, 'no live socket')
        expect(await statuses(peer, agent)).toEqual([101])
      })
    })

    describe('a server that accepts and closes', () => {
      it('each socket closed just after it joined: `suspended` at the rapid limit, one attempt per cooldown, and connected again once the server holds the socket (scenario 6)', async () => {
        const rapidLimit = 4
        const agent = peer.agent()
        const link = scene().link(peer, agent, {
          policy: { reconnect: { rapidLimit, rapidWindowMs: 5_000, suspendInitialDelayMs: 300, suspendMaxDelayMs: 600 } },
        })
        await link.connect()
        // The server closes each socket as soon as its control channel joined: `rapidLimit` in a
        // row, every one accepted and closed by the server within the rapid window.
        for (let k = 1; k <= rapidLimit; k++) {
          const lost = next(link, 'disconnected')
          const back = k < rapidLimit ? next(link, 'reconnected') : null
          await peer.disconnect(agent)
          const { reason, outcome } = await lost
          if (k < rapidLimit) {
            expect(reason).toMatchObject({ kind: 'closed', closeCode: peer.flavor.disconnect, retryable: true })
            expect(outcome).toBe('reconnect')
            await back
          } else {
            expect(reason).toMatchObject({ kind: 'suppressed', cause: 'rapid-disconnects', retryable: true })
            expect(outcome).toBe('reconnect')
          }
        }
        expect(link.state).toBe('suspended')
        const [suppressed] = scene().seen(link, 'disconnected').filter((d) => d.reason.kind === 'suppressed')
        expect(suppressed!.nextDelayMs).toBeGreaterThanOrEqual(150)
        expect(suppressed!.nextDelayMs).toBeLessThanOrEqual(300)
        // The server now holds the socket: the attempt after the cooldown stays connected.
        await next(link, 'reconnected', { timeoutMs: 10_000 })
        expect(link.state).toBe('connected')
        await peer.until(async () => (await peer.live(agent)).length === 1, 'one live socket after the cooldown')
        // The first connect and one upgrade per loss, the last after the cooldown: the gap between
        // the last rapid upgrade and it holds a join, a close and the whole cooldown.
        await acceptedStatuses(peer, agent)
        const upgrades = (await peer.upgrades(agent)).filter((u) => u.status !== 409)
        expect(upgrades.map((u) => u.status)).toEqual(Array.from({ length: rapidLimit + 1 }, () => 101))
        expect(upgrades[rapidLimit]!.at - upgrades[rapidLimit - 1]!.at).toBeGreaterThanOrEqual(suppressed!.nextDelayMs! - 5)
      })
    })

    describe('a drain', () => {
      it('SIGTERM closes every socket with 1012; the link waits at least the 1012 floor and reconnects to the restarted server (scenario 2)', async () => {
        const own = await scene().fresh(factory)
        const agent = own.agent()
        const link = scene().link(own, agent)
        await link.connect()
        const lost = next(link, 'disconnected')
        const back = next(link, 'reconnected', { timeoutMs: 20_000 })
        await own.drain()
        const { reason, nextDelayMs, outcome } = await lost
        const banditFirst = reason.kind === 'closed' && banditClosedFirst(factory.name, reason.closeCode)
        expect(reason).toMatchObject({ kind: 'closed', closeCode: banditFirst ? 1000 : 1012, closeReason: '' })
        expect(outcome).toBe('reconnect')
        if (!banditFirst) expect(nextDelayMs).toBeGreaterThanOrEqual(FAST.reconnect!.serviceRestartFloorMs![0])
        await back
        expect(link.state).toBe('connected')
        await own.until(async () => (await own.live(agent)).length === 1, 'one live socket after the restart')
      }, 40_000)
    })

    describe('supersede is terminal', () => {
      it('a newer link of the same agent supersedes the older for good; the server keeps exactly the newer socket (scenarios 9, 13)', async () => {
        const { agent, link: older, socket: olderSocket } = await connected()
        const ended = settle(older.runForever())
        const newer = scene().link(peer, agent)
        await newer.connect()
        const reason = reasonOf(await ended)
        expect(reason).toMatchObject({ kind: 'superseded', retryable: false, targetSocketId: olderSocket })
        expect(older.state).toBe('terminated')
        await untilOnlyNewerLive(peer, agent, olderSocket, 'only the newer socket live')
        // The newer link still works after the older one ended (a round trip on a channel).
        const room = newer.channel(`room:${agent.id}`)
        expect(await room.push('ping', { n: 1 })).toEqual({ echo: { n: 1 }, event: 'ping' })
        expect(newer.state).toBe('connected')
        expect(await statuses(peer, agent)).toEqual([101, 101])
        await older.disconnect()
        expect(older.state).toBe('terminated')
        expect(await statuses(peer, agent)).toEqual([101, 101])
      })

      it('a newer link connects while the older is pushing hard (40 pushes of 60 KB each turn): Phoenix closes the older connection with those pushes unread, a TCP reset that can discard the supersede push before the link reads it; the older then reads a reset (`dropped`, `reset: true`) and probes. Either way it ends `superseded` and the newer keeps the key (scenarios 9, 13)', async () => {
        const policy = { connection: { conflictRetryWindowMs: 300 }, reconnect: { initialDelayMs: 100, maxDelayMs: 100 } }
        const { agent, link: older, socket: olderSocket } = await connected({ policy })
        const room = older.channel(`room:${agent.id}`)
        await channelStatus(room, 'joined')
        const ended = settle(older.runForever())
        const blob = 'x'.repeat(60_000)
        let pumping = true
        const pump = (async () => {
          while (pumping) {
            for (let i = 0; i < 40; i++) room.push('load', { blob }, { timeoutMs: 5_000 }).catch(() => {})
            await new Promise((resolve) => setImmediate(resolve))
          }
        })()
        const newer = scene().link(peer, agent)
        try {
          await newer.connect()
          expect(reasonOf(await ended)).toMatchObject({ kind: 'superseded', retryable: false })
        } finally {
          pumping = false
          await pump
        }
        expect(older.state).toBe('terminated')
        expect(newer.state).toBe('connected')
        await untilOnlyNewerLive(peer, agent, olderSocket, 'only the newer socket live')
        // The older never connected again: a reset made its next upgrades probes, refused 409.
        expect(await peer.acceptedConflictModes(agent)).toEqual([null, null])
        // Its first loss is the end (the push read) or the reset, after which every upgrade probed.
        const [first] = scene().seen(older, 'disconnected')
        if (!first!.terminal) expect(first, `a loss before the end is a reset, probed: ${JSON.stringify(first)}`).toMatchObject({ conflictProbe: true, reason: { kind: 'dropped', reset: true } })
      })

      it('a supersede pushed to the only link ends it `superseded`, with no reconnect (scenarios 9, 14)', async () => {
        const { agent, link, socket } = await connected()
        const ended = settle(link.runForever())
        await peer.supersede(agent)
        expect(reasonOf(await ended)).toMatchObject({ kind: 'superseded', cause: 'session.already_connected', targetSocketId: socket })
        await peer.until(async () => (await peer.live(agent)).length === 0, 'no live socket')
        expect((await link.disconnect(), link.state)).toBe('terminated')
        expect(await statuses(peer, agent)).toEqual([101])
      })
      it('a supersede pushed with no close behind it: the link closes the socket itself and ends `superseded`, odd payload fields kept raw; no new upgrade (scenarios 10, 16)', async () => {
        const { agent, link, socket } = await connected()
        const ended = settle(link.runForever())
        // The platform's own supersede is a push then the "disconnect"; this one is the push alone,
        // with a numeric-text retry_after, a null correlation_id, a reason no table lists and extra fields.
        const payload = { reason: 'session.moved', retry_after: '7', correlation_id: null, target_socket_id: socket, region: 'eu-west', extra: { n: 1 } }
        expect(await peer.push(agent, controlTopic(agent.id), SUPERSEDE_EVENT, payload)).toBe(1)
        expect(reasonOf(await ended)).toMatchObject({
          kind: 'superseded',
          retryable: false,
          cause: 'session.moved',
          retryAfterMs: 7000,
          correlationId: null,
          targetSocketId: socket,
          raw: payload,
        })
        expect(link.state).toBe('terminated')
        // Nothing on the server closed it: the link did.
        await peer.until(async () => (await peer.live(agent)).length === 0, 'the superseded socket closed by the link')
        expect(scene().seen(link, 'disconnected').map((d) => [d.reason.kind, d.outcome])).toEqual([['superseded', 'terminated']])
        expect(await statuses(peer, agent)).toEqual([101])
      })
    })

    describe('what the link reads on a socket it gave up', () => {
      // The uplink stalls: the heartbeat times out and the link ends the socket, whose close never
      // reaches the server; the server's frames still reach the link until that close completes.
      const stalling = { transport: { heartbeatIntervalMs: 200, closeTimeoutMs: 5_000 } }
      const longBackoff = { ...stalling, reconnect: { initialDelayMs: 5_000, maxDelayMs: 5_000 } }
      /**
       * The server saw the link's first and second upgrades accepted, then its probe (on_conflict=reject)
       * accepted, and only the third socket is live. A probe may meet the second socket still held by
       * the server (it has not seen its reset yet): 409, retried within the window.
       */
      const probeAccepted = async (agent: Agent, first: string) => {
        await untilOnlyNewerLive(peer, agent, first, 'only the third socket live')
        const seen = await statuses(peer, agent)
        expect([...seen.slice(0, 2), seen.at(-1)]).toEqual([101, 101, 101])
        expect(seen.slice(2, -1).every((status) => status === 409)).toBe(true)
        expect(await peer.acceptedConflictModes(agent)).toEqual([null, null, 'reject'])
      }
      /**
       * The older link never evicted the newer instance: only the newer socket is live and
       * connected, and the server saw the older link's upgrades `before` (its accepted sockets,
       * then any answer that left the cause unknown), then only its probes (on_conflict=reject),
       * at least one, each refused 409.
       */
      const probesRefused = async (agent: Agent, older: string | undefined, newer: Link, before: number[]) => {
        await untilOnlyNewerLive(peer, agent, older, 'only the newer socket live')
        expect(newer.state).toBe('connected')
        const seen = await statuses(peer, agent)
        expect(seen.slice(0, before.length)).toEqual(before)
        expect(seen.slice(before.length).length).toBeGreaterThanOrEqual(1)
        expect(seen.slice(before.length).every((status) => status === 409)).toBe(true)
        expect(await peer.acceptedConflictModes(agent)).toEqual([null, null])
      }
      /** A fresh agent's link through a relay of its own, connected; `first` is its socket's id on the server. */
      const relayed = async (options: Parameters<ReturnType<typeof scene>['link']>[2]) => {
        const agent = peer.agent()
        const proxy = await scene().proxy(peer)
        const link = scene().link(peer, agent, { url: proxy.url, ...options })
        await link.connect()
        const [first] = await peer.live(agent)
        return { agent, proxy, link, first: first! }
      }

      it('a supersede read during the backoff (another instance connected) ends the link `superseded`: no reconnect, the newer instance keeps the key', async () => {
        const agent = peer.agent()
        const proxy = await scene().proxy(peer)
        const older = scene().link(peer, agent, { url: proxy.url, policy: longBackoff, env: { random: () => 0.99 } })
        await older.connect()
        const [olderSocket] = await peer.live(agent)
        const lost = next(older, 'disconnected')
        proxy.stallUplink()
        expect((await lost).reason).toMatchObject({ kind: 'timed-out', phase: 'heartbeat' })
        expect(older.state).toBe('reconnecting')
        const ended = next(older, 'disconnected', { filter: (e) => e.terminal })
        const newer = scene().link(peer, agent)
        await newer.connect()
        expect((await ended).reason).toMatchObject({ kind: 'superseded', targetSocketId: olderSocket, generation: 1 })
        expect(older.state).toBe('terminated')
        expect(newer.state).toBe('connected')
        proxy.release()
        await untilOnlyNewerLive(peer, agent, olderSocket, 'only the newer socket live')
        expect(await statuses(peer, agent)).toEqual([101, 101])
      })

      it("the same supersede read just after the host's disconnect() (a watchdog's restart while the lost socket still closes): its cause is unknown, so the host's connect() probes with on_conflict=reject, is refused 409 past conflictRetryWindowMs and ends `superseded`; the newer instance is never evicted", async () => {
        const agent = peer.agent()
        const proxy = await scene().proxy(peer)
        // The monotonic clock the link decides by is the test's: the restart comes past the conflict window.
        let now = 1_000
        const policy = { ...longBackoff, connection: { conflictRetryWindowMs: 100 } }
        const older = scene().link(peer, agent, { url: proxy.url, policy, env: { monotonic: () => now, random: () => 0.99 } })
        await older.connect()
        const [olderSocket] = await peer.live(agent)
        const lost = next(older, 'disconnected')
        proxy.stallUplink()
        expect((await lost).reason).toMatchObject({ kind: 'timed-out', phase: 'heartbeat' })
        const stopping = older.disconnect()
        expect(older.state).toBe('stopped')
        const newer = scene().link(peer, agent)
        await newer.connect()
        await waitForChart(chartOf(older), (s) => s.context.ambiguousSupersede !== null, 8_000)
        expect(older.state).toBe('stopped')
        proxy.release()
        await stopping
        now += 1_000
        expect(reasonOf(await settle(older.connect()))).toMatchObject({ kind: 'superseded', targetSocketId: olderSocket, generation: 1 })
        await probesRefused(agent, olderSocket, newer, [101, 101])
      })

      it("a supersede read during the backoff after the next attempts' TCP connections were refused (no upgrade of them left) ends the link `superseded`: the newer instance keeps the key", async () => {
        const agent = peer.agent()
        const proxy = await scene().proxy(peer)
        const quickRetries = { ...stalling, reconnect: { initialDelayMs: 100, maxDelayMs: 100 } }
        const older = scene().link(peer, agent, { url: proxy.url, policy: quickRetries })
        await older.connect()
        const [olderSocket] = await peer.live(agent)
        proxy.refuseNew()
        const refused = next(older, 'disconnected', { filter: (e) => e.reason.kind === 'dropped' && e.reason.generation === 2 })
        proxy.stallUplink()
        expect((await refused).reason).toMatchObject({ kind: 'dropped', retryable: true })
        const ended = next(older, 'disconnected', { filter: (e) => e.terminal })
        const newer = scene().link(peer, agent)
        await newer.connect()
        expect((await ended).reason).toMatchObject({ kind: 'superseded', targetSocketId: olderSocket, generation: 1 })
        expect(older.state).toBe('terminated')
        await proxy.acceptNew()
        proxy.release()
        await untilOnlyNewerLive(peer, agent, olderSocket, 'only the newer socket live')
        expect(newer.state).toBe('connected')
        // No upgrade of the older link after its first: the refused attempts never reached the server.
        expect(await statuses(peer, agent)).toEqual([101, 101])
      })

      it("a supersede read on the lost socket while the next upgrade is out ends the link `superseded` once the server refuses that upgrade with a 4xx (it caused nothing): the newer instance keeps the key", async () => {
        const { agent, proxy, link: older, first: olderSocket } = await relayed({ policy: { ...stalling, reconnect: { initialDelayMs: 100, maxDelayMs: 100 } } })
        proxy.holdNew('request')
        proxy.stallUplink()
        // The heartbeat times out; the next attempt's upgrade is sent to the relay, which holds it.
        await waitForChart(chartOf(older), (s) => s.context.generation === 2 && s.context.keyHolder === 2, 8_000)
        await proxy.untilHeld(1)
        expect(proxy.heldConnections).toBe(1)
        const ended = next(older, 'disconnected', { filter: (e) => e.terminal, timeoutMs: 8_000 })
        const newer = scene().link(peer, agent)
        await newer.connect()
        // The server superseded the older link's lost socket, which the older link still reads: held, not acted on.
        await waitForChart(chartOf(older), (s) => s.context.heldSupersede !== null, 8_000)
        expect(older.state).toBe('connecting')
        // The held upgrade reaches the server now, and is refused.
        await peer.refuse({ status: 429, retryAfterS: 1 })
        proxy.passHeld()
        expect((await ended).reason).toMatchObject({ kind: 'superseded', targetSocketId: olderSocket, generation: 1 })
        expect(older.state).toBe('terminated')
        proxy.release()
        await untilOnlyNewerLive(peer, agent, olderSocket, 'only the newer socket live')
        expect(newer.state).toBe('connected')
        expect(await statuses(peer, agent)).toEqual([101, 101, 429])
      })

      it("the same, the held upgrade refused 503 (the platform's tracking_failed may follow a supersede the upgrade caused): the supersede's cause is unknown, so the link probes with on_conflict=reject, is refused 409 past conflictRetryWindowMs and ends `superseded`; the newer instance is never evicted", async () => {
        const policy = { ...stalling, connection: { conflictRetryWindowMs: 200 }, reconnect: { initialDelayMs: 100, maxDelayMs: 100 } }
        const { agent, proxy, link: older, first: olderSocket } = await relayed({ policy })
        proxy.holdNew('request')
        proxy.stallUplink()
        await waitForChart(chartOf(older), (s) => s.context.generation === 2 && s.context.keyHolder === 2, 8_000)
        const ended = next(older, 'disconnected', { filter: (e) => e.terminal, timeoutMs: 8_000 })
        const newer = scene().link(peer, agent)
        await newer.connect()
        await waitForChart(chartOf(older), (s) => s.context.heldSupersede !== null, 8_000)
        await peer.refuse({ status: 503 })
        proxy.passHeld()
        expect((await ended).reason).toMatchObject({ kind: 'superseded', targetSocketId: olderSocket, generation: 1 })
        proxy.release()
        await probesRefused(agent, olderSocket, newer, [101, 101, 503])
      })

      it("a newer instance connects while the link's control join has not reached the server (its uplink stalls just after the upgrade): the server only closes the link's socket, with no supersede push (it pushes one through a joined control channel alone), so the link's next attempts probe with on_conflict=reject, are refused 409 past conflictRetryWindowMs, and it ends `superseded` (cause unseen); the newer instance is never evicted", async () => {
        const agent = peer.agent()
        const proxy = await scene().proxy(peer)
        proxy.stallNextAfterRequest()
        const policy = { transport: { closeTimeoutMs: 300 }, connection: { conflictRetryWindowMs: 200 }, reconnect: { initialDelayMs: 100, maxDelayMs: 100 } }
        const older = scene().link(peer, agent, { url: proxy.url, policy })
        const olderUp = settle(older.connect())
        await peer.until(async () => (await peer.live(agent)).length === 1, "the older link's socket accepted")
        const [olderSocket] = await peer.live(agent)
        await untilState(older, 'joining')
        const frames: string[] = []
        older.on('ignored', (e) => frames.push(e.event))
        const newer = scene().link(peer, agent)
        await newer.connect()
        expect(reasonOf(await olderUp)).toMatchObject({ kind: 'superseded', cause: 'unseen', retryable: false, generation: 1, correlationId: null })
        // No supersede push reached the link (it would have ended the link with the payload's fields at once).
        expect(frames).not.toContain('control.supersede')
        await probesRefused(agent, olderSocket, newer, [101, 101])
      })

      /**
       * A link whose socket a newer instance's connection closed while its control join had not
       * reached the server (no supersede push: the cause unseen), stopped by its host in the
       * backoff; the monotonic clock both links decide by is the test's (`tick()` moves it past the
       * 100 ms conflict window).
       */
      const stoppedInDoubt = async () => {
        const agent = peer.agent()
        const proxy = await scene().proxy(peer)
        proxy.stallNextAfterRequest()
        let now = 1_000
        const policy = { transport: { closeTimeoutMs: 300 }, connection: { conflictRetryWindowMs: 100 }, reconnect: { initialDelayMs: 60_000, maxDelayMs: 60_000 } }
        const env = { monotonic: () => now }
        const older = scene().link(peer, agent, { url: proxy.url, policy, env })
        const olderUp = settle(older.connect())
        await peer.until(async () => (await peer.live(agent)).length === 1, "the older link's socket accepted")
        const [olderSocket] = await peer.live(agent)
        await untilState(older, 'joining')
        const lost = next(older, 'disconnected')
        const newer = scene().link(peer, agent)
        await newer.connect()
        expect(await lost).toMatchObject({ conflictProbe: true, reason: { kind: 'closed', generation: 1 } })
        expect(older.state).toBe('reconnecting')
        await older.disconnect()
        expect(reasonOf(await olderUp)).toMatchObject({ kind: 'graceful' })
        return { agent, older, olderSocket, newer, policy, env, tick: () => void (now += 1_000) }
      }

      it("the same, and the host stops and connects again during the backoff (a watchdog's restart) while the supersede's cause is unknown: the new session's upgrade probes with on_conflict=reject too, is refused 409 past conflictRetryWindowMs, and the link ends `superseded` (cause unseen); the newer instance is never evicted", async () => {
        const { agent, older, olderSocket, newer, tick } = await stoppedInDoubt()
        tick()
        expect(reasonOf(await settle(older.connect()))).toMatchObject({ kind: 'superseded', cause: 'unseen', retryable: false, generation: 1 })
        await probesRefused(agent, olderSocket, newer, [101, 101])
      })

      it("the same, and the host replaces its link instead (a new createLink() given the old link's supersedeDoubt): the new link's first upgrade probes with on_conflict=reject, is refused 409 past conflictRetryWindowMs, and it ends `superseded` (cause unseen); the newer instance is never evicted", async () => {
        const { agent, older, olderSocket, newer, policy, env, tick } = await stoppedInDoubt()
        const doubt = older.supersedeDoubt
        expect(doubt).toMatchObject({ agentId: agent.id, reason: { kind: 'superseded', cause: 'unseen', generation: 1 } })
        tick()
        const replacement = scene().link(peer, agent, { policy, env, supersedeDoubt: doubt })
        expect(reasonOf(await settle(replacement.connect()))).toMatchObject({ kind: 'superseded', cause: 'unseen', retryable: false, generation: 1 })
        await probesRefused(agent, olderSocket, newer, [101, 101])
      })

      it("a newer instance connects while the link's control join is on its way, and the join reaches the server just after the supersede (on Phoenix it joins, hears no push, and the close follows a moment later): a \"disconnect\" close within unseenSupersedeWindowMs of the join is probed like one before it, so the link is refused 409 past conflictRetryWindowMs and ends `superseded` (cause unseen); the newer instance is never evicted", async () => {
        const agent = peer.agent()
        const proxy = await scene().proxy(peer)
        proxy.stallNextAfterRequest('delay')
        const policy = { connection: { conflictRetryWindowMs: 200 }, reconnect: { initialDelayMs: 100, maxDelayMs: 100 } }
        const older = scene().link(peer, agent, { url: proxy.url, policy })
        const states: string[] = []
        older.on('state', (e) => states.push(e.state))
        const ended = next(older, 'disconnected', { filter: (e) => e.terminal, timeoutMs: 8_000 })
        void older.connect().catch(() => {})
        await peer.until(async () => (await peer.live(agent)).length === 1, "the older link's socket accepted")
        const [olderSocket] = await peer.live(agent)
        await untilState(older, 'joining')
        const newer = scene().link(peer, agent)
        const newerUp = newer.connect()
        // The newer link read its 101, so the server accepted its socket and superseded the older in
        // doing so (connect/3 runs before the 101 is written): the older's join goes now, with no
        // round trip to the server's admin routes inside the gap before the close.
        await untilState(newer, 'joining')
        proxy.flushUplink()
        await newerUp
        expect((await ended).reason).toMatchObject({ kind: 'superseded', cause: 'unseen', generation: 1 })
        // The older link was connected exactly when the server took its join: the transport process
        // that handled the join wrote its reply before it handled the "disconnect". On Phoenix the
        // join lands in the gap (SUPERSEDE_CLOSE_DELAY_MS); the simulator closes in the tick it
        // supersedes, so there the close comes first (while joining).
        const joinedOld = (await peer.joins(agent, controlTopic(agent.id))).some((j) => j.socket === olderSocket)
        expect(states.includes('connected')).toBe(joinedOld)
        expect(joinedOld).toBe(!peer.name.startsWith('simulator'))
        await probesRefused(agent, olderSocket, newer, [101, 101])
      })

      it("the server accepts the next upgrade and supersedes the link's lost socket because of it, but its 101 never reaches the link (the connection reset): the supersede's cause is unknown, so the next attempt probes with on_conflict=reject, is accepted, and the link stays connected, never `superseded`", async () => {
        const { agent, proxy, link, first } = await relayed({ policy: { ...stalling, reconnect: { initialDelayMs: 100, maxDelayMs: 100 } } })
        proxy.holdNew('response')
        proxy.stallUplink()
        // The next upgrade reaches the server, which accepts it and supersedes the first socket; its 101 is held.
        await waitForChart(chartOf(link), (s) => s.context.heldSupersede !== null, 8_000)
        expect(link.state).toBe('connecting')
        const ignored = next(link, 'ignored', { filter: (e) => e.event === 'control.supersede', timeoutMs: 8_000 })
        const back = next(link, 'reconnected', { timeoutMs: 8_000 })
        proxy.dropHeld()
        expect((await ignored).detail).toBe(
          'a supersede of the previous socket (generation 1), whose cause was unknown: the server accepted a connection made with on_conflict=reject, so no other instance holds the key',
        )
        await back
        expect(link.state).toBe('connected')
        proxy.release()
        await probeAccepted(agent, first)
        expect(link.state).toBe('connected')
      })

      it("the same, with the old socket's supersede reaching the link only after the next upgrade was reset (the old path recovers late): still ambiguous, probed, accepted, connected", async () => {
        const { agent, proxy, link, first } = await relayed({ policy: { ...stalling, reconnect: { initialDelayMs: 1_000, maxDelayMs: 1_000 } }, env: { random: () => 0.99 } })
        proxy.holdNew('response')
        // Nothing flows on the first socket's path: the heartbeat times out; the server's supersede of it waits in the path.
        proxy.blackhole()
        await peer.until(async () => (await statuses(peer, agent)).length === 2, 'the next upgrade accepted by the server', 8_000)
        expect(link.state).toBe('connecting')
        expect(chartOf(link).getSnapshot().context.heldSupersede).toBeNull()
        const dropped = next(link, 'disconnected', { filter: (e) => e.reason.generation === 2, timeoutMs: 8_000 })
        proxy.dropHeld()
        expect((await dropped).reason).toMatchObject({ kind: 'dropped' })
        const back = next(link, 'reconnected', { timeoutMs: 8_000 })
        proxy.resumeDownlink()
        await waitForChart(chartOf(link), (s) => s.context.ambiguousSupersede !== null || s.context.generation > 2, 8_000)
        await back
        expect(link.state).toBe('connected')
        expect(link.lastDisconnectReason?.kind).not.toBe('superseded')
        proxy.release()
        await probeAccepted(agent, first)
      })

      it("another instance connects while the link's next upgrade goes unanswered (held until the link's connect timeout): the supersede read after it is ambiguous, so the link probes with on_conflict=reject, is refused 409 past conflictRetryWindowMs and ends `superseded`; the newer instance is never evicted", async () => {
        const policy = { ...stalling, connection: { connectTimeoutMs: 500, conflictRetryWindowMs: 200 }, reconnect: { initialDelayMs: 400, maxDelayMs: 400 } }
        const { agent, proxy, link: older, first: olderSocket } = await relayed({ policy, env: { random: () => 0.99 } })
        proxy.holdNew('request')
        proxy.stallUplink()
        const timedOut = next(older, 'disconnected', { filter: (e) => e.reason.kind === 'timed-out' && e.reason.phase === 'connect', timeoutMs: 8_000 })
        await timedOut
        proxy.dropHeld()
        const ended = next(older, 'disconnected', { filter: (e) => e.terminal, timeoutMs: 8_000 })
        const newer = scene().link(peer, agent)
        await newer.connect()
        expect((await ended).reason).toMatchObject({ kind: 'superseded', targetSocketId: olderSocket, generation: 1 })
        expect(older.state).toBe('terminated')
        proxy.release()
        // The held upgrade never reached the server; the probe did, and was refused.
        await probesRefused(agent, olderSocket, newer, [101, 101])
      })

      it("the server superseding the link's own lost socket because its next one connected changes nothing: reported as ignored, the link stays connected", async () => {
        const agent = peer.agent()
        const proxy = await scene().proxy(peer)
        const link = scene().link(peer, agent, { url: proxy.url, policy: stalling })
        await link.connect()
        const [old] = await peer.live(agent)
        const back = next(link, 'reconnected', { timeoutMs: 8_000 })
        const stale = next(link, 'ignored', { timeoutMs: 8_000, filter: (e) => e.event === 'control.supersede' })
        proxy.stallUplink()
        await back
        expect((await stale).detail).toMatch(OWN_SUPERSEDE_IGNORED)
        expect(link.state).toBe('connected')
        proxy.release()
        await untilOnlyNewerLive(peer, agent, old, 'the old socket superseded, the new one live')
        expect(link.state).toBe('connected')
        expect(await statuses(peer, agent)).toEqual([101, 101])
      })

      it('a control signal the server sends during the backoff is delivered once', async () => {
        const agent = peer.agent()
        const proxy = await scene().proxy(peer)
        const delivered: unknown[] = []
        const link = scene().link(peer, agent, { url: proxy.url, policy: longBackoff, env: { random: () => 0.99 }, onControl: (s) => void delivered.push(s.correlationId) })
        await link.connect()
        const lost = next(link, 'disconnected')
        proxy.stallUplink()
        await lost
        const control = next(link, 'control')
        const ids = await peer.control(agent, { n: 1, via: 'push', tag: 'late' })
        expect(ids).toHaveLength(1)
        expect((await control).signal.correlationId).toBe(ids[0])
        expect(delivered).toEqual(ids)
        expect(link.state).toBe('reconnecting')
        expect(await statuses(peer, agent)).toEqual([101])
        proxy.release()
      })
    })

    describe('upgrade rejection', () => {
      it('a wrong key on the first connect rejects `rejected(unauthenticated)` within one round trip, after exactly one attempt (scenario 17)', async () => {
        const agent = peer.agent()
        const link = scene().link(peer, { id: agent.id, key: 'wrong-key' }, { policy: { connection: { connectTimeoutMs: 30_000 } } })
        const started = performance.now()
        const reason = reasonOf(await settle(link.connect()))
        const elapsed = performance.now() - started
        expect(reason).toMatchObject({ kind: 'rejected', cause: 'unauthenticated', phase: 'upgrade', status: 403, retryable: false })
        // Not the connect timeout (30 s): the refusal itself ended the attempt.
        expect(elapsed).toBeLessThan(1_000)
        expect(link.state).toBe('terminated')
        expect(await statuses(peer, agent)).toEqual([403])
      })

      // Issue 12: a refusal is classified within one round trip whatever the server does with the
      // connection. Stock Phoenix keeps it alive with no body; the platform's body with
      // `Connection: close` is the other end (Cowboy closes the connection, Bandit keeps it).
      const TERMINAL_REFUSALS = [
        { status: 400, cause: 'protocol-error', errorCode: 'invalid_on_conflict' },
        { status: 401, cause: 'unauthenticated', errorCode: 'unauthenticated' },
        { status: 402, cause: 'quota-exceeded', errorCode: 'error' },
        { status: 403, cause: 'unauthenticated', errorCode: 'unauthenticated' },
        { status: 409, cause: 'conflict', errorCode: 'connection_conflict' },
      ] as const
      for (const { status, cause, errorCode } of TERMINAL_REFUSALS) {
        for (const body of ['none', 'platform'] as const) {
          const how = body === 'none' ? 'kept alive, no body' : 'the platform body, Connection: close'
          it(`${status} (${how}) on the first connect: \`rejected(${cause})\` within one round trip, terminal, one attempt (scenarios 17, 18)`, async () => {
            const agent = peer.agent()
            await peer.refuse({ status, body, connectionClose: body === 'platform' })
            const link = scene().link(peer, agent, { policy: { connection: { connectTimeoutMs: 30_000 } } })
            const started = performance.now()
            const reason = reasonOf(await settle(link.connect()))
            const elapsed = performance.now() - started
            expect(reason).toMatchObject({ kind: 'rejected', cause, phase: 'upgrade', status, retryable: false, errorCode: body === 'none' ? null : errorCode })
            expect(elapsed).toBeLessThan(1_000)
            expect(link.state).toBe('terminated')
            expect(scene().seen(link, 'disconnected').map((d) => d.outcome)).toEqual(['terminated'])
            expect(await statuses(peer, agent)).toEqual([status])
          })
        }
      }

      // Phoenix's web server refuses a request its HTTP parser will not read (docs/field-notes.md
      // "Real Phoenix"): the same on every attempt, so terminal. Bandit answers HTTP/1.0 and closes.
      for (const { what, options, status } of [
        { what: 'a socket param of 11,000 bytes', options: { params: { token: 't'.repeat(11_000) } }, status: 414 },
        { what: 'an x-api-key header of 11,000 bytes', options: { apiKeyIn: 'header' as const, apiKey: 'k'.repeat(11_000) }, status: 431 },
      ]) {
        it(`${what}: the web server refuses ${status} before Phoenix sees it; \`rejected(protocol-error)\` within one round trip, terminal, one attempt`, async () => {
          const link = scene().link(peer, peer.agent(), { ...options, policy: { connection: { connectTimeoutMs: 30_000 } } })
          const started = performance.now()
          const reason = reasonOf(await settle(link.connect()))
          expect(reason).toMatchObject({ kind: 'rejected', cause: 'protocol-error', phase: 'upgrade', status, retryable: false })
          expect(performance.now() - started).toBeLessThan(1_000)
          expect(link.state).toBe('terminated')
          expect(scene().seen(link, 'disconnected').map((d) => d.outcome)).toEqual(['terminated'])
        })
      }

      it('a key revoked mid-session ends `terminated` after exactly one refused attempt (scenario 20)', async () => {
        const { agent, link } = await connected()
        const ended = settle(link.runForever())
        await peer.revoke(agent)
        await peer.disconnect(agent)
        expect(reasonOf(await ended)).toMatchObject({ kind: 'rejected', cause: 'unauthenticated', status: 403 })
        expect(scene().seen(link, 'disconnected').map((d) => [d.reason.kind, d.outcome])).toEqual([
          ['closed', 'reconnect'],
          ['rejected', 'terminated'],
        ])
        expect(await statuses(peer, agent)).toEqual([101, 403])
      })

      it('409 with on_conflict=reject while another instance holds the key: terminal, the holder untouched (scenarios 13, 18)', async () => {
        const { agent, link: holder, socket } = await connected()
        const second = scene().link(peer, agent, { onConflict: 'reject' })
        expect(reasonOf(await settle(second.connect()))).toMatchObject({ kind: 'rejected', cause: 'conflict', status: 409, retryable: false })
        expect(second.state).toBe('terminated')
        expect(holder.state).toBe('connected')
        expect(await peer.live(agent)).toEqual([socket])
        expect(await statuses(peer, agent)).toEqual([101, 409])
      })

      it('409 from our own lost socket, still held by the server, is retried within the own-conflict window until the server lets go', async () => {
        const agent = peer.agent()
        const proxy = await scene().proxy(peer)
        const link = scene().link(peer, agent, { url: proxy.url, onConflict: 'reject', policy: { transport: { heartbeatIntervalMs: 200 } } })
        await link.connect()
        const [ghost] = await peer.live(agent)
        const conflicts = next(link, 'disconnected', {
          timeoutMs: 8_000,
          filter: () => scene().seen(link, 'disconnected').filter((d) => d.reason.kind === 'rejected').length >= 2,
        })
        proxy.blackhole()
        await conflicts
        const lost = scene().seen(link, 'disconnected')
        expect(lost[0]!.reason).toMatchObject({ kind: 'timed-out', phase: 'heartbeat' })
        for (const d of lost.slice(1)) {
          expect(d.reason).toMatchObject({ kind: 'rejected', cause: 'conflict', status: 409, retryable: true })
          expect(d.outcome).toBe('reconnect')
        }
        expect(await peer.live(agent)).toEqual([ghost])
        const back = next(link, 'reconnected', { timeoutMs: 8_000 })
        proxy.release()
        await back
        expect(link.state).toBe('connected')
        const live = await peer.live(agent)
        expect(live).toHaveLength(1)
        expect(live[0]).not.toBe(ghost)
        const seen = await statuses(peer, agent)
        expect(seen[0]).toBe(101)
        expect(seen.filter((s) => s === 409).length).toBeGreaterThanOrEqual(2)
        expect(seen.at(-1)).toBe(101)
      })

      it('409 from our own socket that the server accepted but whose join never answered (the first connect): retried, not terminal, and connect() resolves once the server lets go', async () => {
        const agent = peer.agent()
        const proxy = await scene().proxy(peer)
        const link = scene().link(peer, agent, { url: proxy.url, onConflict: 'reject', policy: { connection: { joinTimeoutMs: 300 } } })
        // The path goes silent once the upgrade is through: the join's reply, and later our close, never pass.
        const off = link.on('state', (e) => {
          if (e.state !== 'joining') return
          off()
          proxy.blackhole()
        })
        const conflict = next(link, 'disconnected', { timeoutMs: 8_000, filter: (e) => e.reason.kind === 'rejected' })
        const connecting = settle(link.connect())
        expect(await conflict).toMatchObject({ outcome: 'reconnect', reason: { kind: 'rejected', cause: 'conflict', status: 409, retryable: true } })
        expect(scene().seen(link, 'disconnected')[0]!.reason).toMatchObject({ kind: 'timed-out', phase: 'join' })
        const [ghost] = await peer.live(agent)
        expect(ghost).toBeDefined()
        proxy.release()
        expect(await connecting).toMatchObject({ ok: true })
        expect(link.state).toBe('connected')
        const live = await peer.live(agent)
        expect(live).toHaveLength(1)
        expect(live[0]).not.toBe(ghost)
        const seen = await statuses(peer, agent)
        expect(seen.slice(0, 2)).toEqual([101, 409])
        expect(seen.at(-1)).toBe(101)
      })

      it('429 with Retry-After waits at least that long, then connects (scenario 19)', async () => {
        const agent = peer.agent()
        await peer.refuse({ status: 429, retryAfterS: 1, body: 'platform' })
        const link = scene().link(peer, agent)
        const lost = next(link, 'disconnected')
        await link.connect()
        const { reason, nextDelayMs } = await lost
        expect(reason).toMatchObject({ kind: 'rejected', cause: 'rate-limited', status: 429, retryAfterMs: 1000, errorCode: 'too_many_requests', retryable: true })
        expect(nextDelayMs).toBeGreaterThanOrEqual(1000)
        const upgrades = await peer.upgrades(agent)
        expect(upgrades.map((u) => u.status)).toEqual([429, 101])
        // Arrival to arrival: the 1 s runs from the client reading the 429, after it arrived; the
        // reference peer's clock counts whole milliseconds.
        expect(upgrades[1]!.at - upgrades[0]!.at).toBeGreaterThanOrEqual(999)
      })

      it('503 twice with no body, then accepted: retried with backoff until connected (scenario 8)', async () => {
        const agent = peer.agent()
        await peer.refuse({ status: 503 }, 2)
        const link = scene().link(peer, agent)
        await link.connect()
        expect(scene().seen(link, 'disconnected').map((d) => [d.reason.kind, (d.reason as { cause?: string }).cause, d.outcome])).toEqual([
          ['rejected', 'unavailable', 'reconnect'],
          ['rejected', 'unavailable', 'reconnect'],
        ])
        expect(await statuses(peer, agent)).toEqual([503, 503, 101])
      })
    })

    describe('channels', () => {
      it('phx_error on an app channel rejoins it on the same socket; the link stays connected (scenario 33)', async () => {
        const { agent, link, socket } = await connected()
        const room = link.channel(`room:${agent.id}`)
        await channelStatus(room, 'joined')
        const seen: ChannelStatus[] = []
        room.onStatus((s) => seen.push(s))
        await peer.channelError(agent, room.topic)
        await channelStatus(room, 'errored')
        await channelStatus(room, 'joined')
        expect(seen).toEqual(['errored', 'joined'])
        expect(link.state).toBe('connected')
        expect(scene().seen(link, 'disconnected')).toEqual([])
        await peer.until(async () => (await peer.joins(agent, room.topic)).length === 2, 'the rejoin')
        const joins = await peer.joins(agent, room.topic)
        expect(joins.map((j) => j.socket)).toEqual([socket, socket])
        expect(joins[0]!.joinRef).not.toBe(joins[1]!.joinRef)
      })

      it('a push holding half a character (a lone surrogate) is refused PUSH_INVALID at once and never sent: the socket, which the server would close 1011 on it, stays', async () => {
        const { agent, link, socket } = await connected()
        const room = link.channel(`room:${agent.id}`)
        await channelStatus(room, 'joined')
        await expect(room.push('say', { text: '😀'.slice(0, 1) })).rejects.toMatchObject({ code: 'PUSH_INVALID' })
        // The same socket carries the next push; nothing was lost.
        await expect(room.push('say', { text: '😀 whole' })).resolves.toBeDefined()
        expect(() => link.channel(`room:${agent.id}-half`, { name: '😀'.slice(1) })).toThrow(/lone UTF-16 surrogate/)
        expect(link.state).toBe('connected')
        expect(scene().seen(link, 'disconnected')).toEqual([])
        expect(await peer.live(agent)).toEqual([socket])
      })

      it('phx_close on an app channel drops it with a typed reason; the link stays connected (scenario 33)', async () => {
        const { agent, link, socket } = await connected()
        const room = link.channel(`room:${agent.id}`)
        await channelStatus(room, 'joined')
        await peer.channelClose(agent, room.topic)
        await channelStatus(room, 'dropped')
        expect(room.reason).toMatchObject({ kind: 'dropped', source: 'channel', retryable: false })
        await expect(room.push('ping', {})).rejects.toMatchObject({ code: 'CHANNEL_CLOSED' })
        expect(link.state).toBe('connected')
        expect(await peer.live(agent)).toEqual([socket])
        expect(await peer.joins(agent, room.topic)).toHaveLength(1)
      })

      it('a join refused by the server drops that channel; the link and its other channels stay (scenario 31)', async () => {
        const { agent, link } = await connected()
        const good = link.channel(`room:${agent.id}-ok`)
        await channelStatus(good, 'joined')
        await peer.joinOutcome(`room:${agent.id}-no`, 'error', { reason: 'unauthorized' }, 1)
        const refused = link.channel(`room:${agent.id}-no`)
        await channelStatus(refused, 'dropped')
        expect(refused.reason).toMatchObject({ kind: 'rejected', cause: 'unauthorized', retryable: false })
        expect(good.status).toBe('joined')
        expect(link.state).toBe('connected')
      })

      it('a join of a topic no channel route matches ("unmatched topic", join_ref null) drops that channel `rejected(protocol-error)`, never retried; the link and its other channels stay (scenario 31)', async () => {
        const { agent, link, socket } = await connected()
        const good = link.channel(`room:${agent.id}-ok`)
        await channelStatus(good, 'joined')
        const unrouted = link.channel(`task:${agent.id}`)
        await channelStatus(unrouted, 'dropped')
        expect(unrouted.reason).toMatchObject({ kind: 'rejected', cause: 'protocol-error', phase: 'join', retryable: false })
        expect(good.status).toBe('joined')
        expect(await good.push('ping', { n: 1 })).toEqual({ echo: { n: 1 }, event: 'ping' })
        expect(link.state).toBe('connected')
        expect(scene().seen(link, 'disconnected')).toEqual([])
        expect(await peer.live(agent)).toEqual([socket])
        expect(await peer.joins(agent, `task:${agent.id}`)).toEqual([])
      })

      it('a join refused with a reason the join table does not list drops that channel, its reason saying it will not be rejoined', async () => {
        const { agent, link } = await connected()
        const topic = `room:${agent.id}-club`
        await peer.joinOutcome(topic, 'error', { reason: 'not a member' }, 1)
        const refused = link.channel(topic)
        await channelStatus(refused, 'dropped')
        expect(refused.reason).toMatchObject({ kind: 'other', retryable: false, detail: expect.stringContaining('not a member') })
        expect(link.state).toBe('connected')
        expect(scene().seen(link, 'disconnected')).toEqual([])
      })

      it('a join refused for a cause that passes ("join crashed") keeps the channel: rejoined on the same socket and joined; the link stays', async () => {
        const { agent, link, socket } = await connected()
        const topic = `room:${agent.id}-crashy`
        await peer.joinOutcome(topic, 'error', { reason: 'join crashed' }, 1)
        const room = link.channel(topic)
        const errored = new Promise<unknown>((resolve) => room.onStatus((status, reason) => status === 'errored' && resolve(reason)))
        expect(await errored).toMatchObject({ kind: 'rejected', cause: 'unavailable', phase: 'join', retryable: true })
        await channelStatus(room, 'joined')
        await peer.until(async () => (await peer.joins(agent, topic)).length === 1, 'the accepted rejoin')
        expect((await peer.joins(agent, topic)).map((j) => j.socket)).toEqual([socket])
        expect(link.state).toBe('connected')
        expect(scene().seen(link, 'disconnected')).toEqual([])
      })

      it('phx_error on the control channel rejoins it on the same socket; the link is not lost and its app channels stay (scenario 34)', async () => {
        const { agent, link, socket } = await connected()
        const room = link.channel(`room:${agent.id}`)
        await channelStatus(room, 'joined')
        const states: string[] = []
        link.on('state', ({ state }) => states.push(state))
        const rejoined = next(link, 'state', { filter: (e) => e.state === 'connected' })
        await peer.channelError(agent, controlTopic(agent.id))
        await rejoined
        expect(states).toEqual(['joining', 'connected'])
        expect(scene().seen(link, 'disconnected')).toEqual([])
        expect(room.status).toBe('joined')
        await peer.until(async () => (await peer.joins(agent, controlTopic(agent.id))).length === 2, 'the control channel joined again')
        expect((await peer.joins(agent, controlTopic(agent.id))).map((j) => j.socket)).toEqual([socket, socket])
        expect(await peer.joins(agent, room.topic)).toHaveLength(1)
        expect(await peer.live(agent)).toEqual([socket])
        // Signals flow on the rejoined channel.
        const got = next(link, 'control')
        await peer.control(agent, { n: 1, via: 'push', tag: 'after' })
        expect((await got).signal.correlationId).toBe('after-1')
      })

      it('phx_close on the control channel is a session-level loss: the link reconnects and joins it again (scenario 34)', async () => {
        const { agent, link } = await connected()
        const lost = next(link, 'disconnected')
        const back = next(link, 'reconnected')
        await peer.channelClose(agent, controlTopic(agent.id))
        const { reason, outcome } = await lost
        expect(reason).toMatchObject({ kind: 'dropped', source: 'channel', detail: expect.stringContaining('phx_close') })
        expect(outcome).toBe('reconnect')
        await back
        expect(link.state).toBe('connected')
        await peer.until(async () => (await peer.joins(agent, controlTopic(agent.id))).length === 2, 'the control channel joined again')
      })

      it('a supersede while a slow control handler runs: terminated at once; the signals before it delivered in order after the handler, the one after it never (scenario 12)', async () => {
        const agent = peer.agent()
        const { onControl, delivered, release, lastDone } = gatedControl('s1', 's3')
        const link = scene().link(peer, agent, { onControl })
        await link.connect()
        const topic = controlTopic(agent.id)
        const signal = (id: string) => ({ mode: 'interrupt', scope: 'agent', agent_id: agent.id, execution_id: `exec-${id}`, correlation_id: id })
        const firstStarted = next(link, 'control')
        expect(await peer.push(agent, topic, CONTROL_EVENT, signal('s1'))).toBe(1)
        await firstStarted
        const terminated = untilState(link, 'terminated')
        // All through the control channel's process, so the server sends them in this order.
        for (const id of ['s2', 's3']) await peer.push(agent, topic, CONTROL_EVENT, signal(id))
        await peer.push(agent, topic, SUPERSEDE_EVENT, { reason: 'session.already_connected' })
        await peer.push(agent, topic, CONTROL_EVENT, signal('s4')) // 0 channels when the link closed its socket already
        await terminated
        // Terminated while the handler is still inside s1.
        expect(delivered).toEqual(['start s1'])
        expect(link.lastDisconnectReason).toMatchObject({ kind: 'superseded', cause: 'session.already_connected' })
        release()
        await lastDone
        await link.disconnect()
        expect(delivered).toEqual(['start s1', 'end s1', 'start s2', 'end s2', 'start s3', 'end s3'])
        await peer.until(async () => (await peer.live(agent)).length === 0, 'the superseded socket closed by the link')
        expect(await statuses(peer, agent)).toEqual([101])
      })

      it('control signals arrive once each, in order, through the channel and as broadcasts (scenario 35)', async () => {
        const agent = peer.agent()
        const got: Array<string | null> = []
        const link = scene().link(peer, agent, { onControl: (signal) => void got.push(signal.correlationId) })
        await link.connect()
        // The control event goes out as a signal is handed over, before its handler runs: count events.
        let events = 0
        const tenth = next(link, 'control', { filter: () => ++events >= 10, timeoutMs: 6000 })
        const pushed = await peer.control(agent, { n: 10, via: 'push', tag: 'p' })
        // The pushes go through the channel process and the broadcasts straight to the socket, so the
        // server does not order one group against the other: the broadcasts go once the pushes are in.
        await tenth
        await untilDelivered(got, 10)
        const all = next(link, 'control', { filter: () => ++events >= 20, timeoutMs: 6000 })
        const broadcast = await peer.control(agent, { n: 10, via: 'broadcast', tag: 'b' })
        await all
        await untilDelivered(got, 20)
        expect(got).toEqual([...pushed, ...broadcast])
        expect(scene().seen(link, 'ignored')).toEqual([])
      })
    })

    describe('heartbeats', () => {
      /**
       * Freezes `own` (SIGSTOP) while `during` runs (given when the freeze began), thaws it whatever
       * `during` did, then waits for `link` connected again on one live socket of `agent`.
       */
      async function frozenThenBack(own: Peer, agent: Agent, link: Link, during: (frozenAt: number) => Promise<void>): Promise<void> {
        const thaw = await own.freeze()
        try {
          await during(performance.now())
        } finally {
          await thaw()
        }
        await untilState(link, 'connected', 15_000)
        await own.until(async () => (await own.live(agent)).length === 1, 'one live socket after the thaw', 10_000)
      }

      it('a frozen server (SIGSTOP) is found by heartbeat within two intervals; after SIGCONT the link is connected again (scenario 36)', async () => {
        const own = await scene().fresh(factory)
        const agent = own.agent()
        const interval = 300
        const link = scene().link(own, agent, { policy: { transport: { heartbeatIntervalMs: interval } } })
        await link.connect()
        const lost = next(link, 'disconnected', { timeoutMs: 6000 })
        await frozenThenBack(own, agent, link, async (frozenAt) => {
          const { reason, outcome } = await lost
          const detectedIn = performance.now() - frozenAt
          expect(reason).toMatchObject({ kind: 'timed-out', phase: 'heartbeat' })
          expect(outcome).toBe('reconnect')
          expect(detectedIn).toBeLessThanOrEqual(2 * interval + 400)
        })
      }, 40_000)

      it("ping(): the server answers the heartbeat at once; frozen (SIGSTOP), the socket is lost within the ping's timeout, not the heartbeat's 60 s, and the link connects again after the thaw", async () => {
        const own = await scene().fresh(factory)
        const agent = own.agent()
        // The default heartbeat: 30 s interval, so only the ping can find the frozen server within the test.
        const link = scene().link(own, agent)
        await link.connect()
        expect(await link.ping()).toMatchObject({ outcome: 'alive', generation: 1 })
        expect(link.state).toBe('connected')
        expect(await own.live(agent)).toHaveLength(1)
        await frozenThenBack(own, agent, link, async () => {
          const started = performance.now()
          const result = await link.ping({ timeoutMs: 300 })
          const elapsed = performance.now() - started
          expect(result).toMatchObject({ outcome: 'lost', disconnected: 'reconnect', reason: { kind: 'timed-out', phase: 'heartbeat', generation: 1 } })
          expect(elapsed).toBeGreaterThanOrEqual(295)
          // Far below the heartbeat's 60 s: what decided was the ping's timeout, not a timer lag.
          expect(elapsed).toBeLessThan(10_000)
        })
        const again = await link.ping()
        expect(again.outcome).toBe('alive')
        expect((again as { generation: number }).generation).toBeGreaterThanOrEqual(2)
      }, 40_000)

      it("ping() after a network change that left the socket half-open (the path carries nothing, no FIN, no RST): lost within the ping's timeout while the link still read connected; the next socket supersedes the server's stale one, and one socket is live", async () => {
        const agent = peer.agent()
        const proxy = await scene().proxy(peer)
        // The default heartbeat (30 s): only the ping can find the silent path within the test.
        const link = scene().link(peer, agent, { url: proxy.url, policy: { transport: { closeTimeoutMs: 300 } } })
        await link.connect()
        const [stale] = await peer.live(agent)
        proxy.blackhole()
        expect(link.state).toBe('connected')
        const started = performance.now()
        expect(await link.ping({ timeoutMs: 300 })).toMatchObject({ outcome: 'lost', disconnected: 'reconnect', reason: { kind: 'timed-out', phase: 'heartbeat', generation: 1 } })
        expect(performance.now() - started).toBeLessThan(10_000)
        await untilState(link, 'connected', 15_000)
        await untilOnlyNewerLive(peer, agent, stale, 'only the new socket live')
        expect(await link.ping()).toMatchObject({ outcome: 'alive', generation: 2 })
        proxy.release()
      }, 40_000)
    })
  })
}

/** `got` is filled by the control handler, which runs just after the `control` event. */
async function untilDelivered(got: unknown[], n: number): Promise<void> {
  for (let i = 0; i < 100 && got.length < n; i++) await new Promise<void>((resolve) => queueMicrotask(resolve))
  expect(got).toHaveLength(n)
}
