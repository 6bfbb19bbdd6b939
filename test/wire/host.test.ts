/** SCENARIOS 21-27 on the real wire: the host's waits, cancellations, stops and restarts. */
import { describe, expect, it } from 'vitest'
import { SimulatedClock } from 'xstate'
import { getEventListeners } from 'node:events'
import { createServer, type Socket } from 'node:net'
import { AgentDisconnectedError } from '../../src/errors/agent-disconnected.js'
import { ConfigurationError } from '../../src/errors/configuration-error.js'
import { createLink, type Link, type LinkOptions } from '../../src/link.js'
import type { PlatformSimulator } from '../../src/node/server/index.js'
import { controlTopic } from '../../src/protocol.js'
import { framesIn, next, settle, untilState, useWorld } from '../support/wire.js'

const world = useWorld()

describe('rule: cancelling a wait is not a stop', () => {
  it('aborting runForever() rejects that waiter only; the transport stays up; disconnect and connect still work (scenario 21)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const controller = new AbortController()
    const run = settle(link.runForever({ signal: controller.signal }))
    controller.abort()
    const r = await run
    expect(r.ok).toBe(false)
    expect((r as { error: { name: string } }).error.name).toBe('AbortError')
    expect(link.state).toBe('connected')
    expect(sim.live('agent-1')).toHaveLength(1)
    expect(sim.accepted('agent-1')[0]!.closeSeen).toBeNull()
    await link.disconnect()
    await link.connect()
    expect(link.state).toBe('connected')
    expect(sim.accepted('agent-1')).toHaveLength(2)
  })

  it('aborting connect() leaves the link connecting on its own', async () => {
    const sim = await world().sim()
    const release = sim.holdUpgrades()
    const link = world().link(sim)
    const controller = new AbortController()
    const pending = settle(link.connect({ signal: controller.signal }))
    await sim.waitFor(() => sim.heldUpgrades === 1)
    controller.abort(new Error('host gave up waiting'))
    expect(((await pending) as { error: Error }).error.message).toBe('host gave up waiting')
    release()
    await untilState(link, 'connected')
  })

  it('two concurrent runForever() waiters settle the same way (scenario 22)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const a = settle(link.runForever())
    const b = settle(link.runForever())
    sim.supersede('agent-1')
    const [ra, rb] = await Promise.all([a, b])
    expect((ra as { error: AgentDisconnectedError }).error.reason).toBe((rb as { error: AgentDisconnectedError }).error.reason)
    const c = settle(link.runForever())
    expect((await c).ok).toBe(false)
  })

  it('the disconnected event says what follows: reconnect, stopped (host) or terminated', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const outcomes: Array<[string, boolean]> = []
    link.on('disconnected', (e) => outcomes.push([e.outcome, e.terminal]))
    const back = next(link, 'reconnected')
    sim.close({ agent: 'agent-1' }, 1000)
    await back
    await link.disconnect()
    await link.connect()
    const ended = untilState(link, 'terminated')
    sim.supersede('agent-1')
    await ended
    expect(outcomes).toEqual([
      ['reconnect', false],
      ['stopped', false],
      ['terminated', true],
    ])
  })

  it('runForever() resolves when the host disconnects', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    const run = settle(link.runForever())
    await untilState(link, 'connected')
    await link.disconnect()
    expect((await run).ok).toBe(true)
  })
})

