/**
 * The reconnect chart: backoff, floors, the rapid-disconnect window and the stable reset, driven
 * on a simulated clock by the link's chart runtime, with what the chart reports recorded.
 */
import { describe, expect, it } from 'vitest'
import {
  backoffDelay,
  serverFloorMs,
  DEFAULT_RECONNECT_POLICY,
  reconnectMachine,
  retryNowFloorMs,
  validateReconnectPolicy,
  type ReconnectPolicy,
  type ReconnectReport,
} from '../../machines/reconnect.js'
import type { ReasonLike } from '../../machines/types.js'
import { classifyClose, classifyUpgrade } from '../../src/reasons.js'
import { TestRuntime } from '../support/runtime.js'

const closed = (code: number): ReasonLike => classifyClose({ code, reason: '' }, 1, 0)

function harness(policy: Partial<ReconnectPolicy> = {}, roll = 0.5) {
  const runtime = new TestRuntime()
  const chart = runtime.run(reconnectMachine, {
    policy: { ...DEFAULT_RECONNECT_POLICY, ...policy },
    env: { now: () => 0, monotonic: () => 0, random: () => roll },
  })
  const { clock } = runtime
  const reports = () => runtime.paramsOf<ReconnectReport>('report')
  const child = () => chart.getSnapshot()
  return {
    clock,
    reports,
    last: () => reports().at(-1),
    child,
    opened: () => chart.send({ type: 'reconnect.opened' }),
    lost: (reason: ReasonLike = closed(1000)) => chart.send({ type: 'reconnect.lost', reason }),
    /** Waits out the scheduled delay so the chart is idle again. */
    due: () => {
      const last = reports().at(-1)
      if (last?.type !== 'reconnect.scheduled') throw new Error(`no retry scheduled, last report ${JSON.stringify(last)}`)
      clock.increment(last.delayMs)
      expect(reports().at(-1)?.type).toBe('reconnect.due')
    },
    stop: () => chart.stop(),
  }
}

describe('backoffDelay', () => {
  const p = DEFAULT_RECONNECT_POLICY
  it('is full jitter below an exponential ceiling capped at maxDelayMs', () => {
    expect(backoffDelay(p, 1, closed(1000), 0.999)).toBe(499)
    expect(backoffDelay(p, 3, closed(1000), 0.999)).toBe(1998)
    expect(backoffDelay(p, 20, closed(1000), 0.999)).toBe(29_970)
    expect(backoffDelay(p, 5, closed(1000), 0)).toBe(0)
  })
  it('raises 1012 to the service-restart floor and 1013 to the try-again-later floor', () => {
    for (const roll of [0, 0.5, 0.999]) {
      const d1001 = backoffDelay(p, 1, closed(1001), roll)
      expect(d1001).toBeLessThanOrEqual(2000)
      expect(d1001).toBe(Math.floor(roll * 2000))
      const d1012 = backoffDelay(p, 1, closed(1012), roll)
      expect(d1012).toBeGreaterThanOrEqual(1000)
      expect(d1012).toBeLessThanOrEqual(5000)
      const d1013 = backoffDelay(p, 1, closed(1013), roll)
      expect(d1013).toBeGreaterThanOrEqual(30_000)
      expect(d1013).toBeLessThanOrEqual(60_000)
    }
  })
  it('waits at least Retry-After, capped at maxRetryAfterMs', () => {
    const r429 = classifyUpgrade({ status: 429, retryAfter: '2' }, 1, 0)
    expect(backoffDelay(p, 1, r429, 0)).toBe(2000)
    expect(backoffDelay(p, 1, r429, 0.9)).toBeGreaterThanOrEqual(2000)
    const huge = classifyUpgrade({ status: 503, retryAfter: '86400' }, 1, 0)
    expect(backoffDelay(p, 1, huge, 0)).toBe(p.maxRetryAfterMs)
  })
  it('refuses a misconfigured policy at configuration', () => {
    expect(() => validateReconnectPolicy({ ...p, factor: 0.5 })).toThrow(/factor/)
    expect(() => validateReconnectPolicy({ ...p, initialDelayMs: -1 })).toThrow(/initialDelayMs/)
    expect(() => validateReconnectPolicy({ ...p, serviceRestartFloorMs: [5, 1] })).toThrow(/serviceRestartFloorMs/)
    expect(() => validateReconnectPolicy({ ...p, rapidLimit: 0 })).toThrow(/rapidLimit/)
  })
})

