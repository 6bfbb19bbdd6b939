/**
 * The simulator in its own process for benchmarks, so the measuring process holds only clients
 * and the server's work never lands on the client's event loop. Commands arrive over IPC
 * (process.send); each gets one answer with the same id. Times are milliseconds on this
 * process's monotonic clock (performance.now()), so server-side intervals need no clock sync.
 */
import { startSimulator } from '../src/node/server/index.js'

/** A command to the simulator child. */
export type ChildCommand =
  /** Send `count` small pushes (`tick`) on `topic` to the agent's live socket, back to back. */
  | { cmd: 'push'; agent: string; topic: string; count: number }
  /** Close the agent's live socket with `code`; answer when its control channel is joined again: server time from close to join, and its stages (to the old socket's TCP close, to the next upgrade, to the join; null when one was not seen). */
  | { cmd: 'close-until-rejoined'; agent: string; code: number; timeoutMs: number }
  /** Close every live socket with `code`. */
  | { cmd: 'close-all'; code: number }
  /** Stop answering the agent's heartbeats and reading its frames. */
  | { cmd: 'stall'; agent: string }
  /** The current time. */
  | { cmd: 'now' }
  /** Upgrade requests (accepted or refused) and control joins since `since`, and how many sockets are open. */
  | { cmd: 'timeline'; since: number }
  /** First upgrade request of each agent in `agents` after `since`. */
  | { cmd: 'next-upgrades'; agents: string[]; since: number }
  | { cmd: 'stop' }

const sim = await startSimulator({ agents: 'any', recordLimit: 0, idleTimeoutMs: null })
const upgrades: Array<{ at: number; agent: string | null }> = []
const joins: Array<{ at: number; agent: string }> = []
/**
 * Each close-until-rejoined in progress, by agent: the socket it closed, when the server saw that
 * socket's TCP connection end, the first upgrade it accepted from the agent after that (an
 * upgrade accepted before the old socket ended, or a close of another socket, is not one of these
 * stages), and what to do when the control channel is joined again.
 */
const rejoins = new Map<string, { conn: unknown; closeSeenAt: number | null; upgradeAt: number | null; joined: (at: number) => void }>()
sim.on('connection', (c: { agentId: string }) => {
  const at = performance.now()
  upgrades.push({ at, agent: c.agentId })
  const rejoin = rejoins.get(c.agentId)
  if (rejoin && c !== rejoin.conn && rejoin.closeSeenAt !== null) rejoin.upgradeAt ??= at
})
sim.on('closed', (c: { agentId: string }) => {
  const rejoin = rejoins.get(c.agentId)
  if (rejoin && c === rejoin.conn) rejoin.closeSeenAt ??= performance.now()
})
sim.on('refused', (r: { agentId: string | null }) => upgrades.push({ at: performance.now(), agent: r.agentId }))
// bench/channels.ts: joins of these topics are refused, as a platform refuses a room.
sim.onJoin(/^room:refused-/, { reply: 'error', response: { reason: 'unauthorized' } })
sim.onJoin(/^agent_control:/, {
  reply: 'ok',
  after: (c) => {
    const at = performance.now()
    joins.push({ at, agent: c.agentId })
    const rejoin = rejoins.get(c.agentId)
    rejoins.delete(c.agentId)
    rejoin?.joined(at)
  },
})

type Tagged = ChildCommand & { id: number }

process.on('message', (message: Tagged) => {
  const reply = (result: unknown) => process.send!({ id: message.id, result })
  switch (message.cmd) {
    case 'push': {
      const conn = sim.live(message.agent)[0]
      const joinRef = conn?.channels.get(message.topic)?.joinRef
      if (!conn || !joinRef) return reply({ error: `${message.agent} has no joined ${message.topic}` })
      // All frames in one TCP write, framed here (RFC 6455 section 5.2: FIN + text opcode, no mask
      // from a server, 7-bit or 16-bit length), so the client, not the server's send loop, is
      // what the benchmark measures.
      const payload = Buffer.from(JSON.stringify([joinRef, null, message.topic, 'tick', { n: 1, text: 'a small push' }]))
      const header = payload.length < 126 ? Buffer.from([0x81, payload.length]) : Buffer.from([0x81, 126, payload.length >> 8, payload.length & 0xff])
      const frame = Buffer.concat([header, payload])
      const all = Buffer.allocUnsafe(frame.length * message.count)
      for (let i = 0; i < message.count; i++) frame.copy(all, i * frame.length)
      const socket = (conn.ws as unknown as { _socket: { write(b: Buffer): boolean } })._socket
      socket.write(all)
      return reply({ sent: message.count })
    }
    case 'close-until-rejoined': {
      const conn = sim.live(message.agent)[0]
      if (!conn) return reply({ error: `${message.agent} has no live socket` })
      const timer = setTimeout(() => {
        rejoins.delete(message.agent)
        reply({ error: `${message.agent} did not rejoin within ${message.timeoutMs} ms` })
      }, message.timeoutMs)
      const closedAt = performance.now()
      const rejoin = {
        conn: conn as unknown,
        closeSeenAt: null as number | null,
        upgradeAt: null as number | null,
        joined: (at: number) => {
          clearTimeout(timer)
          // The three stages the server can time: its close until the old socket's TCP connection
          // ended, then until the next upgrade it accepted, then until the control join. A stage
          // not seen is NaN, which arrives over IPC as null.
          const closeSeenAt = rejoin.closeSeenAt ?? Number.NaN
          const upgradeAt = rejoin.upgradeAt ?? Number.NaN
          reply({ ms: at - closedAt, closeSeenMs: closeSeenAt - closedAt, toUpgradeMs: upgradeAt - closeSeenAt, toJoinMs: at - upgradeAt })
        },
      }
      rejoins.set(message.agent, rejoin)
      try {
        sim.close(conn, message.code)
      } catch (error) {
        clearTimeout(timer)
        rejoins.delete(message.agent)
        return reply({ error: `closing ${message.agent}'s socket with ${message.code}: ${String(error)}` })
      }
      return
    }
    case 'close-all': {
      const at = performance.now()
      sim.close('all', message.code)
      return reply({ at })
    }
    case 'stall': {
      const at = performance.now()
      sim.stall({ agent: message.agent })
      return reply({ at })
    }
    case 'now':
      return reply({ at: performance.now() })
    case 'timeline': {
      const since = joins.filter((j) => j.at >= message.since)
      return reply({
        upgrades: upgrades.filter((u) => u.at >= message.since).map((u) => u.at),
        joins: since.map((j) => j.at),
        /** When each agent's control channel was first joined again. */
        firstJoins: [...new Map(since.reverse().map((j) => [j.agent, j.at])).values()],
        live: sim.live().length,
      })
    }
    case 'next-upgrades': {
      const wanted = new Set(message.agents)
      const first: Record<string, number> = {}
      for (const u of upgrades) {
        if (u.at < message.since || u.agent === null || !wanted.has(u.agent) || u.agent in first) continue
        first[u.agent] = u.at
      }
      return reply({ first })
    }
    case 'stop':
      void sim.stop({ abort: true }).then(() => {
        reply({ stopped: true })
        process.disconnect()
      })
      return
  }
})
// The benchmark went away (killed, crashed): stop rather than linger as an orphan.
process.on('disconnect', () => void sim.stop({ abort: true }).finally(() => process.exit(0)))
process.send!({ id: 0, result: { url: sim.url } })
