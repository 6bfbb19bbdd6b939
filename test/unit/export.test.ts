/**
 * `phoenix-link export`: each chart as an XState config, a Stately-importable module and a
 * mermaid diagram. The config is read back with XState and must give the same states and
 * transitions (event, guard, target, actions, rule tag) as the shipped chart.
 */
import { describe, expect, it } from 'vitest'
import { fromCallback, setup, type AnyStateMachine } from 'xstate'
import { allNodes, CHARTS, nodePath, transitionRows, type ChartName } from '../../src/node/model/chart-info.js'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { chartConfig, chartMermaid, chartModule, collectNames } from '../../src/node/model/export.js'
import { runExport } from '../../src/node/cli/export.js'

/** Type errors of `source` compiled as a module inside this project (so `xstate` resolves). */
function typeErrors(source: string): string[] {
  const file = fileURLToPath(new URL('../../exported-charts.ts', import.meta.url))
  const options: ts.CompilerOptions = { strict: true, noEmit: true, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, skipLibCheck: true, types: [] }
  const host = ts.createCompilerHost(options)
  const getSourceFile = host.getSourceFile.bind(host)
  host.getSourceFile = (name, version, ...rest) => (name === file ? ts.createSourceFile(name, source, version) : getSourceFile(name, version, ...rest))
  const fileExists = host.fileExists.bind(host)
  host.fileExists = (name) => name === file || fileExists(name)
  const program = ts.createProgram([file], options, host)
  return ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))
}

/** Builds a machine from an exported config with stub implementations under the same names. */
function reimport(config: ReturnType<typeof chartConfig>): AnyStateMachine {
  const names = collectNames(config)
  const stub = <T>(set: Set<string>, value: T) => Object.fromEntries([...set].map((n) => [n, value]))
  return setup({
    guards: stub(names.guards, () => true),
    actions: stub(names.actions, () => {}),
    delays: stub(names.delays, 1000),
    actors: stub(names.actors, fromCallback(() => {})),
  }).createMachine(config as never) as unknown as AnyStateMachine
}

describe('export', () => {
  for (const name of Object.keys(CHARTS) as ChartName[]) {
    it(`${name}: the exported config, read back by XState, has the same states and transitions`, () => {
      const original = CHARTS[name] as AnyStateMachine
      const copy = reimport(JSON.parse(JSON.stringify(chartConfig(original))))
      expect(allNodes(copy).map(nodePath)).toEqual(allNodes(original).map(nodePath))
      const rows = (m: AnyStateMachine) => transitionRows(m).map(({ state, event, guard, target, actions, rule }) => ({ state, event, guard, target, actions, rule }))
      expect(rows(copy)).toEqual(rows(original))
      expect(rows(original).length).toBeGreaterThan(3)
    })

    it(`${name}: the TypeScript module carries the same config, and mermaid names every state`, () => {
      const module = chartModule(name)
      const json = module.slice(module.indexOf('.createMachine(') + '.createMachine('.length, module.lastIndexOf(')'))
      expect(JSON.parse(json)).toEqual(chartConfig(CHARTS[name] as AnyStateMachine))
      const diagram = chartMermaid(name)
      expect(diagram.startsWith('stateDiagram-v2\n')).toBe(true)
      for (const node of allNodes(CHARTS[name] as AnyStateMachine)) {
        if (node.path.length > 0) expect(diagram).toContain(`state "${node.key}" as ${node.path.join('__')}`)
      }
    })
  }

  it('the CLI writes each format and refuses an unknown chart or format', () => {
    const out: string[] = []
    expect(runExport({ chart: 'reconnect', format: 'mermaid', write: (s) => out.push(s) })).toBe(0)
    expect(out.join('')).toContain('waiting --> idle : after backoffDelay')
    out.length = 0
    expect(runExport({ format: 'json', write: (s) => out.push(s) })).toBe(0)
    expect(Object.keys(JSON.parse(out.join('')))).toEqual(Object.keys(CHARTS))
    // Every chart at once: one module that compiles, one Markdown page of fenced diagrams.
    out.length = 0
    expect(runExport({ format: 'ts', write: (s) => out.push(s) })).toBe(0)
    const module = out.join('')
    expect(module.match(/^import /gm)).toHaveLength(1)
    for (const name of Object.keys(CHARTS)) expect(module).toContain(`export const ${name}Machine = setup(`)
    expect(typeErrors(module)).toEqual([])
    expect(typeErrors(chartModule('connection'))).toEqual([])
    out.length = 0
    expect(runExport({ format: 'mermaid', write: (s) => out.push(s) })).toBe(0)
    expect(out.join('').match(/^```mermaid\nstateDiagram-v2$/gm)).toHaveLength(Object.keys(CHARTS).length)
    expect(() => runExport({ chart: 'nope' as ChartName, format: 'json', write: () => {} })).toThrow(/unknown chart/)
    expect(() => runExport({ format: 'svg' as 'json', write: () => {} })).toThrow(/unknown format/)
  })
})
