/**
 * The simulator over HTTP: every control of {@link PlatformSimulator}'s TypeScript API as a JSON
 * route (`POST /admin/<control>`), its records (`GET /admin/sockets`, `/admin/upgrades`, ...),
 * and long-poll waits (`POST /admin/wait`), so an agent in any language, or a host in its own
 * process, can be scripted against it. Every body is checked with zod; a bad one is a 400 naming
 * the field. The routes are described by an OpenAPI 3.1 document generated from the same schemas
 * (`GET /admin/openapi.json`; docs/simulator-http.md lists them).
 *
 * Access: with `adminToken` set, every `/admin` route needs `Authorization: Bearer <token>`
 * (401 otherwise); without one, only loopback peers (127.0.0.0/8, ::1) may call them (403).
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { timingSafeEqual } from 'node:crypto'
import { isIPv4, isIPv6 } from 'node:net'
import * as z from 'zod/mini'
import { describeIssue } from '../../zod-issues.js'
import { deepFreeze } from '../../freeze.js'
import type { JoinOutcome, PlatformSimulator, Target, UpgradeRecord, UpgradeRefusal } from './simulator.js'
import type { AttachedConnection } from './admin.js'
import { CLOSE_CAUSES, HALF_CHARACTER_TEXT, SENDABLE_CLOSE_CODES_TEXT, SENDABLE_CLOSE_RANGES, type CloseCause, type RecordedFrame, type SimConnection } from './connection.js'
import { thrownText } from '../../../machines/types.js'
import { jsonDepth } from '../../json-depth.js'
import { isWellFormedText, type ClientFrame, type WireRef } from '../../protocol.js'

/** Largest request body, bytes. */
export const MAX_CONTROL_BODY_BYTES = 1_048_576
/** How long a POST's body may take to arrive, in milliseconds: a body that never completes is answered 408 and its connection closed. */
export const CONTROL_BODY_TIMEOUT_MS = 10_000
/** Deepest nesting of arrays and objects a body may have (a payload is encoded again to be sent). */
export const MAX_BODY_DEPTH = 64

/** Longest long-poll wait, milliseconds. */
export const MAX_WAIT_MS = 120_000

/** A join_ref or ref as a client sent it ({@link WireRef}): Phoenix echoes numbers and booleans as they came. */
const WireRefSchema = z.union([z.string(), z.number(), z.boolean(), z.null()])

const Json = z.unknown()
const PayloadObject = z.record(z.string(), z.unknown())
const TargetSchema = z.union(
  [z.strictObject({ agent: z.string().check(z.minLength(1)) }), z.strictObject({ socket: z.string().check(z.minLength(1)) }), z.literal('all')],
  { error: 'expected {"agent": "<agent id>"}, {"socket": "<socket id>"} or "all"' },
)
const Refusal = z.strictObject({
  status: z.number().check(z.int(), z.gte(400), z.lte(599)),
  retryAfter: z.optional(z.string().check(z.regex(/^[\t\x20-\x7e]*$/, 'expected an HTTP field value: visible ASCII, spaces and tabs (no CR or LF)'))),
  body: z.optional(z.union([z.literal('none'), z.literal('platform'), z.strictObject({ text: z.string() })], { error: 'expected "none", "platform" or {"text": "..."}' })),
  connection: z.optional(z.enum(['keep-alive', 'close'])),
  message: z.optional(z.string()),
})
const JoinReply = z.union([z.strictObject({ reply: z.literal('ok'), response: z.optional(PayloadObject) }), z.strictObject({ reply: z.literal('error'), response: PayloadObject })], {
  error: 'expected {"reply": "ok", "response"?: {...}} or {"reply": "error", "response": {...}}',
})
const JoinRuleOutcome = z.union([JoinReply, z.strictObject({ reply: z.literal('none') }), z.strictObject({ reply: z.literal('hold') })], {
  error: 'expected {"reply": "ok" | "error" | "none" | "hold"} ("error" with a "response")',
})
/**
 * A close code a server may send: a whole number in one of SENDABLE_CLOSE_RANGES (connection.ts),
 * the ranges as a union so the OpenAPI document states them (`anyOf`). The path kit's path check
 * (src/node/testing/check-path.ts) takes the same schema.
 */
export const SendableCloseCode = z.union(
  SENDABLE_CLOSE_RANGES.map(([low, high]) => z.number().check(z.int(), z.gte(low), z.lte(high))),
  { error: `expected a close code a server may send: ${SENDABLE_CLOSE_CODES_TEXT}` },
)
/** The message of a close reason over 123 bytes of UTF-8. */
const REASON_TOO_LONG = 'expected at most 123 bytes of UTF-8 (RFC 6455 section 5.5)'
const Ok = z.strictObject({ ok: z.literal(true) })
/** The answer of a control of target sockets: how many sockets it acted on (0 when the target has none open now). */
const Acted = z.strictObject({ ok: z.literal(true), sockets: z.number() })
const Sent = z.strictObject({ sent: z.number() })
const Answered = z.strictObject({ answered: z.boolean() })

/**
 * What `POST /admin/wait` can wait for: a count of the agent's (or every agent's) records
 * reaching `atLeast`. Counts of what holds now: `live` (open sockets), `joined` (channels joined
 * on open sockets), `heldUpgrades`, `heldJoins`. Counts that only grow: `accepted` (sockets ever
 * accepted), `upgrades` (answered), `refused`, `closed`, `joins` (phx_join frames received); with a
 * `historyLimit` (`serve` sets 10,000) they count the records kept, at most that many: wait for
 * `live`, or on a fresh agent id, not for a total since the start.
 */
const WaitCondition = z.enum(['live', 'joined', 'heldUpgrades', 'heldJoins', 'accepted', 'upgrades', 'refused', 'closed', 'joins'])

/** A close frame in a record: its code (RFC 6455 section 7.4) and reason. */
const CloseFrameRecord = z.strictObject({ code: z.number().check(z.int()), reason: z.string() })

/** The {@link SocketRecord} as the OpenAPI document types it. */
const SocketRecordSchema = z.strictObject({
  id: z.string(),
  agentId: z.string(),
  params: z.record(z.string(), z.string()),
  openedAt: z.number(),
  serializer: z.enum(['v1', 'v2']),
  closedAt: z.nullable(z.number()),
  state: z.enum(['open', 'closing', 'closed']),
  stalled: z.boolean(),
  aborted: z.boolean(),
  closeSent: z.nullable(CloseFrameRecord),
  closeSeen: z.nullable(CloseFrameRecord),
  clientClosed: z.nullable(CloseFrameRecord),
  closeCause: z.nullable(z.enum(CLOSE_CAUSES)),
  superseded: z.nullable(PayloadObject),
  heartbeats: z.number().check(z.int()),
  channels: z.array(z.strictObject({ topic: z.string(), joinRef: WireRefSchema })),
  problems: z.array(z.string()),
  frames: z.number().check(z.int()),
  framesForgotten: z.number().check(z.int()),
})