describe('waits leave nothing on the host\'s AbortSignal', () => {
  it('connect() and runForever() remove their abort listener once they settle, however they settle', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    const connectSignal = new AbortController().signal
    await link.connect({ signal: connectSignal })
    expect(getEventListeners(connectSignal, 'abort')).toHaveLength(0)
    const runSignal = new AbortController().signal
    const running = link.runForever({ signal: runSignal })
    expect(getEventListeners(runSignal, 'abort')).toHaveLength(1)
    await link.disconnect()
    await running
    expect(getEventListeners(runSignal, 'abort')).toHaveLength(0)
    // Rejected by a terminal reason: removed too.
    sim.refuseUpgrades({ status: 403 })
    const refusedSignal = new AbortController().signal
    expect((await settle(link.connect({ signal: refusedSignal }))).ok).toBe(false)
    expect(getEventListeners(refusedSignal, 'abort')).toHaveLength(0)
  })

  it('one signal shared by many waits at once (pushes, joins, state waits, events of several links) holds one listener, no Node listener warning; its abort ends them all', async () => {
    const sim = await world().sim({ agents: 'any' })
    sim.onPush(() => null) // no reply: the pushes wait until the abort
    const warnings: string[] = []
    const onWarning = (w: Error) => void warnings.push(w.name)
    process.on('warning', onWarning)
    try {
      const links = [world().link(sim, { agentId: 'a-1', apiKey: 'k' }), world().link(sim, { agentId: 'a-2', apiKey: 'k' })]
      await Promise.all(links.map((l) => l.connect()))
      const rooms = links.map((l) => l.channel('room:1'))
      await Promise.all(rooms.map((r) => r.joined()))
      const controller = new AbortController()
      const { signal } = controller
      const waits = [
        ...rooms.flatMap((room) => Array.from({ length: 12 }, (_, i) => room.push('work', { i }, { signal, timeoutMs: 60_000 }))),
        ...links.map((l) => l.whenState('terminated', { signal })),
        ...links.map((l) => l.once('reconnected', { signal })),
        ...links.map((l) => l.channel('room:later').joined({ signal })), // aborted in the same turn: before their replies
      ]
      const iterator = links[0]!.events({ signal })
      const next = iterator.next()
      expect(getEventListeners(signal, 'abort')).toHaveLength(1)
      controller.abort(new Error('host shutdown'))
      const results = await Promise.allSettled(waits)
      expect(results.filter((r) => r.status === 'rejected' && (r.reason as Error).message === 'host shutdown')).toHaveLength(waits.length)
      expect(await next).toMatchObject({ done: true })
      expect(getEventListeners(signal, 'abort')).toHaveLength(0)
      // Waits that settle on their own leave none either.
      const other = new AbortController().signal
      const replied = Array.from({ length: 12 }, () => links[0]!.whenState('connected', { signal: other }))
      await Promise.all(replied)
      expect(getEventListeners(other, 'abort')).toHaveLength(0)
      await new Promise((resolve) => setImmediate(resolve))
      expect(warnings).toEqual([])
    } finally {
      process.off('warning', onWarning)
    }
  })
})

describe('a simulated clock drives the chart delays', () => {
  it('the backoff waits until the test advances chart time; sockets stay real', async () => {
    const sim = await world().sim()
    const clock = new SimulatedClock()
    const link = world().link(sim, { clock })
    await link.connect()
    const d = next(link, 'disconnected')
    sim.close({ agent: 'agent-1' }, 1012)
    const { nextDelayMs } = await d
    expect(link.state).toBe('reconnecting')
    clock.increment(nextDelayMs! - 1)
    expect(link.state).toBe('reconnecting')
    const back = next(link, 'reconnected')
    clock.increment(1)
    expect(link.state).toBe('connecting')
    await back
    expect(sim.accepted('agent-1')).toHaveLength(2)
  })
})

