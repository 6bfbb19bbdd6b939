/**
 * Model suite cost: the generated paths of the connection, channel and reconnect charts executed
 * on the real wire, as `npm test` runs them (8 at a time, chart delays on a simulated clock,
 * one simulator on loopback in this process), and the same paths replayed on the charts alone.
 * Paths per second; there is no raw phoenix.js figure (the raw client has no chart to walk).
 *
 * Run alone: `npm run bench -- model-cost`.
 */
import { allPaths } from '../src/node/model/paths.js'
import { replay } from '../src/node/model/coverage.js'
import { startSimulator } from '../src/node/server/index.js'
import { createLink } from '../src/link.js'
import { lifecyclePaths, startPathKit } from '../src/node/testing/index.js'
import { runChannelPath, runReconnectPath } from '../test/model/small-runners.js'
import { row, printIfMain, type Row } from './common.js'

async function inBatches<T>(items: T[], size: number, run: (item: T, i: number) => Promise<unknown>): Promise<void> {
  for (let b = 0; b < items.length; b += size) await Promise.all(items.slice(b, b + size).map((item, i) => run(item, b + i)))
}

export async function run(): Promise<Row[]> {
  const generatedAt = performance.now()
  const wire = allPaths('wire')
  const pure = allPaths('pure')
  const generateMs = performance.now() - generatedAt
  const kit = await startPathKit()
  const sim = await startSimulator({ agents: 'any', recordLimit: 200 })
  sim.holdUpgrades(/^model-r/)
  sim.onJoin(/^room:model-/, { reply: 'hold' })
  try {
    const started = performance.now()
    await inBatches([...lifecyclePaths()], 8, (path) => kit.run(path, (options) => createLink(options)))
    await inBatches(wire.channel, 8, (path, i) => runChannelPath(sim, path, `model-h${i}`, `room:model-${i}`))
    await inBatches(wire.reconnect, 8, (path, i) => runReconnectPath(sim, path, `model-r${i}`))
    const wireMs = performance.now() - started
    const wireCount = wire.connection.length + wire.channel.length + wire.reconnect.length
    const replayedAt = performance.now()
    replay('connection', pure.connection)
    replay('channel', pure.channel)
    replay('reconnect', pure.reconnect)
    const pureMs = performance.now() - replayedAt
    const pureCount = pure.connection.length + pure.channel.length + pure.reconnect.length
    return [
      row('model suite cost', `${wireCount} generated paths on the real wire, paths/s`, 'paths/s', wireCount / (wireMs / 1000), null, null),
      row('model suite cost', `${pureCount} paths replayed on the charts alone, paths/s`, 'paths/s', pureCount / (pureMs / 1000), null, null),
      row('model suite cost', 'generating all paths (xstate/graph)', 'ms', generateMs, null, null),
    ]
  } finally {
    await Promise.all([sim.stop(), kit.stop()])
  }
}

await printIfMain(import.meta.url, run)
