/**
 * Defects found by an adversarial review, each now guarded: deep payloads, prototype-named
 * topics, throwing host callbacks, reentrant calls, a chart crash, unencodable pushes, and the
 * simulator's own robustness.
 */
import { request } from 'node:http'
import { inspect } from 'node:util'
import { runInNewContext } from 'node:vm'
import { describe, expect, it, vi } from 'vitest'
import { WebSocket } from 'ws'
import { DisconnectReason } from '../../src/reasons.js'
import { CONTROL_EVENT, PROTOCOL_VSN, SUPERSEDE_EVENT, controlTopic } from '../../src/protocol.js'
import { rawUpgrade } from '../support/raw-http.js'
import { framesIn, next, settle, untilState, useWorld } from '../support/wire.js'
import { until } from '../support/until.js'
import { createLink } from '../../src/link.js'
import { AgentDisconnectedError } from '../../src/errors/agent-disconnected.js'
import { chartOf, chartsOf, waitForChart } from '../../src/chart-of.js'

const world = useWorld()

function deepArray(depth: number): string {
  return `${'['.repeat(depth)}"SECRET-KEY"${']'.repeat(depth)}`
}

describe('hostile payloads', () => {
  it('a supersede nested 20,000 levels deep is still terminal and crashes nothing', async () => {
    const sim = await world().sim({ agents: { 'agent-1': 'SECRET-KEY' } })
    const link = world().link(sim, { apiKey: 'SECRET-KEY' })
    await link.connect()
    const conn = sim.live('agent-1')[0]!
    const ref = conn.channels.get(controlTopic('agent-1'))!.joinRef
    const ended = untilState(link, 'terminated')
    conn.sendRaw(`[${JSON.stringify(ref)},null,${JSON.stringify(controlTopic('agent-1'))},"${SUPERSEDE_EVENT}",{"reason":"x","extra":${deepArray(20_000)}}]`)
    await ended
    expect(link.lastDisconnectReason?.kind).toBe('superseded')
  })

  it('an agent.control signal with a 20,000-level extra field is delivered', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const conn = sim.live('agent-1')[0]!
    const ref = conn.channels.get(controlTopic('agent-1'))!.joinRef
    const control = next(link, 'control')
    conn.sendRaw(`[${JSON.stringify(ref)},null,${JSON.stringify(controlTopic('agent-1'))},"${CONTROL_EVENT}",{"mode":"stop","scope":"agent","agent_id":"agent-1","correlation_id":"deep","extra":${deepArray(20_000)}}]`)
    expect((await control).signal.correlationId).toBe('deep')
  })

  it("server text an ignored report quotes (an event name, a topic) is JSON-quoted and cut to 80 characters: a 1 MB name makes no 1 MB log line, a line break forges none", async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const conn = sim.live('agent-1')[0]!
    const control = controlTopic('agent-1')
    const ref = conn.channels.get(control)!.joinRef
    const details: string[] = []
    link.on('ignored', (e) => void details.push(e.detail))
    const huge = 'e'.repeat(1_000_000)
    conn.sendRaw(JSON.stringify([ref, null, control, `unknown ${huge}`, {}]))
    conn.sendRaw(JSON.stringify([null, null, `topic:${huge}`, 'news', {}]))
    conn.sendRaw(JSON.stringify([null, null, 'elsewhere:1', 'x\n[error] FORGED LOG LINE', {}]))
    conn.sendRaw(JSON.stringify([ref, null, control, `phx_${huge}`, {}]))
    // On the heartbeat topic, a reply to a ref nothing waits for, a message no handler takes, a non-object payload.
    const room = link.channel('room:q')
    await room.joined()
    const roomRef = conn.channels.get('room:q')!.joinRef
    conn.sendRaw(JSON.stringify([null, null, 'phoenix', 'news\nforged', {}]))
    conn.sendRaw(JSON.stringify([roomRef, `9\n${huge}`, 'room:q', 'phx_reply', { status: 'ok', response: {} }]))
    conn.sendRaw(JSON.stringify([roomRef, null, 'room:q', `unheard\n${huge}`, {}]))
    conn.sendRaw(JSON.stringify([roomRef, null, 'room:q', 'listed\nforged', 5]))
    await vi.waitFor(() => expect(details).toHaveLength(8), { timeout: 3000 })
    expect(details.slice(4)).toEqual([
      '"news\\nforged" on the heartbeat topic with ref null, which answers no pending heartbeat',
      'phx_reply on room:q to ref "9\\n"... (1000002 characters), which no push of this link waits for',
      'no handler for "unheard\\n"... (1000008 characters) on room:q',
      '"listed\\nforged" on room:q with a payload that is a number, not an object: not delivered',
    ])
    for (const detail of details) expect(detail).not.toMatch(/\n/)
    expect(details[0]).toBe('unknown event "unknown "... (1000008 characters) on the control channel')
    expect(details[1]).toBe('"news" for topic ""... (1000006 characters), which this link has not joined on this transport')
    expect(details[2]).toBe('"x\\n[error] FORGED LOG LINE" for topic "elsewhere:1", which this link has not joined on this transport')
    expect(details[3]).toMatch(/^""\.\.\. \(1000004 characters\) on agent_control:agent-1: an event name phoenix reserves/)
    // No log line of the link holds a raw line break or anything of the megabyte.
    const lines = world().captured.get(link)!.lines
    expect(lines.filter((l) => /characters\)/.test(JSON.stringify(l))).length).toBeGreaterThanOrEqual(4)
    for (const line of lines) {
      expect(JSON.stringify(line).length).toBeLessThan(1000)
      expect(line.message).not.toMatch(/\n/)
    }
    expect(link.state).toBe('connected')
  })

  it('server text with a line break or an escape (a close reason, a supersede message) reaches the typed reason as sent, and no log line or error message raw', async () => {
    const sim = await world().sim()
    const forged = 'bye\n[error] FORGED LOG LINE\u001b[31m\u2028'
    const link = world().link(sim)
    await link.connect()
    const lost = next(link, 'disconnected')
    sim.close({ agent: 'agent-1' }, 1000, forged)
    const { reason } = await lost
    expect(reason).toMatchObject({ kind: 'closed', closeReason: forged })
    await untilState(link, 'connected')
    // A wait for a state the session no longer reaches rejects with the session's end.
    const ended = link.whenState('stopping').catch((error: unknown) => error)
    sim.supersede('agent-1', { payload: { reason: 'session.already_connected', message: forged, retryable: false } })
    const error = (await ended) as AgentDisconnectedError
    expect(error).toBeInstanceOf(AgentDisconnectedError)
    expect(error.reason).toMatchObject({ kind: 'superseded', message: forged })
    expect(error.message).toBe('agent disconnected: superseded by a newer session with the same key (session.already_connected: bye\\n[error] FORGED LOG LINE\\u001b[31m\\u2028), terminal')
    const lines = world().captured.get(link)!.lines.filter((l) => l.message.startsWith('disconnected: '))
    expect(lines.map((l) => l.message)).toEqual([
      'disconnected: closed 1000 (normal closure) "bye\\n[error] FORGED LOG LINE\\u001b[31m\\u2028", will reconnect',
      'disconnected: superseded by a newer session with the same key (session.already_connected: bye\\n[error] FORGED LOG LINE\\u001b[31m\\u2028), terminal',
    ])
  })

  it('a supersede with a null payload is still terminal', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const conn = sim.live('agent-1')[0]!
    const ended = untilState(link, 'terminated')
    conn.sendRaw(JSON.stringify([conn.channels.get(controlTopic('agent-1'))!.joinRef, null, controlTopic('agent-1'), SUPERSEDE_EVENT, null]))
    await ended
    expect(link.lastDisconnectReason).toMatchObject({ kind: 'superseded', cause: 'unknown' })
  })
})

