/**
 * The channel chart: join, rejoin after phx_error on the same transport, drop on a rejected join
 * or phx_close, keep through join timeouts and transport losses, leave. Driven on a simulated
 * clock by the link's chart runtime, with each join attempt's I/O recorded.
 */
import { describe, expect, it } from 'vitest'
import { createActor, SimulatedClock } from 'xstate'
import { channelMachine, DEFAULT_CHANNEL_POLICY, type AttachOrigin, type ChannelEvent, type ChannelStatusReport } from '../../machines/channel.js'
import { classifyChannelClose, classifyJoinError } from '../../src/reasons.js'
import { TestRuntime } from '../support/runtime.js'

function harness(env = { now: () => 0, monotonic: () => 0, random: () => 0.5 }) {
  const runtime = new TestRuntime()
  // Each join attempt the chart starts, and what became of it (released: the chart moved on; left: phx_leave).
  const attempts: Array<{ input: AttachOrigin; stopped: boolean; left: boolean }> = []
  runtime.onExecute = (_chart, type, params) => {
    const attempt = params as AttachOrigin
    const record = attempts.find((a) => a.input.attachId === attempt.attachId)
    if (type === 'joinAttempt') attempts.push({ input: attempt, stopped: false, left: false })
    else if (type === 'releaseAttempt') record!.stopped = true
    else if (type === 'leaveAttempt') record!.left = true
  }
  const chart = runtime.run(channelMachine, { topic: 'room:1', policy: DEFAULT_CHANNEL_POLICY, env })
  const child = () => chart.getSnapshot()
  const current = () => {
    const c = child().context
    return { topic: 'room:1', generation: c.generation, attachId: c.attachId }
  }
  const reports = () => runtime.paramsOf<ChannelStatusReport>('report')
  return {
    runtime,
    clock: runtime.clock,
    attempts,
    child,
    current,
    statuses: () => reports().map((r) => r.status),
    reports,
    send: (event: ChannelEvent) => chart.send(event),
    stop: () => chart.stop(),
  }
}

