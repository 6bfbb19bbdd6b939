/**
 * Links share one provided connection chart: a per-link provide() copied the whole chart
 * definition (about 75 KiB of heap per link, bench/ idle memory). Each link's actors must still
 * reach their own adapter, through the link's actor system: two links side by side get only
 * their own sockets, control signals and app messages.
 */
import { describe, expect, it } from 'vitest'
import type { ControlSignal } from '../../src/protocol.js'
import { next, useWorld } from '../support/wire.js'

const world = useWorld()

describe('links share one chart definition', () => {
  it('two links run the same machine logic, in separate actor systems, each on its own adapter', async () => {
    const sim = await world().sim()
    const seen: Record<string, string[]> = { a: [], b: [] }
    const a = world().link(sim, { onControl: (s: ControlSignal) => void seen.a!.push(s.correlationId ?? '') })
    const b = world().link(sim, { agentId: 'agent-2', apiKey: 'key-2', onControl: (s: ControlSignal) => void seen.b!.push(s.correlationId ?? '') })
    expect(a.actor.logic).toBe(b.actor.logic)
    expect(a.actor.system).not.toBe(b.actor.system)
    const roomA = a.channel('room:a')
    const roomB = b.channel('room:b')
    await Promise.all([a.connect(), b.connect()])
    await Promise.all([next(a, 'channel', { filter: (e) => e.status === 'joined' }), next(b, 'channel', { filter: (e) => e.status === 'joined' })])
    expect(sim.live('agent-1').map((c) => [...c.channels.keys()].sort())).toEqual([['agent_control:agent-1', 'room:a']])
    expect(sim.live('agent-2').map((c) => [...c.channels.keys()].sort())).toEqual([['agent_control:agent-2', 'room:b']])
    const got: string[] = []
    roomA.on('news', () => got.push('a'))
    roomB.on('news', () => got.push('b'))
    const controlA = next(a, 'control')
    const controlB = next(b, 'control')
    sim.push({ agent: 'agent-2' }, 'room:b', 'news', {})
    sim.control('agent-2', { mode: 'interrupt', correlation_id: 'for-b' })
    sim.control('agent-1', { mode: 'interrupt', correlation_id: 'for-a' })
    await Promise.all([controlA, controlB])
    const deadline = performance.now() + 2000
    while ((seen.a!.length === 0 || seen.b!.length === 0) && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 2))
    expect(seen).toEqual({ a: ['for-a'], b: ['for-b'] })
    expect(got).toEqual(['b'])
    // Closing one link's socket reconnects that link only.
    const back = next(b, 'reconnected')
    sim.close({ agent: 'agent-2' }, 1001)
    await back
    expect(sim.accepted('agent-1')).toHaveLength(1)
    expect(sim.accepted('agent-2')).toHaveLength(2)
  })
})
