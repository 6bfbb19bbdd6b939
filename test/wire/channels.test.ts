/** SCENARIOS 31-35 on the real wire: app channels and the control channel. */
import { describe, expect, it, vi } from 'vitest'
import { PushError } from '../../src/errors/push-error.js'
import type { LinkPolicyInput } from '../../src/policy.js'
import { controlTopic } from '../../src/protocol.js'
import { describeReason } from '../../src/reasons.js'
import { framesIn, next, settle, untilState, useWorld } from '../support/wire.js'

const world = useWorld()
const joined = (topic: string) => (e: { topic: string; status: string }) => e.topic === topic && e.status === 'joined'

/** A link connected to a fresh simulator, with `room:1` joined (its `channel` event delivered). */
async function connectedWithRoom() {
  const sim = await world().sim()
  const link = world().link(sim)
  await link.connect()
  const room = link.channel('room:1')
  await next(link, 'channel', { filter: joined('room:1') })
  return { sim, link, room }
}

describe('app channels', () => {
  it('a join rejected on a rejoin drops that channel with a typed reason; the link and other channels stay (scenario 31)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const a = link.channel('room:a')
    const b = link.channel('room:b')
    await Promise.all([next(link, 'channel', { filter: joined('room:a') }), next(link, 'channel', { filter: joined('room:b') })])
    sim.onJoin('room:a', { reply: 'error', response: { reason: 'unauthorized' } })
    const dropped = next(link, 'channel', { filter: (e) => e.topic === 'room:a' && e.status === 'dropped' })
    const bBack = next(link, 'channel', { filter: joined('room:b') })
    sim.close({ agent: 'agent-1' }, 1000)
    expect((await dropped).reason).toMatchObject({ kind: 'rejected', cause: 'unauthorized', phase: 'join' })
    await bBack
    expect(a.status).toBe('dropped')
    expect(b.status).toBe('joined')
    expect(link.state).toBe('connected')
    await expect(a.push('x', {})).rejects.toMatchObject({ code: 'CHANNEL_CLOSED' })
  })

  it('a join refused with a reason the join table does not list drops the channel, and its reason says it will not be rejoined', async () => {
    const sim = await world().sim()
    sim.onJoin('room:club', { reply: 'error', response: { reason: 'not a member' } })
    const link = world().link(sim)
    await link.connect()
    const dropped = next(link, 'channel', { filter: (e) => e.topic === 'room:club' && e.status === 'dropped' })
    const room = link.channel('room:club')
    const waited = settle(room.joined())
    expect((await dropped).reason).toMatchObject({ kind: 'other', retryable: false, detail: expect.stringContaining('not a member') })
    // The wait for the join rejects with the reason in hand, not a bare CHANNEL_CLOSED.
    const outcome = await waited
    expect(outcome.ok).toBe(false)
    const error = (outcome as { error: unknown }).error as PushError
    expect(error).toMatchObject({ code: 'CHANNEL_CLOSED', reason: { kind: 'other', retryable: false } })
    expect(error.message).toBe('the join of "room:club" failed: CHANNEL_CLOSED (the channel was dropped: ' + describeReason(room.reason!) + ')')
    await expect(room.push('x', {})).rejects.toMatchObject({ code: 'CHANNEL_CLOSED', reason: room.reason })
    expect(room.reason).toMatchObject({ kind: 'other', retryable: false })
    expect(framesIn(sim.live('agent-1')[0]!, 'phx_join', 'room:club')).toHaveLength(1)
    expect(link.state).toBe('connected')
  })

  it('a join refused for a cause that passes (rate_limited with retry_after) keeps the channel: rejoined on the same socket no sooner than retry_after, then joined', async () => {
    const sim = await world().sim()
    sim.onJoin('room:busy', { reply: 'error', response: { reason: 'rate_limited', retry_after: 0.3 } }, 1)
    const link = world().link(sim, { policy: { channel: { rejoinInitialDelayMs: 10, rejoinMaxDelayMs: 20 } } })
    await link.connect()
    const errored = next(link, 'channel', { filter: (e) => e.topic === 'room:busy' && e.status === 'errored' })
    const room = link.channel('room:busy')
    expect((await errored).reason).toMatchObject({ kind: 'rejected', cause: 'rate-limited', phase: 'join', retryable: true, retryAfterMs: 300 })
    await room.joined({ signal: AbortSignal.timeout(4000) })
    const joins = framesIn(sim.live('agent-1')[0]!, 'phx_join', 'room:busy')
    expect(joins).toHaveLength(2)
    // The frames' `at` is the simulator's clock: the rejoin came after the retry_after, not the 10-20 ms backoff.
    const times = sim.live('agent-1')[0]!.frames.filter((f) => f.dir === 'in' && f.frame?.event === 'phx_join' && f.frame.topic === 'room:busy').map((f) => f.at)
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(295)
    expect(link.state).toBe('connected')
  })

  it("a channel's status, reason and join reply are read-only to the host: an assignment throws and changes nothing, so a push on a joined channel still goes out", async () => {
    const { link, room } = await connectedWithRoom()
    await room.joined()
    expect(room.status).toBe('joined')
    // @ts-expect-error status is a getter: TypeScript refuses the assignment
    expect(() => (room.status = 'left')).toThrow(TypeError)
    // @ts-expect-error reason is a getter
    expect(() => (room.reason = null)).toThrow(TypeError)
    // @ts-expect-error joinReply is a getter
    expect(() => (room.joinReply = { forged: true })).toThrow(TypeError)
    expect([room.status, room.joinReply]).toEqual(['joined', {}])
    expect(link.channel('room:1')).toBe(room)
    await expect(room.push('ping', {})).resolves.toBeDefined()
    // Nor does a property defined over the getter on the handle: the channel reads its own state.
    Object.defineProperty(room, 'status', { value: 'left' })
    expect(room.active).toBe(true)
    await expect(room.push('ping', {})).resolves.toBeDefined()
    expect(link.channel('room:1')).toBe(room)
  })

  it('a join timeout keeps the channel and retries it (scenario 32)', async () => {
    const sim = await world().sim()
    sim.onJoin('room:slow', { reply: 'none' }, 1)
    const link = world().link(sim)
    await link.connect()
    const errored = next(link, 'channel', { filter: (e) => e.status === 'errored' })
    const room = link.channel('room:slow')
    expect((await errored).reason).toMatchObject({ kind: 'timed-out', phase: 'join' })
    await next(link, 'channel', { filter: joined('room:slow') })
    expect(room.status).toBe('joined')
    expect(framesIn(sim.live('agent-1')[0]!, 'phx_join', 'room:slow')).toHaveLength(2)
  })

  it('phx_error rejoins on the same transport with a fresh join_ref; phx_close drops (scenario 33)', async () => {
    const { sim, link, room } = await connectedWithRoom()
    const errored = next(link, 'channel', { filter: (e) => e.status === 'errored' })
    const rejoined = next(link, 'channel', { filter: joined('room:1') })
    sim.channelError({ agent: 'agent-1' }, 'room:1')
    await errored
    await rejoined
    const joins = framesIn(sim.live('agent-1')[0]!, 'phx_join', 'room:1')
    expect(joins).toHaveLength(2)
    expect(joins[0]!.join_ref).not.toBe(joins[1]!.join_ref)
    expect(sim.accepted('agent-1')).toHaveLength(1)
    const dropped = next(link, 'channel', { filter: (e) => e.status === 'dropped' })
    sim.channelClose({ agent: 'agent-1' }, 'room:1')
    // The channel is not rejoined, and its reason says so (as a reason an alert reads).
    expect((await dropped).reason).toMatchObject({ kind: 'dropped', source: 'channel', retryable: false })
    expect(room.reason).toMatchObject({ kind: 'dropped', retryable: false })
    expect(room.status).toBe('dropped')
    expect(link.state).toBe('connected')
    // Dropped for good: the next socket does not join it; channel() of the topic is a new handle that does.
    const back = next(link, 'reconnected')
    sim.close({ agent: 'agent-1' }, 1000)
    await back
    expect(framesIn(sim.live('agent-1')[0]!, 'phx_join', 'room:1')).toEqual([])
    expect(room.status).toBe('dropped')
    const again = link.channel('room:1')
    expect(again).not.toBe(room)
    await again.joined()
    expect(framesIn(sim.live('agent-1')[0]!, 'phx_join', 'room:1')).toHaveLength(1)
    expect(room.status).toBe('dropped')
  })

  it("a lost socket's channels report detached (reason null) as it is lost, before the link's disconnected that carries the reason, then the state it led to", async () => {
    const { sim, link } = await connectedWithRoom()
    const seen: string[] = []
    link.onAny((e) => {
      if (e.type === 'channel') seen.push(`channel ${e.status} ${e.reason === null ? 'null' : e.reason.kind}`)
      else if (e.type === 'disconnected') seen.push(`disconnected ${e.reason.kind}`)
      else if (e.type === 'state') seen.push(`state ${e.state}`)
    })
    const back = next(link, 'channel', { filter: joined('room:1') })
    sim.close({ agent: 'agent-1' }, 1000)
    await back
    expect(seen.slice(0, 3)).toEqual(['channel detached null', 'disconnected closed', 'state reconnecting'])
  })

  for (const [policy, how] of [
    [{ maxAttempts: 0 }, 'maxAttempts 0'],
    [{ rapidLimit: 1, onRapidLimit: 'give-up' }, "onRapidLimit 'give-up'"],
  ] as const) {
    it(`a policy give-up (${how}) ends the session: disconnected, then terminated, then the channel's detached; its status reads detached throughout`, async () => {
      const sim = await world().sim()
      const link = world().link(sim, { policy: { reconnect: policy } })
      await link.connect()
      const room = link.channel('room:1')
      await room.joined()
      const seen: string[] = []
      link.onAny((e) => {
        if (e.type === 'channel') seen.push(`channel ${e.status}`)
        else if (e.type === 'disconnected') seen.push(`disconnected ${e.reason.kind} ${e.outcome} (room ${room.status})`)
        else if (e.type === 'state') seen.push(`state ${e.state} (room ${room.status})`)
      })
      const detached = next(link, 'channel', { filter: (e) => e.status === 'detached' })
      sim.close({ agent: 'agent-1' }, 1000)
      await detached
      expect(seen).toEqual(['disconnected suppressed terminated (room detached)', 'state terminated (room detached)', 'channel detached'])
      expect(sim.accepted('agent-1')).toHaveLength(1)
    })
  }

  it("after disconnect() the channels' detached events come last, after stopped; their status already reads detached while the state events are delivered", async () => {
    const { link, room } = await connectedWithRoom()
    const seen: string[] = []
    link.onAny((e) => {
      if (e.type === 'channel') seen.push(`channel ${e.status}`)
      else if (e.type === 'disconnected') seen.push(`disconnected ${e.reason.kind}`)
      else if (e.type === 'state') seen.push(`state ${e.state} (room ${room.status})`)
    })
    await link.disconnect()
    if (seen.length < 4) await next(link, 'channel')
    expect(seen).toEqual(['state stopping (room detached)', 'disconnected graceful', 'state stopped (room detached)', 'channel detached'])
  })

  it('pushes get the reply; a push made while not joined waits for the join; an error reply rejects', async () => {
    const sim = await world().sim()
    sim.onPush(({ event, payload }) => (event === 'bad' ? { status: 'error', response: { reason: 'nope' } } : { status: 'ok', response: { got: payload as Record<string, unknown> } }))
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    const early = room.push('hello', { n: 1 })
    expect(await early).toEqual({ got: { n: 1 } })
    const error = await room.push('bad', {}).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(PushError)
    expect(error).toMatchObject({ code: 'PUSH_REJECTED', response: { reason: 'nope' } })
    sim.onPush(() => null)
    await expect(room.push('silent', {}, { timeoutMs: 100 })).rejects.toMatchObject({ code: 'PUSH_TIMEOUT' })
  })

  it('a push made while the join params are still being asked waits for the join and goes out after it, with the params the join carried', async () => {
    const sim = await world().sim()
    sim.onPush(({ event, payload }) => ({ status: 'ok', response: { event, got: payload as Record<string, unknown> } }))
    const link = world().link(sim)
    await link.connect()
    let answer!: (params: object) => void
    let asked!: () => void
    const asking = new Promise<void>((resolve) => (asked = resolve))
    const room = link.channel('room:slow', () => {
      asked()
      return new Promise<object>((resolve) => (answer = resolve))
    })
    await asking
    // The params are still being asked: no join is on the wire yet.
    const pushed = room.push('hello', { n: 1 })
    expect(room.status).toBe('joining')
    expect(framesIn(sim.live('agent-1')[0]!, 'phx_join', 'room:slow')).toEqual([])
    answer({ token: 't-1' })
    expect(await pushed).toEqual({ event: 'hello', got: { n: 1 } })
    const socket = sim.live('agent-1')[0]!
    expect(framesIn(socket, 'phx_join', 'room:slow').map((f) => (f as unknown as { payload: unknown }).payload)).toEqual([{ token: 't-1' }])
    expect(framesIn(socket, 'hello', 'room:slow')).toHaveLength(1)
  })

  it('a push that waited for its join gets at most its whole timeoutMs for the reply, even when the host\'s monotonic clock stepped back during the wait', async () => {
    const sim = await world().sim()
    let offset = 0
    const link = world().link(sim, { env: { monotonic: () => performance.now() + offset } })
    await link.connect()
    sim.onJoin('room:late', { reply: 'hold' })
    sim.onPush(() => null)
    const room = link.channel('room:late')
    await sim.waitFor(() => sim.heldJoins.length === 1)
    const started = performance.now()
    const push = room.push('silent', {}, { timeoutMs: 300 }).catch((e: unknown) => e)
    // An hour back while the push waits for its join; then the join is answered.
    offset = -3_600_000
    expect(sim.answerHeldJoin('room:late', { reply: 'ok' })).toBe(true)
    expect(await push).toMatchObject({ code: 'PUSH_TIMEOUT' })
    // At most the push's own 300 ms (and its join's), never the hour.
    expect(performance.now() - started).toBeLessThan(2_000)
  })

  it('a push while the link is not running fails at once with CHANNEL_CLOSED, not after its timeout', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    const room = link.channel('room:1')
    const started = performance.now()
    await expect(room.push('x', {}, { timeoutMs: 5_000 })).rejects.toMatchObject({ code: 'CHANNEL_CLOSED' })
    await link.connect()
    await next(link, 'channel', { filter: joined('room:1') })
    await link.disconnect()
    await expect(room.push('x', {}, { timeoutMs: 5_000 })).rejects.toMatchObject({ code: 'CHANNEL_CLOSED' })
    expect(performance.now() - started).toBeLessThan(2_000)
  })

  it('leave() sends phx_leave and ends the channel; it is not rejoined on the next transport', async () => {
    const { sim, link, room } = await connectedWithRoom()
    await room.leave()
    expect(room.status).toBe('left')
    const conn = sim.live('agent-1')[0]!
    await sim.waitFor(() => framesIn(conn, 'phx_leave', 'room:1').length === 1, { what: 'the phx_leave' })
    const r = next(link, 'reconnected')
    sim.close({ agent: 'agent-1' }, 1000)
    await r
    expect(framesIn(sim.live('agent-1')[0]!, 'phx_join', 'room:1')).toEqual([])
  })

  it('a topic left and joined again, round after round: the server\'s answers to the earlier leaves are expected, never reported as malformed', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    const malformed: string[] = []
    link.on('ignored', (e) => void (e.event === 'socket.malformed' && malformed.push(e.detail)))
    await link.connect()
    for (let i = 0; i < 5; i++) {
      const room = link.channel('room:again')
      await room.joined()
      await room.leave()
    }
    const last = link.channel('room:again')
    await last.joined()
    const conn = sim.live('agent-1')[0]!
    // Every leave was answered (reply and phx_close) before the last join's reply came back.
    const closes = () => conn.frames.filter((f) => f.dir === 'out' && f.frame?.event === 'phx_close' && f.frame.topic === 'room:again')
    expect(closes()).toHaveLength(5)
    // A push after them all: once the link has it, it has read every frame before it.
    const after = new Promise<unknown>((resolve) => last.on('ping', resolve))
    sim.push({ agent: 'agent-1' }, 'room:again', 'ping', { n: 1 })
    await after
    expect(malformed).toEqual([])
    expect(last.status).toBe('joined')
  })

  it("a push in flight when its channel is left: its reply is not counted as the leave's, so the leave's phx_close is expected too, never reported malformed", async () => {
    const sim = await world().sim()
    sim.onPush(() => ({ status: 'ok', response: {} }))
    const link = world().link(sim)
    const malformed: string[] = []
    link.on('ignored', (e) => void (e.event === 'socket.malformed' && malformed.push(e.detail)))
    await link.connect()
    for (const rejoin of [false, true]) {
      const room = link.channel('room:p')
      await room.joined()
      const inFlight = settle(room.push('work', {}))
      await room.leave()
      expect(await inFlight).toMatchObject({ ok: false })
      if (rejoin) await link.channel('room:p').joined()
    }
    // A push after every frame of those joins: once it is read, they were all read.
    const tick = new Promise<void>((resolve) => link.channel('room:tick').on('tick', () => resolve()))
    await link.channel('room:tick').joined()
    sim.push({ agent: 'agent-1' }, 'room:tick', 'tick', {})
    await tick
    expect(malformed).toEqual([])
  })

  it('leave() while the join params are still being asked, then channel() of the topic at once: a new handle that joins with its own params', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    let asked!: () => void
    const asking = new Promise<void>((resolve) => (asked = resolve))
    // Params that never answer: the join is still being prepared when the host leaves.
    const first = link.channel('room:1', ({ signal }) => {
      asked()
      return new Promise<object>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)))
    })
    await asking
    const leaving = first.leave()
    const second = link.channel('room:1', { token: 't-2' })
    expect(second).not.toBe(first)
    await leaving
    expect(first.status).toBe('left')
    expect(await second.joined()).toEqual({})
    expect(second.status).toBe('joined')
    const joins = framesIn(sim.live('agent-1')[0]!, 'phx_join', 'room:1')
    expect(joins.map((f) => (f as unknown as { payload: unknown }).payload)).toEqual([{ token: 't-2' }])
  })

  it('app channels are rejoined after disconnect() and connect()', async () => {
    const { sim, link } = await connectedWithRoom()
    await link.disconnect()
    const back = next(link, 'channel', { filter: joined('room:1') })
    await link.connect()
    await back
    // The second socket joined the room itself, with a join_ref the first never used.
    const [first, second] = sim.accepted('agent-1')
    expect(sim.accepted('agent-1')).toHaveLength(2)
    const before = framesIn(first!, 'phx_join', 'room:1')
    const after = framesIn(second!, 'phx_join', 'room:1')
    expect(after).toHaveLength(1)
    expect(before.map((f) => f.join_ref)).not.toContain(after[0]!.join_ref)
  })
})