describe('channel chart', () => {
  it('joins when the transport is up and reports joined', () => {
    const h = harness()
    expect(h.child().value).toBe('detached')
    h.send({ type: 'transport.up', generation: 3 })
    expect(h.attempts).toHaveLength(1)
    expect(h.attempts[0]!.input).toEqual({ topic: 'room:1', generation: 3, attachId: 1 })
    h.send({ type: 'channel.joinOk', ...h.current() })
    expect(h.statuses()).toEqual(['joined'])
    h.stop()
  })

  it('rejoins on the same transport after phx_error, with a fresh join attempt after the rejoin delay', () => {
    const h = harness()
    h.send({ type: 'transport.up', generation: 1 })
    h.send({ type: 'channel.joinOk', ...h.current() })
    h.send({ type: 'channel.error', ...h.current() })
    expect(h.statuses()).toEqual(['joined', 'errored'])
    expect(h.attempts[0]!.stopped).toBe(true)
    h.clock.increment(DEFAULT_CHANNEL_POLICY.rejoinMaxDelayMs)
    expect(h.attempts).toHaveLength(2)
    expect(h.attempts[1]!.input).toEqual({ topic: 'room:1', generation: 1, attachId: 2 })
    h.send({ type: 'channel.joinOk', ...h.current() })
    expect(h.statuses().at(-1)).toBe('joined')
    h.stop()
  })

  it('a channel that crashes right after each join backs off to rejoinMaxDelayMs; a join that holds rejoinStableAfterMs starts over', () => {
    const h = harness()
    h.send({ type: 'transport.up', generation: 1 })
    // random() is 0.5: each delay is three quarters of its ceiling (1000, 2000, 4000, 8000, 10000).
    const waits: number[] = []
    for (let i = 0; i < 5; i++) {
      h.send({ type: 'channel.joinOk', ...h.current() })
      h.send({ type: 'channel.error', ...h.current() })
      const before = h.attempts.length
      let waited = 0
      while (h.attempts.length === before) {
        h.clock.increment(50)
        waited += 50
      }
      waits.push(waited)
    }
    expect(waits).toEqual([750, 1500, 3000, 6000, 7500])
    expect(h.child().context.rejoins).toBe(5)
    h.send({ type: 'channel.joinOk', ...h.current() })
    h.clock.increment(DEFAULT_CHANNEL_POLICY.rejoinStableAfterMs - 1)
    expect(h.child().context.rejoins).toBe(5)
    h.clock.increment(1)
    expect(h.child().context.rejoins).toBe(0)
    h.send({ type: 'channel.error', ...h.current() })
    h.clock.increment(749)
    expect(h.attempts).toHaveLength(6)
    h.clock.increment(1)
    expect(h.attempts).toHaveLength(7)
    h.stop()
  })

  it('drops the channel with a typed reason when a join is refused', () => {
    const h = harness()
    h.send({ type: 'transport.up', generation: 1 })
    h.send({ type: 'channel.joinError', reason: classifyJoinError({ reason: 'unauthorized' }, 1, 0), ...h.current() })
    expect(h.reports().at(-1)).toMatchObject({ status: 'dropped', reason: { kind: 'rejected', cause: 'unauthorized', phase: 'join' } })
    expect(h.child().status).toBe('done')
    h.stop()
  })

  it("a retryable refusal of an earlier join attempt changes nothing: the current attempt's join goes on", () => {
    const h = harness()
    h.send({ type: 'transport.up', generation: 1 })
    const first = h.current()
    h.send({ type: 'channel.joinError', reason: classifyJoinError({ reason: 'join crashed' }, 1, 0), ...first })
    h.clock.increment(60_000)
    expect(h.attempts).toHaveLength(2)
    const reports = h.reports().length
    h.send({ type: 'channel.joinError', reason: classifyJoinError({ reason: 'rate_limited', retry_after: 3 }, 1, 0), ...first })
    expect(h.reports()).toHaveLength(reports)
    expect(h.attempts[1]!.stopped).toBe(false)
    expect(h.child().context.attachId).toBe(h.attempts[1]!.input.attachId)
  })

  it('a join refused for a cause that passes (rate_limited, join crashed) is rejoined, no sooner than its retry_after (capped by maxRetryAfterMs); an unlisted reason drops it', () => {
    const h = harness()
    h.send({ type: 'transport.up', generation: 1 })
    h.send({ type: 'channel.joinError', reason: classifyJoinError({ reason: 'rate_limited', retry_after: 3 }, 1, 0), ...h.current() })
    expect(h.reports().at(-1)).toMatchObject({ status: 'errored', reason: { kind: 'rejected', cause: 'rate-limited', retryAfterMs: 3000 } })
    expect(h.attempts[0]!.stopped).toBe(true)
    // The backoff alone would rejoin after 750 ms (random 0.5); the retry_after holds it to 3 s.
    h.clock.increment(2_999)
    expect(h.attempts).toHaveLength(1)
    h.clock.increment(1)
    expect(h.attempts).toHaveLength(2)
    h.send({ type: 'channel.joinError', reason: classifyJoinError({ reason: 'join crashed' }, 1, 0), ...h.current() })
    expect(h.reports().at(-1)).toMatchObject({ status: 'errored', reason: { kind: 'rejected', cause: 'unavailable' } })
    // No retry_after: the backoff, second in a row (ceiling 2000, drawn 1500).
    h.clock.increment(1_500)
    expect(h.attempts).toHaveLength(3)
    // A day's retry_after waits maxRetryAfterMs.
    h.send({ type: 'channel.joinError', reason: classifyJoinError({ reason: 'rate_limited', retry_after: 86_400 }, 1, 0), ...h.current() })
    h.clock.increment(DEFAULT_CHANNEL_POLICY.maxRetryAfterMs - 1)
    expect(h.attempts).toHaveLength(3)
    h.clock.increment(1)
    expect(h.attempts).toHaveLength(4)
    h.send({ type: 'channel.joinError', reason: classifyJoinError({ reason: 'not a member' }, 1, 0), ...h.current() })
    // Classified retryable (the session retries an unlisted refusal of the control join); the channel chart's verdict is not.
    expect(h.reports().at(-1)).toMatchObject({ status: 'dropped', reason: { kind: 'other', retryable: false } })
    expect(h.child().status).toBe('done')
    h.stop()
  })

  it('drops the channel on phx_close', () => {
    const h = harness()
    h.send({ type: 'transport.up', generation: 1 })
    h.send({ type: 'channel.joinOk', ...h.current() })
    h.send({ type: 'channel.close', reason: classifyChannelClose({}, 1, 0), ...h.current() })
    expect(h.reports().at(-1)).toMatchObject({ status: 'dropped', reason: { kind: 'dropped', source: 'channel', retryable: false } })
    h.stop()
  })

  it('keeps a channel whose join timed out: retried on this transport and on the next', () => {
    const h = harness()
    h.send({ type: 'transport.up', generation: 1 })
    h.clock.increment(DEFAULT_CHANNEL_POLICY.joinTimeoutMs)
    expect(h.reports().at(-1)).toMatchObject({ status: 'errored', reason: { kind: 'timed-out', phase: 'join' } })
    expect(h.attempts).toHaveLength(1)
    // Retried on this transport once the rejoin delay passed: a second attempt, same generation.
    h.clock.increment(DEFAULT_CHANNEL_POLICY.rejoinInitialDelayMs)
    expect(h.attempts).toHaveLength(2)
    expect(h.attempts[1]!.input).toMatchObject({ generation: 1, attachId: 2 })
    expect(h.attempts[0]!.stopped).toBe(true)
    h.send({ type: 'transport.down' })
    expect(h.child().value).toBe('detached')
    h.send({ type: 'transport.up', generation: 2 })
    expect(h.attempts.at(-1)!.input).toMatchObject({ generation: 2 })
    h.stop()
  })

  it('ignores events of an earlier join attempt or transport', () => {
    const h = harness()
    h.send({ type: 'transport.up', generation: 1 })
    const first = h.current()
    h.send({ type: 'transport.down' })
    h.send({ type: 'transport.up', generation: 2 })
    h.send({ type: 'channel.joinOk', ...first })
    expect(h.statuses()).toEqual(['detached'])
    h.send({ type: 'channel.joinError', reason: classifyJoinError({ reason: 'unauthorized' }, 1, 0), ...first })
    expect(h.child().status).toBe('active')
    h.stop()
  })

  it('leaves: phx_leave pushed while joined, left on the reply', () => {
    const h = harness()
    h.send({ type: 'transport.up', generation: 1 })
    h.send({ type: 'channel.joinOk', ...h.current() })
    h.send({ type: 'host.leave' })
    expect(h.attempts[0]!.left).toBe(true)
    h.send({ type: 'channel.left', ...h.current() })
    expect(h.statuses().at(-1)).toBe('left')
    expect(h.child().status).toBe('done')
    h.stop()
  })

  it('leaves at once while detached', () => {
    const h = harness()
    h.send({ type: 'host.leave' })
    expect(h.statuses()).toEqual(['left'])
    h.stop()
  })

  it('a join attempt whose I/O throws (a phoenix-link bug) errors this attempt and retries it', () => {
    const h = harness()
    h.runtime.onExecute = (_chart, type) => {
      if (type === 'joinAttempt') throw new Error('adapter bug')
    }
    h.send({ type: 'transport.up', generation: 1 })
    expect(h.child().value).toEqual({ attached: 'errored' })
    expect(h.child().context.reason).toMatchObject({ kind: 'other', detail: expect.stringContaining('adapter bug') })
    expect(h.statuses()).toEqual(['errored'])
    expect(h.runtime.failures).toMatchObject([{ chart: 'channel', type: 'joinAttempt' }])
    h.runtime.onExecute = null
    h.clock.increment(DEFAULT_CHANNEL_POLICY.rejoinMaxDelayMs)
    expect(h.child().value).toEqual({ attached: { live: 'joining' } })
    expect(h.runtime.paramsOf('joinAttempt')).toHaveLength(2)
    h.stop()
  })
})

