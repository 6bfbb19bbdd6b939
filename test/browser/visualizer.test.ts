/**
 * The visualizer in headless Chromium (Debian's chromium driven by playwright-core): every chart
 * drawn with every state visible and clickable; the live page following a link through a
 * reconnect and a supersede, checked against the link's own state; a recorded trace replayed to
 * the same states, forward and back; the dashboard showing a connection appear and disappear.
 * Each test saves a screenshot to docs/ (docs/visualize.md shows them) when it differs from the
 * one there in more than 1% of its pixels, so the pictures stay current without a test run
 * rewriting them for a changed step number or timestamp.
 *
 * Skips, saying so, where Chromium is absent (CHROMIUM_PATH, else /usr/bin/chromium); .ci/run
 * installs it so CI runs these.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chromium, type Browser, type Page } from 'playwright-core'
import { ensurePageBuilt, servePage } from '../../src/node/visualize/server.js'
// What a host imports from 'phoenix-link' to trace and show its own links.
import { startVisualizer, traceLink, traceToFile, type TraceRecord } from '../../src/node/visualize/index.js'
import { chartsData } from '../../src/node/model/visual.js'
import { startSimulator } from '../../src/node/server/index.js'
import { next, untilState, useWorld } from '../support/wire.js'
import { until } from '../support/until.js'

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const HAVE_CHROMIUM = existsSync(CHROMIUM)
const DOCS = fileURLToPath(new URL('../../docs/', import.meta.url))
if (!HAVE_CHROMIUM) console.warn(`[browser] skipping the visualizer tests: no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`)

/** Share of pixels (0..1) that differ between two PNGs of the same size (1 when the sizes differ), compared in the page. */
function differingShare(page: Page, a: Buffer, b: Buffer): Promise<number> {
  return page.evaluate(
    async ([first, second]) => {
      // The Node tsconfig has no DOM lib: the page's globals, typed by hand.
      type Ctx = { drawImage(i: unknown, x: number, y: number): void; getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray } }
      type Img = { width: number; height: number; decode(): Promise<void>; src: string }
      const g = globalThis as unknown as { Image: new () => Img; OffscreenCanvas: new (w: number, h: number) => { getContext(kind: '2d'): Ctx } }
      const load = async (base64: string) => {
        const image = new g.Image()
        image.src = `data:image/png;base64,${base64}`
        await image.decode()
        return image
      }
      const [x, y] = await Promise.all([load(first), load(second)])
      if (x.width !== y.width || x.height !== y.height) return 1
      const pixels = (image: Img) => {
        const context = new g.OffscreenCanvas(image.width, image.height).getContext('2d')
        context.drawImage(image, 0, 0)
        return context.getImageData(0, 0, image.width, image.height).data
      }
      const [p, q] = [pixels(x), pixels(y)]
      let differing = 0
      for (let i = 0; i < p.length; i += 4) if (p[i] !== q[i] || p[i + 1] !== q[i + 1] || p[i + 2] !== q[i + 2]) differing++
      return differing / (p.length / 4)
    },
    [a.toString('base64'), b.toString('base64')] as const,
  )
}

/**
 * With `UPDATE_SCREENSHOTS=1` (npm run docs:screenshots), writes the page's screenshot to
 * docs/`name` unless the one there differs in at most 1% of its pixels. A plain test run writes
 * nothing: a test must not change tracked files.
 */
async function saveScreenshot(page: Page, name: string): Promise<void> {
  if (process.env.UPDATE_SCREENSHOTS !== '1') return
  const file = join(DOCS, name)
  const fresh = await page.screenshot()
  if (existsSync(file) && (await differingShare(page, readFileSync(file), fresh)) <= 0.01) return
  writeFileSync(file, fresh)
}