describe('reconnect chart', () => {
  it('schedules a retry after each loss, then reports due when the delay has passed', () => {
    const h = harness({}, 0.5)
    h.opened()
    h.lost()
    expect(h.last()).toEqual({ type: 'reconnect.scheduled', delayMs: 250, attempt: 1 })
    h.clock.increment(249)
    expect(h.last()?.type).toBe('reconnect.scheduled')
    h.clock.increment(1)
    expect(h.last()?.type).toBe('reconnect.due')
    h.stop()
  })

  it('grows the ceiling with consecutive losses', () => {
    const h = harness({}, 0.5)
    const delays: number[] = []
    for (let i = 0; i < 4; i++) {
      h.lost()
      delays.push((h.last() as { delayMs: number }).delayMs)
      h.due()
    }
    expect(delays).toEqual([250, 500, 1000, 2000])
    h.stop()
  })

  it('past rapidLimit rapid connections in a row it slows down, it does not give up: suspended, one attempt per growing cooldown, for ever', () => {
    const h = harness({ rapidLimit: 10, rapidWindowMs: 5000 }, 0)
    for (let i = 1; i <= 9; i++) {
      h.opened()
      h.clock.increment(4_999)
      h.lost()
      expect(h.last()?.type, `loss ${i}`).toBe('reconnect.scheduled')
      h.due()
    }
    const cooldowns: number[] = []
    for (let k = 0; k < 7; k++) {
      h.opened()
      // Each loss its own: the suppressed reason names the one that reached the limit.
      const loss = classifyClose({ code: 1000 + k, reason: `loss ${k}` }, 10 + k, k)
      h.lost(loss)
      const report = h.last()
      expect(report).toMatchObject({ type: 'reconnect.suspended', reason: { kind: 'suppressed', cause: 'rapid-disconnects', retryable: true, generation: 10 + k } })
      expect((report as { reason: { lastLoss: unknown } }).reason.lastLoss).toBe(loss)
      expect(h.child().value).toBe('suspended')
      const { delayMs } = report as { delayMs: number }
      cooldowns.push(delayMs)
      h.clock.increment(delayMs - 1)
      expect(h.last()?.type, 'no attempt before the cooldown ends').toBe('reconnect.suspended')
      h.clock.increment(1)
      expect(h.last()?.type).toBe('reconnect.due')
    }
    // roll 0: the lower half of each ceiling, from 30 s doubling to the 5 min cap.
    expect(cooldowns).toEqual([15_000, 30_000, 60_000, 120_000, 150_000, 150_000, 150_000])
    expect(h.child().status).toBe('active')
    h.stop()
  })

  it('a suspended link that stays connected past the rapid window is back to the normal backoff', () => {
    const h = harness({ rapidLimit: 2, rapidWindowMs: 5000 }, 0)
    for (let i = 0; i < 2; i++) {
      h.opened()
      h.lost()
      if (i === 0) h.due()
    }
    expect(h.last()?.type).toBe('reconnect.suspended')
    h.clock.increment((h.last() as { delayMs: number }).delayMs)
    h.opened()
    h.clock.increment(5_000)
    h.lost()
    expect(h.last()?.type).toBe('reconnect.scheduled')
    h.stop()
  })

  it("with onRapidLimit 'give-up' it gives up with suppressed (terminal) after rapidLimit rapid connections", () => {
    const h = harness({ rapidLimit: 10, rapidWindowMs: 5000, onRapidLimit: 'give-up' }, 0)
    for (let i = 1; i <= 9; i++) {
      h.opened()
      h.lost()
      h.due()
    }
    h.opened()
    const tenth = classifyClose({ code: 1011, reason: 'tenth' }, 1, 0)
    h.lost(tenth)
    expect(h.last()).toMatchObject({ type: 'reconnect.gaveUp', reason: { kind: 'suppressed', cause: 'rapid-disconnects', attempts: 10, retryable: false } })
    expect((h.last() as { reason: { lastLoss: unknown } }).reason.lastLoss).toBe(tenth)
    expect(h.child().status).toBe('done')
    h.stop()
  })

  it('only a loss the server caused counts as rapid: heartbeat and join timeouts, control channel losses and refused joins never do', () => {
    const h = harness({ rapidLimit: 2, rapidWindowMs: 5000 }, 0)
    const notTheServer: ReasonLike[] = [
      { kind: 'timed-out', phase: 'heartbeat', retryable: true, generation: 1, at: 0 },
      { kind: 'timed-out', phase: 'join', retryable: true, generation: 1, at: 0 },
      { kind: 'dropped', source: 'channel', retryable: true, generation: 1, at: 0 },
      { kind: 'other', retryable: true, generation: 1, at: 0 },
    ]
    for (const reason of [...notTheServer, ...notTheServer]) {
      h.opened()
      h.lost(reason)
      expect(h.last()?.type, reason.kind).toBe('reconnect.scheduled')
      h.due()
    }
    // A drop with no close frame is the server (or its path) ending the socket: it counts.
    for (let i = 0; i < 2; i++) {
      h.opened()
      h.lost({ kind: 'dropped', source: 'socket', retryable: true, generation: 1, at: 0 })
      if (i === 0) h.due()
    }
    expect(h.last()?.type).toBe('reconnect.suspended')
    h.stop()
  })

  it('a connection that outlives the rapid window ends the streak', () => {
    const h = harness({ rapidLimit: 3, rapidWindowMs: 5000 }, 0)
    for (let i = 0; i < 2; i++) {
      h.opened()
      h.lost()
      h.due()
    }
    h.opened()
    h.clock.increment(5000)
    h.lost()
    expect(h.last()?.type).toBe('reconnect.scheduled')
    h.due()
    h.opened()
    h.lost()
    expect(h.last()?.type).toBe('reconnect.scheduled')
    expect(h.child().context.rapidStreak).toBe(1)
    h.stop()
  })

  it('connect failures (no open) are attempts, never rapid connections', () => {
    const h = harness({ rapidLimit: 2 }, 0)
    for (let i = 0; i < 20; i++) {
      h.lost(closed(1006))
      expect(h.last()?.type).toBe('reconnect.scheduled')
      h.due()
    }
    expect(h.child().context.attempt).toBe(20)
    h.stop()
  })

  it('starts again from the first delay after stableAfterMs connected', () => {
    const h = harness({ stableAfterMs: 60_000 }, 0.999)
    for (let i = 0; i < 5; i++) {
      h.lost()
      h.due()
    }
    h.opened()
    h.clock.increment(60_000)
    h.lost()
    expect(h.last()).toMatchObject({ type: 'reconnect.scheduled', attempt: 1, delayMs: 499 })
    h.stop()
  })

  it('gives up after maxAttempts consecutive losses when set', () => {
    const h = harness({ maxAttempts: 2 }, 0)
    h.lost()
    h.due()
    h.lost()
    h.due()
    const third = classifyUpgrade({ status: 503 }, 3, 0)
    h.lost(third)
    expect(h.last()).toMatchObject({ type: 'reconnect.gaveUp', reason: { cause: 'max-attempts', attempts: 3, generation: 3 } })
    expect((h.last() as { reason: { lastLoss: unknown } }).reason.lastLoss).toBe(third)
    h.stop()
  })
})

