/**
 * Real-wire harness: links against simulators on 127.0.0.1 with small policy delays. Every
 * wait is for a state or an event, with a bound; `world.cleanup()` disconnects every link and
 * stops every simulator the test made.
 */
import { afterEach, expect } from 'vitest'
import { createLink, type Link, type LinkEvent, type LinkEvents, type LinkOptions } from '../../src/link.js'
import type { LinkPolicyInput } from '../../src/policy.js'
import { startSimulator, type PlatformSimulator, type SimulatorOptions } from '../../src/node/server/index.js'
import type { LinkState } from '../../machines/status.js'

/** Small delays so a lifecycle runs in milliseconds; floors kept distinguishable from backoff. */
export const FAST: LinkPolicyInput = {
  reconnect: {
    initialDelayMs: 20,
    maxDelayMs: 100,
    goingAwayFloorMs: [0, 30],
    serviceRestartFloorMs: [150, 200],
    tryAgainLaterFloorMs: [250, 300],
    rapidWindowMs: 1_000,
  },
  channel: { joinTimeoutMs: 400, rejoinInitialDelayMs: 20, rejoinMaxDelayMs: 40, leaveTimeoutMs: 300 },
  connection: { connectTimeoutMs: 2_000, joinTimeoutMs: 1_000, leaveTimeoutMs: 300 },
  transport: { closeTimeoutMs: 300 },
}

export interface Captured {
  lines: Array<{ level: string; message: string; fields?: Record<string, unknown> }>
  events: LinkEvent[]
}

/** A test's simulators and links, released by `cleanup()`. */
export class World {
  readonly sims: PlatformSimulator[] = []
  readonly links: Link[] = []
  readonly captured = new Map<Link, Captured>()

  async sim(options: SimulatorOptions = {}): Promise<PlatformSimulator> {
    const sim = await startSimulator({ agents: { 'agent-1': 'key-1', 'agent-2': 'key-2' }, ...options })
    this.sims.push(sim)
    return sim
  }

  link(sim: PlatformSimulator, options: Partial<LinkOptions> & { policy?: LinkPolicyInput } = {}): Link {
    const captured: Captured = { lines: [], events: [] }
    // A pino-style logger: `(fields, message)`, or `(message)` for a line without fields.
    const capture =
      (level: 'debug' | 'info' | 'warn' | 'error') =>
      (...line: [Record<string, unknown>, string] | [string]) =>
        void captured.lines.push(line.length === 2 ? { level, message: line[1], fields: line[0] } : { level, message: line[0], fields: undefined })
    const logger = { debug: capture('debug'), info: capture('info'), warn: capture('warn'), error: capture('error') }
    const policy = merge(FAST, options.policy ?? {})
    const link = createLink({ url: sim.url, agentId: 'agent-1', apiKey: 'key-1', logger, ...options, policy })
    link.onAny((event) => captured.events.push(event))
    this.links.push(link)
    this.captured.set(link, captured)
    return link
  }

  async cleanup(): Promise<void> {
    await Promise.all(this.links.map((l) => l.disconnect()))
    await Promise.all(this.sims.map((s) => s.stop()))
  }
}

/** `a` with the sections of `b` spread over it, section by section. */
export function merge(a: LinkPolicyInput, b: LinkPolicyInput): LinkPolicyInput {
  const out: Record<string, object> = {}
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
    out[key] = { ...(a as Record<string, object>)[key], ...(b as Record<string, object>)[key] }
  }
  return out as LinkPolicyInput
}

/** Makes a World per test and cleans it up after. */
export function useWorld(): () => World {
  let world: World | null = null
  afterEach(async () => {
    const w = world
    world = null
    await w?.cleanup()
  })
  return () => (world ??= new World())
}

/**
 * Resolves with the next `type` event that matches `filter`; register it before causing the event.
 *
 * @throws (rejects) after `timeoutMs` naming the event it waited for.
 */
