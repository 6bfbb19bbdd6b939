/**
 * Property runs on every peer (the simulator, and real Phoenix on Bandit and on Cowboy): random
 * sequences of server faults and host calls against one link, judged after every step by
 * invariants taken from the lifecycle rules (../shared/SCENARIOS.md) and from what the server
 * saw, not from the charts:
 *   1. once the link settles, the server holds exactly one live socket of the agent while the link
 *      reads connected, and none once it stopped or ended;
 *   2. a session ended by a supersede (the admin route, or a rival instance with the same key) or
 *      by an upgrade refused 403 opens no other socket until the host connects again;
 *   3. the server's "disconnect", a control channel's phx_close and a 503 refusal never end the
 *      session: the link is connected again on a new socket; a control channel's phx_error is
 *      rejoined on the same socket, with no loss reported;
 *   4. every app channel the host still wants is joined on the server's current socket, and no
 *      join_ref of a topic is used on two sockets; a channel's phx_error rejoins it on the same
 *      socket, its phx_close and a refused join drop it for good;
 *   5. a push settles within its timeout (a reply, or a typed PushError);
 *   6. control signals sent while the link is connected reach the handler once each, in order,
 *      a repeated correlation id once;
 *   7. no `disconnected` reason is `other`, and a channel's is only for a crash (errored);
 *   8. disconnect() resolves within its bound; a connect() cancelled by its signal rejects with an
 *      AbortError and the link connects anyway.
 * Most steps start from rest (the link settled); two land while the link is between sockets (a
 * host's reconnect() during the backoff, a second "disconnect" while the next socket joins). Events
 * of an older socket arriving after a newer one opened (stale generations) need a delay no server
 * fault gives on loopback: the pure chart tests and test/wire/stale.test.ts hold those.
 * The sequences are seeded: `PROPERTY_RUNS` (default 15 per peer, at most the peer's 1,000
 * agents) and `PROPERTY_SEED` replay one run; a failure prints its seed, its steps and the link's
 * events.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { createLink, type Link, type LinkEvent } from '../../src/link.js'
import type { LinkChannel } from '../../src/link-channel.js'
import { controlTopic } from '../../src/protocol.js'
import { within } from '../../src/node/within.js'
import { until } from '../support/until.js'
import { merge } from '../support/wire.js'
import { CONFORMANCE_POLICY, usePeer } from './harness.js'
import type { Agent, Peer, PeerFactory } from './peer.js'

const RUNS = Number(process.env.PROPERTY_RUNS ?? 15)
const SEED = process.env.PROPERTY_SEED === undefined ? undefined : Number(process.env.PROPERTY_SEED)
/** How long a step may take to settle on a real server sharing two cores with the suite. */
const SETTLE_MS = 10_000
const DISCONNECT_BOUND_MS = 2_500
const PUSH_TIMEOUT_MS = 1_500

/** The conformance policy, and no slow-down: these runs close the socket often on purpose (the rapid-disconnect limit is the week-long soak's). */
const POLICY = merge(CONFORMANCE_POLICY, { reconnect: { rapidLimit: 1_000 }, transport: { pushTimeoutMs: PUSH_TIMEOUT_MS } })

/** The app channels a run may join: three rooms of its agent. */
const ROOMS = 3

/** One step: a server fault or a host call. */
type Step =
  | { k: 'disconnect' }
  | { k: 'supersede' }
  | { k: 'rival' }
  | { k: 'controlError' }
  | { k: 'controlClose' }
  | { k: 'refuse'; status: 403 | 503 }
  | { k: 'join'; room: number }
  | { k: 'leave'; room: number }
  | { k: 'refuseJoin' }
  | { k: 'roomError'; room: number }
  | { k: 'roomClose'; room: number }
  | { k: 'push'; room: number }
  | { k: 'serverPush'; room: number }
  | { k: 'control'; n: number; via: 'push' | 'broadcast'; repeat: boolean }
  | { k: 'restart'; cancelFirst: boolean }
  | { k: 'ping' }
  | { k: 'reconnect' }
  | { k: 'retryNow' }
  | { k: 'closeJustReopened' }

