/**
 * One link's charts on one runtime (src/runtime/link-charts.ts): each I/O action a chart names
 * reaches the right place with its params (the adapter, another chart, the host), the control
 * delivery path with its AbortSignal, crashes routed by chart, what the host hears, inspection.
 */
import { describe, expect, it } from 'vitest'
import { DEFAULT_CHANNEL_POLICY } from '../../machines/channel.js'
import { DEFAULT_CONTROL_POLICY } from '../../machines/control.js'
import { DEFAULT_RECONNECT_POLICY } from '../../machines/reconnect.js'
import type { RuntimeInspectionEvent } from '../../src/runtime/chart-runner.js'
import { ENV, wired } from '../support/wired.js'

const signal = (correlationId: string) => ({ type: 'control.signal' as const, signal: { correlationId }, generation: 1, epoch: 1 })

/** Wired charts whose handler of signal `a` (session 1) is still running when session 2 starts: it is abandoned (its signal aborts). */
function abandonedByNewSession(): ReturnType<typeof wired> {
  const w = wired()
  w.connect()
  w.charts.send(signal('a'))
  w.charts.send({ type: 'host.disconnect' })
  w.charts.send({ type: 'control.left', generation: 1, epoch: 1 })
  expect(w.delivered[0]!.signal.aborted).toBe(false)
  w.charts.send({ type: 'host.connect' })
  expect(w.delivered[0]!.signal.aborted).toBe(true)
  return w
}

describe('what the connection chart starts', () => {
  it('the reconnect chart per session, with the policy and env the link was given; stopped when the session ends', () => {
    const w = wired({ policy: { reconnect: { initialDelayMs: 123 } } })
    expect(w.charts.reconnect).toBeNull()
    w.charts.send({ type: 'host.connect' })
    const first = w.charts.reconnect!
    expect(first.getSnapshot().context.policy).toEqual({ ...DEFAULT_RECONNECT_POLICY, initialDelayMs: 123 })
    expect(first.getSnapshot().context.env).toBe(ENV)
    expect(first._parent).toBe(w.charts.connection)
    w.charts.send({ type: 'host.disconnect' })
    expect(w.charts.reconnect).toBeNull()
    expect(first.isStopped).toBe(true)
    w.charts.send({ type: 'host.connect' })
    expect(w.charts.reconnect).not.toBe(first)
    expect(w.charts.reconnect!.isStopped).toBe(false)
  })

  it('a channel chart per topic, with its topic, the channel policy and the env; a topic started again replaces the old chart', () => {
    const w = wired({ policy: { channel: { rejoinInitialDelayMs: 7 } } })
    w.charts.send({ type: 'host.channel', topic: 'room:1' })
    const chart = w.charts.channels.get('room:1')!
    expect(chart.id).toBe('channel:room:1')
    expect(chart.getSnapshot().context).toMatchObject({ topic: 'room:1', policy: { ...DEFAULT_CHANNEL_POLICY, rejoinInitialDelayMs: 7 }, env: ENV })
    expect(chart._parent).toBe(w.charts.connection)
    // The runtime's startChannel stops a chart still registered under the topic (the chart never asks it to).
    w.charts.execute(w.charts.connection, 'startChannel', { topic: 'room:1' })
    expect(chart.isStopped).toBe(true)
    expect(w.charts.channels.get('room:1')).not.toBe(chart)
  })

  it('the control chart with the first signal (not for a flush or a reset before it), with the control policy, for the link\'s life', () => {
    const w = wired({ policy: { control: { dedupeWindow: 3 } } })
    w.connect()
    w.charts.send({ type: 'host.disconnect' })
    w.charts.send({ type: 'control.left', generation: 1, epoch: 1 })
    w.charts.send({ type: 'host.connect' })
    expect(w.charts.control).toBeNull()
    w.charts.send({ type: 'socket.open', generation: 2, epoch: 2 })
    w.charts.send({ type: 'control.joinOk', generation: 2, epoch: 2 })
    w.charts.send({ ...signal('a'), generation: 2, epoch: 2 })
    const control = w.charts.control!
    expect(control.id).toBe('control')
    expect(control.getSnapshot().context.policy).toEqual({ ...DEFAULT_CONTROL_POLICY, dedupeWindow: 3 })
    w.charts.send({ type: 'host.disconnect' })
    w.charts.send({ type: 'host.connect' })
    expect(w.charts.control).toBe(control)
  })
})

