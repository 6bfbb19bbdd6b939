/**
 * What the connection chart tells its app channel charts and what it emits for the link, read
 * exactly: the connection chart runs alone on a test runtime, so every `startChannel`,
 * `tellChannel` and `stopChannel` it names is recorded with its params; the reports of the other
 * charts are fed in as the link's runtime would deliver them. The last tests run the link's real
 * chart wiring (src/runtime/link-charts.ts) with the socket I/O recorded.
 */
import { describe, expect, it } from 'vitest'
import { DEFAULT_CHANNEL_POLICY, type ChannelEvent } from '../../machines/channel.js'
import { connectionMachine, DEFAULT_CONNECTION_POLICY, type ConnectionEvent } from '../../machines/connection.js'
import { DEFAULT_CONTROL_POLICY } from '../../machines/control.js'
import { DEFAULT_RECONNECT_POLICY } from '../../machines/reconnect.js'
import type { ReasonLike } from '../../machines/types.js'
import { TestRuntime } from '../support/runtime.js'
import { wired } from '../support/wired.js'

const env = { now: () => 1_000, monotonic: () => 1_000, random: () => 0.5 }
const loss: ReasonLike = { kind: 'closed', retryable: true, generation: 1, at: 1_000, closeCode: 1006 }

function harness(options: { channelPolicy?: typeof DEFAULT_CHANNEL_POLICY } = {}) {
  const runtime = new TestRuntime()
  const chart = runtime.run(connectionMachine, { env, ...options })
  const send = (event: ConnectionEvent) => chart.send(event)
  const connect = (generation = 1) => {
    if (generation === 1) send({ type: 'host.connect' })
    send({ type: 'socket.open', generation, epoch: 1 })
    send({ type: 'control.joinOk', generation, epoch: 1 })
  }
  const told = () => runtime.paramsOf<{ topic: string; event: ChannelEvent }>('tellChannel')
  const to = (topic: string) => told().filter((t) => t.topic === topic).map((t) => t.event)
  return { runtime, chart, send, emitted: runtime.emittedEvents as Array<{ type: string }>, connect, told, to }
}