describe('CHANNEL_CLOSED says what closed the channel', () => {
  it('a push on a channel left after an error says the channel was left and carries no reason: the error\'s reason stays readable on the handle, but it is not why the push failed', async () => {
    const sim = await world().sim()
    sim.onJoin('room:slow', { reply: 'none' })
    const link = world().link(sim)
    await link.connect()
    const errored = next(link, 'channel', { filter: (e) => e.status === 'errored' })
    const room = link.channel('room:slow')
    await errored
    await room.leave()
    expect(room.status).toBe('left')
    expect(room.reason).toMatchObject({ kind: 'timed-out', phase: 'join' })
    const failed = await room.push('x', {}).then(
      () => null,
      (error: unknown) => error,
    )
    expect(failed).toBeInstanceOf(PushError)
    expect((failed as PushError).message).toBe('push "x" on "room:slow" failed: CHANNEL_CLOSED (the channel was left)')
    expect((failed as PushError).reason).toBeNull()
  })

  it('a push before connect() says to connect first; after disconnect() that the link was stopped; after leave() that the channel was left; after a supersede that the session ended', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    const room = link.channel('room:1')
    await expect(room.push('x', {})).rejects.toThrow('push "x" on "room:1" failed: CHANNEL_CLOSED (the link is idle: call connect() first)')
    await link.connect()
    await room.joined()
    await link.disconnect()
    await expect(room.push('x', {})).rejects.toThrow('push "x" on "room:1" failed: CHANNEL_CLOSED (the link was stopped by disconnect(); connect() starts a new session)')
    await expect(room.joined()).rejects.toThrow('the join of "room:1" failed: CHANNEL_CLOSED (the link was stopped by disconnect(); connect() starts a new session)')
    await link.connect()
    await room.joined()
    await room.leave()
    await expect(room.push('x', {})).rejects.toThrow('push "x" on "room:1" failed: CHANNEL_CLOSED (the channel was left)')
    const lobby = link.channel('room:lobby')
    await lobby.joined()
    const ended = untilState(link, 'terminated')
    sim.supersede('agent-1')
    await ended
    await expect(lobby.push('x', {})).rejects.toThrow('push "x" on "room:lobby" failed: CHANNEL_CLOSED (the session ended (terminated: see link.lastDisconnectReason))')
  })
})