describe('host input', () => {
  for (const topic of ['toString', '__proto__', 'constructor', 'hasOwnProperty']) {
    it(`an app channel named ${JSON.stringify(topic)} joins and leaves like any other`, async () => {
      const sim = await world().sim()
      const link = world().link(sim)
      await link.connect()
      const room = link.channel(topic)
      await next(link, 'channel', { filter: (e) => e.topic === topic && e.status === 'joined' })
      await room.leave()
      expect(room.status).toBe('left')
      expect(link.state).toBe('connected')
    })
  }

  it('a throwing subscriber of link.actor is logged with its error and changes nothing', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    let calls = 0
    const subscription = link.actor.subscribe(() => {
      calls++
      throw new Error('subscriber bug')
    })
    await link.connect()
    subscription.unsubscribe()
    expect(link.state).toBe('connected')
    expect(calls).toBeGreaterThan(0)
    const logged = world().captured.get(link)!.lines.filter((l) => l.level === 'error' && l.message === 'a listener of the connection chart threw')
    expect(logged).toHaveLength(calls)
    expect(logged[0]!.fields).toEqual({ error: expect.stringContaining('subscriber bug') })
  })

  it('a throwing inspect observer is logged and changes nothing', async () => {
    const sim = await world().sim()
    let calls = 0
    const link = world().link(sim, {
      inspect: () => {
        calls++
        throw new Error('observer bug')
      },
    })
    await link.connect()
    sim.close({ agent: 'agent-1' }, 1000)
    await next(link, 'reconnected')
    expect(calls).toBeGreaterThan(0)
    expect(world().captured.get(link)!.lines.some((l) => l.level === 'error' && l.message.includes('inspect observer threw'))).toBe(true)
  })

  it('a throwing channel params function fails that join attempt typed, and it is retried', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    let fail = true
    const room = link.channel('room:1', () => {
      if (fail) throw new Error('token service down')
      return { token: 't' }
    })
    const errored = await next(link, 'channel', { filter: (e) => e.status === 'errored' })
    expect(errored.reason).toMatchObject({ kind: 'other', detail: expect.stringContaining('token service down') })
    fail = false
    await next(link, 'channel', { filter: (e) => e.status === 'joined' })
    expect(room.status).toBe('joined')
  })

  it('a push that cannot be encoded rejects PUSH_INVALID at once, with the cause', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await next(link, 'channel', { filter: (e) => e.status === 'joined' })
    await expect(room.push('x', { n: 10n } as never)).rejects.toMatchObject({ code: 'PUSH_INVALID', cause: expect.any(TypeError) })
    await expect(room.push('e'.repeat(300), new Uint8Array([1]).buffer)).rejects.toMatchObject({ code: 'PUSH_INVALID' })
    expect(await room.push('ok', {})).toEqual({})
  })

  /** A connected link with room:1 joined on a simulator that answers every push ok and records it (event, payload). */
  async function joinedRoomRecordingPushes() {
    const sim = await world().sim()
    const received: Array<[string, unknown]> = []
    sim.onPush(({ event, payload }) => (received.push([event, payload]), { status: 'ok', response: {} }))
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await room.joined()
    return { sim, link, room, received }
  }

  it('a payload holding, at any depth, a value whose content JSON would lose (a Map, a Set, binary data) rejects PUSH_INVALID naming it and its path; a nested Date goes as its toJSON (ISO text); join params are held to the same', async () => {
    const { link, room, received } = await joinedRoomRecordingPushes()
    const refused: Array<[object, string]> = [
      [{ value: new Map([['a', 1]]) }, 'a Map at value (JSON would send it as {})'],
      [{ a: { b: [1, new Set([2])] } }, 'a Set at a.b[1] (JSON would send it as {})'],
      [{ bytes: new Uint8Array([1, 2, 3]) }, 'binary data (Uint8Array) at bytes (JSON cannot carry it'],
      [{ list: [{ raw: new Uint8Array([1]).buffer }] }, 'binary data (ArrayBuffer) at list[0].raw'],
    ]
    for (const [payload, got] of refused) {
      const error = await room.push('bad', payload as never).then(() => null, (e: unknown) => e)
      expect(error, got).toMatchObject({ code: 'PUSH_INVALID', topic: 'room:1', event: 'bad' })
      expect(String((error as { cause?: Error }).cause?.message)).toContain(`got an object holding ${got}`)
    }
    // A value met twice (not a cycle) is looked at once; a Date inside goes as JSON sends it.
    const shared = { n: 1 }
    expect(await room.push('fine', { at: new Date(0), x: shared, y: [shared] })).toEqual({})
    // A value with toJSON goes as it returns: a Buffer as {type, data}, a Map subclass that says how.
    class Tags extends Map<string, number> {
      toJSON() {
        return Object.fromEntries(this)
      }
    }
    expect(await room.push('own', { bytes: Buffer.from('ab'), tags: new Tags([['a', 1]]), blob: { toJSON: () => 'YWI=' } })).toEqual({})
    expect(received).toEqual([
      ['fine', { at: '1970-01-01T00:00:00.000Z', x: { n: 1 }, y: [{ n: 1 }] }],
      ['own', { bytes: { type: 'Buffer', data: [97, 98] }, tags: { a: 1 }, blob: 'YWI=' }],
    ])
    expect(() => link.channel('room:2', { filter: new Set(['a']) })).toThrow(/^channel room:2: params must be a plain object or a function returning one, got an object holding a Set at filter \(JSON would send it as \{\}\)$/)
    const fromFunction = link.channel('room:3', () => ({ filter: new Map() }))
    const errored = await next(link, 'channel', { filter: (e) => e.topic === 'room:3' && e.status === 'errored' })
    expect(errored.reason).toMatchObject({ kind: 'other', detail: expect.stringContaining('an object holding a Map at filter') })
    await fromFunction.leave()
  })

  it('a payload that is neither a plain object nor an ArrayBuffer rejects PUSH_INVALID at once, naming what it got; nothing reaches the server', async () => {
    const { room, received } = await joinedRoomRecordingPushes()
    const refused: Array<[unknown, string]> = [
      [new Uint8Array([1, 2]), 'a Uint8Array (push its bytes as an ArrayBuffer'],
      [Buffer.from('ab'), 'a Buffer (push its bytes'],
      [[1, 2], 'an array'],
      ['text', 'a string'],
      [7, 'a number'],
      [null, 'null'],
      [new Map([['a', 1]]), 'a Map'],
      [new Date(0), 'a Date'],
      [{ toJSON: () => [1, 2] }, 'an object with a toJSON method'],
      [Object.defineProperty(new Uint8Array([9]), Symbol.toStringTag, { value: 'ArrayBuffer' }), 'a Uint8Array'],
      [new SharedArrayBuffer(2), 'a SharedArrayBuffer'],
      [revokedProxy(), 'a value that cannot be read (Cannot perform'],
    ]
    for (const [payload, got] of refused) {
      const error = await room.push('bad', payload as never).then(() => null, (e: unknown) => e)
      expect(error, got).toMatchObject({ code: 'PUSH_INVALID', topic: 'room:1', event: 'bad' })
      expect(String((error as { cause?: Error }).cause?.message)).toContain(`a payload is a plain JSON object (a Phoenix map) or an ArrayBuffer (a binary push); got ${got}`)
    }
    // What can go: a plain object (null prototype too) and an ArrayBuffer.
    expect(await room.push('map', { a: 1 })).toEqual({})
    expect(await room.push('bare', Object.assign(Object.create(null) as object, { b: 2 }) as never)).toEqual({})
    expect(await room.push('bytes', new Uint8Array([1, 2]).buffer)).toEqual({})
    // An ArrayBuffer of another realm goes as binary too (phoenix.js alone would send it as JSON {}).
    expect(await room.push('foreign', runInNewContext('new Uint8Array([7, 8, 9]).buffer') as ArrayBuffer)).toEqual({})
    expect(received.map(([event]) => event)).toEqual(['map', 'bare', 'bytes', 'foreign'])
    expect(received[1]).toEqual(['bare', { b: 2 }])
    // The simulator hands its push handler the payload's bytes alone.
    expect([...new Uint8Array(received[2]![1] as ArrayBuffer)]).toEqual([1, 2])
    expect([...new Uint8Array(received[3]![1] as ArrayBuffer)]).toEqual([7, 8, 9])
  })

  it('the API key is not in util.inspect(link)', async () => {
    const sim = await world().sim({ agents: { 'agent-1': 'sk-VISIBLE?' } })
    const link = world().link(sim, { apiKey: 'sk-VISIBLE?' })
    await link.connect()
    expect(inspect(link, { depth: 8 })).not.toContain('sk-VISIBLE?')
  })
})

describe('reentrant and concurrent calls', () => {
  it('disconnect() immediately followed by connect(): both settle', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const stopped = link.disconnect()
    await link.connect()
    // connect() resolved for its own session, connected: not on a state of the one being stopped.
    expect(link.state).toBe('connected')
    await stopped
    expect(link.state).toBe('connected')
    expect(sim.live('agent-1')).toHaveLength(1)
  })

  it('connect() called from a state listener on terminated starts the new session and resolves', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const again = new Promise<unknown>((resolve) => {
      const off = link.on('state', (e) => {
        if (e.state !== 'terminated') return
        off()
        resolve(settle(link.connect()))
      })
    })
    sim.supersede('agent-1')
    expect(await again).toMatchObject({ ok: true })
    expect(link.state).toBe('connected')
  })

  it('after disconnect(), signals still waiting behind a slow handler are dropped and reported; the one in progress finishes', async () => {
    const sim = await world().sim()
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const handled: string[] = []
    const link = world().link(sim, {
      onControl: async (s) => {
        if (s.correlationId === 'a') await gate
        handled.push(s.correlationId!)
      },
    })
    await link.connect()
    const first = next(link, 'control')
    sim.control('agent-1', { mode: 'stop', correlation_id: 'a' })
    expect((await first).epoch).toBe(1)
    const dropped: string[] = []
    link.on('ignored', (e) => e.detail.includes('dropped') && dropped.push(e.detail))
    const queued = waitForChart(chartOf(link), (snapshot) => snapshot.context.signalSeq >= 3, 4000)
    sim.control('agent-1', { mode: 'stop', correlation_id: 'b' })
    sim.control('agent-1', { mode: 'stop', correlation_id: 'c' })
    await queued
    await link.disconnect()
    expect(dropped).toHaveLength(2)
    release()
    await link.connect()
    expect(handled).toEqual(['a'])
  })
})

/**
 * A wall clock that throws once, when told to: the connection chart's next stamp is then a
 * throwing assign (a phoenix-link bug's shape). `broken` reads whether the armed throw is still to come.
 */
function clockThatThrowsOnce(): { now: () => number; breakNext: () => void; readonly broken: boolean } {
  let broken = false
  return {
    now: () => {
      if (!broken) return Date.now()
      broken = false
      throw new Error('simulated bug')
    },
    breakNext: () => void (broken = true),
    get broken() {
      return broken
    },
  }
}

