/**
 * Fuzzing every inbound path, with fast-check, on the real wire.
 *
 * Server -> link: sequences of hostile frames (non-JSON text, JSON of any shape, frames of the
 * right arity with wrong, stale or unknown parts, replies to unknown, stale and duplicate refs,
 * join_ref mismatches, binary frames of each kind with bad sizes, payloads of 1 MB and more,
 * agent.control payloads with missing, extra, wrong-typed and malformed fields) sent to a
 * connected link. Each frame must have a typed outcome the host can see (an `ignored` event with
 * its reason, a delivered control signal or app message, a channel status, or a typed
 * disconnect followed by a reconnect), nothing may reach the host as an exception, and the link
 * must end connected. A frame with no outcome is a silent drop and fails the run.
 *
 * Client -> simulator: hostile frames from a raw WebSocket. The simulator answers, records the
 * problem or closes with a protocol close code, and keeps serving other sockets.
 *
 * Supersede payloads of any shape end the session as `superseded`, never a crash, never a reconnect.
 *
 * `FUZZ_RUNS=500 npm test` runs longer; a failure prints fast-check's seed and path.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import fc from 'fast-check'
import WebSocket from 'ws'
import { controlTopic, encodeBinaryToClient, type Payload } from '../../src/protocol.js'
import type { LinkEvent } from '../../src/link.js'
import { startSimulator, type PlatformSimulator } from '../../src/node/server/index.js'
import { untilState, useWorld } from '../support/wire.js'
import { until } from '../support/until.js'

const RUNS = Number(process.env.FUZZ_RUNS ?? 25)
const AGENT = 'agent-1'
const CONTROL = controlTopic(AGENT)
const ROOM = 'room:fuzz'

/** Where a frame's parts come from, resolved against the live socket when it is sent. */
type RefPick = 'control-join' | 'room-join' | 'stale' | 'null' | { literal: unknown }
type TopicPick = 'control' | 'room' | 'heartbeat' | 'unjoined' | { literal: unknown }

interface Recipe {
  /** Human-readable, for the failure report. */
  readonly label: string
  build(refs: { control: string; room: string }): string | Uint8Array
  /** The outcome this frame must produce; any typed outcome when absent. */
  readonly expect?: (e: LinkEvent) => boolean
}

/** Mostly strings (so most frames get past decoding to the checks behind it), sometimes anything. */
const literal = fc.oneof({ weight: 4, arbitrary: fc.string({ maxLength: 8 }) }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 1 }) }).map((value) => ({ literal: value }))
const refPick: fc.Arbitrary<RefPick> = fc.oneof({ weight: 4, arbitrary: fc.constantFrom<RefPick>('control-join', 'room-join', 'stale', 'null') }, { weight: 1, arbitrary: literal })
const topicPick: fc.Arbitrary<TopicPick> = fc.oneof({ weight: 4, arbitrary: fc.constantFrom<TopicPick>('control', 'room', 'heartbeat', 'unjoined') }, { weight: 1, arbitrary: literal })
const event = fc.oneof(
  fc.constantFrom('agent.control', 'tick', 'phx_reply', 'phx_error', 'phx_close', 'phx_join', 'phx_leave', 'chan_reply_3', 'presence_diff', ''),
  fc.string({ maxLength: 12 }),
)
const replyPayload = fc.oneof(
  fc.record({ status: fc.constantFrom('ok', 'error', 'timeout'), response: fc.jsonValue({ maxDepth: 2 }) }),
  fc.record({ response: fc.jsonValue({ maxDepth: 1 }) }),
  fc.jsonValue({ maxDepth: 2 }),
)
/** agent.control payloads: valid, missing fields, extra fields, wrong types, malformed values. */
const controlPayload = fc.oneof(
  fc.record(
    {
      mode: fc.oneof(fc.constantFrom('interrupt', 'pause', 'resume', 'stop'), fc.string({ maxLength: 6 }), fc.integer(), fc.constant(null)),
      correlation_id: fc.oneof(fc.uuid(), fc.constant(null), fc.integer(), fc.string({ maxLength: 8 })),
      retry_after: fc.oneof(fc.integer({ min: -5, max: 100 }), fc.string({ maxLength: 4 }), fc.constant(null)),
      reason: fc.oneof(fc.string({ maxLength: 20 }), fc.integer()),
      extra: fc.jsonValue({ maxDepth: 2 }),
    },
    { requiredKeys: [] },
  ),
  fc.jsonValue({ maxDepth: 2 }),
)
const bigPayload = fc.integer({ min: 1_000_000, max: 1_200_000 }).map((size) => ({ blob: 'x'.repeat(size) }))

