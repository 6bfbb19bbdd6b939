/**
 * Property runs (fast-check commands): random sequences of server closes, drops, refusals,
 * supersedes, control signals (some with a slow handler), stale events, host connects,
 * disconnects and cancelled waits, with races (a supersede in the same read as a join reply, a
 * close racing disconnect(), a slow handler holding a signal while a supersede and a close
 * arrive), against a real link and the simulator. The invariants do not come from the chart:
 *   1. a superseded or refused session never opens another socket until the host connects;
 *   2. disconnect() resolves within its bound and leaves no timer or socket open;
 *   3. control signals reach the handler once each, in order, none received after a supersede;
 *   4. the link can always connect again after stop or terminated;
 *   5. lastDisconnectReason is kept after stop and cleared when connect() starts a session;
 *   6. a stale generation never changes state.
 * `PROPERTY_RUNS=500 npm test` runs longer; a failure prints its seed and path, and
 * `PROPERTY_SEED=<seed> PROPERTY_PATH=<path>` replays it.
 */
import fc from 'fast-check'
import { until } from '../support/until.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLink, type Link } from '../../src/link.js'
import { classifyClose } from '../../src/reasons.js'
import { controlTopic, SUPERSEDE_EVENT } from '../../src/protocol.js'
import { startSimulator, type PlatformSimulator } from '../../src/node/server/index.js'
import { handleMark, openHandlesSince } from '../support/no-leaks.js'
import { chartOf } from '../../src/chart-of.js'

const RUNS = Number(process.env.PROPERTY_RUNS ?? 30)
const DISCONNECT_BOUND_MS = 2_500

let sim: PlatformSimulator
let runIndex = 0

beforeAll(async () => {
  sim = await startSimulator({ agents: 'any', recordLimit: 100 })
})
afterAll(async () => {
  await sim.stop()
})

/** What the test did, to judge the invariants by. */
interface Record {
  agent: string
  link: Link
  /** Signals sent while a control channel was joined, in order, per session epoch. */
  sent: string[]
  /** Signals the handler received, in order. */
  handled: string[]
  /** Ids sent after a supersede was sent in the same session: never to be handled. */
  afterSupersede: Set<string>
  supersededThisSession: boolean
  /** Sockets accepted when the session last became terminated; null while not terminated. */
  acceptedAtEnd: number | null
  releaseSlow: Array<() => void>
  counter: number
  /** Simulator time (its upgrades' clock) of the last connect() that started a session. */
  connectedAt: number
}

type Command = fc.AsyncCommand<object, Record>

const within = <T>(promise: Promise<T>, ms: number, what: string) =>
  Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      const t = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms)
      void promise.finally(() => clearTimeout(t)).catch(() => {})
    }),
  ])

/**
 * A 409 after the server accepted a socket of this link: the platform may still hold that socket,
 * so the design retries it (own-conflict-retries; its 75 s window outlasts a property run).
 */
function ownConflict(r: Record): boolean {
  const last = sim.upgrades.filter((u) => u.agentId === r.agent).at(-1)
  return last !== undefined && last.status === 409 && last.at >= r.connectedAt && sim.accepted(r.agent).length > 0
}

/** A refusal the design says ends the session, if the agent's latest upgrade got one since the host last connected. */
function refusedSinceConnect(r: Record): boolean {
  const last = sim.upgrades.filter((u) => u.agentId === r.agent).at(-1)
  return last !== undefined && [400, 401, 403, 409].includes(last.status) && last.at >= r.connectedAt && !ownConflict(r)
}

/** Invariant 1, checked after every command. */
async function checkRefusalEnds(r: Record): Promise<void> {
  // Our own conflict never ends the session: it is retried (what comes after may still end it).
  if (ownConflict(r)) expect(r.link.lastDisconnectReason, 'our own 409 ended the session').not.toMatchObject({ kind: 'rejected', cause: 'conflict', retryable: false })
  if (!refusedSinceConnect(r) || r.link.state === 'stopped' || r.link.state === 'idle') return
  await within(
    new Promise<void>((resolve) => {
      const check = () => (r.link.state === 'terminated' || r.link.state === 'stopped' ? resolve() : r.link.once('state', check))
      check()
    }),
    1_000,
    'the refused link to terminate',
  )
}

function checkNoReconnectAfterEnd(r: Record): void {
  if (r.link.state === 'terminated') {
    r.acceptedAtEnd ??= sim.accepted(r.agent).length
    expect(sim.accepted(r.agent).length, 'a terminated session opened another socket').toBe(r.acceptedAtEnd)
  }
}

