/**
 * The conventions users of phoenix.js, Ably, Centrifuge and socket.io expect, on the real wire:
 * `once()` as a promise, `off()`, `whenState()`, a channel's join reply and `joined()`,
 * `push(…, { signal })`, `reconnect()` to retry now after a long backoff, frozen defaults and
 * `await using`. Each asserts what the host sees and what the simulator saw.
 */
import { describe, expect, it, vi } from 'vitest'
import WebSocket from 'ws'
import { createLink, DEFAULT_LINK_POLICY, DEFAULT_TRANSPORT_POLICY, isAgentDisconnectedError, PushError } from '../../src/index.js'
import { DEFAULT_RECONNECT_POLICY } from '../../machines/reconnect.js'
import { framesIn, next, untilState, useWorld } from '../support/wire.js'
import { until } from '../support/until.js'

const world = useWorld()

/** A policy whose backoff is long enough that only reconnect() can end it within a test. */
const LONG_BACKOFF = { reconnect: { initialDelayMs: 60_000, maxDelayMs: 60_000 } }

describe('events: once() as a promise, off()', () => {
  it('once(type) resolves with the next event of that type; an aborted one rejects and leaves no listener', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    const connected = link.once('connected')
    await link.connect()
    expect(await connected).toMatchObject({ generation: 1 })
    const controller = new AbortController()
    const never = link.once('disconnected', { signal: controller.signal })
    controller.abort()
    await expect(never).rejects.toMatchObject({ name: 'AbortError' })
    await expect(link.once('state', { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' })
    // The aborted waiter is gone: a loss now reaches only the listener registered after it.
    const lost = link.once('disconnected')
    sim.close({ agent: 'agent-1' }, 1000, 'bye')
    expect((await lost).reason).toMatchObject({ kind: 'closed', closeCode: 1000 })
  })

  it('off(type, listener) removes a listener added with on() or once(); another listener proves the event came', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    const calls: string[] = []
    const onListener = () => calls.push('on')
    const onceListener = () => calls.push('once')
    link.on('connected', onListener)
    link.once('connected', onceListener)
    link.off('connected', onListener)
    link.off('connected', onceListener)
    link.off('connected', () => {}) // not registered: nothing happens
    const seen = link.once('connected')
    await link.connect()
    await seen
    expect(calls).toEqual([])
  })

  it('listeners form a set: one function registered twice is called once per event, and either returned function removes it', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    let calls = 0
    const listener = () => calls++
    const first = link.on('reconnected', listener)
    link.on('reconnected', listener)
    await link.connect()
    const seen = link.once('reconnected')
    sim.close({ agent: 'agent-1' }, 1000)
    await seen
    expect(calls).toBe(1)
    first()
    const again = link.once('reconnected')
    sim.close({ agent: 'agent-1' }, 1000)
    await again
    expect(calls).toBe(1)
  })
})

