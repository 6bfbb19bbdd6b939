/**
 * Every generated wire path of the connection chart, executed on the real link against the
 * simulator on loopback. A failure names the path and the step where the link and the chart
 * disagree.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connectionPaths } from '../../src/model/paths.js'
import { startSimulator, type PlatformSimulator } from '../../src/server/index.js'
import { runPath, type PathRun } from './runner.js'

const paths = connectionPaths('wire')
let sim: PlatformSimulator
export const runs: PathRun[] = []

beforeAll(async () => {
  sim = await startSimulator({ agents: 'any', recordLimit: 200 })
  sim.holdUpgrades()
  sim.onJoin(/^agent_control:/, { reply: 'hold' })
})

afterAll(async () => {
  await sim.stop()
})

describe(`connection chart: ${paths.length} generated paths on the real wire`, () => {
  it('has paths', () => expect(paths.length).toBeGreaterThan(50))
  // Eight paths at a time, each its own agent, link and simulated clock, on one simulator.
  const batches: Array<typeof paths> = []
  for (let i = 0; i < paths.length; i += 8) batches.push(paths.slice(i, i + 8))
  batches.forEach((batch, b) => {
    it(`paths ${b * 8 + 1}-${b * 8 + batch.length}`, async () => {
      const results = await Promise.allSettled(batch.map((path, i) => runPath(sim, path, `model-${b * 8 + i}`)))
      const failures = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => String(r.reason?.message ?? r.reason))
      for (const r of results) if (r.status === 'fulfilled') runs.push(r.value)
      expect(failures).toEqual([])
    })
  })
})
