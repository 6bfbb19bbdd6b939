/** The main job: `phoenix-link demo` runs the whole scripted lifecycle and exits 0. */
import { describe, expect, it } from 'vitest'
import { runDemo } from '../../src/node/cli/demo.js'

describe('npm run demo', () => {
  it('prints the lifecycle as JSON lines and exits 0', async () => {
    const lines: string[] = []
    const code = await runDemo({ json: true, write: (l) => lines.push(l) })
    const events = lines.map((l) => JSON.parse(l) as { source: string; type: string; [k: string]: unknown })
    expect(code, lines.filter((l) => l.includes('failed')).join('\n')).toBe(0)
    const of = (source: string, type: string) => events.filter((e) => e.source === source && e.type === type)
    expect(of('link A', 'reconnected')).toHaveLength(4)
    expect(of('link A', 'disconnected').map((e) => (e.reason as { kind: string; closeCode?: number }).closeCode ?? (e.reason as { kind: string }).kind)).toEqual([
      1000,
      1001,
      1011,
      'dropped',
      'superseded',
    ])
    // The JSON line carries the event's outcome, as the library's event does.
    expect(of('link A', 'disconnected').map((e) => e.outcome)).toEqual(['reconnect', 'reconnect', 'reconnect', 'reconnect', 'terminated'])
    expect(of('agent A', 'handled').map((e) => e.correlationId)).toEqual(['ctl-1', 'ctl-2', 'ctl-3'])
    expect(of('link A', 'final')[0]).toMatchObject({ state: 'terminated', lastDisconnectReason: { kind: 'superseded' } })
    expect(of('simulator', 'summary')[0]).toMatchObject({ live: 1, accepted: 6 })
    expect(of('simulator', 'presence').map((e) => e.kind)).toEqual(['first-connected', 'last-disconnected'])
    expect(of('simulator', 'agent-aborted')).toEqual([expect.objectContaining({ runId: 'run-demo', outcome: 'aborted' })])
    expect(events.at(-1)).toMatchObject({ source: 'demo', type: 'step', title: expect.stringContaining('every step held') })
  })

  it('prints readable lines without --json', async () => {
    const lines: string[] = []
    expect(await runDemo({ write: (l) => lines.push(l) })).toBe(0)
    expect(lines.join('\n')).toMatch(/link A +connected → reconnecting/)
    expect(lines.join('\n')).toMatch(/superseded by a newer session with the same key/)
  })
})