describe('the adapter I/O', () => {
  it('each socket and channel operation reaches the adapter with the origin it names', () => {
    const w = wired()
    w.charts.send({ type: 'host.channel', topic: 'room:1' })
    w.connect()
    w.charts.send({ type: 'channel.joinOk', topic: 'room:1', generation: 1, attachId: 1 })
    w.charts.send({ type: 'control.crashed', reason: { kind: 'dropped', source: 'channel', retryable: true, generation: 1, at: 0 }, generation: 1, epoch: 1 })
    w.clock.increment(DEFAULT_CHANNEL_POLICY.rejoinMaxDelayMs)
    w.charts.send({ type: 'control.joinOk', generation: 1, epoch: 1 })
    w.charts.send({ type: 'host.leaveChannel', topic: 'room:1' })
    w.charts.send({ type: 'channel.left', topic: 'room:1', generation: 1, attachId: 1 })
    w.charts.send({ type: 'host.disconnect' })
    w.charts.send({ type: 'control.left', generation: 1, epoch: 1 })
    const origin = { generation: 1, epoch: 1 }
    const attempt = { topic: 'room:1', generation: 1, attachId: 1 }
    expect(w.io).toEqual([
      ['openTransport', { ...origin, conflictProbe: false }],
      ['joinControl', origin],
      ['joinAttempt', attempt],
      ['rejoinControl', origin],
      ['leaveAttempt', attempt],
      ['releaseAttempt', attempt],
      ['leaveControl', origin],
      ['endTransport', origin],
    ])
  })

  it('a throwing adapter operation is reported to the host and fed back to the chart that named it', () => {
    const w = wired({ failOn: 'openTransport' })
    w.charts.send({ type: 'host.connect' })
    expect(w.failures).toEqual([['connection', 'openTransport', new Error('openTransport broke')]])
    expect(w.charts.connection.getSnapshot().context.lastReason).toMatchObject({ kind: 'other', detail: 'the adapter failed inside phoenix-link: openTransport broke' })
    expect(w.crashes).toEqual([])
  })

  it('an I/O action no chart of the link names is a bug that says which chart named it', () => {
    const w = wired()
    expect(() => w.charts.execute(w.charts.connection, 'teleport', {})).toThrow('the connection chart named an I/O action this link does not carry out: teleport')
  })

  it('a message to a chart that is not running is dropped: a reconnect chart outside a session, a channel with no chart', () => {
    const w = wired()
    w.charts.execute(w.charts.connection, 'tellReconnect', { type: 'reconnect.opened' })
    w.charts.execute(w.charts.connection, 'tellChannel', { topic: 'room:none', event: { type: 'transport.down' } })
    w.charts.execute(w.charts.connection, 'stopChannel', { topic: 'room:none' })
    expect(w.crashes).toEqual([])
    expect(w.charts.channels.size).toBe(0)
  })
})

