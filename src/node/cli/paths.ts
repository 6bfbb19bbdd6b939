/** `phoenix-link paths`: the generated paths of the charts, as the model-based tests run them. */
import { allPaths, reconnectedPaths, type ModelPath } from '../model/paths.js'
import type { Expectation } from '../model/connection-model.js'
import { lifecyclePathOf } from '../testing/paths.js'
import { MODEL_RECONNECT_POLICY } from '../model/small-models.js'
import { DEFAULT_RECONNECT_POLICY } from '../../../machines/reconnect-policy.js'

/** Options of {@link runPaths}. */
export interface PathsOptions {
  /** One chart, or all. */
  chart?: 'connection' | 'channel' | 'reconnect'
  /** `wire`: the paths run on the real link; `pure`: every stimulus, replayed on the chart alone. */
  mode: 'wire' | 'pure'
  json: boolean
  /**
   * Print the paths on which a connected link loses its socket and connects again on the next,
   * twice (`reconnectPaths()` of phoenix-link/testing) instead: wire paths of the connection chart only.
   */
  reconnects?: boolean
  write?: (line: string) => void
  /** Where a refusal of the options is written (stderr unless given). */
  writeError?: (line: string) => void
}

function describeExpect(expect: Record<string, unknown>): string {
  const value = typeof expect.state === 'string' ? expect.state : JSON.stringify(expect.value)
  const extra: string[] = []
  if (expect.reason) extra.push(`${String(expect.reason)}${expect.code ? ` ${String(expect.code)}` : ''}`)
  if (typeof expect.attempt === 'number') extra.push(`attempt ${expect.attempt}, rapid ${String(expect.rapidStreak)}`)
  return extra.length > 0 ? `${value} (${extra.join(', ')})` : value
}

/**
 * The policy fields a chart's paths are generated under that differ from the link's defaults:
 * the reconnect chart's model uses small limits so that its slow-down and give-up paths are short
 * (src/node/model/small-models.ts `MODEL_RECONNECT_POLICY`); the other charts use the defaults.
 */
export function modelPolicyOf(chart: string): Record<string, { model: unknown; default: unknown }> {
  if (chart !== 'reconnect') return {}
  const differs: Record<string, { model: unknown; default: unknown }> = {}
  for (const [key, value] of Object.entries(MODEL_RECONNECT_POLICY)) {
    const fallback = (DEFAULT_RECONNECT_POLICY as Record<string, unknown>)[key]
    if (value !== fallback) differs[key] = { model: value, default: fallback ?? null }
  }
  return differs
}

/**
 * Prints the paths and returns the exit code: 0, or 1 (as for any other option the command
 * refuses) when `reconnects` is asked for another chart or mode than the connection chart's wire
 * paths, the refusal written to `writeError`. Each JSON line names its `set`: `generated` (the
 * charts' generated paths) or `reconnect`; `index` counts within the set.
 *
 * @throws {Error} for an unknown chart name.
 */
export function runPaths(options: PathsOptions): number {
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`))
  /** One path: as JSON in the kit's vocabulary (connection chart) or the chart's own, or as a line of text. */
  const print = (chart: string, set: 'generated' | 'reconnect', path: ModelPath<unknown>, i: number, policy: Record<string, { model: unknown }>): void => {
    if (options.json && chart === 'connection') {
      // The test kit's vocabulary (phoenix-link/testing): each step's world action and what holds after it.
      const { name, steps } = lifecyclePathOf(path as ModelPath<Expectation>)
      write(JSON.stringify({ chart, set, mode: options.mode, index: i + 1, name, steps }))
    } else if (options.json) {
      write(
        JSON.stringify({
          chart,
          set,
          mode: options.mode,
          index: i + 1,
          name: path.name,
          ...(Object.keys(policy).length > 0 ? { policy: Object.fromEntries(Object.entries(policy).map(([key, { model }]) => [key, model])) } : {}),
          steps: path.steps.map((s) => ({ name: s.stimulus, kind: s.kind, event: s.event.type, expect: s.expect })),
        }),
      )
    } else {
      write(`${String(i + 1).padStart(5)}. ${path.steps.map((s) => `${s.stimulus} → ${describeExpect(s.expect as Record<string, unknown>)}`).join('  |  ')}`)
    }
  }
  if (options.reconnects) {
    const wrong = [
      ...(options.chart !== undefined && options.chart !== 'connection' ? [`--chart ${options.chart}`] : []),
      ...(options.mode !== 'wire' ? [`--mode ${options.mode}`] : []),
    ]
    if (wrong.length > 0) {
      ;(options.writeError ?? ((line: string) => process.stderr.write(`${line}\n`)))(`error: --reconnects prints wire paths of the connection chart, not with ${wrong.join(' ')}`)
      return 1
    }
    // The model paths reconnectPaths() is made of, printed as the generated ones are.
    const paths = reconnectedPaths()
    if (!options.json) write(`connection chart: ${paths.length} wire paths on which a connected link loses its socket and connects again on the next, twice (reconnectPaths())`)
    paths.forEach((path, i) => print('connection', 'reconnect', path, i, {}))
    return 0
  }
  const all = allPaths(options.mode) as Record<string, Array<ModelPath<unknown>>>
  const charts = options.chart ? [options.chart] : Object.keys(all)
  for (const chart of charts) {
    const paths = all[chart]
    if (!paths) throw new Error(`no model for chart ${JSON.stringify(chart)}; use connection, channel or reconnect`)
    const policy = modelPolicyOf(chart)
    const changed = Object.entries(policy).map(([key, { model, default: fallback }]) => `${key} ${String(model)} (default ${fallback === null ? 'none' : String(fallback)})`)
    if (!options.json) {
      write(
        `${chart} chart: ${paths.length} ${options.mode} paths, generated with xstate/graph from machines/${chart}.ts` +
          (changed.length > 0 ? `, under a small policy so that its slow-down and give-up paths are short: ${changed.join(', ')}` : ''),
      )
    }
    paths.forEach((path, i) => print(chart, 'generated', path, i, policy))
  }
  return 0
}
