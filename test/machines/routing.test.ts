/**
 * What the connection chart sends to its app channel actors and what it emits for the link, read
 * exactly: each channel actor is a recorder (provided in place of the channel chart), so the
 * test sees the spawn input, the actor ids, and every event each actor receives; the emitted
 * events are collected with actor.on('*').
 */
import { describe, expect, it } from 'vitest'
import { createActor, fromCallback, SimulatedClock } from 'xstate'
import { DEFAULT_CHANNEL_POLICY } from '../../machines/channel.js'
import { connectionMachine } from '../../machines/connection.js'
import type { ReasonLike } from '../../machines/types.js'

const env = { now: () => 1_000, monotonic: () => 1_000, random: () => 0.5 }
const inert = fromCallback(() => {})
const loss: ReasonLike = { kind: 'closed', retryable: true, generation: 1, at: 1_000, closeCode: 1006 }

function harness(options: { channelPolicy?: typeof DEFAULT_CHANNEL_POLICY } = {}) {
  const received: Array<{ id: string; topic: string; event: { type: string } }> = []
  const inputs: Array<{ id: string; input: unknown }> = []
  const recorder = fromCallback<{ type: string }, { topic: string }>(({ receive, input, self }) => {
    inputs.push({ id: self.id, input })
    receive((event) => received.push({ id: self.id, topic: input.topic, event }))
  })
  const machine = connectionMachine.provide({ actors: { transport: inert as never, controlChannel: inert as never, channel: recorder as never } })
  const actor = createActor(machine, { input: { env, ...options }, clock: new SimulatedClock() })
  const emitted: Array<{ type: string }> = []
  actor.on('*', (e) => emitted.push(e as { type: string }))
  actor.start()
  const connect = (generation = 1) => {
    if (generation === 1) actor.send({ type: 'host.connect' })
    actor.send({ type: 'socket.open', generation, epoch: 1 })
    actor.send({ type: 'control.joinOk', generation, epoch: 1 })
  }
  const to = (topic: string) => received.filter((r) => r.topic === topic).map((r) => r.event)
  return { actor, received, inputs, emitted, connect, to }
}