describe('PushError messages name what the host did and hold no key', () => {
  it("a push of the reserved name phx_join is refused as a push, not read as a failed join; a joined() a disconnect() of an idle link ended says it was stopped; a server's phx_close is named once; a push lost to disconnect() says the link ended the transport", async () => {
    const sim = await world().sim()
    const link = world().link(sim, { policy: { transport: { pushTimeoutMs: 60_000 } } })
    const early = link.channel('room:early')
    const waited = settle(early.joined())
    await link.disconnect()
    const stopped = await waited
    expect(stopped.ok).toBe(false)
    expect(((stopped as { error: Error }).error).message).toBe('the join of "room:early" failed: CHANNEL_CLOSED (the link was stopped by disconnect(); connect() starts a new session)')
    await link.connect()
    const room = link.channel('room:1')
    await room.joined()
    await expect(room.push('phx_join', {})).rejects.toThrow(/^push "phx_join" on "room:1" failed: PUSH_INVALID \(the event must be/)
    sim.channelClose({ agent: 'agent-1' }, 'room:1')
    await next(link, 'channel', { filter: (e) => e.topic === 'room:1' && e.status === 'dropped' })
    await expect(room.push('x', {})).rejects.toThrow('push "x" on "room:1" failed: CHANNEL_CLOSED (the channel was dropped: the server closed the channel (phx_close), terminal)')
    const lobby = link.channel('room:lobby')
    await lobby.joined()
    // The push is never answered: it is in flight when the link stops.
    sim.onPush(() => null)
    const lost = settle(lobby.push('slow', {}))
    await link.disconnect()
    const outcome = await lost
    expect(outcome.ok).toBe(false)
    expect(((outcome as { error: PushError }).error).message).toBe('push "slow" on "room:lobby" failed: TRANSPORT_LOST (the link ended the transport itself: disconnect(), or a socket it replaced)')
  })

  it('a topic holding the API key: PUSH_INVALID and a PUSH_TIMEOUT while waiting for the join are redacted as every other error (error.topic keeps the topic as data)', async () => {
    const sim = await world().sim({ agents: { 'agent-1': 'sekret-key-123' } })
    const link = world().link(sim, { apiKey: 'sekret-key-123' })
    const room = link.channel('room:sekret-key-123')
    await link.connect()
    await room.joined()
    const invalid = await settle(room.push('phx_leave', {}))
    expect(((invalid as { error: PushError }).error).message).toBe('push "phx_leave" on "room:[redacted]" failed: PUSH_INVALID (the event must be a non-empty string outside phoenix\'s phx_ and chan_reply_ names)')
    expect(((invalid as { error: PushError }).error).topic).toBe('room:sekret-key-123')
    sim.onJoin('room:held-sekret-key-123', { reply: 'hold' })
    const held = link.channel('room:held-sekret-key-123')
    const timedOut = await settle(held.push('x', {}, { timeoutMs: 50 }))
    expect(((timedOut as { error: PushError }).error).message).toBe('push "x" on "room:held-[redacted]" failed: PUSH_TIMEOUT')
  })
})

describe('the control channel', () => {
  it('phx_error on the control channel rejoins it on the same socket with a fresh join_ref; no loss, no reconnect (scenario 34)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const states: string[] = []
    link.on('state', ({ state }) => states.push(state))
    const rejoined = next(link, 'state', { filter: (e) => e.state === 'connected' })
    sim.channelError({ agent: 'agent-1' }, controlTopic('agent-1'))
    await rejoined
    expect(states).toEqual(['joining', 'connected'])
    expect(sim.accepted('agent-1')).toHaveLength(1)
    const joins = framesIn(sim.accepted('agent-1')[0]!, 'phx_join', controlTopic('agent-1'))
    expect(joins).toHaveLength(2)
    expect(joins[1]!.join_ref).not.toBe(joins[0]!.join_ref)
    expect(world().captured.get(link)!.events.filter((e) => e.type === 'disconnected')).toEqual([])
    // No socket was lost: no reason is recorded; the state events are what shows the crash.
    expect(link.lastDisconnectReason).toBeNull()
  })

  it('phx_close on the control channel is a session-level loss: reconnect, never half-connected (scenario 34)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const d = next(link, 'disconnected')
    const r = next(link, 'reconnected')
    sim.channelClose({ agent: 'agent-1' }, controlTopic('agent-1'))
    expect((await d).reason).toMatchObject({ kind: 'dropped', source: 'channel', detail: expect.stringContaining('phx_close') })
    await r
    expect(sim.accepted('agent-1')).toHaveLength(2)
    expect(sim.accepted('agent-1')[0]!.closeSeen?.code).toBe(1000)
  })

  it('agent.control signals reach the handler once each, in arrival order, one at a time; a duplicate correlation id once (scenario 35)', async () => {
    const sim = await world().sim()
    const seen: string[] = []
    let running = 0
    let overlap = false
    let done!: () => void
    const all = new Promise<void>((resolve) => (done = resolve))
    const link = world().link(sim, {
      onControl: async (signal) => {
        running++
        if (running > 1) overlap = true
        await new Promise<void>((resolve) => setImmediate(resolve))
        seen.push(`${signal.mode}:${signal.correlationId}`)
        running--
        if (seen.length === 4) done()
      },
    })
    await link.connect()
    const duplicate = next(link, 'ignored', { filter: (e) => e.detail.includes('duplicate') })
    sim.control('agent-1', { mode: 'interrupt', correlation_id: 'c1' })
    sim.control('agent-1', { mode: 'stop', scope: 'room', room_id: 'r1', correlation_id: 'c2' })
    sim.control('agent-1', { mode: 'stop', scope: 'room', room_id: 'r1', correlation_id: 'c2' })
    sim.control('agent-1', { mode: 'play', correlation_id: null })
    sim.control('agent-1', { mode: 'play', correlation_id: null })
    await all
    await duplicate
    expect(seen).toEqual(['interrupt:c1', 'stop:c2', 'play:null', 'play:null'])
    expect(overlap).toBe(false)
    await untilState(link, 'connected')
  })

  it('a signal whose handler was running when the host restarted the session counts as delivered: its resend in the new session is a duplicate, and it is not reported dropped', async () => {
    const sim = await world().sim()
    const calls: string[] = []
    let release!: () => void
    let entered!: () => void
    const inHandler = new Promise<void>((resolve) => (entered = resolve))
    const aborted: boolean[] = []
    const link = world().link(sim, {
      onControl: async (signal, { epoch, signal: abort }) => {
        calls.push(`${signal.correlationId}@${epoch}`)
        if (epoch === 1) {
          entered()
          await new Promise<void>((resolve) => (release = resolve))
          aborted.push(abort.aborted)
        }
      },
    })
    const ignored: string[] = []
    link.on('ignored', (e) => void ignored.push(e.detail))
    await link.connect()
    sim.control('agent-1', { mode: 'interrupt', correlation_id: 'c1' })
    sim.control('agent-1', { mode: 'interrupt', correlation_id: 'c2' })
    await inHandler
    await link.disconnect()
    await link.connect()
    release()
    const duplicate = next(link, 'ignored', { filter: (e) => e.detail.includes('duplicate') && e.detail.includes('c1') })
    const fresh = next(link, 'control', { filter: (e) => e.signal.correlationId === 'c2' })
    // The platform does not deduplicate: it sends both again in the new session.
    sim.control('agent-1', { mode: 'interrupt', correlation_id: 'c1' })
    sim.control('agent-1', { mode: 'interrupt', correlation_id: 'c2' })
    await duplicate
    await fresh
    // c1 was in the handler (its AbortSignal aborted by the new session): once; c2 never reached it
    // in session 1 (dropped when the host stopped): delivered in session 2.
    expect(calls).toEqual(['c1@1', 'c2@2'])
    expect(aborted).toEqual([true])
    expect(ignored.filter((d) => d.includes('c1') && d.includes('dropped'))).toEqual([])
    expect(ignored.filter((d) => d.includes('c2') && d.includes('dropped'))).toHaveLength(1)
  })

  it('a signal read in the same turn as a control channel crash reaches the handler though a listener restarts the session before the handler runs: once, its AbortSignal aborted, and its resend is a duplicate', async () => {
    const sim = await world().sim()
    const handled: string[] = []
    const link = world().link(sim, { onControl: (signal, { epoch, signal: abort }) => void handled.push(`${signal.correlationId}@${epoch}${abort.aborted ? ' aborted' : ''}`) })
    await link.connect()
    let restarted = false
    const off = link.on('state', (e) => {
      if (restarted || e.previous !== 'connected' || e.state !== 'joining') return
      restarted = true
      void link.disconnect()
      void link.connect()
    })
    const topic = controlTopic('agent-1')
    const connection = sim.live('agent-1')[0]!
    const joinRef = connection.channels.get(topic)!.joinRef
    // One TCP read: the signal, then the control channel's crash, whose state event reaches the
    // listener (which starts a new session) before the handler's microtask.
    connection.send({ join_ref: joinRef, ref: null, topic, event: 'agent.control', payload: { mode: 'stop', scope: 'agent', agent_id: 'agent-1', correlation_id: 'x' } })
    connection.send({ join_ref: joinRef, ref: joinRef, topic, event: 'phx_error', payload: {} })
    const second = next(link, 'connected', { filter: (e) => e.epoch === 2 })
    await second
    off()
    const duplicate = next(link, 'ignored', { filter: (e) => e.detail.includes('duplicate') && e.detail.includes('x') })
    sim.control('agent-1', { mode: 'stop', correlation_id: 'x' })
    await duplicate
    expect(restarted).toBe(true)
    expect(handled).toEqual(['x@1 aborted'])
  })

  it('a handler set (or cleared) by a control listener takes the next signal: the one already handed over finishes with the handler it was handed to', async () => {
    const sim = await world().sim()
    const got: string[] = []
    const link = world().link(sim, { onControl: (signal) => void got.push(`old ${signal.correlationId}`) })
    await link.connect()
    const off = link.on('control', (e) => {
      if (e.signal.correlationId === 'a') link.onControl((signal) => void got.push(`new ${signal.correlationId}`))
      if (e.signal.correlationId === 'b') link.onControl(undefined)
    })
    const third = next(link, 'control', { filter: (e) => e.signal.correlationId === 'c' })
    sim.control('agent-1', { mode: 'stop', correlation_id: 'a' })
    await next(link, 'control', { filter: (e) => e.signal.correlationId === 'a' })
    sim.control('agent-1', { mode: 'stop', correlation_id: 'b' })
    await next(link, 'control', { filter: (e) => e.signal.correlationId === 'b' })
    sim.control('agent-1', { mode: 'stop', correlation_id: 'c' })
    await third
    off()
    expect(got).toEqual(['old a', 'new b'])
  })

  it("events come in the order of the link's decisions: a signal's control event before the ignored event for its duplicate read in the same turn", async () => {
    const sim = await world().sim()
    const link = world().link(sim, { onControl: async () => {} })
    await link.connect()
    const order: string[] = []
    const offControl = link.on('control', (e) => void order.push(`control ${e.signal.correlationId}`))
    const offIgnored = link.on('ignored', (e) => void order.push(e.detail.includes('duplicate') ? 'duplicate' : 'other ignored'))
    const second = next(link, 'control', { filter: (e) => e.signal.correlationId === 'd2' })
    sim.control('agent-1', { mode: 'stop', correlation_id: 'd1' })
    sim.control('agent-1', { mode: 'stop', correlation_id: 'd1' })
    sim.control('agent-1', { mode: 'play', correlation_id: 'd2' })
    await second
    offControl()
    offIgnored()
    expect(order).toEqual(['control d1', 'duplicate', 'control d2'])
  })

  it('a control handler that throws is logged and the next signal still arrives', async () => {
    const sim = await world().sim()
    const seen: string[] = []
    let done!: () => void
    const second = new Promise<void>((resolve) => (done = resolve))
    const link = world().link(sim, {
      onControl: (signal) => {
        if (signal.correlationId === 'boom') throw new Error('handler bug')
        seen.push(signal.correlationId!)
        done()
      },
    })
    await link.connect()
    sim.control('agent-1', { mode: 'interrupt', correlation_id: 'boom' })
    sim.control('agent-1', { mode: 'interrupt', correlation_id: 'ok' })
    await second
    expect(seen).toEqual(['ok'])
    expect(world().captured.get(link)!.lines.some((l) => l.level === 'error' && l.message.includes('control handler failed'))).toBe(true)
    // The failure broke nothing: the link is connected and the next signal is delivered.
    expect(link.state).toBe('connected')
    const after = next(link, 'control', { filter: (e) => e.signal.correlationId === 'after' })
    sim.control('agent-1', { mode: 'interrupt', correlation_id: 'after' })
    await after
  })
})