describe('whenState()', () => {
  it('resolves at once in the state, later when the link gets there, and with whichever of several states comes first', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    expect(await link.whenState('idle')).toBe('idle')
    const connected = link.whenState('connected')
    void link.connect()
    expect(await connected).toBe('connected')
    const either = link.whenState(['reconnecting', 'stopped'])
    sim.close({ agent: 'agent-1' }, 1000, '')
    expect(await either).toBe('reconnecting')
    expect(await link.whenState('connected')).toBe('connected')
    expect(sim.accepted('agent-1')).toHaveLength(2)
  })

  it('rejects AgentDisconnectedError when the session ends first: superseded, or stopped by disconnect()', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { policy: LONG_BACKOFF })
    await link.connect()
    const reconnecting = link.whenState('reconnecting')
    sim.supersede('agent-1')
    const error = await reconnecting.catch((e: unknown) => e)
    expect(isAgentDisconnectedError(error) && error.reason.kind).toBe('superseded')
    // Already terminated when called: it waits (a connect() may follow), and a disconnect() does not end a wait it did not start.
    const other = world().link(sim, { agentId: 'agent-2', apiKey: 'key-2', policy: LONG_BACKOFF })
    await other.connect()
    const back = other.whenState('connected', { signal: AbortSignal.timeout(4000) })
    sim.close({ agent: 'agent-2' }, 1000, '')
    await untilState(other, 'reconnecting')
    const waiting = other.whenState('connected')
    await other.disconnect()
    const stopped = await waiting.catch((e: unknown) => e)
    expect(isAgentDisconnectedError(stopped) && stopped.reason.kind).toBe('graceful')
    expect(await back).toBe('connected') // it was connected when called
  })

  it('a session that ends where the wait started (terminated again, stopped again) still rejects it', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { policy: LONG_BACKOFF })
    await link.connect()
    sim.supersede('agent-1')
    await untilState(link, 'terminated')
    // Each wait's outcome is taken at once: it may settle while the test awaits something else.
    const again = link.whenState('reconnecting').catch((e: unknown) => e)
    await link.connect()
    sim.supersede('agent-1')
    const error = await again
    expect(isAgentDisconnectedError(error) && error.reason.kind).toBe('superseded')
    await link.disconnect()
    sim.refuseUpgrades({ status: 503, retryAfter: '0' })
    const stopped = link.whenState('connected').catch((e: unknown) => e)
    void link.connect().catch(() => {})
    await untilState(link, 'reconnecting')
    // disconnect() resolves once the refused upgrade's TCP connection has closed, after the wait rejected.
    await link.disconnect()
    const graceful = await stopped
    expect(isAgentDisconnectedError(graceful) && graceful.reason.kind).toBe('graceful')
  })

  it('an aborted signal rejects the wait only; a name that is not a state is a ConfigurationError', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    const controller = new AbortController()
    const wait = link.whenState('connected', { signal: controller.signal })
    controller.abort()
    await expect(wait).rejects.toMatchObject({ name: 'AbortError' })
    await expect(link.whenState('online' as never)).rejects.toThrow(/not a link state/)
    await expect(link.whenState([])).rejects.toThrow(/at least one link state/)
    expect(link.state).toBe('idle')
  })
})

