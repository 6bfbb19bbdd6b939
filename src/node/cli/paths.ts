/** `phoenix-link paths`: the generated paths of the charts, as the model-based tests run them. */
import { allPaths, type ModelPath } from '../model/paths.js'
import type { Expectation } from '../model/connection-model.js'
import { lifecyclePathOf } from '../testing/paths.js'

/** Options of {@link runPaths}. */
export interface PathsOptions {
  /** One chart, or all. */
  chart?: 'connection' | 'channel' | 'reconnect'
  /** `wire`: the paths run on the real link; `pure`: every stimulus, replayed on the chart alone. */
  mode: 'wire' | 'pure'
  json: boolean
  write?: (line: string) => void
}

function describeExpect(expect: Record<string, unknown>): string {
  const value = typeof expect.state === 'string' ? expect.state : JSON.stringify(expect.value)
  const extra: string[] = []
  if (expect.reason) extra.push(`${String(expect.reason)}${expect.code ? ` ${String(expect.code)}` : ''}`)
  if (typeof expect.attempt === 'number') extra.push(`attempt ${expect.attempt}, rapid ${String(expect.rapidStreak)}`)
  return extra.length > 0 ? `${value} (${extra.join(', ')})` : value
}

/**
 * Prints the paths and returns the exit code (0).
 *
 * @throws {Error} for an unknown chart name.
 */
export function runPaths(options: PathsOptions): number {
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`))
  const all = allPaths(options.mode) as Record<string, Array<ModelPath<unknown>>>
  const charts = options.chart ? [options.chart] : Object.keys(all)
  for (const chart of charts) {
    const paths = all[chart]
    if (!paths) throw new Error(`no model for chart ${JSON.stringify(chart)}; use connection, channel or reconnect`)
    if (!options.json) write(`${chart} chart: ${paths.length} ${options.mode} paths, generated with xstate/graph from machines/${chart}.ts`)
    paths.forEach((path, i) => {
      if (options.json && chart === 'connection') {
        // The test kit's vocabulary (phoenix-link/testing): each step's world action and what holds after it.
        const { name, steps } = lifecyclePathOf(path as ModelPath<Expectation>)
        write(JSON.stringify({ chart, mode: options.mode, index: i + 1, name, steps }))
      } else if (options.json) {
        write(
          JSON.stringify({
            chart,
            mode: options.mode,
            index: i + 1,
            name: path.name,
            steps: path.steps.map((s) => ({ name: s.stimulus, kind: s.kind, event: s.event.type, expect: s.expect })),
          }),
        )
      } else {
        write(`${String(i + 1).padStart(5)}. ${path.steps.map((s) => `${s.stimulus} → ${describeExpect(s.expect as Record<string, unknown>)}`).join('  |  ')}`)
      }
    })
  }
  return 0
}
