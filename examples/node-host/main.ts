/**
 * A Node host for one agent: a phoenix-link connection to its platform, with
 *
 * - structured logging through pino (the link takes a pino logger as it is, and redacts the API
 *   key from every line it writes);
 * - Prometheus metrics through prom-client (`phoenix-link/metrics`), served on a loopback HTTP
 *   port at GET /metrics;
 * - a handler of `disconnected` that reads the outcome (reconnect, stopped, terminated) and the
 *   typed reason, and of the platform's control signals (interrupt / stop / play);
 * - a clean shutdown on SIGINT and SIGTERM: the link leaves and closes its socket, the metrics
 *   server closes, and the process exits because nothing is left open.
 *
 * Run it against your platform:
 *
 *   AGENT_URL=wss://platform.example/socket AGENT_ID=agent-7 AGENT_API_KEY=... node --import tsx main.ts
 *
 * or judge it against the lifecycle rules (it reads PHOENIX_LINK_URL, PHOENIX_LINK_AGENT_ID and
 * PHOENIX_LINK_API_KEY too): `npx phoenix-link conform -- node --import tsx main.ts`.
 *
 * Without AGENT_URL it starts the platform simulator that ships with phoenix-link
 * (`phoenix-link/server`, a Phoenix Channels server on 127.0.0.1) and connects to that, so you can
 * try it with nothing else running. With `--once` (or EXAMPLE_ONCE=1) it plays a short script on
 * the simulator and exits 0: connect, receive one server push, handle one control signal, the
 * server closes the socket with 1000 (a normal close: the link reconnects), print the metrics,
 * shut down.
 *
 * Dependencies: phoenix-link, pino, prom-client (phoenix-link's optional peer for metrics), and
 * tsx to run TypeScript directly (or compile it with tsc first).
 */
import { createServer, type Server } from 'node:http'
import { pino } from 'pino'
import { Registry, collectDefaultMetrics } from 'prom-client'
import { createLink, describeReason, isAgentDisconnectedError, type LinkEvents } from 'phoenix-link'
import { linkMetrics } from 'phoenix-link/metrics'
import { startSimulator, type PlatformSimulator } from 'phoenix-link/server'

const once = process.argv.includes('--once') || process.env.EXAMPLE_ONCE === '1'
const log = pino({ name: 'agent-host', level: process.env.LOG_LEVEL ?? 'info' })

// ---- the platform: yours, or the simulator for a demonstration ----------------------------------

// `phoenix-link conform -- node --import tsx main.ts` passes its platform as PHOENIX_LINK_*.
const agentId = process.env.AGENT_ID ?? process.env.PHOENIX_LINK_AGENT_ID ?? 'agent-7'
const apiKey = process.env.AGENT_API_KEY ?? process.env.PHOENIX_LINK_API_KEY ?? 'demo-key'
let simulator: PlatformSimulator | null = null
let url = process.env.AGENT_URL ?? process.env.PHOENIX_LINK_URL
if (!url || once) {
  simulator = await startSimulator({
    agents: { [agentId]: apiKey },
    flavor: 'cowboy',
    // The simulator calls its logger as the link does, pino's (fields, message): pass pino as it is.
    logger: log.child({ component: 'simulator' }),
  })
  url = simulator.url
  log.info({ url }, 'no AGENT_URL: using the phoenix-link platform simulator')
}

// ---- the link ---------------------------------------------------------------------------------

const link = createLink({
  url,
  agentId,
  // A function is asked before every connection attempt, so a rotated key is picked up on the next
  // reconnect; a plain string works too.
  apiKey: () => apiKey,
  logger: log.child({ component: 'phoenix-link' }),
  // Control signals arrive here once each, in order, one at a time: the next waits for this promise.
  onControl: async (signal, { epoch, signal: abort }) => {
    log.info({ mode: signal.mode, executionId: signal.executionId, epoch }, 'control signal')
    if (signal.mode === 'interrupt' && signal.executionId) await interruptRun(signal.executionId, abort)
  },
})

/** Stands in for the agent's own work: abort what runs under `executionId`. */
async function interruptRun(executionId: string, abort: AbortSignal): Promise<void> {
  if (abort.aborted) return
  log.info({ executionId }, 'interrupted the run')
}

link.on('state', ({ state, previous }) => log.debug({ state, previous }, 'link state'))
link.on('connected', ({ generation }) => log.info({ generation }, 'connected'))
link.on('reconnected', ({ generation, downtimeMs }) => log.info({ generation, downtimeMs: Math.round(downtimeMs) }, 'reconnected'))
link.on('disconnected', onDisconnected)