function resolveRef(pick: RefPick, refs: { control: string; room: string }): unknown {
  if (pick === 'control-join') return refs.control
  if (pick === 'room-join') return refs.room
  if (pick === 'stale') return '1'
  if (pick === 'null') return null
  return pick.literal
}

function resolveTopic(pick: TopicPick): unknown {
  if (pick === 'control') return CONTROL
  if (pick === 'room') return ROOM
  if (pick === 'heartbeat') return 'phoenix'
  if (pick === 'unjoined') return 'elsewhere:1'
  return pick.literal
}

const frameShaped: fc.Arbitrary<Recipe> = fc
  .tuple(refPick, fc.oneof({ weight: 2, arbitrary: fc.constant(null) }, { weight: 3, arbitrary: fc.integer({ min: 1, max: 99999 }).map(String) }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 0 }) }), topicPick, event)
  .chain(([joinRef, ref, topic, ev]) =>
    (ev === 'agent.control' ? controlPayload : ev === 'phx_reply' ? replyPayload : fc.oneof({ weight: 8, arbitrary: fc.jsonValue({ maxDepth: 3 }) }, { weight: 1, arbitrary: bigPayload })).map(
      (payload): Recipe => ({
        label: `[${JSON.stringify(joinRef)}, ${JSON.stringify(ref)}, ${JSON.stringify(topic)}, ${JSON.stringify(ev)}, ${JSON.stringify(payload).slice(0, 80)}]`,
        build: (refs) => JSON.stringify([resolveRef(joinRef, refs), ref, resolveTopic(topic), ev, payload]),
      }),
    ),
  )

const anyText: fc.Arbitrary<Recipe> = fc.oneof(fc.string({ maxLength: 40 }), fc.json({ maxDepth: 3 })).map((text) => ({ label: `text ${JSON.stringify(text)}`, build: () => text }))
const anyArray: fc.Arbitrary<Recipe> = fc
  .array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 8 })
  .map((items) => ({ label: `array ${JSON.stringify(items).slice(0, 80)}`, build: () => JSON.stringify(items) }))
const anyBinary: fc.Arbitrary<Recipe> = fc.oneof(
  fc.uint8Array({ minLength: 1, maxLength: 48 }),
  // Header-shaped: a real kind byte with sizes that run past the end or are zero.
  fc.tuple(fc.integer({ min: 0, max: 3 }), fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 0, maxLength: 4 }), fc.uint8Array({ maxLength: 16 })).map(
    ([kind, sizes, rest]) => new Uint8Array([kind, ...sizes, ...rest]),
  ),
).map((bytes) => ({ label: `binary ${Buffer.from(bytes).toString('hex').slice(0, 60)}`, build: () => bytes }))
const validBinary: fc.Arbitrary<Recipe> = fc
  .tuple(fc.constantFrom<'push' | 'broadcast'>('push', 'broadcast'), topicPick, fc.string({ maxLength: 10 }), fc.uint8Array({ maxLength: 32 }))
  .map(([kind, topic, ev, payload]) => ({
    label: `binary ${kind} on ${JSON.stringify(topic)} ${JSON.stringify(ev)}`,
    build: (refs) => {
      const t = resolveTopic(topic)
      const safeTopic = typeof t === 'string' && t.length < 200 ? t : 'elsewhere:1'
      return kind === 'push'
        ? encodeBinaryToClient({ kind, join_ref: safeTopic === ROOM ? refs.room : refs.control, topic: safeTopic, event: ev.slice(0, 200), payload })
        : encodeBinaryToClient({ kind, topic: safeTopic, event: ev.slice(0, 200), payload })
    },
  }))