describe('channels: the join reply, joined(), off(), push(…, { signal })', () => {
  it('a channel handler added while a message is delivered (an any-handler too) gets the next message; a status listener removed by an earlier one is not called', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await room.joined()
    const seen: string[] = []
    room.onAny((event, payload) => seen.push(`any ${event} ${(payload as { n: number }).n}`))
    room.on('news', (payload) => {
      const n = (payload as { n: number }).n
      seen.push(`news ${n}`)
      if (n === 1) room.onAny((event, p) => seen.push(`late any ${event} ${(p as { n: number }).n}`))
    })
    sim.push({ agent: 'agent-1' }, 'room:1', 'news', { n: 1 })
    sim.push({ agent: 'agent-1' }, 'room:1', 'news', { n: 2 })
    await until(() => seen.length >= 5, 2000, 'five deliveries')
    expect(seen).toEqual(['news 1', 'any news 1', 'news 2', 'any news 2', 'late any news 2'])
    const statuses: string[] = []
    let offSecond = () => {}
    room.onStatus((status) => {
      statuses.push(`first ${status}`)
      offSecond()
    })
    offSecond = room.onStatus((status) => statuses.push(`second ${status}`))
    const third = room.onStatus((status) => statuses.push(`third ${status}`))
    await room.leave()
    await until(() => statuses.length >= 2, 2000, 'the status listeners')
    expect(statuses).toEqual(['first left', 'third left'])
    third()
  })

  it("joinReply and joined() give the server's ok response of the current join, refreshed on the rejoin", async () => {
    const sim = await world().sim()
    let joins = 0
    sim.onJoin('room:1', { reply: 'ok', response: () => ({ welcome: ++joins }) })
    const link = world().link(sim)
    const room = link.channel('room:1')
    expect(room.joinReply).toBeNull()
    const first = room.joined()
    await link.connect()
    expect(await first).toEqual({ welcome: 1 })
    expect(room.joinReply).toEqual({ welcome: 1 })
    expect(await room.joined()).toEqual({ welcome: 1 }) // joined now: at once
    sim.close({ agent: 'agent-1' }, 1000, '')
    await untilState(link, 'reconnecting')
    expect(await room.joined()).toEqual({ welcome: 2 })
    expect(sim.accepted('agent-1')).toHaveLength(2)
  })

  it('joined() rejects CHANNEL_CLOSED when the join is refused; an aborted one rejects AbortError', async () => {
    const sim = await world().sim()
    sim.onJoin('room:no', { reply: 'error', response: { reason: 'unauthorized' } })
    sim.onJoin('room:held', { reply: 'hold' })
    const link = world().link(sim)
    const refused = link.channel('room:no')
    const held = link.channel('room:held')
    const refusal = refused.joined()
    const controller = new AbortController()
    const heldWait = held.joined({ signal: controller.signal })
    await link.connect()
    const error = await refusal.catch((e: unknown) => e)
    expect(error).toBeInstanceOf(PushError)
    expect((error as PushError).code).toBe('CHANNEL_CLOSED')
    expect(refused.reason).toMatchObject({ kind: 'rejected' })
    controller.abort()
    await expect(heldWait).rejects.toMatchObject({ name: 'AbortError' })
  })

  it('joined() rejects CHANNEL_CLOSED at once once the session ended (after disconnect(), after a supersede), as the waits made before it', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    const room = link.channel('room:1')
    await link.connect()
    await room.joined()
    await link.disconnect()
    // The error names what was waited for: the channel's join.
    const closed = { code: 'CHANNEL_CLOSED', topic: 'room:1', event: 'phx_join' }
    await expect(room.joined()).rejects.toMatchObject(closed)
    await link.connect()
    sim.supersede('agent-1')
    await untilState(link, 'terminated')
    await expect(room.joined()).rejects.toMatchObject(closed)
  })

  it('onStatus() returns an unsubscribe: the listener it removed hears no later status, the others do', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    const room = link.channel('room:1')
    const kept: string[] = []
    const removed: string[] = []
    let left!: () => void
    const heardLeft = new Promise<void>((resolve) => (left = resolve))
    room.onStatus((status) => {
      kept.push(status)
      if (status === 'left') left()
    })
    const unsubscribe = room.onStatus((status) => void removed.push(status))
    await link.connect()
    await room.joined()
    unsubscribe()
    await room.leave()
    await heardLeft
    expect(kept).toEqual(['joined', 'left'])
    expect(removed).toEqual(['joined'])
  })

  it('channel.off(event, handler) stops a handler; the message is then reported ignored', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    const room = link.channel('room:1')
    const got: unknown[] = []
    const handler = (payload: unknown) => got.push(payload)
    room.on('news', handler)
    await link.connect()
    await room.joined()
    room.off('news', handler)
    const ignored = next(link, 'ignored', { filter: (e) => e.detail.includes('"news"') })
    sim.push({ agent: 'agent-1' }, 'room:1', 'news', { n: 1 })
    await ignored
    expect(got).toEqual([])
  })

  it('push(…, { signal }): aborted while waiting for the join, nothing goes out; aborted in flight, the wait ends at once', async () => {
    const sim = await world().sim()
    sim.onJoin('room:held', { reply: 'hold' })
    sim.onPush(({ event }) => (event === 'slow' ? null : { status: 'ok', response: {} }))
    const link = world().link(sim)
    const held = link.channel('room:held')
    const room = link.channel('room:1')
    await link.connect()
    const early = new AbortController()
    const waiting = held.push('hello', { a: 1 }, { signal: early.signal, timeoutMs: 5_000 })
    early.abort()
    await expect(waiting).rejects.toMatchObject({ name: 'AbortError' })
    await sim.waitFor(() => sim.heldJoins.some((j) => j.topic === 'room:held'), { what: 'the held join' })
    expect(sim.answerHeldJoin('room:held', { reply: 'ok' })).toBe(true)
    await held.joined()
    await room.joined()
    const inFlight = new AbortController()
    const slow = room.push('slow', {}, { signal: inFlight.signal, timeoutMs: 5_000 })
    await sim.waitFor(() => framesIn(sim.live('agent-1')[0]!, 'slow', 'room:1').length === 1, { what: 'the slow push on the wire' })
    inFlight.abort()
    await expect(slow).rejects.toMatchObject({ name: 'AbortError' })
    expect(await room.push('fast', {})).toEqual({})
    expect(framesIn(sim.live('agent-1')[0]!, 'hello')).toEqual([])
    await expect(room.push('x', {}, { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' })
    // The aborted push holds no reply timer: the adapter dropped it with the wait, not after its 5 s.
    const pending = (handles: string) => (process as unknown as { getActiveResourcesInfo(): string[] }).getActiveResourcesInfo().filter((h) => h === handles).length
    const before = pending('Timeout')
    const many = Array.from({ length: 5 }, () => new AbortController())
    const aborted = many.map((c) => room.push('slow', {}, { signal: c.signal, timeoutMs: 60_000 }).catch((e: unknown) => e))
    await sim.waitFor(() => framesIn(sim.live('agent-1')[0]!, 'slow', 'room:1').length === 6, { what: 'five more slow pushes on the wire' })
    expect(pending('Timeout')).toBeGreaterThanOrEqual(before + 5)
    for (const c of many) c.abort()
    expect((await Promise.all(aborted)).map((e) => (e as Error).name)).toEqual(Array(5).fill('AbortError'))
    expect(pending('Timeout')).toBeLessThanOrEqual(before)
  })
})

describe('a signal option that is not an AbortSignal', () => {
  it('every call that takes one rejects (events() throws) ConfigurationError before doing anything: no session, no push, no listener, no timer', async () => {
    const sim = await world().sim()
    sim.onPush(() => ({ status: 'ok', response: {} }))
    const link = world().link(sim)
    const room = link.channel('room:1')
    const bogus = { signal: { aborted: false } as unknown as AbortSignal }
    const invalid = (where: string) => ({ name: 'ConfigurationError', code: 'INVALID_OPTIONS', message: expect.stringContaining(`${where}: options.signal must be an AbortSignal`) })
    const listeners = () => (link as unknown as { emitter: { listenerCount(): number } }).emitter.listenerCount()
    const idleListeners = listeners()
    await expect(link.connect(bogus)).rejects.toMatchObject(invalid('link.connect'))
    await expect(link.runForever(bogus)).rejects.toMatchObject(invalid('link.runForever'))
    expect(link.state).toBe('idle') // neither call started a session
    await expect(link.whenState('connected', bogus)).rejects.toMatchObject(invalid('link.whenState'))
    await expect(link.once('connected', bogus)).rejects.toMatchObject(invalid('link.once'))
    expect(() => link.events(bogus)).toThrow(expect.objectContaining(invalid('link.events')))
    await expect(room.joined(bogus)).rejects.toMatchObject(invalid('channel.joined'))
    expect(listeners()).toBe(idleListeners)
    await link.connect()
    await room.joined()
    expect(sim.accepted('agent-1')).toHaveLength(1)
    const timers = () => (process as unknown as { getActiveResourcesInfo(): string[] }).getActiveResourcesInfo().filter((h) => h === 'Timeout').length
    const before = timers()
    await expect(room.push('bogus', {}, { ...bogus, timeoutMs: 60_000 })).rejects.toMatchObject(invalid('channel.push'))
    expect(timers()).toBe(before)
    // Nothing went out: the next push is the first this socket carried on room:1.
    expect(await room.push('after', {})).toEqual({})
    expect(framesIn(sim.live('agent-1')[0]!, 'bogus')).toEqual([])
    expect(framesIn(sim.live('agent-1')[0]!, 'after', 'room:1')).toHaveLength(1)
    // null is no signal, as fetch() reads it.
    expect(await room.push('nulled', {}, { signal: null as unknown as AbortSignal })).toEqual({})
  })
})

describe('reconnect(): retry now after a long backoff', () => {
  it('cuts a backoff short (the next attempt starts at once); returns false while connected, stopped or terminated', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { policy: LONG_BACKOFF })
    expect(link.reconnect()).toBe(false) // idle
    await link.connect()
    expect(link.reconnect()).toBe(false) // connected
    const scheduled = next(link, 'disconnected')
    sim.close({ agent: 'agent-1' }, 1000, '')
    const lost = await scheduled
    expect(lost.outcome).toBe('reconnect')
    await untilState(link, 'reconnecting')
    expect(link.reconnect()).toBe(true)
    await untilState(link, 'connected', 2_000) // the 0-60 s backoff did not run out
    expect(sim.accepted('agent-1')).toHaveLength(2)
    sim.supersede('agent-1')
    await untilState(link, 'terminated')
    expect(link.reconnect()).toBe(false)
    await link.disconnect()
    expect(link.reconnect()).toBe(false)
    expect(sim.accepted('agent-1')).toHaveLength(2) // a supersede is never undone by a retry
  })
})

