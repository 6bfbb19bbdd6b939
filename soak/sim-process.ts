/**
 * The soak's simulator, in its own process so the soak's heap and handle figures are the links'
 * alone (the simulator keeps a record of every socket it saw). Driven over IPC: each message is
 * one fault or query, answered once with the same id.
 */
import { startSimulator } from '../src/node/server/index.js'

/** A command from the soak driver. */
export type SoakCommand =
  | { cmd: 'close'; agent: string; code: number }
  | { cmd: 'abort'; agent: string }
  | { cmd: 'stall'; agent: string }
  | { cmd: 'supersede'; agent: string }
  | { cmd: 'control'; agent: string; sequence: number }
  /** Upgrades (accepted or refused) the agent ever made. */
  | { cmd: 'upgrades'; agent: string }
  /** The agent's valid keys from now on (a rotation). */
  | { cmd: 'keys'; agent: string; keys: string[] }
  /** While on, every socket is closed (1011), those accepted meanwhile at once: a server that accepts then closes. */
  | { cmd: 'flap'; on: boolean }
  /** The agent's control channel process crashes (phx_error). */
  | { cmd: 'crash-control'; agent: string }
  | { cmd: 'stop' }

/** `soak-process.ts <agents>`: how many agents (`soak-0`.. with key `soak-key`) the platform knows. */
const agentCount = Number(process.argv[2] ?? 0)
const sim = await startSimulator({
  agents: agentCount > 0 ? Object.fromEntries(Array.from({ length: agentCount }, (_, i) => [`soak-${i}`, 'soak-key'])) : 'any',
  recordLimit: 0,
  idleTimeoutMs: null,
  supersedeRetryAfterS: 1,
})
let flapping = false
sim.on('connection', (c: { close(code: number): void }) => flapping && c.close(1011))
const upgrades = new Map<string, number>()
const count = (agent: string | null) => {
  if (agent !== null) upgrades.set(agent, (upgrades.get(agent) ?? 0) + 1)
}
// A rival instance (the week profile's, marked by a param) is not the link: its sockets are not counted.
sim.on('connection', (c: { agentId: string; params: Readonly<Record<string, string>> }) => c.params.rival !== '1' && count(c.agentId))
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
    case 'keys':
      sim.setKeys(m.agent, m.keys)
      return reply(null)
    case 'flap':
      flapping = m.on
      // A server that starts to flap closes what it holds too.
      if (m.on) sim.close('all', 1011)
      return reply(null)
    case 'crash-control':
      sim.channelError({ agent: m.agent }, `agent_control:${m.agent}`)
      return reply(null)
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