/** One accepted socket as the records routes give it. */
export interface SocketRecord {
  id: string
  agentId: string
  params: Readonly<Record<string, string>>
  openedAt: number
  /** The serializer its upgrade's `vsn` chose: `v2`, or `v1` (`vsn=1.0.x` or none; frames are JSON objects). */
  serializer: 'v1' | 'v2'
  closedAt: number | null
  state: 'open' | 'closing' | 'closed'
  stalled: boolean
  aborted: boolean
  closeSent: { code: number; reason: string } | null
  closeSeen: { code: number; reason: string } | null
  /** The close frame the client sent to start the closing handshake, if it did. */
  clientClosed: { code: number; reason: string } | null
  closeCause: CloseCause | null
  superseded: Record<string, unknown> | null
  heartbeats: number
  channels: Array<{ topic: string; joinRef: WireRef }>
  problems: string[]
  /** Frames in its record now. */
  frames: number
  /** Frames its record lost, closed, to the simulator's `historyFrameLimit`. */
  framesForgotten: number
}

/**
 * A frame of a socket's record (`GET /admin/sockets/{id}/frames`), the {@link RecordedFrame}
 * (connection.ts) as JSON carries it: `frame` null when it could not be decoded, its payload any
 * JSON value (a binary frame's, which JSON cannot carry, as `{}`); `length` only on a cut record.
 */
const FrameRecordSchema = z.strictObject({
  dir: z.enum(['in', 'out']),
  at: z.number(),
  frame: z.nullable(
    z.strictObject({ join_ref: WireRefSchema, ref: WireRefSchema, topic: z.string(), event: z.string(), payload: Json }),
  ),
  raw: z.string(),
  length: z.optional(z.number().check(z.int())),
})

/** An answered upgrade (`GET /admin/upgrades`), the simulator's {@link UpgradeRecord}. */
const UpgradeRecordSchema = z.strictObject({
  at: z.number(),
  agentId: z.nullable(z.string()),
  status: z.number().check(z.int()),
  outcome: z.string(),
  superseded: z.optional(z.array(z.string())),
  onConflict: z.nullable(z.string()),
})

/** A close frame the simulator sent (`GET /admin/closes`): the socket's id, its agent, the code and reason, when it was sent (ms since the simulator started). */
const CloseRecordSchema = z.strictObject({ socket: z.string(), agentId: z.string(), code: z.number().check(z.int()), reason: z.string(), at: z.number() })

/** A join the simulator holds unanswered (`GET /admin/held`): the socket's id, its agent, the topic and the join's join_ref. */
const HeldJoinSchema = z.strictObject({ socket: z.string(), agentId: z.string(), topic: z.string(), joinRef: WireRefSchema })

// The records' schemas and the simulator's own types name the same fields: a field added to one
// and not the other fails to compile here.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false
const recordsMatch: [
  Same<z.infer<typeof FrameRecordSchema>, Omit<RecordedFrame, 'frame'> & { frame: z.infer<typeof FrameRecordSchema>['frame'] }>,
  Same<NonNullable<z.infer<typeof FrameRecordSchema>['frame']>, ClientFrame>,
  Same<z.infer<typeof UpgradeRecordSchema>, UpgradeRecord>,
  Same<z.infer<typeof CloseRecordSchema>, PlatformSimulator['closesSent'][number]>,
  Same<z.infer<typeof SocketRecordSchema>, SocketRecord>,
] = [true, true, true, true, true]
void recordsMatch

function socketRecord(c: SimConnection): SocketRecord {
  return {
    id: c.id,
    agentId: c.agentId,
    params: c.params,
    openedAt: c.openedAt,
    serializer: c.serializer,
    closedAt: c.closedAt,
    state: c.state,
    stalled: c.stalled,
    aborted: c.aborted,
    closeSent: c.closeSent,
    closeSeen: c.closeSeen,
    clientClosed: c.clientClosed,
    closeCause: c.closeCause,
    superseded: c.superseded,
    heartbeats: c.heartbeats,
    channels: [...c.channels.entries()].map(([topic, channel]) => ({ topic, joinRef: channel.joinRef })),
    problems: [...c.problems],
    frames: c.frames.length,
    framesForgotten: c.framesForgotten,
  }
}

/** A route's answer: a status and a JSON body. */
interface Answer {
  status: number
  body: unknown
  /** Close the connection after the answer: the request's body is still arriving and is not read. */
  close?: boolean
}

/** The state a route runs against: the simulator and the release functions of its holds. */
interface Context {
  sim: PlatformSimulator
  query: URLSearchParams
  params: Record<string, string>
  thaw: (() => void) | null
  releaseHolds: (() => void) | null
  /** Aborts when the caller goes away (a long-poll whose client disconnected). */
  signal: AbortSignal
}

/** One HTTP route of the simulator. */
export interface ControlRoute {
  method: 'GET' | 'POST'
  /** Path, with `{name}` path parameters. */
  path: string
  summary: string
  /** Query parameters (GET). */
  query?: Record<string, string>
  /** Request body schema (POST). */
  body?: z.ZodMiniType
  /** Response body schema (documentation). */
  response: z.ZodMiniType
  /** @internal */
  run(ctx: Context, body: never): Answer | Promise<Answer>
}

const ok = (body: unknown = { ok: true }): Answer => ({ status: 200, body })

/**
 * A query parameter the route does not read (a typo such as `?agnet=`, which would otherwise
 * answer for every agent), or one given more than once, named; null when there is none. `token`
 * is read by the access check.
 */
export function unknownQuery(query: URLSearchParams, known: readonly string[]): string | null {
  for (const name of query.keys()) {
    // One value each: which of two a route would read (`?agent=a&agent=b`) is a guess, not an answer.
    const given = query.getAll(name).length
    if (given > 1) return `query parameter ${JSON.stringify(name)} given ${given} times; give it once`
    if (name === 'token' || known.includes(name)) continue
    return `unknown query parameter ${JSON.stringify(name)}; this route reads ${known.length === 0 ? 'none' : known.join(', ')}${' (and token, for access)'}`
  }
  return null
}