const ignoredMatching = (pattern: RegExp) => (e: LinkEvent) => e.type === 'ignored' && pattern.test(e.detail)
/** Frames aimed at one check each, with the outcome that check must report. */
const targeted: fc.Arbitrary<Recipe> = fc.oneof(
  fc.integer({ min: 50_000, max: 99_999 }).map((ref) => ({
    label: `phx_reply to unknown ref ${ref}`,
    build: (refs: { control: string }) => JSON.stringify([refs.control, String(ref), CONTROL, 'phx_reply', { status: 'ok', response: {} }]),
    expect: ignoredMatching(/no push of this link waits for/),
  })),
  fc.constantFrom('phx_custom', 'chan_reply_9', 'phx_join', 'phx_leave').map((name) => ({
    label: `reserved event ${name}`,
    build: (refs: { control: string }) => JSON.stringify([refs.control, null, CONTROL, name, {}]),
    expect: ignoredMatching(/phoenix reserves/),
  })),
  controlPayload.map((payload) => ({
    label: `agent.control ${JSON.stringify(payload).slice(0, 80)}`,
    build: (refs: { control: string }) => JSON.stringify([refs.control, null, CONTROL, 'agent.control', payload]),
    expect: (e: LinkEvent) => e.type === 'control' || (e.type === 'ignored' && /agent\.control/.test(e.detail)),
  })),
  fc.string({ minLength: 1, maxLength: 8 }).map((name) => ({
    label: `push on the heartbeat topic ${JSON.stringify(name)}`,
    build: () => JSON.stringify([null, null, 'phoenix', name, {}]),
    expect: ignoredMatching(/heartbeat topic/),
  })),
)

const hostileFrame: fc.Arbitrary<Recipe> = fc.oneof(
  { weight: 3, arbitrary: targeted },
  { weight: 6, arbitrary: frameShaped },
  { weight: 2, arbitrary: anyText },
  { weight: 2, arbitrary: anyArray },
  { weight: 2, arbitrary: anyBinary },
  { weight: 1, arbitrary: validBinary },
)

/** A host-visible outcome of a frame. */
function isOutcome(e: LinkEvent): boolean {
  return e.type === 'ignored' || e.type === 'control' || e.type === 'disconnected' || e.type === 'channel'
}