describe('a chart crash', () => {
  it('ends every socket, rejects waiters INTERNAL, aborts runs, reads terminated, and disconnect() still resolves', async () => {
    const sim = await world().sim()
    const clock = clockThatThrowsOnce()
    const link = world().link(sim, { env: { now: clock.now } })
    await link.connect()
    const run = settle(link.runForever())
    const work = link.runSignal('work-1')
    const ended = next(link, 'disconnected')
    clock.breakNext()
    // The chart stamps the graceful reason of a stop with the wall clock (recordGraceful): that assign throws.
    chartOf(link).send({ type: 'host.disconnect' })
    expect(clock.broken).toBe(false)
    expect(await ended).toMatchObject({ outcome: 'terminated', terminal: true, reason: { kind: 'other', retryable: false, detail: 'internal error: simulated bug' } })
    expect(((await run) as { error: { code: string } }).error.code).toBe('INTERNAL')
    // Work the session can no longer deliver is aborted, as on any terminal reason.
    expect(work.aborted).toBe(true)
    expect(work.reason).toMatchObject({ kind: 'other', detail: expect.stringContaining('simulated bug') })
    expect(link.state).toBe('terminated')
    expect(link.lastDisconnectReason).toMatchObject({ kind: 'other', detail: expect.stringContaining('simulated bug') })
    // A crashed link is terminated for good: a wait for that state resolves, a wait for any other rejects INTERNAL.
    expect(await link.whenState(['stopped', 'terminated'])).toBe('terminated')
    expect(await settle(link.whenState('connected'))).toMatchObject({ error: { code: 'INTERNAL' } })
    await link.disconnect()
    await sim.waitFor(() => sim.live('agent-1').length === 0)
  })

  it("drops every channel with the crash's reason: its status says so, its waits reject CHANNEL_CLOSED, leave() resolves", async () => {
    const sim = await world().sim()
    const clock = clockThatThrowsOnce()
    const link = world().link(sim, { env: { now: clock.now } })
    await link.connect()
    const room = link.channel('room:1')
    await room.joined()
    const statuses: string[] = []
    room.onStatus((status) => void statuses.push(status))
    const told = next(link, 'channel', { filter: (e) => e.topic === 'room:1' && e.status === 'dropped' })
    const ended = next(link, 'disconnected')
    clock.breakNext()
    chartOf(link).send({ type: 'host.disconnect' })
    await ended
    expect(room.status).toBe('dropped')
    expect(room.reason).toMatchObject({ kind: 'other', detail: 'internal error: simulated bug' })
    expect(await settle(room.joined())).toMatchObject({ ok: false, error: { code: 'CHANNEL_CLOSED' } })
    await room.leave()
    await Promise.resolve()
    expect(statuses).toEqual(['dropped'])
    expect((await told).reason).toMatchObject({ kind: 'other', detail: 'internal error: simulated bug' })
    await link.disconnect()
  })

  it('env.random() drawing outside [0, 1) (NaN here) is read as a throw: the reconnect chart crashes with a reason naming it, no delay of NaN is used', async () => {
    const sim = await world().sim()
    let draws = 0
    const link = world().link(sim, { env: { random: () => (++draws > 0 ? Number.NaN : 0) } })
    await link.connect()
    const ended = next(link, 'disconnected', { filter: (e) => e.terminal })
    sim.close({ agent: 'agent-1' }, 1011)
    expect(await ended).toMatchObject({ outcome: 'terminated', nextDelayMs: null, reason: { kind: 'other', detail: 'internal error: env.random() must return a number in [0, 1), got NaN' } })
    expect(link.state).toBe('terminated')
    expect(sim.upgrades).toHaveLength(1)
  })

  it('a clock whose now() reads NaN is read as a throw: the connection chart crashes naming it before any upgrade, instead of every delay firing at once', async () => {
    const sim = await world().sim()
    const clock = { setTimeout: (fn: () => void, ms: number) => setTimeout(fn, ms), clearTimeout: (id: unknown) => clearTimeout(id as NodeJS.Timeout), now: () => Number.NaN }
    const link = world().link(sim, { clock })
    const r = await settle(link.connect())
    expect(r).toMatchObject({ ok: false, error: { code: 'INTERNAL' } })
    expect(link.lastDisconnectReason).toMatchObject({ kind: 'other', detail: 'internal error: clock.now() must return a finite number of milliseconds, got NaN' })
    expect(link.state).toBe('terminated')
    expect(sim.upgrades).toHaveLength(0)
  })

  it('a clock that starts reading NaN mid-session, when a timer fires: the chart whose delay it timed crashes naming it; nothing escapes the timer', async () => {
    const sim = await world().sim()
    let bad = false
    const clock = { setTimeout: (fn: () => void, ms: number) => setTimeout(fn, ms), clearTimeout: (id: unknown) => clearTimeout(id as NodeJS.Timeout), now: () => (bad ? Number.NaN : performance.now()) }
    // A short channel stable window: the delay pending once connected, whose timer fires after the clock went bad.
    const link = world().link(sim, { clock, policy: { channel: { rejoinStableAfterMs: 100 } } })
    await link.connect()
    const ended = next(link, 'disconnected')
    bad = true
    expect(await ended).toMatchObject({ outcome: 'terminated', reason: { kind: 'other', detail: 'internal error: clock.now() must return a finite number of milliseconds, got NaN' } })
    expect(link.state).toBe('terminated')
    bad = false
  })

  it("a wall clock that reads no number (a string, NaN, undefined) is logged once and replaced: the link lives on, and every reason's at is a number", async () => {
    for (const bad of ['yesterday', Number.NaN, undefined]) {
      const sim = await world().sim()
      const lines: string[] = []
      const logged = (...args: unknown[]) => void lines.push(args.find((a): a is string => typeof a === 'string') ?? '')
      const logger = { debug: () => {}, info: () => {}, warn: () => {}, error: logged }
      const link = world().link(sim, { env: { now: () => bad as unknown as number }, logger })
      await link.connect()
      const lost = next(link, 'disconnected')
      sim.close({ agent: 'agent-1' }, 1011)
      // The loss is stamped inside the connection chart: no crash, the process's own wall clock.
      const event = await lost
      expect(event.reason).toMatchObject({ kind: 'closed', closeCode: 1011, at: expect.any(Number) })
      expect(DisconnectReason.safeParse(event.reason).success).toBe(true)
      await untilState(link, 'connected')
      await link.disconnect()
      expect(link.lastDisconnectReason).toMatchObject({ kind: 'graceful', at: expect.any(Number) })
      const got = typeof bad === 'number' ? String(bad) : typeof bad
      expect(lines.filter((l) => l.startsWith('env.now'))).toEqual([`env.now returned ${got}, not a finite number of milliseconds; phoenix-link reads its own clock instead`])
    }
  })

  it('a monotonic clock that reads NaN is logged once and replaced: reconnected.downtimeMs is a number', async () => {
    const sim = await world().sim()
    const lines: string[] = []
    const logged = (...args: unknown[]) => void lines.push(args.find((a): a is string => typeof a === 'string') ?? '')
    const logger = { debug: () => {}, info: () => {}, warn: () => {}, error: logged }
    const link = world().link(sim, { env: { monotonic: () => Number.NaN }, logger })
    await link.connect()
    const back = next(link, 'reconnected')
    sim.close({ agent: 'agent-1' }, 1011)
    const { downtimeMs } = await back
    expect(Number.isFinite(downtimeMs) && downtimeMs >= 0).toBe(true)
    expect(lines.filter((l) => l.startsWith('env.monotonic'))).toEqual(["env.monotonic returned NaN, not a finite number of milliseconds; phoenix-link reads the clock's last good reading instead"])
  })

  it("NaN from a host's monotonic clock whose origin is an hour from performance.now() reads as that clock's last good reading: the downtime is the outage's, not an hour", async () => {
    const sim = await world().sim()
    // NaN for the reads from the loss to the next socket's join (the loss's stamp among them; 9 in all by then).
    let bad = 0
    const monotonic = () => {
      if (bad === 0) return performance.now() + 3_600_000
      bad--
      return Number.NaN
    }
    const link = world().link(sim, { env: { monotonic }, logger: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} } })
    await link.connect()
    const back = next(link, 'reconnected')
    bad = 7
    sim.close({ agent: 'agent-1' }, 1011)
    const { downtimeMs } = await back
    expect(bad).toBe(0)
    expect(downtimeMs).toBeGreaterThanOrEqual(0)
    expect(downtimeMs).toBeLessThan(60_000)
  })

  it('a crash with no run in flight sends the run supervisor no abort report (nothing-to-abort), as a stop does not', async () => {
    const sim = await world().sim()
    const clock = clockThatThrowsOnce()
    const link = world().link(sim, { env: { now: clock.now } })
    const reports: string[] = []
    link.runs.onAborted((report) => reports.push(report.outcome))
    await link.connect()
    const ended = next(link, 'disconnected')
    clock.breakNext()
    chartOf(link).send({ type: 'host.disconnect' })
    expect(await ended).toMatchObject({ outcome: 'terminated', reason: { kind: 'other' } })
    expect(link.state).toBe('terminated')
    expect(reports).toEqual([])
    await link.disconnect()
  })

  it("a wall clock that throws for good: the crash is still reported whole (a stamp, the host's events), and connect() and disconnect() settle", async () => {
    const sim = await world().sim()
    let broken = false
    const now = () => {
      if (broken) throw new Error('clock gone')
      return Date.now()
    }
    const lines: string[] = []
    const logged = (...args: unknown[]) => void lines.push(args.find((a): a is string => typeof a === 'string') ?? '')
    const logger = { debug: () => {}, info: () => {}, warn: () => {}, error: logged }
    const link = world().link(sim, { env: { now }, logger })
    await link.connect()
    const ended = next(link, 'disconnected')
    broken = true
    chartOf(link).send({ type: 'host.disconnect' })
    const event = await ended
    expect(event).toMatchObject({ outcome: 'terminated', terminal: true, reason: { kind: 'other', detail: 'internal error: clock gone' } })
    // The stamp falls back to the process's own wall clock when the host's throws.
    expect(event.reason.at).toEqual(expect.any(Number))
    expect(lines).toContain('connection chart crashed')
    // The socket's close is stamped outside the charts: there the host's clock fault is logged once, never thrown into ws.
    await sim.waitFor(() => sim.live('agent-1').length === 0, { what: 'the socket to end' })
    await vi.waitFor(() => expect(lines.filter((l) => l.startsWith('env.now threw'))).toHaveLength(1), { timeout: 2000 })
    expect(link.state).toBe('terminated')
    expect(await settle(link.connect())).toMatchObject({ error: { code: 'INTERNAL' } })
    await link.disconnect()
  })

  it("a channel chart's crash drops that channel alone: its join, accepted after the crash, is left on the wire; the link stays connected", async () => {
    const sim = await world().sim()
    sim.onJoin('room:held', { reply: 'hold' }, 1)
    let broken = false
    const now = () => {
      if (!broken) return Date.now()
      broken = false
      throw new Error('simulated bug')
    }
    const link = world().link(sim, { env: { now }, policy: { channel: { joinTimeoutMs: 150 } } })
    await link.connect()
    const dropped = next(link, 'channel', { filter: (e) => e.topic === 'room:held' && e.status === 'dropped' })
    link.channel('room:held')
    await sim.waitFor(() => sim.heldJoins.some((j) => j.topic === 'room:held'), { what: 'the held join' })
    // The channel chart stamps its join timeout's reason with the wall clock: that assign throws.
    broken = true
    expect(await dropped).toMatchObject({ reason: { kind: 'other', detail: expect.stringContaining('simulated bug') } })
    expect(broken).toBe(false)
    expect(chartsOf(link).channels.has('room:held')).toBe(false)
    // The server accepts the join late: the phx_leave the crash left behind ends it there.
    const conn = sim.live('agent-1')[0]!
    expect(sim.answerHeldJoin('room:held', { reply: 'ok' })).toBe(true)
    await sim.waitFor(() => conn.frames.some((f) => f.dir === 'in' && f.frame?.topic === 'room:held' && f.frame.event === 'phx_leave'), { what: 'the phx_leave' })
    await sim.waitFor(() => !conn.channels.has('room:held'), { what: 'the server to drop the topic' })
    expect(link.state).toBe('connected')
    expect(sim.live('agent-1')).toHaveLength(1)
    await link.disconnect()
  })
})