describe('restarts and lastDisconnectReason (scenarios 23-25)', () => {
  it('disconnect() then connect(): a new session, the reason cleared at connect, a new epoch', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    const first = next(link, 'connected')
    await link.connect()
    expect((await first).epoch).toBe(1)
    await link.disconnect()
    expect(link.lastDisconnectReason?.kind).toBe('graceful')
    const second = next(link, 'connected')
    const connecting = link.connect()
    expect(link.lastDisconnectReason).toBeNull()
    await connecting
    expect((await second).epoch).toBe(2)
  })

  it("disconnect() then connect() from inside the link's own processing (a chart listener, a synchronous apiKey function) start a new session too", async () => {
    const sim = await world().sim()
    const fromListener = world().link(sim)
    await fromListener.connect()
    let restarted: Promise<{ ok: boolean }> | null = null
    const sub = fromListener.actor.subscribe(() => {
      if (restarted !== null || fromListener.state !== 'reconnecting') return
      void fromListener.disconnect()
      restarted = settle(fromListener.connect())
    })
    const second = next(fromListener, 'connected', { filter: (e) => e.epoch === 2 })
    sim.close({ agent: 'agent-1' }, 1000)
    await second
    sub.unsubscribe()
    expect(await restarted!).toMatchObject({ ok: true })
    expect(fromListener.state).toBe('connected')
    await fromListener.disconnect()

    let calls = 0
    let fromKey: Promise<{ ok: boolean }> | null = null
    const keyed = world().link(sim, {
      apiKey: () => {
        calls++
        if (calls === 2) {
          void keyed.disconnect()
          fromKey = settle(keyed.connect())
        }
        return 'key-1'
      },
    })
    await keyed.connect()
    const restartedKeyed = next(keyed, 'connected', { filter: (e) => e.epoch === 2 })
    sim.close({ agent: 'agent-1' }, 1000)
    await restartedKeyed
    expect(await fromKey!).toMatchObject({ ok: true })
    expect(keyed.state).toBe('connected')
    expect(sim.live('agent-1')).toHaveLength(1)
  })

  it("calls made inside the link's own processing take effect in the order they were made, and an abort right after a call is honoured", async () => {
    const sim = await world().sim()
    // connect() then disconnect(): the later disconnect() wins.
    const ordered = world().link(sim)
    await ordered.connect()
    let calls: { connect: Promise<{ ok: boolean; error?: unknown }>; disconnect: Promise<void> } | null = null
    let sub = ordered.actor.subscribe(() => {
      if (calls !== null || ordered.state !== 'reconnecting') return
      calls = { connect: settle(ordered.connect()), disconnect: ordered.disconnect() }
    })
    sim.close({ agent: 'agent-1' }, 1000)
    await untilState(ordered, 'stopped')
    sub.unsubscribe()
    await calls!.disconnect
    expect(await calls!.connect).toMatchObject({ ok: false, error: { reason: { kind: 'graceful' } } })
    expect(ordered.state).toBe('stopped')
    expect(sim.accepted('agent-1')).toHaveLength(1)

    // connect({ signal }) and runForever({ signal }) aborted right after the call: both reject AbortError at once.
    const aborted = world().link(sim)
    await aborted.connect()
    let waits: Array<Promise<{ ok: boolean; error?: unknown }>> | null = null
    sub = aborted.actor.subscribe(() => {
      if (waits !== null || aborted.state !== 'reconnecting') return
      const controller = new AbortController()
      waits = [settle(aborted.connect({ signal: controller.signal })), settle(aborted.runForever({ signal: controller.signal }))]
      controller.abort()
    })
    const lost = next(aborted, 'disconnected')
    sim.close({ agent: 'agent-1' }, 1000)
    await lost
    sub.unsubscribe()
    for (const wait of await Promise.all(waits!)) expect(wait).toMatchObject({ ok: false, error: { name: 'AbortError' } })
    // Only the waits ended: the link reconnects.
    await untilState(aborted, 'connected')

    // connect() then runForever() after a supersede: runForever() waits on the new session, not the ended one.
    let forever: Promise<{ ok: boolean; error?: unknown }> | null = null
    let restarted: Promise<{ ok: boolean }> | null = null
    sub = aborted.actor.subscribe(() => {
      if (forever !== null || aborted.state !== 'terminated') return
      restarted = settle(aborted.connect())
      forever = settle(aborted.runForever())
    })
    const superseded = next(aborted, 'disconnected', { filter: (e) => e.terminal })
    sim.supersede('agent-1', { close: 1000 })
    await superseded
    sub.unsubscribe()
    expect(await restarted!).toMatchObject({ ok: true })
    await aborted.disconnect()
    // It ended with the disconnect() of the new session, not at once with the supersede of the old one.
    expect(await forever!).toMatchObject({ ok: true })
  })

  it('a whenState() asked while the reconnect decision is pending (inside the processing) waits for the state that decision commits, not the one before the loss', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { policy: { reconnect: { initialDelayMs: 20, maxDelayMs: 40 } } })
    await link.connect()
    const seen: string[] = []
    let wait: Promise<void> | null = null
    const sub = link.actor.subscribe((snapshot) => {
      if (wait !== null || !JSON.stringify(snapshot.value).includes('deciding')) return
      seen.push(`asked in ${link.state}`)
      wait = link.whenState('connected').then(() => void seen.push(`resolved in ${link.state}`))
    })
    const back = next(link, 'reconnected')
    sim.abort({ agent: 'agent-1' })
    await back
    sub.unsubscribe()
    await wait
    expect(seen).toEqual(['asked in connected', 'resolved in connected'])
    expect(sim.accepted('agent-1')).toHaveLength(2)
  })

  it("inside the link's processing a disconnect() takes effect at once, before a reconnect() or channel() called after it; an abort right after connect() ends only that wait", async () => {
    const sim = await world().sim()
    const link = world().link(sim, { policy: { reconnect: { initialDelayMs: 5_000, maxDelayMs: 5_000 } } })
    await link.connect()
    let retried: boolean | null = null
    let sub = link.actor.subscribe(() => {
      if (retried !== null || link.state !== 'reconnecting') return
      void link.disconnect()
      retried = link.reconnect()
    })
    sim.close({ agent: 'agent-1' }, 1000)
    await untilState(link, 'stopped')
    sub.unsubscribe()
    expect(retried).toBe(false)
    await link.disconnect()
    expect(link.state).toBe('stopped')
    expect(sim.accepted('agent-1')).toHaveLength(1)

    // disconnect() then channel() while connected: no join goes out on the session being stopped.
    await link.connect()
    let joined = false
    sub = link.actor.subscribe(() => {
      if (joined || link.state !== 'connected') return
      joined = true
      void link.disconnect()
      link.channel('room:late')
    })
    // A channel of the host's own changes the chart while connected: the subscriber runs inside that processing.
    link.channel('room:first')
    await untilState(link, 'stopped')
    sub.unsubscribe()
    await link.disconnect()
    expect(joined).toBe(true)
    expect(sim.accepted('agent-1').flatMap((c) => framesIn(c, 'phx_join')).filter((f) => f.topic === 'room:late')).toEqual([])

    // connect({ signal }) aborted right after the call, as the link stops: the wait ends, the link connects.
    await link.connect()
    let wait: Promise<{ ok: boolean; error?: unknown }> | null = null
    sub = link.actor.subscribe(() => {
      if (wait !== null || link.state !== 'stopped') return
      const controller = new AbortController()
      wait = settle(link.connect({ signal: controller.signal }))
      controller.abort()
    })
    await link.disconnect()
    sub.unsubscribe()
    expect(await wait!).toMatchObject({ ok: false, error: { name: 'AbortError' } })
    await untilState(link, 'connected')
  })

  it('from an idle link, inside its processing, connect() or runForever() then disconnect(): the stop wins, as outside', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    let waits: { connect: Promise<{ ok: boolean; error?: unknown }>; forever: Promise<{ ok: boolean; error?: unknown }> } | null = null
    const sub = link.actor.subscribe(() => {
      if (waits !== null || link.state !== 'idle') return
      waits = { connect: settle(link.connect()), forever: settle(link.runForever()) }
      void link.disconnect()
    })
    // A channel of the host's own changes the idle chart: the subscriber runs inside that processing.
    link.channel('room:x')
    sub.unsubscribe()
    expect(await waits!.connect).toMatchObject({ ok: false, error: { reason: { kind: 'graceful' } } })
    expect(await waits!.forever).toMatchObject({ ok: true })
    expect(link.state).toBe('idle')
    expect(sim.upgrades).toEqual([])
    // A later session is not taken for the one stopped: connect() works as ever.
    await link.connect()
    expect(link.state).toBe('connected')
  })

  it('terminated -> connect(): a fresh session that connects normally; the reason stays readable until then', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const ended = untilState(link, 'terminated')
    sim.supersede('agent-1')
    await ended
    expect(link.lastDisconnectReason?.kind).toBe('superseded')
    await link.connect()
    expect(link.state).toBe('connected')
    expect(link.lastDisconnectReason).toBeNull()
    expect(sim.live('agent-1')).toHaveLength(1)
  })

  it('two concurrent connect() calls share one transport (scenario 26)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await Promise.all([link.connect(), link.connect(), link.connect()])
    expect(sim.accepted('agent-1')).toHaveLength(1)
  })
})