describe('reconnect policy', () => {
  it('refuses a stable window shorter than the rapid window', () => {
    expect(() => validateReconnectPolicy({ ...DEFAULT_RECONNECT_POLICY, stableAfterMs: 1_000, rapidWindowMs: 5_000 })).toThrow(/stableAfterMs/)
  })
})

describe("the host's retry now (reconnect()) keeps what the server asked for", () => {
  /** A reconnect chart whose env.monotonic is the runtime's simulated clock. */
  function clocked(policy: Partial<ReconnectPolicy> = {}) {
    const runtime = new TestRuntime()
    // The monotonic clock does not start at 0, so a wait's start (`waitSince`) is not 0 either: elapsed time is a difference.
    runtime.clock.increment(10_000)
    const chart = runtime.run(reconnectMachine, {
      policy: { ...DEFAULT_RECONNECT_POLICY, ...policy },
      env: { now: () => 0, monotonic: () => runtime.clock.now(), random: () => 0.5 },
    })
    const reports = () => runtime.paramsOf<ReconnectReport>('report')
    return { runtime, chart, reports, dues: () => reports().filter((r) => r.type === 'reconnect.due').length }
  }

  it('serverFloorMs: Retry-After (capped), the low end of the 1012 and 1013 ranges, else 0', () => {
    const p = DEFAULT_RECONNECT_POLICY
    expect(serverFloorMs(p, classifyUpgrade({ status: 429, retryAfter: '3' }, 1, 0))).toBe(3_000)
    expect(serverFloorMs(p, classifyUpgrade({ status: 503, retryAfter: '100000' }, 1, 0))).toBe(p.maxRetryAfterMs)
    expect(serverFloorMs(p, classifyUpgrade({ status: 503, retryAfter: null }, 1, 0))).toBe(0)
    expect(serverFloorMs(p, closed(1012))).toBe(p.serviceRestartFloorMs[0])
    expect(serverFloorMs(p, closed(1013))).toBe(p.tryAgainLaterFloorMs[0])
    expect(serverFloorMs(p, closed(1001))).toBe(0)
    expect(serverFloorMs(p, closed(1000))).toBe(0)
  })

  it('a plain backoff is cut at once', () => {
    const h = clocked({ initialDelayMs: 10_000 })
    h.chart.send({ type: 'reconnect.lost', reason: closed(1000) })
    expect(h.chart.getSnapshot().value).toBe('waiting')
    h.chart.send({ type: 'reconnect.retryNow' })
    expect(h.chart.getSnapshot().value).toBe('idle')
    expect(h.dues()).toBe(1)
  })

  it("a wait after a 429 with Retry-After: 3 is cut to the Retry-After's end, not before", () => {
    const h = clocked()
    h.chart.send({ type: 'reconnect.lost', reason: classifyUpgrade({ status: 429, retryAfter: '3' }, 1, 0) })
    h.runtime.clock.increment(1_000)
    h.chart.send({ type: 'reconnect.retryNow' })
    expect(h.chart.getSnapshot().value).toBe('holding')
    // A second call changes nothing.
    h.chart.send({ type: 'reconnect.retryNow' })
    h.runtime.clock.increment(1_999)
    expect(h.dues()).toBe(0)
    h.runtime.clock.increment(1)
    expect(h.dues()).toBe(1)
    expect(h.chart.getSnapshot().value).toBe('idle')
    // The cut wait's own timer is gone with it: no second due.
    h.runtime.clock.increment(DEFAULT_RECONNECT_POLICY.maxRetryAfterMs)
    expect(h.dues()).toBe(1)
  })

  for (const [when, elapsedMs] of [
    ['1.5 s into a longer wait', 1_500],
    ['exactly at the floor', 1_000],
  ] as const) {
    it(`past the floor a retry now is at once (a close 1012, its floor 1 s, asked ${when})`, () => {
      const h = clocked({ serviceRestartFloorMs: [1_000, 5_000] })
      h.chart.send({ type: 'reconnect.lost', reason: closed(1012) })
      h.runtime.clock.increment(999)
      expect(h.chart.getSnapshot().value).toBe('waiting')
      h.runtime.clock.increment(elapsedMs - 999)
      expect(h.chart.getSnapshot().value).toBe('waiting')
      h.chart.send({ type: 'reconnect.retryNow' })
      expect(h.chart.getSnapshot().value).toBe('idle')
      expect(h.dues()).toBe(1)
    })
  }

  it('a suspended cooldown after rapid closes 1013 keeps the 1013 floor', () => {
    const h = clocked({ rapidLimit: 1, tryAgainLaterFloorMs: [2_000, 3_000] })
    h.chart.send({ type: 'reconnect.opened' })
    h.chart.send({ type: 'reconnect.lost', reason: closed(1013) })
    expect(h.chart.getSnapshot().value).toBe('suspended')
    h.chart.send({ type: 'reconnect.retryNow' })
    expect(h.chart.getSnapshot().value).toBe('holding')
    h.runtime.clock.increment(2_000)
    expect(h.dues()).toBe(1)
  })
})