/** A simulator logger that keeps every warning's arguments, whichever order the simulator passes them in. */
function warningsLogger(): { logger: { info: () => void; warn: (...line: unknown[]) => void }; warnings: unknown[][] } {
  const warnings: unknown[][] = []
  return { warnings, logger: { info: () => {}, warn: (...line: unknown[]) => void warnings.push(line) } }
}

/** One plain HTTP request to the simulator's port: its status and body. */
function answerOf(port: number, path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => (body += chunk))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

describe('the simulator under bad requests', () => {
  // 'http://%/…' is no URL at all (an absolute-form target whose host cannot be read: the request
  // handler throws, and the simulator logs why); a bad percent-escape in a query value parses, and
  // is refused as any upgrade without a key is (403: no vsn reads as 1.0.0, as on Phoenix); '//%'
  // is a path (origin-form), with no socket at it.
  for (const { path, thrown, answer } of [
    { path: 'http://%/socket/websocket', thrown: true, answer: 400 },
    { path: '/socket/websocket?agent_id=%zz', thrown: false, answer: 403 },
    { path: '//%', thrown: false, answer: 404 },
  ]) {
    it(`answers an unparsable upgrade (${path}) with ${answer}${thrown ? ', logs why,' : ''} and keeps serving`, async () => {
      const { logger, warnings } = warningsLogger()
      const sim = await world().sim({ logger })
      const { status } = await answerOf(sim.port, path, { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' })
      expect(status).toBe(answer)
      // The line a host's logger gets names the request's fault, whichever argument order it takes.
      const why = warnings.filter((line) => line.includes('bad upgrade request'))
      expect(why).toHaveLength(thrown ? 1 : 0)
      if (thrown) expect(why[0]).toContainEqual({ error: expect.stringMatching(/\S/) })
      const link = world().link(sim)
      await link.connect()
      expect(link.state).toBe('connected')
    })
  }
})

describe('the simulator under a failing host route, and keys it must not take', () => {
  it('an extra HTTP route that throws answers 500 route_failed, is logged, and the simulator keeps serving', async () => {
    const { logger, warnings } = warningsLogger()
    const sim = await world().sim({
      logger,
      routes: (req) => {
        if (req.url === '/boom') throw new Error('route boom')
        return false
      },
    })
    const answer = await answerOf(sim.port, '/boom')
    expect(answer.status).toBe(500)
    expect(JSON.parse(answer.body)).toEqual({ error: { code: 'route_failed', message: 'the route threw' } })
    const why = warnings.filter((line) => line.includes('an extra HTTP route threw'))
    expect(why).toHaveLength(1)
    expect(why[0]).toContainEqual({ url: '/boom', error: 'route boom' })
    const link = world().link(sim)
    await link.connect()
    expect(link.state).toBe('connected')
  })

  it("with agents: 'any', an upgrade with no key or an empty one is still refused 403", async () => {
    const sim = await world().sim({ agents: 'any' })
    for (const query of [{ agent_id: 'anyone', vsn: PROTOCOL_VSN }, { agent_id: 'anyone', api_key: '', vsn: PROTOCOL_VSN }] as Array<Record<string, string>>) {
      expect((await rawUpgrade(sim.port, query)).statusLine).toBe('HTTP/1.1 403 Forbidden')
    }
    expect(sim.upgrades.map((u) => u.status)).toEqual([403, 403])
  })
})

describe('reentrant host code (second review)', () => {
  it('runForever() of a session that disconnect() and connect() replaced in one turn resolves when its session stops, before the next one connects', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    let outcome: Awaited<ReturnType<typeof settle>> | 'pending' = 'pending'
    const run = settle(link.runForever()).then((settled) => (outcome = settled))
    const stopped = link.disconnect()
    const restarted = link.connect()
    await stopped
    await restarted
    expect(link.state).toBe('connected')
    // Settled when its session stopped, before the next one began (long before it connected): it
    // does not wait on the next session.
    expect(outcome).toEqual({ ok: true, value: undefined })
    await run
  })

  it('connect() from a stop listener: the disconnect() that stopped it still resolves', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const reconnecting = new Promise<unknown>((resolve) => {
      const off = link.on('state', (e) => {
        if (e.state !== 'stopped') return
        off()
        resolve(settle(link.connect()))
      })
    })
    await link.disconnect()
    expect(await reconnecting).toMatchObject({ ok: true })
    expect(link.state).toBe('connected')
  })

  it('disconnect() then connect() from a control handler: the link ends connected, in call order', async () => {
    const sim = await world().sim()
    let done!: (v: unknown) => void
    const result = new Promise((resolve) => (done = resolve))
    const link = world().link(sim, {
      onControl: async () => {
        void link.disconnect()
        done(await settle(link.connect()))
      },
    })
    await link.connect()
    sim.control('agent-1', { mode: 'stop', correlation_id: 'x' })
    expect(await result).toMatchObject({ ok: true })
    expect(link.state).toBe('connected')
    expect(sim.accepted('agent-1')).toHaveLength(2)
  })

  it('a handler that never settles holds at most control.maxQueued signals: each one past it is an ignored report (overflow) and a warning; the queued ones follow in order once it settles', async () => {
    const sim = await world().sim()
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const handled: string[] = []
    const waiters: Array<{ count: number; resolve: () => void }> = []
    const handledCount = (count: number) => new Promise<void>((resolve) => waiters.push({ count, resolve }))
    const warnings: string[] = []
    const link = world().link(sim, {
      policy: { control: { maxQueued: 3 } },
      logger: { warn: (...line) => void warnings.push(String(line.at(-1))) },
      onControl: async (s) => {
        if (s.correlationId === 'c0') await gate
        handled.push(s.correlationId!)
        for (const w of waiters) if (handled.length === w.count) w.resolve()
      },
    })
    await link.connect()
    const ignored: string[] = []
    link.on('ignored', (e) => void ignored.push(e.detail))
    for (let i = 0; i < 10; i++) sim.control('agent-1', { mode: 'interrupt', correlation_id: `c${i}` })
    await waitForChart(chartOf(link), (s) => s.context.signalSeq >= 10, 4000)
    expect(ignored).toHaveLength(6)
    expect(ignored[0]).toMatch(/^control signal #5 \(correlation "c4"\) dropped: control.maxQueued signals, or control.maxQueuedBytes of frames, were already waiting/)
    expect(warnings.filter((w) => w.includes('queue behind the control handler is full'))).toHaveLength(6)
    const four = handledCount(4)
    release()
    await four
    expect(handled).toEqual(['c0', 'c1', 'c2', 'c3'])
    // A resend of a dropped one is delivered.
    const five = handledCount(5)
    sim.control('agent-1', { mode: 'interrupt', correlation_id: 'c9' })
    await five
    expect(handled.at(-1)).toBe('c9')
  })

  it('a server sending large signals to a handler that never settles: the ones waiting stay within control.maxQueuedBytes, each past it an ignored report (overflow)', async () => {
    const sim = await world().sim()
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const handled: string[] = []
    const link = world().link(sim, {
      policy: { control: { maxQueuedBytes: 500_000 } },
      onControl: async (s) => {
        if (s.correlationId === 'c0') await gate
        handled.push(s.correlationId!)
      },
    })
    await link.connect()
    const ignored: string[] = []
    link.on('ignored', (e) => void ignored.push(e.detail))
    // Each about 200 KB (an extra field the platform never sends): the first goes to the handler,
    // two wait (about 400 KB), every later one would take them past 500,000.
    for (let i = 0; i < 8; i++) sim.control('agent-1', { mode: 'interrupt', correlation_id: `c${i}`, padding: 'x'.repeat(200_000) })
    // The eighth signal's report comes from the control chart, after the connection chart counted it.
    await until(() => ignored.length >= 5, 4000, 'five overflow reports')
    expect(chartOf(link).getSnapshot().context.signalSeq).toBe(8)
    expect(ignored).toHaveLength(5)
    expect(ignored[0]).toMatch(/^control signal #4 \(correlation "c3"\) dropped: control.maxQueued signals, or control.maxQueuedBytes of frames, were already waiting/)
    const queue = chartsOf(link).control!.getSnapshot().context.queue
    expect(queue.map((q) => q.signal.correlationId)).toEqual(['c0', 'c1', 'c2'])
    // Counted as the frames were read: the padding and the frame around it.
    for (const q of queue) expect(q.bytes).toBeGreaterThan(200_000)
    release()
    await waitForChart(chartsOf(link).control!, (s) => s.matches('idle') && s.context.queue.length === 0, 4000)
    expect(handled).toEqual(['c0', 'c1', 'c2'])
  })

  it('a server sending megabyte correlation ids: each delivered once, a resend still a duplicate, and the link remembers a short key of each, not the id', async () => {
    const sim = await world().sim()
    const handled: number[] = []
    const link = world().link(sim, { onControl: (s) => void handled.push(s.correlationId!.length) })
    await link.connect()
    const ignored: string[] = []
    link.on('ignored', (e) => void ignored.push(e.detail))
    const ids = [1, 2, 3].map((n) => `${String(n).repeat(1_000_000)}`)
    for (const id of [...ids, ids[0]!]) sim.control('agent-1', { mode: 'interrupt', correlation_id: id })
    await waitForChart(chartOf(link), (s) => s.context.signalSeq >= 4, 4000)
    await waitForChart(chartsOf(link).control!, (s) => s.matches('idle') && s.context.queue.length === 0, 4000)
    expect(handled).toEqual([1_000_000, 1_000_000, 1_000_000])
    expect(ignored).toHaveLength(1)
    expect(ignored[0]).toMatch(/^duplicate correlation_id .*: delivered once already$/)
    const { seen } = chartsOf(link).control!.getSnapshot().context
    expect(seen).toHaveLength(3)
    expect(Math.max(...seen.map((key) => key.length))).toBeLessThan(128)
  })

  it('a signal dropped by disconnect() is an ignored report (stopped) and no warning, and resent in the next session it is delivered', async () => {
    const sim = await world().sim()
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const handled: string[] = []
    let resent!: () => void
    const resentHandled = new Promise<void>((resolve) => (resent = resolve))
    const warnings: string[] = []
    const link = world().link(sim, {
      logger: { warn: (...line) => void warnings.push(line.map(String).join(' ')) },
      onControl: async (s, delivery) => {
        if (s.correlationId === 'slow') await gate
        handled.push(`${s.correlationId}@${delivery.epoch}`)
        if (s.correlationId === 'A' && delivery.epoch === 2) resent()
      },
    })
    await link.connect()
    sim.control('agent-1', { mode: 'stop', correlation_id: 'slow' })
    sim.control('agent-1', { mode: 'stop', correlation_id: 'A' })
    await waitForChart(chartOf(link), (s) => s.context.signalSeq >= 2, 4000)
    const ignored: string[] = []
    link.on('ignored', (e) => void ignored.push(e.detail))
    await link.disconnect()
    // The drop is reported, and it is not the overflow's warning: a stop is no reason to alert.
    expect(ignored).toEqual(['control signal #2 (correlation "A") dropped: the host stopped the session before its turn'])
    expect(warnings.filter((w) => w.includes('control'))).toEqual([])
    release()
    await link.connect()
    sim.control('agent-1', { mode: 'stop', correlation_id: 'A' })
    await resentHandled
    expect(handled).toEqual(['slow@1', 'A@2'])
  })

  it('disconnect() after a supersede drops the signals still waiting; none arrives after it resolves', async () => {
    const sim = await world().sim()
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const handled: string[] = []
    const link = world().link(sim, {
      onControl: async (s) => {
        if (s.correlationId === 's1') await gate
        handled.push(s.correlationId!)
      },
    })
    await link.connect()
    for (const id of ['s1', 's2', 's3']) sim.control('agent-1', { mode: 'stop', correlation_id: id })
    await waitForChart(chartOf(link), (s) => s.context.signalSeq >= 3, 4000)
    const ended = untilState(link, 'terminated')
    sim.supersede('agent-1')
    await ended
    const dropped: string[] = []
    link.on('ignored', (e) => e.detail.includes('dropped') && dropped.push(e.detail))
    await link.disconnect()
    // Dropped by the stop itself, not by the next session's reset.
    expect(dropped).toHaveLength(2)
    expect(link.state).toBe('terminated')
    // Nothing waits any more: a repeated disconnect() sends the chart nothing (no snapshot follows).
    let snapshots = 0
    const watching = link.actor.subscribe(() => void snapshots++)
    await link.disconnect()
    watching.unsubscribe()
    expect(snapshots).toBe(0)
    release()
    await link.connect() // a new session; s1's handler finished meanwhile
    expect(handled).toEqual(['s1'])
  })

  it('a handler stuck in an old session is abandoned (its signal aborts) and the new session gets its signals', async () => {
    const sim = await world().sim()
    const aborted: boolean[] = []
    let gotNew!: () => void
    const newDelivered = new Promise<void>((resolve) => (gotNew = resolve))
    const link = world().link(sim, {
      onControl: async (s, delivery) => {
        if (s.correlationId === 'stuck') {
          await new Promise<void>((resolve) => delivery.signal.addEventListener('abort', () => resolve()))
          aborted.push(delivery.signal.aborted)
          return
        }
        gotNew()
      },
    })
    await link.connect()
    sim.control('agent-1', { mode: 'stop', correlation_id: 'stuck' })
    await next(link, 'control')
    await link.disconnect()
    await link.connect()
    sim.control('agent-1', { mode: 'play', correlation_id: 'fresh' })
    await newDelivered
    expect(aborted).toEqual([true])
  })

  it('link.events() sees events from the moment it is called, return() ends it, and untilSessionEnds finishes it', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    const iterator = link.events({ untilSessionEnds: true })
    await link.connect()
    const first = await iterator.next()
    expect(first.value).toMatchObject({ type: 'state', state: 'connecting' })
    const seen: string[] = []
    const consumed = (async () => {
      for await (const e of iterator) seen.push(e.type === 'disconnected' ? `disconnected:${e.outcome}` : e.type)
    })()
    await link.disconnect()
    await consumed
    expect(seen).toContain('connected')
    expect(seen.at(-1)).toBe('disconnected:stopped')
    const other = link.events()
    const pending = other.next()
    await other.return!()
    expect(await pending).toEqual({ value: undefined, done: true })
  })
})

describe('strict inputs (second review)', () => {
  it('push refuses a bad timeoutMs and reserved event names before sending anything', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await next(link, 'channel', { filter: (e) => e.status === 'joined' })
    for (const timeoutMs of [Infinity, 2 ** 31, Number.NaN, -1, 0, 1.5]) {
      await expect(room.push('x', {}, { timeoutMs })).rejects.toMatchObject({ code: 'INVALID_OPTIONS' })
    }
    for (const event of ['phx_join', 'phx_leave', 'phx_reply', 'chan_reply_3', '']) {
      await expect(room.push(event, {})).rejects.toMatchObject({ code: 'PUSH_INVALID' })
    }
    expect(sim.live('agent-1')[0]!.frames.filter((f) => f.dir === 'in' && f.frame?.topic === 'room:1' && f.frame.event !== 'phx_join')).toEqual([])
    expect(room.status).toBe('joined')
  })

  it('the largest allowed join timeout does not overflow into an immediate timeout', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { policy: { connection: { joinTimeoutMs: 2 ** 31 - 1 }, channel: { joinTimeoutMs: 2 ** 31 - 1 } } })
    await link.connect()
    const room = link.channel('room:1')
    const joined = await next(link, 'channel', { filter: (e) => e.status === 'joined' })
    expect(joined.topic).toBe('room:1')
    // Overflowing into 1 ms would have timed the join out before its reply: no error came.
    expect(room.status).toBe('joined')
    expect(world().captured.get(link)!.events.filter((e) => e.type === 'channel' && e.status !== 'joined' && e.status !== 'joining')).toEqual([])
  })

  it('join params that cannot be encoded fail typed at channel() or at each join', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    expect(() => link.channel('room:1', { token: 10n })).toThrow(/params must be JSON/)
    const cyclic: Record<string, unknown> = {}
    cyclic.self = cyclic
    await link.connect()
    link.channel('room:2', () => cyclic)
    const errored = await next(link, 'channel', { filter: (e) => e.status === 'errored' })
    expect(errored.reason).toMatchObject({ kind: 'other', detail: expect.stringContaining('cannot be encoded') })
  })

  it('reserved topics and URLs with a query or fragment are refused at configuration', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    expect(() => link.channel('phoenix')).toThrow(/heartbeat topic/)
    expect(() => link.channel('agent_control:agent-1')).toThrow('agent_control:agent-1 is the control channel; the link joins it itself')
    expect(() => link.channel('room:x', null as never)).toThrow('channel room:x: params must be a plain object or a function returning one, got null')
    expect(() => link.channel('room:y', ['a'] as never)).toThrow('channel room:y: params must be a plain object or a function returning one, got an array')
    await expect(link.channel('room:z').push('e', {}, { timeoutMs: 0 })).rejects.toThrow('push timeoutMs must be a whole number of milliseconds in [1, 2^31-1], got 0')
    expect(() => world().link(sim, { url: `${sim.url}?x=1` })).toThrow(/query string or a fragment/)
    expect(() => world().link(sim, { url: `${sim.url}#f` })).toThrow(/query string or a fragment/)
    // An empty `?` or `#` parses to nothing but would still reach phoenix.js (404, or a URL ws refuses).
    expect(() => world().link(sim, { url: `${sim.url}?` })).toThrow(/query string or a fragment/)
    expect(() => world().link(sim, { url: `${sim.url}#` })).toThrow(/query string or a fragment/)
  })

  it('options that could never connect are refused at configuration, not retried forever', async () => {
    const sim = await world().sim()
    // A key an HTTP header cannot carry, sent as x-api-key; as a param it is percent-encoded and works.
    // A space or tab at either end is no part of a header's value (RFC 9110 section 5.5): Bandit keeps
    // a trailing one and refuses the key 403, Cowboy drops it and accepts: refused here, whatever the server.
    for (const apiKey of ['key\r\nx-evil: 1', 'ключ-1', 'key-1234 ', '\tkey-1234', ' key-1234']) {
      expect(() => world().link(sim, { apiKey, apiKeyIn: 'header' }), JSON.stringify(apiKey)).toThrow(/HTTP header cannot carry.*trim it, or pass apiKeyIn: 'param'/)
    }
    // Inside a key, a space or a tab is a header's to carry.
    for (const apiKey of ['key 1234', 'key\t1234', 'k']) expect(() => world().link(sim, { apiKey, apiKeyIn: 'header' }), JSON.stringify(apiKey)).not.toThrow()
    // An agent id whose control join frame cannot fit the frame limit (which binds sent frames): the join would never be sent.
    expect(() => world().link(sim, { agentId: 'a'.repeat(1000), policy: { transport: { maxFrameBytes: 1024 } } })).toThrow(
      /^agentId is too long: the control channel's join frame would be 10\d\d bytes, over transport\.maxFrameBytes \(1024\); shorten the id or raise the limit to the server's own$/,
    )
    expect(() => world().link(sim, { agentId: 'a'.repeat(900), policy: { transport: { maxFrameBytes: 1024 } } })).not.toThrow()
    for (const [policy, message] of [
      [{ connection: { connectTimeoutMs: 0 } }, /connection.connectTimeoutMs must be at least 1/],
      [{ connection: { joinTimeoutMs: 0 } }, /connection.joinTimeoutMs must be at least 1/],
      [{ channel: { joinTimeoutMs: 0 } }, /channel.joinTimeoutMs must be at least 1/],
      [{ transport: { maxFrameBytes: 0 } }, /transport.maxFrameBytes must be at least 1024/],
      [{ transport: { maxFrameBytes: 1.5 } }, /maxFrameBytes must be a whole number of bytes/],
      [{ transport: { pushTimeoutMs: 0 } }, /transport.pushTimeoutMs must be at least 1/],
      // A heartbeat reply must come within one interval: 1-2 ms loop through timed-out reconnects even on loopback.
      [{ transport: { heartbeatIntervalMs: 9 } }, /transport.heartbeatIntervalMs must be at least 10, got 9/],
      [{ reconnect: { initialDelayMs: 1_000, maxDelayMs: 10 } }, /reconnect.maxDelayMs \(10\) must be at least reconnect.initialDelayMs \(1000\)/],
      [{ transport: { refusalBodyTimeoutMs: 0 } }, /transport.refusalBodyTimeoutMs must be at least 1/],
      [{ transport: { credentialsTimeoutMs: 0 } }, /transport.credentialsTimeoutMs must be at least 1/],
      [{ reconnect: { onRapidLimit: 'stop' } }, /reconnect.onRapidLimit must be 'suspend' or 'give-up'/],
      [{ control: { maxQueued: -1 } }, /control.maxQueued must be a whole number >= 0, got -1/],
      [{ control: { maxQueuedBytes: 0.5 } }, /control.maxQueuedBytes must be a whole number >= 0, got 0.5/],
      [{ control: { dedupeWindow: 2.5 } }, /control.dedupeWindow must be a whole number >= 0, got 2.5/],
      [{ channel: { rejoinStableAfterMs: -1 } }, /channel.rejoinStableAfterMs must be a whole number of milliseconds/],
      [{ reconnect: { suspendInitialDelayMs: 600_000 } }, /suspendMaxDelayMs \(300000\) must be at least reconnect.suspendInitialDelayMs/],
    ] as const) {
      expect(() => world().link(sim, { policy: policy as never }), JSON.stringify(policy)).toThrow(message)
    }
    // Zero where it means something: no leave wait, no conflict retries.
    const link = world().link(sim, { policy: { connection: { leaveTimeoutMs: 0, conflictRetryWindowMs: 0 } } })
    await link.connect()
    expect(link.state).toBe('connected')
  })

  it('dedupeWindow 0 turns deduplication off and remembers nothing', async () => {
    const sim = await world().sim()
    const seen: string[] = []
    let twice!: () => void
    const both = new Promise<void>((resolve) => (twice = resolve))
    const link = world().link(sim, {
      policy: { control: { dedupeWindow: 0 } },
      onControl: (s) => {
        seen.push(s.correlationId!)
        if (seen.length === 2) twice()
      },
    })
    await link.connect()
    sim.control('agent-1', { mode: 'stop', correlation_id: 'same' })
    sim.control('agent-1', { mode: 'stop', correlation_id: 'same' })
    await both
    expect(chartsOf(link).control!.getSnapshot().context.seen).toEqual([])
  })

  it('a late frame on a topic the link left is reported once the leave tail has passed', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await next(link, 'channel', { filter: (e) => e.status === 'joined' })
    const conn = sim.live('agent-1')[0]!
    const joinRef = conn.channels.get('room:1')!.joinRef
    await room.leave()
    await sim.waitFor(() => conn.frames.some((f) => f.dir === 'out' && f.frame?.event === 'phx_close' && f.frame.topic === 'room:1'))
    const ignored = next(link, 'ignored', { filter: (e) => e.detail.includes('room:1') })
    conn.sendRaw(JSON.stringify([joinRef, joinRef, 'room:1', 'phx_close', {}]))
    expect((await ignored).detail).toMatch(/has not joined/)
  })

  it('the simulator rejects waitFor when the check throws, and refuses an idle timeout that would overflow', async () => {
    const sim = await world().sim()
    await expect(sim.waitFor(() => {
      throw new Error('bad check')
    })).rejects.toThrow('bad check')
    const later = expect(
      sim.waitFor(() => {
        if (sim.connections.length > 0) throw new Error('bad later')
        return false
      }),
    ).rejects.toThrow('bad later')
    const link = world().link(sim)
    await link.connect()
    await later
    await expect(world().sim({ idleTimeoutMs: 1e11 })).rejects.toThrow(/idleTimeoutMs/)
  })
})