export function next<K extends keyof LinkEvents>(
  link: Link,
  type: K,
  options: { timeoutMs?: number; filter?: (e: LinkEvents[K]) => boolean } = {},
): Promise<LinkEvents[K]> {
  const timeoutMs = options.timeoutMs ?? 4000
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off()
      reject(new Error(`timed out after ${timeoutMs} ms waiting for a ${String(type)} event (link state ${link.state})`))
    }, timeoutMs)
    const off = link.on(type, (e) => {
      if (options.filter && !options.filter(e)) return
      clearTimeout(timer)
      off()
      resolve(e)
    })
  })
}

/** Resolves once the link is in `state` (now or later). */
export function untilState(link: Link, state: LinkState, timeoutMs = 4000): Promise<void> {
  if (link.state === state) return Promise.resolve()
  return next(link, 'state', { timeoutMs, filter: (e) => e.state === state }).then(() => undefined)
}

/**
 * A slow control handler: records `start <id>` and `end <id>` of each signal in `delivered`,
 * holds the signal `gateId` until `release()` is called, and resolves `lastDone` once the signal
 * `lastId` has ended. For scenario 12 (a supersede while a slow handler runs).
 */
export function gatedControl(gateId: string, lastId: string): {
  onControl: NonNullable<LinkOptions['onControl']>
  delivered: string[]
  release: () => void
  lastDone: Promise<void>
} {
  const delivered: string[] = []
  let release!: () => void
  const gate = new Promise<void>((resolve) => (release = resolve))
  let lastEnded!: () => void
  const lastDone = new Promise<void>((resolve) => (lastEnded = resolve))
  const onControl: NonNullable<LinkOptions['onControl']> = async (signal) => {
    delivered.push(`start ${signal.correlationId}`)
    if (signal.correlationId === gateId) await gate
    delivered.push(`end ${signal.correlationId}`)
    if (signal.correlationId === lastId) lastEnded()
  }
  return { onControl, delivered, release, lastDone }
}

/** Resolves when `promise` settles and returns how; never rejects. */
export async function settle<T>(promise: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await promise }
  } catch (error) {
    return { ok: false, error }
  }
}

/** The frames a simulator socket received with `event` (and `topic`, when given). */
export function framesIn(conn: { frames: Array<{ dir: string; frame: { event: string; topic: string; join_ref: string | number | boolean | null } | null }> }, event: string, topic?: string) {
  return conn.frames.filter((f) => f.dir === 'in' && f.frame?.event === event && (topic === undefined || f.frame.topic === topic)).map((f) => f.frame!)
}

/**
 * The `ignored` detail of a supersede the platform sent to a link's lost socket (generation 1)
 * because the link's own next socket (generation 2) connected. Which of the two depends on which
 * the link reads first, the supersede or its next upgrade's 101 (the platform supersedes in
 * `connect/3`, before it answers): read after the 101, it is stale; read before, it is held
 * until the upgrade is answered, then dismissed as the upgrade was accepted.
 */
export const OWN_SUPERSEDE_IGNORED =
  /^(from a stale transport \(generation 1, current 2\)|a supersede of the previous socket \(generation 1\), held while the next upgrade was out: the next upgrade was accepted, so it may be the platform superseding our own previous socket)$/

/**
 * Another instance of agent-1 connects (a link of `world` to `sim`) while `older` is between
 * sockets: `older` must end `superseded` on the socket it gave up (generation 1), and the newer
 * instance stay connected.
 */
export async function newerInstanceSupersedes(world: World, sim: PlatformSimulator, older: Link): Promise<void> {
  const ended = next(older, 'disconnected', { filter: (e) => e.terminal })
  const newer = world.link(sim)
  await newer.connect()
  expect((await ended).reason).toMatchObject({ kind: 'superseded', generation: 1 })
  expect(older.state).toBe('terminated')
  expect(newer.state).toBe('connected')
}