const room = fc.integer({ min: 0, max: ROOMS - 1 })
const STEP: fc.Arbitrary<Step> = fc.oneof(
  { arbitrary: fc.constant({ k: 'disconnect' as const }), weight: 4 },
  { arbitrary: fc.constant({ k: 'supersede' as const }), weight: 1 },
  { arbitrary: fc.constant({ k: 'rival' as const }), weight: 1 },
  { arbitrary: fc.constant({ k: 'controlError' as const }), weight: 2 },
  { arbitrary: fc.constant({ k: 'controlClose' as const }), weight: 2 },
  { arbitrary: fc.record({ k: fc.constant('refuse' as const), status: fc.constantFrom(403 as const, 503 as const) }), weight: 2 },
  { arbitrary: fc.record({ k: fc.constant('join' as const), room }), weight: 6 },
  { arbitrary: fc.record({ k: fc.constant('leave' as const), room }), weight: 2 },
  { arbitrary: fc.constant({ k: 'refuseJoin' as const }), weight: 1 },
  { arbitrary: fc.record({ k: fc.constant('roomError' as const), room }), weight: 2 },
  { arbitrary: fc.record({ k: fc.constant('roomClose' as const), room }), weight: 1 },
  { arbitrary: fc.record({ k: fc.constant('push' as const), room }), weight: 3 },
  { arbitrary: fc.record({ k: fc.constant('serverPush' as const), room }), weight: 2 },
  { arbitrary: fc.record({ k: fc.constant('control' as const), n: fc.integer({ min: 1, max: 3 }), via: fc.constantFrom('push' as const, 'broadcast' as const), repeat: fc.boolean() }), weight: 3 },
  { arbitrary: fc.record({ k: fc.constant('restart' as const), cancelFirst: fc.boolean() }), weight: 2 },
  { arbitrary: fc.constant({ k: 'ping' as const }), weight: 1 },
  { arbitrary: fc.constant({ k: 'reconnect' as const }), weight: 1 },
  { arbitrary: fc.constant({ k: 'retryNow' as const }), weight: 2 },
  { arbitrary: fc.constant({ k: 'closeJustReopened' as const }), weight: 2 },
)

/** A step as a failure prints it. */
function shown(step: Step): string {
  const { k, ...rest } = step
  return Object.keys(rest).length === 0 ? k : `${k} ${JSON.stringify(rest)}`
}

/** What one run did and saw, to judge the invariants by. */
class Run {
  readonly events: LinkEvent[] = []
  readonly handled: string[] = []
  /** Correlation ids the server sent while the link was connected, in order, each once. */
  readonly sent: string[] = []
  /** The rooms the host wants joined, by index, with their handles. */
  readonly wanted = new Map<number, LinkChannel>()
  /** The agent's upgrades the server had answered when the session ended for good; null while it has not. */
  upgradesAtEnd: number | null = null
  /** Rooms whose server push the handle received, by payload id. */
  readonly serverPushes = new Set<string>()
  steps = 0

  constructor(
    readonly peer: Peer,
    readonly agent: Agent,
    readonly link: Link,
  ) {
    link.onAny((e) => this.events.push(e))
  }

  /** The wanted room a step names, its index among the wanted rooms (modulo their count), with its handle; null while none is wanted. */
  pick(room: number): { index: number; handle: LinkChannel } | null {
    const wanted = [...this.wanted.keys()].sort()
    if (wanted.length === 0) return null
    const index = wanted[room % wanted.length]!
    return { index, handle: this.wanted.get(index)! }
  }

  /** The room a join step names: the first one not wanted from its index on; null while all are. */
  unwanted(room: number): number | null {
    for (let i = 0; i < ROOMS; i++) if (!this.wanted.has((room + i) % ROOMS)) return (room + i) % ROOMS
    return null
  }

  topic(room: number): string {
    return `room:${this.agent.id}-${room}`
  }

  get control(): string {
    return controlTopic(this.agent.id)
  }

  /** The link's events as a failure prints them. */
  story(): string {
    return this.events
      .filter((e) => e.type === 'state' || e.type === 'disconnected' || e.type === 'channel')
      .map((e) => (e.type === 'state' ? e.state : e.type === 'disconnected' ? `disconnected ${e.reason.kind} -> ${e.outcome}` : `${e.topic} ${e.status}`))
      .join(', ')
  }