describe('app channel charts', () => {
  it('are started by topic, in order; a topic already running is not started again; one that ended can be', () => {
    const policy = { ...DEFAULT_CHANNEL_POLICY, rejoinInitialDelayMs: 7 }
    const h = harness({ channelPolicy: policy })
    h.send({ type: 'host.channel', topic: 'room:a' })
    h.send({ type: 'host.channel', topic: 'room:b' })
    h.send({ type: 'host.channel', topic: 'room:a' })
    expect(h.runtime.paramsOf('startChannel')).toEqual([{ topic: 'room:a' }, { topic: 'room:b' }])
    expect(h.chart.getSnapshot().context.channels).toEqual(['room:a', 'room:b'])
    h.send({ type: 'channel.status', topic: 'room:a', status: 'left', reason: null })
    expect(h.runtime.paramsOf('stopChannel')).toEqual([{ topic: 'room:a' }])
    h.send({ type: 'host.channel', topic: 'room:a' })
    expect(h.runtime.paramsOf('startChannel')).toEqual([{ topic: 'room:a' }, { topic: 'room:b' }, { topic: 'room:a' }])
    expect(h.chart.getSnapshot().context.channels).toEqual(['room:b', 'room:a'])
    // Topics are host strings, not property names: nothing on Object.prototype is a channel.
    h.send({ type: 'host.channel', topic: 'toString' })
    h.send({ type: 'host.channel', topic: '__proto__' })
    expect(h.chart.getSnapshot().context.channels).toEqual(['room:b', 'room:a', 'toString', '__proto__'])
  })

  it('a channel registered while connected gets transport.up with the current generation; one registered before gets it on connect', () => {
    const h = harness()
    h.send({ type: 'host.channel', topic: 'room:early' })
    expect(h.to('room:early')).toEqual([])
    h.connect()
    expect(h.to('room:early')).toEqual([{ type: 'transport.up', generation: 1 }])
    h.send({ type: 'host.channel', topic: 'room:late' })
    expect(h.to('room:late')).toEqual([{ type: 'transport.up', generation: 1 }])
  })

  it('a transport loss sends transport.down to every channel, and the next transport its own generation', () => {
    const h = harness()
    h.send({ type: 'host.channel', topic: 'room:1' })
    h.send({ type: 'host.channel', topic: 'room:2' })
    h.connect()
    h.send({ type: 'socket.close', reason: loss, generation: 1, epoch: 1 })
    expect(h.to('room:1')).toEqual([{ type: 'transport.up', generation: 1 }, { type: 'transport.down' }])
    expect(h.to('room:2')).toEqual([{ type: 'transport.up', generation: 1 }, { type: 'transport.down' }])
    h.send({ type: 'reconnect.scheduled', delayMs: 10, attempt: 1 })
    h.send({ type: 'reconnect.due' })
    h.connect(2)
    expect(h.to('room:1').at(-1)).toEqual({ type: 'transport.up', generation: 2 })
  })

  it("forwards a channel's adapter events to it as they are, a host leave as host.leave, and nothing to the others", () => {
    const h = harness()
    h.send({ type: 'host.channel', topic: 'room:1' })
    h.send({ type: 'host.channel', topic: 'room:2' })
    const events = [
      { type: 'channel.joinOk', topic: 'room:1', generation: 1, attachId: 1 },
      { type: 'channel.joinError', topic: 'room:1', generation: 1, attachId: 1, reason: loss },
      { type: 'channel.error', topic: 'room:1', generation: 1, attachId: 1 },
      { type: 'channel.close', topic: 'room:1', generation: 1, attachId: 1, reason: loss },
      { type: 'channel.left', topic: 'room:1', generation: 1, attachId: 1 },
      { type: 'channel.attachFailed', topic: 'room:1', generation: 1, attachId: 1, reason: loss },
    ] as const
    for (const e of events) h.send(e)
    h.send({ type: 'host.leaveChannel', topic: 'room:1' })
    expect(h.to('room:1')).toEqual([...events, { type: 'host.leave' }])
    expect(h.to('room:2')).toEqual([])
  })

  it('a channel event for a topic with no chart reaches none and is reported ignored', () => {
    const h = harness()
    h.send({ type: 'host.channel', topic: 'room:1' })
    h.send({ type: 'channel.joinOk', topic: 'room:none', generation: 1, attachId: 1 })
    h.send({ type: 'host.leaveChannel', topic: 'room:none' })
    expect(h.told()).toEqual([])
    expect(h.emitted.filter((e) => e.type === 'link.ignored')).toEqual([
      { type: 'link.ignored', event: 'channel.joinOk', detail: 'from a stale transport (generation 1, current 0)' },
      { type: 'link.ignored', event: 'host.leaveChannel', detail: 'not handled in this state' },
    ])
  })

  it('a channel status is announced; a final one (left, dropped) forgets and stops the chart, others keep it', () => {
    const h = harness()
    h.send({ type: 'host.channel', topic: 'room:1' })
    h.send({ type: 'host.channel', topic: 'room:2' })
    h.send({ type: 'channel.status', topic: 'room:1', status: 'joined', reason: null })
    h.send({ type: 'channel.status', topic: 'room:2', status: 'errored', reason: loss })
    expect(h.chart.getSnapshot().context.channels).toEqual(['room:1', 'room:2'])
    expect(h.runtime.paramsOf('stopChannel')).toEqual([])
    h.send({ type: 'channel.status', topic: 'room:1', status: 'left', reason: null })
    h.send({ type: 'channel.status', topic: 'room:2', status: 'dropped', reason: loss })
    expect(h.chart.getSnapshot().context.channels).toEqual([])
    expect(h.runtime.paramsOf('stopChannel')).toEqual([{ topic: 'room:1' }, { topic: 'room:2' }])
    expect(h.emitted.filter((e) => e.type === 'link.channel')).toEqual([
      { type: 'link.channel', topic: 'room:1', status: 'joined', reason: null },
      { type: 'link.channel', topic: 'room:2', status: 'errored', reason: loss },
      { type: 'link.channel', topic: 'room:1', status: 'left', reason: null },
      { type: 'link.channel', topic: 'room:2', status: 'dropped', reason: loss },
    ])
  })
})