/** A route's OpenAPI operationId: its path after `/admin/` (or `/`) in camel case, `Get` after a GET's (`/admin/sockets/{id}/frames` GET: `socketsFramesGet`). */
function operationIdOf(method: string, path: string): string {
  return path.replace(/^\/(admin\/)?/, '').replace(/\/\{\w+\}\//g, '-').replace(/[^a-z]+(.)/g, (_, c: string) => c.toUpperCase()) + (method === 'GET' ? 'Get' : '')
}

/** What every POST answers once the simulator is stopping. */
const STOPPING: Answer = { status: 503, body: { error: { code: 'stopping', message: 'the simulator is stopping: it scripts nothing more' } } }

function route<S extends z.ZodMiniType | undefined>(
  spec: Omit<ControlRoute, 'run' | 'body'> & { body?: S; run: (ctx: Context, body: S extends z.ZodMiniType ? z.infer<S> : undefined) => Answer | Promise<Answer> },
): ControlRoute {
  return spec as unknown as ControlRoute
}

const target = (t: z.infer<typeof TargetSchema>): Target => t as Target

/** The records of the agent a GET's `?agent=` names, or every record without it. */
function ofAgent<T extends { agentId: string | null }>(records: readonly T[], query: URLSearchParams): T[] {
  const agent = query.get('agent')
  return records.filter((r) => agent === null || r.agentId === agent)
}

/** A POST route whose body is only `{ target }`, calling one simulator control on it. */
function targetRoute(path: string, summary: string, control: (sim: PlatformSimulator, target: Target) => number): ControlRoute {
  return route({
    method: 'POST',
    path,
    summary,
    body: z.strictObject({ target: TargetSchema }),
    response: Acted,
    run: ({ sim }, body) => ok({ ok: true, sockets: control(sim, target(body.target)) }),
  })
}

/** A POST route whose body is only `{ agent }`, calling one simulator control on it. */
function agentRoute(path: string, summary: string, control: (sim: PlatformSimulator, agent: string) => void): ControlRoute {
  return route({
    method: 'POST',
    path,
    summary,
    body: z.strictObject({ agent: z.string().check(z.minLength(1)) }),
    response: Ok,
    run: ({ sim }, body) => {
      control(sim, body.agent)
      return ok()
    },
  })
}

function count(sim: PlatformSimulator, what: z.infer<typeof WaitCondition>, agent: string | undefined): number {
  switch (what) {
    case 'live':
      return sim.live(agent).length
    case 'accepted':
      return sim.accepted(agent).length
    case 'upgrades':
      return sim.upgradeCounts(agent).upgrades
    case 'refused':
      return sim.upgradeCounts(agent).refused
    case 'closed':
      return sim.accepted(agent).filter((c) => c.state === 'closed').length
    case 'heldUpgrades':
      return agent === undefined ? sim.heldUpgrades : sim.heldUpgradesOf(agent)
    case 'heldJoins':
      return sim.heldJoins.filter((j) => agent === undefined || j.connection.agentId === agent).length
    case 'joined':
      return sim.live(agent).reduce((n, c) => n + c.channels.size, 0)
    case 'joins':
      return sim.accepted(agent).reduce((n, c) => n + c.joins, 0)
  }
}

/** Every route, in the order the OpenAPI document lists them. */
export const CONTROL_ROUTES: readonly ControlRoute[] = deepFreeze([
  route({
    method: 'GET',
    path: '/admin/sockets',
    summary: 'Every socket accepted, in order, open or closed (of one agent with ?agent=).',
    query: { agent: 'only this agent id' },
    response: z.strictObject({ sockets: z.array(SocketRecordSchema) }),
    run: ({ sim, query }) => ok({ sockets: sim.accepted(query.get('agent') ?? undefined).map(socketRecord) }),
  }),
  route({
    method: 'GET',
    path: '/admin/sockets/{id}/frames',
    summary: 'The frames of one socket, both directions, the most recent recordLimit (at: ms since the simulator started).',
    response: z.strictObject({ frames: z.array(FrameRecordSchema) }),
    run: ({ sim, params }) => {
      const c = sim.accepted().find((s) => s.id === params.id)
      return c ? ok({ frames: c.frames }) : { status: 404, body: { error: { code: 'no_socket', message: `no socket ${params.id}` } } }
    },
  }),
  route({
    method: 'GET',
    path: '/admin/upgrades',
    summary: 'Every upgrade answered, in order: status 101 or the refusal, at (ms since start), superseded sockets, its on_conflict parameter as sent (onConflict, null when absent).',
    query: { agent: 'only this agent id' },
    response: z.strictObject({ upgrades: z.array(UpgradeRecordSchema) }),
    run: ({ sim, query }) => ok({ upgrades: ofAgent(sim.upgrades, query) }),
  }),
  route({
    method: 'GET',
    path: '/admin/closes',
    summary: 'Close frames the simulator sent, one per socket it closed, in the order the sockets were accepted (of one agent with ?agent=); at: when each was sent, ms since the simulator started.',
    query: { agent: 'only this agent id' },
    response: z.strictObject({ closes: z.array(CloseRecordSchema) }),
    run: ({ sim, query }) => ok({ closes: ofAgent(sim.closesSent, query) }),
  }),
  route({
    method: 'GET',
    path: '/admin/held',
    summary: 'Upgrades and joins held unanswered, and how many held upgrades ended with no answer (closed by the client, or dropped), over the agents whose counts are kept (historyLimit keeps the most recent).',
    response: z.strictObject({ upgrades: z.number().check(z.int()), unanswered: z.number().check(z.int()), joins: z.array(HeldJoinSchema) }),
    run: ({ sim }) =>
      ok({
        upgrades: sim.heldUpgrades,
        unanswered: sim.unansweredUpgradesOf(),
        joins: sim.heldJoins.map((j) => ({ socket: j.connection.id, agentId: j.connection.agentId, topic: j.topic, joinRef: j.joinRef })),
      }),
  }),
  route({
    method: 'GET',
    path: '/admin/clock',
    summary: 'The simulator clock: ms since it started, the time base of every record.',
    response: z.strictObject({ now: z.number() }),
    run: ({ sim }) => ok({ now: sim.now() }),
  }),
  route({
    method: 'POST',
    path: '/admin/wait',
    summary:
      'Long-poll: answers once the count of `until` (of `agent`, or of every agent) is at least `atLeast` (default 1 unless `atMost` is given) and at most `atMost` (when given: `{"until":"live","atMost":0}` waits for every socket to close), or 408 after timeoutMs (default 10000). Now: live, joined, heldUpgrades, heldJoins; so far: accepted, upgrades, refused, closed, joins.',
    body: z.strictObject({
      until: WaitCondition,
      agent: z.optional(z.string()),
      atLeast: z.optional(z.number().check(z.int(), z.gte(0))),
      atMost: z.optional(z.number().check(z.int(), z.gte(0))),
      timeoutMs: z.optional(z.number().check(z.int(), z.gte(1), z.lte(MAX_WAIT_MS))),
    }),
    response: z.strictObject({ count: z.number() }),
    run: ({ sim, signal }, body) => {
      // Without atMost a wait is for something to happen (at least 1); with it, atLeast is 0 unless given.
      const atLeast = body.atLeast ?? (body.atMost === undefined ? 1 : 0)
      const atMost = body.atMost ?? Number.POSITIVE_INFINITY
      if (atLeast > atMost) return { status: 400, body: { error: { code: 'bad_request', message: `atLeast: ${atLeast} is more than atMost (${atMost}): no count meets both` } } }
      const current = () => count(sim, body.until, body.agent)
      const met = (n: number) => n >= atLeast && n <= atMost
      const wanted = [body.atLeast !== undefined || body.atMost === undefined ? `at least ${atLeast}` : '', body.atMost === undefined ? '' : `at most ${atMost}`].filter((w) => w !== '').join(' and ')
      if (met(current())) return ok({ count: current() })
      return new Promise<Answer>((resolve) => {
        const done = (answer: Answer) => {
          clearTimeout(timer)
          sim.off('change', onChange)
          signal.removeEventListener('abort', onAbort)
          resolve(answer)
        }
        const onChange = () => {
          // What stop() itself does (its closes) meets no wait: from its start a pending wait is 503.
          if (sim.isStopping) return done(STOPPING)
          const n = current()
          if (met(n)) done(ok({ count: n }))
        }
        const onAbort = () => done(signal.reason === 'stopping' ? STOPPING : { status: 499, body: { error: { code: 'client_gone', message: 'the caller went away' } } })
        const timer = setTimeout(
          () => done({ status: 408, body: { error: { code: 'timeout', message: `${body.until} of ${body.agent ?? 'every agent'} is ${current()}, not ${wanted}, after ${body.timeoutMs ?? 10_000} ms`, count: current() } } }),
          body.timeoutMs ?? 10_000,
        )
        sim.on('change', onChange)
        signal.addEventListener('abort', onAbort)
      })
    },
  }),
  route({
    method: 'POST',
    path: '/admin/refuse-upgrades',
    summary: 'Answers the next upgrades (of `agent`, when given), one each, with these refusals, then accepts again.',
    body: z.strictObject({ agent: z.optional(z.string().check(z.minLength(1))), refusals: z.array(Refusal).check(z.minLength(1)) }),
    response: Ok,
    run: ({ sim }, body) => {
      const refusals = body.refusals as UpgradeRefusal[]
      if (body.agent !== undefined) sim.refuseUpgradesOf(body.agent, ...refusals)
      else sim.refuseUpgrades(...refusals)
      return ok()
    },
  }),
  route({
    method: 'POST',
    path: '/admin/hold-upgrades',
    summary: 'Holds every later upgrade (of agents whose id matches the `agents` regular expression) unanswered.',
    body: z.strictObject({ agents: z.optional(z.string()) }),
    response: Ok,
    run: (ctx, body) => {
      let match: RegExp | undefined
      try {
        match = body.agents === undefined ? undefined : new RegExp(body.agents)
      } catch (error) {
        return { status: 400, body: { error: { code: 'bad_request', message: `agents: ${(error as Error).message}` } } }
      }
      ctx.releaseHolds = ctx.sim.holdUpgrades(match)
      return ok()
    },
  }),
  route({
    method: 'POST',
    path: '/admin/release-upgrades',
    summary: 'Stops holding upgrades; the held ones are answered as usual.',
    body: z.strictObject({}),
    response: Ok,
    run: (ctx) => {
      ctx.releaseHolds?.()
      ctx.releaseHolds = null
      return ok()
    },
  }),
  route({
    method: 'POST',
    path: '/admin/answer-upgrade',
    summary: 'Answers the oldest (or with `which`, the newest) held upgrade (of `agent`): accepted without `answer`, refused with a refusal, or "drop" (TCP ends).',
    body: z.strictObject({
      agent: z.optional(z.string()),
      answer: z.optional(z.union([Refusal, z.literal('drop')], { error: 'expected a refusal {"status": 400-599, ...} or "drop"' })),
      which: z.optional(z.union([z.literal('oldest'), z.literal('newest')], { error: 'expected "oldest" or "newest"' })),
    }),
    response: Answered,
    run: ({ sim }, body) => ok({ answered: sim.answerHeldUpgrade(body.answer as UpgradeRefusal | 'drop' | undefined, body.agent, body.which ?? 'oldest') }),
  }),
  route({
    method: 'POST',
    path: '/admin/join-rule',
    summary: 'Answers joins of `topic` (a regular expression when `regex`) with `outcome`, `times` times (default always); later rules win. A join of a topic no channel route matches (the simulator started with `channels`, `serve --channel`) never reaches a rule: it is answered "unmatched topic".',
    body: z.strictObject({ topic: z.string().check(z.minLength(1)), regex: z.optional(z.boolean()), outcome: JoinRuleOutcome, times: z.optional(z.number().check(z.int(), z.gte(1))) }),
    response: Ok,
    run: ({ sim }, body) => {
      let match: string | RegExp = body.topic
      if (body.regex) {
        try {
          match = new RegExp(body.topic)
        } catch (error) {
          return { status: 400, body: { error: { code: 'bad_request', message: `topic: ${(error as Error).message}` } } }
        }
      }
      sim.onJoin(match, body.outcome as JoinOutcome, body.times)
      return ok()
    },
  }),
  route({
    method: 'POST',
    path: '/admin/answer-join',
    summary: 'Answers a held join of `topic` (the oldest, the newest, or the one with joinRef).',
    body: z.strictObject({
      topic: z.string(),
      outcome: JoinReply,
      which: z.optional(z.union([z.literal('oldest'), z.literal('newest'), z.strictObject({ joinRef: WireRefSchema })], { error: 'expected "oldest", "newest" or {"joinRef": "<ref>"}' })),
    }),
    response: Answered,
    run: ({ sim }, body) => ok({ answered: sim.answerHeldJoin(body.topic, body.outcome as Exclude<JoinOutcome, { reply: 'hold' }>, body.which ?? 'oldest') }),
  }),
  route({
    method: 'POST',
    path: '/admin/push-reply',
    summary: 'How client pushes on app channels are answered: a reply with `status` and `response`, or none (`{ "none": true }`).',
    body: z.union([z.strictObject({ status: z.string(), response: z.optional(PayloadObject) }), z.strictObject({ none: z.literal(true) })], {
      error: 'expected {"status": <any reply status, e.g. "ok" or "error">, "response"?: {...}} or {"none": true}',
    }),
    response: Ok,
    run: ({ sim }, body) => {
      if ('none' in body) sim.onPush(() => null)
      else {
        const reply = { status: body.status, response: (body.response ?? {}) as never }
        sim.onPush(() => reply)
      }
      return ok()
    },
  }),
  route({
    method: 'POST',
    path: '/admin/reset',
    summary: 'Forgets every script: refusals, join rules, the push reply, held upgrades (answered as usual), supersede cooldowns.',
    body: z.strictObject({}),
    response: Ok,
    run: (ctx) => {
      ctx.sim.resetScripts()
      ctx.releaseHolds = null
      return ok()
    },
  }),
  route({
    method: 'POST',
    path: '/admin/close',
    summary: 'Closes the target sockets with an RFC 6455 close code (section 7.4) and reason.',
    body: z.strictObject({
      target: TargetSchema,
      code: SendableCloseCode,
      // JSON Schema's maxLength counts characters, which would let 100 "é" (200 bytes) through the
      // document and not the server: the byte limit is said in words, and checked here.
      reason: z.optional(
        z.string().check(
          z.describe('At most 123 bytes of UTF-8 (RFC 6455 section 5.5: a close frame carries 125, two of them the code), and no half of a character.'),
          z.refine((r) => Buffer.byteLength(r) <= 123, { error: REASON_TOO_LONG }),
          z.refine(isWellFormedText, { error: HALF_CHARACTER_TEXT }),
        ),
      ),
    }),
    response: Acted,
    run: ({ sim }, body) => ok({ ok: true, sockets: sim.close(target(body.target), body.code, body.reason ?? '') }),
  }),
  route({
    method: 'POST',
    path: '/admin/abort',
    summary:
      'Ends the target sockets with no close frame (the client sees 1006); a socket named by id is cut even while closing (a closing handshake a stalled socket never finishes ends now). With `reset: true` the TCP connections are reset (RST) instead of ended (FIN): the client loses what it had not read, as under a real server\'s close while it was sending.',
    body: z.strictObject({ target: TargetSchema, reset: z.optional(z.boolean()) }),
    response: Acted,
    run: ({ sim }, body) => ok({ ok: true, sockets: sim.abort(target(body.target), { reset: body.reset === true }) }),
  }),
  targetRoute('/admin/disconnect', 'The platform disconnects the target sockets (the "disconnect" broadcast: the flavor\'s close code).', (sim, t) => sim.disconnect(t)),
  targetRoute('/admin/stall', 'The target sockets stop reading and answering (heartbeats included): the client\'s heartbeat times out.', (sim, t) => sim.stall(t)),
  route({
    method: 'POST',
    path: '/admin/keys',
    summary: 'Sets the keys valid for an agent (several during a rotation).',
    body: z.strictObject({ agent: z.string().check(z.minLength(1)), keys: z.union([z.string().check(z.minLength(1)), z.array(z.string().check(z.minLength(1)))], { error: 'expected a key or an array of keys (non-empty strings)' }) }),
    response: Ok,
    run: ({ sim }, body) => {
      try {
        sim.setKeys(body.agent, body.keys)
      } catch (error) {
        // The simulator accepts any agent (agents: 'any'): there is no key to set.
        return { status: 409, body: { error: { code: 'no_agent_map', message: (error as Error).message } } }
      }
      return ok()
    },
  }),
  agentRoute('/admin/revoke', 'Refuses the agent\'s later upgrades with 403; its open sockets stay up.', (sim, agent) => sim.revoke(agent)),
  agentRoute('/admin/unrevoke', 'Accepts the agent\'s upgrades again.', (sim, agent) => sim.unrevoke(agent)),
  route({
    method: 'POST',
    path: '/admin/freeze',
    summary: 'A frozen server (SIGSTOP): every socket stops reading and answering, every upgrade is held.',
    body: z.strictObject({}),
    response: Ok,
    run: (ctx) => {
      ctx.thaw ??= ctx.sim.freeze()
      return ok()
    },
  }),
  route({
    method: 'POST',
    path: '/admin/thaw',
    summary: 'Ends a freeze (SIGCONT): what clients sent meanwhile is read, then the upgrades only the freeze held are answered; a hold or a stall the test set, before or during the freeze, stays.',
    body: z.strictObject({}),
    response: Ok,
    run: (ctx) => {
      ctx.thaw?.()
      ctx.thaw = null
      return ok()
    },
  }),
  route({
    method: 'POST',
    path: '/admin/restart',
    summary: 'A server restart: every socket closed with the flavor\'s restart code (1012 on Phoenix, a drain).',
    body: z.strictObject({}),
    response: Ok,
    run: ({ sim }) => {
      sim.restart()
      return ok()
    },
  }),
  route({
    method: 'POST',
    path: '/admin/push',
    summary: 'A server push on `topic` to the target sockets that joined it, with the join\'s join_ref (or `joinRef`).',
    body: z.strictObject({ target: TargetSchema, topic: z.string(), event: z.string(), payload: PayloadObject, joinRef: z.optional(WireRefSchema) }),
    response: Sent,
    run: ({ sim }, body) => ok({ sent: sim.push(target(body.target), body.topic, body.event, body.payload as never, body.joinRef === undefined ? {} : { joinRef: body.joinRef }) }),
  }),
  route({
    method: 'POST',
    path: '/admin/raw',
    summary: 'Sends `data` as a text frame, exactly, to the target sockets (for malformed frames); `sockets` counts those it was sent to.',
    body: z.strictObject({ target: TargetSchema, data: z.string() }),
    response: Acted,
    run: ({ sim }, body) => ok({ ok: true, sockets: sim.sendRaw(target(body.target), body.data) }),
  }),
  route({
    method: 'POST',
    path: '/admin/broadcast',
    summary: 'An endpoint broadcast on `topic` (fastlane, join_ref null) to every socket that joined it.',
    body: z.strictObject({ topic: z.string(), event: z.string(), payload: PayloadObject }),
    response: Sent,
    run: ({ sim }, body) => ok({ sent: sim.broadcast(body.topic, body.event, body.payload as never) }),
  }),
  route({
    method: 'POST',
    path: '/admin/control',
    summary: 'An agent.control signal on the agent\'s control channel (`via: "broadcast"` as an endpoint broadcast).',
    body: z.strictObject({
      agent: z.string().check(z.minLength(1)),
      signal: z.looseObject({ mode: z.string() }),
      via: z.optional(z.enum(['push', 'broadcast'])),
    }),
    response: Sent,
    run: ({ sim }, body) => ok({ sent: sim.control(body.agent, body.signal as never, body.via ? { via: body.via } : {}) }),
  }),
  route({
    method: 'POST',
    path: '/admin/supersede',
    summary: 'Supersedes the agent\'s open sockets: the supersede push, then (unless close is null) a close with the flavor\'s code or `close`.',
    body: z.strictObject({ agent: z.string().check(z.minLength(1)), payload: z.optional(PayloadObject), close: z.optional(z.nullable(SendableCloseCode)) }),
    response: Sent,
    run: ({ sim }, body) =>
      ok({ sent: sim.supersede(body.agent, { ...(body.payload ? { payload: body.payload as never } : {}), ...(body.close !== undefined ? { close: body.close } : {}) }) }),
  }),
  route({
    method: 'POST',
    path: '/admin/channel-error',
    summary: 'The server-side channel of `topic` crashes on the target sockets (phx_error); the socket stays up.',
    body: z.strictObject({ target: TargetSchema, topic: z.string() }),
    response: Acted,
    run: ({ sim }, body) => ok({ ok: true, sockets: sim.channelError(target(body.target), body.topic) }),
  }),
  route({
    method: 'POST',
    path: '/admin/channel-close',
    summary: 'The server ends the channel of `topic` on the target sockets (phx_close).',
    body: z.strictObject({ target: TargetSchema, topic: z.string() }),
    response: Acted,
    run: ({ sim }, body) => ok({ ok: true, sockets: sim.channelClose(target(body.target), body.topic) }),
  }),
])

/** Each route path compiled once (`{name}` as a named group), with the routes (methods) it serves. */
const ROUTE_PATTERNS = [...new Set(CONTROL_ROUTES.map((r) => r.path))].map((path) => ({
  pattern: new RegExp(`^${path.replace(/\{(\w+)\}/g, '(?<$1>[^/]+)')}$`),
  candidates: CONTROL_ROUTES.filter((r) => r.path === path),
}))

/** An open socket as `GET /admin/connections` gives it, the {@link AttachedConnection} of admin.ts. */
const AttachedConnectionSchema = z.strictObject({
  principal: z.string(),
  socket: z.string(),
  since: z.string(),
  state: z.enum(['open', 'closing', 'stalled']),
  channels: z.array(z.string()),
})
const connectionsMatch: Same<z.infer<typeof AttachedConnectionSchema>, AttachedConnection> = true
void connectionsMatch

/**
 * The GET routes the admin API serves beside {@link CONTROL_ROUTES} (no body): method, path, what
 * each answers and, for a JSON answer, its schema.
 */
export const ADMIN_ROUTES: ReadonlyArray<{ readonly method: 'GET'; readonly path: string; readonly summary: string; readonly query?: Readonly<Record<string, string>>; readonly headers?: Readonly<Record<string, string>>; readonly response?: z.ZodMiniType; readonly text?: string }> = deepFreeze([
  { method: 'GET', path: '/admin/connections', summary: 'Who is attached, since when (ISO 8601), in what state, on which topics (open sockets).', response: z.strictObject({ connections: z.array(AttachedConnectionSchema) }) },
  {
    method: 'GET',
    path: '/admin/events',
    summary:
      'Server-sent events: principal-presence crossings and agent-aborted reports, each with an id (`<run>.<seq>`, seq from 1); live, or first those kept (the last historyLimit events of the feed) after `?after=` an id as sent or its seq (0: every one kept) or after the `Last-Event-ID` a reconnecting EventSource sends (it wins over `after`), behind a `replay` event `{run, after, lastSeq, replayed, missed}` (missed: no longer kept; an `after` past lastSeq or an id of another run counts as 0). A reader holding 1 MiB unsent is written to no more until it reads, then catches up from the kept events, those no longer kept skipped behind a `missed` event `{after, missed}`. An unserializable event, {event, error}, stands for one whose data JSON cannot carry, such as a host\'s own abort reason holding a BigInt.',
    query: { after: 'resume after this event: its id as sent (`<run>.<seq>`; an id of another run replays every event kept) or its seq alone (a whole number; 0 for every event kept); those after it come first, behind a replay event' },
    headers: { 'Last-Event-ID': 'resume after this id (`<run>.<seq>`, as sent; an id of another run replays every event kept); wins over `after`' },
    text: 'text/event-stream',
  },
  { method: 'GET', path: '/admin/openapi.json', summary: 'The OpenAPI 3.1 document of every route (this one).', text: 'application/json' },
  { method: 'GET', path: '/metrics', summary: 'Prometheus text (prom-client).', text: 'text/plain' },
] as const)

function schemaOf(schema: z.ZodMiniType): unknown {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { unrepresentable: 'any' }) as Record<string, unknown>
  return rest
}