describe("the host's retry now never lengthens a wait", () => {
  it('a suspended cooldown shorter than the 1013 floor (15-30 s against 30 s by default) is cut to at most its own end, never past it', () => {
    const runtime = new TestRuntime()
    const chart = runtime.run(reconnectMachine, { policy: { ...DEFAULT_RECONNECT_POLICY, rapidLimit: 1 }, env: { now: () => 0, monotonic: () => runtime.clock.now(), random: () => 0 } })
    chart.send({ type: 'reconnect.opened' })
    chart.send({ type: 'reconnect.lost', reason: closed(1013) })
    expect(chart.getSnapshot().value).toBe('suspended')
    const cooldown = chart.getSnapshot().context.delayMs
    expect(cooldown).toBeLessThan(DEFAULT_RECONNECT_POLICY.tryAgainLaterFloorMs[0])
    chart.send({ type: 'reconnect.retryNow' })
    runtime.clock.increment(cooldown)
    expect(runtime.paramsOf<ReconnectReport>('report').filter((r) => r.type === 'reconnect.due')).toHaveLength(1)
  })

  it('a retry now after env.monotonic stepped back an hour holds at most the floor (429 Retry-After: 3, asked 1 s in), not the floor plus the step', () => {
    const runtime = new TestRuntime()
    let back = 0
    const chart = runtime.run(reconnectMachine, { policy: DEFAULT_RECONNECT_POLICY, env: { now: () => 0, monotonic: () => runtime.clock.now() - back, random: () => 0.5 } })
    const dues = () => runtime.paramsOf<ReconnectReport>('report').filter((r) => r.type === 'reconnect.due').length
    chart.send({ type: 'reconnect.lost', reason: classifyUpgrade({ status: 429, retryAfter: '3' }, 1, 0) })
    runtime.clock.increment(1_000)
    back = 3_600_000
    chart.send({ type: 'reconnect.retryNow' })
    expect(chart.getSnapshot().value).toBe('holding')
    // Read as no time passed: the whole 3 s floor from here at most, never an hour.
    runtime.clock.increment(3_000)
    expect(dues()).toBe(1)
  })

  it('with no floor a retry now is at once, whatever env.monotonic reads (a clock stepped back)', () => {
    let t = 10_000
    const runtime = new TestRuntime()
    const chart = runtime.run(reconnectMachine, { policy: DEFAULT_RECONNECT_POLICY, env: { now: () => 0, monotonic: () => t, random: () => 0.5 } })
    chart.send({ type: 'reconnect.lost', reason: closed(1000) })
    t = 0
    chart.send({ type: 'reconnect.retryNow' })
    expect(chart.getSnapshot().value).toBe('idle')
  })
})

