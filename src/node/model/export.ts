/**
 * The shipped charts in forms other tools read: an XState config object (JSON) and a TypeScript
 * module with `createMachine(config)` that Stately Studio imports ("Import from code"), and a
 * mermaid `stateDiagram-v2`. All three are derived from the machine definitions themselves, so
 * they cannot drift from the charts: guards, actions and named delays appear by the names they
 * have in `setup()`, each transition keeps its DESIGN rule tag (`meta.rule`). The charts invoke
 * no actor (their I/O is named entry, exit and transition actions), so neither does the export.
 */
import { initialTransition, type AnyStateMachine, type StateNode } from 'xstate'
import { allNodes, CHARTS, entryExit, eventLabel, guardLabel, guardOf, refName, type ChartName, type ConfigGuard } from './chart-info.js'
import { DEFAULT_CHANNEL_POLICY } from '../../../machines/channel-policy.js'
import { DEFAULT_RECONNECT_POLICY } from '../../../machines/reconnect-policy.js'

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyNode = StateNode<any, any>


/** One transition in config form. */
export interface ConfigTransition {
  /** `#<state id>` references; absent for a transition that stays. */
  target?: string[]
  guard?: ConfigGuard
  actions?: string[]
  /** The DESIGN rule tag, when the chart has one. */
  meta?: { rule: string }
}

/** One state in config form (the subset of XState's config the charts use). */
export interface ConfigState {
  id: string
  description?: string
  type?: 'final' | 'parallel'
  initial?: string
  entry?: string[]
  exit?: string[]
  on?: Record<string, ConfigTransition[]>
  /** Named delays (the names of `setup({ delays })`). */
  after?: Record<string, ConfigTransition[]>
  always?: ConfigTransition[]
  states?: Record<string, ConfigState>
}

function transitionOf(t: Record<string, unknown>): ConfigTransition {
  const out: ConfigTransition = {}
  const targets = (t.target as AnyNode[] | undefined) ?? []
  if (targets.length > 0) out.target = targets.map((n) => `#${n.id}`)
  if (t.guard !== undefined && t.guard !== null) out.guard = guardOf(t.guard)
  const actions = ((t.actions as unknown[]) ?? []).map(refName)
  if (actions.length > 0) out.actions = actions
  const rule = (t.meta as { rule?: string } | undefined)?.rule
  if (rule) out.meta = { rule }
  return out
}

function stateOf(node: AnyNode): ConfigState {
  const out: ConfigState = { id: node.id }
  if (node.description) out.description = node.description
  if (node.type === 'final' || node.type === 'parallel') out.type = node.type
  const initial = (node.initial as unknown as { target?: AnyNode[] } | undefined)?.target?.[0]
  if (initial && node.type === 'compound') out.initial = initial.key
  const { entry, exit } = entryExit(node)
  if (entry.length > 0) out.entry = entry
  if (exit.length > 0) out.exit = exit

  const delays = new Map((node.after ?? []).map((t: { eventType: string; delay: unknown }) => [t.eventType, refName(t.delay)]))
  for (const [eventType, list] of node.transitions as unknown as Map<string, Array<Record<string, unknown>>>) {
    const transitions = list.map(transitionOf)
    if (eventType.startsWith('xstate.after.')) (out.after ??= {})[delays.get(eventType) ?? eventType.split('.')[2]!] = transitions
    else (out.on ??= {})[eventType] = transitions
  }
  const always = ((node.always ?? []) as unknown as Array<Record<string, unknown>>).map(transitionOf)
  if (always.length > 0) out.always = always
  const children = Object.entries(node.states as Record<string, AnyNode>)
  if (children.length > 0) out.states = Object.fromEntries(children.map(([key, child]) => [key, stateOf(child)]))
  return out
}

/**
 * A chart as an XState config object: states, `on`, `after` (named delays), `always`,
 * entry/exit action names, guard names and rule tags. Context and implementations are left out (they are code, supplied by `setup()`).
 */
export function chartConfig(machine: AnyStateMachine): ConfigState {
  return stateOf(machine.root as AnyNode)
}

/**
 * A TypeScript module Stately Studio imports: the setup() names as stub implementations, and
 * `createMachine(config)`. Reading it back with XState gives a chart with the same states and
 * transitions (test/unit/export.test.ts).
 */
export function chartModule(name: ChartName): string {
  return `// The ${name} chart of phoenix-link (machines/${name}.ts), exported by \`phoenix-link export --chart ${name} --format ts\`.
${preamble([name])}
${machineDeclaration(name)}`
}

/** Every chart in one module: one import, then one `export const <name>Machine` per chart. */
export function chartsModule(names: readonly ChartName[]): string {
  return `// The charts of phoenix-link (machines/), exported by \`phoenix-link export --format ts\`.
${preamble(names)}
${names.map(machineDeclaration).join('\n')}`
}