describe.skipIf(!HAVE_CHROMIUM)('visualizer in headless Chromium', () => {
  const world = useWorld()
  let browser: Browser
  let pageDir: string

  beforeAll(async () => {
    pageDir = ensurePageBuilt({ force: true })
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      // The flags the README gives a user, and nothing else.
      args: ['--headless', '--no-sandbox', '--disable-gpu'],
    })
  }, 120_000)

  afterAll(async () => {
    await browser?.close()
  })

  async function open(url: string): Promise<{ page: Page; errors: string[]; close: () => Promise<void> }> {
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } })
    const page = await context.newPage()
    const errors: string[] = []
    page.on('pageerror', (e) => errors.push(e.message))
    // The page may talk only to the server that served it.
    await page.route('**/*', (route) => (new URL(route.request().url()).hostname === '127.0.0.1' || route.request().url().startsWith('data:') ? route.continue() : route.abort()))
    await page.goto(url)
    await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 })
    return { page, errors, close: () => context.close() }
  }

  it('phoenix-link replay FILE serves the trace in #replay until Ctrl-C; a file that is not a trace of these charts is one line and exit 1', async () => {
    const { spawn } = await import('node:child_process')
    const cli = fileURLToPath(new URL('../../src/node/cli.ts', import.meta.url))
    const dir = mkdtempSync(join(tmpdir(), 'phoenix-link-replay-'))
    const record = { link: 'A', seq: 1, at: 0, event: 'xstate.init', actor: 'connection', state: 'idle', charts: { connection: 'idle', reconnect: null, control: null, channels: {} }, lastReason: null }
    const good = join(dir, 'good.jsonl')
    writeFileSync(good, `${JSON.stringify(record)}\n${JSON.stringify({ ...record, seq: 2 })}\n`)
    const old = join(dir, 'old.jsonl')
    writeFileSync(old, `${JSON.stringify({ ...record, state: 'connected', charts: { ...record.charts, connection: { session: { online: { attached: 'connected' } } } } })}\n`)
    const run = (file: string) => {
      const child = spawn(process.execPath, ['--import', 'tsx', cli, 'replay', file, '--json'], { stdio: ['ignore', 'pipe', 'pipe'] })
      const io = { out: '', err: '' }
      child.stdout.on('data', (chunk: Buffer) => (io.out += chunk.toString()))
      child.stderr.on('data', (chunk: Buffer) => (io.err += chunk.toString()))
      return { child, io, exited: new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code))) }
    }
    const refused = run(old)
    const served = run(good)
    try {
      expect(await refused.exited).toBe(1)
      expect(refused.io.err.trim()).toBe(`phoenix-link: cannot replay ${old}: line 1: the connection chart has no state "session.online.attached.connected": a trace recorded by another version of phoenix-link cannot be replayed on these charts`)
      await until(() => served.io.out.includes('"replay"'), 30_000, 'the replay URL')
      const { url, records } = JSON.parse(served.io.out.trim().split('\n').at(-1)!) as { url: string; records: number }
      expect(records).toBe(2)
      const { page, errors, close } = await open(url)
      try {
        await expect.poll(() => page.locator('[data-testid="step-label"]').innerText()).toBe('step 1 of 2')
        expect(await page.locator('[data-testid="link-state"]').innerText()).toBe('idle')
        expect(errors).toEqual([])
      } finally {
        await close()
      }
      served.child.kill('SIGINT')
      expect(await served.exited).toBe(0)
    } finally {
      for (const { child } of [refused, served]) if (child.exitCode === null) child.kill('SIGKILL')
      rmSync(dir, { recursive: true, force: true })
    }
  }, 120_000)

  it('opened as a file (file://, where the browser runs no module script) the page says it must be served; served, it says nothing of it', async () => {
    const viz = await startVisualizer()
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } })
    try {
      const page = await context.newPage()
      await page.route('**/*', (route) => (route.request().url().startsWith('file:') || route.request().url().startsWith('data:') ? route.continue() : route.abort()))
      await page.goto(pathToFileURL(join(ensurePageBuilt(), 'index.html')).href)
      await expect.poll(() => page.locator('[data-testid="file-warning"]').isVisible()).toBe(true)
      expect(await page.locator('[data-testid="file-warning"]').innerText()).toMatch(/^This page must be served, not opened as a file/)
      const { page: served, errors, close } = await open(`${viz.url}#charts`)
      try {
        expect(await served.locator('[data-testid="file-warning"]').isVisible()).toBe(false)
        expect(errors).toEqual([])
      } finally {
        await close()
      }
    } finally {
      await context.close()
      await viz.close()
    }
  })

  it('draws every chart with every state visible, and a click shows its transitions and rules', async () => {
    const viz = await startVisualizer()
    const { page, errors, close } = await open(`${viz.url}#charts`)
    try {
      for (const chart of chartsData()) {
        const states = chart.states.filter((s) => s.path !== '(root)')
        for (const state of states) {
          const node = page.locator(`[data-chart="${chart.name}"] [data-state="${state.path}"]`)
          expect(await node.count(), `${chart.name} ${state.path} drawn`).toBe(1)
          const box = await node.boundingBox()
          expect(box && box.width > 0 && box.height > 0, `${chart.name} ${state.path} visible`).toBe(true)
        }
      }
      // Each labelled arrow is found under the number the page uses to mark the last transition.
      for (const chart of chartsData()) {
        const drawn = await page.evaluate(
          (name) => {
            // Runs in the page; the Node-side tsconfig has no DOM types, so the page's document is typed by hand.
            type El = { getAttribute(n: string): string | null; textContent: string | null }
            const doc = (globalThis as unknown as { document: { querySelectorAll(selector: string): ArrayLike<El> } }).document
            return Array.from(doc.querySelectorAll(`[data-chart="${name}"] g.edgeLabel [data-id]`)).map((el) => [el.getAttribute('data-id'), (el.textContent ?? '').replace(/\s+/g, ' ').trim()])
          },
          chart.name,
        )
        const byId = new Map(drawn as Array<[string, string]>)
        chart.edges.forEach((edge, i) => {
          if (edge.label) expect(byId.get(`edge${i}`), `${chart.name} edge${i} ${edge.from} -> ${edge.to}`).toBe(edge.label)
        })
      }
      // Legible at 1400 px: every label at least 11 px as drawn, none cut by its box or by the diagram.
      const legibility = await page.evaluate(() => {
        type Rect = { left: number; right: number; top: number; bottom: number; width: number }
        type El = { textContent: string | null; getBoundingClientRect(): Rect; closest(s: string): El | null; scrollWidth: number; clientWidth: number }
        type Svg = El & { viewBox: { baseVal: { width: number } }; querySelectorAll(s: string): ArrayLike<El> }
        const g = globalThis as unknown as { document: { querySelectorAll(s: string): ArrayLike<El & { dataset: { chart: string }; querySelector(s: string): Svg }> }; getComputedStyle(e: El): { fontSize: string } }
        return Array.from(g.document.querySelectorAll('.chart')).map((chart) => {
          const svg = chart.querySelector('svg')
          const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width
          const box = svg.getBoundingClientRect()
          const problems: string[] = []
          let smallest = Infinity
          let labels = 0
          const drawn: Array<{ text: string; r: Rect }> = []
          for (const label of Array.from(svg.querySelectorAll('.edgeLabel, .nodeLabel, text'))) {
            const text = (label.textContent ?? '').trim()
            if (text === '') continue
            labels++
            const px = Number.parseFloat(g.getComputedStyle(label).fontSize) * scale
            smallest = Math.min(smallest, px)
            const r = label.getBoundingClientRect()
            const frame = label.closest('foreignObject')?.getBoundingClientRect()
            if (frame && (r.right > frame.right + 1 || r.bottom > frame.bottom + 1 || label.scrollWidth > label.clientWidth + 1)) problems.push(`"${text}" cut by its box`)
            if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1) problems.push(`"${text}" outside the diagram`)
            // Each label once: its innermost element (a label's box holds a span of the same class).
            if (r.width > 0 && (label as unknown as { querySelector(s: string): unknown }).querySelector('.edgeLabel, .nodeLabel, text') === null) drawn.push({ text, r })
          }
          // No label drawn over another (more than a pixel each way: boxes of adjacent lines touch).
          for (let i = 0; i < drawn.length; i++) {
            for (let j = i + 1; j < drawn.length; j++) {
              const a = drawn[i]!.r
              const b = drawn[j]!.r
              const x = Math.min(a.right, b.right) - Math.max(a.left, b.left)
              const y = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top)
              if (x > 1 && y > 1) problems.push(`"${drawn[i]!.text}" over "${drawn[j]!.text}" (${Math.round(x)} x ${Math.round(y)} px)`)
            }
          }
          return { chart: chart.dataset.chart, labels, smallest: Math.round(smallest * 10) / 10, problems }
        })
      })
      for (const chart of legibility) {
        expect(chart.labels, `${chart.chart} has labels`).toBeGreaterThan(2)
        expect(chart.smallest, `${chart.chart}: smallest label in px`).toBeGreaterThanOrEqual(11)
        expect(chart.problems, chart.chart).toEqual([])
      }
      await page.locator('[data-chart="connection"] [data-state="session.reconnecting.waiting"]').click()
      await expect.poll(() => page.locator('[data-testid="details"]').innerText()).toContain('reconnect.due')
      await page.locator('#close-details').click()
      await page.locator('[data-chart="connection"] [data-state="session"]').click({ position: { x: 20, y: 8 } })
      const details = await page.locator('[data-testid="details"]').innerText()
      expect(details).toContain('control.supersede')
      expect(details).toContain('A supersede push ends the session for good')
      // The panel's table fits the panel: long guard and action names wrap rather than run off its edge.
      const fit = await page.locator('[data-testid="details"]').evaluate((aside) => ({ table: aside.querySelector('table')?.scrollWidth ?? 0, panel: aside.clientWidth }))
      expect(fit.table, `the details table (${fit.table} px) within the panel (${fit.panel} px)`).toBeLessThanOrEqual(fit.panel)
      await saveScreenshot(page, 'visualize-charts.png')
      expect(errors).toEqual([])
    } finally {
      await close()
      await viz.close()
    }
  }, 60_000)

  it('live: follows a link through a reconnect and a supersede, agreeing with the link', async () => {
    const viz = await startVisualizer()
    const sim = await world().sim()
    const link = world().link(sim)
    const stop = traceLink(link, 'agent-1', (r) => viz.publish(r))
    const { page, errors, close } = await open(`${viz.url}#live`)
    const shown = () => page.locator('[data-testid="link-state"]').innerText()
    try {
      await link.connect()
      await expect.poll(shown).toBe('connected')
      expect(link.state).toBe('connected')
      await expect.poll(() => page.locator('[data-chart="connection"] [data-state="session.online.attached.live.connected"].active').count()).toBe(1)

      // Two app channels, one refused: the Channel list picks which one the channel chart shows.
      sim.onJoin('room:refused', { reply: 'error', response: { reason: 'unauthorized' } })
      const joined = link.channel('room:ok')
      const refused = link.channel('room:refused')
      await until(() => joined.status === 'joined' && refused.status === 'dropped', 5_000, 'room:ok joined and room:refused dropped')
      const channelState = (path: string) => page.locator(`[data-chart="channel"] [data-state="${path}"].active`).count()
      await expect.poll(() => page.locator('[data-testid="channel-select"] option').allInnerTexts()).toEqual(['room:ok', 'room:refused'])
      await expect.poll(() => channelState('attached.live.joined')).toBe(1)
      await page.locator('[data-testid="channel-select"]').selectOption('room:refused')
      await expect.poll(() => channelState('dropped')).toBe(1)
      expect(await channelState('attached.live.joined')).toBe(0)
      await page.locator('[data-testid="channel-select"]').selectOption('room:ok')
      await expect.poll(() => channelState('attached.live.joined')).toBe(1)

      const reconnected = next(link, 'reconnected')
      sim.close({ agent: 'agent-1' }, 1001)
      await reconnected
      await expect.poll(() => page.locator('[data-testid="last-reason"]').innerText()).toContain('1001')
      await expect.poll(shown).toBe('connected')
      // The last transition is marked: the arrow into connected (control.joinOk) in the connection chart.
      await expect.poll(() => page.locator('[data-chart="connection"] path.last').count()).toBe(1)
      const lastLabel = page.locator('[data-chart="connection"] .last:not(path)')
      expect(await lastLabel.first().textContent()).toContain('control.joinOk')

      sim.supersede('agent-1')
      await untilState(link, 'terminated')
      await expect.poll(shown).toBe('terminated')
      await expect.poll(() => page.locator('[data-chart="connection"] [data-state="terminated"].active').count()).toBe(1)
      expect(await page.locator('[data-testid="last-reason"]').innerText()).toContain('superseded')
      await saveScreenshot(page, 'visualize-live.png')
      expect(errors).toEqual([])
    } finally {
      stop()
      await close()
      await viz.close()
    }
  }, 60_000)

  it('live: a page left open while the command starts again on the same port shows the new run alone, not a mix of the two', async () => {
    const record = (link: string, seq: number, state: 'idle' | 'stopped') =>
      ({ link, seq, at: 0, event: 'host.connect', actor: 'connection', state, charts: { connection: state, reconnect: null, control: null, channels: {} }, lastReason: null }) as TraceRecord
    const first = await startVisualizer()
    const port = Number(new URL(first.url).port)
    for (let seq = 1; seq <= 6; seq++) first.publish(record('A', seq, 'idle'))
    const { page, errors, close } = await open(`${first.url}#live`)
    const options = () => page.locator('[data-testid="link-select"] option').allInnerTexts()
    let second: Awaited<ReturnType<typeof startVisualizer>> | null = null
    try {
      await expect.poll(options).toEqual(['A'])
      await expect.poll(() => page.locator('[data-testid="last-step"]').innerText()).toContain('#6')
      await first.close()
      // Started again on the same port: its ids count from 1 again, under a run of its own.
      second = await startVisualizer({ port })
      second.publish(record('B', 1, 'stopped'))
      second.publish(record('B', 2, 'stopped'))
      await expect.poll(options, { timeout: 10_000 }).toEqual(['B'])
      await expect.poll(() => page.locator('[data-testid="link-state"]').innerText()).toBe('stopped')
      expect(await page.locator('[data-testid="last-step"]').innerText()).toContain('#2')
      expect(errors).toEqual([])
    } finally {
      await close()
      await first.close()
      await second?.close()
    }
  }, 60_000)

  it('replay: a recorded trace steps through the same states, forward and back; the key is not in it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'phoenix-link-trace-'))
    const file = join(dir, 'trace.jsonl')
    try {
      const sim = await world().sim()
      const link = world().link(sim)
      const stopTrace = traceToFile(link, 'agent-1', file)
      await link.connect()
      const reconnected = next(link, 'reconnected')
      sim.close({ agent: 'agent-1' }, 1000)
      await reconnected
      await link.disconnect()
      await stopTrace()
      const text = readFileSync(file, 'utf8')
      expect(text).not.toContain('key-1')
      const records = text.trim().split('\n').map((l) => JSON.parse(l) as TraceRecord)
      expect(records.at(-1)!.state).toBe('stopped')
      expect(records.map((r) => r.state)).toContain('reconnecting')

      const viz = await startVisualizer({ trace: file })
      const { page, errors, close } = await open(`${viz.url}?trace#replay`)
      try {
        await expect.poll(() => page.locator('[data-testid="step-label"]').innerText()).toBe(`step 1 of ${records.length}`)
        const seen = [await page.locator('[data-testid="link-state"]').innerText()]
        for (let i = 1; i < records.length; i++) {
          await page.locator('[data-testid="forward"]').click()
          seen.push(await page.locator('[data-testid="link-state"]').innerText())
        }
        expect(seen).toEqual(records.map((r) => r.state))
        // Steps are named as the docs name them: `after backoffDelay`, never XState's internal ids.
        const steps: string[] = []
        for (let i = 0; i < records.length; i++) {
          await page.locator('[data-testid="step"]').fill(String(i))
          steps.push(await page.locator('[data-testid="last-step"]').innerText())
        }
        expect(steps.filter((step) => step.includes('xstate.'))).toEqual([])
        expect(steps.at(0)).toBe('#1 connection: (start)')
        await page.locator('[data-testid="step"]').fill(String(records.length - 1))
        await page.locator('[data-testid="back"]').click()
        expect(await page.locator('[data-testid="step-label"]').innerText()).toBe(`step ${records.length - 1} of ${records.length}`)
        expect(await page.locator('[data-testid="link-state"]').innerText()).toBe(records.at(-2)!.state)
        await saveScreenshot(page, 'visualize-replay.png')
        // A file that is not a trace is refused in the panel, naming the bad line; the page goes on.
        await page.locator('[data-testid="trace-file"]').setInputFiles({ name: 'bad.jsonl', mimeType: 'text/plain', buffer: Buffer.from(`${text.split('\n')[0]}\n{"not": "a record"}\n`) })
        await expect.poll(() => page.locator('[data-testid="step-label"]').innerText()).toMatch(/cannot replay this file: line 2 is not a trace record/)
        await page.locator('[data-testid="trace-file"]').setInputFiles({ name: 'good.jsonl', mimeType: 'text/plain', buffer: Buffer.from(text) })
        await expect.poll(() => page.locator('[data-testid="step-label"]').innerText()).toBe(`step 1 of ${records.length}`)
        expect(errors).toEqual([])
      } finally {
        await close()
        await viz.close()
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)

  it('dashboard: a connection appears and disappears, with its presence events', async () => {
    const sim = await startSimulator({
      agents: { 'agent-1': 'key-1' },
      routes: (req: IncomingMessage, res: ServerResponse) => servePage(pageDir, req, res),
    })
    const http = sim.url.replace(/^ws/, 'http').replace(/\/socket$/, '')
    const { page, errors, close } = await open(`${http}/#dashboard`)
    const rows = page.locator('[data-testid="connections"] tbody tr[data-principal="agent-1"]')
    try {
      // The link connects once the page's feed is open, so its crossings come live (the next test has them replayed).
      await page.waitForSelector('body[data-feed="open"]', { timeout: 10_000 })
      const link = world().link(sim)
      await link.connect()
      await expect.poll(() => rows.count()).toBe(1)
      await expect.poll(() => page.locator('[data-testid="feed"] li[data-type="principal-presence"]').count()).toBeGreaterThan(0)
      await saveScreenshot(page, 'visualize-dashboard.png')
      await link.disconnect()
      await expect.poll(() => rows.count()).toBe(0)
      await expect.poll(() => page.locator('[data-testid="feed"]').innerText()).toContain('last-disconnected')
      expect(errors).toEqual([])
    } finally {
      await close()
      await sim.stop()
    }
  }, 60_000)

  it('dashboard: crossings from before the page opened are in its feed, once each (the feed starts at the first event the simulator keeps)', async () => {
    const sim = await startSimulator({
      agents: { 'agent-1': 'key-1' },
      routes: (req: IncomingMessage, res: ServerResponse) => servePage(pageDir, req, res),
    })
    const http = sim.url.replace(/^ws/, 'http').replace(/\/socket$/, '')
    const link = world().link(sim)
    await link.connect()
    await link.disconnect()
    await sim.waitFor(() => sim.presence.length === 2)
    const { page, errors, close } = await open(`${http}/#dashboard`)
    const items = page.locator('[data-testid="feed"] li')
    try {
      await expect.poll(() => items.count()).toBe(3)
      // Newest first: the report that followed last-disconnected, then the two crossings.
      const texts = await items.allInnerTexts()
      expect(texts.map((t) => t.split(' ')[0])).toEqual(['agent-aborted', 'principal-presence', 'principal-presence'])
      expect(texts[1]).toContain('last-disconnected')
      expect(texts[2]).toContain('first-connected')
      expect(errors).toEqual([])
    } finally {
      await close()
      await sim.stop()
    }
  }, 60_000)
})