describe("reconnect() on a timer cannot hammer the platform", () => {
  it('retry now every 10 ms for 2 s against a server answering every upgrade 500: the first call retries at once, the next ones back off as the link would (a handful of upgrades, not one per call); once the server accepts, the link connects', async () => {
    const sim = await world().sim()
    // The default backoff (first delay 500 ms, doubling to 30 s), not the suite's fast one.
    const link = world().link(sim, { policy: { reconnect: { initialDelayMs: 500, maxDelayMs: 30_000, rapidWindowMs: 5_000 } } })
    await link.connect()
    sim.refuseUpgrades(...Array.from({ length: 1_000 }, () => ({ status: 500 })))
    const lost = next(link, 'disconnected')
    sim.close({ agent: 'agent-1' }, 1000, '')
    await lost
    // The host's watchdog: reconnect() every 10 ms, 200 calls (2 s and more).
    let calls = 0
    let loop: NodeJS.Timeout | undefined
    try {
      await new Promise<void>((resolve) => {
        loop = setInterval(() => {
          link.reconnect()
          if (++calls === 200) resolve()
        }, 10)
      })
    } finally {
      clearInterval(loop)
    }
    const refused = sim.upgrades.filter((u) => u.status === 500).length
    // The link's own backoff alone makes 3 or 4 attempts in 2 s; before the retry-now floor every call was one (about 80 a second).
    expect(calls).toBe(200)
    expect(refused).toBeGreaterThanOrEqual(2)
    expect(refused).toBeLessThanOrEqual(6)
    sim.resetScripts() // the refusals left are forgotten: the server accepts again
    link.reconnect()
    await untilState(link, 'connected', 40_000)
  }, 60_000)
})