/** The OpenAPI 3.1 document of every HTTP route of the simulator, generated from the routes' zod schemas. */
export function simulatorOpenApi(version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {}
  const errorBody = { type: 'object', properties: { error: { type: 'object', properties: { code: { type: 'string' }, message: { type: 'string' } }, required: ['code', 'message'] } } }
  const error = (description: string) => ({ description, content: { 'application/json': { schema: errorBody } } })
  const waitTimeoutBody = {
    type: 'object',
    properties: { error: { type: 'object', properties: { code: { const: 'timeout' }, message: { type: 'string' }, count: { type: 'integer', minimum: 0 } }, required: ['code', 'message', 'count'] } },
  }
  // What every route may answer besides its own (the access rule, a wrong method, a simulator fault).
  const errors = {
    '401': error('An admin token is set and the request does not carry it.'),
    '403': error('No admin token is set and the caller is not on loopback (the peer address, the Host header or the Origin).'),
    '405': error('The path takes another method; the `Allow` header names it.'),
    '500': error('The simulator failed to carry out the request (a phoenix-link bug); `message` says what was thrown.'),
  }
  // What a GET of /admin may answer besides: a query parameter it does not read, or one given twice.
  const getErrors = { '400': error('A query parameter the route does not read (`token` aside), or one given twice, or (GET /admin/events) an `after` or `Last-Event-ID` that is not a seq or an id the feed sent; `message` names it.') }
  // A GET of /admin may carry the admin token as a query parameter (an EventSource cannot send headers).
  const tokenParameter = {
    name: 'token',
    in: 'query',
    required: false,
    description: 'The admin token, when one is set, for a client that cannot send `Authorization: Bearer <token>` (an EventSource); percent-encoded as any query value.',
    schema: { type: 'string' },
  }
  // What a POST may answer besides: its body refused, or the simulator stopping.
  const postErrors = {
    '400': error('The body is not JSON or not what the route takes; `message` names the field.'),
    '408': error(`The body did not arrive within ${CONTROL_BODY_TIMEOUT_MS} ms (code request_timeout); the connection is closed.`),
    '413': error(`The body is over ${MAX_CONTROL_BODY_BYTES} bytes.`),
    '415': error('The body was not sent as content-type: application/json.'),
    '503': error('The simulator is stopping (stop() was called): it scripts nothing more; a pending wait ends so too.'),
  }
  for (const r of CONTROL_ROUTES) {
    const parameters = [
      ...[...r.path.matchAll(/\{(\w+)\}/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } })),
      ...Object.entries(r.query ?? {}).map(([name, description]) => ({ name, in: 'query', required: false, description, schema: { type: 'string' } })),
      ...(r.method === 'GET' ? [tokenParameter] : []),
    ]
    paths[r.path] = {
      ...paths[r.path],
      [r.method.toLowerCase()]: {
        summary: r.summary,
        operationId: operationIdOf(r.method, r.path),
        ...(parameters.length > 0 ? { parameters } : {}),
        // An empty body is read as `{}`: a route whose schema takes `{}` may be sent none.
        ...(r.body ? { requestBody: { required: !r.body.safeParse({}).success, content: { 'application/json': { schema: schemaOf(r.body) } } } } : {}),
        responses: {
          '200': { description: 'Done.', content: { 'application/json': { schema: schemaOf(r.response) } } },
          ...(r.path === '/admin/keys' ? { '409': { description: "The simulator accepts any agent (agents: 'any'): it holds no keys to set.", content: { 'application/json': { schema: errorBody } } } } : {}),
          ...(r.path.includes('{') ? { '404': error('No record has that id.') } : {}),
          ...(r.method === 'POST' ? postErrors : getErrors),
          ...(r.path === '/admin/wait'
            ? {
                '408': {
                  description: `The count did not reach atLeast (or went above atMost) within timeoutMs; \`count\` is the count it saw last (code timeout). Or the body did not arrive within ${CONTROL_BODY_TIMEOUT_MS} ms (code request_timeout, no count).`,
                  content: { 'application/json': { schema: { anyOf: [waitTimeoutBody, errorBody] } } },
                },
              }
            : {}),
          ...errors,
        },
      },
    }
  }
  for (const r of ADMIN_ROUTES) {
    // /metrics is outside /admin: not behind the access rule (it carries no principal label).
    const admin = r.path.startsWith('/admin/')
    const access = admin ? { ...getErrors, '401': errors['401'], '403': errors['403'] } : {}
    paths[r.path] = {
      [r.method.toLowerCase()]: {
        summary: r.summary,
        operationId: operationIdOf(r.method, r.path),
        ...(admin
          ? {
              parameters: [
                ...(['query', 'headers'] as const).flatMap((place) =>
                  Object.entries(r[place] ?? {}).map(([name, description]) => ({ name, in: place === 'query' ? 'query' : 'header', required: false, description, schema: { type: 'string' } })),
                ),
                tokenParameter,
              ],
            }
          : {}),
        responses: {
          '200': { description: 'Done.', content: r.response ? { 'application/json': { schema: schemaOf(r.response) } } : { [r.text ?? 'application/json']: { schema: r.text === 'application/json' ? { type: 'object' } : { type: 'string' } } } },
          ...access,
          '405': errors['405'],
          ...(r.path === '/metrics' ? { '500': errors['500'] } : {}),
        },
      },
    }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'phoenix-link platform simulator',
      version,
      description:
        'The simulator over HTTP: every control of the TypeScript API as a JSON route, the records, and long-poll waits. Times are milliseconds since the simulator started (GET /admin/clock); a reason inside a record (a DisconnectReason) has its own at, wall-clock milliseconds since the Unix epoch. With an admin token set, send Authorization: Bearer <token>; without one, only loopback callers are served.',
    },
    paths,
  }
}