describe('the visualizer servers answer odd requests without crashing', () => {
  it('a wait for a viewer ends false when the server closes, and at once once it is closed: no timer outlives it', async () => {
    const viz = await startVisualizer()
    const pending = viz.waitForViewer(60_000)
    const started = performance.now()
    await viz.close()
    expect(await pending).toBe(false)
    expect(await viz.waitForViewer(60_000)).toBe(false)
    expect(performance.now() - started).toBeLessThan(2_000)
  })

  it('a directory, a traversal, a malformed target, no trace and a Host that is not loopback (DNS rebinding) get 4xx; the server keeps serving', async () => {
    const { request } = await import('node:http')
    const raw = (port: number, target: string, host?: string) =>
      new Promise<number>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, path: target, method: 'GET', ...(host ? { headers: { host } } : {}) }, (res) => {
          res.resume()
          resolve(res.statusCode ?? 0)
        })
        req.on('error', reject)
        req.end()
      })
    const dir = mkdtempSync(join(tmpdir(), 'phoenix-link-viz-'))
    // A trace file is read when the server starts (it serves what it read): a missing one is refused then.
    await expect(startVisualizer({ trace: join(dir, 'gone.jsonl') })).rejects.toThrow(/ENOENT/)
    const viz = await startVisualizer()
    const port = Number(new URL(viz.url).port)
    const sim = await startSimulator({ routes: (req: IncomingMessage, res: ServerResponse) => servePage(ensurePageBuilt(), req, res) })
    const simPort = sim.port
    try {
      for (const p of [port, simPort]) {
        expect(await raw(p, '/assets/')).toBe(404)
        expect(await raw(p, '/assets/../../package.json')).toBe(404)
        expect(await raw(p, '/assets/%2e%2e/%2e%2e/package.json')).toBe(404)
        expect(await raw(p, '//[')).toBeGreaterThanOrEqual(400)
        expect(await raw(p, '/')).toBe(200)
      }
      expect(await raw(port, '/trace.jsonl')).toBe(404)
      for (const target of ['/', '/events', '/trace.jsonl']) expect(await raw(port, target, 'attacker.example')).toBe(403)
      expect(await raw(port, '/', `localhost:${port}`)).toBe(200)
    } finally {
      await viz.close()
      await sim.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)
})