/** The module's comment and its xstate import (the higher-order guards the charts use, and nothing unused). */
function preamble(names: readonly ChartName[]): string {
  const ops = new Set<string>()
  const visit = (g: ConfigGuard) => {
    if (typeof g === 'string') return
    ops.add(g.type)
    g.guards.forEach(visit)
  }
  const walk = (state: ConfigState) => {
    const lists = [...Object.values(state.on ?? {}), ...Object.values(state.after ?? {}), state.always ?? []]
    for (const list of lists) for (const t of list) if (t.guard) visit(t.guard)
    for (const child of Object.values(state.states ?? {})) walk(child)
  }
  for (const name of names) walk(chartConfig(CHARTS[name] as AnyStateMachine))
  const imports = [...ops, 'setup'].sort()
  return `// Guards and actions are stubs named as in the shipped setup(); delays are the real ones
// under the default policy (a drawn delay: the ceiling of its first draw).
import { ${imports.join(', ')} } from 'xstate'
`
}

/** The input each chart is created with under the default policy (jitter at its ceiling: random() = 1). */
const ENV = { now: () => 0, monotonic: () => 0, random: () => 1 }
const DEFAULT_INPUTS: Record<ChartName, unknown> = {
  connection: { env: ENV },
  channel: { topic: 'room:example', policy: DEFAULT_CHANNEL_POLICY, env: ENV },
  reconnect: { policy: DEFAULT_RECONNECT_POLICY, env: ENV },
  control: {},
  presence: { env: ENV },
}

/** Delays that read a value the chart draws at run time (`context.delayMs`): the default policy's first ceiling. */
const DRAWN: Partial<Record<ChartName, Record<string, number>>> = {
  reconnect: { backoffDelay: DEFAULT_RECONNECT_POLICY.initialDelayMs, cooldown: DEFAULT_RECONNECT_POLICY.suspendInitialDelayMs },
}

/**
 * The chart's named delays in milliseconds under the default policy: each `setup({ delays })`
 * implementation evaluated on the chart's initial context (jitter at its ceiling); a delay drawn
 * at run time gives its first ceiling from the policy.
 */
export function chartDelays(name: ChartName): Record<string, number> {
  const machine = CHARTS[name] as AnyStateMachine
  const delays = (machine.implementations.delays ?? {}) as Record<string, unknown>
  const [snapshot] = initialTransition(machine, DEFAULT_INPUTS[name] as never)
  const out: Record<string, number> = {}
  for (const [key, delay] of Object.entries(delays)) {
    const drawn = DRAWN[name]?.[key]
    if (drawn !== undefined) out[key] = drawn
    else if (typeof delay === 'number') out[key] = delay
    else if (typeof delay === 'function') out[key] = Number((delay as (a: unknown) => unknown)({ context: snapshot.context, event: { type: 'xstate.init' } }))
  }
  return out
}

/** The config as TypeScript: JSON, with higher-order guards as \`and([...])\` calls. */
function configSource(config: ConfigState): string {
  const guards: ConfigGuard[] = []
  const json = JSON.stringify(
    config,
    (key, value: unknown) => {
      if (key === 'guard' && typeof value === 'object' && value !== null) {
        guards.push(value as ConfigGuard)
        return `__GUARD_${guards.length - 1}__`
      }
      return value
    },
    2,
  )
  const code = (g: ConfigGuard): string => (typeof g === 'string' ? JSON.stringify(g) : `${g.type}([${g.guards.map(code).join(', ')}])`)
  return json.replace(/"__GUARD_(\d+)__"/g, (_, i: string) => code(guards[Number(i)]!))
}

/** `export const <name>Machine = setup({...stubs}).createMachine(config)`. */
function machineDeclaration(name: ChartName): string {
  const config = chartConfig(CHARTS[name] as AnyStateMachine)
  const names = collectNames(config)
  const list = (items: Set<string>) => [...items].sort().map((n) => `    ${JSON.stringify(n)}: ${'() => {}'},`).join('\n')
  const guards = [...names.guards].sort().map((n) => `    ${JSON.stringify(n)}: () => true,`).join('\n')
  const values = chartDelays(name)
  const delays = [...names.delays].sort().map((n) => `    ${JSON.stringify(n)}: ${values[n] ?? 0},`).join('\n')
  return `export const ${name}Machine = setup({
  guards: {
${guards}
  },
  actions: {
${list(names.actions)}
  },
  delays: {
${delays}
  },
}).createMachine(${configSource(config)})
`
}

