/**
 * `phoenix-link export`: each chart as an XState config, a Stately-importable module and a
 * mermaid diagram. The module is imported back, as Stately Studio or a user would, and must be
 * the shipped chart: the same states and transitions (event, guard, target, actions, rule tag),
 * only the chart's own guards, actions, delays and actors, and the delays' real values.
 */
import { describe, expect, it } from 'vitest'
import type { AnyStateMachine } from 'xstate'
import { allNodes, CHARTS, nodePath, transitionRows, type ChartName } from '../../src/node/model/chart-info.js'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import ts from 'typescript'
import { chartDelays, chartMermaid, chartModule } from '../../src/node/model/export.js'
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

/**
 * Imports a module `phoenix-link export --format ts` wrote, as Stately Studio or a user's code
 * would: transpiled, written to a temporary file outside the checkout (its `xstate` import
 * pointed at this project's copy) and loaded; the file is removed at once.
 */
async function importModule(source: string, exportName: string): Promise<AnyStateMachine> {
  const js = ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText
  const xstate = pathToFileURL(join(dirname(createRequire(import.meta.url).resolve('xstate/package.json')), 'dist', 'xstate.cjs.mjs')).href
  const dir = mkdtempSync(join(tmpdir(), 'phoenix-link-export-'))
  const file = join(dir, 'charts.mjs')
  try {
    writeFileSync(file, js.replace(/from 'xstate'/g, `from '${xstate}'`))
    const module = (await import(/* @vite-ignore */ pathToFileURL(file).href)) as Record<string, AnyStateMachine>
    return module[exportName]!
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** The names a machine's setup() declares, by kind. */
function declared(machine: AnyStateMachine, kind: 'guards' | 'actions' | 'delays' | 'actors'): string[] {
  return Object.keys((machine.implementations as unknown as Record<string, Record<string, unknown>>)[kind] ?? {}).sort()
}

describe('export', () => {
  for (const name of Object.keys(CHARTS) as ChartName[]) {
    it(`${name}: the Stately module, imported back, is the shipped chart: states, transitions, the chart's own names, the real delays`, async () => {
      const original = CHARTS[name] as AnyStateMachine
      const copy = await importModule(chartModule(name), `${name}Machine`)
      expect(allNodes(copy).map(nodePath)).toEqual(allNodes(original).map(nodePath))
      const rows = (m: AnyStateMachine) => transitionRows(m).map(({ state, event, guard, target, actions, rule }) => ({ state, event, guard, target, actions, rule }))
      expect(rows(copy)).toEqual(rows(original))
      expect(rows(original).length).toBeGreaterThan(3)
      // Only the chart's own names: every guard, action, delay and actor is one its setup() declares.
      for (const kind of ['guards', 'actions', 'delays', 'actors'] as const) {
        const own = new Set(declared(original, kind))
        expect(declared(copy, kind).filter((n) => !own.has(n)), `${kind} not in machines/${name}.ts setup()`).toEqual([])
      }
      expect(declared(copy, 'actions')).not.toContain('raise')
      expect(declared(copy, 'actions')).not.toContain('cancel')
      // Entry and exit actions: the shipped chart's own, without XState's scheduling of `after`.
      const own = (m: AnyStateMachine) => allNodes(m).map((n) => [nodePath(n), (n.entry as unknown[]).filter((a) => typeof a === 'string' || (a as { type?: string }).type?.startsWith('xstate.') !== true).length])
      expect(own(copy)).toEqual(own(original))
      // The real delays: what the chart's own delay functions give under the default policy.
      expect((copy.implementations as { delays: Record<string, number> }).delays).toEqual(chartDelays(name))
    })

    it(`${name}: mermaid names every state`, () => {
      const diagram = chartMermaid(name)
      expect(diagram.startsWith('stateDiagram-v2\n')).toBe(true)
      for (const node of allNodes(CHARTS[name] as AnyStateMachine)) {
        if (node.path.length > 0) expect(diagram).toContain(`state "${node.key}" as ${node.path.join('__')}`)
      }
    })
  }

  it('the delays are the default policy\'s: connect and join timeouts 10 s, the reconnect windows, the first backoff ceiling', () => {
    expect(chartDelays('connection')).toMatchObject({ connectTimeout: 10_000, joinTimeout: 10_000, leaveTimeout: 1_000 })
    // floorRemaining: what is left of a server's floor when the host retries now; none pending in the initial context.
    expect(chartDelays('reconnect')).toEqual({ backoffDelay: 500, cooldown: 30_000, floorRemaining: 0, rapidWindow: 5_000, stableAfter: 60_000 })
    expect(chartModule('reconnect')).toContain('"guard": and(["livedBriefly", "isServerClose"])')
  })

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

describe('step names', () => {
  it('name XState events as the docs do', async () => {
    const { stepLabel } = await import('../../src/node/model/labels.js')
    expect(stepLabel('xstate.after.backoffDelay.reconnect.waiting')).toBe('after backoffDelay')
    expect(stepLabel('xstate.after.1000.connection.x', 'connectTimeout')).toBe('after connectTimeout')
    expect(stepLabel('xstate.done.actor.leave')).toBe('done leave')
    expect(stepLabel('xstate.error.actor.transport')).toBe('error transport')
    expect([stepLabel('xstate.init'), stepLabel('xstate.stop'), stepLabel(''), stepLabel('control.joinOk')]).toEqual(['start', 'stop', '(always)', 'control.joinOk'])
  })
})

describe('guard labels', () => {
  it('parenthesise compound operands', async () => {
    const { guardLabel } = await import('../../src/node/model/chart-info.js')
    expect(guardLabel({ type: 'and', guards: ['a', { type: 'or', guards: ['b', 'c'] }] })).toBe('a && (b || c)')
    expect(guardLabel({ type: 'not', guards: [{ type: 'and', guards: ['a', 'b'] }] })).toBe('!(a && b)')
    expect(guardLabel({ type: 'and', guards: ['a', { type: 'not', guards: ['b'] }] })).toBe('a && !b')
  })
})