describe('app channel actors', () => {
  it('are spawned with their topic, the channel policy and the env, under the lowest free id', () => {
    const policy = { ...DEFAULT_CHANNEL_POLICY, rejoinInitialDelayMs: 7 }
    const h = harness({ channelPolicy: policy })
    h.actor.send({ type: 'host.channel', topic: 'room:a' })
    h.actor.send({ type: 'host.channel', topic: 'room:b' })
    h.actor.send({ type: 'host.channel', topic: 'room:c' })
    expect(h.inputs.map((i) => i.id)).toEqual(['channel-0', 'channel-1', 'channel-2'])
    expect(h.inputs[0]!.input).toEqual({ topic: 'room:a', policy, env })
    expect(h.inputs[0]!.input).toMatchObject({ env: expect.any(Object) })
    expect((h.inputs[0]!.input as { env: unknown }).env).toBe(env)
    // room:b ends: its id is the one the next channel gets.
    h.actor.send({ type: 'channel.status', topic: 'room:b', status: 'left', reason: null })
    h.actor.send({ type: 'host.channel', topic: 'room:d' })
    expect(h.inputs.at(-1)).toEqual({ id: 'channel-1', input: expect.objectContaining({ topic: 'room:d' }) })
    h.actor.send({ type: 'host.channel', topic: 'room:e' })
    expect(h.inputs.at(-1)!.id).toBe('channel-3')
    h.actor.stop()
  })

  it('a channel registered while connected gets transport.up with the current generation; one registered before gets it on connect', () => {
    const h = harness()
    h.actor.send({ type: 'host.channel', topic: 'room:early' })
    expect(h.to('room:early')).toEqual([])
    h.connect()
    expect(h.to('room:early')).toEqual([{ type: 'transport.up', generation: 1 }])
    h.actor.send({ type: 'host.channel', topic: 'room:late' })
    expect(h.to('room:late')).toEqual([{ type: 'transport.up', generation: 1 }])
    h.actor.stop()
  })

  it('a transport loss sends transport.down to every channel, and the next transport its own generation', () => {
    const h = harness()
    h.actor.send({ type: 'host.channel', topic: 'room:1' })
    h.actor.send({ type: 'host.channel', topic: 'room:2' })
    h.connect()
    h.actor.send({ type: 'socket.close', reason: loss, generation: 1, epoch: 1 })
    expect(h.to('room:1')).toEqual([{ type: 'transport.up', generation: 1 }, { type: 'transport.down' }])
    expect(h.to('room:2')).toEqual([{ type: 'transport.up', generation: 1 }, { type: 'transport.down' }])
    h.actor.stop()
  })

  it("forwards a channel's adapter events to it as they are, a host leave as host.leave, and nothing to the others", () => {
    const h = harness()
    h.actor.send({ type: 'host.channel', topic: 'room:1' })
    h.actor.send({ type: 'host.channel', topic: 'room:2' })
    const events = [
      { type: 'channel.joinOk', topic: 'room:1', generation: 1, attachId: 1 },
      { type: 'channel.joinError', topic: 'room:1', generation: 1, attachId: 1, reason: loss },
      { type: 'channel.error', topic: 'room:1', generation: 1, attachId: 1 },
      { type: 'channel.close', topic: 'room:1', generation: 1, attachId: 1, reason: loss },
      { type: 'channel.left', topic: 'room:1', generation: 1, attachId: 1 },
      { type: 'channel.attachFailed', topic: 'room:1', generation: 1, attachId: 1, error: new Error('x') },
    ] as const
    for (const e of events) h.actor.send(e as never)
    h.actor.send({ type: 'host.leaveChannel', topic: 'room:1' })
    expect(h.to('room:1')).toEqual([...events, { type: 'host.leave' }])
    expect(h.to('room:2')).toEqual([])
    h.actor.stop()
  })

  it('a channel event for a topic with no actor reaches no actor and is reported ignored', () => {
    const h = harness()
    h.actor.send({ type: 'host.channel', topic: 'room:1' })
    h.actor.send({ type: 'channel.joinOk', topic: 'room:none', generation: 1, attachId: 1 })
    h.actor.send({ type: 'host.leaveChannel', topic: 'room:none' })
    expect(h.received).toEqual([])
    expect(h.emitted.filter((e) => e.type === 'link.ignored')).toEqual([
      { type: 'link.ignored', event: 'channel.joinOk', detail: 'from a stale transport (generation 1, current 0)' },
      { type: 'link.ignored', event: 'host.leaveChannel', detail: 'not handled in this state' },
    ])
    h.actor.stop()
  })

  it('a channel status is announced; a final one (left, dropped) forgets and stops the actor, others keep it', () => {
    const h = harness()
    h.actor.send({ type: 'host.channel', topic: 'room:1' })
    h.actor.send({ type: 'host.channel', topic: 'room:2' })
    h.actor.send({ type: 'channel.status', topic: 'room:1', status: 'joined', reason: null })
    h.actor.send({ type: 'channel.status', topic: 'room:2', status: 'errored', reason: loss })
    expect(Object.keys(h.actor.getSnapshot().context.channels)).toEqual(['room:1', 'room:2'])
    h.actor.send({ type: 'channel.status', topic: 'room:1', status: 'left', reason: null })
    h.actor.send({ type: 'channel.status', topic: 'room:2', status: 'dropped', reason: loss })
    expect(h.actor.getSnapshot().context.channels).toEqual({})
    expect(h.actor.getSnapshot().children).not.toHaveProperty('channel-0')
    expect(h.emitted.filter((e) => e.type === 'link.channel')).toEqual([
      { type: 'link.channel', topic: 'room:1', status: 'joined', reason: null },
      { type: 'link.channel', topic: 'room:2', status: 'errored', reason: loss },
      { type: 'link.channel', topic: 'room:1', status: 'left', reason: null },
      { type: 'link.channel', topic: 'room:2', status: 'dropped', reason: loss },
    ])
    // A final status of a topic already forgotten changes nothing.
    h.actor.send({ type: 'channel.status', topic: 'room:1', status: 'left', reason: null })
    expect(h.actor.getSnapshot().context.channels).toEqual({})
    h.actor.stop()
  })
})