/** Invariant 3. */
function checkSignals(r: Record): void {
  expect(new Set(r.handled).size, `a signal was handled twice: ${r.handled}`).toBe(r.handled.length)
  let last = -1
  for (const id of r.handled) {
    const at = r.sent.indexOf(id)
    expect(at, `handled ${id}, which was never sent`).toBeGreaterThanOrEqual(0)
    expect(at, `signals out of order: ${r.handled.join(',')}`).toBeGreaterThan(last)
    last = at
    expect(r.afterSupersede.has(id), `${id} arrived after a supersede and was handled`).toBe(false)
  }
}

const settleALittle = (r: Record) =>
  within(
    new Promise<void>((resolve) => {
      // Let the link reach any state it is heading to: one turn of the event loop per hop, bounded.
      let hops = 0
      const step = () => (++hops > 20 ? resolve() : setImmediate(step))
      step()
      void r
    }),
    1_000,
    'a settle',
  )

class Connect implements Command {
  check = () => true
  async run(_: object, r: Record) {
    const from = r.link.state
    const pending = r.link.connect().catch(() => {})
    if (from === 'stopped' || from === 'terminated' || from === 'idle') {
      // Invariant 5: the reason is cleared the moment a session starts.
      expect(r.link.lastDisconnectReason).toBeNull()
      r.supersededThisSession = false
      r.acceptedAtEnd = null
      r.connectedAt = sim.upgrades.at(-1)?.at ?? 0
    }
    await within(pending, 3_000, 'connect() with the simulator accepting').catch(() => {})
  }
  toString = () => 'connect()'
}

class Disconnect implements Command {
  check = () => true
  async run(_: object, r: Record) {
    const was = r.link.state
    const reasonBefore = r.link.lastDisconnectReason
    await within(r.link.disconnect(), DISCONNECT_BOUND_MS, 'disconnect()')
    if (was === 'terminated') expect(r.link.lastDisconnectReason, 'disconnect() after a terminal reason keeps it').toBe(reasonBefore)
    else if (was !== 'idle') expect(r.link.lastDisconnectReason?.kind, 'a stop is graceful').toBe('graceful')
    for (const release of r.releaseSlow.splice(0)) release()
  }
  toString = () => 'disconnect()'
}

class ServerClose implements Command {
  constructor(readonly code: number) {}
  check = () => true
  async run(_: object, r: Record) {
    sim.close({ agent: r.agent }, this.code)
    await settleALittle(r)
  }
  toString = () => `server close ${this.code}`
}

class Drop implements Command {
  check = () => true
  async run(_: object, r: Record) {
    sim.abort({ agent: r.agent })
    await settleALittle(r)
  }
  toString = () => 'drop'
}

class RefuseNext implements Command {
  constructor(readonly status: number) {}
  check = () => true
  async run(_: object, r: Record) {
    // Only this agent's next upgrade: a rule that removes itself.
    sim.refuseUpgrades({ status: this.status, ...(this.status === 429 || this.status === 503 ? { retryAfter: '0' } : {}) })
    await settleALittle(r)
  }
  toString = () => `refuse the next upgrade with ${this.status}`
}

class Supersede implements Command {
  constructor(readonly close: number | null) {}
  check = () => true
  async run(_: object, r: Record) {
    const joined = sim.live(r.agent).some((c) => c.channels.has(controlTopic(r.agent)))
    const running = r.link.state === 'connected'
    if (sim.supersede(r.agent, { close: this.close }) > 0) r.supersededThisSession = true
    if (joined && running) {
      // Invariant 1, first half: a supersede the link received ends its session, superseded.
      await within(
        new Promise<void>((resolve) => {
          const check = () => (r.link.state === 'terminated' ? resolve() : r.link.once('state', check))
          check()
        }),
        1_000,
        'the superseded link to terminate',
      )
      expect(r.link.lastDisconnectReason?.kind).toBe('superseded')
    }
    await settleALittle(r)
  }
  toString = () => `supersede then ${this.close ?? 'no close'}`
}

class Signal implements Command {
  constructor(readonly slow: boolean) {}
  check = () => true
  async run(_: object, r: Record) {
    const id = `${this.slow ? 'slow' : 'sig'}-${r.counter++}`
    const joined = sim.live(r.agent).some((c) => c.channels.has(controlTopic(r.agent)))
    const quiet = r.link.state === 'connected' && !r.supersededThisSession && !r.sent.some((s) => s.startsWith('slow') && !r.handled.includes(s))
    if (joined && sim.control(r.agent, { mode: 'interrupt', correlation_id: id }) > 0) {
      r.sent.push(id)
      if (r.supersededThisSession) r.afterSupersede.add(id)
      // Liveness (invariant 3 would hold if nothing were ever delivered): a signal pushed to a
      // connected link's joined control channel, with no slow handler holding the queue, arrives.
      if (quiet && !this.slow) await until(() => r.handled.includes(id) || r.link.state !== 'connected', 2_000, `signal ${id} to be delivered`)
      if (quiet && !this.slow && r.link.state === 'connected') expect(r.handled, `signal ${id} sent to a connected link was never delivered`).toContain(id)
    }
    await settleALittle(r)
  }
  toString = () => (this.slow ? 'control signal (slow handler)' : 'control signal')
}