/** What the access rule reads of a request (see {@link adminAccess}). */
export interface AdminRequest {
  method: string
  remoteAddress: string | undefined
  /** The Host header. */
  host: string | undefined
  /** The Origin header (browsers send it on cross-origin requests and on POST). */
  origin: string | undefined
  authorization: string | undefined
  contentType: string | undefined
  /** The `token` query parameter (GET only: an EventSource cannot send headers). */
  queryToken: string | null
}

/**
 * Whether a Host header (or an Origin's host) names this machine's loopback: an IPv4 address in
 * 127.0.0.0/8 (each part at most 255), `::1`, the IPv4-mapped form of a 127.0.0.0/8 address
 * (`[::ffff:127.0.0.1]`, or `[::ffff:7f00:1]` as a URL serializes it), or `localhost` in any case;
 * a port after it is allowed.
 */
export function isLoopbackHost(host: string | undefined): boolean {
  if (!host) return false
  const name = host.startsWith('[') ? host.slice(1, host.indexOf(']')) : host.replace(/:\d+$/, '')
  // Host names are case-insensitive (RFC 9110 section 4.2.3; RFC 4343): LOCALHOST is localhost.
  return name.toLowerCase() === 'localhost' || isLoopbackAddress(name)
}

function sameToken(given: string, want: string): boolean {
  // The simulator checks its token at start (a non-empty string); a caller of adminAccess may not have.
  if (typeof want !== 'string' || want === '') return false
  const a = Buffer.from(given)
  const b = Buffer.from(want)
  return a.length === b.length && timingSafeEqual(a, b)
}

