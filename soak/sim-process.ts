/**
 * The soak's simulator, in its own process so the soak's heap and handle figures are the links'
 * alone (the simulator keeps a record of every socket it saw). Driven over IPC: each message is
 * one fault or query, answered once with the same id.
 */
import { startSimulator } from '../src/server/index.js'

/** A command from the soak driver. */
export type SoakCommand =
  | { cmd: 'close'; agent: string; code: number }
  | { cmd: 'abort'; agent: string }
  | { cmd: 'stall'; agent: string }
  | { cmd: 'supersede'; agent: string }
  | { cmd: 'control'; agent: string; sequence: number }
  /** Upgrades (accepted or refused) the agent ever made. */
  | { cmd: 'upgrades'; agent: string }
  | { cmd: 'stop' }

const sim = await startSimulator({ agents: 'any', recordLimit: 0, idleTimeoutMs: null, supersedeRetryAfterS: 1 })
const upgrades = new Map<string, number>()
const count = (agent: string | null) => {
  if (agent !== null) upgrades.set(agent, (upgrades.get(agent) ?? 0) + 1)
}
sim.on('connection', (c: { agentId: string }) => count(c.agentId))
sim.on('refused', (r: { agentId: string | null }) => count(r.agentId))

process.on('message', (m: SoakCommand & { id: number }) => {
  const reply = (result: unknown) => process.send!({ id: m.id, result })
  switch (m.cmd) {
    case 'close':
      sim.close({ agent: m.agent }, m.code, 'soak')
      return reply(sim.live(m.agent).length)
    case 'abort':
      sim.abort({ agent: m.agent })
      return reply(null)
    case 'stall':
      sim.stall({ agent: m.agent })
      return reply(null)
    case 'supersede':
      // With the agent's upgrade count at that moment, so the driver can check that none follows.
      return reply({ sockets: sim.supersede(m.agent), upgrades: upgrades.get(m.agent) ?? 0 })
    case 'control':
      return reply(sim.control(m.agent, { mode: 'interrupt', correlation_id: `${m.agent}:${m.sequence}` }))
    case 'upgrades':
      return reply(upgrades.get(m.agent) ?? 0)
    case 'stop':
      void sim.stop({ abort: true }).then(() => {
        reply(null)
        process.disconnect()
      })
  }
})
// The driver went away (killed, crashed): stop rather than linger as an orphan.
process.on('disconnect', () => void sim.stop({ abort: true }).finally(() => process.exit(0)))
process.send!({ id: 0, result: sim.url })