describe('fuzz: hostile server frames against a connected link', () => {
  const world = useWorld()

  /** A connected link with an app channel, counting every host-visible outcome. */
  async function setup() {
    const sim = await world().sim({ recordLimit: 50 })
    const state = { outcomes: 0 }
    const link = world().link(sim, {
      // The fuzz closes the control channel on purpose (phx_close, phx_error); no rapid-loop give-up here.
      policy: { reconnect: { rapidLimit: 1_000_000, maxAttempts: null } },
      onControl: () => {},
    })
    const events: LinkEvent[] = []
    link.onAny((e) => {
      if (!isOutcome(e)) return
      state.outcomes++
      events.push(e)
    })
    const openRoom = () => {
      const handle = link.channel(ROOM)
      handle.onAny(() => state.outcomes++)
      return handle
    }
    let room = openRoom()
    await link.connect()
    /**
     * Waits until the link is connected with its app channel joined; returns the live socket's
     * join_refs. A server phx_close ends an app channel for good (it is dropped, typed), so the
     * host opens it again, as a host would.
     */
    const ready = async () => {
      await untilState(link, 'connected', 5000)
      if (!room.active) room = openRoom()
      await until(() => sim.live(AGENT).length === 1 && sim.live(AGENT)[0]!.channels.has(ROOM) && room.status === 'joined', 5000, 'the room joined')
      const conn = sim.live(AGENT)[0]!
      return { conn, refs: { control: conn.channels.get(CONTROL)!.joinRef as string, room: conn.channels.get(ROOM)!.joinRef as string } }
    }
    await ready()
    return { sim, link, state, ready, events }
  }

  it(`every hostile frame has a typed outcome and the link ends connected (${RUNS} runs of up to 6 frames)`, async () => {
    const { sim, link, state, ready, events } = await setup()
    await fc.assert(
      fc.asyncProperty(fc.array(hostileFrame, { minLength: 1, maxLength: 6 }), async (recipes) => {
        for (const recipe of recipes) {
          const { conn, refs } = await ready()
          const before = state.outcomes
          const from = events.length
          conn.sendRaw(recipe.build(refs))
          await until(() => state.outcomes > before, 3000, `an outcome for ${recipe.label}`)
          if (recipe.expect) await until(() => events.slice(from).some(recipe.expect!), 3000, `the outcome that ${recipe.label} must produce`)
        }
        await ready()
        const logged = world().captured.get(link)!.lines.filter((l) => l.level === 'error')
        expect(logged.map((l) => l.message)).toEqual([])
        expect(link.state).toBe('connected')
      }),
      { numRuns: RUNS },
    )
    // Still healthy: a valid control signal after all of it is delivered.
    const seen: string[] = []
    link.onControl((signal) => {
      seen.push(signal.correlationId ?? '')
    })
    await ready()
    sim.control(AGENT, { mode: 'interrupt', correlation_id: 'after-fuzz' })
    await until(() => seen.includes('after-fuzz'), 3000, 'the signal after the fuzz')
  }, 180_000)

  it('a 9 MB frame over the 8 MiB limit closes with 1009 and a typed reason, then reconnects', async () => {
    const { link, ready } = await setup()
    const { conn } = await ready()
    const disconnected = new Promise<Extract<LinkEvent, { type: 'disconnected' }>>((resolve) => {
      const off = link.on('disconnected', (e) => {
        off()
        resolve({ type: 'disconnected', ...e })
      })
    })
    conn.sendRaw(JSON.stringify([null, null, ROOM, 'tick', { blob: 'x'.repeat(9 * 1024 * 1024) }]))
    const e = await disconnected
    expect(e.outcome).toBe('reconnect')
    expect(e.reason).toMatchObject({ kind: 'closed', closeCode: 1009 })
    expect(JSON.stringify(e.reason)).toMatch(/maxFrameBytes/)
    await ready()
  }, 30_000)
})