  /** The disconnected events from index `from` on. */
  lossesSince(from: number): Array<Extract<LinkEvent, { type: 'disconnected' }>> {
    return this.events.slice(from).filter((e): e is Extract<LinkEvent, { type: 'disconnected' }> => e.type === 'disconnected')
  }
}

/** Waits for `check` within {@link SETTLE_MS}; a timeout names `what` and the link's events until then. */
function untilRun(run: Run, check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  return until(check, SETTLE_MS, what).catch((error: Error) => {
    throw new Error(`${error.message}; events: ${run.story()}`)
  })
}

/**
 * Waits until the link and the server agree at rest: connected with exactly one live socket and
 * every wanted room joined on it, or stopped or terminated with none (invariants 1 and 4).
 * @returns the live socket, or null once stopped or terminated.
 */
async function settled(run: Run, what: string): Promise<string | null> {
  const { link, peer, agent } = run
  let live: string[] = []
  let problem = ''
  const check = async (): Promise<boolean> => {
    const state = link.state
    live = await peer.live(agent)
    if (state === 'stopped' || state === 'terminated' || state === 'idle') {
      problem = `${state} with live sockets ${JSON.stringify(live)}`
      return live.length === 0
    }
    if (state !== 'connected') {
      problem = `the link is ${state}`
      return false
    }
    if (live.length !== 1) {
      problem = `connected with live sockets ${JSON.stringify(live)}`
      return false
    }
    const control = (await peer.joins(agent, run.control)).at(-1)
    if (control?.socket !== live[0]) {
      problem = `the control channel is joined on ${control?.socket ?? 'no socket'}, the live one is ${live[0]}`
      return false
    }
    for (const [index, handle] of run.wanted) {
      if (handle.status !== 'joined') {
        problem = `${handle.topic} is ${handle.status}`
        return false
      }
      const last = (await peer.joins(agent, run.topic(index))).at(-1)
      if (last?.socket !== live[0]) {
        problem = `${handle.topic} is joined on ${last?.socket ?? 'no socket'}, the live one is ${live[0]}`
        return false
      }
    }
    return link.state === 'connected'
  }
  await until(check, SETTLE_MS, `${what} to settle`).catch((error: Error) => {
    throw new Error(`${error.message}; last seen: ${problem}; events: ${run.story()}`)
  })
  return link.state === 'connected' ? live[0]! : null
}

/** Invariant 4's second half: no join_ref of a topic on two sockets. */
async function joinRefsFresh(run: Run): Promise<void> {
  for (let index = 0; index < ROOMS; index++) {
    const socketOf = new Map<string, string>()
    for (const join of await run.peer.joins(run.agent, run.topic(index))) {
      const first = socketOf.get(join.joinRef)
      expect(first === undefined || first === join.socket, `join_ref ${join.joinRef} of ${run.topic(index)} used on ${first} and again on ${join.socket}`).toBe(true)
      socketOf.set(join.joinRef, join.socket)
    }
  }
}

/** Invariant 2: checked before the host connects again, and at the end. */
async function noSocketSinceEnd(run: Run): Promise<void> {
  if (run.upgradesAtEnd === null) return
  const upgrades = (await run.peer.upgrades(run.agent)).length
  expect(upgrades, `an ended session opened another socket (events: ${run.story()})`).toBe(run.upgradesAtEnd)
}

/**
 * The session ended for good: from now the server must see no upgrade of this link until the host
 * connects. With a rival instance live the server's records of the agent are not the link's
 * alone: the rival's step counts them once the rival is gone.
 */
async function ended(run: Run, kind: string, rivalLive = false): Promise<void> {
  await untilRun(run, () => run.link.state === 'terminated', `the link to end ${kind}`)
  expect(run.link.lastDisconnectReason, `the session's end (events: ${run.story()})`).toMatchObject({ kind })
  if (rivalLive) return
  await settled(run, `the ${kind} link`)
  // The server logs an upgrade just after answering it: the count is read once the link is at rest.
  run.upgradesAtEnd = (await run.peer.upgrades(run.agent)).length
}