describe('reports the chart emits', () => {
  it('control reports become link events with their fields', () => {
    const h = harness()
    const signal = { correlationId: 'c-1' }
    h.actor.send({ type: 'control.duplicate', signal, sequence: 3 } as never)
    h.actor.send({ type: 'control.handlerFailed', signal, sequence: 4, error: 'boom' } as never)
    h.actor.send({ type: 'control.dropped', signals: [{ signal, sequence: 5, epoch: 1 }] } as never)
    expect(h.emitted).toEqual([
      { type: 'link.controlDuplicate', signal, sequence: 3 },
      { type: 'link.controlFailed', signal, sequence: 4, error: 'boom' },
      { type: 'link.controlDropped', signals: [{ signal, sequence: 5, epoch: 1 }] },
    ])
    h.actor.stop()
  })

  it('a loss is announced with the next delay and attempt the reconnect chart chose', () => {
    const h = harness()
    h.connect()
    h.actor.send({ type: 'socket.close', reason: loss, generation: 1, epoch: 1 })
    // DEFAULT_RECONNECT_POLICY: a 500 ms ceiling on the first attempt, drawn at 0.5.
    expect(h.emitted.filter((e) => e.type === 'link.disconnected')).toEqual([{ type: 'link.disconnected', reason: loss, nextDelayMs: 250, attempt: 1 }])
    h.actor.stop()
  })

  it('a control signal reaches the control chart with the next sequence number and its epoch', () => {
    const h = harness()
    h.connect()
    h.actor.send({ type: 'control.signal', signal: { correlationId: 'a' }, generation: 1, epoch: 1 })
    h.actor.send({ type: 'control.signal', signal: { correlationId: 'b' }, generation: 1, epoch: 1 })
    expect(h.actor.getSnapshot().context.signalSeq).toBe(2)
    const control = h.actor.getSnapshot().children.control!.getSnapshot() as { context: { queue: unknown[] } }
    expect(control.context.queue).toEqual([
      { signal: { correlationId: 'a' }, sequence: 1, epoch: 1 },
      { signal: { correlationId: 'b' }, sequence: 2, epoch: 1 },
    ])
    h.actor.stop()
  })

  it('an actor of the chart failing that is not an app channel is reported ignored with its error', () => {
    const h = harness()
    h.actor.send({ type: 'xstate.error.actor.nobody', error: new Error('lost actor') } as never)
    h.actor.send({ type: 'xstate.error.actor.nobody', error: 'plain text' } as never)
    expect(h.emitted).toEqual([
      { type: 'link.ignored', event: 'xstate.error.actor.nobody', detail: 'an actor of the chart failed: lost actor' },
      { type: 'link.ignored', event: 'xstate.error.actor.nobody', detail: 'an actor of the chart failed: plain text' },
    ])
    h.actor.stop()
  })

  it('an app channel actor failing is reported dropped with its error and forgotten', () => {
    const h = harness()
    h.actor.send({ type: 'host.channel', topic: 'room:1' })
    h.actor.send({ type: 'xstate.error.actor.channel-0', actorId: 'channel-0', error: new Error('channel bug') } as never)
    expect(h.emitted).toEqual([
      {
        type: 'link.channel',
        topic: 'room:1',
        status: 'dropped',
        reason: { kind: 'other', detail: 'the channel failed inside phoenix-link: channel bug', retryable: true, generation: 0, at: 1_000 },
      },
    ])
    expect(h.actor.getSnapshot().context.channels).toEqual({})
    h.actor.stop()
  })
})
