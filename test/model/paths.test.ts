/**
 * The generated paths of the connection, channel and reconnect charts, executed on the real link
 * against the simulator on loopback (chart delays on a simulated clock), each step checked
 * against the chart's own transition and the rule oracles; the connection paths through the
 * public test kit (phoenix-link/testing) with a host built as a user builds one; then the coverage every chart got,
 * from these wire runs and from the chart-only replay of the paths the wire cannot reach.
 * A failure names the path and the step where the link and the chart disagree.
 */
import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { allPaths } from '../../src/node/model/paths.js'
import { coverageOf, replay, type ChartCoverage, type Crossed } from '../../src/node/model/coverage.js'
import type { ChartName } from '../../src/node/model/chart-info.js'
import { startSimulator, type PlatformSimulator } from '../../src/node/server/index.js'
import { createLink, type Link, type LinkOptions } from '../../src/link.js'
import { lifecyclePaths, reconnectPaths, startPathKit, type PathKit } from '../../src/node/testing/index.js'
import { runChannelPath, runReconnectPath, type PathRun } from './small-runners.js'
import { UNREACHABLE } from './unreachable.js'

const wire = allPaths('wire')
const pure = allPaths('pure')
const crossed: Record<ChartName, Crossed> = {
  connection: { transitions: new Set(), states: new Set() },
  channel: { transitions: new Set(), states: new Set() },
  reconnect: { transitions: new Set(), states: new Set() },
  control: { transitions: new Set(), states: new Set() },
  presence: { transitions: new Set(), states: new Set() },
}
const ran: Record<string, number> = { connection: 0, channel: 0, reconnect: 0 }
let sim: PlatformSimulator
let kit: PathKit

beforeAll(async () => {
  // The charts' own hosts act on nothing by themselves: a short watch after each path is enough here
  // (test/unit/testing.test.ts proves the default watch catches a host that does).
  kit = await startPathKit({ settleMs: 20 })
  sim = await startSimulator({ agents: 'any', recordLimit: 200 })
  sim.holdUpgrades(/^model-r/)
  sim.onJoin(/^room:model-/, { reply: 'hold' })
})

afterAll(async () => {
  await Promise.all([sim.stop(), kit.stop()])
})

/** Adds what a wire run crossed to each chart, by the id prefix of the transitions' source states. */
function record(run: PathRun): void {
  for (const key of run.transitions) {
    const chart = key.split('.')[0]!.split('|')[0] as ChartName
    crossed[chart]?.transitions.add(key)
  }
  for (const id of run.states) {
    const chart = id.split('.')[0] as ChartName
    crossed[chart]?.states.add(id)
  }
}

function batches<T>(items: T[], size: number): T[][] {
  const out: T[][] = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

async function runBatch<T>(chart: string, items: T[], run: (item: T, i: number) => Promise<PathRun>): Promise<void> {
  const results = await Promise.allSettled(items.map(run))
  const failures: string[] = []
  for (const r of results) {
    if (r.status === 'fulfilled') {
      record(r.value)
      ran[chart]!++
    } else failures.push(String((r.reason as Error)?.message ?? r.reason))
  }
  expect(failures).toEqual([])
}

/**
 * The charts' own host for the kit: an app channel on every path, which the kit's
 * app-channels-joined oracle judges at every connected step (on the next socket too, on the
 * reconnect paths).
 */
function modelHost(options: LinkOptions): Link {
  const link = createLink({ ...options, onControl: async () => {} })
  link.channel('room:model')
  return link
}

const lifecycle = lifecyclePaths()
const reconnects = reconnectPaths()
describe(`connection chart: ${lifecycle.length} paths on the real wire and ${reconnects.length} back to connected after each loss, through phoenix-link/testing`, () => {
  it('the kit gives every wire path of the model, step for step', () => {
    expect(lifecycle.map((p) => p.name)).toEqual(wire.connection.map((p) => p.name))
  })
  batches([...lifecycle, ...reconnects], 8).forEach((batch, b) => {
    it(`paths ${b * 8 + 1}-${b * 8 + batch.length}`, () => runBatch('connection', batch, (path) => kit.run(path, modelHost)))
  })
})

describe(`channel chart: ${wire.channel.length} paths on the real wire`, () => {
  batches(wire.channel, 8).forEach((batch, b) => {
    it(`paths ${b * 8 + 1}-${b * 8 + batch.length}`, () =>
      runBatch('channel', batch, (path, i) => runChannelPath(sim, path, `model-h${b * 8 + i}`, `room:model-${b * 8 + i}`)))
  })
})

describe(`reconnect chart: ${wire.reconnect.length} paths on the real wire`, () => {
  batches(wire.reconnect, 8).forEach((batch, b) => {
    it(`paths ${b * 8 + 1}-${b * 8 + batch.length}`, () => runBatch('reconnect', batch, (path, i) => runReconnectPath(sim, path, `model-r${b * 8 + i}`)))
  })
})

describe('coverage of the charts', () => {
  it('every explanation of an unreachable transition names a test that exists', () => {
    for (const chart of Object.values(UNREACHABLE)) {
      for (const why of [...Object.values(chart.states ?? {}), ...Object.values(chart.transitions ?? {})]) {
        const cited = /(test\/[\w/.-]+\.test\.ts) "([^"]+)"/.exec(why)
        expect(cited, `no test cited in: ${why}`).not.toBeNull()
        const source = readFileSync(new URL(`../../${cited![1]}`, import.meta.url), 'utf8')
        expect(source.includes(cited![2]!), `${cited![1]} has no test "${cited![2]}"`).toBe(true)
      }
    }
  })

  const report: ChartCoverage[] = []
  it('replays the paths the wire cannot reach on the charts alone, which cross transitions the wire runs did not', () => {
    const byWire = new Set(crossed.connection.transitions)
    replay('connection', pure.connection, crossed.connection)
    replay('channel', pure.channel, crossed.channel)
    replay('reconnect', pure.reconnect, crossed.reconnect)
    const onlyByReplay = [...crossed.connection.transitions].filter((key) => !byWire.has(key))
    // `stopping` is transient on the wire (phoenix.js settles a leave at once): only direct events reach its other exits.
    expect(onlyByReplay).toContain('connection.session.online.attached.stopping|xstate.after.leaveTimeout.connection.session.online.attached.stopping|0')
  })

  for (const chart of ['connection', 'channel', 'reconnect', 'control'] as const) {
    it(`${chart}: every state and every transition is crossed, or explained in test/model/unreachable.ts`, () => {
      const coverage = coverageOf(chart, crossed[chart])
      report.push(coverage)
      const unexplainedStates = coverage.states.missing.filter((id) => !UNREACHABLE[chart]?.states?.[id])
      const unexplained = coverage.transitions.missing.filter((row) => !UNREACHABLE[chart]?.transitions?.[row.key])
      const stale = Object.keys(UNREACHABLE[chart]?.transitions ?? {}).filter((key) => crossed[chart].transitions.has(key))
      console.info(
        `[coverage] ${chart}: ${ran[chart] ?? 0} wire paths; states ${coverage.states.crossed}/${coverage.states.total}; ` +
          `transitions ${coverage.transitions.crossed}/${coverage.transitions.total} crossed, ${coverage.transitions.missing.length} explained as unreachable by paths`,
      )
      expect(unexplainedStates).toEqual([])
      expect(unexplained.map((r) => `${r.key}  (${r.state} on ${r.event}${r.guard ? ` [${r.guard}]` : ''})`)).toEqual([])
      expect(stale, 'explained as unreachable but crossed: remove from unreachable.ts').toEqual([])
    })
  }
})
