/**
 * What a shipped chart contains, read from its definition: every state node and every
 * transition (events, delays, eventless), with guard, target, actions and rule tag. The docs,
 * the visual tools and the coverage report all read the charts through this file.
 */
import type { AnyStateMachine, StateNode } from 'xstate'
import { channelMachine } from '../../../machines/channel.js'
import { connectionMachine } from '../../../machines/connection.js'
import { controlMachine } from '../../../machines/control.js'
import { reconnectMachine } from '../../../machines/reconnect.js'
import { presenceMachine } from '../../../machines/presence.js'

/** The shipped charts, by name. */
export const CHARTS = {
  connection: connectionMachine,
  channel: channelMachine,
  reconnect: reconnectMachine,
  control: controlMachine,
  presence: presenceMachine,
} as const satisfies Record<string, AnyStateMachine>

/** A chart name: `connection`, `channel`, `reconnect` or `control`. */
export type ChartName = keyof typeof CHARTS

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyNode = StateNode<any, any>

/** One transition of a chart, as the docs and the coverage report name it. */
export interface TransitionRow {
  /** Stable identity: source path, event, position among that event's transitions. */
  key: string
  /** Source state path (`(root)` for the machine itself). */
  state: string
  /** The event type, `after <delay>`, `(always)`, `done <actor>` or `error <actor>`. */
  event: string
  guard: string
  /** Target state paths, or `(stays)`. */
  target: string
  actions: string
  /** The lifecycle rule tag (`meta.rule`), if any. */
  rule: string
}

/** The path of a state node as the docs print it: `session.online.connecting`, `(root)`. */
export function nodePath(node: { path: string[] }): string {
  return node.path.length === 0 ? '(root)' : node.path.join('.')
}

/** The name of a guard, action, delay or actor reference as setup() names it (`''` for none). */
export function refName(value: unknown): string {
  if (value === undefined || value === null) return ''
  if (typeof value === 'string') return value
  if (typeof value === 'object' && 'type' in (value as object)) return String((value as { type: unknown }).type)
  if (typeof value === 'function') return (value as { name?: string }).name || '(inline)'
  return String(value)
}

/** A guard in config form: a name from `setup({ guards })`, or XState's `and`/`or`/`not` of guards. */
export type ConfigGuard = string | { type: 'and' | 'or' | 'not'; guards: ConfigGuard[] }

/** A guard as config: XState's higher-order guards (functions carrying `guards`) keep their operands. */
export function guardOf(guard: unknown): ConfigGuard {
  if (typeof guard === 'function' && Array.isArray((guard as { guards?: unknown }).guards)) {
    const name = (guard as { name?: string }).name
    const type = name === 'or' ? 'or' : name === 'not' ? 'not' : 'and'
    return { type, guards: (guard as unknown as { guards: unknown[] }).guards.map(guardOf) }
  }
  return refName(guard)
}

/** The name of a guard as the docs print it: `a && b`, `a || b`, `!a`. */
export function guardLabel(guard: ConfigGuard): string {
  if (typeof guard === 'string') return guard
  // An operand that is itself compound is parenthesised: `a && (b || c)`, `!(a && b)`.
  const operand = (g: ConfigGuard) => (typeof g === 'string' || g.type === 'not' ? guardLabel(g) : `(${guardLabel(g)})`)
  if (guard.type === 'not') return `!${operand(guard.guards[0]!)}`
  return guard.guards.map(operand).join(guard.type === 'and' ? ' && ' : ' || ')
}

import { stepLabel } from './labels.js'

/** An event type as the docs print it: `after <delay>`, `done <actor>`, `error <actor>`, `(always)`, `start`, or the type (labels.ts). */
export function eventLabel(eventType: string, delay?: unknown): string {
  return stepLabel(eventType, refName(delay))
}

/**
 * Whether an entry or exit action is XState's own scheduling of an `after` transition (the
 * `raise` of `xstate.after.*` on entry, its `cancel` on exit): implied by `after`, not the chart's.
 */
export function isImplicitDelayAction(action: unknown): boolean {
  if (typeof action !== 'function') return false
  const a = action as { type?: string; event?: { type?: string }; sendId?: unknown }
  if (a.type === 'xstate.raise') return typeof a.event?.type === 'string' && a.event.type.startsWith('xstate.after.')
  if (a.type === 'xstate.cancel') return typeof a.sendId === 'string' && a.sendId.startsWith('xstate.after.')
  return false
}

/** The chart's own entry and exit actions of a state, by name (XState's scheduling of `after` left out). */
export function entryExit(node: { entry: unknown[]; exit: unknown[] }): { entry: string[]; exit: string[] } {
  const names = (list: unknown[]) => list.filter((a) => !isImplicitDelayAction(a)).map(refName)
  return { entry: names(node.entry), exit: names(node.exit) }
}

/** Every state node of a chart, depth first, in document order. */
export function allNodes(machine: AnyStateMachine): AnyNode[] {
  const out: AnyNode[] = []
  const walk = (node: AnyNode) => {
    out.push(node)
    for (const child of Object.values(node.states) as AnyNode[]) walk(child)
  }
  walk(machine.root as AnyNode)
  return out
}

/** The key of a transition definition: `source|eventType|index` among the source's transitions for that event. */
export function transitionKey(source: AnyNode, eventType: string, index: number): string {
  return `${source.id}|${eventType}|${index}`
}

/** Finds the key of a transition definition XState reports (inspection `_transitions`). */
export function keyOf(definition: { source: AnyNode; eventType: string }): string {
  const list =
    definition.eventType === ''
      ? ((definition.source.always ?? []) as unknown[])
      : (((definition.source.transitions as unknown as Map<string, unknown[]>).get(definition.eventType) ?? []) as unknown[])
  return transitionKey(definition.source, definition.eventType, Math.max(0, list.indexOf(definition)))
}

/** Every transition of a chart (events, delays, always), with guard, target, actions and rule tag. */
export function transitionRows(machine: AnyStateMachine): TransitionRow[] {
  const rows: TransitionRow[] = []
  const row = (node: AnyNode, eventType: string, index: number, t: Record<string, unknown>, delay?: unknown): TransitionRow => ({
    key: transitionKey(node, eventType, index),
    state: nodePath(node),
    event: eventLabel(eventType, delay),
    guard: t.guard === undefined || t.guard === null ? '' : guardLabel(guardOf(t.guard)),
    target: ((t.target as AnyNode[] | undefined) ?? []).map((n) => n.path.join('.')).join(', ') || '(stays)',
    actions: ((t.actions as unknown[]) ?? []).map(refName).join(', '),
    rule: String((t.meta as { rule?: string } | undefined)?.rule ?? ''),
  })
  for (const node of allNodes(machine)) {
    const delays = new Map((node.after ?? []).map((t: { eventType: string; delay: unknown }) => [t.eventType, t.delay]))
    for (const [eventType, list] of node.transitions as unknown as Map<string, Array<Record<string, unknown>>>) {
      list.forEach((t, i) => rows.push(row(node, eventType, i, t, delays.get(eventType))))
    }
    ;((node.always ?? []) as unknown as Array<Record<string, unknown>>).forEach((t, i) => rows.push(row(node, '', i, t)))
  }
  return rows
}