describe('channel handlers', () => {
  /** A link connected to a fresh simulator, with `room:1` joined, and a way to deliver pushes to it in order and wait until the last is read. */
  async function joinedRoom() {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await room.joined()
    const deliver = async (...events: Array<[string, Record<string, unknown>]>) => {
      const done = new Promise<void>((resolve) => room.on('done', () => resolve()))
      for (const [event, payload] of events) sim.push({ agent: 'agent-1' }, 'room:1', event, payload)
      sim.push({ agent: 'agent-1' }, 'room:1', 'done', {})
      await done
    }
    return { room, deliver }
  }

  it('a handler that removes and adds itself again while a message is delivered runs once for it; one added meanwhile gets the next message, not this one', async () => {
    const { room, deliver } = await joinedRoom()
    const calls: string[] = []
    const other = () => void calls.push('other')
    const late = (p: unknown) => void calls.push(`late ${(p as { n: number }).n}`)
    const self = (p: unknown) => {
      calls.push(`self ${(p as { n: number }).n}`)
      if (calls.length > 20) return // bounded, so a dispatch over the live set fails here rather than spinning for ever
      room.off('tick', self)
      room.on('tick', self)
      if ((p as { n: number }).n === 1) room.on('tick', late)
    }
    room.on('tick', self)
    room.on('tick', other)
    await deliver(['tick', { n: 1 }], ['tick', { n: 2 }])
    expect(calls).toEqual(['self 1', 'other', 'other', 'self 2', 'late 2'])
  })

  it('a handler removed while a message is delivered (by a handler before it) is not called for it', async () => {
    const { room, deliver } = await joinedRoom()
    const calls: string[] = []
    const removed = () => void calls.push('removed')
    const removedAny = () => void calls.push('removed any')
    room.on('tick', () => {
      calls.push('first')
      room.off('tick', removed)
      offAny()
    })
    room.on('tick', removed)
    room.onAny(() => void calls.push('any'))
    const offAny = room.onAny(removedAny)
    await deliver(['tick', {}])
    expect(calls).toEqual(['first', 'any', 'any'])
  })

  it('async handlers, any-handlers, status and link listeners that reject are logged as a throw is; nothing escapes', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    const fail = (what: string) => async () => {
      await Promise.resolve()
      throw new Error(`${what} bug`)
    }
    link.on('connected', fail('listener'))
    await link.connect()
    const room = link.channel('room:1')
    room.onStatus(fail('status'))
    room.on('tick', fail('handler'))
    room.onAny(fail('any'))
    await room.joined()
    sim.push({ agent: 'agent-1' }, 'room:1', 'tick', {})
    const errors = () => world().captured.get(link)!.lines.filter((l) => l.level === 'error').map((l) => `${l.message}: ${(l.fields as { error: string }).error}`)
    await vi.waitFor(() => expect(errors()).toHaveLength(4), { timeout: 2000 })
    expect(errors().sort()).toEqual([
      'a link event listener threw: listener bug',
      'any-handler on room:1 threw: any bug',
      'handler of tick on room:1 threw: handler bug',
      'status listener on room:1 threw: status bug',
    ])
  })
})