describe('a hostile server: replies of another status, a phx_error that mimics the client-side marker', () => {
  /** Sends the reply to the newest phx_join of `topic` on `c`, with `status`. */
  const replyToJoin = (topic: string, status: string) => (c: { frames: Array<{ dir: string; frame: { event: string; topic: string; join_ref: string | number | boolean | null; ref: string | number | boolean | null } | null }>; sendRaw(text: string): void }) => {
    const join = framesIn(c, 'phx_join', topic).at(-1)!
    c.sendRaw(JSON.stringify([join.join_ref, join.join_ref, topic, 'phx_reply', { status, response: {} }]))
  }

  it('a push answered with a status other than ok or error (accepted, timeout) rejects PUSH_REPLY_STATUS with the status and response, not after its timeout', async () => {
    const sim = await world().sim()
    sim.onPush(({ event }) => (event === 'a' ? { status: 'accepted', response: { id: 7 } } : event === 't' ? { status: 'timeout', response: {} } : { status: 'error', response: { no: 1 } }))
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await room.joined()
    // A timeout far beyond the test's own: a push left unsettled fails the test.
    const accepted = await room.push('a', {}, { timeoutMs: 600_000 }).catch((e: unknown) => e)
    expect(accepted).toMatchObject({ name: 'PushError', code: 'PUSH_REPLY_STATUS', status: 'accepted', response: { id: 7 }, topic: 'room:1', event: 'a' })
    expect((accepted as Error).message).toMatch(/PUSH_REPLY_STATUS \(the server replied with status "accepted", neither ok nor error\)/)
    // A server's "timeout" is its reply, not the push's own timeout.
    expect(await room.push('t', {}, { timeoutMs: 600_000 }).catch((e: unknown) => e)).toMatchObject({ code: 'PUSH_REPLY_STATUS', status: 'timeout' })
    expect(await room.push('e', {}, { timeoutMs: 600_000 }).catch((e: unknown) => e)).toMatchObject({ code: 'PUSH_REJECTED', status: 'error', response: { no: 1 } })
    sim.onPush(() => ({ status: 'ok', response: { fine: true } }))
    expect(await room.push('b')).toEqual({ fine: true })
    expect(link.state).toBe('connected')
  })

  it("a join answered with another status is reported and runs out its join timeout (phoenix.js never sees it: its timeout hook would push a phx_leave with a timer of its own); the next attempt joins", async () => {
    const sim = await world().sim()
    const control = controlTopic('agent-1')
    sim.onJoin(control, { reply: 'none', after: replyToJoin(control, 'timeout') }, 1)
    sim.onJoin('room:1', { reply: 'none', after: replyToJoin('room:1', 'OK') }, 1)
    const link = world().link(sim, { policy: { connection: { joinTimeoutMs: 300 }, channel: { joinTimeoutMs: 300, rejoinInitialDelayMs: 10, rejoinMaxDelayMs: 20 }, reconnect: { initialDelayMs: 1, maxDelayMs: 5 } } })
    const ignored: string[] = []
    link.on('ignored', (e) => ignored.push(e.detail))
    const lost = next(link, 'disconnected')
    const connected = link.connect()
    expect((await lost).reason).toMatchObject({ kind: 'timed-out', phase: 'join' })
    await connected
    expect(ignored[0]).toMatch(new RegExp(`phx_reply with status "timeout" to the join of ${control}: a join is answered ok or error`))
    const first = sim.connections[0]!
    // phoenix.js's own timeout hook would have left the topic on the wire at once.
    expect(framesIn(first, 'phx_leave', control)).toHaveLength(0)
    const room = link.channel('room:1')
    await room.joined({ signal: AbortSignal.timeout(4000) })
    expect(ignored.some((detail) => /phx_reply with status "OK" to the join of room:1/.test(detail))).toBe(true)
    expect(framesIn(sim.live('agent-1')[0]!, 'phx_join', 'room:1')).toHaveLength(2)
    // disconnect() leaves no phoenix.js timer behind (the run's leak check fails the test otherwise).
    await link.disconnect()
  })

  it('a phx_error the server sends on an app channel is a channel crash whatever its payload, even {source: "transport"}: the channel rejoins and pushes reach the server again', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { policy: { channel: { rejoinInitialDelayMs: 10, rejoinMaxDelayMs: 20 } } })
    await link.connect()
    const room = link.channel('room:1')
    await room.joined()
    const conn = sim.live('agent-1')[0]!
    const joinRef = conn.channels.get('room:1')!.joinRef
    const errored = new Promise<void>((resolve) => room.onStatus((status) => status === 'errored' && resolve()))
    conn.sendRaw(JSON.stringify([joinRef, joinRef, 'room:1', 'phx_error', { source: 'transport' }]))
    await errored
    await sim.waitFor(() => framesIn(conn, 'phx_join', 'room:1').length === 2, { what: 'the rejoin' })
    await room.joined({ signal: AbortSignal.timeout(4000) })
    expect(await room.push('after', {}, { timeoutMs: 2000 })).toEqual({})
    expect(framesIn(conn, 'after', 'room:1')).toHaveLength(1)
  })
})