class ReleaseSlow implements Command {
  check = () => true
  async run(_: object, r: Record) {
    // The oldest slow handler finishes; signals queued behind it go on, one at a time.
    r.releaseSlow.shift()?.()
    await settleALittle(r)
  }
  toString = () => 'the oldest slow handler finishes'
}

class SupersedeWithSignalsAndClose implements Command {
  check = () => true
  async run(_: object, r: Record) {
    // A slow handler holds a signal while a supersede and a close arrive in the same read.
    const conn = sim.live(r.agent).find((c) => c.channels.has(controlTopic(r.agent)))
    if (!conn) return
    const topic = controlTopic(r.agent)
    const ref = conn.channels.get(topic)!.joinRef
    const a = `slow-${r.counter++}`
    const b = `sig-${r.counter++}`
    conn.send({ join_ref: ref, ref: null, topic, event: 'agent.control', payload: { mode: 'stop', scope: 'agent', agent_id: r.agent, correlation_id: a } })
    conn.send({ join_ref: ref, ref: null, topic, event: 'agent.control', payload: { mode: 'stop', scope: 'agent', agent_id: r.agent, correlation_id: b } })
    conn.send({ join_ref: ref, ref: null, topic, event: SUPERSEDE_EVENT, payload: { reason: 'session.already_connected' } })
    const late = `sig-${r.counter++}`
    conn.send({ join_ref: ref, ref: null, topic, event: 'agent.control', payload: { mode: 'stop', scope: 'agent', agent_id: r.agent, correlation_id: late } })
    conn.close(1000)
    r.sent.push(a, b, late)
    r.afterSupersede.add(late)
    r.supersededThisSession = true
    await settleALittle(r)
  }
  toString = () => 'slow signal, signal, supersede, signal, close in one read'
}

class SupersedeBehindJoinReply implements Command {
  check = () => true
  async run(_: object, r: Record) {
    // The next control join is answered, and a supersede follows in the same read.
    sim.onJoin(
      controlTopic(r.agent),
      {
        reply: 'ok',
        after: (c) => {
          r.supersededThisSession = true
          c.send({ join_ref: null, ref: null, topic: controlTopic(r.agent), event: SUPERSEDE_EVENT, payload: {} })
        },
      },
      1,
    )
    sim.close({ agent: r.agent }, 1001)
    await settleALittle(r)
  }
  toString = () => 'close 1001, then a supersede right behind the next join reply'
}

class CloseRacingDisconnect implements Command {
  check = () => true
  async run(_: object, r: Record) {
    sim.close({ agent: r.agent }, 1000)
    await within(r.link.disconnect(), DISCONNECT_BOUND_MS, 'disconnect() racing a close')
    for (const release of r.releaseSlow.splice(0)) release()
  }
  toString = () => 'server close 1000 racing disconnect()'
}

class InjectStale implements Command {
  check = () => true
  async run(_: object, r: Record) {
    const before = chartOf(r.link).getSnapshot()
    const { generation, epoch } = before.context
    if (generation < 2 && epoch < 2) return
    const value = JSON.stringify(before.value)
    const event =
      generation >= 2
        ? { type: 'socket.close' as const, reason: classifyClose({ code: 1000, reason: '' }, generation - 1, 0), generation: generation - 1, epoch }
        : { type: 'socket.close' as const, reason: classifyClose({ code: 1000, reason: '' }, generation, 0), generation, epoch: epoch - 1 }
    chartOf(r.link).send(event)
    // Invariant 6.
    expect(JSON.stringify(chartOf(r.link).getSnapshot().value), 'a stale event changed the state').toBe(value)
  }
  toString = () => 'a late close from a stale transport or session'
}

class CancelWait implements Command {
  check = () => true
  async run(_: object, r: Record) {
    const before = r.link.state
    const controller = new AbortController()
    const waiting = r.link.runForever({ signal: controller.signal }).then(
      () => 'resolved',
      (e: Error) => e.name,
    )
    controller.abort()
    const outcome = await within(waiting, 1_000, 'an aborted runForever()')
    if (before === 'connected') {
      expect(outcome).toBe('AbortError')
      expect(['connected', 'reconnecting', 'connecting', 'joining', 'terminated']).toContain(r.link.state)
      expect(r.link.state === 'stopped', 'cancelling a wait stopped the link').toBe(false)
    }
  }
  toString = () => 'runForever() cancelled by its signal'
}