describe('channel chart, what its reasons, reports and output hold', () => {
  const env = { now: () => 1234, monotonic: () => 0, random: () => 0.5 }

  it('a phx_error reason in full; a channel left after it reports no reason; its output is the topic and the last reason', () => {
    const h = harness()
    h.send({ type: 'transport.up', generation: 4 })
    h.send({ type: 'channel.joinOk', ...h.current() })
    h.send({ type: 'channel.error', ...h.current() })
    expect(h.child().context.reason).toEqual({ kind: 'other', detail: 'phx_error: the server-side channel crashed', retryable: true, generation: 4, at: 0 })
    h.send({ type: 'host.leave' })
    expect(h.reports().at(-1)).toEqual({ type: 'channel.status', topic: 'room:1', status: 'left', reason: null })
    expect(h.child().output).toEqual({ topic: 'room:1', reason: { kind: 'other', detail: 'phx_error: the server-side channel crashed', retryable: true, generation: 4, at: 0 } })
    h.stop()
  })

  it('an event of an earlier join attempt is ignored, on the same transport too', () => {
    const h = harness()
    h.send({ type: 'transport.up', generation: 1 })
    h.clock.increment(DEFAULT_CHANNEL_POLICY.joinTimeoutMs)
    h.clock.increment(DEFAULT_CHANNEL_POLICY.rejoinInitialDelayMs)
    expect(h.current()).toEqual({ topic: 'room:1', generation: 1, attachId: 2 })
    h.send({ type: 'channel.joinOk', topic: 'room:1', generation: 1, attachId: 1 })
    expect(h.child().value).toEqual({ attached: { live: 'joining' } })
    h.send({ type: 'channel.joinOk', ...h.current() })
    expect(h.child().value).toEqual({ attached: { live: 'joined' } })
    h.stop()
  })

  it('an attachment failure says what was thrown, an Error or not', () => {
    for (const [thrown, text] of [
      [new Error('adapter bug'), 'adapter bug'],
      ['a string', 'a string'],
    ] as const) {
      const h = harness(env)
      h.runtime.onExecute = (_chart, type) => {
        if (type === 'joinAttempt') throw thrown
      }
      h.send({ type: 'transport.up', generation: 2 })
      expect(h.child().context.reason).toEqual({ kind: 'other', detail: `the join attempt failed inside phoenix-link: ${text}`, retryable: true, generation: 2, at: 1234 })
      h.stop()
    }
  })

  it('under a bare XState actor its I/O actions do nothing: the chart still decides (joining, then the join timeout)', () => {
    const actor = createActor(channelMachine, { input: { topic: 'room:1', policy: DEFAULT_CHANNEL_POLICY, env }, clock: new SimulatedClock() }).start()
    actor.send({ type: 'transport.up', generation: 1 })
    expect(actor.getSnapshot().value).toEqual({ attached: { live: 'joining' } })
    expect(actor.getSnapshot().children).toEqual({})
    actor.stop()
  })
})

