/**
 * Executes generated channel-chart and reconnect-chart paths on the real wire: the stimuli are
 * applied through a real link and the simulator (chart delays on a SimulatedClock), and after
 * each step the chart actor inside the link must be where the chart's own transition says, and
 * the rule oracles must hold.
 */
import { SimulatedClock, type InspectionEvent } from 'xstate'
import { keyOf } from '../../src/node/model/chart-info.js'
import type { ModelPath } from '../../src/node/model/paths.js'
import { MODEL_RECONNECT_POLICY, type ChannelExpectation, type ReconnectExpectation } from '../../src/node/model/small-models.js'
import { createLink, type Link } from '../../src/link.js'
import type { LinkChannel } from '../../src/link-channel.js'
import type { PlatformSimulator } from '../../src/node/server/index.js'
import type { PathReport } from '../../src/node/testing/index.js'

/** What one path run saw (the kit's report, without the socket count). */
export type PathRun = Pick<PathReport, 'path' | 'transitions' | 'states'>
import { chartOf, chartsOf, waitForChart, waitForCharts } from '../../src/chart-of.js'

const ENV = { now: () => Date.now(), monotonic: () => performance.now(), random: () => 0.5 }

function collector(run: PathRun) {
  return (event: InspectionEvent) => {
    if (event.type !== '@xstate.microstep') return
    for (const t of event._transitions) run.transitions.add(keyOf(t as never))
    for (const node of (event.snapshot as { _nodes?: Array<{ id: string }> })._nodes ?? []) run.states.add(node.id)
  }
}

function fail(path: { name: string; steps: Array<{ stimulus: string }> }, index: number, what: string): never {
  throw new Error(`path "${path.name}", step ${index + 1} (${path.steps[index]?.stimulus}): ${what}`)
}

/** The channel rules as oracles, from docs/design.md ("The channel statechart"). */
export function channelRule(stimulus: string, before: ChannelExpectation, after: ChannelExpectation): string | null {
  const v = JSON.stringify(after.value)
  const same = JSON.stringify(before.value) === v && before.reason === after.reason
  switch (stimulus) {
    case 'join refused':
      return v === '"dropped"' && after.reason === 'rejected' ? null : `a rejected join drops the channel, got ${v}`
    case 'phx_close':
      return v === '"dropped"' ? null : `phx_close drops the channel, got ${v}`
    case 'phx_error':
    case 'join timeout':
    case 'join crashed':
    case 'params throw':
      return v.includes('errored') ? null : `${stimulus} keeps the channel and rejoins, got ${v}`
    case 'transport down':
      return v === '"detached"' ? null : `a transport loss keeps the channel for the next one, got ${v}`
    case 'host leave':
      return v === '"left"' || v.includes('leaving') ? null : `leave() ends the channel, got ${v}`
    case 'stale join ok':
      return same ? null : `a reply of an earlier join attempt changes nothing, got ${v}`
    case 'join holds':
      return same ? null : `a join that holds rejoinStableAfterMs only ends the run of rejoins, got ${v}`
    default:
      return null
  }
}

/** Runs a channel path with agent `agent` on `sim` (control joins answered, `topic` joins held). */
export async function runChannelPath(sim: PlatformSimulator, path: ModelPath<ChannelExpectation>, agent: string, topic: string): Promise<PathRun> {
  const clock = new SimulatedClock()
  const run: PathRun = { path: path.name, transitions: new Set(), states: new Set() }
  const link = createLink({ url: sim.url, agentId: agent, apiKey: 'model-key', clock, env: ENV, inspect: collector(run), policy: { transport: { closeTimeoutMs: 150 } } })
  let throwNext = false
  const seenJoins = new Set<string>()
  const params = () => {
    if (!throwNext) return {}
    throwNext = false
    throw new Error('params throw (model)')
  }
  // A path that starts by attaching creates the channel on a connected link (host.channel while
  // connected); one that starts by leaving creates it on the idle link (detached).
  let handle: LinkChannel | null = null
  if (path.steps[0]?.stimulus !== 'transport up') handle = link.channel(topic, params)
  const observe = (): ChannelExpectation => {
    if (!handle) return { value: 'detached', reason: null }
    const ref = chartsOf(link).channels.get(topic)
    if (ref) {
      const s = ref.getSnapshot() as unknown as { value: unknown; context: { reason: { kind: string } | null } }
      return { value: s.value, reason: s.context.reason?.kind ?? null }
    }
    return { value: handle.status, reason: handle.reason?.kind ?? null }
  }
  try {
    let before = observe()
    let group = ''
    for (const [i, step] of path.steps.entries()) {
      if (step.kind !== 'auto') group = step.stimulus
      if (path.steps[i + 1]?.stimulus === 'params throw') throwNext = true
      if (!handle) {
        // The first 'transport up': connect, then create the channel on the connected link.
        await link.connect()
        handle = link.channel(topic, params)
      } else {
        await applyChannel(link, sim, clock, handle, step.stimulus, step.event, agent, topic, seenJoins)
      }
      // A chart follow-up, or a params throw armed for the attempt this step starts, comes next:
      // judge the state after it.
      if (path.steps[i + 1]?.kind === 'auto' || path.steps[i + 1]?.stimulus === 'params throw') continue
      const wanted = JSON.stringify(step.expect.value)
      try {
        await waitForCharts(link, () => JSON.stringify(observe().value) === wanted, 3000)
      } catch {
        fail(path, i, `channel chart ${JSON.stringify(observe().value)}, the model says ${wanted}`)
      }
      const after = observe()
      if (after.reason !== step.expect.reason) fail(path, i, `channel reason ${after.reason}, the model says ${step.expect.reason}`)
      const broken = channelRule(group, before, after)
      if (broken) fail(path, i, broken)
      before = after
    }
  } finally {
    await link.disconnect()
    await sim.settled(agent, { timeoutMs: 3000 })
  }
  return run
}

