/**
 * The visualizer page. Four views, chosen by the URL hash:
 * - #charts: each shipped chart drawn with mermaid; click a state for its transitions, their
 *   guards and the DESIGN rule each encodes.
 * - #live: the charts with the current state of a running link highlighted, from `./events`.
 * - #replay: a recorded trace (`phoenix-link connect --trace FILE`), step by step, forward and back.
 * - #dashboard: the simulator's attached principals and its presence and abort feed.
 * Everything it draws is bundled at build time; it talks only to the server that served it.
 */
import mermaid from 'mermaid'
import elkLayouts from '@mermaid-js/layout-elk'
import charts from 'virtual:charts'
import type { VisualChart, VisualState } from '../src/node/model/visual.js'
import type { TraceRecord } from '../src/node/visualize/trace.js'
import { stepLabel } from '../src/node/model/labels.js'
import { MAX_TRACE_BYTES, parseTrace, statePaths } from '../src/node/visualize/parse-trace.js'

type View = 'charts' | 'live' | 'replay' | 'dashboard'
type StateValue = string | { [key: string]: StateValue }

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T
const statusText = (text: string): void => {
  $('status').textContent = text
}

/** SVG elements of each chart's states, by chart and state path. */
const nodes = new Map<string, Map<string, Element>>()
/** Each chart's arrows (path and label), in the diagram's numbering. */
const arrows = new Map<string, Array<Element[]>>()

function escapeHtml(text: string): string {
  return text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!)
}

/** The SVG element mermaid drew for a state: a leaf `g.node`, a composite `g.statediagram-cluster`. */
function findNode(svg: SVGElement, state: VisualState): Element | null {
  const id = state.mermaidId
  for (const el of svg.querySelectorAll('g[id]')) {
    const elId = el.id
    // mermaid 11 names them `<render id>-state-<state id>-<n>`.
    if (elId === id || new RegExp(`(^|-)state-${id.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}-\\d+$`).test(elId)) return el
    if (el.getAttribute('data-id') === id) return el
  }
  return null
}

function showDetails(chart: VisualChart, state: VisualState): void {
  const aside = $('details')
  const rows = state.transitions
    .map(
      (t) =>
        `<tr><td>${escapeHtml(t.event)}</td><td>${escapeHtml(t.guard || '—')}</td><td>${escapeHtml(t.target)}</td><td>${escapeHtml(t.actions || '—')}</td></tr>` +
        (t.ruleText ? `<tr><td colspan="4" class="rule">rule ${escapeHtml(t.rule)}: ${escapeHtml(t.ruleText)}</td></tr>` : ''),
    )
    .join('')
  aside.innerHTML =
    `<button id="close-details" style="float:right">×</button><h3>${escapeHtml(chart.name)}: ${escapeHtml(state.path)}</h3>` +
    (state.description ? `<p>${escapeHtml(state.description)}</p>` : '') +
    (state.entry.length ? `<p>entry <code>${escapeHtml(state.entry.join(', '))}</code></p>` : '') +
    (state.exit.length ? `<p>exit <code>${escapeHtml(state.exit.join(', '))}</code></p>` : '') +
    (rows
      ? `<table><thead><tr><th>event</th><th>guard</th><th>target</th><th>actions</th></tr></thead><tbody>${rows}</tbody></table>`
      : '<p>No transitions leave this state.</p>')
  aside.hidden = false
  $('close-details').onclick = () => (aside.hidden = true)
}

/** The smallest size a label may be drawn at, in CSS pixels. */
const MIN_LABEL_PX = 11

/**
 * Sizes a drawn chart: as wide as its box allows, never wider than mermaid drew it, and never so
 * small that its smallest label falls under {@link MIN_LABEL_PX} (the box scrolls instead);
 * "full size" draws it as mermaid did. Called again when the window or the zoom changes.
 */
function fitDiagram(box: HTMLElement, svg: SVGSVGElement): void {
  const natural = svg.viewBox.baseVal?.width || svg.getBBox().width
  if (!natural) return
  const sizes = [...svg.querySelectorAll('.edgeLabel, .nodeLabel, text')]
    .filter((el) => (el.textContent ?? '').trim() !== '')
    .map((el) => Number.parseFloat(getComputedStyle(el).fontSize))
    .filter((n) => Number.isFinite(n) && n > 0)
  const smallest = sizes.length > 0 ? Math.min(...sizes) : 16
  const style = getComputedStyle(box)
  const available = box.clientWidth - Number.parseFloat(style.paddingLeft) - Number.parseFloat(style.paddingRight)
  const scale = document.body.dataset.zoom === 'full' ? 1 : Math.max(Math.min(1, available / natural), MIN_LABEL_PX / smallest)
  svg.style.width = `${Math.ceil(natural * scale)}px`
  svg.style.maxWidth = 'none'
  svg.style.height = 'auto'
  svg.dataset.scale = String(scale)
}