describe.skipIf(!HAVE_CHROMIUM)('phoenix-link demo --trace and --visualize', () => {
  it('demo --trace FILE writes both links; #replay steps through each link apart', async () => {
    const { spawn } = await import('node:child_process')
    const cli = fileURLToPath(new URL('../../src/node/cli.ts', import.meta.url))
    const dir = mkdtempSync(join(tmpdir(), 'phoenix-link-demo-trace-'))
    const file = join(dir, 'demo.jsonl')
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu'] })
    try {
      const child = spawn(process.execPath, ['--import', 'tsx', cli, 'demo', '--json', '--trace', file], { stdio: ['ignore', 'pipe', 'inherit'] })
      let out = ''
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
      expect(await new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))).toBe(0)
      expect(out).toContain('every step held')
      const records = readFileSync(file, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as TraceRecord)
      const of = (link: string) => records.filter((r) => r.link === link)
      expect([of('A').at(-1)?.state, of('B').at(-1)?.state]).toEqual(['terminated', 'stopped'])
      expect(readFileSync(file, 'utf8')).not.toMatch(/demo-[0-9a-f]{24}/) // the demo's API key
      const viz = await startVisualizer({ trace: file })
      const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } })
      try {
        await page.goto(`${viz.url}?trace#replay`)
        await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 })
        await expect.poll(() => page.locator('[data-testid="link-select"] option').allInnerTexts()).toEqual(['A', 'B'])
        await expect.poll(() => page.locator('[data-testid="step-label"]').innerText()).toBe(`step 1 of ${of('A').length}`)
        // Every step named as the docs name events (`start`, `stop`, `after <delay>`), never by XState's ids.
        const named: string[] = []
        for (let i = 0; i < of('A').length; i++) {
          await page.locator('[data-testid="step"]').fill(String(i))
          named.push(await page.locator('[data-testid="last-step"]').innerText())
        }
        expect(named.filter((step) => step.includes('xstate.'))).toEqual([])
        expect(of('A').some((r) => r.event.startsWith('xstate.'))).toBe(true)
        await page.locator('[data-testid="step"]').fill(String(of('A').length - 1))
        expect(await page.locator('[data-testid="link-state"]').innerText()).toBe('terminated')
        await page.locator('[data-testid="link-select"]').selectOption('B')
        await expect.poll(() => page.locator('[data-testid="step-label"]').innerText()).toBe(`step 1 of ${of('B').length}`)
        await page.locator('[data-testid="step"]').fill(String(of('B').length - 1))
        expect(await page.locator('[data-testid="link-state"]').innerText()).toBe('stopped')
      } finally {
        await page.close()
        await viz.close()
      }
    } finally {
      await browser.close()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 120_000)


  /** `phoenix-link demo --visualize --json` in a child process: its stdout so far, and its exit. */
  async function demoVisualize() {
    const { spawn } = await import('node:child_process')
    const cli = fileURLToPath(new URL('../../src/node/cli.ts', import.meta.url))
    const child = spawn(process.execPath, ['--import', 'tsx', cli, 'demo', '--visualize', '--json'], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
    return { child, exited, out: () => out }
  }

  it('Ctrl-C while demo --visualize waits for the page stops it at once with exit 130', async () => {
    const { child, exited, out } = await demoVisualize()
    try {
      await until(() => /http:\/\/127\.0\.0\.1:\d+\/#live/.test(out()), 60_000, 'the visualizer URL')
      const stoppedAt = performance.now()
      child.kill('SIGINT')
      expect(await exited).toBe(130)
      // Not the 60 s wait for a viewer, nor the demo after it.
      expect(performance.now() - stoppedAt).toBeLessThan(5_000)
      expect(out()).toContain('"interrupted"')
      expect(out()).not.toContain('"step"')
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL')
    }
  }, 120_000)

  it('an interruption while the demo runs releases every link and server and resolves 130', async () => {
    const { runDemo } = await import('../../src/node/cli/demo.js')
    const lines: string[] = []
    let interrupt!: () => void
    const holdUntil = new Promise<void>((resolve) => (interrupt = resolve))
    const dir = mkdtempSync(join(tmpdir(), 'phoenix-link-demo-'))
    const file = join(dir, 'trace.jsonl')
    try {
      const code = await runDemo({
        json: true,
        trace: file,
        visualize: { port: 0, waitForViewerMs: 0, holdUntil },
        write: (line) => {
          lines.push(line)
          if (line.includes('3. the server closes with 1001')) interrupt()
        },
      })
      expect(code).toBe(130)
      expect(lines.filter((line) => line.includes('"interrupted"'))).toHaveLength(1)
      expect(lines.join('\n')).not.toContain('4. the server closes with 1011')
      // Interrupted before link B existed: the trace holds link A alone, and says so.
      const written = lines.map((line) => JSON.parse(line) as { source?: string; type?: string; links?: string[] }).filter((e) => e.source === 'trace' && e.type === 'written')
      expect(written.map((e) => e.links)).toEqual([['A']])
      const links = new Set(readFileSync(file, 'utf8').trim().split('\n').map((line) => (JSON.parse(line) as TraceRecord).link))
      expect([...links]).toEqual(['A'])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)

  it('waits for the page, streams both links through the whole demo, and stops on SIGINT with exit 0', async () => {
    const { child, exited, out } = await demoVisualize()
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu'] })
    try {
      await until(() => /http:\/\/127\.0\.0\.1:\d+\/#live/.test(out()), 60_000, 'the visualizer URL')
      const url = /(http:\/\/127\.0\.0\.1:\d+\/)#live/.exec(out())![1]!
      expect(out()).not.toContain('"step"') // the demo waits for the page before its first step
      const page = await browser.newPage()
      await page.goto(`${url}#live`)
      await until(() => out().includes('every step held'), 60_000, 'the demo to finish')
      await expect.poll(() => page.locator('[data-testid="link-select"] option').allInnerTexts()).toEqual(['A', 'B'])
      await page.locator('[data-testid="link-select"]').selectOption('A')
      await expect.poll(() => page.locator('[data-testid="link-state"]').innerText()).toBe('terminated')
      await page.locator('[data-testid="link-select"]').selectOption('B')
      await expect.poll(() => page.locator('[data-testid="link-state"]').innerText()).toBe('stopped')
      child.kill('SIGINT')
      expect(await exited).toBe(0)
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL')
      await browser.close()
    }
  }, 120_000)
})