const commands = [
  fc.constant(new Connect()),
  fc.constant(new Disconnect()),
  fc.constantFrom(1000, 1001, 1011, 1012, 4001, 1008).map((code) => new ServerClose(code)),
  fc.constant(new Drop()),
  fc.constantFrom(403, 409, 429, 503).map((status) => new RefuseNext(status)),
  fc.constantFrom(1000, 1001, 1011, null).map((close) => new Supersede(close)),
  fc.boolean().map((slow) => new Signal(slow)),
  fc.constant(new ReleaseSlow()),
  fc.constant(new SupersedeWithSignalsAndClose()),
  fc.constant(new SupersedeBehindJoinReply()),
  fc.constant(new CloseRacingDisconnect()),
  fc.constant(new InjectStale()),
  fc.constant(new CancelWait()),
]

describe('property runs against the real wire', () => {
  it(`${RUNS} random command sequences keep the six invariants`, async () => {
    const seed = process.env.PROPERTY_SEED ? Number(process.env.PROPERTY_SEED) : undefined
    const path = process.env.PROPERTY_PATH
    let total = 0
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: 14 }), async (cmds) => {
        const mark = handleMark()
        const agent = `prop-${runIndex++}`
        const record: Record = {
          agent,
          link: null as never,
          sent: [],
          handled: [],
          afterSupersede: new Set(),
          supersededThisSession: false,
          acceptedAtEnd: null,
          releaseSlow: [],
          counter: 0,
          connectedAt: 0,
        }
        record.link = createLink({
          url: sim.url,
          agentId: agent,
          apiKey: 'property-key',
          policy: {
            reconnect: { initialDelayMs: 5, maxDelayMs: 40, goingAwayFloorMs: [0, 10], serviceRestartFloorMs: [5, 20], tryAgainLaterFloorMs: [5, 20], rapidWindowMs: 50, stableAfterMs: 50 },
            connection: { connectTimeoutMs: 1_000, joinTimeoutMs: 1_000, leaveTimeoutMs: 200 },
            transport: { closeTimeoutMs: 200 },
          },
          onControl: async (signal, delivery) => {
            const id = signal.correlationId ?? '?'
            if (id.startsWith('slow')) {
              await new Promise<void>((resolve) => {
                record.releaseSlow.push(resolve)
                delivery.signal.addEventListener('abort', () => resolve())
              })
            }
            record.handled.push(id)
          },
        })
        try {
          await fc.asyncModelRun(() => ({ model: {}, real: record }), [...cmds].map((c) => {
            const inner = c as Command
            return {
              check: () => true,
              run: async (m: object, r: Record) => {
                await inner.run(m, r)
                await checkRefusalEnds(r)
                checkNoReconnectAfterEnd(r)
                checkSignals(r)
              },
              toString: () => inner.toString(),
            }
          }))
        } finally {
          // Invariant 4: from wherever the run left it, the link connects again.
          for (const release of record.releaseSlow.splice(0)) release()
          sim.resetScripts()
          await within(record.link.disconnect(), DISCONNECT_BOUND_MS, 'the closing disconnect()')
          await within(record.link.connect(), 3_000, 'connect() after the run')
          expect(record.link.state).toBe('connected')
          await within(record.link.disconnect(), DISCONNECT_BOUND_MS, 'the last disconnect()')
          expect(record.link.lastDisconnectReason?.kind, 'kept after stop').toBe('graceful')
          checkSignals(record)
          for (const c of sim.accepted(agent)) if (c.state !== 'closed') c.abort()
          await sim.waitFor(() => sim.accepted(agent).every((c) => c.state === 'closed'), { timeoutMs: 2_000, what: 'the run sockets to close' })
          // Invariant 2: nothing the run opened is still open.
          const left = await new Promise<string[]>((resolve) => {
            const deadline = performance.now() + 2_000
            const look = () => {
              const open = openHandlesSince(mark)
              if (open.length === 0 || performance.now() > deadline) resolve(open)
              else setImmediate(look)
            }
            look()
          })
          expect(left, 'handles left by a run').toEqual([])
          total++
        }
      }),
      { numRuns: RUNS, ...(seed !== undefined ? { seed } : {}), ...(path ? { path } : {}), endOnFailure: true },
    )
    console.info(`[properties] ${total} runs of up to 14 commands kept every invariant`)
  }, 60_000 + RUNS * 2_000)
})
