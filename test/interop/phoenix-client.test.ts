/**
 * The official phoenix.js client (1.8.16, with ws as its transport) against the simulator,
 * unchanged: join, reply, push, heartbeat, a duplicate join's phx_close, an unmatched topic.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { Socket, type Channel } from 'phoenix'
import WebSocket from 'isomorphic-ws'
import { startSimulator, type PlatformSimulator } from '../../src/node/server/index.js'

let sim: PlatformSimulator
let socket: Socket

function once<T = unknown>(register: (resolve: (value: T) => void) => void, timeoutMs = 3000, what = 'an event'): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), timeoutMs)
    register((value) => {
      clearTimeout(timer)
      resolve(value)
    })
  })
}

function join(channel: Channel): Promise<{ status: string; response: unknown }> {
  return once((resolve) => {
    channel
      .join()
      .receive('ok', (response) => resolve({ status: 'ok', response }))
      .receive('error', (response) => resolve({ status: 'error', response }))
      .receive('timeout', () => resolve({ status: 'timeout', response: null }))
  }, 3000, 'join reply')
}

/** The official client for `agentId` with `apiKey`, over ws, never reconnecting or rejoining on its own. */
function officialSocket(agentId: string, apiKey: string, options: { heartbeatIntervalMs?: number } = {}): Socket {
  return new Socket(sim.url, {
    transport: WebSocket as never,
    params: { agent_id: agentId, api_key: apiKey },
    ...options,
    reconnectAfterMs: () => 2 ** 31 - 1,
    rejoinAfterMs: () => 2 ** 31 - 1,
  })
}

beforeEach(async () => {
  sim = await startSimulator({ agents: { 'agent-1': 'key-1' } })
  socket = officialSocket('agent-1', 'key-1', { heartbeatIntervalMs: 50 })
})

afterEach(async () => {
  await new Promise<void>((resolve) => socket.disconnect(() => resolve(), 1000, 'test done'))
  await sim.stop()
})

