/**
 * The link in a real browser: the package's main entry (src/index.ts), bundled by esbuild for
 * the browser with no warning or error and none of the Node-only code (src/node/, ws) in it,
 * runs in headless Chromium (Debian's chromium driven by playwright-core) against the platform
 * simulator over real loopback sockets, on a page and in a dedicated Web Worker (an ES module
 * worker the page starts). The same scenario runs in both, each step checked on what the
 * browser reports and on what the simulator saw:
 *
 * 1. connect with the API key as a socket param (a browser WebSocket sends no headers):
 *    connect() resolves; the simulator accepted one upgrade for the agent, control channel joined;
 * 2. an app channel: joined, a server push reaches its handler, a push from the browser reaches
 *    the server and its reply comes back;
 * 3. the server closes the socket with 1000: the link reconnects by itself (reconnecting ...
 *    connected), rejoins the channel on the new socket (a push there reaches the handler); the
 *    simulator saw a second upgrade;
 * 4. a supersede ends the link for good: terminated, reason superseded, a pending runForever()
 *    and a later one reject with AgentDisconnectedError; the simulator sees no further upgrade
 *    within several times the policy's longest reconnect delay (a wait on the simulator's
 *    records that a wrong reconnect would end early, not a sleep);
 * 5. a fresh link, then disconnect(): stopped, its runForever() resolves, and the simulator saw
 *    the client's normal close (1000) after a leave of the control channel.
 *
 * The sockets Chromium itself opened (playwright sees a worker's too) are checked as well: three,
 * each to the simulator on 127.0.0.1 with the key in the query string. The page may reach only
 * 127.0.0.1 (every other request is aborted).
 *
 * Bundles once and launches one browser for the file; each test has its own simulator, page
 * server and browser context, released (links disconnected first) after it.
 *
 * Skips, saying so, where Chromium is absent (CHROMIUM_PATH, else /usr/bin/chromium).
 */
import { existsSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { Socket } from 'node:net'
import { fileURLToPath } from 'node:url'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { build, stop as stopEsbuild, type BuildResult, type Metafile } from 'esbuild'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'
import { startSimulator, type PlatformSimulator, type SimConnection } from '../../src/node/server/index.js'
import type { LinkPolicyInput } from '../../src/index.js'
import { FAST, framesIn } from '../support/wire.js'
import type { Call, CommandName, Commands, Snapshot } from './link-fixture/driver.js'
import type { FixtureApi } from './link-fixture/page.js'

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const HAVE_CHROMIUM = existsSync(CHROMIUM)
if (!HAVE_CHROMIUM) console.warn(`[browser] skipping the link-in-a-browser tests: no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`)

const FIXTURE = fileURLToPath(new URL('./link-fixture/', import.meta.url))
const AGENT = 'agent-1'
const KEY = 'key-1'
const CONTROL = `agent_control:${AGENT}`
const ROOM = 'room:1'
/** The wire harness's small delays: backoff 20..100 ms, the longest floor 300 ms. */
const POLICY: LinkPolicyInput = FAST
/**
 * How long the simulator must see no upgrade after a supersede: three times the longest delay
 * the policy could put before a (wrong) reconnect, so one would have shown up well within it.
 */
const NO_RECONNECT_WINDOW_MS =
  3 *
  Math.max(
    POLICY.reconnect!.maxDelayMs!,
    POLICY.reconnect!.goingAwayFloorMs![1],
    POLICY.reconnect!.serviceRestartFloorMs![1],
    POLICY.reconnect!.tryAgainLaterFloorMs![1],
  )

const HTML = `<!doctype html><html><head><meta charset="utf-8"><title>phoenix-link in a browser</title><link rel="icon" href="data:,"></head>
<body><script type="module" src="/page.js"></script></body></html>`

/** Sends one command to the page's driver or the worker's and answers what it answered. */
type Caller = <K extends CommandName>(cmd: K, ...args: Parameters<Commands[K]>) => Promise<Awaited<ReturnType<Commands[K]>>>

/** The page's global scope as seen from page.evaluate (the Node tsconfig has no DOM lib). */
type FixtureWindow = { fixture?: FixtureApi }

/** The page's and the worker's bundles, by served path; made once for the file (with or without Chromium). */
let bundled: BuildResult<{ write: false; metafile: true }>
const files = new Map<string, string>()

beforeAll(async () => {
  bundled = await build({
    entryPoints: { page: `${FIXTURE}page.ts`, worker: `${FIXTURE}worker.ts` },
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    write: false,
    outdir: '/bundles',
    metafile: true,
    logLevel: 'silent',
  })
  for (const out of bundled.outputFiles) files.set(out.path.replace(/^.*\//, '/'), out.text)
}, 60_000)

afterAll(async () => {
  await stopEsbuild()
})

describe('the main entry bundled for the browser', () => {
  it('has no esbuild warning or error, and nothing Node-only in it', () => {
    expect(bundled.errors).toEqual([])
    expect(bundled.warnings).toEqual([])
    const inputs = Object.keys((bundled.metafile as Metafile).inputs)
    expect(inputs.some((i) => i.endsWith('src/index.ts'))).toBe(true)
    expect(inputs.filter((i) => /(^|\/)src\/node\/|node_modules\/ws\/|^node:/.test(i))).toEqual([])
    expect([...files.keys()].sort()).toEqual(['/page.js', '/worker.js'])
  })
})

describe.skipIf(!HAVE_CHROMIUM)('the link in headless Chromium, against the simulator', () => {
  let browser: Browser

  beforeAll(async () => {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
    })
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
  })

  /** What one test opened, released by afterEach in reverse order. */
  let opened: { sim: PlatformSimulator; server: Server; sockets: Set<Socket>; context: BrowserContext; page: Page } | null = null

  afterEach(async () => {
    const o = opened
    opened = null
    if (!o) return
    // The links first (their sockets close with 1000), then the browser, the simulator, the page server.
    await o.page
      .evaluate(async () => {
        const f = (globalThis as unknown as FixtureWindow).fixture
        if (!f) return
        await Promise.all([f.page.run({ cmd: 'disposeAll' }), f.worker.run({ cmd: 'disposeAll' }).catch(() => 0)])
      })
      .catch(() => {})
    await o.context.close()
    await o.sim.stop()
    await closeServer(o.server, o.sockets)
  })

  /** A page server on 127.0.0.1 (port 0) serving the HTML and the two bundles, every response with `Connection: close`. */
  async function servePages(): Promise<{ server: Server; sockets: Set<Socket>; origin: string }> {
    const sockets = new Set<Socket>()
    const server = createServer((req, res) => {
      const path = new URL(req.url ?? '/', 'http://page').pathname
      const body = path === '/' ? HTML : files.get(path)
      if (body === undefined) {
        res.writeHead(404, { connection: 'close' }).end()
        return
      }
      res.writeHead(200, { 'content-type': path === '/' ? 'text/html; charset=utf-8' : 'text/javascript; charset=utf-8', 'cache-control': 'no-store', connection: 'close' })
      res.end(body)
    })
    server.on('connection', (socket) => {
      sockets.add(socket)
      socket.once('close', () => sockets.delete(socket))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const address = server.address()
    if (!address || typeof address !== 'object') throw new Error('the page server has no address')
    return { server, sockets, origin: `http://127.0.0.1:${address.port}` }
  }

  /** Closes the page server and every connection the browser left on it (a preconnect included), awaiting each. */
  async function closeServer(server: Server, sockets: Set<Socket>): Promise<void> {
    const closing = [...sockets].map((s) => new Promise<void>((resolve) => (s.destroyed && s.closed ? resolve() : s.once('close', () => resolve()))))
    const closed = new Promise<void>((resolve) => server.close(() => resolve()))
    server.closeAllConnections()
    for (const s of sockets) s.destroy()
    await Promise.all([closed, ...closing])
  }

  /**
   * A simulator, a page server and a page loaded from it with the simulator's URL in its query
   * string; `where` says whose driver the caller talks to; `init` runs in the page before its
   * scripts (playwright addInitScript). The page may reach 127.0.0.1 only.
   */
  async function open(where: 'page' | 'worker', init?: () => void): Promise<{ sim: PlatformSimulator; page: Page; call: Caller; errors: string[]; log: string[]; socketUrls: string[] }> {
    const sim = await startSimulator({ agents: { [AGENT]: KEY } })
    const { server, sockets, origin } = await servePages()
    const context = await browser.newContext()
    const page = await context.newPage()
    opened = { sim, server, sockets, context, page }
    const errors: string[] = []
    const log: string[] = []
    const socketUrls: string[] = []
    page.on('pageerror', (e) => errors.push(e.message))
    page.on('console', (m) => log.push(`[${m.type()}] ${m.text()}`))
    page.on('worker', (w) => w.on('console', (m) => log.push(`[worker ${m.type()}] ${m.text()}`)))
    page.on('websocket', (ws) => socketUrls.push(ws.url()))
    if (init) await page.addInitScript(init)
    await page.route('**/*', (route) => (new URL(route.request().url()).hostname === '127.0.0.1' ? route.continue() : route.abort()))
    await page.goto(`${origin}/?sim=${encodeURIComponent(sim.url)}`)
    await page.waitForFunction(() => (globalThis as unknown as FixtureWindow).fixture !== undefined, undefined, { timeout: 10_000 })
    if (where === 'worker') expect(await page.evaluate(() => (globalThis as unknown as FixtureWindow).fixture!.worker.ready())).toBe('worker')
    const call: Caller = async (cmd, ...args) => {
      const message: Call = { cmd, args: args[0] }
      try {
        return (await page.evaluate(([target, m]) => (globalThis as unknown as FixtureWindow).fixture![target].run(m), [where, message] as const)) as never
      } catch (error) {
        throw new Error(`${where} ${cmd} failed: ${(error as Error).message}\nbrowser console:\n${log.join('\n')}`)
      }
    }
    return { sim, page, call, errors, log, socketUrls }
  }

  /** The whole scenario, through `call`; every step checked in the browser and on the simulator. */
  async function scenario(sim: PlatformSimulator, call: Caller, keyIn: { apiKeyIn?: 'param' }): Promise<void> {
    const upgrades = () => sim.upgrades.filter((u) => u.agentId === AGENT)
    const accepted = { agentId: AGENT, status: 101, outcome: 'accepted' }

    // 0. A browser's WebSocket cannot send headers: asking for the key in one is a configuration error, not a silent param.
    expect(await call('headerKey', { agentId: AGENT, apiKey: KEY })).toMatch(/^ConfigurationError: apiKeyIn: 'header' needs upgrade headers/)
    // 1. Connect, the key as a socket param (asked for, or the browser's default when apiKeyIn is left out).
    expect(await call('start', { agentId: AGENT, apiKey: KEY, policy: POLICY, ...keyIn })).toBe('idle')
    expect(await call('connect')).toBe('connected')
    expect(upgrades()).toEqual([expect.objectContaining(accepted)])
    expect(sim.live(AGENT)).toHaveLength(1)
    const first = sim.live(AGENT)[0]!
    // The simulator keeps the params minus the key: the agent id and the V2 protocol came as params.
    expect(first.params).toMatchObject({ agent_id: AGENT, vsn: '2.0.0' })
    expect(first.params).not.toHaveProperty('api_key')
    expect(first.channels.has(CONTROL)).toBe(true)
    expect(framesIn(first, 'phx_join', CONTROL)).toHaveLength(1)

    // 2. An app channel: join, a server push to the handler, a push from the browser to the server.
    expect(await call('join', { topic: ROOM, event: 'new_msg' })).toBe('joined')
    expect(first.channels.has(ROOM)).toBe(true)
    expect(framesIn(first, 'phx_join', ROOM)).toHaveLength(1)
    expect(sim.push(first, ROOM, 'new_msg', { body: 'from the server', n: 1 })).toBe(1)
    expect(await call('messages', { count: 1, timeoutMs: 4_000 })).toEqual([{ body: 'from the server', n: 1 }])
    const pushed: Array<{ socket: string; topic: string; event: string; payload: unknown }> = []
    sim.onPush(({ connection, topic, event, payload }) => {
      pushed.push({ socket: connection.id, topic, event, payload })
      return { status: 'ok', response: { echo: payload as Record<string, unknown> } }
    })
    expect(await call('push', { event: 'typing', payload: { on: true } })).toEqual({ echo: { on: true } })
    expect(pushed).toEqual([{ socket: first.id, topic: ROOM, event: 'typing', payload: { on: true } }])

    // 3. The server closes with 1000: the link reconnects by itself and rejoins the channel.
    const before3 = await call('snapshot')
    expect(before3.channel).toEqual(['joined'])
    sim.close(first, 1000)
    const back = await call('until', { state: 'connected', channel: 'joined', events: { type: 'reconnected', count: 1 }, timeoutMs: 5_000 })
    expect(back.states.slice(before3.states.length)).toEqual(['reconnecting', 'connecting', 'joining', 'connected'])
    expect(back.events.filter((e) => e.type === 'disconnected')).toEqual([{ type: 'disconnected', outcome: 'reconnect', reason: 'closed', terminal: false }])
    // The channel was detached with the socket and joined again on the new one.
    expect(back.channel).toEqual(['joined', 'detached', 'joined'])
    expect(first.closeSent).toEqual({ code: 1000, reason: '' })
    expect(upgrades()).toEqual([expect.objectContaining(accepted), expect.objectContaining(accepted)])
    expect(sim.live(AGENT)).toHaveLength(1)
    const second = sim.live(AGENT)[0]!
    expect(second).not.toBe(first)
    expect(framesIn(second, 'phx_join', CONTROL)).toHaveLength(1)
    expect(framesIn(second, 'phx_join', ROOM)).toHaveLength(1)
    expect(second.channels.has(ROOM)).toBe(true)
    expect(sim.push(second, ROOM, 'new_msg', { body: 'after the reconnect', n: 2 })).toBe(1)
    expect(await call('messages', { count: 2, timeoutMs: 4_000 })).toEqual([
      { body: 'from the server', n: 1 },
      { body: 'after the reconnect', n: 2 },
    ])

    // 4. A supersede ends the link for good, and nothing reconnects.
    expect(await call('runForever', { name: 'held' })).toBe('held')
    expect(await call('outcome', { name: 'held' })).toEqual({ settled: false })
    const before4 = (await call('snapshot')).states.length
    expect(sim.supersede(AGENT)).toBe(1)
    const ended = await call('until', { state: 'terminated', timeoutMs: 4_000 })
    expect(ended.lastReason).toBe('superseded')
    expect(ended.events.filter((e) => e.type === 'disconnected').at(-1)).toEqual({ type: 'disconnected', outcome: 'terminated', reason: 'superseded', terminal: true })
    const rejected = { settled: true, ok: false, name: 'AgentDisconnectedError', agentDisconnected: true, reasonKind: 'superseded', message: expect.stringContaining('agent disconnected') }
    expect(await call('outcome', { name: 'held', waitMs: 4_000 })).toEqual(rejected)
    // Called after the end: rejects at once, and starts nothing.
    await call('runForever', { name: 'after' })
    expect(await call('outcome', { name: 'after', waitMs: 1_000 })).toEqual(rejected)
    expect(second.superseded).toMatchObject({ reason: 'session.already_connected', target_socket_id: second.id })
    expect(second.closeSent).toEqual({ code: sim.flavor.supersede, reason: '' })
    await sim.settled(AGENT)
    // A wrong reconnect would reach the simulator within the policy's delays: wait for one, bounded.
    const quiet = await sim.waitFor(() => upgrades().length > 2, { timeoutMs: NO_RECONNECT_WINDOW_MS, what: 'an upgrade after the supersede' }).then(
      () => `an upgrade after the supersede: ${JSON.stringify(upgrades().slice(2))}`,
      (error: Error) => error.message,
    )
    expect(quiet).toMatch(/timed out after \d+ ms waiting for an upgrade after the supersede/)
    expect(upgrades()).toHaveLength(2)
    expect(sim.live(AGENT)).toEqual([])
    const still: Snapshot = await call('snapshot')
    expect(still.state).toBe('terminated')
    expect(still.states.slice(before4)).toEqual(['terminated'])

    // 5. A fresh link, then disconnect(): stopped, and the server saw the client's normal close.
    expect(await call('start', { agentId: AGENT, apiKey: KEY, policy: POLICY })).toBe('idle')
    expect(await call('connect')).toBe('connected')
    expect(upgrades()).toHaveLength(3)
    expect(upgrades()[2]).toMatchObject(accepted)
    const fresh = sim.live(AGENT)[0]!
    expect(fresh).not.toBe(second)
    await call('runForever', { name: 'fresh' })
    expect(await call('outcome', { name: 'fresh' })).toEqual({ settled: false })
    expect(await call('disconnect')).toBe('stopped')
    expect(await call('outcome', { name: 'fresh', waitMs: 1_000 })).toEqual({ settled: true, ok: true })
    const stopped = await call('snapshot')
    expect(stopped.state).toBe('stopped')
    expect(stopped.states).toEqual(['connecting', 'joining', 'connected', 'stopping', 'stopped'])
    expect(stopped.events.filter((e) => e.type === 'disconnected')).toEqual([{ type: 'disconnected', outcome: 'stopped', reason: 'graceful', terminal: false }])
    await sim.settled(AGENT)
    expect(framesIn(fresh, 'phx_leave', CONTROL)).toHaveLength(1)
    expect(fresh.closeSent).toBeNull()
    expect(fresh.closeSeen).toMatchObject({ code: 1000 })
    expect(upgrades()).toHaveLength(3)
  }

  /** The sockets Chromium opened (playwright sees a worker's too): three, to loopback, the key in the query string. */
  function expectSocketUrls(urls: string[]): void {
    expect(urls).toHaveLength(3)
    for (const url of urls) {
      const u = new URL(url)
      expect(`${u.origin}${u.pathname}`).toBe(`${opened!.sim.url}/websocket`)
      expect(u.hostname).toBe('127.0.0.1')
      expect(u.searchParams.get('api_key')).toBe(KEY)
      expect(u.searchParams.get('agent_id')).toBe(AGENT)
    }
  }

  it('on a page: connects, carries a channel, reconnects after a 1000, ends on a supersede, stops on disconnect', async () => {
    const { sim, call, errors, socketUrls } = await open('page')
    await scenario(sim, call, { apiKeyIn: 'param' })
    expectSocketUrls(socketUrls)
    expect(errors).toEqual([])
  })

  it('in a dedicated Web Worker: the same scenario, apiKeyIn left out (the key goes as a param by default)', async () => {
    const { sim, call, errors, socketUrls } = await open('worker')
    // The worker has its own driver: it has made no link yet (the page made none either).
    await expect(call('snapshot')).rejects.toThrow(/worker snapshot failed: .*no link: call start first/)
    // apiKeyIn left out: a worker's WebSocket cannot send headers, so the key goes as a param by default.
    await scenario(sim, call, {})
    expectSocketUrls(socketUrls)
    expect(errors).toEqual([])
  })

  it("on a page: disconnect(), as a pagehide handler calls it, has closed the socket (1000, after its phx_leave) before the handler's task ends, a push just written too (the send buffer not empty)", async () => {
    // Records every WebSocket the page makes, before the bundle captures the constructor.
    const { sim, call } = await open('page', () => {
      // Runs in the page; the Node-side tsconfig has no DOM types, so the constructor is typed by hand.
      type Ctor = new (...args: unknown[]) => object
      const g = globalThis as unknown as { WebSocket: Ctor; socketsMade: object[] }
      const Native = g.WebSocket
      const made: object[] = []
      g.socketsMade = made
      g.WebSocket = class extends Native {
        constructor(...args: unknown[]) {
          super(...args)
          made.push(this)
        }
      }
    })
    const inbound = (socket: SimConnection) => socket.frames.filter((f) => f.dir === 'in' && f.frame?.event !== 'heartbeat').map((f) => `${f.frame?.topic === CONTROL ? 'control' : f.frame?.topic} ${f.frame?.event}`)
    expect(await call('start', { agentId: AGENT, apiKey: KEY, policy: POLICY })).toBe('idle')
    expect(await call('connect')).toBe('connected')
    const first = sim.live(AGENT)[0]!
    // 2 is CLOSING: closed in the task of the call.
    expect(await call('disconnectInTask', {})).toEqual({ state: 'stopped', readyStates: [2] })
    await sim.waitFor(() => first.state === 'closed')
    expect(inbound(first)).toEqual(['control phx_join', 'control phx_leave'])
    expect(first.closeSeen).toMatchObject({ code: 1000 })

    // A push of 1 MB just written (Chromium's bufferedAmount is not 0 after a send): phoenix.js's
    // teardown alone polled that buffer in 150 ms steps before its close.
    expect(await call('start', { agentId: AGENT, apiKey: KEY, policy: POLICY })).toBe('idle')
    expect(await call('connect')).toBe('connected')
    expect(await call('join', { topic: ROOM, event: 'new_msg' })).toBe('joined')
    const second = sim.live(AGENT)[0]!
    expect(await call('disconnectInTask', { pushBytes: 1_000_000 })).toEqual({ state: 'stopped', readyStates: [3, 2] })
    await sim.waitFor(() => second.state === 'closed')
    expect(inbound(second)).toEqual(['control phx_join', `${ROOM} phx_join`, `${ROOM} last`, 'control phx_leave'])
    expect(second.closeSeen).toMatchObject({ code: 1000 })
  })

  it('on a page: pagehide, pageshow, visibilitychange and resume change nothing, and no Socket listens for them', async () => {
    // Records every listener for the page lifecycle added to window or document, by anyone.
    const { sim, call, page } = await open('page', () => {
      const seen: string[] = []
      ;(globalThis as unknown as { pageListeners: string[] }).pageListeners = seen
      const add = EventTarget.prototype.addEventListener
      const g = globalThis as unknown as { document: EventTarget }
      EventTarget.prototype.addEventListener = function (this: EventTarget, type: string, ...rest: [never, never]) {
        if ((this === (globalThis as unknown) || this === g.document) && ['pagehide', 'pageshow', 'visibilitychange', 'resume'].includes(type)) seen.push(type)
        return add.call(this, type, ...rest)
      } as typeof add
    })
    const upgrades = () => sim.upgrades.filter((u) => u.agentId === AGENT)
    expect(await call('start', { agentId: AGENT, apiKey: KEY, policy: POLICY })).toBe('idle')
    expect(await call('connect')).toBe('connected')
    expect(await call('join', { topic: ROOM, event: 'new_msg' })).toBe('joined')
    // A second transport (a second phoenix.js Socket): neither registered a page listener.
    sim.close(sim.live(AGENT)[0]!, 1000)
    await call('until', { state: 'connected', channel: 'joined', events: { type: 'reconnected', count: 1 }, timeoutMs: 5_000 })
    expect(upgrades()).toHaveLength(2)
    const pageState = () =>
      page.evaluate(() => {
        const g = globalThis as unknown as { pageListeners: string[] }
        return { listeners: g.pageListeners, ownAddEventListener: Object.getOwnPropertyDescriptor(globalThis, 'addEventListener') !== undefined }
      })
    // Nothing registered, and window.addEventListener is EventTarget's again (no own property left behind).
    expect(await pageState()).toEqual({ listeners: [], ownAddEventListener: false })

    const live = sim.live(AGENT)[0]!
    const before = await call('snapshot')
    // What phoenix.js's own listeners would act on: pagehide closes the socket at once (its
    // disconnect() passes no code, so the server reads 1005, no status), pageshow and
    // visibilitychange would open one again.
    await page.evaluate(() => {
      const g = globalThis as unknown as { document: EventTarget; dispatchEvent(e: Event): boolean }
      g.dispatchEvent(new Event('pagehide'))
      g.dispatchEvent(new Event('pageshow'))
      g.document.dispatchEvent(new Event('visibilitychange'))
      g.document.dispatchEvent(new Event('resume'))
    })
    // A push and its reply after the events, on the same socket: a close they caused would reach
    // the server before it (one TCP stream).
    const pushed: string[] = []
    sim.onPush(({ connection }) => {
      pushed.push(connection.id)
      return { status: 'ok', response: { ok: true } }
    })
    expect(await call('push', { event: 'typing', payload: { on: true } })).toEqual({ ok: true })
    expect(pushed).toEqual([live.id])
    expect(live.closeSeen).toBeNull()
    expect(sim.live(AGENT)).toEqual([live])
    expect(upgrades()).toHaveLength(2)
    const after = await call('snapshot')
    expect(after.state).toBe('connected')
    expect(after.events.slice(before.events.length)).toEqual([])
    expect(await pageState()).toEqual({ listeners: [], ownAddEventListener: false })
  })

  it("on a page whose window has an addEventListener of its own (a library wrapped it): each Socket leaves that same function in place, and it hears no page listener", async () => {
    const { sim, call, page } = await open('page', () => {
      // An own property over EventTarget's, as a page script that wraps window.addEventListener makes.
      const seen: string[] = []
      const g = globalThis as unknown as { pageListeners: string[]; ownAdd: unknown }
      g.pageListeners = seen
      const add = EventTarget.prototype.addEventListener
      // Playwright's own page scripts add input listeners; only the page lifecycle and the probe count.
      const own = function (this: EventTarget, type: string, ...rest: [never, never]) {
        if (['pagehide', 'pageshow', 'visibilitychange', 'resume', 'message'].includes(type)) seen.push(type)
        return add.call(this, type, ...rest)
      }
      g.ownAdd = own
      Object.defineProperty(globalThis, 'addEventListener', { value: own, configurable: true, writable: true, enumerable: false })
    })
    const pageState = () =>
      page.evaluate(() => {
        const g = globalThis as unknown as { pageListeners: string[]; ownAdd: unknown }
        const d = Object.getOwnPropertyDescriptor(globalThis, 'addEventListener')
        return { listeners: [...g.pageListeners], same: d?.value === g.ownAdd, writable: d?.writable, enumerable: d?.enumerable }
      })
    expect(await call('start', { agentId: AGENT, apiKey: KEY, policy: POLICY })).toBe('idle')
    expect(await call('connect')).toBe('connected')
    sim.close(sim.live(AGENT)[0]!, 1000)
    await call('until', { state: 'connected', events: { type: 'reconnected', count: 1 }, timeoutMs: 5_000 })
    expect(sim.upgrades.filter((u) => u.agentId === AGENT && u.outcome === 'accepted')).toHaveLength(2)
    // Two Sockets made: the page's own function is back, as it was, and phoenix.js added nothing through it.
    expect(await pageState()).toEqual({ listeners: [], same: true, writable: true, enumerable: false })
    // And it still serves the page.
    await page.evaluate(() => (globalThis as unknown as EventTarget).addEventListener('message', () => {}))
    expect((await pageState()).listeners).toEqual(['message'])
  })

  it('on a page where reading sessionStorage throws (as in a sandboxed iframe without allow-same-origin): connects, reconnects', async () => {
    const { sim, call, page } = await open('page', () => {
      Object.defineProperty(globalThis, 'sessionStorage', {
        configurable: true,
        get() {
          throw new DOMException("Failed to read the 'sessionStorage' property from 'Window': The document is sandboxed and lacks the 'allow-same-origin' flag.", 'SecurityError')
        },
      })
    })
    // The page's sessionStorage is denied, as a sandboxed frame's is.
    expect(await page.evaluate(() => {
      try {
        void (globalThis as unknown as { sessionStorage: unknown }).sessionStorage
        return 'readable'
      } catch (error) {
        return (error as Error).name
      }
    })).toBe('SecurityError')
    expect(await call('start', { agentId: AGENT, apiKey: KEY, policy: POLICY })).toBe('idle')
    expect(await call('connect')).toBe('connected')
    sim.close(sim.live(AGENT)[0]!, 1000)
    const back = await call('until', { state: 'connected', events: { type: 'reconnected', count: 1 }, timeoutMs: 5_000 })
    expect(back.events.filter((e) => e.type === 'disconnected')).toEqual([{ type: 'disconnected', outcome: 'reconnect', reason: 'closed', terminal: false }])
    expect(sim.upgrades.filter((u) => u.agentId === AGENT && u.outcome === 'accepted')).toHaveLength(2)
  })

  it('on a page: a close code no peer may send (1004), which Chromium passes on where ws fails the connection, is reported as the same drop as in Node', async () => {
    const { sim, call } = await open('page')
    expect(await call('start', { agentId: AGENT, apiKey: KEY, policy: POLICY })).toBe('idle')
    expect(await call('connect')).toBe('connected')
    // A close frame of 1004 written on the TCP socket as it is (ws's own close() refuses the code).
    const conn = sim.live(AGENT)[0]! as unknown as { ws: { _socket: { write(b: Buffer): void; end(): void } } }
    conn.ws._socket.write(Buffer.from([0x88, 0x02, 0x03, 0xec]))
    conn.ws._socket.end()
    const back = await call('until', { state: 'connected', events: { type: 'reconnected', count: 1 }, timeoutMs: 5_000 })
    expect(back.events.filter((e) => e.type === 'disconnected')).toEqual([{ type: 'disconnected', outcome: 'reconnect', reason: 'dropped', terminal: false }])
  })

  for (const where of ['page', 'worker'] as const) {
    it(`${where === 'page' ? 'on a page' : 'in a Web Worker'}: ping() of a live socket is answered; of a server that stopped answering, it ends the socket within its timeout and the link reconnects (the \`online\` event's half-open socket)`, async () => {
      const { sim, call } = await open(where)
      expect(await call('start', { agentId: AGENT, apiKey: KEY, policy: POLICY })).toBe('idle')
      expect(await call('connect')).toBe('connected')
      const live = sim.live(AGENT)[0]!
      expect(await call('ping', {})).toEqual({ outcome: 'alive' })
      expect(live.heartbeats).toBe(1)
      sim.stall(live)
      const started = performance.now()
      expect(await call('ping', { timeoutMs: 300 })).toEqual({ outcome: 'lost', reason: 'timed-out', disconnected: 'reconnect' })
      expect(performance.now() - started).toBeLessThan(3_000)
      const back = await call('until', { state: 'connected', events: { type: 'reconnected', count: 1 }, timeoutMs: 5_000 })
      expect(back.events.filter((e) => e.type === 'disconnected')).toEqual([{ type: 'disconnected', outcome: 'reconnect', reason: 'timed-out', terminal: false }])
      expect(sim.upgradeCounts(AGENT).upgrades).toBe(2)
    })

    it(`${where === 'page' ? 'on a page' : 'in a Web Worker'}: disconnect() resolves on the close event, and from a server that stopped reading after transport.closeTimeoutMs, not the browser's own 60 s`, async () => {
      const { sim, call } = await open(where)
      // A close bound longer than phoenix.js's own 1.5 s of polling, so the bound is what ends the wait.
      const closeTimeoutMs = 2_000
      const policy = { ...POLICY, transport: { ...POLICY.transport, closeTimeoutMs } }
      // A server that answers: the close event ends the wait, well before the bound.
      expect(await call('start', { agentId: AGENT, apiKey: KEY, policy })).toBe('idle')
      expect(await call('connect')).toBe('connected')
      const answering = performance.now()
      expect(await call('disconnect')).toBe('stopped')
      expect(performance.now() - answering).toBeLessThan(closeTimeoutMs / 2)
      expect(await call('start', { agentId: AGENT, apiKey: KEY, policy })).toBe('idle')
      expect(await call('connect')).toBe('connected')
      const live = sim.live(AGENT)[0]!
      // The server stops reading and answering: no leave reply, no close frame back.
      sim.stall(live)
      const started = performance.now()
      expect(await call('disconnect')).toBe('stopped')
      const tookMs = performance.now() - started
      // The leave counts as done once sent (phoenix.js 1.8.16 channel.leave(), docs/field-notes.md),
      // so the wait is the close's closeTimeoutMs (phoenix.js's teardown polls the socket's state
      // for 1.5 s of it, socket.js waitForSocketClosed); Chromium's own closing handshake would
      // wait 60 s. The upper bound keeps leaveTimeoutMs of slack for a slow machine.
      const leaveTimeoutMs = POLICY.connection!.leaveTimeoutMs!
      expect(tookMs).toBeGreaterThanOrEqual(closeTimeoutMs)
      expect(tookMs).toBeLessThan(leaveTimeoutMs + closeTimeoutMs + 500)
      const stopped = await call('snapshot')
      expect(stopped.state).toBe('stopped')
      expect(stopped.events.filter((e) => e.type === 'disconnected')).toEqual([{ type: 'disconnected', outcome: 'stopped', reason: 'graceful', terminal: false }])
      // The browser did send the leave and close frames; the stalled server read neither.
      expect(live.closeSeen).toBeNull()
    })
  }
})