describe('strict inputs (third review)', () => {
  const broken = 'key-1\ud800' // half of a character, as a slice() through an emoji leaves

  it('options holding half of a character are refused at configuration; a function that answers one fails that attempt typed, and the next answer connects', async () => {
    const sim = await world().sim()
    for (const [options, message] of [
      [{ agentId: 'agent-1\ud800' }, /^agentId cannot be sent: it holds a lone UTF-16 surrogate .*cannot go in a URL$/],
      [{ apiKey: broken, apiKeyIn: 'param' }, /^apiKey cannot be sent: .*cannot go in a URL or an HTTP header$/],
      [{ params: { tenant: '\udc00x' } }, /^params.tenant: a params value cannot be sent: .*cannot go in a URL$/],
      [{ params: { 'tenant\ud800': 'x' } }, /^params: a params key cannot be sent: .*cannot go in a URL$/],
    ] as const) {
      expect(() => world().link(sim, options as never), JSON.stringify(options)).toThrow(expect.objectContaining({ code: 'INVALID_OPTIONS', message: expect.stringMatching(message) }))
    }
    // The key goes in the x-api-key header (Node's default): half a character is still named as
    // such, not as a header problem that apiKeyIn: 'param' would solve.
    const keys = [broken, 'key-1 ', 'key-1']
    const params = [{ tenant: '\ud800' }, { ['\udfff']: 't' }, { tenant: 't' }]
    const link = world().link(sim, { apiKey: () => keys.shift() ?? 'key-1', params: () => (keys.length === 0 ? params.shift() ?? {} : {}) })
    const reasons: string[] = []
    link.on('disconnected', ({ reason }) => void reasons.push(`${reason.kind}:${reason.retryable}:${(reason as { detail?: string }).detail ?? ''}`))
    await link.connect()
    expect(reasons).toEqual([
      expect.stringMatching(/^other:true:.*the API key cannot be sent: it holds a lone UTF-16 surrogate .*cannot go in a URL or an HTTP header$/),
      // A function's key with a space at its end: no server reads it alike (Bandit keeps the space, Cowboy drops it).
      expect.stringMatching(/^other:true:.*the API key has characters an HTTP header cannot carry \(.*a space or tab at its start or end\); trim it, or pass apiKeyIn: 'param'$/),
      expect.stringMatching(/^other:true:.*params value of "tenant" cannot be sent: .*cannot go in a URL$/),
      expect.stringMatching(/^other:true:.*params key cannot be sent: .*cannot go in a URL$/),
    ])
    // Nothing went out before a usable answer: one upgrade, accepted.
    expect(sim.upgrades.map((u) => u.status)).toEqual([101])
  })

  it('a policy concern that is not an object, and a floor range that is not a [low, high] pair, are refused naming the field', () => {
    const options = { url: 'ws://127.0.0.1:9/socket', agentId: 'a', apiKey: 'k' }
    for (const [policy, message] of [
      [{ reconnect: 5 }, 'policy.reconnect must be an object of reconnect policy fields, got a number'],
      [{ reconnect: true }, 'policy.reconnect must be an object of reconnect policy fields, got a boolean'],
      [{ reconnect: 5n }, 'policy.reconnect must be an object of reconnect policy fields, got a bigint'],
      [{ channel: null }, 'policy.channel must be an object of channel policy fields, got null'],
      [{ transport: [] }, 'policy.transport must be an object of transport policy fields, got an array'],
      [{ reconnect: { goingAwayFloorMs: 5 } }, 'reconnect.goingAwayFloorMs must be a [low, high] pair of milliseconds, got 5'],
      [{ reconnect: { serviceRestartFloorMs: [1, 2, 3] } }, 'reconnect.serviceRestartFloorMs must be a [low, high] pair of milliseconds, got an array of 3'],
      [{ reconnect: { tryAgainLaterFloorMs: 5n } }, 'reconnect.tryAgainLaterFloorMs must be a [low, high] pair of milliseconds, got 5n'],
    ] as const) {
      expect(() => createLink({ ...options, policy: policy as never }), String(Object.keys(policy))).toThrow(expect.objectContaining({ code: 'INVALID_OPTIONS', message: expect.stringContaining(message) }))
    }
    // A concern left undefined is a concern not given.
    expect(createLink({ ...options, policy: { reconnect: undefined } }).policy).toBe(createLink(options).policy)
  })

  it('whenState, on, once, off, onControl and the channel listeners refuse what is not a name or a function, registering nothing; the handler in place keeps its signals', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    for (const state of [42, null, undefined, { state: 'connected' }]) {
      await expect(link.whenState(state as never), String(state)).rejects.toMatchObject({ code: 'INVALID_OPTIONS', message: expect.stringMatching(/^link\.whenState: name a link state or an array of them/) })
    }
    await expect(link.whenState([7] as never)).rejects.toThrow('link.whenState: a number is not a link state')
    await expect(link.whenState([{}] as never)).rejects.toThrow('link.whenState: an object is not a link state')
    const listeners = () => (link as unknown as { emitter: { listenerCount(): number } }).emitter.listenerCount()
    const before = listeners()
    const notEvent = /^link\.(on|once|off): "conected" is not a link event; use one of state, connected, reconnected, disconnected, control, channel, ignored$/
    expect(() => link.on('conected' as never, () => {})).toThrow(notEvent)
    expect(() => link.once('conected' as never, () => {})).toThrow(notEvent)
    await expect(link.once('conected' as never)).rejects.toThrow(notEvent)
    expect(() => link.off('conected' as never, () => {})).toThrow(notEvent)
    expect(() => link.on('state', 5 as never)).toThrow('link.on: the listener must be a function, got number')
    expect(() => link.onAny(null as never)).toThrow('link.onAny: the listener must be a function, got null')
    await expect(link.once('state', 5 as never)).rejects.toThrow('link.once: options must be an object, got number')
    expect(listeners()).toBe(before)

    const handled: string[] = []
    link.onControl((signal) => void handled.push(signal.correlationId ?? ''))
    expect(() => link.onControl(5 as never)).toThrow('link.onControl: the handler must be a function, got number')
    await link.connect()
    const room = link.channel('room:1')
    expect(() => room.on('news', 'handler' as never)).toThrow('channel room:1: the handler of "news" must be a function, got string')
    expect(() => room.on('', () => {})).toThrow('channel room:1: on() needs an event name (a non-empty string), got an empty string')
    expect(() => room.on(5 as never, () => {})).toThrow('channel room:1: on() needs an event name (a non-empty string), got number')
    // phoenix's own events reach no handler (the adapter gives them to phoenix.js): a listener of one would never run.
    for (const reserved of ['phx_error', 'phx_close', 'phx_reply', 'chan_reply_3']) {
      expect(() => room.on(reserved, () => {}), reserved).toThrow(new RegExp(`^channel room:1: on\\(${JSON.stringify(reserved)}\\) would never be called: phoenix's own .* listen with onStatus\\(\\)`))
    }
    expect(() => room.onAny(undefined as never)).toThrow('channel room:1: the onAny handler must be a function, got undefined')
    expect(() => room.onStatus([] as never)).toThrow('channel room:1: the onStatus listener must be a function, got an array')
    const delivered = next(link, 'control')
    sim.control('agent-1', { mode: 'interrupt', correlation_id: 'c1' })
    await delivered
    await vi.waitFor(() => expect(handled).toEqual(['c1']), { timeout: 2000 })
    // null clears the handler, as undefined does.
    link.onControl(null)
    const unhandled = next(link, 'control')
    sim.control('agent-1', { mode: 'interrupt', correlation_id: 'c2' })
    await unhandled
    expect(handled).toEqual(['c1'])
  })

  it('null options are no options (as fetch reads them); anything else that is not an object is a ConfigurationError naming the call', async () => {
    const sim = await world().sim()
    sim.onPush(({ event }) => (event === 'ping' ? { status: 'ok', response: { pong: true } } : null))
    const link = world().link(sim)
    await expect(link.connect(5 as never)).rejects.toThrow('link.connect: options must be an object, got number')
    await expect(link.runForever('x' as never)).rejects.toThrow('link.runForever: options must be an object, got string')
    expect(() => link.events(7 as never)).toThrow('link.events: options must be an object, got number')
    // A signal passed in the place of its options would be a wait with no signal, never ending.
    await expect(link.whenState('connected', AbortSignal.abort() as never)).rejects.toThrow('link.whenState: pass the AbortSignal as { signal }, not as the options object')
    await expect(link.connect(new AbortController().signal as never)).rejects.toThrow('link.connect: pass the AbortSignal as { signal }, not as the options object')
    expect(link.state).toBe('idle')
    await link.connect(null)
    expect(await link.whenState('connected', null)).toBe('connected')
    const room = link.channel('room:1')
    await room.joined(null)
    await expect(room.joined(1 as never)).rejects.toThrow('channel.joined: options must be an object, got number')
    expect(await room.push('ping', {}, null)).toEqual({ pong: true })
    await expect(room.push('ping', {}, 3 as never)).rejects.toThrow('channel.push: options must be an object, got number')
    const events = link.events(null)
    await events.return!()
    const run = link.runSignal(undefined, null)
    expect(run.aborted).toBe(false)
    link.endRun(run)
    expect(() => link.runSignal('', {})).toThrow('link.runSignal: runId must be a non-empty string, got an empty string')
    expect(() => link.runSignal(5 as never)).toThrow('link.runSignal: runId must be a non-empty string, got number')
    expect(() => link.runSignal(null as never)).toThrow(expect.objectContaining({ code: 'INVALID_OPTIONS', message: 'link.runSignal: runId must be a non-empty string, got null' }))
    expect(() => link.runSignal('r', { onAbort: 'stop' as never })).toThrow('link.runSignal: options.onAbort must be a function, got string')
    expect(() => link.runSignal('r', 9 as never)).toThrow('link.runSignal: options must be an object, got number')
    expect(link.runs.inFlight('agent-1')).toEqual([])
  })

  it('join params whose then() throws, or whose then getter throws, fail that join attempt typed and leave no timer; the next attempt joins', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { policy: { channel: { rejoinInitialDelayMs: 10, rejoinMaxDelayMs: 20 } } })
    await link.connect()
    const answers: unknown[] = [
      {
        then() {
          throw new Error('then threw')
        },
      },
      {
        get then() {
          throw new Error('getter threw')
        },
      },
      {},
    ]
    const room = link.channel('room:1', (() => answers.shift()) as never)
    const reasons: string[] = []
    room.onStatus((status, reason) => status === 'errored' && reasons.push(`${reason!.kind}:${(reason as { detail?: string }).detail ?? ''}`))
    await room.joined({ signal: AbortSignal.timeout(4000) })
    expect(reasons).toEqual([
      expect.stringMatching(/^other:.*the function rejected: then threw/),
      expect.stringMatching(/^other:.*reading the function's answer threw: getter threw/),
    ])
    expect(world().captured.get(link)!.lines.filter((l) => l.level === 'error')).toEqual([])
    // The leak check after this test fails on a credentialsTimeoutMs timer (5 s) left armed.
    await link.disconnect()
  })
})