/** Scrolls a chart's box sideways (never the page) so that its active state is in the middle of it. */
function revealState(node: Element | undefined): void {
  const box = node?.closest<HTMLElement>('.diagram')
  if (!node || !box || box.scrollWidth <= box.clientWidth) return
  const at = node.getBoundingClientRect()
  const frame = box.getBoundingClientRect()
  box.scrollLeft += at.left + at.width / 2 - (frame.left + frame.width / 2)
}

/** Sizes every drawn chart again. */
function fitAll(): void {
  for (const box of document.querySelectorAll<HTMLElement>('.chart .diagram')) {
    const svg = box.querySelector('svg')
    if (svg) fitDiagram(box, svg)
  }
}

async function drawCharts(): Promise<void> {
  // ELK's layered layout routes edges orthogonally and places their labels apart, and titles every
  // composite state; mermaid's default dagre layout drew labels of edges leaving a composite state
  // over each other (16 overlaps in the connection chart at 1400 px) and left composite states untitled.
  mermaid.registerLayoutLoaders(elkLayouts)
  mermaid.initialize({ startOnLoad: false, securityLevel: 'strict', theme: 'default', layout: 'elk', state: { useMaxWidth: false } })
  const main = $('charts')
  for (const chart of charts as VisualChart[]) {
    const section = document.createElement('div')
    section.className = 'chart'
    section.dataset.chart = chart.name
    section.innerHTML = `<h2>${chart.name}</h2><div class="diagram" data-testid="diagram-${chart.name}"></div>`
    main.appendChild(section)
    const { svg } = await mermaid.render(`chart-${chart.name}`, chart.mermaid)
    const box = section.querySelector('.diagram') as HTMLElement
    box.innerHTML = svg
    const el = box.querySelector('svg') as SVGSVGElement
    fitDiagram(box, el)
    const byPath = new Map<string, Element>()
    for (const state of chart.states) {
      if (state.path === '(root)') continue
      const node = findNode(el, state)
      if (!node) continue
      node.setAttribute('data-state', state.path)
      node.addEventListener('click', (event) => {
        event.stopPropagation()
        showDetails(chart, state)
      })
      byPath.set(state.path, node)
    }
    nodes.set(chart.name, byPath)
    arrows.set(
      chart.name,
      chart.edges.map((_, i) => [...el.querySelectorAll(`[data-id="edge${i}"]`)]),
    )
  }
  statusText(`${charts.length} charts drawn`)
}


/** The app channel the channel chart shows: the one chosen in the Channel list (the first topic seen by default). */
function chosenTopic(): string {
  return ($('channel-select') as HTMLSelectElement).value
}

/** Empties the Channel list (another link, another trace). */
function resetTopics(): void {
  $('channel-select').replaceChildren()
}

/** Adds the records' app channel topics the Channel list does not have yet, keeping the choice. */
function addTopics(records: readonly TraceRecord[]): void {
  const select = $('channel-select') as HTMLSelectElement
  const known = new Set([...select.options].map((option) => option.value))
  for (const topic of records.flatMap((record) => Object.keys(record.charts.channels))) {
    if (known.has(topic)) continue
    known.add(topic)
    const option = document.createElement('option')
    option.value = option.textContent = topic
    select.appendChild(option)
  }
}

/** Each drawn chart's state value in a record (the channel chart: the chosen app channel, null before it exists). */
function chartValues(record: TraceRecord): Record<string, StateValue | null> {
  return {
    connection: record.charts.connection as StateValue,
    reconnect: record.charts.reconnect as StateValue | null,
    control: record.charts.control as StateValue | null,
    channel: (record.charts.channels[chosenTopic()] ?? null) as StateValue | null,
  }
}

/**
 * The arrow that took a chart from `before` to `after`: leaves an active state of before, enters
 * one of after; among several, the one labelled with the step's event. Null when nothing moved.
 */