describe('rule: disconnect() always succeeds (scenario 27)', () => {
  it('during connecting: stopped at once, nothing left open, no later attempt', async () => {
    // A peer that accepts TCP and never answers the upgrade.
    const sockets = new Set<Socket>()
    const silent = createServer((s) => sockets.add(s))
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
    const port = (silent.address() as { port: number }).port
    const sim = await world().sim()
    const link = world().link(sim, { url: `ws://127.0.0.1:${port}/socket` })
    const pending = settle(link.connect())
    await untilState(link, 'connecting')
    await new Promise<void>((resolve) => (sockets.size > 0 ? resolve() : silent.once('connection', () => resolve())))
    await link.disconnect()
    expect(link.state).toBe('stopped')
    expect((await pending).ok).toBe(false)
    for (const s of sockets) s.destroy()
    await new Promise<void>((resolve) => silent.close(() => resolve()))
  })

  it('during joining: stopped at once, the socket closed 1000', async () => {
    const sim = await world().sim()
    sim.onJoin(controlTopic('agent-1'), { reply: 'none' })
    const link = world().link(sim)
    const pending = settle(link.connect())
    await untilState(link, 'joining')
    await link.disconnect()
    expect(link.state).toBe('stopped')
    expect(((await pending) as { error: AgentDisconnectedError }).error.reason.kind).toBe('graceful')
    const [conn] = sim.accepted('agent-1')
    await sim.waitFor(() => conn!.state === 'closed')
    expect(conn!.closeSeen?.code).toBe(1000)
  })

  it('during the backoff: stopped at once, no later attempt', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { policy: { reconnect: { serviceRestartFloorMs: [5_000, 6_000] } } })
    await link.connect()
    const waiting = next(link, 'disconnected')
    sim.close({ agent: 'agent-1' }, 1012)
    expect((await waiting).nextDelayMs).toBeGreaterThanOrEqual(5_000)
    const started = performance.now()
    await link.disconnect()
    expect(performance.now() - started).toBeLessThan(1_000)
    expect(link.state).toBe('stopped')
    expect(sim.accepted('agent-1')).toHaveLength(1)
  })

  it("when the host's clock fails the chart and then its stop (a clearTimeout that throws from then on): disconnect() resolves, the socket is closed, the state reads terminated with an other reason", async () => {
    const sim = await world().sim()
    const timers = new Set<NodeJS.Timeout>()
    let broken = false
    const clock = {
      setTimeout: (fn: () => void, ms: number) => {
        const timer = setTimeout(() => {
          timers.delete(timer)
          fn()
        }, ms)
        timers.add(timer)
        return timer
      },
      clearTimeout: (id: unknown) => {
        if (broken) throw new Error('clock.clearTimeout failed')
        clearTimeout(id as NodeJS.Timeout)
        timers.delete(id as NodeJS.Timeout)
      },
      now: () => performance.now(),
    }
    try {
      const link = world().link(sim, { clock })
      await link.connect()
      const [socket] = sim.live('agent-1')
      broken = true
      expect((await settle(link.disconnect())).ok).toBe(true)
      expect(link.state).toBe('terminated')
      expect(link.lastDisconnectReason).toMatchObject({ kind: 'other', detail: 'internal error: clock.clearTimeout failed' })
      await sim.waitFor(() => socket!.state === 'closed')
      expect(sim.live('agent-1')).toEqual([])
      const lines = world().captured.get(link)!.lines.map((l) => l.message)
      expect(lines).toContain('stopping the charts of the crashed link failed')
    } finally {
      // The timers the throwing clearTimeout could not clear: this test's to release.
      for (const timer of timers) clearTimeout(timer)
    }
  })

  it('with a logger whose methods cannot be read (a revoked proxy, getters that throw): the link connects and disconnect() resolves', async () => {
    const sim = await world().sim({ agents: 'any' })
    const { proxy, revoke } = Proxy.revocable({ debug() {}, info() {}, warn() {}, error() {} }, {})
    const revoked = createLink({ url: sim.url, agentId: 'agent-1', apiKey: 'key-1', logger: proxy })
    await revoked.connect()
    revoke()
    await revoked.disconnect()
    expect(revoked.state).toBe('stopped')
    let reads = 0
    const throwing = Object.fromEntries(['debug', 'info', 'warn', 'error'].map((level) => [level, level]))
    // createLink reads the methods once to check them: the getters throw only from the second read.
    let armed = false
    const logger = new Proxy(throwing, {
      get: () => {
        if (!armed) return () => {}
        reads++
        throw new Error('getter bug')
      },
    })
    const link = createLink({ url: sim.url, agentId: 'agent-2', apiKey: 'key-2', logger })
    armed = true
    await link.connect()
    expect(link.state).toBe('connected')
    await link.disconnect()
    expect(link.state).toBe('stopped')
    expect(reads).toBeGreaterThan(0)
    expect(sim.live('agent-1')).toEqual([])
    expect(sim.live('agent-2')).toEqual([])
  })

  it('is idempotent from idle and after stop', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.disconnect()
    expect(link.state).toBe('idle')
    await link.connect()
    await Promise.all([link.disconnect(), link.disconnect()])
    await link.disconnect()
    expect(link.state).toBe('stopped')
    expect(sim.accepted('agent-1')).toHaveLength(1)
  })
})