/**
 * The access rule of every `/admin` route, or null when the request may go on.
 *
 * - A POST must say `content-type: application/json`: a browser page can send a "simple"
 *   cross-origin POST (text/plain, a form) without asking first, but not that (415 otherwise).
 * - With a token: `Authorization: Bearer <token>` (the scheme in any case), or for a GET the
 *   `?token=` query parameter, which the dashboard page passes on (401 otherwise).
 * - Without one: the peer address must be loopback, and so must the Host header (a DNS
 *   rebinding page reaches 127.0.0.1 under a name of its own) and the Origin when one is sent
 *   (403 otherwise).
 */
export function adminAccess(req: AdminRequest, token: string | null): { status: number; code: string; message: string } | null {
  if (req.method === 'POST' && !/^application\/json\s*(;|$)/i.test(req.contentType ?? '')) {
    return { status: 415, code: 'unsupported_media_type', message: 'send the body as content-type: application/json' }
  }
  if (token !== null) {
    const bearer = /^bearer\s+(.+)$/i.exec(req.authorization ?? '')?.[1]
    const given = bearer ?? (req.method === 'GET' ? req.queryToken : null)
    return typeof given === 'string' && sameToken(given, token)
      ? null
      : { status: 401, code: 'unauthorized', message: 'send Authorization: Bearer <admin token> (or ?token= on a GET)' }
  }
  if (!isLoopbackAddress(req.remoteAddress)) {
    return { status: 403, code: 'forbidden', message: 'the admin routes serve loopback callers only; start the simulator with an admin token to serve others' }
  }
  if (!isLoopbackHost(req.host)) return { status: 403, code: 'forbidden', message: `the admin routes answer only to a loopback Host, not ${JSON.stringify(req.host ?? '')}` }
  if (req.origin !== undefined && req.origin !== 'null') {
    let host: string | undefined
    try {
      host = new URL(req.origin).host
    } catch {
      host = undefined
    }
    if (!isLoopbackHost(host)) return { status: 403, code: 'forbidden', message: `the admin routes answer only to pages served from loopback, not ${JSON.stringify(req.origin)}` }
  } else if (req.origin === 'null') {
    return { status: 403, code: 'forbidden', message: 'the admin routes do not answer to an opaque origin' }
  }
  return null
}