function lastArrow(chart: VisualChart, before: StateValue | null, after: StateValue | null, event: string): number | null {
  const was = new Set(statePaths(before))
  const is = new Set(statePaths(after))
  if ([...was].every((p) => is.has(p)) && [...is].every((p) => was.has(p))) return null
  const candidates = chart.edges
    .map((edge, index) => ({ edge, index }))
    .filter(({ edge }) => (edge.from === '[*]' || was.has(edge.from)) && is.has(edge.to) && (!was.has(edge.to) || edge.from === edge.to))
  const name = stepLabel(event)
  const best = candidates.find(({ edge }) => edge.label.startsWith(name)) ?? candidates.find(({ edge }) => edge.from !== '[*]') ?? candidates[0]
  return best ? best.index : null
}

/** How far back a chart's last transition is looked for, in records. */
const LOOKBACK = 1_000

/** The arrow of the chart's most recent state change at or before `index`, or null. */
function lastChartArrow(chart: VisualChart, records: readonly TraceRecord[], index: number): number | null {
  for (let i = index; i > 0 && i > index - LOOKBACK; i--) {
    const after = chartValues(records[i]!)[chart.name] ?? null
    const before = chartValues(records[i - 1]!)[chart.name] ?? null
    if (JSON.stringify(after) === JSON.stringify(before)) continue
    return lastArrow(chart, before, after, records[i]!.event)
  }
  return null
}

/**
 * Shows `records[index]`: the active states of each chart, and each chart's last transition
 * (the most recent step at or before `index` in which that chart's state changed) as a red arrow.
 * An empty list or a negative index clears the view.
 */
function highlight(records: readonly TraceRecord[], index: number): void {
  for (const byPath of nodes.values()) for (const node of byPath.values()) node.classList.remove('active')
  for (const list of arrows.values()) for (const parts of list) for (const el of parts) el.classList.remove('last')
  const record = records[index]
  if (!record) return
  addTopics([record])
  const values = chartValues(record)
  for (const [chart, value] of Object.entries(values)) {
    const byPath = nodes.get(chart)
    if (!byPath) continue
    const active = statePaths(value)
    for (const path of active) byPath.get(path)?.classList.add('active')
    revealState(byPath.get(active.at(-1) ?? ''))
    const drawn = (charts as VisualChart[]).find((c) => c.name === chart)
    const arrow = drawn ? lastChartArrow(drawn, records, index) : null
    if (arrow !== null) for (const el of arrows.get(chart)?.[arrow] ?? []) el.classList.add('last')
  }
  $('link-state').textContent = record.state
  $('last-step').textContent = `#${record.seq} ${record.actor}: ${stepLabel(record.event)}`
  const reason = record.lastReason as (Record<string, unknown> & { kind: string }) | null
  const reasonEl = $('last-reason')
  reasonEl.textContent = reason
    ? [reason.kind, reason.closeCode, reason.closeName, reason.cause, reason.status ? `HTTP ${String(reason.status)}` : null, reason.phase]
        .filter((part) => part !== undefined && part !== null && part !== '')
        .join(' · ')
    : '—'
  reasonEl.title = reason ? JSON.stringify(reason, null, 2) : ''
  document.body.dataset.linkState = record.state
}

// ---- live --------------------------------------------------------------------------------------

const liveRecords = new Map<string, TraceRecord[]>()
let liveSource: EventSource | null = null
/** The feed's run (the visualizer server's token) whose records `liveRecords` holds; null before the first. */
let liveRun: string | null = null

function currentLink(): string {
  return ($('link-select') as HTMLSelectElement).value
}

function startLive(): void {
  if (liveSource) return
  liveSource = new EventSource('./events')
  liveSource.onopen = () => statusText('live: connected to the link feed')
  liveSource.onerror = () => statusText('live: feed closed')
  // Sent first on every (re)connection: a run other than the one shown (the command was started
  // again on the same port while this page stayed open) replaces what the page showed.
  liveSource.addEventListener('run', (message) => {
    const run = (message as MessageEvent<string>).data
    if (liveRun !== null && run !== liveRun) {
      liveRecords.clear()
      if (view() === 'live') {
        setLinkOptions([])
        highlight([], -1)
      }
      statusText('live: the link was started again; showing its new run')
    }
    liveRun = run
  })
  liveSource.onmessage = (message) => {
    const record = JSON.parse(message.data as string) as TraceRecord
    let list = liveRecords.get(record.link)
    if (!list) {
      liveRecords.set(record.link, (list = []))
      const option = document.createElement('option')
      option.value = option.textContent = record.link
      if (view() === 'live') {
        $('link-select').appendChild(option)
        if (!currentLink()) ($('link-select') as HTMLSelectElement).value = record.link
      }
    }
    list.push(record)
    if (record.link === currentLink() && view() === 'live') highlight(list, list.length - 1)
  }
}

