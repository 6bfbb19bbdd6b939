/**
 * Links share one chart definition: a per-link provide() copied the whole chart definition
 * (about 75 KiB of heap per link, bench/ idle memory). Each link's charts run on its own runtime,
 * which carries out their I/O on its own adapter: two links side by side get only their own
 * sockets, control signals and app messages.
 */
import { describe, expect, it } from 'vitest'
import { chartOf, chartsOf } from '../../src/chart-of.js'
import type { ControlSignal } from '../../src/protocol.js'
import { next, useWorld } from '../support/wire.js'

const world = useWorld()

describe('links share one chart definition', () => {
  it('two links run the same machine logic, each on its own runtime and adapter', async () => {
    const sim = await world().sim()
    const seen: Record<string, string[]> = { a: [], b: [] }
    let handledA!: () => void
    let handledB!: () => void
    const handled = Promise.all([new Promise<void>((r) => (handledA = r)), new Promise<void>((r) => (handledB = r))])
    const a = world().link(sim, { onControl: (s: ControlSignal) => void (seen.a!.push(s.correlationId ?? ''), handledA()) })
    const b = world().link(sim, { agentId: 'agent-2', apiKey: 'key-2', onControl: (s: ControlSignal) => void (seen.b!.push(s.correlationId ?? ''), handledB()) })
    expect(chartOf(a).logic).toBe(chartOf(b).logic)
    expect(chartsOf(a)).not.toBe(chartsOf(b))
    expect(a.actor).toBe(chartOf(a))
    const roomA = a.channel('room:a')
    const roomB = b.channel('room:b')
    await Promise.all([a.connect(), b.connect()])
    const joined = (room: typeof roomA) =>
      room.status === 'joined' ? Promise.resolve() : new Promise<void>((resolve) => room.onStatus((status) => status === 'joined' && resolve()))
    await Promise.all([joined(roomA), joined(roomB)])
    expect(sim.live('agent-1').map((c) => [...c.channels.keys()].sort())).toEqual([['agent_control:agent-1', 'room:a']])
    expect(sim.live('agent-2').map((c) => [...c.channels.keys()].sort())).toEqual([['agent_control:agent-2', 'room:b']])
    const got: string[] = []
    roomA.on('news', () => got.push('a'))
    roomB.on('news', () => got.push('b'))
    sim.push({ agent: 'agent-2' }, 'room:b', 'news', {})
    sim.control('agent-2', { mode: 'interrupt', correlation_id: 'for-b' })
    sim.control('agent-1', { mode: 'interrupt', correlation_id: 'for-a' })
    await handled
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