/** What to do about each loss: `outcome` says what the link does next. */
function onDisconnected({ reason, outcome, nextDelayMs }: LinkEvents['disconnected']): void {
  const fields = { kind: reason.kind, outcome, nextDelayMs, detail: describeReason(reason) }
  switch (outcome) {
    case 'reconnect':
      // A normal close (1000, 1001, 1011, ...) or a drop: the link retries on its own, with jitter.
      log.warn(fields, 'disconnected; reconnecting')
      break
    case 'stopped':
      // Our own disconnect().
      log.info(fields, 'disconnected (stopped)')
      break
    case 'terminated':
      // Superseded (a newer instance holds the key), rejected (wrong key, not allowed), or a give-up
      // policy you set: it will not come back by itself. Alert; do not restart blindly.
      log.error(fields, 'disconnected for good')
      break
  }
  // The loss that reached the limit is reported as this suppressed reason; its own kind and close code are in lastLoss.
  if (reason.kind === 'suppressed') log.error({ ...fields, lastLoss: reason.lastLoss }, 'the platform keeps closing this agent: retrying slowly (state suspended)')
}

// An app channel: joined on every connection, with fresh params each time.
const lobby = link.channel('room:lobby', () => ({ joined_at: new Date().toISOString() }))
lobby.on('new_msg', (payload) => log.info({ payload }, 'message on room:lobby'))
lobby.onStatus((status, reason) => log.debug({ status, reason: reason?.kind }, 'room:lobby status'))

// ---- metrics ------------------------------------------------------------------------------------

const registry = new Registry()
collectDefaultMetrics({ register: registry })
const metrics = linkMetrics(link, { registry }) // phoenix_link_link_state, _link_reconnects_total, _link_connected_seconds_total

const metricsServer: Server = createServer((req, res) => {
  if (req.url !== '/metrics') return void res.writeHead(404).end()
  registry.metrics().then(
    (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
    (error: unknown) => res.writeHead(500).end(String(error)),
  )
})
await new Promise<void>((resolve) => metricsServer.listen(Number(process.env.METRICS_PORT ?? 0), '127.0.0.1', resolve))
const metricsUrl = `http://127.0.0.1:${(metricsServer.address() as { port: number }).port}/metrics`
log.info({ url: metricsUrl }, 'metrics')

// ---- shutdown -----------------------------------------------------------------------------------

let shuttingDown: Promise<void> | null = null

/** Stops everything this program opened; the process then exits on its own. */
function shutdown(why: string): Promise<void> {
  shuttingDown ??= (async () => {
    log.info({ why }, 'shutting down')
    await link.disconnect() // leaves the control channel, closes with 1000 (the server drops the app channels with the socket); never rejects
    metrics.stop()
    await new Promise<void>((resolve) => metricsServer.close(() => resolve()))
    await simulator?.stop()
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
    log.info('stopped')
  })()
  return shuttingDown
}

function onSignal(signal: NodeJS.Signals): void {
  void shutdown(signal)
}
process.on('SIGINT', onSignal)
process.on('SIGTERM', onSignal)

// ---- run ----------------------------------------------------------------------------------------

try {
  await link.connect({ signal: AbortSignal.timeout(30_000) })
  if (once) await demonstrate(simulator!)
  else await link.runForever() // resolves when shutdown() calls disconnect(); reconnects meanwhile
} catch (error) {
  if (isAgentDisconnectedError(error)) log.error({ kind: error.reason.kind }, `session ended: ${describeReason(error.reason)}`)
  else log.error({ error: error instanceof Error ? error.message : String(error) }, 'failed')
  process.exitCode = 1
} finally {
  await shutdown('done')
}

/**
 * The `--once` script, played by the simulator: one push, one control signal, a normal close
 * (1000) that the link answers by reconnecting, then the metrics.
 */
async function demonstrate(sim: PlatformSimulator): Promise<void> {
  // A script that cannot finish should fail, not hang a CI job.
  const deadline = setTimeout(() => {
    log.error('the --once script did not finish within 20 s')
    process.exit(1)
  }, 20_000).unref()

  await lobby.joined()

  const message = new Promise<void>((resolve) => {
    const off = lobby.on('new_msg', () => (off(), resolve()))
  })
  sim.push({ agent: agentId }, 'room:lobby', 'new_msg', { body: 'hello from the platform' })
  await message

  const control = new Promise<void>((resolve) => link.once('control', () => resolve()))
  sim.control(agentId, { mode: 'interrupt', execution_id: 'exec-1', correlation_id: 'c-1' })
  await control

  const reconnected = new Promise<LinkEvents['reconnected']>((resolve, reject) => {
    link.once('reconnected', resolve)
    link.once('disconnected', ({ outcome, reason }) => outcome !== 'reconnect' && reject(new Error(`expected a reconnect, got ${outcome}: ${describeReason(reason)}`)))
  })
  sim.close({ agent: agentId }, 1000) // a normal close: never a stop
  await reconnected

  const text = await (await fetch(metricsUrl)).text()
  for (const line of text.split('\n')) {
    if (line.startsWith('phoenix_link_link_reconnects_total{') || (line.startsWith('phoenix_link_link_state{') && line.endsWith(' 1'))) {
      log.info({ sample: line }, 'metric')
    }
  }
  clearTimeout(deadline)
}