/** Guard, action and delay names a config uses. */
export function collectNames(config: ConfigState) {
  const guards = new Set<string>()
  const actions = new Set<string>()
  const delays = new Set<string>()
  const addGuard = (g: ConfigGuard) => (typeof g === 'string' ? guards.add(g) : g.guards.forEach(addGuard))
  const visitTransitions = (list: ConfigTransition[] | undefined) => {
    for (const t of list ?? []) {
      if (t.guard) addGuard(t.guard)
      for (const a of t.actions ?? []) actions.add(a)
    }
  }
  const visit = (state: ConfigState) => {
    for (const a of [...(state.entry ?? []), ...(state.exit ?? [])]) actions.add(a)
    for (const list of Object.values(state.on ?? {})) visitTransitions(list)
    for (const [delay, list] of Object.entries(state.after ?? {})) {
      delays.add(delay)
      visitTransitions(list)
    }
    visitTransitions(state.always)
    for (const child of Object.values(state.states ?? {})) visit(child)
  }
  visit(config)
  return { guards, actions, delays }
}

/** The id a state has in the mermaid diagram: its path joined with `__` (the machine's key for the root). */
export function mermaidId(node: { key: string; path: string[] }): string {
  return node.path.length === 0 ? node.key : node.path.join('__')
}

function label(eventType: string, t: Record<string, unknown>, delay: string | undefined): string {
  const event = eventType === '' ? 'always' : eventLabel(eventType, delay)
  const guard = t.guard !== undefined && t.guard !== null ? ` [${guardLabel(guardOf(t.guard))}]` : ''
  // mermaid takes everything after the colon as the label; colons inside would end it early.
  return `${event}${guard}`.replace(/:/g, '∶')
}

/**
 * A chart as a mermaid `stateDiagram-v2`: each state labelled by its key, composite states nested, `[*]` for initial and final
 * states, one arrow per transition labelled `event [guard]`. Self transitions without a target
 * (actions only) are left out to keep it readable; entry and exit actions are in the docs tables.
 */
export function chartMermaid(name: ChartName): string {
  return chartDiagram(name).text
}

/** One arrow of a chart's mermaid diagram, in the order mermaid numbers them (`edge<index>`). */
export interface DiagramEdge {
  /** Source state path, `[*]` for an initial arrow. */
  from: string
  /** Target state path, or `[*]` for a final arrow. */
  to: string
  /** The label: `event [guard]`, empty for initial and final arrows. */
  label: string
}

/** {@link chartMermaid}'s text with its arrows listed, so a page can find the arrow of a transition. */
export function chartDiagram(name: ChartName): { text: string; edges: DiagramEdge[] } {
  const machine = CHARTS[name] as AnyStateMachine
  const lines = ['stateDiagram-v2']
  const edges: DiagramEdge[] = []
  const dotted = (node: AnyNode) => node.path.join('.')
  const emit = (node: AnyNode, indent: string) => {
    const children = Object.values(node.states as Record<string, AnyNode>)
    const initial = (node.initial as unknown as { target?: AnyNode[] } | undefined)?.target?.[0]
    if (initial) {
      lines.push(`${indent}[*] --> ${mermaidId(initial)}`)
      edges.push({ from: '[*]', to: dotted(initial), label: '' })
    }
    for (const child of children) {
      lines.push(`${indent}state "${child.key}" as ${mermaidId(child)}`)
      if (Object.keys(child.states).length > 0) {
        lines.push(`${indent}state ${mermaidId(child)} {`)
        emit(child, `${indent}  `)
        lines.push(`${indent}}`)
      } else if (child.type === 'final') {
        lines.push(`${indent}${mermaidId(child)} --> [*]`)
        edges.push({ from: dotted(child), to: '[*]', label: '' })
      }
    }
  }
  emit(machine.root as AnyNode, '  ')
  for (const node of allNodes(machine)) {
    if (node.path.length === 0) continue
    const delays = new Map((node.after ?? []).map((t: { eventType: string; delay: unknown }) => [t.eventType, refName(t.delay)]))
    const all: Array<[string, Record<string, unknown>]> = []
    for (const [eventType, list] of node.transitions as unknown as Map<string, Array<Record<string, unknown>>>) for (const t of list) all.push([eventType, t])
    for (const t of (node.always ?? []) as unknown as Array<Record<string, unknown>>) all.push(['', t])
    for (const [eventType, t] of all) {
      for (const target of (t.target as AnyNode[] | undefined) ?? []) {
        if (target.path.length === 0) continue
        const text = label(eventType, t, delays.get(eventType))
        lines.push(`  ${mermaidId(node)} --> ${mermaidId(target)} : ${text}`)
        edges.push({ from: dotted(node), to: dotted(target), label: text })
      }
    }
  }
  return { text: lines.join('\n') + '\n', edges }
}