/**
 * A link (with `policy`) connected to a simulator that never replies to a push, with room:1
 * joined and a push `slow` in flight that the server has read: what it settles with is `pushed`.
 */
async function pushInFlight(policy: LinkPolicyInput = {}) {
  const sim = await world().sim()
  sim.onPush(() => null) // never replies
  const link = world().link(sim, { policy })
  await link.connect()
  const room = link.channel('room:1')
  await room.joined()
  const pushed = settle(room.push('slow', {}, { timeoutMs: 10_000 }))
  await sim.waitFor(() => framesIn(sim.live('agent-1')[0]!, 'slow').length === 1, { what: 'the push to arrive' })
  return { sim, link, room, pushed }
}

describe('pushes', () => {
  it('a push in flight when its transport drops rejects TRANSPORT_LOST at once, not after its timeout', async () => {
    const sim = await world().sim()
    sim.onPush(() => null) // never replies
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await next(link, 'channel', { filter: (e) => e.status === 'joined' })
    const started = performance.now()
    const pushed = settle(room.push('slow', {}, { timeoutMs: 10_000 }))
    await sim.waitFor(() => framesIn(sim.live('agent-1')[0]!, 'slow').length === 1, { what: 'the push to arrive' })
    sim.abort({ agent: 'agent-1' })
    const r = await pushed
    expect(r.ok).toBe(false)
    expect((r as { error: PushError }).error).toMatchObject({ code: 'TRANSPORT_LOST', topic: 'room:1', event: 'slow' })
    // Why the transport went, as the link reported it: the connection dropped without a close frame (1006).
    const reason = (r as { error: PushError }).error.reason
    expect(reason).toMatchObject({ kind: 'dropped', retryable: true })
    expect(reason).toEqual(link.lastDisconnectReason)
    expect((r as { error: PushError }).error.message).toMatch(/^push "slow" on "room:1" failed: TRANSPORT_LOST \(the transport was lost: dropped/)
    expect(performance.now() - started).toBeLessThan(5_000)
  })

  it('a push over the server\'s frame limit rejects TRANSPORT_LOST with the server\'s close 1009 as its reason; the link reconnects', async () => {
    const sim = await world().sim({ maxFrameBytes: 4096 })
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await room.joined()
    const r = await settle(room.push('upload', { blob: 'x'.repeat(8192) }, { timeoutMs: 10_000 }))
    expect(r.ok).toBe(false)
    const error = (r as { error: PushError }).error
    expect(error).toMatchObject({ code: 'TRANSPORT_LOST', topic: 'room:1', event: 'upload' })
    expect(error.reason).toMatchObject({ kind: 'closed', closeCode: 1009, closeName: 'message too big', retryable: true })
    expect(sim.accepted('agent-1')[0]!.closeSent?.code).toBe(1009)
    await untilState(link, 'connected', 5000)
    expect(sim.accepted('agent-1')).toHaveLength(2)
  })

  it("a join or a push over the link's own transport.maxFrameBytes is not sent (the limit binds both ways): the push rejects PUSH_INVALID, the channel's attempt fails other and is retried on its own backoff; the socket and the control channel stay up", async () => {
    const sim = await world().sim({ maxFrameBytes: 64 * 1024 })
    const link = world().link(sim, { policy: { transport: { maxFrameBytes: 64 * 1024 } } })
    await link.connect()
    const big = link.channel('room:big', { blob: 'x'.repeat(100 * 1024) })
    const errored = await next(link, 'channel', { filter: (e) => e.topic === 'room:big' && e.status === 'errored' })
    expect(errored.reason).toMatchObject({ kind: 'other', retryable: true, detail: expect.stringMatching(/^the join params of channel room:big cannot be encoded: the frame would be 1024\d\d bytes, over transport\.maxFrameBytes \(65536\)/) })
    const room = link.channel('room:1')
    await room.joined()
    const r = await settle(room.push('upload', { blob: 'é'.repeat(40 * 1024) }))
    expect((r as { error: PushError }).error).toMatchObject({ code: 'PUSH_INVALID', topic: 'room:1', event: 'upload' })
    expect(String((r as { error: PushError }).error.cause)).toMatch(/the frame would be 819\d\d bytes, over transport\.maxFrameBytes \(65536\)/)
    expect(await room.push('small', { n: 1 })).toEqual({})
    await big.leave()
    expect(link.state).toBe('connected')
    expect(sim.accepted('agent-1')).toHaveLength(1)
    const [socket] = sim.accepted('agent-1')
    expect(framesIn(socket!, 'upload')).toEqual([])
    expect(socket!.joinsReceived.map((j) => j.topic)).toEqual([controlTopic('agent-1'), 'room:1'])
  })

  it('a push in flight when the session is superseded carries the supersede', async () => {
    const { sim, link, pushed } = await pushInFlight()
    sim.supersede('agent-1')
    const r = await pushed
    expect((r as { error: PushError }).error).toMatchObject({ code: 'TRANSPORT_LOST', reason: { kind: 'superseded', retryable: false } })
    expect(link.state).toBe('terminated')
  })

  it("a push in flight when the server closes the control channel (phx_close) carries that loss, as the link's disconnected event does", async () => {
    const { sim, link, pushed } = await pushInFlight()
    const lost = next(link, 'disconnected')
    sim.channelClose({ agent: 'agent-1' }, controlTopic('agent-1'))
    const { reason } = await lost
    expect(reason).toMatchObject({ kind: 'dropped', source: 'channel' })
    expect(((await pushed) as { error: PushError }).error).toMatchObject({ code: 'TRANSPORT_LOST', reason })
  })

  it('a push in flight when the heartbeat times out carries the heartbeat timeout; one cut short by disconnect() carries none', async () => {
    const { sim, link, room, pushed: stalled } = await pushInFlight({ transport: { heartbeatIntervalMs: 100, closeTimeoutMs: 100 } })
    sim.stall({ agent: 'agent-1' })
    const r = await stalled
    expect((r as { error: PushError }).error).toMatchObject({ code: 'TRANSPORT_LOST', reason: { kind: 'timed-out', phase: 'heartbeat' } })
    await untilState(link, 'connected', 5000)
    await room.joined()
    const cut = settle(room.push('slow', {}, { timeoutMs: 10_000 }))
    await sim.waitFor(() => framesIn(sim.live('agent-1')[0]!, 'slow').length === 1, { what: 'the second push to arrive' })
    await link.disconnect()
    const c = await cut
    expect((c as { error: PushError }).error).toMatchObject({ code: 'TRANSPORT_LOST', reason: null })
  })

  it('a push whose join never comes ends PUSH_TIMEOUT at its own timeout, naming the topic and the event; nothing was sent', async () => {
    const sim = await world().sim()
    sim.onJoin('room:held', { reply: 'hold' }, 1)
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:held')
    await sim.waitFor(() => sim.heldJoins.length === 1, { what: 'the join' })
    const r = await settle(room.push('work', { n: 1 }, { timeoutMs: 150 }))
    expect((r as { error: PushError }).error).toBeInstanceOf(PushError)
    expect((r as { error: PushError }).error).toMatchObject({ code: 'PUSH_TIMEOUT', topic: 'room:held', event: 'work' })
    // It never left the link: the server saw no push of it.
    expect(framesIn(sim.live('agent-1')[0]!, 'work')).toHaveLength(0)
    await link.disconnect()
  })

  it('joined() of a channel the host left rejects CHANNEL_CLOSED at once while the session goes on', async () => {
    const { link, room } = await connectedWithRoom()
    await room.leave()
    expect(link.state).toBe('connected')
    await expect(room.joined()).rejects.toMatchObject({ code: 'CHANNEL_CLOSED', topic: 'room:1', event: 'phx_join' })
    await link.disconnect()
  })

  it('joined() with a signal already aborted rejects AbortError, though the channel is joined (as fetch does with one)', async () => {
    const { link, room } = await connectedWithRoom()
    await expect(room.joined()).resolves.toEqual({})
    const signal = AbortSignal.abort()
    await expect(room.joined({ signal })).rejects.toMatchObject({ name: 'AbortError' })
    await link.disconnect()
  })

  it('a push that waited for its join gets what is left of its timeout, not the whole of it again', async () => {
    const sim = await world().sim()
    sim.onJoin('room:slow', { reply: 'hold' }, 1)
    sim.onPush(() => null) // never replies: the push ends by its timeout
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:slow')
    await sim.waitFor(() => sim.heldJoins.length === 1, { what: 'the join' })
    const started = performance.now()
    // The join is answered after half of the push's time (the stimulus, scheduled; the push's end is what is awaited).
    setTimeout(() => sim.answerHeldJoin('room:slow', { reply: 'ok' }), 300)
    const r = await settle(room.push('work', {}, { timeoutMs: 600 }))
    const elapsed = performance.now() - started
    expect((r as { error: PushError }).error).toMatchObject({ code: 'PUSH_TIMEOUT' })
    expect(elapsed).toBeGreaterThanOrEqual(590)
    expect(elapsed).toBeLessThan(850) // 600 ms in all, not 300 + 600
  })

  it("a join's after hook runs after the join reply: a push sent there arrives once the channel is joined", async () => {
    const sim = await world().sim()
    sim.onJoin('room:welcome', { reply: 'ok', after: (c) => c.send({ join_ref: c.channels.get('room:welcome')!.joinRef, ref: null, topic: 'room:welcome', event: 'welcome', payload: { hi: 1 } }) })
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:welcome')
    const welcomed = new Promise<unknown>((resolve) => room.on('welcome', resolve))
    expect(await welcomed).toEqual({ hi: 1 })
    const out = sim.live('agent-1')[0]!.frames.filter((f) => f.dir === 'out' && f.frame?.topic === 'room:welcome').map((f) => f.frame!.event)
    expect(out).toEqual(['phx_reply', 'welcome'])
  })
})