describe('control delivery', () => {
  it('each signal goes to the host with an AbortSignal; when the handler settles the next one goes', async () => {
    const w = wired()
    w.connect()
    w.charts.send(signal('a'))
    w.charts.send(signal('b'))
    expect(w.delivered.map((d) => d.queued.signal.correlationId)).toEqual(['a'])
    expect(w.delivered[0]!.signal.aborted).toBe(false)
    w.delivered[0]!.resolve()
    await Promise.resolve()
    await Promise.resolve()
    expect(w.delivered.map((d) => d.queued.signal.correlationId)).toEqual(['a', 'b'])
    w.delivered[1]!.reject(new Error('handler broke'))
    await Promise.resolve()
    await Promise.resolve()
    expect(w.emitted).toContainEqual({ type: 'link.controlFailed', signal: { correlationId: 'b' }, sequence: 2, error: new Error('handler broke') })
    expect(w.charts.control!.getSnapshot().value).toBe('idle')
  })

  it('a new session abandons the handler still running: its AbortSignal aborts, and its late settling changes nothing', async () => {
    const w = abandonedByNewSession()
    w.charts.send({ type: 'socket.open', generation: 2, epoch: 2 })
    w.charts.send({ type: 'control.joinOk', generation: 2, epoch: 2 })
    w.charts.send({ ...signal('b'), generation: 2, epoch: 2 })
    w.delivered[0]!.resolve()
    await Promise.resolve()
    await Promise.resolve()
    expect(w.charts.control!.getSnapshot().value).toBe('delivering')
    expect(w.charts.control!.getSnapshot().context.queue.map((q) => q.sequence)).toEqual([2])
    expect(w.delivered[1]!.signal.aborted).toBe(false)
    // The late settling did not release the running handler: a crash still aborts it.
    w.charts.stopAll()
    expect(w.delivered[1]!.signal.aborted).toBe(true)
  })

  it('stopAll() (a crashed link) stops every chart and abandons the handler running', () => {
    const w = wired()
    w.charts.send({ type: 'host.channel', topic: 'room:1' })
    w.connect()
    w.charts.send(signal('a'))
    w.charts.stopAll()
    expect(w.delivered[0]!.signal.aborted).toBe(true)
    expect([w.charts.connection, w.charts.control!, w.charts.reconnect!, w.charts.channels.get('room:1')!].map((c) => c.isStopped)).toEqual([true, true, true, true])
    expect(w.charts.connection.pendingDelays()).toEqual([])
  })

  it("stopAll() stops every chart though a stop throws (the host's clock failing to clear a timer), then throws the first error", () => {
    const w = wired()
    w.charts.send({ type: 'host.channel', topic: 'room:1' })
    w.connect()
    w.charts.send(signal('a'))
    let clears = 0
    w.clock.clearTimeout = () => {
      throw new Error(`clear ${++clears} broke`)
    }
    let thrown: unknown
    try {
      w.charts.stopAll()
    } catch (error) {
      thrown = error
    }
    expect(thrown).toEqual(new Error('clear 1 broke'))
    expect([w.charts.connection, w.charts.control!, w.charts.reconnect!, w.charts.channels.get('room:1')!].map((c) => c.isStopped)).toEqual([true, true, true, true])
    expect(w.delivered[0]!.signal.aborted).toBe(true)
  })

  it('stopAll() before any signal or session stops what there is', () => {
    const w = wired()
    w.charts.stopAll()
    expect(w.charts.connection.isStopped).toBe(true)
  })

  it("stopAll() after a handler settled aborts nothing: a settled handler's signal is not aborted later", async () => {
    const w = wired()
    w.connect()
    w.charts.send(signal('a'))
    w.delivered[0]!.resolve()
    await Promise.resolve()
    await Promise.resolve()
    w.charts.stopAll()
    expect(w.delivered[0]!.signal.aborted).toBe(false)
  })

  it('a handler abandoned by a new session that settles when no other is running changes nothing', async () => {
    const w = abandonedByNewSession()
    w.delivered[0]!.resolve()
    await Promise.resolve()
    await Promise.resolve()
    expect(w.crashes).toEqual([])
    expect(w.failures).toEqual([])
    expect(w.charts.control!.getSnapshot().value).toBe('idle')
  })
})

