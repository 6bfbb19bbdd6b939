/**
 * Executes a generated connection-chart path on the real wire: a real link (chart delays on a
 * SimulatedClock, sockets real) against the simulator on 127.0.0.1, every upgrade and control
 * join held until the path answers it. After each step the link's chart state, its
 * lastDisconnectReason and what the simulator saw must agree with the chart's own transition.
 */
import { SimulatedClock, waitFor, type InspectionEvent } from 'xstate'
import { keyOf } from '../../src/node/model/chart-info.js'
import type { ModelPath, PathStep } from '../../src/node/model/paths.js'
import { expectationOf } from '../../src/node/model/connection-model.js'
import { ruleViolation, trackConnected } from './oracles.js'
import { createLink, type Link } from '../../src/link.js'
import { rejoinDelayMs } from '../../machines/channel.js'
import { controlTopic } from '../../src/protocol.js'
import type { PlatformSimulator } from '../../src/node/server/index.js'
import { chartOf } from '../../src/chart-of.js'

/** Policy of path runs: chart delays are on the simulated clock; heartbeats real and short. */
export const PATH_POLICY = {
  transport: { heartbeatIntervalMs: 40, closeTimeoutMs: 150 },
  reconnect: { maxRetryAfterMs: 2_000 },
} as const

/** What one path run saw. */
export interface PathRun {
  path: string
  /** Transition keys (chart-info keyOf) crossed by any actor of the link. */
  transitions: Set<string>
  /** State node ids visited. */
  states: Set<string>
}

function fail(path: ModelPath, index: number, what: string): never {
  const step = path.steps[index]
  throw new Error(`path "${path.name}", step ${index + 1} (${step?.stimulus}): ${what}`)
}

/** Runs `path` with agent `agentId` on `sim` (which holds upgrades and control joins). */
export async function runPath(sim: PlatformSimulator, path: ModelPath, agentId: string): Promise<PathRun> {
  const clock = new SimulatedClock()
  const run: PathRun = { path: path.name, transitions: new Set(), states: new Set() }
  const link = createLink({
    url: sim.url,
    agentId,
    apiKey: 'model-key',
    clock,
    policy: PATH_POLICY,
    onControl: async (signal) => {
      if (signal.correlationId === 'fail') throw new Error('handler failure (model)')
      if (signal.correlationId?.startsWith('queued-slow')) await slowGate.promise
      handled.push(signal.correlationId ?? '')
    },
    inspect: (event: InspectionEvent) => {
      if (event.type !== '@xstate.microstep') return
      for (const t of event._transitions) run.transitions.add(keyOf(t as never))
      const snapshot = event.snapshot as { _nodes?: Array<{ id: string }> }
      for (const node of snapshot._nodes ?? []) run.states.add(node.id)
    },
  })
  const topic = controlTopic(agentId)
  let opens = 0
  const handled: string[] = []
  const slowGate = deferred()
  try {
    let before = expectationOf(chartOf(link).getSnapshot() as never)
    let linkConnected = false
    let group = path.steps[0]!.stimulus
    for (const [i, step] of path.steps.entries()) {
      if (step.kind !== 'auto') group = step.stimulus
      await apply(link, sim, clock, step, agentId, topic, { handled, slowGate })
      if (step.stimulus === 'open') opens++
      const nextIsAuto = path.steps[i + 1]?.kind === 'auto'
      if (nextIsAuto) continue
      await expectStep(link, path, i)
      // The rules, judged on what the link did, independently of the chart that drove it.
      const after = expectationOf(chartOf(link).getSnapshot() as never)
      const broken = ruleViolation(group, before, after, linkConnected)
      if (broken) fail(path, i, broken)
      linkConnected = trackConnected(linkConnected, after)
      before = after
    }
    // The simulator saw exactly the sockets the path opened: nothing reconnected on its own.
    const accepted = sim.accepted(agentId).length
    if (accepted !== opens) fail(path, path.steps.length - 1, `simulator accepted ${accepted} sockets, the path opened ${opens}`)
    const last = path.steps.at(-1)!.expect
    if ((last.state === 'terminated' || last.state === 'stopped') && sim.live(agentId).length > 0) {
      await sim.waitFor(() => sim.live(agentId).length === 0, { timeoutMs: 3000, what: `${agentId} to have no live socket after ${last.state}` })
    }
  } finally {
    await link.disconnect()
    // A stalled socket reads nothing, so it never sees the client go: end the simulator's side.
    for (const c of sim.accepted(agentId)) if (c.stalled && c.state !== 'closed') c.abort()
    await sim.settled(agentId, { timeoutMs: 3000 })
  }
  // After the path and disconnect(): still no socket the path did not open.
  if (sim.accepted(agentId).length !== opens) throw new Error(`path "${path.name}": a socket opened after the path ended`)
  return run
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void
  const promise = new Promise<void>((r) => (resolve = r))
  return { promise, resolve }
}

