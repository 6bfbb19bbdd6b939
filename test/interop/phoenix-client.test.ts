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

beforeEach(async () => {
  sim = await startSimulator({ agents: { 'agent-1': 'key-1' } })
  socket = new Socket(sim.url, {
    transport: WebSocket as never,
    params: { agent_id: 'agent-1', api_key: 'key-1' },
    heartbeatIntervalMs: 50,
    reconnectAfterMs: () => 2 ** 31 - 1,
    rejoinAfterMs: () => 2 ** 31 - 1,
  })
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
    expect(frames.map((f) => `${f.dir} ${f.frame!.event} ${f.frame!.join_ref === joins[0]!.frame!.join_ref ? 'first' : 'second'}`)).toEqual([
      'in phx_join first',
      'out phx_reply first',
      'in phx_leave first',
      'out phx_reply first',
      'out phx_close first',
      'in phx_join second',
      'out phx_reply second',
    ])
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

  it('refuses a wrong API key with HTTP 403 on the upgrade', async () => {
    const bad = new Socket(sim.url, {
      transport: WebSocket as never,
      params: { agent_id: 'agent-1', api_key: 'wrong' },
      reconnectAfterMs: () => 2 ** 31 - 1,
    })
    const closed = once((resolve) => bad.onClose(resolve), 3000, 'close')
    bad.connect()
    await closed
    await new Promise<void>((resolve) => bad.disconnect(() => resolve()))
    expect(sim.upgrades.map((u) => u.status)).toEqual([403])
    expect(sim.connections).toHaveLength(0)
  })
})
