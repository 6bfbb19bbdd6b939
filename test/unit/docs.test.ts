/**
 * The docs and the completeness of the charts read from the source of truth: the generated
 * docs are current, every policy field documents its default truthfully, every rule names
 * tests that exist, and every event a chart declares is handled somewhere.
 */
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import ts from 'typescript'
import type { AnyStateMachine } from 'xstate'
import { allPaths } from '../../src/node/model/paths.js'
import { CHARTS, policyDocs, renderLifecycle, renderReasons, renderSimulatorHttp, renderSimulatorOpenApi, RULES, transitionRows } from '../../scripts/docs-lib.js'

const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8')

describe('generated docs', () => {
  it('docs/lifecycle.md, docs/reasons.md and the simulator\'s HTTP docs are current (run `npm run docs`)', () => {
    expect(read('docs/lifecycle.md')).toBe(renderLifecycle())
    expect(read('docs/reasons.md')).toBe(renderReasons())
    expect(read('docs/simulator-http.md')).toBe(renderSimulatorHttp())
    expect(read('docs/simulator-openapi.json')).toBe(renderSimulatorOpenApi())
  })

  it("the README's counts of generated paths are the generator's", () => {
    const { connection, channel, reconnect } = allPaths('wire')
    const readme = read('README.md')
    expect(readme).toContain(`generated lifecycle paths (${connection.length} of them,`)
    expect(readme).toContain(`edge: ${connection.length} + ${channel.length} + ${reconnect.length} paths`)
  })

  it('every policy field has a doc and a @default equal to its value', () => {
    const docs = policyDocs()
    expect(docs.length).toBeGreaterThan(20)
    for (const d of docs) {
      expect(d.doc, `${d.concern}.${d.field} has no doc`).not.toBe('')
      const stated = d.defaultTag.split('—')[0]!.trim()
      expect(stated, `${d.concern}.${d.field} has no @default`).not.toBe('')
      expect(JSON.parse(stated), `${d.concern}.${d.field}: @default ${stated} but the value is ${JSON.stringify(d.value)}`).toEqual(d.value)
    }
  })

  it('every rule names tests that exist, and every rule tag in a chart is a known rule', () => {
    for (const rule of RULES) {
      for (const [file, name] of rule.tests) {
        const titles = [...read(file).matchAll(/\bit\(\s*([`'"])((?:(?!\1).)*)\1/g)].map((m) => m[2]!)
        const matches = titles.some((title) => {
          const pattern = title.replace(/[.*+?^${}()|[\]\\]/g, (c) => `\\${c}`).replace(/\\\$\\\{[^}]*\\\}/g, '.+')
          return new RegExp(`^${pattern}$`).test(name)
        })
        expect(matches, `${file} has no test "${name}"`).toBe(true)
      }
    }
    const known = new Set(RULES.map((r) => r.id))
    for (const machine of Object.values(CHARTS)) for (const row of transitionRows(machine)) if (row.rule) expect(known.has(row.rule), row.rule).toBe(true)
  })
})

/** The `type` literals of an exported union type alias, read from the chart's source. */
function declaredEvents(file: string, alias: string): string[] {
  const source = ts.createSourceFile(file, read(file), ts.ScriptTarget.ES2022, true)
  const out: string[] = []
  source.forEachChild(function visit(node) {
    if (ts.isTypeAliasDeclaration(node) && node.name.text === alias) {
      node.type.forEachChild(function find(n) {
        if (ts.isPropertySignature(n) && n.name.getText(source) === 'type' && n.type && ts.isLiteralTypeNode(n.type) && ts.isStringLiteral(n.type.literal)) {
          out.push(n.type.literal.text)
        }
        n.forEachChild(find)
      })
    }
    node.forEachChild(visit)
  })
  return out
}

describe('chart completeness', () => {
  const cases: Array<[string, string, string]> = [
    ['connection', 'machines/connection.ts', 'ConnectionEvent'],
    ['channel', 'machines/channel.ts', 'ChannelEvent'],
    ['reconnect', 'machines/reconnect.ts', 'ReconnectEvent'],
    ['control', 'machines/control.ts', 'ControlEvent'],
    ['presence', 'machines/presence.ts', 'PresenceEvent'],
  ]
  for (const [chart, file, alias] of cases) {
    it(`every event the ${chart} chart declares is handled in some state`, () => {
      const handled = new Set(transitionRows((CHARTS as Record<string, AnyStateMachine>)[chart]!).map((r) => r.event))
      const declared = declaredEvents(file, alias)
      expect(declared.length).toBeGreaterThan(0)
      for (const event of declared) expect(handled.has(event), `${chart}: ${event} is declared but no state handles it`).toBe(true)
    })
  }

  it('every action, guard and delay a chart uses is named (no inline functions)', () => {
    for (const [chart, machine] of Object.entries(CHARTS)) {
      for (const row of transitionRows(machine)) {
        expect(row.actions.split(', ').filter((a) => a === '(inline)'), `${chart} ${row.state} ${row.event}`).toEqual([])
        expect(row.guard === '(inline)', `${chart} ${row.state} ${row.event}`).toBe(false)
        if (row.event.startsWith('after ')) expect(row.event).not.toMatch(/^after \d+$/)
      }
    }
  })
})
