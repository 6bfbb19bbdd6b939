/**
 * Which states and transitions of the shipped charts a set of paths crosses. Paths are replayed
 * on the chart itself (a bare XState actor: the charts' I/O actions do nothing there, delays run
 * on a simulated clock) and XState's inspection reports every transition taken (`@xstate.microstep`).
 */
import { createActor, SimulatedClock, type AnyStateMachine, type EventObject, type InspectionEvent } from 'xstate'
import { connectionMachine } from '../../../machines/connection.js'
import { allNodes, CHARTS, keyOf, transitionRows, type ChartName, type TransitionRow } from './chart-info.js'
import type { ModelPath } from './paths.js'
import { channelModel, reconnectModel } from './small-models.js'

/** Transitions and states crossed, as keys (chart-info keyOf) and state node ids. */
export interface Crossed {
  transitions: Set<string>
  states: Set<string>
}

const REPLAY_MACHINES: Partial<Record<ChartName, AnyStateMachine>> = {
  connection: connectionMachine,
  channel: channelModel.machine,
  reconnect: reconnectModel.machine,
}

const REPLAY_INPUT: Partial<Record<ChartName, unknown>> = {
  connection: { env: { now: () => 0, monotonic: () => 0, random: () => 0.5 } },
  channel: channelModel.input,
  reconnect: reconnectModel.input,
}

/** Replays paths of `chart` on the chart alone and adds what they cross to `into`. */
export function replay(chart: ChartName, paths: Array<ModelPath<unknown>>, into: Crossed = { transitions: new Set(), states: new Set() }): Crossed {
  const machine = REPLAY_MACHINES[chart]
  if (!machine) throw new Error(`no replay model for the ${chart} chart`)
  for (const path of paths) {
    const actor = createActor(machine, {
      clock: new SimulatedClock(),
      input: REPLAY_INPUT[chart] as never,
      inspect: (event: InspectionEvent) => {
        if (event.type !== '@xstate.microstep') return
        for (const t of event._transitions) into.transitions.add(keyOf(t as never))
        for (const node of (event.snapshot as { _nodes?: Array<{ id: string }> })._nodes ?? []) into.states.add(node.id)
      },
    })
    actor.start()
    for (const step of path.steps) actor.send(step.event as EventObject)
    actor.stop()
  }
  return into
}

/** Coverage of one chart: totals, what was crossed, and what was not. */
export interface ChartCoverage {
  chart: ChartName
  states: { total: number; crossed: number; missing: string[] }
  transitions: { total: number; crossed: number; missing: TransitionRow[] }
}

/** Compares what was crossed with everything the chart contains. */
export function coverageOf(chart: ChartName, crossed: Crossed): ChartCoverage {
  const machine = CHARTS[chart]
  const stateIds = allNodes(machine).map((n) => n.id)
  const rows = transitionRows(machine)
  return {
    chart,
    states: { total: stateIds.length, crossed: stateIds.filter((id) => crossed.states.has(id)).length, missing: stateIds.filter((id) => !crossed.states.has(id)) },
    transitions: { total: rows.length, crossed: rows.filter((r) => crossed.transitions.has(r.key)).length, missing: rows.filter((r) => !crossed.transitions.has(r.key)) },
  }
}