async function applyChannel(
  link: Link,
  sim: PlatformSimulator,
  clock: SimulatedClock,
  handle: LinkChannel,
  name: string,
  event: object,
  agent: string,
  topic: string,
  seenJoins: Set<string>,
): Promise<void> {
  // The join this attempt sent: a held join whose join_ref the path has not answered or passed yet.
  const fresh = async (): Promise<{ joinRef: string }> => {
    // The link's join_refs are strings.
    let found: string | undefined
    await sim.waitFor(
      () => (found = sim.heldJoins.find((j) => j.topic === topic && !seenJoins.has(j.joinRef as string))?.joinRef as string | undefined) !== undefined,
      { timeoutMs: 3000, what: `a new join of ${topic}` },
    )
    seenJoins.add(found!)
    return { joinRef: found! }
  }
  switch (name) {
    case 'transport up':
      if (link.state === 'idle') {
        void link.connect().catch(() => {})
      } else {
        await waitForChart(chartOf(link), (s) => s.context.retry !== null, 3000)
        clock.increment(chartOf(link).getSnapshot().context.retry!.delayMs)
      }
      return
    case 'transport down':
      sim.close({ agent }, 1000)
      return
    case 'join ok':
      sim.answerHeldJoin(topic, { reply: 'ok' }, await fresh())
      return
    case 'join refused':
      sim.answerHeldJoin(topic, { reply: 'error', response: { reason: 'unauthorized' } }, await fresh())
      return
    case 'join crashed':
      sim.answerHeldJoin(topic, { reply: 'error', response: { reason: 'join crashed' } }, await fresh())
      return
    case 'params throw':
      return
    case 'join timeout':
      await fresh() // this attempt's join stays unanswered
      clock.increment(link.policy.channel.joinTimeoutMs)
      return
    case 'rejoin delay passes':
      clock.increment(link.policy.channel.rejoinMaxDelayMs)
      return
    case 'join holds':
      clock.increment(link.policy.channel.rejoinStableAfterMs)
      return
    case 'phx_error':
      sim.channelError({ agent }, topic)
      return
    case 'phx_close':
      sim.channelClose({ agent }, topic)
      return
    case 'host leave':
      void handle.leave()
      return
    case 'stale join ok':
      chartOf(link).send({ ...(event as { type: 'channel.joinOk' }), topic } as never)
      return
    case 'leave settles':
      return
  }
  throw new Error(`no way to apply channel stimulus ${name} on the wire`)
}

/** The reconnect rules as oracles, from docs/design.md ("The reconnect statechart"). */
export function reconnectRule(stimulus: string, before: ReconnectExpectation, after: ReconnectExpectation): string | null {
  const v = JSON.stringify(after.value)
  switch (stimulus) {
    case 'loss':
    case 'connect failure':
    case 'connect refused, Retry-After':
      if (v === '"gaveUp"') {
        // By policy only: the model's maxAttempts (its rapid limit suspends, the default).
        const attempts = after.attempt > (MODEL_RECONNECT_POLICY.maxAttempts ?? Infinity)
        return attempts ? null : `gave up before the attempt limit: attempt ${after.attempt}, rapid ${after.rapidStreak}`
      }
      if (v === '"suspended"') {
        return after.rapidStreak >= MODEL_RECONNECT_POLICY.rapidLimit ? null : `suspended before the rapid limit: rapid ${after.rapidStreak}`
      }
      if (after.attempt !== before.attempt + 1) return `a loss counts one attempt: ${before.attempt} -> ${after.attempt}`
      return v === '"waiting"' ? null : `a retryable loss waits out a delay, got ${v}`
    case 'stable window passes':
      return after.attempt === 0 ? null : `a stable connection starts the attempts again, got ${after.attempt}`
    case 'rapid window passes':
      return after.rapidStreak === 0 ? null : `a connection past the rapid window ends the streak, got ${after.rapidStreak}`
    case 'retry now':
      // The host's retry ends the wait only: it cannot reset the attempts or the rapid streak (the slow-down holds).
      if (after.attempt !== before.attempt || after.rapidStreak !== before.rapidStreak) {
        return `a retry now changed the counts: attempt ${before.attempt} -> ${after.attempt}, rapid ${before.rapidStreak} -> ${after.rapidStreak}`
      }
      // Unless the server asked for a wait (Retry-After): then it holds until that ends, no longer.
      if (before.serverFloor) return v === '"holding"' ? null : `a retry now within the server's Retry-After must hold until it ends, got ${v}`
      return v === '"idle"' ? null : `a retry now starts the next attempt at once, got ${v}`
    case 'server floor passes':
      return v === '"idle"' ? null : `the end of the server's floor starts the next attempt, got ${v}`
    default:
      return null
  }
}