/** Invariant 3: after step `s`, the link is connected again on another socket than `before`, and no loss since event `from` ended the session. */
async function reconnected(run: Run, s: Step, before: string, from: number): Promise<void> {
  const now = await settled(run, `the link after ${shown(s)}`)
  expect(now, `the link after ${shown(s)} (events: ${run.story()})`).not.toBeNull()
  expect(now).not.toBe(before)
  expect(run.lossesSince(from).every((e) => e.outcome !== 'terminated'), run.story()).toBe(true)
}

/** The host is about to connect again (a session that ended or stopped): invariant 2 is judged first. */
async function beforeHostConnects(run: Run): Promise<void> {
  await noSocketSinceEnd(run)
  run.upgradesAtEnd = null
}

/**
 * Runs one step and judges it. Steps a state makes meaningless (a server fault while no socket is
 * live, a channel step with no room wanted) do nothing; `acted` counts those that did.
 */
async function step(run: Run, s: Step, acted: Map<string, number>): Promise<void> {
  const { link, peer, agent } = run
  const before = link.state === 'connected' ? await settled(run, 'the link before the step') : null
  const acts = s.k === 'join' ? run.wanted.size < ROOMS : 'room' in s ? run.wanted.size > 0 : true
  if (before !== null && acts) acted.set(s.k, (acted.get(s.k) ?? 0) + 1)
  const from = run.events.length
  switch (s.k) {
    case 'disconnect':
    case 'controlClose':
    case 'refuse': {
      if (before === null) return
      if (s.k === 'refuse') await peer.refuse({ status: s.status })
      if (s.k === 'controlClose') await peer.channelClose(agent, run.control)
      else await peer.disconnect(agent)
      if (s.k === 'refuse' && s.status === 403) return ended(run, 'rejected')
      // Invariant 3: a normal close, the control channel's close and a 503 are never the end.
      await untilRun(run, () => run.lossesSince(from).length > 0, `the loss after ${shown(s)}`)
      return reconnected(run, s, before, from)
    }
    case 'supersede': {
      if (before === null) return
      await peer.supersede(agent)
      return ended(run, 'superseded')
    }
    case 'rival': {
      if (before === null) return
      const rival = createLink({ url: peer.url, agentId: agent.id, apiKey: agent.key, policy: POLICY })
      try {
        await rival.connect()
        await ended(run, 'superseded', true)
        // The platform closes the older socket just after its supersede push (the reference peer SUPERSEDE_CLOSE_DELAY_MS later): the rival keeps the key.
        await peer.until(async () => (await peer.live(agent)).length === 1, 'only the rival socket live', SETTLE_MS)
      } finally {
        await rival.disconnect()
      }
      await peer.until(async () => (await peer.live(agent)).length === 0, 'the rival gone')
      // The rival's upgrade is not the ended link's.
      run.upgradesAtEnd = (await peer.upgrades(agent)).length
      return
    }
    case 'controlError': {
      if (before === null) return
      const joins = (await peer.joins(agent, run.control)).length
      await peer.channelError(agent, run.control)
      // Invariant 3: the crashed control channel is joined again, on the same socket.
      await peer.until(async () => (await peer.joins(agent, run.control)).length > joins, 'the control channel rejoined after its phx_error', SETTLE_MS)
      expect((await peer.joins(agent, run.control)).at(-1)?.socket, 'the control channel rejoined on the same socket').toBe(before)
      expect(await settled(run, 'the link after its control channel crashed'), run.story()).toBe(before)
      expect(run.lossesSince(from), 'a control channel crash is not a loss').toEqual([])
      return
    }
    case 'retryNow':
    case 'closeJustReopened': {
      if (before === null) return
      // A host call or a fault that lands while the link is between sockets, not at rest.
      await peer.disconnect(agent)
      const waypoint = s.k === 'retryNow' ? 'reconnecting' : 'joining'
      await untilRun(run, () => link.state === waypoint || run.events.slice(from).some((e) => e.type === 'state' && e.state === waypoint), `the link ${waypoint} after the server's disconnect`)
      if (s.k === 'retryNow') {
        // True when it cut the backoff short; false when the link had left it already.
        expect(typeof link.reconnect()).toBe('boolean')
      } else {
        // A second "disconnect" as soon as the server holds the next socket. The link reads
        // `joining` once it has its 101, and the server may not yet count that socket live (a
        // "disconnect" reaches live sockets only), so this waits for it; by then the link is mostly
        // connected already (a review counted `connected` 10 times and `joining` 3 of 13 on the
        // reference peer, whose control join is answered within a millisecond or two). The close
        // during `joining` itself is crossed by the generated paths (test/model/paths.test.ts:
        // every transition of the connection chart) on the simulator; this step checks the loss
        // is seen and the link comes back, whichever state the close met.
        await peer.until(async () => (await peer.live(agent)).some((id) => id !== before), 'the next socket live', SETTLE_MS)
        await peer.disconnect(agent)
        await untilRun(run, () => run.lossesSince(from).length >= 2, `the second loss after ${shown(s)}`)
      }
      return reconnected(run, s, before, from)
    }
    case 'join': {
      const index = run.unwanted(s.room)
      if (index === null) return
      run.wanted.set(index, link.channel(run.topic(index)))
      if (before !== null) await settled(run, `${run.topic(index)} joined`)
      return
    }
    case 'leave': {
      const picked = run.pick(s.room)
      if (picked === null) return
      const { index, handle } = picked
      run.wanted.delete(index)
      await handle.leave()
      expect(handle.status).toBe('left')
      return
    }
    case 'refuseJoin': {
      if (before === null) return
      const topic = `room:${agent.id}-refused-${run.steps}`
      await peer.joinOutcome(topic, 'error', { reason: 'unauthorized' }, 1)
      const handle = link.channel(topic)
      await expect(handle.joined()).rejects.toMatchObject({ reason: { kind: 'rejected', cause: 'unauthorized', retryable: false } })
      expect(handle.status).toBe('dropped')
      return
    }
    case 'roomError':
    case 'roomClose': {
      const picked = run.pick(s.room)
      if (before === null || picked === null) return
      const { index, handle } = picked
      const topic = handle.topic
      const joins = (await peer.joins(agent, topic)).length
      if (s.k === 'roomClose') {
        await peer.channelClose(agent, topic)
        await untilRun(run, () => handle.status === 'dropped', `${topic} dropped after its phx_close`)
        run.wanted.delete(index)
        expect(handle.reason?.retryable, `${topic} is never rejoined after a phx_close`).toBe(false)
        return
      }
      await peer.channelError(agent, topic)
      await peer.until(async () => (await peer.joins(agent, topic)).length > joins || link.state !== 'connected', `${topic} rejoined`, SETTLE_MS)
      if ((await settled(run, `${topic} after its crash`)) === before) {
        expect((await peer.joins(agent, topic)).at(-1)?.socket, `${topic} rejoined on the same socket`).toBe(before)
      }
      return
    }
    case 'push': {
      const handle = run.pick(s.room)?.handle
      if (!handle) return
      // Invariant 5: a reply, or a typed PushError, within the push timeout and a margin.
      const outcome = await within(
        handle.push('ping', { n: run.steps }).then(
          (reply) => ({ reply }),
          (error: unknown) => ({ error }),
        ),
        PUSH_TIMEOUT_MS + 2_000,
        `a push on ${handle.topic} to settle`,
      )
      if ('reply' in outcome) expect(outcome.reply).toEqual({ echo: { n: run.steps }, event: 'ping' })
      else expect((outcome.error as { name?: string }).name, String(outcome.error)).toBe('PushError')
      return
    }
    case 'serverPush': {
      const handle = run.pick(s.room)?.handle
      if (before === null || !handle) return
      const id = `p${run.steps}`
      const got = new Promise<void>((resolve) => {
        const off = handle.on('news', (payload) => {
          if ((payload as { id?: string }).id !== id) return
          off()
          resolve()
        })
      })
      expect(await peer.push(agent, handle.topic, 'news', { id }), `${handle.topic} joined on the server`).toBeGreaterThanOrEqual(1)
      await within(got, SETTLE_MS, `the server push on ${handle.topic}`)
      return
    }
    case 'control': {
      if (before === null) return
      const tag = `s${run.steps}`
      const ids = await peer.control(agent, { n: s.n, via: s.via, tag })
      if (s.repeat) await peer.control(agent, { n: s.n, via: s.via, tag })
      run.sent.push(...ids)
      await untilRun(run, () => ids.every((id) => run.handled.includes(id)) || link.state !== 'connected', `signals ${ids.join(', ')} handled`)
      return
    }
    case 'restart': {
      if (link.state !== 'stopped' && link.state !== 'terminated') {
        const stopped = link.disconnect()
        await within(stopped, DISCONNECT_BOUND_MS, 'disconnect()')
        expect(link.state).toBe('stopped')
        await settled(run, 'the stopped link')
        run.upgradesAtEnd = (await peer.upgrades(agent)).length
      }
      // The channels the host wanted are joined again in the new session (test/wire/channels.test.ts).
      await beforeHostConnects(run)
      if (s.cancelFirst) {
        const controller = new AbortController()
        const waiting = link.connect({ signal: controller.signal })
        controller.abort()
        await expect(waiting).rejects.toMatchObject({ name: 'AbortError' })
        // Cancelling a wait is not a stop: the link connects anyway.
      } else {
        await link.connect()
      }
      expect(await settled(run, 'the restarted link'), run.story()).not.toBeNull()
      return
    }
    case 'ping': {
      const result = await link.ping({ timeoutMs: 3_000 })
      expect(result.outcome, JSON.stringify(result)).toBe(before === null ? 'not-connected' : 'alive')
      return
    }
    case 'reconnect': {
      // Nothing to retry while connected or ended: false, and nothing happens.
      expect(link.reconnect()).toBe(false)
      return
    }
  }
}

