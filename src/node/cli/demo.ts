/**
 * `phoenix-link demo`: the lifecycle a real platform puts an agent through, on the embedded
 * simulator, printed as it happens. Each step checks what it shows; a broken expectation
 * prints why and exits 1.
 */
import { randomBytes } from 'node:crypto'
import { createLink, type Link } from '../../link.js'
import type { LinkPolicyInput } from '../../policy.js'
import type { ControlSignal } from '../../protocol.js'
import { describeReason, type DisconnectReason } from '../../reasons.js'
import { startSimulator, type AgentAborted, type PlatformSimulator, type PresenceCrossing, type SimConnection } from '../server/index.js'
import { createOutput, describeLinkEvent, type Output } from './output.js'
import { startVisualizer } from '../visualize/server.js'
import { openTraceFile, traceLink } from '../visualize/trace.js'
import { within } from '../within.js'
import { thrownText } from '../../../machines/types.js'

/** Options of {@link runDemo}. */
export interface DemoOptions {
  json?: boolean
  write?: (line: string) => void
  /**
   * Serve the visualizer on loopback and stream both links' transitions to it: the demo waits
   * up to `waitForViewerMs` (default 60000) for a page to connect, and after it ends keeps the
   * page up until `holdUntil` settles (the CLI passes Ctrl-C). `holdUntil` settling earlier, while
   * the demo waits for a viewer or runs, interrupts it: every link and server is released and
   * the demo resolves 130.
   */
  visualize?: { port?: number; waitForViewerMs?: number; holdUntil?: Promise<unknown> }
  /**
   * Write both links' transitions to this file as JSON lines (labelled A and B), for the
   * visualizer's #replay (`phoenix-link serve --dashboard`, or any page of `startVisualizer`).
   * Opened before the demo starts: an unwritable path fails at once. The API key is never written.
   */
  trace?: string
}

const AGENT = 'agent-demo'
const GRACE_MS = 2_500

/** Demo policy: the defaults with short waits, so the whole lifecycle runs in a few seconds. */
const DEMO_POLICY: LinkPolicyInput = {
  reconnect: { initialDelayMs: 200, maxDelayMs: 1_000, goingAwayFloorMs: [0, 500] },
  transport: { closeTimeoutMs: 500 },
}

class DemoFailure extends Error {}

function expectThat(ok: boolean, what: string): void {
  if (!ok) throw new DemoFailure(`expected ${what}`)
}

function watchSimulator(sim: PlatformSimulator, out: Output): void {
  sim.on('connection', (c: SimConnection) =>
    out.event('simulator', 'accepted', { socket: c.id, agentId: c.agentId, live: sim.live(c.agentId).length }, `accepted ${c.id} for ${c.agentId} (${sim.live(c.agentId).length} live)`),
  )
  sim.on('closed', (c: SimConnection) => {
    const how = c.aborted ? 'aborted without a close frame' : c.closeSent ? `closed by the server with ${c.closeSent.code}` : `closed by the client with ${c.closeSeen?.code}`
    out.event('simulator', 'closed', { socket: c.id, closeSent: c.closeSent, closeSeen: c.closeSeen, aborted: c.aborted }, `${c.id} ${how}`)
  })
  sim.on('refused', (u: { status: number; agentId: string | null; outcome: string }) =>
    out.event('simulator', 'refused', u, `refused an upgrade for ${u.agentId}: HTTP ${u.status} (${u.outcome})`),
  )
  sim.on('presence', (p: PresenceCrossing) =>
    out.event(
      'simulator',
      'presence',
      { principal: p.principal, kind: p.kind, count: p.count, reason: p.reason },
      `presence of ${p.principal}: ${p.kind}${p.reason ? ` (${describeReason(p.reason)})` : ''}`,
    ),
  )
  sim.on('agent-aborted', (a: AgentAborted) =>
    out.event(
      'simulator',
      'agent-aborted',
      { principal: a.principal, runId: a.runId, outcome: a.outcome, error: a.error },
      `runs of ${a.principal}: ${a.runId ?? '(none)'} ${a.outcome}${a.error ? ` (${a.error})` : ''}`,
    ),
  )
}