describe('fuzz: hostile client frames against the simulator', () => {
  let sim: PlatformSimulator
  let healthy: WebSocket

  beforeAll(async () => {
    sim = await startSimulator({ agents: { [AGENT]: 'key-1', 'agent-2': 'key-2' }, recordLimit: 20 })
    healthy = await open('agent-2', 'key-2')
  })

  afterAll(async () => {
    const closed = new Promise<void>((resolve) => healthy.once('close', () => resolve()))
    healthy.close(1000)
    await closed
    await sim.stop()
  })

  async function open(agent: string, key: string): Promise<WebSocket> {
    const ws = new WebSocket(`${sim.url}/websocket?agent_id=${agent}&vsn=2.0.0`, { headers: { 'x-api-key': key } })
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve())
      ws.once('error', reject)
    })
    return ws
  }

  /** Sends a heartbeat and resolves with whether it was answered (false at once if the socket closes first). */
  function heartbeat(ws: WebSocket, ref: string): Promise<boolean> {
    return new Promise((resolve) => {
      const finish = (answered: boolean) => {
        clearTimeout(timer)
        ws.off('message', onMessage)
        ws.off('close', onClose)
        resolve(answered)
      }
      const timer = setTimeout(() => finish(false), 3000)
      const onMessage = (data: WebSocket.RawData) => {
        const text = String(data)
        if (text.includes(`"${ref}"`) && text.includes('"phoenix"')) finish(true)
      }
      const onClose = () => finish(false)
      ws.on('message', onMessage)
      ws.once('close', onClose)
      if (ws.readyState !== WebSocket.OPEN) return finish(false)
      ws.send(JSON.stringify([null, ref, 'phoenix', 'heartbeat', {}]))
    })
  }

  const clientFrame = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.json({ maxDepth: 3 }),
    fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 7 }).map((a) => JSON.stringify(a)),
    fc
      .tuple(
        fc.oneof(fc.constant(null), fc.string({ maxLength: 4 }), fc.integer()),
        fc.oneof(fc.constant(null), fc.integer({ min: 1, max: 999 }).map(String), fc.integer()),
        fc.oneof(fc.constantFrom(CONTROL, controlTopic('agent-2'), 'room:1', 'phoenix', ''), fc.string({ maxLength: 10 }), fc.integer()),
        fc.oneof(fc.constantFrom('phx_join', 'phx_leave', 'heartbeat', 'ping', 'phx_reply', 'agent.control'), fc.string({ maxLength: 8 }), fc.integer()),
        fc.jsonValue({ maxDepth: 2 }),
      )
      .map((f) => JSON.stringify(f)),
    fc.uint8Array({ minLength: 1, maxLength: 48 }),
  )

  it(`answers, records or closes with a protocol code, and keeps serving (${RUNS * 4} frames)`, async () => {
    let n = 0
    await fc.assert(
      fc.asyncProperty(clientFrame, async (frame) => {
        const ws = await open(AGENT, 'key-1')
        const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)))
        ws.send(frame)
        const answered = await heartbeat(ws, `hb-${++n}`)
        if (answered) {
          ws.close(1000)
          await closed
        } else {
          // Not answered: the simulator must have closed the socket (1011 as a crashed Phoenix socket
          // process, or ws's own protocol close code),
          // and recorded why.
          const code = await closed
          expect([1003, 1008, 1009, 1011]).toContain(code)
          const conn = sim.accepted(AGENT).at(-1)!
          expect(conn.problems.length).toBeGreaterThan(0)
        }
        expect(await heartbeat(healthy, `healthy-${n}`)).toBe(true)
      }),
      { numRuns: RUNS * 4 },
    )
  }, 120_000)
})

describe('fuzz: supersede payloads of any shape', () => {
  const world = useWorld()
  const supersedePayload: fc.Arbitrary<Payload> = fc.oneof(
    fc.record(
      {
        reason: fc.oneof(fc.string({ maxLength: 10 }), fc.integer(), fc.constant(null)),
        retry_after: fc.oneof(fc.integer({ min: -10, max: 1000 }), fc.string({ maxLength: 5 }), fc.constant(null)),
        target_socket_id: fc.oneof(fc.string({ maxLength: 8 }), fc.integer()),
        extra: fc.jsonValue({ maxDepth: 2 }),
      },
      { requiredKeys: [] },
    ) as fc.Arbitrary<Payload>,
    fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<Payload>,
  )

  it(`ends the session as superseded and never reconnects (${Math.max(5, Math.round(RUNS / 3))} runs)`, async () => {
    const sim = await world().sim()
    await fc.assert(
      fc.asyncProperty(supersedePayload, async (payload) => {
        const link = world().link(sim)
        await link.connect()
        const before = sim.accepted(AGENT).length
        const ended = new Promise<string>((resolve) => {
          const off = link.on('disconnected', (e) => {
            off()
            resolve(`${e.outcome}:${e.reason.kind}`)
          })
        })
        sim.push({ agent: AGENT }, CONTROL, 'supersede', payload)
        expect(await ended).toBe('terminated:superseded')
        expect(link.state).toBe('terminated')
        // disconnect() resolves once every socket of the link is closed; terminated holds no timer,
        // so a reconnect would have had to show by now.
        await link.disconnect()
        expect(sim.accepted(AGENT).length).toBe(before)
      }),
      { numRuns: Math.max(5, Math.round(RUNS / 3)) },
    )
  }, 180_000)
})
