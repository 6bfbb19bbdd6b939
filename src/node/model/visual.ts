/**
 * What the visualizer page draws, read off the shipped charts: per chart its mermaid diagram
 * and, per state, the transitions leaving it (event, guard, target, actions) with the sentence
 * of the DESIGN rule each encodes. Built into the page at build time (visualizer/vite.config.ts),
 * so the page needs no network and cannot drift from the charts.
 */
import type { AnyStateMachine } from 'xstate'
import { allNodes, CHARTS, entryExit, nodePath, transitionRows, type ChartName, type TransitionRow } from './chart-info.js'
import { chartDiagram, mermaidId, type DiagramEdge } from './export.js'
import { RULES } from './rules.js'

/** One state as the page shows it. */
export interface VisualState {
  /** Dotted path, e.g. `session.online.connecting`; `(root)` for the machine. */
  path: string
  /** The id mermaid draws it under: the path joined with `__`. */
  mermaidId: string
  description: string
  /** The state's entry actions, by name (its I/O among them: `openCurrentTransport`, ...). */
  entry: string[]
  /** The state's exit actions, by name. */
  exit: string[]
  transitions: Array<TransitionRow & { ruleText: string }>
}

/** One chart as the page shows it. */
export interface VisualChart {
  name: ChartName
  mermaid: string
  /** The diagram's arrows in mermaid's numbering: arrow i is drawn as `…-edge<i>`. */
  edges: DiagramEdge[]
  states: VisualState[]
}

/** Every chart's diagram and state details. */
export function chartsData(): VisualChart[] {
  const ruleText = new Map(RULES.map((r) => [r.id, r.rule]))
  return (Object.keys(CHARTS) as ChartName[]).map((name) => {
    const machine = CHARTS[name] as AnyStateMachine
    const rows = transitionRows(machine)
    const diagram = chartDiagram(name)
    return {
      name,
      mermaid: diagram.text,
      edges: diagram.edges,
      states: allNodes(machine).map((node) => {
        const path = nodePath(node)
        return {
          path,
          mermaidId: mermaidId(node),
          description: node.description ?? '',
          ...entryExit(node),
          transitions: rows.filter((r) => r.state === path).map((r) => ({ ...r, ruleText: r.rule ? (ruleText.get(r.rule) ?? '') : '' })),
        }
      }),
    }
  })
}