/** Runs a reconnect path with agent `agent` on `sim` (upgrades held, control joins answered). */
export async function runReconnectPath(sim: PlatformSimulator, path: ModelPath<ReconnectExpectation>, agent: string): Promise<PathRun> {
  const clock = new SimulatedClock()
  const run: PathRun = { path: path.name, transitions: new Set(), states: new Set() }
  const link = createLink({
    url: sim.url,
    agentId: agent,
    apiKey: 'model-key',
    clock,
    env: ENV,
    inspect: collector(run),
    policy: { reconnect: MODEL_RECONNECT_POLICY, transport: { closeTimeoutMs: 150 } },
  })
  const observe = (): ReconnectExpectation => {
    const child = chartsOf(link).reconnect
    if (!child) return { value: link.lastDisconnectReason?.kind === 'suppressed' ? 'gaveUp' : 'none', attempt: -1, rapidStreak: -1, serverFloor: false }
    const s = child.getSnapshot() as unknown as { value: unknown; context: { attempt: number; rapidStreak: number; floorMs: number } }
    return { value: s.value, attempt: s.context.attempt, rapidStreak: s.context.rapidStreak, serverFloor: s.context.floorMs > 0 }
  }
  let sinceOpen = 0
  void link.connect().catch(() => {})
  try {
    await waitForCharts(link, () => chartsOf(link).reconnect !== null, 3000)
    let before = observe()
    for (const [i, step] of path.steps.entries()) {
      const name = step.stimulus
      if (name === 'open' || name === 'connect failure' || name === 'connect refused, Retry-After') {
        await sim.waitFor(() => sim.heldUpgradesOf(agent) > 0, { timeoutMs: 3000, what: `${agent}'s upgrade` })
        sim.answerHeldUpgrade(name === 'open' ? undefined : name === 'connect failure' ? { status: 503 } : { status: 429, retryAfter: '2' }, agent)
        sinceOpen = 0
      } else if (name === 'loss') {
        await sim.waitFor(() => sim.live(agent).length > 0, { timeoutMs: 3000, what: `${agent}'s socket` })
        sim.close({ agent }, 1000)
      } else if (name === 'rapid window passes' || name === 'stable window passes') {
        const target = name === 'rapid window passes' ? MODEL_RECONNECT_POLICY.rapidWindowMs : MODEL_RECONNECT_POLICY.stableAfterMs
        clock.increment(target - sinceOpen)
        sinceOpen = target
      } else if (name === 'retry now') {
        if (!link.reconnect()) fail(path, i, `reconnect() cut no wait in link state ${link.state}`)
      } else if (name === 'backoff passes' || name === 'cooldown passes') {
        clock.increment(chartsOf(link).reconnect!.getSnapshot().context.delayMs)
      } else if (name === 'server floor passes') {
        // What was left of it when the host asked is at most the whole floor.
        clock.increment(chartsOf(link).reconnect!.getSnapshot().context.floorMs)
      } else {
        throw new Error(`no way to apply reconnect stimulus ${name} on the wire`)
      }
      const want = step.expect
      const wanted = JSON.stringify(want.value)
      try {
        await waitForCharts(link, () => {
          const o = observe()
          return JSON.stringify(o.value) === wanted && (wanted === '"gaveUp"' || (o.attempt === want.attempt && o.rapidStreak === want.rapidStreak))
        }, 3000)
      } catch {
        fail(path, i, `reconnect chart ${JSON.stringify(observe())}, the model says ${JSON.stringify(want)}`)
      }
      const after = wanted === '"gaveUp"' ? want : observe()
      const broken = reconnectRule(name, before, after)
      if (broken) fail(path, i, broken)
      before = after
    }
    if (JSON.stringify(path.steps.at(-1)!.expect.value) === '"gaveUp"' && (link.state !== 'terminated' || link.lastDisconnectReason?.kind !== 'suppressed')) {
      fail(path, path.steps.length - 1, `giving up ends the session suppressed, got ${link.state} (${link.lastDisconnectReason?.kind})`)
    }
  } finally {
    await link.disconnect()
    await sim.settled(agent, { timeoutMs: 3000 })
  }
  return run
}
