/** `phoenix-link export`: the shipped charts as XState config JSON, a Stately-importable TypeScript module, or mermaid. */
import type { AnyStateMachine } from 'xstate'
import { CHARTS, type ChartName } from '../model/chart-info.js'
import { chartConfig, chartMermaid, chartModule, chartsModule } from '../model/export.js'

/** The formats of {@link runExport}. */
export const EXPORT_FORMATS = ['json', 'ts', 'mermaid'] as const

/** Options of {@link runExport}. */
export interface ExportOptions {
  /**
   * One chart, or all: json gives one object keyed by chart, ts one module with one
   * `export const <name>Machine` per chart, mermaid a Markdown page with one fenced diagram per
   * chart (a mermaid file holds one diagram).
   */
  chart?: ChartName
  format: (typeof EXPORT_FORMATS)[number]
  write?: (text: string) => void
}

/**
 * Writes the chart(s) in `format` and returns the exit code (0).
 *
 * @throws {Error} for an unknown chart or format, naming the valid ones.
 */
export function runExport(options: ExportOptions): number {
  const write = options.write ?? ((text: string) => process.stdout.write(text))
  if (options.chart !== undefined && !(options.chart in CHARTS)) {
    throw new Error(`unknown chart ${JSON.stringify(options.chart)}; use one of ${Object.keys(CHARTS).join(', ')}`)
  }
  if (!(EXPORT_FORMATS as readonly string[]).includes(options.format)) {
    throw new Error(`unknown format ${JSON.stringify(options.format)}; use one of ${EXPORT_FORMATS.join(', ')}`)
  }
  const charts = options.chart ? [options.chart] : (Object.keys(CHARTS) as ChartName[])
  if (options.format === 'json') {
    const out = options.chart
      ? chartConfig(CHARTS[options.chart] as AnyStateMachine)
      : Object.fromEntries(charts.map((name) => [name, chartConfig(CHARTS[name] as AnyStateMachine)]))
    write(`${JSON.stringify(out, null, 2)}\n`)
  } else if (options.format === 'ts') {
    write(options.chart ? chartModule(options.chart) : chartsModule(charts))
  } else if (options.chart) {
    write(chartMermaid(options.chart))
  } else {
    write(charts.map((name) => `## ${name}\n\n\`\`\`mermaid\n${chartMermaid(name).trimEnd()}\n\`\`\`\n`).join('\n'))
  }
  return 0
}