/** A proxy that throws on every operation. */
function revokedProxy(): object {
  const { proxy, revoke } = Proxy.revocable({}, {})
  revoke()
  return proxy
}

describe('strict inputs (fourth review)', () => {
  const invalid = (message: RegExp) => expect.objectContaining({ name: 'ConfigurationError', code: 'INVALID_OPTIONS', message: expect.stringMatching(message) })
  const boom = () => {
    throw new Error('boom')
  }

  it('a signal-like object without removeEventListener is refused at the call; one whose removeEventListener or addEventListener throws leaves the wait to end as usual; disconnect() resolves', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await room.joined()
    const noRemove = { aborted: false, addEventListener() {} } as unknown as AbortSignal
    await expect(room.push('x', {}, { signal: noRemove, timeoutMs: 500 })).rejects.toEqual(invalid(/^channel\.push: options\.signal must be an AbortSignal/))
    await expect(link.whenState('connected', { signal: noRemove })).rejects.toEqual(invalid(/^link\.whenState: options\.signal must be an AbortSignal/))
    let removed = 0
    const removeThrows = { aborted: false, addEventListener() {}, removeEventListener: () => (removed++, boom()) } as unknown as AbortSignal
    expect(await room.push('y', { n: 1 }, { signal: removeThrows, timeoutMs: 2_000 })).toEqual({})
    expect(removed).toBe(1)
    // It cannot abort the wait; the push goes and is answered as with no signal.
    const addThrows = { aborted: false, addEventListener: boom, removeEventListener() {} } as unknown as AbortSignal
    expect(await room.push('z', { n: 2 }, { signal: addThrows, timeoutMs: 2_000 })).toEqual({})
    // The channel still works, and the stop completes.
    expect(await room.push('after', {})).toEqual({})
    await link.disconnect()
    expect(link.state).toBe('stopped')
  })

  it('a policy or a call option whose read throws (a getter, a Proxy) is a ConfigurationError saying so, not a raw throw', async () => {
    const sim = await world().sim()
    const throwingConcern = { get reconnect(): object { return boom() } }
    const throwingField = { reconnect: { get initialDelayMs(): number { return boom() } } }
    const proxy = new Proxy({}, { ownKeys: boom })
    for (const policy of [throwingConcern, throwingField, proxy]) {
      expect(() => createLink({ url: sim.url, agentId: 'agent-1', apiKey: 'key-1', policy } as never)).toThrow(invalid(/^reading (policy|the options) threw: boom$/))
    }
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await room.joined()
    await expect(room.push('x', {}, { get timeoutMs(): number { return boom() } })).rejects.toEqual(invalid(/^channel\.push: reading options\.timeoutMs threw: boom$/))
    await expect(room.joined({ get signal(): AbortSignal { return boom() } })).rejects.toEqual(invalid(/^channel\.joined: reading options\.signal threw: boom$/))
    await expect(link.whenState('connected', new Proxy({}, { ownKeys: boom }) as never)).rejects.toEqual(invalid(/^link\.whenState: reading the options threw: boom$/))
    expect(await room.push('ok', {})).toEqual({})
  })
})