/**
 * The URL of an HTTP request target (RFC 9112 section 3.2). An origin-form target (`/path?query`)
 * is read as a path even when it begins with `//`, which the WHATWG URL parser would take for a
 * host (`//admin/clock` would read as host `admin`, path `/clock`).
 *
 * @throws {TypeError} for a target that is not a URL.
 */
export function requestUrl(target: string | undefined): URL {
  const t = target ?? '/'
  return new URL(t.startsWith('/') ? `http://simulator${t}` : t, 'http://simulator')
}

/**
 * Whether an interface a server listens on is loopback: `localhost`, or a loopback address
 * ({@link isLoopbackAddress}), bracketed or not (`[::1]`, `::1`), an IPv6 one in any of its
 * written forms (`0:0:0:0:0:0:0:1`, `::ffff:127.0.0.1`). `0.0.0.0` and `::` (every interface)
 * are not.
 */
export function isLoopbackInterface(host: string): boolean {
  const name = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host
  if (name.toLowerCase() === 'localhost' || isLoopbackAddress(name)) return true
  if (!isIPv6(name)) return false
  // The WHATWG URL parser writes an IPv6 address in its one compressed form (RFC 5952).
  return isLoopbackAddress(new URL(`http://[${name}]`).hostname.slice(1, -1))
}

/**
 * Whether a peer address is loopback: an IPv4 address in 127.0.0.0/8, `::1`, or a 127.0.0.0/8
 * address IPv4-mapped into IPv6 (RFC 4291 section 2.5.5.2), dotted (`::ffff:127.0.0.1`, as
 * Node reports a peer) or in hex (`::ffff:7f00:1`, as the WHATWG URL serializer writes it).
 */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false
  if (address === '::1') return true
  const lower = address.toLowerCase()
  if (!lower.startsWith('::ffff:')) return isIPv4(address) && address.startsWith('127.')
  const mapped = lower.slice(7)
  if (isIPv4(mapped)) return mapped.startsWith('127.')
  const hex = /^([0-9a-f]{1,4}):[0-9a-f]{1,4}$/.exec(mapped)
  return hex !== null && Number.parseInt(hex[1]!, 16) >> 8 === 0x7f
}

/** Serves {@link CONTROL_ROUTES} for one simulator. */
export class ControlApi {
  private readonly ctx: Omit<Context, 'query' | 'params' | 'signal'>
  private document: Record<string, unknown> | null = null
  /** The abort of each request in flight (a Set, not listeners on one signal: hundreds may wait at once). */
  private readonly pending = new Set<() => void>()
  private stopped = false

  constructor(
    sim: PlatformSimulator,
    private readonly token: string | null,
    private readonly version: string,
  ) {
    this.ctx = { sim, thaw: null, releaseHolds: null }
  }