describe('reports the chart emits', () => {
  it('control reports become link events with their fields', () => {
    const h = harness()
    const signal = { correlationId: 'c-1' }
    h.send({ type: 'control.duplicate', signal, sequence: 3 })
    h.send({ type: 'control.handlerFailed', signal, sequence: 4, error: 'boom' })
    h.send({ type: 'control.dropped', signals: [{ signal, sequence: 5, epoch: 1, bytes: 80, key: 'c-1' }], cause: 'reset' })
    expect(h.emitted).toEqual([
      { type: 'link.controlDuplicate', signal, sequence: 3 },
      { type: 'link.controlFailed', signal, sequence: 4, error: 'boom' },
      { type: 'link.controlDropped', signals: [{ signal, sequence: 5, epoch: 1, bytes: 80, key: 'c-1' }], cause: 'reset' },
    ])
  })

  it('the host\'s retry now goes to the reconnect chart; a stop flushes and a new session resets the control chart', () => {
    const h = harness()
    h.connect()
    h.send({ type: 'socket.close', reason: loss, generation: 1, epoch: 1 })
    h.send({ type: 'reconnect.scheduled', delayMs: 5_000, attempt: 1 })
    h.send({ type: 'host.reconnect' })
    expect(h.runtime.paramsOf('tellReconnect').at(-1)).toEqual({ type: 'reconnect.retryNow' })
    h.send({ type: 'host.disconnect' })
    expect(h.runtime.paramsOf('tellControl').at(-1)).toEqual({ type: 'control.flush' })
    h.send({ type: 'host.connect' })
    expect(h.runtime.paramsOf('tellControl').at(-1)).toEqual({ type: 'control.reset' })
  })

  it('the policies it is not given are the defaults', () => {
    const { context } = new TestRuntime().run(connectionMachine, { env }).getSnapshot()
    expect(context.config.policy).toBe(DEFAULT_CONNECTION_POLICY)
    expect(context.config.reconnectPolicy).toBe(DEFAULT_RECONNECT_POLICY)
    expect(context.config.channelPolicy).toBe(DEFAULT_CHANNEL_POLICY)
    expect(context.config.controlPolicy).toBe(DEFAULT_CONTROL_POLICY)
  })

  it('a control signal goes to the control chart with the next sequence number and its epoch', () => {
    const h = harness()
    h.connect()
    h.send({ type: 'control.signal', signal: { correlationId: 'a' }, bytes: 120, generation: 1, epoch: 1 })
    h.send({ type: 'control.signal', signal: { correlationId: 'b' }, generation: 1, epoch: 1 })
    expect(h.chart.getSnapshot().context.signalSeq).toBe(2)
    expect(h.runtime.paramsOf('tellControl').filter((e) => (e as { type: string }).type === 'control.enqueue')).toEqual([
      // The frame's size goes with it (absent: 0).
      { type: 'control.enqueue', signal: { correlationId: 'a' }, sequence: 1, epoch: 1, bytes: 120 },
      { type: 'control.enqueue', signal: { correlationId: 'b' }, sequence: 2, epoch: 1, bytes: 0 },
    ])
  })

  it('a failure of a chart that is not a running app channel is reported ignored with its error', () => {
    const h = harness()
    h.send({ type: 'channel.failed', topic: 'nobody', error: new Error('lost chart') })
    h.send({ type: 'channel.failed', topic: 'nobody', error: 'plain text' })
    expect(h.emitted).toEqual([
      { type: 'link.ignored', event: 'channel.failed', detail: 'a chart of the link failed: lost chart' },
      { type: 'link.ignored', event: 'channel.failed', detail: 'a chart of the link failed: plain text' },
    ])
  })

  it('an app channel chart failing is reported dropped with its error, forgotten and stopped', () => {
    const h = harness()
    h.send({ type: 'host.channel', topic: 'room:1' })
    h.send({ type: 'channel.failed', topic: 'room:1', error: new Error('channel bug') })
    expect(h.emitted).toEqual([
      {
        type: 'link.channel',
        topic: 'room:1',
        status: 'dropped',
        reason: { kind: 'other', detail: 'the channel failed inside phoenix-link: channel bug', retryable: true, generation: 0, at: 1_000 },
      },
    ])
    expect(h.chart.getSnapshot().context.channels).toEqual([])
    expect(h.runtime.paramsOf('stopChannel')).toEqual([{ topic: 'room:1' }])
  })
})