describe("reconnect() never cuts what the server asked for", () => {
  it("after a 429 with Retry-After: 1, retry now in a loop: the next upgrade still comes no sooner than the Retry-After, then at once (not after the link's own 60 s backoff)", async () => {
    const sim = await world().sim()
    // Its own wait after the 429: the Retry-After plus half of a 60 s jitter range, about 31 s.
    const link = world().link(sim, { policy: LONG_BACKOFF, env: { random: () => 0.5 } })
    sim.refuseUpgrades({ status: 429, retryAfter: '1' })
    // The host's watchdog: retry now every 20 ms while not connected. Its first retry meets the
    // 429's wait (later ones in a row would back off: "reconnect() on a timer" below).
    const loop = setInterval(() => link.reconnect(), 20)
    try {
      const refused = next(link, 'disconnected', { filter: (e) => e.reason.kind === 'rejected' })
      void link.connect().catch(() => {})
      expect((await refused).nextDelayMs).toBeGreaterThan(30_000)
      await untilState(link, 'connected', 5_000)
    } finally {
      clearInterval(loop)
    }
    const [refusal, accepted] = sim.upgrades
    expect([refusal!.status, accepted!.status]).toEqual([429, 101])
    expect(accepted!.at - refusal!.at).toBeGreaterThanOrEqual(1_000)
  })
})