describe('options are read once, at createLink()', () => {
  it('what was checked is what the link uses: a getter that changes later, or a field reassigned, changes nothing', async () => {
    const sim = await world().sim({ agents: 'any', rejectMode: 'json' })
    let reads = 0
    const options = {
      url: sim.url,
      get agentId() {
        return ++reads === 1 ? 'agent-A' : 'agent-B'
      },
      apiKey: 'k',
      onConflict: 'reject' as 'reject' | 'supersede',
    }
    const link = createLink(options)
    try {
      ;(options as { onConflict: string }).onConflict = 'bogus'
      await link.connect()
      expect(reads).toBe(1)
      expect(link.agentId).toBe('agent-A')
      expect(sim.live('agent-A')).toHaveLength(1)
      expect(sim.live('agent-B')).toHaveLength(0)
      expect(sim.upgrades.map((u) => u.status)).toEqual([101])
    } finally {
      await link.disconnect()
    }
  })

  it('options given as a class instance: apiKey and params are called on it (its private state reachable), as before', async () => {
    const sim = await world().sim()
    class AgentConfig {
      readonly #vault = new Map([['agent-1', 'key-1']])
      readonly url = sim.url
      readonly agentId = 'agent-1'
      apiKey(): string {
        return this.#vault.get(this.agentId)!
      }
      params(): Record<string, string> {
        return { region: this.#vault.size === 1 ? 'eu' : 'none' }
      }
    }
    const link = createLink(new AgentConfig() as unknown as LinkOptions)
    try {
      await link.connect()
      expect(sim.accepted('agent-1')[0]!.params).toMatchObject({ region: 'eu' })
    } finally {
      await link.disconnect()
    }
  })

  it('an own __proto__ key (JSON-parsed config) is refused as unknown, never read as the options\' prototype', () => {
    const config = JSON.parse('{"agentId":"a","apiKey":"k","__proto__":{"url":"ws://127.0.0.1:1/socket"}}') as LinkOptions
    expect(() => createLink(config)).toThrow(ConfigurationError)
    const withUrl = JSON.parse('{"url":"ws://127.0.0.1:1/socket","agentId":"a","apiKey":"k","__proto__":{"allowInsecureTransport":true}}') as LinkOptions
    expect(() => createLink(withUrl)).toThrow('unknown option "__proto__"')
  })

  it('an option whose read throws (a getter, a Proxy) is a ConfigurationError naming it', () => {
    const getter = {
      url: 'ws://127.0.0.1:1/socket',
      agentId: 'a',
      get apiKey(): string {
        throw new Error('vault unavailable')
      },
    }
    expect(() => createLink(getter)).toThrow(ConfigurationError)
    expect(() => createLink(getter)).toThrow('reading option apiKey threw: vault unavailable')
    const proxy = new Proxy({}, {
      ownKeys() {
        throw new Error('trap bug')
      },
    }) as LinkOptions
    expect(() => createLink(proxy)).toThrow('reading the options object threw: trap bug')
  })
})

describe('host callbacks that return a rejected promise (async observers and spans) are reported, never an unhandled rejection', () => {
  /** Runs `body`, then lets its callbacks' promises settle; resolves with the unhandled rejections seen meanwhile. */
  async function unhandledDuring(body: () => Promise<void>): Promise<string[]> {
    const seen: string[] = []
    const onRejection = (reason: unknown) => void seen.push(String(reason))
    process.on('unhandledRejection', onRejection)
    try {
      await body()
      // Node reports an unhandled rejection after the microtasks of the turn that made it.
      for (let i = 0; i < 3; i++) await new Promise<void>((resolve) => setImmediate(resolve))
    } finally {
      process.off('unhandledRejection', onRejection)
    }
    return seen
  }

  /** Connects `link`, has the simulator close it 1000, waits for the reconnect, then disconnects it. */
  async function sessionWithReconnect(sim: PlatformSimulator, link: Link): Promise<void> {
    await link.connect()
    const back = next(link, 'reconnected')
    sim.close({ agent: 'agent-1' }, 1000)
    await back
    await link.disconnect()
  }

  const failing = (what: string, calls: { n: number }) => async () => {
    calls.n++
    throw new Error(`${what} rejected`)
  }

  it('an async inspect observer: each rejection is logged; the link connects', async () => {
    const sim = await world().sim()
    const calls = { n: 0 }
    const link = world().link(sim, { inspect: failing('inspect', calls) })
    const unhandled = await unhandledDuring(() => link.connect())
    expect(unhandled).toEqual([])
    expect(link.state).toBe('connected')
    const logged = world().captured.get(link)!.lines.filter((l) => l.message === 'the inspect observer threw')
    expect(calls.n).toBeGreaterThan(0)
    expect(logged).toHaveLength(calls.n)
    expect(logged[0]!.fields).toMatchObject({ error: expect.stringContaining('inspect rejected') })
  })

  it("an async observer of a chart (link.actor.subscribe): each rejection is logged as the listener's", async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    const calls = { n: 0 }
    const subscription = link.actor.subscribe(failing('subscriber', calls))
    const unhandled = await unhandledDuring(() => link.connect())
    subscription.unsubscribe()
    expect(unhandled).toEqual([])
    const logged = world().captured.get(link)!.lines.filter((l) => /^a listener of the \S+ chart threw$/.test(l.message))
    expect(calls.n).toBeGreaterThan(0)
    expect(logged).toHaveLength(calls.n)
    expect(logged[0]!.fields).toMatchObject({ error: expect.stringContaining('subscriber rejected') })
  })

  it("a tracer whose span methods are async and reject: logged as a listener's rejection; the link connects, reconnects and stops", async () => {
    const sim = await world().sim()
    const calls = { n: 0 }
    const fail = failing('span', calls)
    const link = world().link(sim, { tracer: { startSpan: () => ({ setAttribute: fail, setStatus: fail, addEvent: fail, end: fail }) } })
    const unhandled = await unhandledDuring(() => sessionWithReconnect(sim, link))
    expect(unhandled).toEqual([])
    expect(link.state).toBe('stopped')
    const logged = world().captured.get(link)!.lines.filter((l) => l.message === 'a link event listener threw')
    expect(calls.n).toBeGreaterThan(0)
    // One line per listener call that made a rejected span call (Promise.all reports the first).
    expect(logged.length).toBeGreaterThan(0)
    expect(logged.every((l) => String((l.fields as { error?: string }).error).includes('span rejected'))).toBe(true)
  })

  it('a span method that rejects, then one that throws in the same listener: the throw is logged, the rejection is not left unhandled', async () => {
    const sim = await world().sim()
    const calls = { n: 0 }
    const fail = failing('span', calls)
    const span = {
      setAttribute: fail,
      setStatus: () => {
        throw new Error('setStatus bug')
      },
      addEvent: fail,
      end: () => {},
    }
    const link = world().link(sim, { tracer: { startSpan: () => span } })
    const unhandled = await unhandledDuring(() => sessionWithReconnect(sim, link))
    expect(unhandled).toEqual([])
    expect(calls.n).toBeGreaterThan(0)
    expect(world().captured.get(link)!.lines.some((l) => l.message === 'a link event listener threw' && String((l.fields as { error?: string }).error).includes('setStatus bug'))).toBe(true)
  })

  it('traceSpans refuses a tracer without startSpan at the call', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    const { traceSpans } = await import('../../src/tracing.js')
    for (const tracer of [null, undefined, {}, { startSpan: 1 }, 'otel']) {
      expect(() => traceSpans(link, tracer as never)).toThrow(ConfigurationError)
    }
    expect(() => traceSpans(link, null as never)).toThrow(/^traceSpans: tracer must be an object with a startSpan method \(an OpenTelemetry Tracer\), got null$/)
  })
})