// ---- replay ------------------------------------------------------------------------------------

/** Every record of the loaded trace file (one or more links). */
let traceAll: TraceRecord[] = []
/** The records of the link chosen in the Link list: the steps of the replay. */
let trace: TraceRecord[] = []
let position = 0

/** The links of the loaded trace, in order of first appearance. */
function traceLinks(): string[] {
  return [...new Set(traceAll.map((r) => r.link))]
}

/** Fills the Link list with `links`, keeping the choice when it is still there. */
function setLinkOptions(links: readonly string[]): void {
  const select = $('link-select') as HTMLSelectElement
  const chosen = select.value
  select.replaceChildren(
    ...links.map((link) => {
      const option = document.createElement('option')
      option.value = option.textContent = link
      return option
    }),
  )
  if (links.includes(chosen)) select.value = chosen
}

/** Steps through the chosen link's records of the trace, from its first. */
function chooseReplayLink(): void {
  const link = currentLink()
  trace = traceAll.filter((r) => r.link === link)
  resetTopics()
  addTopics(trace)
  ;($('step') as HTMLInputElement).max = String(Math.max(0, trace.length - 1))
  showStep(0)
}

function showStep(i: number): void {
  if (trace.length === 0) return
  position = Math.max(0, Math.min(trace.length - 1, i))
  ;($('step') as HTMLInputElement).value = String(position)
  $('step-label').textContent = `step ${position + 1} of ${trace.length}`
  highlight(trace, position)
}

function tooLarge(bytes: number): string {
  return `the file is ${Math.round(bytes / 2 ** 20)} MiB; the replay reads traces up to ${MAX_TRACE_BYTES / 2 ** 20} MiB (trace fewer links, or a shorter run)`
}

/** Loads a trace from its text; a bad file (or `refused`, why it was not read) is reported in the replay panel and replaces the previous trace. */
function loadTrace(text: string | null, refused?: string): void {
  try {
    if (text === null) throw new Error(refused)
    // Every record's fields, and every state it names against the charts drawn here (a trace of another version is refused).
    traceAll = parseTrace(text, charts as VisualChart[])
  } catch (error) {
    traceAll = []
    trace = []
    position = 0
    ;($('step') as HTMLInputElement).max = '0'
    highlight([], -1)
    $('step-label').textContent = `cannot replay this file: ${(error as Error).message}`
    document.body.dataset.traceError = 'true'
    return
  }
  delete document.body.dataset.traceError
  setLinkOptions(traceLinks())
  chooseReplayLink()
}

function setupReplay(): void {
  $('back').onclick = () => showStep(position - 1)
  $('forward').onclick = () => showStep(position + 1)
  $('step').oninput = () => showStep(Number(($('step') as HTMLInputElement).value))
  $('trace-file').onchange = () => {
    const file = ($('trace-file') as HTMLInputElement).files?.[0]
    if (!file) return
    // Past this a browser reads the file as an empty string (V8's longest string): say so instead.
    if (file.size > MAX_TRACE_BYTES) return loadTrace(null, tooLarge(file.size))
    file.text().then((text) => loadTrace(text), (error: Error) => ($('step-label').textContent = `cannot read the file: ${error.message}`))
  }
  if (new URLSearchParams(location.search).has('trace')) {
    fetch('./trace.jsonl')
      .then((res) => {
        if (!res.ok) return Promise.reject(new Error(`the server answered ${res.status} for trace.jsonl`))
        const size = Number(res.headers.get('content-length') ?? 0)
        return size > MAX_TRACE_BYTES ? Promise.reject(new Error(tooLarge(size))) : res.text()
      })
      .then((text) => loadTrace(text), (error: Error) => ($('step-label').textContent = `cannot load the trace: ${error.message}`))
  }
}

// ---- dashboard ---------------------------------------------------------------------------------

/** The feed keeps the most recent items only. */
const MAX_FEED_ITEMS = 200
let dashboardTimer: ReturnType<typeof setInterval> | null = null

interface AdminConnection {
  principal: string
  socket: string
  since: string
  state: string
  channels: string[]
}

/**
 * The simulator's admin token, when the page was opened with `?token=` (a simulator started with
 * one answers its admin routes only with it; an EventSource cannot send an Authorization header),
 * as a query parameter starting with `separator` (`&` after another parameter); '' without one.
 */