  /**
   * Answers `/admin/*` requests it knows (after the access check) and returns true; returns false
   * for any other path. Never throws into the server.
   */
  handle(req: IncomingMessage, res: ServerResponse, path: string): boolean {
    if (!path.startsWith('/admin/') && path !== '/admin') return false
    const denied = this.denied(req)
    if (denied) {
      json(res, denied.status, denied.body)
      return true
    }
    if (path === '/admin/openapi.json') {
      if (req.method !== 'GET') {
        methodNotAllowed(res, path, ['GET'])
        return true
      }
      const stray = unknownQuery(requestUrl(req.url).searchParams, [])
      if (stray !== null) {
        json(res, 400, { error: { code: 'bad_request', message: stray } })
        return true
      }
      this.document ??= simulatorOpenApi(this.version)
      json(res, 200, this.document)
      return true
    }
    const matched = this.match(path)
    if (!matched) return false
    const { candidates, params } = matched
    const r = candidates.find((c) => c.method === req.method)
    if (!r) {
      methodNotAllowed(res, path, candidates.map((c) => c.method))
      return true
    }
    const controller = new AbortController()
    // The caller went away, or the simulator is stopping.
    res.on('close', () => controller.abort())
    if (this.stopped) controller.abort('stopping')
    const stop = () => controller.abort('stopping')
    this.pending.add(stop)
    res.on('close', () => this.pending.delete(stop))
    const query = requestUrl(req.url).searchParams
    // A GET reads its query; a POST reads its body (its query is not read, as before).
    const stray = r.method === 'GET' ? unknownQuery(query, Object.keys(r.query ?? {})) : null
    if (stray !== null) {
      json(res, 400, { error: { code: 'bad_request', message: stray } })
      return true
    }
    void this.body(req, r)
      .then(async (body) => {
        if ('error' in body) return body.error
        // A stopping simulator scripts nothing more (its controls throw so): said as what it is, not
        // as a fault, whether stop() began before the request or while its body was arriving.
        if (r.method === 'POST' && this.ctx.sim.isStopping) return STOPPING
        const ctx = this.ctx as Context
        const answer = await r.run(Object.assign(ctx, { query, params, signal: controller.signal }), body.value as never)
        return answer
      })
      .catch((error: unknown) => ({ status: 500, body: { error: { code: 'control_failed', message: thrownText(error) } } }))
      .then((answer) => {
        if (res.writableEnded || res.destroyed) return
        // Node's server ends a `connection: close` exchange once the answer is written, which
        // stops an upload still arriving instead of reading it to its end.
        if ((answer as Answer).close === true) res.setHeader('connection', 'close')
        json(res, answer.status, answer.body)
      })
    return true
  }

  private denied(req: IncomingMessage): Answer | null {
    const header = (name: string) => {
      const value = req.headers[name]
      return Array.isArray(value) ? value[0] : value
    }
    let queryToken: string | null = null
    try {
      queryToken = requestUrl(req.url).searchParams.get('token')
    } catch {
      queryToken = null
    }
    const refused = adminAccess(
      {
        method: req.method ?? 'GET',
        remoteAddress: req.socket.remoteAddress,
        host: header('host'),
        origin: header('origin'),
        authorization: header('authorization'),
        contentType: header('content-type'),
        queryToken,
      },
      this.token,
    )
    return refused ? { status: refused.status, body: { error: { code: refused.code, message: refused.message } } } : null
  }

  /** Answers every pending long-poll with 503 (the simulator is stopping), so nothing waits out its timeout. */
  stop(): void {
    this.stopped = true
    for (const stop of [...this.pending]) stop()
    this.pending.clear()
  }

  private match(path: string): { candidates: ControlRoute[]; params: Record<string, string> } | null {
    for (const { pattern, candidates } of ROUTE_PATTERNS) {
      const m = pattern.exec(path)
      if (m) return { candidates, params: { ...m.groups } }
    }
    return null
  }

  private body(req: IncomingMessage, r: ControlRoute): Promise<{ value: unknown } | { error: Answer }> {
    if (!r.body) {
      req.resume()
      return Promise.resolve({ value: undefined })
    }
    const schema = r.body
    return new Promise((resolve) => {
      const chunks: Buffer[] = []
      let size = 0
      let stopped = false
      /** Stops reading the body and answers `error` (the connection closes after it: the rest is not read). */
      const giveUp = (error: Answer) => {
        clearTimeout(timer)
        stopped = true
        req.off('data', onData)
        req.pause()
        chunks.length = 0
        resolve({ error })
      }
      const onData = (chunk: Buffer) => {
        size += chunk.length
        if (size <= MAX_CONTROL_BODY_BYTES) return void chunks.push(chunk)
        // Answered as soon as the limit is passed, not once a body of any length has arrived.
        giveUp({ status: 413, close: true, body: { error: { code: 'too_large', message: `the body is over ${MAX_CONTROL_BODY_BYTES} bytes` } } })
      }
      // A body that never completes (a Content-Length never met) would hold the connection until
      // Node's own request timeout (300 s).
      const timer = setTimeout(
        () => giveUp({ status: 408, close: true, body: { error: { code: 'request_timeout', message: `the body did not arrive within ${CONTROL_BODY_TIMEOUT_MS} ms` } } }),
        CONTROL_BODY_TIMEOUT_MS,
      )
      req.on('data', onData)
      req.on('close', () => clearTimeout(timer))
      req.on('error', () => {
        clearTimeout(timer)
        resolve({ error: { status: 400, body: { error: { code: 'bad_request', message: 'the request body could not be read' } } } })
      })
      req.on('end', () => {
        clearTimeout(timer)
        if (stopped) return
        const text = Buffer.concat(chunks).toString('utf8')
        let value: unknown
        try {
          value = text.trim() === '' ? {} : JSON.parse(text)
        } catch (error) {
          return resolve({ error: { status: 400, body: { error: { code: 'bad_json', message: `the body is not JSON: ${(error as Error).message}` } } } })
        }
        if (jsonDepth(value, MAX_BODY_DEPTH) > MAX_BODY_DEPTH) {
          return resolve({ error: { status: 400, body: { error: { code: 'bad_request', message: `the body is nested deeper than ${MAX_BODY_DEPTH} levels` } } } })
        }
        let parsed: ReturnType<typeof schema.safeParse>
        try {
          parsed = schema.safeParse(value, { reportInput: true })
        } catch (error) {
          return resolve({ error: { status: 400, body: { error: { code: 'bad_request', message: `the body cannot be checked: ${error instanceof RangeError ? 'nested too deeply' : (error as Error).message}` } } } })
        }
        if (!parsed.success) {
          const issue = parsed.error.issues[0]!
          const at = issue.path.length > 0 ? issue.path.join('.') : 'body'
          return resolve({ error: { status: 400, body: { error: { code: 'bad_request', message: `${at}: ${describeIssue(issue)}`, issues: parsed.error.issues.map((i) => ({ path: i.path, message: describeIssue(i) })) } } } })
        }
        // The checked input itself, not zod's copy of it: a record or loose object is copied by
        // assignment, which turns an own `__proto__` key (JSON.parse keeps it as data, as Phoenix's
        // JSON would carry it) into a prototype and drops it from the payload. The schemas only
        // check (no defaults, no transforms), so the input is what they passed.
        resolve({ value })
      })
    })
  }
}

/** Answers 405 with `Allow`: `path` takes only `methods` (RFC 9110 section 15.5.6). */
export function methodNotAllowed(res: ServerResponse, path: string, methods: readonly string[]): void {
  res.setHeader('allow', methods.join(', '))
  json(res, 405, { error: { code: 'method_not_allowed', message: `${path} takes ${methods.join(', ')}` } })
}

/**
 * Writes a JSON answer (every admin route answers this way). An answer that cannot be written
 * (a record too large for one string: V8 caps a string near 512 MiB, and `JSON.stringify` throws
 * RangeError past it) is answered 500 `answer_failed` instead, never thrown: this runs after a
 * route's own error handling, where a throw would end the simulator's process.
 */
export function json(res: ServerResponse, status: number, body: unknown): void {
  let text: string
  try {
    text = JSON.stringify(body)
  } catch (error) {
    status = 500
    text = JSON.stringify({ error: { code: 'answer_failed', message: `the answer could not be written: ${thrownText(error)}` } })
  }
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(text)
}