describe('defaults and disposal', () => {
  it('the exported defaults are frozen: changing one throws and later links keep the real default', () => {
    expect(() => {
      ;(DEFAULT_LINK_POLICY.reconnect as { maxDelayMs: number }).maxDelayMs = 1
    }).toThrow(TypeError)
    expect(() => {
      ;(DEFAULT_TRANSPORT_POLICY as { pushTimeoutMs: number }).pushTimeoutMs = 1
    }).toThrow(TypeError)
    expect(() => {
      ;(DEFAULT_RECONNECT_POLICY.goingAwayFloorMs as unknown as number[])[0] = 0
    }).toThrow(TypeError)
    expect(() => {
      ;(DEFAULT_LINK_POLICY as { channel: unknown }).channel = {}
    }).toThrow(TypeError)
    expect(DEFAULT_LINK_POLICY.reconnect.maxDelayMs).toBe(30_000)
  })

  it("a link's policy is frozen whole: changing an array the host passed does not reach it, and the link's copy cannot be changed", () => {
    const floor = [100, 200]
    // Never connected: nothing to release.
    const link = createLink({ url: 'ws://127.0.0.1:9/socket', agentId: 'a', apiKey: 'k', policy: { reconnect: { goingAwayFloorMs: floor as [number, number] } } })
    floor[0] = 9e15
    expect(link.policy.reconnect.goingAwayFloorMs).toEqual([100, 200])
    expect(Object.isFrozen(link.policy.reconnect.goingAwayFloorMs)).toBe(true)
    expect(() => {
      ;(link.policy.reconnect.goingAwayFloorMs as unknown as number[])[1] = 1
    }).toThrow(TypeError)
  })

  it('await using disconnects the link at the end of the block', async () => {
    const sim = await world().sim()
    let link!: ReturnType<ReturnType<typeof world>['link']>
    {
      await using scoped = world().link(sim)
      link = scoped
      await scoped.connect()
    }
    expect(link.state).toBe('stopped')
    await sim.settled('agent-1')
    expect(sim.closesSent).toEqual([])
  })
})

describe('disconnect() closes the socket within the call (a page\'s pagehide handler leaves no socket open)', () => {
  it('the phx_leave, then close 1000, both written before disconnect() returns, a 4 MB push still in the send buffer too: nothing waits for the buffer to drain', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await room.joined()
    const socket = sim.live('agent-1')[0]!
    sim.onPush(() => null)
    // A large push just written: the socket's send buffer is not empty when disconnect() is called.
    const pushed = room.push('big', { blob: 'x'.repeat(4 * 1024 * 1024) }, { timeoutMs: 5_000 }).catch((e: { code?: string }) => e.code)
    const closes = vi.spyOn(WebSocket.prototype, 'close')
    try {
      const stopping = link.disconnect()
      // Closed in the call: phoenix.js's teardown would have polled the send buffer first (150 ms steps).
      expect(link.state).toBe('stopped')
      expect(closes.mock.calls[0]).toEqual([1000, 'client closing'])
      await stopping
    } finally {
      closes.mockRestore()
    }
    await sim.waitFor(() => socket.state === 'closed')
    expect(socket.closeSeen).toMatchObject({ code: 1000 })
    // Everything written before the close reached the server, in order: the push, the leave, the close.
    const inbound = socket.frames.filter((f) => f.dir === 'in').map((f) => f.frame?.event)
    expect(inbound.slice(-2)).toEqual(['big', 'phx_leave'])
    expect(await pushed).toBe('TRANSPORT_LOST')
  })
})