function tokenQuery(separator: '?' | '&' = '?'): string {
  const token = new URLSearchParams(location.search).get('token')
  return token ? `${separator}token=${encodeURIComponent(token)}` : ''
}

async function refreshConnections(): Promise<void> {
  let connections: AdminConnection[]
  try {
    const res = await fetch(`./admin/connections${tokenQuery()}`)
    if (!res.ok) {
      statusText(`dashboard: /admin/connections answered ${res.status}`)
      return
    }
    connections = ((await res.json()) as { connections: AdminConnection[] }).connections
  } catch {
    // The simulator stopped or restarts: say so, keep the last table, and keep trying.
    statusText('dashboard: the simulator is not answering; retrying')
    document.body.dataset.dashboard = 'unreachable'
    return
  }
  document.body.dataset.dashboard = 'ok'
  $('connections').innerHTML = connections
    .map(
      (c) =>
        `<tr data-principal="${escapeHtml(c.principal)}"><td>${escapeHtml(c.principal)}</td><td>${escapeHtml(c.socket)}</td><td>${escapeHtml(c.since)}</td><td>${escapeHtml(c.state)}</td><td>${escapeHtml(c.channels.join(', '))}</td></tr>`,
    )
    .join('')
  statusText(`dashboard: ${connections.length} socket(s) attached`)
}

function startDashboard(): void {
  if (dashboardTimer) return
  void refreshConnections()
  dashboardTimer = setInterval(() => void refreshConnections(), 500)
  // From the first event the simulator keeps (`after=0`), so a crossing before the page opened is
  // shown too; a reconnecting EventSource resumes after the last one it got (Last-Event-ID).
  // `data-feed` says whether the feed is open.
  const feed = new EventSource(`./admin/events?after=0${tokenQuery('&')}`)
  feed.onopen = () => (document.body.dataset.feed = 'open')
  feed.onerror = () => (document.body.dataset.feed = 'closed')
  // `missed`: events the simulator no longer kept when this page caught up (past its historyLimit).
  for (const type of ['principal-presence', 'agent-aborted', 'missed']) {
    feed.addEventListener(type, (message) => {
      const item = document.createElement('li')
      item.dataset.type = type
      item.textContent = `${type} ${(message as MessageEvent<string>).data}`
      const feedList = $('feed')
      feedList.prepend(item)
      while (feedList.children.length > MAX_FEED_ITEMS) feedList.lastElementChild?.remove()
    })
  }
}

// ---- views -------------------------------------------------------------------------------------

function view(): View {
  const v = location.hash.slice(1)
  return v === 'live' || v === 'replay' || v === 'dashboard' ? v : 'charts'
}

function applyView(): void {
  const v = view()
  document.body.dataset.view = v
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('current', (a as HTMLElement).dataset.view === v)
  $('link-panel').hidden = v !== 'live' && v !== 'replay'
  $('replay-panel').hidden = v !== 'replay'
  $('dashboard-panel').hidden = v !== 'dashboard'
  $('charts').hidden = v === 'dashboard'
  resetTopics()
  if (v === 'live') {
    setLinkOptions([...liveRecords.keys()])
    startLive()
  }
  if (v === 'replay') {
    setLinkOptions(traceLinks())
    trace = traceAll.filter((r) => r.link === currentLink())
    addTopics(trace)
  }
  redraw()
  if (v === 'dashboard') startDashboard()
}

/** Highlights the view's current record again: the selected link's latest (live) or the replay's step. */
function redraw(): void {
  const v = view()
  if (v === 'live') {
    const list = liveRecords.get(currentLink()) ?? []
    highlight(list, list.length - 1)
  } else if (v === 'replay') {
    highlight(trace, position)
  } else {
    highlight([], -1)
  }
}

window.addEventListener('hashchange', applyView)
$('link-select').onchange = () => {
  if (view() === 'replay') return chooseReplayLink()
  resetTopics()
  redraw()
}
$('channel-select').onchange = redraw
$('zoom').onclick = () => {
  const full = document.body.dataset.zoom !== 'full'
  document.body.dataset.zoom = full ? 'full' : 'fit'
  $('zoom').textContent = full ? 'fit to window' : 'full size'
  fitAll()
}
window.addEventListener('resize', fitAll)
setupReplay()
void drawCharts().then(() => {
  applyView()
  document.body.dataset.ready = 'true'
})