describe("retries now in a row back off: a host's timer cannot hammer the platform", () => {
  const policy = { ...DEFAULT_RECONNECT_POLICY, initialDelayMs: 1_000, factor: 2, maxDelayMs: 30_000 }
  function clocked(roll: number) {
    const runtime = new TestRuntime()
    runtime.clock.increment(10_000)
    const chart = runtime.run(reconnectMachine, { policy, env: { now: () => 0, monotonic: () => runtime.clock.now(), random: () => roll } })
    const dues = () => runtime.paramsOf<ReconnectReport>('report').filter((r) => r.type === 'reconnect.due').length
    return { runtime, chart, dues }
  }

  it('retryNowFloorMs: nothing for the first retry now, then the backoff\'s ceilings (initialDelayMs times factor per retry, up to maxDelayMs)', () => {
    expect([0, 1, 2, 3, 6, 7, 40].map((retries) => retryNowFloorMs(policy, retries))).toEqual([0, 1_000, 2_000, 4_000, 30_000, 30_000, 30_000])
    expect(retryNowFloorMs({ ...policy, initialDelayMs: 0 }, 5)).toBe(0)
  })

  it('the first retry now is at once; each next one, its attempt refused, waits 1 s, then 2 s from its wait\'s start; a connection that outlives the rapid window starts the count over', () => {
    const h = clocked(0.999)
    h.chart.send({ type: 'reconnect.lost', reason: closed(1000) })
    h.chart.send({ type: 'reconnect.retryNow' })
    expect(h.chart.getSnapshot().value).toBe('idle')
    expect(h.dues()).toBe(1)
    for (const [retries, floor] of [
      [1, 1_000],
      [2, 2_000],
    ] as const) {
      // The attempt is refused (it never opened): the next wait, its own delay about twice the floor.
      h.chart.send({ type: 'reconnect.lost', reason: classifyUpgrade({ status: 500, retryAfter: null }, 1, 0) })
      expect(h.chart.getSnapshot().value).toBe('waiting')
      expect(h.chart.getSnapshot().context.delayMs).toBeGreaterThan(floor)
      h.chart.send({ type: 'reconnect.retryNow' })
      expect(h.chart.getSnapshot().value).toBe('holding')
      h.chart.send({ type: 'reconnect.retryNow' }) // a timer's next call changes nothing
      h.runtime.clock.increment(floor - 1)
      expect(h.dues()).toBe(retries)
      h.runtime.clock.increment(1)
      expect(h.dues()).toBe(retries + 1)
      expect(h.chart.getSnapshot().context.retriesNow).toBe(retries + 1)
    }
    h.chart.send({ type: 'reconnect.opened' })
    h.runtime.clock.increment(policy.rapidWindowMs)
    expect(h.chart.getSnapshot().context.retriesNow).toBe(0)
    h.chart.send({ type: 'reconnect.lost', reason: closed(1000) })
    h.chart.send({ type: 'reconnect.retryNow' })
    expect(h.chart.getSnapshot().value).toBe('idle')
  })

  it('a connection the server closes within the rapid window does not start the count over', () => {
    const h = clocked(0.999)
    h.chart.send({ type: 'reconnect.lost', reason: closed(1000) })
    h.chart.send({ type: 'reconnect.retryNow' })
    h.chart.send({ type: 'reconnect.opened' })
    h.runtime.clock.increment(100)
    h.chart.send({ type: 'reconnect.lost', reason: closed(1000) })
    h.chart.send({ type: 'reconnect.retryNow' })
    expect(h.chart.getSnapshot().value).toBe('holding')
  })

  it('never lengthens a wait: a floor past the wait\'s own end leaves the attempt at that end', () => {
    const h = clocked(0.3)
    h.chart.send({ type: 'reconnect.lost', reason: closed(1000) })
    h.chart.send({ type: 'reconnect.retryNow' })
    h.chart.send({ type: 'reconnect.lost', reason: classifyUpgrade({ status: 500, retryAfter: null }, 1, 0) })
    // Its own delay: 0.3 of a 2 s ceiling, 600 ms, shorter than the second retry's 1 s floor.
    expect(h.chart.getSnapshot().context.delayMs).toBe(600)
    h.chart.send({ type: 'reconnect.retryNow' })
    h.runtime.clock.increment(599)
    expect(h.dues()).toBe(1)
    h.runtime.clock.increment(1)
    expect(h.dues()).toBe(2)
  })

  it("a wait that runs out on its own ends the row: retries now an hour apart (a flapping network's online events) are each the first, at once", () => {
    const h = clocked(0.999)
    h.chart.send({ type: 'reconnect.lost', reason: closed(1000) })
    for (let flap = 1; flap <= 8; flap++) {
      // The host's online event: at once; the attempt is refused; then an hour offline, the link's own waits running out.
      h.chart.send({ type: 'reconnect.retryNow' })
      expect(h.chart.getSnapshot().value, `flap ${flap}`).toBe('idle')
      h.chart.send({ type: 'reconnect.lost', reason: classifyUpgrade({ status: 500, retryAfter: null }, 1, 0) })
      h.runtime.clock.increment(h.chart.getSnapshot().context.delayMs)
      expect(h.chart.getSnapshot().context.retriesNow, `flap ${flap}`).toBe(0)
      h.chart.send({ type: 'reconnect.lost', reason: classifyUpgrade({ status: 500, retryAfter: null }, 1, 0) })
    }
  })

  it('a suspended cooldown is cut by the first retry now of a row only; one in a row waits the cooldown out', () => {
    const runtime = new TestRuntime()
    const chart = runtime.run(reconnectMachine, { policy: { ...policy, rapidLimit: 1 }, env: { now: () => 0, monotonic: () => runtime.clock.now(), random: () => 0.5 } })
    const dues = () => runtime.paramsOf<ReconnectReport>('report').filter((r) => r.type === 'reconnect.due').length
    chart.send({ type: 'reconnect.opened' })
    chart.send({ type: 'reconnect.lost', reason: closed(1000) })
    expect(chart.getSnapshot().value).toBe('suspended')
    chart.send({ type: 'reconnect.retryNow' })
    expect(dues()).toBe(1)
    // The attempt is accepted and closed at once: suspended again, and the host's timer goes on.
    chart.send({ type: 'reconnect.opened' })
    chart.send({ type: 'reconnect.lost', reason: closed(1000) })
    expect(chart.getSnapshot().value).toBe('suspended')
    const cooldown = chart.getSnapshot().context.delayMs
    chart.send({ type: 'reconnect.retryNow' })
    expect(chart.getSnapshot().value).toBe('suspended')
    runtime.clock.increment(cooldown - 1)
    chart.send({ type: 'reconnect.retryNow' })
    expect(dues()).toBe(1)
    runtime.clock.increment(1)
    expect(dues()).toBe(2)
    // The cooldown ran out on its own: the row is over.
    expect(chart.getSnapshot().context.retriesNow).toBe(0)
  })
})