/** Invariants 6 and 7, judged on the whole run. */
function judgeRun(run: Run): void {
  expect(new Set(run.handled).size, `a signal was handled twice: ${run.handled.join(', ')}`).toBe(run.handled.length)
  expect(run.handled, 'signals sent while connected, each handled once, in order').toEqual(run.sent)
  for (const e of run.events) {
    if (e.type === 'disconnected') expect(e.reason.kind, `a disconnect reason (${JSON.stringify(e.reason)})`).not.toBe('other')
    if (e.type === 'channel' && e.reason?.kind === 'other') expect(e.status, `${e.topic}'s reason other (${JSON.stringify(e.reason)})`).toBe('errored')
  }
}

/** Registers the property runs for one peer. */
export function lifecycleProperties(factory: PeerFactory): void {
  describe.skipIf(factory.unavailable !== null)(`property runs on ${factory.name}`, () => {
    const peerOf = usePeer(factory)

    it(`${RUNS} random sequences of server faults and host calls keep the lifecycle invariants`, async () => {
      const peer = peerOf()
      let runs = 0
      const acted = new Map<string, number>()
      await fc.assert(
        fc.asyncProperty(fc.array(STEP, { minLength: 4, maxLength: 10 }), async (steps) => {
          runs++
          const agent = peer.agent()
          const run: Run = new Run(
            peer,
            agent,
            createLink({ url: peer.url, agentId: agent.id, apiKey: agent.key, policy: POLICY, onControl: (signal) => void run.handled.push(String(signal.correlationId)) }),
          )
          try {
            // Every run starts with one room wanted, so the channel steps have one to act on.
            run.wanted.set(0, run.link.channel(run.topic(0)))
            await run.link.connect()
            for (const s of steps) {
              run.steps++
              try {
                await step(run, s, acted)
              } catch (error) {
                throw new Error(`step ${run.steps} (${shown(s)}) of [${steps.map(shown).join(', ')}]: ${(error as Error).message}`, { cause: error })
              }
            }
            await settled(run, 'the link after the last step')
            await noSocketSinceEnd(run)
            await joinRefsFresh(run)
            judgeRun(run)
          } finally {
            await within(run.link.disconnect(), DISCONNECT_BOUND_MS, 'disconnect() at the end')
          }
          await peer.until(async () => (await peer.live(agent)).length === 0, 'no socket of the agent after disconnect()')
        }),
        { numRuns: RUNS, endOnFailure: true, ...(SEED === undefined ? {} : { seed: SEED }) },
      )
      expect(runs).toBe(RUNS)
      // What the runs exercised on a connected link (a seed that skips every step proves nothing).
      console.log(`${factory.name}: ${RUNS} runs, steps on a connected link: ${[...acted].sort().map(([k, n]) => `${k} ${n}`).join(', ')}`)
      expect(acted.size, 'kinds of step run on a connected link').toBeGreaterThanOrEqual(5)
    }, 60_000 + RUNS * 45_000)
  })
}
