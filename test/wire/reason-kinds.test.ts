/** Every DisconnectReason kind is reachable on the real wire with a named simulator scenario. */
import { describe, expect, it } from 'vitest'
import { REASON_KINDS } from '../../src/reasons.js'
import type { Link } from '../../src/link.js'
import type { PlatformSimulator } from '../../src/node/server/index.js'
import { next, settle, useWorld, type World } from '../support/wire.js'

const world = useWorld()

type Scenario = (w: World) => Promise<{ link: Link; sim: PlatformSimulator; cause: () => unknown }>

const connected = async (w: World, options = {}) => {
  const sim = await w.sim()
  const link = w.link(sim, options)
  await link.connect()
  return { sim, link }
}

const SCENARIOS: Record<string, Scenario> = {
  graceful: async (w) => {
    const { sim, link } = await connected(w)
    return { sim, link, cause: () => void link.disconnect() }
  },
  superseded: async (w) => {
    const { sim, link } = await connected(w)
    return { sim, link, cause: () => void sim.supersede('agent-1') }
  },
  rejected: async (w) => {
    const { sim, link } = await connected(w)
    return { sim, link, cause: () => sim.close({ agent: 'agent-1' }, 1008, 'policy violation') }
  },
  closed: async (w) => {
    const { sim, link } = await connected(w)
    return { sim, link, cause: () => sim.close({ agent: 'agent-1' }, 1001) }
  },
  dropped: async (w) => {
    const { sim, link } = await connected(w)
    return { sim, link, cause: () => sim.abort({ agent: 'agent-1' }) }
  },
  'timed-out': async (w) => {
    const { sim, link } = await connected(w, { policy: { transport: { heartbeatIntervalMs: 60, closeTimeoutMs: 60 } } })
    return { sim, link, cause: () => sim.stall({ agent: 'agent-1' }) }
  },
  suppressed: async (w) => {
    const { sim, link } = await connected(w, { policy: { reconnect: { rapidLimit: 2, initialDelayMs: 1 } } })
    return {
      sim,
      link,
      cause: () => {
        sim.on('connection', (c) => c.close(1000))
        sim.close({ agent: 'agent-1' }, 1000)
      },
    }
  },
  other: async (w) => {
    const { sim, link } = await connected(w)
    return {
      sim,
      link,
      cause: () => {
        sim.refuseUpgrades({ status: 418 })
        sim.close({ agent: 'agent-1' }, 1000)
      },
    }
  },
}

describe('every reason kind on the wire', () => {
  it('has a scenario for each kind of the schema', () => {
    expect(Object.keys(SCENARIOS).sort()).toEqual([...REASON_KINDS].sort())
  })
  for (const [kind, scenario] of Object.entries(SCENARIOS)) {
    it(`${kind}: the simulator scenario produces it`, async () => {
      const { link, cause } = await scenario(world())
      const seen = next(link, 'disconnected', { filter: (e) => e.reason.kind === kind, timeoutMs: 5000 })
      await cause()
      expect((await seen).reason.kind).toBe(kind)
      await settle(link.disconnect())
    })
  }
})