describe("the simulator's TypeScript controls refuse what their HTTP routes refuse", () => {
  it('a join rule of an unknown reply, an error with no response, a response that is no map, an unknown key or a bad times; a control with a misspelt option', async () => {
    const sim = await world().sim()
    const refused: Array<[() => unknown, RegExp]> = [
      [() => sim.onJoin('room:a', { reply: 'eror' } as never), /^onJoin\(\): reply must be 'ok', 'error', 'none' or 'hold', got "eror"$/],
      [() => sim.onJoin('room:a', { reply: 'error' } as never), /^onJoin\(\): an 'error' reply needs a response/],
      [() => sim.onJoin('room:a', { reply: 'error', respons: {} } as never), /^onJoin\(\): unknown outcome key "respons"/],
      [() => sim.onJoin('room:a', { reply: 'ok', response: 'notanobject' } as never), /^onJoin\(\): the response must be a plain object \(a Phoenix map\) or a function giving one, got a string$/],
      [() => sim.onJoin('room:a', { reply: 'none', response: {} } as never), /^onJoin\(\): a 'none' reply sends no response$/],
      [() => sim.onJoin('room:a', { reply: 'ok', after: 'x' } as never), /^onJoin\(\): after must be a function/],
      [() => sim.onJoin('room:a', { reply: 'ok' }, 0), /^onJoin\(\): times must be a whole number >= 1/],
      [() => sim.onJoin('room:a', { reply: 'ok' }, { tims: 1 } as never), /^onJoin\(\): times must be a whole number >= 1/],
      [() => sim.supersede('agent-1', { clse: null } as never), /^supersede\(\): unknown option "clse" \(known: payload, close\)$/],
      [() => sim.control('agent-1', { mode: 'stop' }, { vai: 'broadcast' } as never), /^control\(\): unknown option "vai" \(known: via\)$/],
      [() => sim.control('agent-1', { mode: 'stop' }, { via: 'fastlane' } as never), /^control\(\): via must be 'push' or 'broadcast', got "fastlane"$/],
      [() => sim.abort('all', { rest: true } as never), /^abort\(\): unknown option "rest" \(known: reset\)$/],
      [() => sim.push('all', 'room:a', 'e', {}, { joinref: '1' } as never), /^push\(\): unknown option "joinref" \(known: joinRef\)$/],
      [() => sim.refuseUpgrades({ status: 503, bdy: 'platform' } as never), /^refusal: unknown key "bdy" \(known: status, retryAfter, body, connection, message\)$/],
    ]
    for (const [call, message] of refused) expect(call, String(message)).toThrow(message)
    await expect(sim.stop({ abrt: true } as never)).rejects.toThrow(/^stop\(\): unknown option "abrt" \(known: code, abort\)$/)
    expect(() => sim.answerHeldJoin('room:a', { reply: 'okk' } as never)).toThrow(/^answerHeldJoin\(\): reply must be 'ok', 'error', 'none' or 'hold', got "okk"$/)
    expect(() => sim.answerHeldJoin('room:a', { reply: 'hold' } as never)).toThrow(/^answerHeldJoin\(\): the join is held already/)
    await expect(sim.waitFor(() => true, { timeoutMS: 5 } as never)).rejects.toThrow(/^waitFor\(\): unknown option "timeoutMS" \(known: timeoutMs, what\)$/)
    await expect(sim.settled('agent-1', { timeoutMS: 5 } as never)).rejects.toThrow(/^settled\(\): unknown option "timeoutMS" \(known: timeoutMs\)$/)
    // Nothing was scripted: a link connects and joins as usual.
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:a')
    expect(await room.joined()).toEqual({})
  })
})

describe('a V1 socket (vsn=1.0.0)', () => {
  it('a binary frame is read as JSON text, as the V1 serializer reads every frame: a heartbeat in one is answered; one whose bytes are not UTF-8 closes the socket 1011, as Phoenix does', async () => {
    const sim = await world().sim()
    const open = async () => {
      const ws = new WebSocket(`${sim.url}/websocket?vsn=1.0.0&agent_id=agent-1&api_key=key-1`)
      await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject))
      return ws
    }
    const ws = await open()
    try {
      const reply = new Promise<string>((resolve) => ws.once('message', (data: Buffer) => resolve(data.toString())))
      ws.send(Buffer.from(JSON.stringify({ topic: 'phoenix', event: 'heartbeat', payload: {}, ref: '1' })))
      expect(JSON.parse(await reply)).toEqual({ event: 'phx_reply', payload: { response: {}, status: 'ok' }, ref: '1', topic: 'phoenix' })
      const closed = new Promise<number>((resolve) => ws.once('close', (code: number) => resolve(code)))
      ws.send(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]))
      expect(await closed).toBe(1011)
      expect(sim.accepted('agent-1')[0]!.problems).toEqual(['not-json: a binary frame read as V1 JSON holds bytes that are not UTF-8'])
    } finally {
      ws.terminate()
    }
  })
})