describe('what the host hears', () => {
  it("the connection chart's emitted events and each of its snapshots; not the other charts'", () => {
    const w = wired()
    w.charts.send({ type: 'host.channel', topic: 'room:1' })
    const before = w.changes()
    w.connect()
    expect(w.changes() - before).toBe(3)
    // A commit of another chart alone (the reconnect chart's) is not the link's snapshot.
    const quiet = w.changes()
    w.charts.send(w.charts.reconnect!, { type: 'reconnect.opened' })
    expect(w.changes()).toBe(quiet)
    expect(w.emitted.map((e) => e.type)).toEqual(['link.connected'])
    w.charts.send({ type: 'channel.joinOk', topic: 'room:1', generation: 1, attachId: 1 })
    expect(w.emitted.map((e) => e.type)).toEqual(['link.connected', 'link.channel'])
  })

  it('a crash: a channel chart is dropped by the connection chart; the reconnect chart is the link crashing', () => {
    const w = wired()
    w.charts.send({ type: 'host.channel', topic: 'room:1' })
    w.connect()
    const channel = w.charts.channels.get('room:1')!
    w.charts.crashed(channel, new Error('channel bug'))
    expect(w.charts.channels.has('room:1')).toBe(false)
    // Its exit actions never run: its attempt is ended and the topic left by the adapter.
    expect(w.io.filter(([name]) => name === 'dropTopic')).toEqual([['dropTopic', 'room:1']])
    expect(w.emitted.at(-1)).toMatchObject({ type: 'link.channel', topic: 'room:1', status: 'dropped' })
    expect(w.crashes).toEqual([])
    w.charts.crashed(w.charts.reconnect!, new Error('reconnect bug'))
    expect(w.crashes).toEqual([['reconnect', new Error('reconnect bug')]])
  })

  it("a channel chart that crashed is not forgotten in another's place: a later chart of the topic stays", () => {
    const w = wired()
    w.charts.send({ type: 'host.channel', topic: 'room:1' })
    const old = w.charts.channels.get('room:1')!
    w.charts.execute(w.charts.connection, 'startChannel', { topic: 'room:1' })
    const current = w.charts.channels.get('room:1')!
    w.charts.crashed(old, new Error('late'))
    expect(w.charts.channels.get('room:1')).toBe(current)
    // The topic is the later chart's: nothing of it is dropped.
    expect(w.io.some(([name]) => name === 'dropTopic')).toBe(false)
  })

  it('inspection: from the option, and from any observer added later until it stops; none built while nobody watches', () => {
    const fromOption: string[] = []
    const w = wired({ inspect: (e) => void fromOption.push(`${e.type} ${e.actorRef.id}`) })
    expect(w.charts.inspect).not.toBeNull()
    const later: RuntimeInspectionEvent[] = []
    const stop = w.charts.observe((e) => void later.push(e))
    w.charts.send({ type: 'host.connect' })
    stop()
    w.charts.send({ type: 'host.disconnect' })
    expect(later.map((e) => e.type)).toContain('@xstate.event')
    expect(new Set(later.map((e) => e.actorRef.id))).toEqual(new Set(['connection', 'reconnect']))
    expect(fromOption.length).toBeGreaterThan(later.length)
    const quiet = wired()
    expect(quiet.charts.inspect).toBeNull()
    const off = quiet.charts.observe(() => {})
    expect(quiet.charts.inspect).not.toBeNull()
    off()
    expect(quiet.charts.inspect).toBeNull()
    off()
    expect(quiet.charts.inspect).toBeNull()
  })

  it("a listener of a chart's snapshots that throws is reported by chart; the link's charts go on", () => {
    const w = wired()
    w.charts.connection.subscribe(() => {
      throw new Error('listener broke')
    })
    w.connect()
    expect(w.listenerErrors[0]).toEqual(['connection', new Error('listener broke')])
    expect(w.charts.connection.snapshot.value).toMatchObject({ session: { online: expect.anything() } })
    expect(w.emitted.map((e) => e.type)).toEqual(['link.connected'])
  })

  it('an inspection observer removed leaves the others observing', () => {
    const w = wired()
    const kept: string[] = []
    const off = w.charts.observe(() => {})
    w.charts.observe((e) => void kept.push(e.type))
    off()
    w.charts.send({ type: 'host.connect' })
    expect(kept).toContain('@xstate.event')
  })

  it('an inspection observer that stops observing in the middle of a transition (at a microstep) is not called again, and nothing is reported', () => {
    const w = wired()
    const seen: string[] = []
    const off = w.charts.observe((e) => {
      seen.push(e.type)
      if (e.type === '@xstate.microstep') off()
    })
    w.charts.send({ type: 'host.connect' })
    expect(seen).toEqual(['@xstate.event', '@xstate.microstep'])
    expect(w.listenerErrors).toEqual([])
    expect(w.charts.inspect).toBeNull()
  })

  it('an inspection observer that throws is reported, and every other observer still sees every event', () => {
    const seen: string[] = []
    const w = wired()
    w.charts.observe(() => {
      throw new Error('observer broke')
    })
    w.charts.observe((e) => void seen.push(e.type))
    w.charts.send({ type: 'host.connect' })
    expect(seen).toContain('@xstate.event')
    expect(seen.filter((t) => t === '@xstate.snapshot').length).toBeGreaterThan(0)
    expect(w.listenerErrors.length).toBe(seen.length)
    expect(w.listenerErrors[0]).toEqual(['connection', new Error('observer broke')])
    expect(w.charts.connection.snapshot.value).toMatchObject({ session: { online: expect.anything() } })
  })
})

describe('a channel report held while the reconnect chart decides', () => {
  it('is queued again (redeliver) behind a give-up: the host hears the session end, then the channel', () => {
    const w = wired({ policy: { reconnect: { maxAttempts: 0 } } })
    w.connect()
    w.charts.send({ type: 'host.channel', topic: 'room:1' })
    w.emitted.length = 0
    w.charts.send({ type: 'socket.close', reason: { kind: 'closed', retryable: true, closeCode: 1000, generation: 1, at: 0 }, generation: 1, epoch: 1 })
    expect(w.emitted.map((e) => (e.type === 'link.channel' ? `${e.type} ${e.topic} ${e.status}` : e.type))).toEqual(['link.disconnected', 'link.channel room:1 detached'])
    expect(w.emitted[0]).toMatchObject({ type: 'link.disconnected', nextDelayMs: null, reason: { kind: 'suppressed' } })
    expect(w.charts.connection.getSnapshot().value).toBe('terminated')
    expect(w.charts.connection.getSnapshot().context.heldChannelReports).toBeNull()
  })
})