async function apply(
  link: Link,
  sim: PlatformSimulator,
  clock: SimulatedClock,
  step: PathStep,
  agent: string,
  topic: string,
  control: { handled: string[]; slowGate: { promise: Promise<void>; resolve: () => void } },
): Promise<void> {
  const name = step.stimulus
  const held = (what: string, check: () => boolean) => sim.waitFor(check, { timeoutMs: 3000, what: `${what} for ${name}` })
  switch (step.kind) {
    case 'auto':
      return
    case 'inject':
      chartOf(link).send(step.event as never)
      return
    case 'host':
      if (name === 'host connect') void link.connect().catch(() => {})
      else if (name === 'cancelled wait') {
        const controller = new AbortController()
        const waiting = link.runForever({ signal: controller.signal }).catch((e: Error) => e.name)
        controller.abort()
        const outcome = await waiting
        if (outcome !== 'AbortError') throw new Error(`an aborted runForever() settled with ${String(outcome)}`)
      } else void link.disconnect()
      return
    case 'clock': {
      const { context } = chartOf(link).getSnapshot()
      const ms =
        name === 'backoff elapsed'
          ? (context.retry?.delayMs ?? 0)
          : name === 'rejoin delay'
            ? rejoinDelayMs(link.policy.channel, context.controlCrashes, 1) // the ceiling: at least the drawn delay
          : name === 'connect timeout'
            ? link.policy.connection.connectTimeoutMs
            : name === 'join timeout'
              ? link.policy.connection.joinTimeoutMs
              : link.policy.connection.leaveTimeoutMs
      clock.increment(ms)
      return
    }
    case 'server':
      break
  }
  if (name === 'open' || name.startsWith('upgrade ') || (name === 'drop' && link.state === 'connecting')) {
    await held('the upgrade to arrive', () => sim.heldUpgradesOf(agent) > 0)
    const status = name.startsWith('upgrade ') ? Number(name.slice(8)) : null
    const answer = name === 'open' ? undefined : name === 'drop' ? 'drop' : { status: status!, ...(status === 429 || status === 503 ? { retryAfter: '1' } : {}) }
    sim.answerHeldUpgrade(answer as never, agent)
    return
  }
  if (name.startsWith('join ')) {
    await held('the control join to arrive', () => sim.heldJoins.some((j) => j.topic === topic))
    const outcome =
      name === 'join ok'
        ? ({ reply: 'ok' } as const)
        : ({ reply: 'error', response: { reason: name === 'join refused' ? 'unauthorized' : 'join crashed' } } as const)
    sim.answerHeldJoin(topic, outcome)
    return
  }
  if (name.startsWith('close ')) return sim.close({ agent }, Number(name.slice(6)))
  if (name === 'drop') return sim.abort({ agent })
  if (name === 'heartbeat timeout') return sim.stall({ agent })
  if (name === 'malformed frame') {
    const reported = new Promise<void>((resolve) => link.once('ignored', () => resolve()))
    sim.sendRaw({ agent }, '[not json')
    await reported
    return
  }
  if (name === 'control phx_error') return sim.channelError({ agent }, topic)
  if (name === 'control phx_close') return sim.channelClose({ agent }, topic)
  if (name === 'supersede') {
    sim.supersede(agent, { close: null })
    return
  }
  if (name === 'control signal') {
    const delivered = new Promise<void>((resolve) => link.once('control', () => resolve()))
    sim.control(agent, { mode: 'interrupt' })
    await delivered
    return
  }
  if (name === 'duplicate signal') {
    // The same correlation id twice: delivered once, the repeat reported.
    const repeat = new Promise<void>((resolve) => link.on('ignored', (e) => e.detail.includes('duplicate correlation_id') && resolve()))
    const id = `dup-${agent}-${Math.random()}`
    sim.control(agent, { mode: 'stop', correlation_id: id })
    sim.control(agent, { mode: 'stop', correlation_id: id })
    await repeat
    return
  }
  if (name === 'queued signals') {
    // A slow handler holds the first; two queue behind it; when it ends, each goes once, in order.
    const n = control.handled.length
    const ids = [`queued-slow-${n}`, `queued-a-${n}`, `queued-b-${n}`]
    const started = new Promise<void>((resolve) => link.once('control', () => resolve()))
    for (const id of ids) sim.control(agent, { mode: 'stop', correlation_id: id })
    await started
    await waitFor(chartOf(link), (s) => s.context.signalSeq >= 3, { timeout: 3000 }).catch(() => {})
    control.slowGate.resolve()
    const done = await new Promise<boolean>((resolve) => {
      const deadline = setTimeout(() => resolve(false), 3000)
      const check = () => {
        if (control.handled.length >= n + 3) {
          clearTimeout(deadline)
          resolve(true)
        } else link.once('control', () => setImmediate(check))
      }
      check()
    })
    const got = control.handled.slice(n)
    if (!done || got.join(',') !== ids.join(',')) throw new Error(`queued signals were handed over as [${got}], not once each in order [${ids}]`)
    return
  }
  if (name === 'failing signal') {
    // The handler throws for this one (see runPath's onControl): reported, delivery goes on.
    const failed = new Promise<void>((resolve) => link.once('control', () => resolve()))
    sim.control(agent, { mode: 'stop', correlation_id: 'fail' })
    await failed
    return
  }
  throw new Error(`no way to apply stimulus ${name} on the wire`)
}

async function expectStep(link: Link, path: ModelPath, index: number): Promise<void> {
  const want = path.steps[index]!.expect
  const wanted = JSON.stringify(want.value)
  try {
    await waitFor(chartOf(link), (s) => JSON.stringify(s.value) === wanted, { timeout: 3000 })
  } catch {
    fail(path, index, `chart state ${JSON.stringify(chartOf(link).getSnapshot().value)}, the model says ${wanted}`)
  }
  if (link.state !== want.state) fail(path, index, `link.state ${link.state}, the model says ${want.state}`)
  const reason = link.lastDisconnectReason
  if ((reason?.kind ?? null) !== want.reason) fail(path, index, `lastDisconnectReason ${reason?.kind ?? null}, the model says ${want.reason}`)
  const code = reason && 'closeCode' in reason && typeof reason.closeCode === 'number' ? reason.closeCode : reason && 'status' in reason && typeof reason.status === 'number' ? reason.status : null
  if (code !== want.code) fail(path, index, `reason code ${code}, the model says ${want.code}`)
}
