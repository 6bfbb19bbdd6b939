/**
 * SCENARIOS 28-30: stale generations and earlier sessions change nothing. On the wire the
 * adapter ends a transport before the chart moves on, so a late event can only come from a
 * delayed delivery; these tests deliver one into the running link exactly as the adapter
 * would (same event, old generation or epoch) and check nothing changes.
 */
import { describe, expect, it } from 'vitest'
import { classifyClose, classifySupersede } from '../../src/reasons.js'
import { framesIn, newerInstanceSupersedes, next, OWN_SUPERSEDE_IGNORED, untilState, useWorld } from '../support/wire.js'
import { chartOf } from '../../src/chart-of.js'
import { FaultProxy } from '../conformance/proxy.js'

const world = useWorld()

describe('rule: stale generations are ignored', () => {
  it('a close from the previous transport after the new one opened is ignored and reported (scenario 28)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const r = next(link, 'reconnected')
    sim.close({ agent: 'agent-1' }, 1001)
    const { generation, epoch } = await r
    expect(generation).toBe(2)
    const ignored = next(link, 'ignored')
    chartOf(link).send({ type: 'socket.close', reason: classifyClose({ code: 1006, reason: '' }, 1, Date.now()), generation: 1, epoch })
    expect((await ignored).detail).toMatch(/stale transport \(generation 1, current 2\)/)
    expect(link.state).toBe('connected')
    expect(sim.live('agent-1')).toHaveLength(1)
    expect(sim.accepted('agent-1')).toHaveLength(2)
  })

  it('what the server still sends on a socket the link gave up, before its close completed: a control signal is delivered during the backoff, a malformed frame reported', async () => {
    const sim = await world().sim()
    const delivered: unknown[] = []
    const policy = { transport: { heartbeatIntervalMs: 100, closeTimeoutMs: 1_500, maxFrameBytes: 4096 }, reconnect: { initialDelayMs: 5_000, maxDelayMs: 5_000 } }
    const link = world().link(sim, { policy, env: { random: () => 0.99 }, onControl: (signal) => void delivered.push(signal.correlationId) })
    await link.connect()
    const lost = next(link, 'disconnected')
    sim.stall({ agent: 'agent-1' })
    expect((await lost).reason).toMatchObject({ kind: 'timed-out', phase: 'heartbeat' })
    const control = next(link, 'control')
    const ignored = next(link, 'ignored')
    expect(sim.control('agent-1', { mode: 'interrupt', correlation_id: 'late-1' })).toBe(1)
    expect(sim.sendRaw({ agent: 'agent-1' }, '[not json')).toBe(1)
    expect((await control).signal.correlationId).toBe('late-1')
    expect((await ignored).detail).toMatch(/^not-json: .*frame starts "\[not json"/)
    expect(delivered).toEqual(['late-1'])
    // A supersede under a join_ref the control channel never had is not the platform's: reported, not terminal.
    const foreign = next(link, 'ignored')
    expect(sim.sendRaw({ agent: 'agent-1' }, JSON.stringify(['999', null, 'agent_control:agent-1', 'supersede', {}]))).toBe(1)
    expect((await foreign).detail).toBe('"supersede" on "agent_control:agent-1" read after the link ended this transport (generation 1), while its socket closed')
    // A frame over maxFrameBytes: ws closes the socket with 1009 unread, and says so.
    const oversize = next(link, 'ignored')
    expect(sim.sendRaw({ agent: 'agent-1' }, JSON.stringify([null, null, 'agent_control:agent-1', 'supersede', { pad: 'x'.repeat(5000) }]))).toBe(1)
    expect((await oversize).detail).toBe('an inbound frame exceeded maxFrameBytes (4096 bytes) on a socket the link had already ended (generation 1): not read, the socket closed with 1009')
    expect(link.state).toBe('reconnecting')
    expect(sim.accepted('agent-1')).toHaveLength(1)
  })

  it("a supersede read more than 2 s after the loss, on a socket whose close never reached the server (closeTimeoutMs 8 s), still ends the link superseded: the link reads it past phoenix.js's own 1.5 s wait", async () => {
    const sim = await world().sim()
    const proxy = await FaultProxy.start(sim.port)
    try {
      // The first backoff about 2.5 s, so the next attempt comes after phoenix.js's teardown stopped
      // waiting for the close (150 + 300 + 450 + 600 ms) and let go of the socket; that attempt is
      // refused at TCP, so no upgrade of ours can have caused what follows.
      const policy = { transport: { heartbeatIntervalMs: 100, closeTimeoutMs: 8_000 }, reconnect: { initialDelayMs: 2_500, maxDelayMs: 2_500 } }
      const older = world().link(sim, { url: proxy.url, policy, env: { random: () => 0.99 } })
      await older.connect()
      const lost = next(older, 'disconnected')
      proxy.stallUplink()
      proxy.refuseNew()
      expect((await lost).reason).toMatchObject({ kind: 'timed-out', phase: 'heartbeat', generation: 1 })
      expect((await next(older, 'disconnected', { timeoutMs: 5_000 })).reason).toMatchObject({ kind: 'dropped', generation: 2 })
      expect(older.state).toBe('reconnecting')
      await newerInstanceSupersedes(world(), sim, older)
      expect(sim.upgrades.map((u) => u.status)).toEqual([101, 101])
    } finally {
      await proxy.close()
    }
  })

  it('a push carrying an old join_ref is dropped and reported; the handler never sees it (scenario 29)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await next(link, 'channel', { filter: (e) => e.status === 'joined' })
    const oldJoinRef = sim.live('agent-1')[0]!.channels.get('room:1')!.joinRef
    const rejoined = next(link, 'channel', { filter: (e) => e.status === 'joined' })
    sim.close({ agent: 'agent-1' }, 1000)
    await rejoined
    const seen: unknown[] = []
    room.on('news', (p) => seen.push(p))
    const ignored = next(link, 'ignored')
    sim.push({ agent: 'agent-1' }, 'room:1', 'news', { stale: true }, { joinRef: oldJoinRef })
    expect((await ignored).detail).toMatch(/stale join_ref/)
    const fresh = new Promise((resolve) => room.on('news', resolve))
    sim.push({ agent: 'agent-1' }, 'room:1', 'news', { stale: false })
    await fresh
    expect(seen).toEqual([{ stale: false }])
  })

  it("a phx_close for a topic the link left, carrying another join than the one it left, or a push under the join left, is reported, not taken as the leave's tail", async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await next(link, 'channel', { filter: (e) => e.status === 'joined' })
    const socket = sim.live('agent-1')[0]!
    const joinRef = socket.channels.get('room:1')!.joinRef
    // The server stops reading: the phx_leave waits unread, so the leave's reply and phx_close are still to come.
    sim.stall({ agent: 'agent-1' })
    await room.leave()
    const ignored = next(link, 'ignored')
    sim.push({ agent: 'agent-1' }, 'room:1', 'phx_close', {}, { joinRef: `${joinRef}9` })
    expect((await ignored).detail).toMatch(/"phx_close" for topic "room:1", which this link has not joined on this transport/)
    // A push on the left topic under the very join_ref left is no tail of the leave (only its reply and phx_close are): reported.
    const pushed = next(link, 'ignored')
    sim.push({ agent: 'agent-1' }, 'room:1', 'new_msg', { late: true }, { joinRef })
    expect((await pushed).detail).toMatch(/"new_msg" for topic "room:1", which this link has not joined on this transport/)
    // The server reads again: the leave's own tail (its reply and phx_close, the join left) is expected, and nothing else is reported.
    const reported: string[] = []
    link.on('ignored', (e) => reported.push(e.detail))
    socket.resume()
    await sim.waitFor(() => !socket.channels.has('room:1'), { timeoutMs: 4_000, what: 'the server to leave room:1' })
    await link.disconnect()
    expect(reported).toEqual([])
    expect(framesIn(socket, 'phx_leave', 'room:1')).toHaveLength(1)
  })

  it('events of a session the host stopped and restarted are ignored, a supersede included (scenario 30)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    await link.disconnect()
    await link.connect()
    const ignored = next(link, 'ignored')
    chartOf(link).send({ type: 'control.supersede', reason: classifySupersede({}, 1, Date.now()), generation: 1, epoch: 1 })
    expect((await ignored).detail).toMatch(/earlier session \(epoch 1, current 2\)/)
    expect(link.state).toBe('connected')
    await untilState(link, 'connected')
  })
})

