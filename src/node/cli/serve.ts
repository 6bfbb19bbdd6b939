/** `phoenix-link serve`: the platform simulator, standalone, until Ctrl-C. */
import { startSimulator, type AgentAborted, type FlavorName, type PresenceCrossing, type SimConnection } from '../server/index.js'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { createOutput } from './output.js'
import { ensurePageBuilt, servePage } from '../visualize/server.js'

/** Options of {@link runServe}. */
export interface ServeOptions {
  port: number
  host: string
  flavor: FlavorName
  /** `id:key` pairs; empty means any agent with a non-empty key. */
  agents: string[]
  /**
   * Channel routes (the simulator's `channels`; the CLI's repeatable `--channel`): exact topics or
   * prefixes ending in `*`. Empty or absent: every topic is routed (unlike the simulator's own
   * `channels: []`, which routes the control channel alone: the CLI has no flag for that).
   */
  channels?: string[]
  idleTimeoutMs: number | null
  /** Records kept of each kind, the most recent, the /admin/events feed counted as one (the simulator's `historyLimit`; the CLI's `--history`, 10000 unless given). */
  historyLimit: number
  /** Frames kept over every closed socket's record together (the simulator's `historyFrameLimit`; the CLI's `--history-frames`, 100000 unless given). */
  historyFrameLimit?: number
  /**
   * Page origins whose browser upgrades are accepted besides loopback pages (the CLI's repeatable
   * `--allow-origin`); `'*'` among them accepts any origin. Empty or absent: loopback pages only.
   */
  allowOrigins?: string[]
  json: boolean
  /** Also serve the visualizer page at `/` on the simulator's port (`#dashboard`). */
  dashboard?: boolean
  /** A token the HTTP admin routes require (`Authorization: Bearer <token>`); without one they serve loopback callers only. */
  adminToken?: string
}

/** The simulator's `checkOrigin` for `--allow-origin` values: none, loopback pages only; `*`, any; else loopback pages and those. */
function checkOriginFor(allowed: readonly string[]): boolean | string[] {
  if (allowed.length === 0) return true
  if (allowed.includes('*')) return false
  return [...allowed]
}

/**
 * Starts the simulator and logs every socket until SIGINT, SIGTERM or SIGHUP.
 *
 * @returns the exit code once stopped.
 * @throws {Error} (rejects) when an `--agent` value is not `id:key` or the port cannot be bound;
 *   for a `--host` that is not loopback without `--admin-token`, or an empty `--admin-token`,
 *   naming the flag.
 */
export async function runServe(options: ServeOptions): Promise<number> {
  // One agent given twice keeps both keys (valid at once, as during a key rotation). A Map: an
  // agent id may be any text, `constructor` or `__proto__` too.
  const keysOf = new Map<string, string[]>()
  for (const pair of options.agents) {
    const at = pair.indexOf(':')
    if (at <= 0 || at === pair.length - 1) throw new Error(`--agent takes id:key, got ${JSON.stringify(pair.replace(/:.*/, ':…'))}`)
    const id = pair.slice(0, at)
    const key = pair.slice(at + 1)
    keysOf.set(id, [...(keysOf.get(id) ?? []).filter((k) => k !== key), key])
  }
  const agents = Object.fromEntries(keysOf)
  const out = createOutput(options.json)
  const page = options.dashboard ? ensurePageBuilt() : null
  const sim = await startSimulator({
    ...(page ? { routes: (req: IncomingMessage, res: ServerResponse) => servePage(page, req, res) } : {}),
    host: options.host,
    port: options.port,
    flavor: options.flavor,
    agents: Object.keys(agents).length > 0 ? agents : 'any',
    ...(options.channels !== undefined && options.channels.length > 0 ? { channels: options.channels } : {}),
    idleTimeoutMs: options.idleTimeoutMs,
    historyLimit: options.historyLimit,
    historyFrameLimit: options.historyFrameLimit ?? 100_000,
    checkOrigin: checkOriginFor(options.allowOrigins ?? []),
    ...(options.adminToken !== undefined ? { adminToken: options.adminToken } : {}),
  }).catch((error: unknown) => {
    // The simulator names its options; on the command line they are flags.
    if (error instanceof Error) error.message = error.message.replace(/^adminToken\b/, '--admin-token (or PHOENIX_LINK_ADMIN_TOKEN)').replace(/^host\b/, '--host').replace(/^checkOrigin:/, '--allow-origin:').replace(/^channels: /, '--channel: ').replace(/set adminToken\b/, 'pass --admin-token').replace(/unless agents lists them/, 'unless --agent lists them')
    throw error
  })
  const http = sim.url.replace(/^ws/, 'http').replace(/\/socket$/, '')
  out.event(
    'simulator',
    'listening',
    {
      url: sim.url,
      http,
      metrics: `${http}/metrics`,
      connections: `${http}/admin/connections`,
      events: `${http}/admin/events`,
      openapi: `${http}/admin/openapi.json`,
      adminAccess: options.adminToken !== undefined ? 'token' : 'loopback',
      flavor: sim.flavor.name,
      channels: options.channels !== undefined && options.channels.length > 0 ? options.channels : ['*'],
    },
    `listening on ${sim.url} (${sim.flavor.name}); metrics ${http}/metrics; the control routes (${options.adminToken !== undefined ? 'Authorization: Bearer <token>' : 'loopback callers only'}) in ${http}/admin/openapi.json; Ctrl-C stops`,
  )
  if (page) out.event('simulator', 'dashboard', { url: `${http}/#dashboard` }, `dashboard at ${http}/#dashboard`)
  sim.on('connection', (c: SimConnection) => out.event('simulator', 'accepted', { socket: c.id, agentId: c.agentId }, `accepted ${c.id} for ${c.agentId}`))
  sim.on('closed', (c: SimConnection) =>
    out.event('simulator', 'closed', { socket: c.id, closeSeen: c.closeSeen, closeSent: c.closeSent }, `${c.id} closed (${c.closeSeen?.code ?? '?'})`),
  )
  sim.on('refused', (u: { status: number; agentId: string | null; outcome: string }) =>
    out.event('simulator', 'refused', u, `refused ${u.agentId === null ? 'an upgrade with no agent_id' : u.agentId}: HTTP ${u.status} (${u.outcome})`),
  )
  sim.on('presence', (p: PresenceCrossing) =>
    out.event('simulator', 'presence', { principal: p.principal, kind: p.kind, reason: p.reason }, `presence of ${p.principal}: ${p.kind}${p.reason ? ` (${p.reason.kind})` : ''}`),
  )
  sim.on('agent-aborted', (a: AgentAborted) =>
    out.event('simulator', 'agent-aborted', { principal: a.principal, runId: a.runId, outcome: a.outcome }, `runs of ${a.principal}: ${a.runId ?? '(none)'} ${a.outcome}`),
  )
  // SIGHUP too (the terminal closed): Node's default for it ends the process with no drain.
  await new Promise<void>((resolve) => {
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, () => resolve())
  })
  await sim.stop() // a drain, as a Phoenix endpoint on SIGTERM: every socket with a channel closed 1012
  out.event('simulator', 'stopped', {}, 'stopped')
  return 0
}