function watchLink(link: Link, name: string, out: Output): void {
  link.onAny((event) => {
    if (event.type === 'ignored' && event.event === 'socket.close') return
    const line = describeLinkEvent(event)
    if (line) out.event(name, line.type, line.fields, line.human)
  })
}

/**
 * Runs the demo and resolves with the process exit code (0 when every step held).
 *
 * @param options.json one JSON object per line instead of text.
 */
export async function runDemo(options: DemoOptions = {}): Promise<number> {
  const out = createOutput(options.json ?? false, options.write)
  // A trace that fails to write (a full disk) is reported when it fails; the demo's steps go on,
  // the trace is not said to be written, and the run exits 1.
  const trace: { error: Error | null } = { error: null }
  const code = await demo(options, out, trace)
  if (code !== 0 || trace.error === null) return code
  out.event('demo', 'failed', { error: `the trace was not written: ${trace.error.message}` }, `FAILED: every step held, but the trace was not written (${trace.error.message})`)
  return 1
}

async function demo(options: DemoOptions, out: Output, traced: { error: Error | null }): Promise<number> {
  // The visualizer first: a port in use fails before the trace file is opened (and an earlier
  // trace at that path emptied).
  const viz = options.visualize ? await startVisualizer({ port: options.visualize.port ?? 0 }) : null
  let traceFile: ReturnType<typeof openTraceFile> | null = null
  try {
    traceFile =
      options.trace !== undefined
        ? openTraceFile(options.trace, (error) => {
            traced.error = error
            out.event('trace', 'failed', { error: error.message }, `the trace stopped: ${error.message}`)
          })
        : null
  } catch (error) {
    await viz?.close()
    throw error
  }
  // Ctrl-C while the demo waits for a viewer or runs: the wait in progress rejects, the rest is released.
  const hold = options.visualize?.holdUntil
  let interrupted = false
  const interruption = hold?.then(() => {
    interrupted = true
    throw new Error('interrupted (Ctrl-C)')
  })
  interruption?.catch(() => {})
  const orInterrupted = <T>(promise: Promise<T>): Promise<T> => (interruption ? Promise.race([promise, interruption]) : promise)
  const wait = <T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> => within(orInterrupted(promise), timeoutMs, what)
  if (viz) {
    const waitMs = options.visualize?.waitForViewerMs ?? 60_000
    out.event('visualizer', 'listening', { url: `${viz.url}#live` }, `open ${viz.url}#live to follow the demo (it starts when the page connects, at most ${Math.round(waitMs / 1000)} s from now)`)
    await orInterrupted(viz.waitForViewer(waitMs)).catch(() => {})
    if (interrupted) {
      await viz.close()
      await traceFile?.close()
      out.event('demo', 'interrupted', {}, 'interrupted (Ctrl-C) before the demo started')
      return 130
    }
  }
  const stopTraces: Array<() => void> = []
  // The links written to the trace file, by label (an interrupted run writes fewer than two).
  const written: string[] = []
  // The live records of both links count their time from one origin, as the file's do.
  const liveOrigin = performance.now()
  const trace = (link: Link, label: string) => {
    if (viz) stopTraces.push(traceLink(link, label, (record) => viz.publish(record), liveOrigin))
    if (traceFile && traced.error === null) {
      stopTraces.push(traceFile.follow(link, label))
      written.push(label)
    }
  }
  const apiKey = `demo-${randomBytes(12).toString('hex')}`
  // Presence waits out a grace window, so the reconnects of steps 2-5 are not reported as the
  // agent leaving; the stop of step 8 is, and it aborts the agent's run.
  const sim = await startSimulator({ agents: { [AGENT]: apiKey }, presence: { graceWindowMs: GRACE_MS } })
  out.event('simulator', 'listening', { url: sim.url, flavor: sim.flavor.name }, `listening on ${sim.url} (${sim.flavor.name})`)
  watchSimulator(sim, out)
  const links: Link[] = []
  const received: string[] = []
  try {
    const handled: ControlSignal[] = []
    let allHandled!: () => void
    const threeHandled = new Promise<void>((resolve) => (allHandled = resolve))
    const a = createLink({
      url: sim.url,
      agentId: AGENT,
      apiKey,
      policy: DEMO_POLICY,
      onControl: async (signal) => {
        handled.push(signal)
        out.event('agent A', 'handled', { correlationId: signal.correlationId, mode: signal.mode }, `handled ${signal.mode} (${signal.correlationId})`)
        if (handled.length === 3) allHandled()
      },
    })
    links.push(a)
    watchLink(a, 'link A', out)
    trace(a, 'A')

    out.step('1. connect: socket open, control channel agent_control:agent-demo joined, then an app channel')
    await wait(a.connect(), 5_000, 'link A to connect')
    const lobby = a.channel('room:lobby')
    lobby.on('message', (payload) => {
      received.push(JSON.stringify(payload))
      out.event('agent A', 'message', { topic: 'room:lobby', payload }, `room:lobby message ${JSON.stringify(payload)}`)
    })
    await wait(lobby.joined(), 5_000, 'room:lobby to join')
    sim.push({ agent: AGENT }, 'room:lobby', 'message', { text: 'hello agent' })
    await wait(
      new Promise<void>((resolve) => lobby.on('message', () => resolve())),
      5_000,
      'the first room:lobby message',
    )

    const disruptions: Array<[string, () => void, string]> = [
      ['2. the server closes with 1000 (normal closure, as Cowboy sends a "disconnect")', () => sim.close({ agent: AGENT }, 1000, ''), 'closed'],
      ['3. the server closes with 1001 (going away, as Phoenix 1.8 sends a "disconnect")', () => sim.close({ agent: AGENT }, 1001, ''), 'closed'],
      ['4. the server closes with 1011 (internal error, as Bandit sends a "disconnect")', () => sim.close({ agent: AGENT }, 1011, ''), 'closed'],
      ['5. the connection drops with no close frame (1006)', () => sim.abort({ agent: AGENT }), 'dropped'],
    ]
    for (const [title, disrupt, kind] of disruptions) {
      // Every close here comes within connection.unseenSupersedeWindowMs (5 s) of a join: the first step says why the link then probes.
      const probe = title.startsWith('2.')
        ? '; this soon after the join (under 5 s) a close may hide a supersede the platform could not push, so the next upgrade asks on_conflict=reject, and the server accepting it shows that nobody else holds the key'
        : ''
      out.step(`${title}: not a stop, so reconnect and rejoin${probe}`)
      const lost = a.once('disconnected')
      const back = a.once('reconnected')
      const rejoined = new Promise<void>((resolve) => {
        const off = lobby.onStatus((status) => {
          if (status === 'joined') {
            off()
            resolve()
          }
        })
      })
      disrupt()
      const d = await wait(lost, 5_000, 'the disconnect')
      expectThat(d.reason.kind === kind && !d.terminal, `a retryable ${kind} reason, got ${describeReason(d.reason)}`)
      await wait(back, 5_000, 'link A to reconnect')
      await wait(rejoined, 5_000, 'room:lobby to rejoin')
    }

    out.step('6. control signals: interrupt, stop, play, delivered once each and in order')
    sim.control(AGENT, { mode: 'interrupt', correlation_id: 'ctl-1' })
    sim.control(AGENT, { mode: 'stop', scope: 'room', room_id: 'room:lobby', correlation_id: 'ctl-2' })
    sim.control(AGENT, { mode: 'play', correlation_id: 'ctl-3' })
    await wait(threeHandled, 5_000, 'three control signals to be handled')
    expectThat(handled.map((s) => s.correlationId).join(',') === 'ctl-1,ctl-2,ctl-3', `signals in order, got ${handled.map((s) => s.correlationId)}`)

    out.step('7. a second instance with the same key connects: the first is superseded and never reconnects')
    const acceptedBefore = sim.accepted(AGENT).length
    const b = createLink({ url: sim.url, agentId: AGENT, apiKey, policy: DEMO_POLICY })
    links.push(b)
    watchLink(b, 'link B', out)
    trace(b, 'B')
    const ended = a.runForever().then(
      () => null,
      (error: unknown) => error as { reason?: DisconnectReason },
    )
    await wait(b.connect(), 5_000, 'link B to connect')
    const error = await wait(ended, 5_000, 'link A to end')
    expectThat(error?.reason?.kind === 'superseded', `link A to end superseded, got ${error?.reason ? describeReason(error.reason) : 'no error'}`)
    expectThat(a.state === 'terminated', `link A terminated, it is ${a.state}`)
    await a.disconnect() // sends nothing after a supersede; resolves once every socket of A is closed
    expectThat(sim.live(AGENT).length === 1 && b.state === 'connected', `one live connection (link B), got ${sim.live(AGENT).length}`)
    expectThat(sim.accepted(AGENT).length === acceptedBefore + 1, 'link A never reconnected after the supersede')
    out.event(
      'simulator',
      'summary',
      { live: sim.live(AGENT).length, accepted: sim.accepted(AGENT).length, closesSent: sim.closesSent.map((c) => c.code) },
      `${sim.live(AGENT).length} live connection; ${sim.accepted(AGENT).length} accepted in all; close codes sent ${sim.closesSent.map((c) => c.code).join(', ')}`,
    )
    out.event('link A', 'final', { state: a.state, lastDisconnectReason: a.lastDisconnectReason }, `final: ${a.state}, ${describeReason(a.lastDisconnectReason!)}`)

    out.step(`8. stop: link B leaves and closes 1000; ${GRACE_MS} ms later the platform sees the agent gone and aborts its run`)
    const runAborted = new Promise<AgentAborted>((resolve) => sim.once('agent-aborted', resolve))
    const run = sim.runs.startRun(AGENT, 'run-demo', { onAbort: () => void out.event('agent', 'run-abort-hook', { runId: 'run-demo' }, 'run-demo: abort hook ran (a model call would be cancelled here)') })
    await wait(b.disconnect(), 5_000, 'link B to stop')
    expectThat(b.lastDisconnectReason?.kind === 'graceful', 'link B stopped gracefully')
    const report = await wait(runAborted, GRACE_MS + 5_000, 'the run to be aborted')
    expectThat(run.aborted && report.outcome === 'aborted' && report.runId === 'run-demo', `run-demo aborted, got ${report.outcome}`)
    const kinds = sim.presence.map((p) => p.kind).join(',')
    expectThat(kinds === 'first-connected,last-disconnected', `one first-connected and one last-disconnected, got ${kinds}`)
    out.event(
      'simulator',
      'presence-summary',
      { presence: sim.presence.map((p) => ({ kind: p.kind, reason: p.reason?.kind ?? null })), aborts: sim.aborts.map((a) => ({ runId: a.runId, outcome: a.outcome })) },
      `presence events: ${sim.presence.map((p) => `${p.kind}${p.reason ? ` (${p.reason.kind})` : ''}`).join(', ')}; aborts: ${sim.aborts.map((a) => `${a.runId} ${a.outcome}`).join(', ')}`,
    )
    out.step(`done in ${out.elapsed()} ms: every step held`)
    return 0
  } catch (error) {
    if (interrupted) {
      out.event('demo', 'interrupted', {}, 'interrupted (Ctrl-C): every link and the simulator stopped')
      return 130
    }
    const message = thrownText(error)
    out.event('demo', 'failed', { error: message }, `FAILED: ${message}`)
    return 1
  } finally {
    await Promise.all(links.map((l) => l.disconnect()))
    await sim.stop()
    for (const stop of stopTraces) stop()
    if (traceFile) {
      await traceFile.close()
      if (traced.error === null) {
        const which = written.length === 0 ? 'no link' : `link${written.length > 1 ? 's' : ''} ${written.join(' and ')}`
        out.event('trace', 'written', { path: options.trace, links: written }, `trace of ${which} written to ${options.trace} (open it in the visualizer's #replay)`)
      }
    }
    if (viz) {
      if (options.visualize?.holdUntil && !interrupted) {
        out.event('visualizer', 'holding', { url: `${viz.url}#live` }, `the page stays at ${viz.url}#live (replay the run with Back/Forward in #replay of a trace); Ctrl-C stops`)
        await options.visualize.holdUntil
      }
      await viz.close()
    }
  }
}