describe('a transport the link ended reports nothing of its own doing', () => {
  // The close of a socket the chart already ended only confirms its decision, and the tail of the
  // control channel's leave answers the link's own leave: reported, they would reach the chart as
  // stale events (an `ignored` report of the link's own doing). A supersede read on the old socket
  // once the next one opened is reported: it may be the platform evicting that socket because of
  // the link's next one, or another instance; the link cannot tell, so it changes nothing and says so.
  it('after disconnect() and after a supersede: no ignored event; a heartbeat timeout whose reconnect supersedes the old socket: that supersede alone', async () => {
    const sim = await world().sim()
    const stopped = world().link(sim)
    await stopped.connect()
    await stopped.disconnect()

    const superseded = world().link(sim, { agentId: 'agent-2', apiKey: 'key-2' })
    await superseded.connect()
    const ended = next(superseded, 'disconnected', { filter: (e) => e.terminal })
    sim.supersede('agent-2')
    await ended

    // The old socket still open, and read, when the next one connects: the server never reads its close.
    const timedOut = world().link(sim, { policy: { transport: { heartbeatIntervalMs: 100, closeTimeoutMs: 1_500 } } })
    await timedOut.connect()
    const back = next(timedOut, 'reconnected')
    const staleSupersede = next(timedOut, 'ignored')
    sim.stall({ agent: 'agent-1' })
    await back
    await staleSupersede
    await timedOut.disconnect()

    for (const link of [stopped, superseded]) {
      expect(world().captured.get(link)!.events.filter((e) => e.type === 'ignored')).toEqual([])
    }
    expect(world().captured.get(timedOut)!.events.filter((e) => e.type === 'ignored')).toEqual([
      { type: 'ignored', event: 'control.supersede', detail: expect.stringMatching(OWN_SUPERSEDE_IGNORED) },
    ])
  })

  it('disconnect() while the control join is pending, and right after a push: the replies the server still sends are not reported', async () => {
    const sim = await world().sim()
    const repliesOn = (conn: { frames: Array<{ dir: string; frame: { event: string; topic: string } | null }> }, topic: string) =>
      conn.frames.filter((f) => f.dir === 'out' && f.frame?.event === 'phx_reply' && f.frame.topic === topic).length

    const joining = world().link(sim)
    const reached = untilState(joining, 'joining')
    void joining.connect().catch(() => {})
    await reached
    await joining.disconnect()
    // The socket has closed, so what the server sent before its close was read: the join's reply among it.
    expect(repliesOn(sim.accepted('agent-1')[0]!, 'agent_control:agent-1')).toBe(1)

    const pushing = world().link(sim, { agentId: 'agent-2', apiKey: 'key-2' })
    await pushing.connect()
    const room = pushing.channel('room:1')
    await room.joined()
    const push = room.push('hello', {}).then(
      () => 'resolved',
      (error: { code?: string }) => error.code,
    )
    await pushing.disconnect()
    expect(await push).toBe('TRANSPORT_LOST')
    // The join's, and the push's unless the client's close was read first: a channel answers on its
    // own turn, as a Phoenix channel process does, and a socket that read the close sends nothing more.
    expect(repliesOn(sim.accepted('agent-2')[0]!, 'room:1')).toBeGreaterThanOrEqual(1)

    for (const link of [joining, pushing]) expect(world().captured.get(link)!.events.filter((e) => e.type === 'ignored')).toEqual([])
  })
})