describe("the link's chart wiring", () => {
  it('a loss is announced with the next delay and attempt the reconnect chart chose, and the next transport opens when it is due', () => {
    const w = wired()
    w.charts.send({ type: 'host.connect' })
    expect(w.charts.reconnect).not.toBeNull()
    w.charts.send({ type: 'socket.open', generation: 1, epoch: 1 })
    w.charts.send({ type: 'control.joinOk', generation: 1, epoch: 1 })
    w.charts.send({ type: 'socket.close', reason: loss, generation: 1, epoch: 1 })
    // DEFAULT_RECONNECT_POLICY: a 500 ms ceiling on the first attempt, drawn at 0.5.
    expect(w.emitted.filter((e) => e.type === 'link.disconnected')).toEqual([{ type: 'link.disconnected', reason: loss, nextDelayMs: 250, attempt: 1, conflictProbe: false }])
    expect(w.io.map(([name]) => name)).toEqual(['openTransport', 'joinControl', 'endTransport'])
    w.clock.increment(249)
    expect(w.io).toHaveLength(3)
    w.clock.increment(1)
    expect(w.io.at(-1)).toEqual(['openTransport', { generation: 2, epoch: 1, conflictProbe: false }])
    w.charts.send({ type: 'host.disconnect' })
    expect(w.charts.reconnect).toBeNull()
    expect(w.io.at(-1)).toEqual(['endTransport', { generation: 2, epoch: 1 }])
  })

  it('an app channel runs its own chart: joined on the transport, its chart stopped when it is left', () => {
    const w = wired()
    w.charts.send({ type: 'host.channel', topic: 'room:1' })
    expect([...w.charts.channels.keys()]).toEqual(['room:1'])
    w.charts.send({ type: 'host.connect' })
    w.charts.send({ type: 'socket.open', generation: 1, epoch: 1 })
    w.charts.send({ type: 'control.joinOk', generation: 1, epoch: 1 })
    expect(w.io.at(-1)).toEqual(['joinAttempt', { topic: 'room:1', generation: 1, attachId: 1 }])
    w.charts.send({ type: 'channel.joinOk', topic: 'room:1', generation: 1, attachId: 1 })
    expect(w.emitted.at(-1)).toEqual({ type: 'link.channel', topic: 'room:1', status: 'joined', reason: null })
    const chart = w.charts.channels.get('room:1')!
    w.charts.send({ type: 'host.leaveChannel', topic: 'room:1' })
    expect(w.io.at(-1)).toEqual(['leaveAttempt', { topic: 'room:1', generation: 1, attachId: 1 }])
    w.charts.send({ type: 'channel.left', topic: 'room:1', generation: 1, attachId: 1 })
    expect(w.io.at(-1)).toEqual(['releaseAttempt', { topic: 'room:1', generation: 1, attachId: 1 }])
    expect(w.charts.channels.size).toBe(0)
    expect(chart.isStopped).toBe(true)
    expect(w.crashes).toEqual([])
  })

  it('a channel chart whose transition throws (a phoenix-link bug) is dropped with what it threw; the link and its other channels go on', () => {
    let broken = false
    const w = wired({
      env: {
        ...env,
        now: () => {
          if (!broken) return 1_000
          broken = false // once: the channel chart's assign, not the connection chart's report after it
          throw new Error('clock broke')
        },
      },
    })
    w.charts.send({ type: 'host.channel', topic: 'room:1' })
    w.charts.send({ type: 'host.channel', topic: 'room:2' })
    w.charts.send({ type: 'host.connect' })
    w.charts.send({ type: 'socket.open', generation: 1, epoch: 1 })
    w.charts.send({ type: 'control.joinOk', generation: 1, epoch: 1 })
    w.charts.send({ type: 'channel.joinOk', topic: 'room:1', generation: 1, attachId: 1 })
    const failing = w.charts.channels.get('room:1')!
    // phx_error records a reason stamped with env.now(): that assign throws inside the channel chart.
    broken = true
    w.charts.send({ type: 'channel.error', topic: 'room:1', generation: 1, attachId: 1 })
    expect(broken).toBe(false)
    expect(failing.isStopped).toBe(true)
    expect([...w.charts.channels.keys()]).toEqual(['room:2'])
    expect(w.charts.connection.getSnapshot().context.channels).toEqual(['room:2'])
    expect(w.emitted.at(-1)).toEqual({
      type: 'link.channel',
      topic: 'room:1',
      status: 'dropped',
      reason: { kind: 'other', detail: 'the channel failed inside phoenix-link: clock broke', retryable: true, generation: 1, at: 1_000 },
    })
    expect(w.crashes).toEqual([])
    expect(w.charts.connection.getSnapshot().value).toEqual({ session: { online: { attached: { live: 'connected' } } } })
  })

  it('a connection chart whose transition throws is a crash of the link, reported once with the chart and the error', () => {
    let broken = false
    const w = wired({
      env: {
        ...env,
        now: () => {
          if (broken) throw new Error('clock broke')
          return 1_000
        },
      },
    })
    w.charts.send({ type: 'host.connect' })
    broken = true
    // disconnect() stamps the graceful reason with env.now().
    w.charts.send({ type: 'host.disconnect' })
    expect(w.crashes).toEqual([['connection', new Error('clock broke')]])
    expect(w.charts.connection.isStopped).toBe(true)
  })
})