describe('official phoenix.js client against the simulator', () => {
  it('joins the control channel and gets an ok reply', async () => {
    socket.connect()
    const reply = await join(socket.channel('agent_control:agent-1'))
    expect(reply.status).toBe('ok')
    expect(sim.live('agent-1')).toHaveLength(1)
    expect(sim.live('agent-1')[0]!.channels.has('agent_control:agent-1')).toBe(true)
  })

  it('pushes to an app channel and receives the reply the simulator chose', async () => {
    sim.onPush(({ event, payload }) => ({ status: 'ok', response: { echoed: event, payload: payload as Record<string, unknown> } }))
    socket.connect()
    const room = socket.channel('room:1')
    await join(room)
    const response = await once((resolve) => room.push('say', { text: 'hi' }).receive('ok', resolve), 3000, 'push reply')
    expect(response).toEqual({ echoed: 'say', payload: { text: 'hi' } })
    const frames = sim.live()[0]!.frames
    const inbound = frames.filter((f) => f.dir === 'in' && f.frame?.event === 'say')
    const roomJoin = frames.find((f) => f.dir === 'in' && f.frame?.event === 'phx_join' && f.frame.topic === 'room:1')!
    expect(inbound).toHaveLength(1)
    // The push carries the join_ref of the channel's join, and its reply echoes it.
    expect(inbound[0]!.frame!.join_ref).toBe(roomJoin.frame!.join_ref)
    const reply = frames.find((f) => f.dir === 'out' && f.frame?.ref === inbound[0]!.frame!.ref)!
    expect(reply.frame!.join_ref).toBe(roomJoin.frame!.join_ref)
  })

  it('delivers a server push to the channel and answers heartbeats', async () => {
    socket.connect()
    const room = socket.channel('room:2')
    await join(room)
    const got = once((resolve) => room.on('news', resolve), 3000, 'push')
    expect(sim.push({ agent: 'agent-1' }, 'room:2', 'news', { n: 1 })).toBe(1)
    expect(await got).toEqual({ n: 1 })
    await sim.waitFor(() => sim.live()[0]!.heartbeats >= 2, { what: 'two heartbeats' })
    const replies = sim.live()[0]!.frames.filter((f) => f.dir === 'out' && f.frame?.topic === 'phoenix')
    expect(replies.length).toBeGreaterThanOrEqual(2)
    expect(replies[0]!.frame!.payload).toEqual({ status: 'ok', response: {} })
  })

  // A true duplicate join (a second phx_join of a joined topic) is test/conformance/differential.test.ts's:
  // phoenix.js never sends one, as this shows.
  it('a second channel of a joined topic: phoenix.js leaves the first (phx_leave, then the phx_close of its join_ref) before joining again', async () => {
    socket.connect()
    const first = socket.channel('room:3')
    await join(first)
    const closed = once((resolve) => first.onClose(() => resolve(true)), 3000, 'phx_close on the first channel')
    const second = socket.channel('room:3')
    const reply = await join(second)
    expect(reply.status).toBe('ok')
    await closed
    const frames = sim.live()[0]!.frames.filter((f) => f.frame?.topic === 'room:3')
    const joins = frames.filter((f) => f.dir === 'in' && f.frame?.event === 'phx_join')
    const seen = frames.map((f) => `${f.dir} ${f.frame!.event} ${f.frame!.join_ref === joins[0]!.frame!.join_ref ? 'first' : 'second'}`)
    // The leave goes to the channel's process and the join is the socket's own: read in one go, the
    // join comes first and the leave races it, unanswered (Phoenix, 10 of 11 runs on both servers:
    // docs/field-notes.md); read apart, the leave is answered before the join arrives.
    const raced = ['in phx_join first', 'out phx_reply first', 'in phx_leave first', 'in phx_join second', 'out phx_reply second', 'out phx_close first']
    const apart = ['in phx_join first', 'out phx_reply first', 'in phx_leave first', 'out phx_reply first', 'out phx_close first', 'in phx_join second', 'out phx_reply second']
    expect([raced, apart]).toContainEqual(seen)
  })

  it('answers a message to an unjoined topic with "unmatched topic"', async () => {
    socket.connect()
    await join(socket.channel('agent_control:agent-1'))
    const conn = sim.live()[0]!
    // phoenix.js never sends to a topic it did not join, so speak the protocol directly.
    ;(socket as unknown as { push(data: object): void }).push({ topic: 'nowhere', event: 'hello', payload: {}, ref: '900', join_ref: '900' })
    await sim.waitFor(() => conn.frames.some((f) => f.dir === 'out' && f.frame?.ref === '900'), { what: 'the reply' })
    const reply = conn.frames.find((f) => f.dir === 'out' && f.frame?.ref === '900')!
    expect(reply.frame!.payload).toEqual({ status: 'error', response: { reason: 'unmatched topic' } })
  })

  it('with channel routes, a join of a topic no route matches is answered "unmatched topic" with join_ref null, before any join rule; the control channel is always routed', async () => {
    await sim.stop()
    sim = await startSimulator({ agents: { 'agent-1': 'key-1' }, channels: ['room:*', 'lobby'] })
    socket = officialSocket('agent-1', 'key-1')
    // A rule for an unrouted topic is never reached: Phoenix routes the join before a channel's join/3.
    sim.onJoin('task:1', { reply: 'ok' })
    socket.connect()
    expect(await join(socket.channel('agent_control:agent-1'))).toEqual({ status: 'ok', response: {} })
    expect((await join(socket.channel('room:9'))).status).toBe('ok')
    expect((await join(socket.channel('lobby'))).status).toBe('ok')
    for (const topic of ['task:1', 'lobbyist', 'room']) {
      const channel = socket.channel(topic)
      expect(await join(channel)).toEqual({ status: 'error', response: { reason: 'unmatched topic' } })
      // phoenix.js schedules a rejoin of a refused join: leaving clears its timer.
      channel.leave()
    }
    const conn = sim.live('agent-1')[0]!
    expect([...conn.channels.keys()].sort()).toEqual(['agent_control:agent-1', 'lobby', 'room:9'])
    const join_ = conn.frames.find((f) => f.dir === 'in' && f.frame?.event === 'phx_join' && f.frame.topic === 'task:1')!.frame!
    const reply = conn.frames.find((f) => f.dir === 'out' && f.frame?.topic === 'task:1')!.frame!
    expect(join_.join_ref).not.toBeNull()
    expect(reply).toEqual({ join_ref: null, ref: join_.ref, topic: 'task:1', event: 'phx_reply', payload: { response: { reason: 'unmatched topic' }, status: 'error' } })
  })

  it('a control signal through the channel carries its join_ref; the same signal as a broadcast carries join_ref null', async () => {
    socket.connect()
    const control = socket.channel('agent_control:agent-1')
    await join(control)
    const got: unknown[] = []
    const both = once<void>((resolve) => control.on('agent.control', (payload) => void (got.push(payload) === 2 && resolve())), 3000, 'two signals')
    expect(sim.control('agent-1', { mode: 'interrupt', correlation_id: 'c-push' })).toBe(1)
    expect(sim.control('agent-1', { mode: 'interrupt', correlation_id: 'c-broadcast' }, { via: 'broadcast' })).toBe(1)
    await both
    expect(got).toEqual([
      { scope: 'agent', agent_id: 'agent-1', mode: 'interrupt', correlation_id: 'c-push' },
      { scope: 'agent', agent_id: 'agent-1', mode: 'interrupt', correlation_id: 'c-broadcast' },
    ])
    const frames = sim.live()[0]!.frames
    const joinRef = frames.find((f) => f.dir === 'in' && f.frame?.event === 'phx_join')!.frame!.join_ref
    const signals = frames.filter((f) => f.dir === 'out' && f.frame?.event === 'agent.control').map((f) => [f.frame!.join_ref, f.frame!.ref])
    expect(joinRef).toMatch(/^\d+$/)
    expect(signals).toEqual([
      [joinRef, null],
      [null, null],
    ])
  })

  it("a join hook that throws is Phoenix's crashed join/3 (error reply \"join crashed\"); a push handler that throws crashes the channel (phx_error); both noted in the connection's problems", async () => {
    sim.onJoin('room:crash', { reply: 'ok', before: () => { throw new Error('join boom') } })
    sim.onPush(() => {
      throw new Error('push boom')
    })
    socket.connect()
    const refused = socket.channel('room:crash')
    expect(await join(refused)).toEqual({ status: 'error', response: { reason: 'join crashed' } })
    const room = socket.channel('room:4')
    expect((await join(room)).status).toBe('ok')
    const crashed = once((resolve) => room.onError(() => resolve(true)), 3000, 'phx_error on room:4')
    // No reply comes for the push (its channel crashed): a short timeout, awaited, so no timer outlives the test.
    const unanswered = once((resolve) => room.push('say', { text: 'hi' }, 100).receive('timeout', () => resolve('timeout')), 3000, 'the push timeout')
    expect(await crashed).toBe(true)
    expect(await unanswered).toBe('timeout')
    // Leaving cancels phoenix.js's rejoin timers of both channels (neither is joined, so the leave completes at once).
    for (const channel of [refused, room]) await once((resolve) => channel.leave().receive('ok', resolve), 3000, 'the leave')
    const conn = sim.live()[0]!
    expect(conn.problems).toEqual(['handler error on room:crash phx_join: join boom', 'handler error on room:4 say: push boom'])
    expect(conn.frames.filter((f) => f.dir === 'out' && f.frame?.topic === 'room:4').map((f) => f.frame!.event)).toEqual(['phx_reply', 'phx_error'])
  })

  it('held joins are answered by age: the newest first when asked, then the oldest', async () => {
    sim.setKeys('agent-2', 'key-2')
    sim.onJoin('room:held', { reply: 'hold' })
    const other = officialSocket('agent-2', 'key-2')
    try {
      socket.connect()
      const older = join(socket.channel('room:held'))
      await sim.waitFor(() => sim.heldJoins.length === 1, { what: 'the first join held' })
      other.connect()
      const newer = join(other.channel('room:held'))
      await sim.waitFor(() => sim.heldJoins.length === 2, { what: 'the second join held' })
      expect(sim.answerHeldJoin('room:held', { reply: 'ok', response: { n: 2 } }, 'newest')).toBe(true)
      expect(await newer).toEqual({ status: 'ok', response: { n: 2 } })
      expect(sim.heldJoins.map((j) => j.connection.agentId)).toEqual(['agent-1'])
      expect(sim.answerHeldJoin('room:held', { reply: 'ok', response: { n: 1 } }, 'oldest')).toBe(true)
      expect(await older).toEqual({ status: 'ok', response: { n: 1 } })
      expect(sim.answerHeldJoin('room:held', { reply: 'ok' })).toBe(false)
    } finally {
      await new Promise<void>((resolve) => other.disconnect(() => resolve(), 1000, 'test done'))
    }
  })

  it('refuses a wrong API key with HTTP 403 on the upgrade', async () => {
    const bad = officialSocket('agent-1', 'wrong')
    const closed = once((resolve) => bad.onClose(resolve), 3000, 'close')
    bad.connect()
    await closed
    await new Promise<void>((resolve) => bad.disconnect(() => resolve()))
    expect(sim.upgrades.map((u) => u.status)).toEqual([403])
    expect(sim.connections).toHaveLength(0)
  })
})
