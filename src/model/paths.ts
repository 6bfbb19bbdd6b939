/**
 * Paths through the connection chart, generated with xstate/graph from the shipped chart: the
 * shortest path to every model state (getShortestPaths), then one path per stimulus offered in
 * that state, so every (state, stimulus) edge is the last step of some path. A wire path is
 * followed by the chart's own follow-ups (`auto` stimuli) until a state the world can hold.
 */
import { getShortestPaths } from 'xstate/graph'
import { connectionMachine, type ConnectionEvent } from '../../machines/connection.js'
import {
  applyModel,
  expectationOf,
  initialModel,
  serializeModel,
  stimuliOf,
  type ConnectionSnapshot,
  type Expectation,
  type Stimulus,
  type StimulusKind,
} from './connection-model.js'

/** One step of a generated path: the stimulus and what the chart says must hold after it. */
export interface PathStep {
  stimulus: string
  kind: StimulusKind
  event: ConnectionEvent
  expect: Expectation
}

/** A generated path from the chart's initial state. */
export interface ModelPath {
  /** The stimuli, joined with ` > `: a stable name. */
  name: string
  steps: PathStep[]
}

type Tagged = ConnectionEvent & { stimulus: string; kind: StimulusKind }

const tag = (s: Stimulus): Tagged => ({ ...s.event, stimulus: s.name, kind: s.kind }) as Tagged

function untag(event: Tagged): Stimulus {
  const { stimulus, kind, ...rest } = event
  return { name: stimulus, kind, event: rest as ConnectionEvent }
}

/**
 * Generates the connection chart's paths.
 *
 * @param mode `wire`: only stimuli a real link and the simulator can apply, each path ending in
 *   a state the world can hold; `pure`: every stimulus, for chart-only replay.
 */
export function connectionPaths(mode: 'wire' | 'pure'): ModelPath[] {
  const start = initialModel()
  const statePaths = getShortestPaths(connectionMachine, {
    fromState: start,
    events: (snapshot: ConnectionSnapshot) => stimuliOf(snapshot, mode).map(tag),
    serializeState: (snapshot: ConnectionSnapshot) => serializeModel(snapshot),
    serializeEvent: (event: Tagged) => event.stimulus,
  } as never) as unknown as Array<{ state: ConnectionSnapshot; steps: Array<{ state: ConnectionSnapshot; event: Tagged }> }>

  const byName = new Map<string, ModelPath>()
  const covered = new Set<string>()
  const ordered = [...statePaths].sort((a, b) => a.steps.length - b.steps.length)
  for (const statePath of ordered) {
    // getShortestPaths' first step is the initial state (event xstate.init).
    const prefix = statePath.steps.filter((step) => (step.event.type as string) !== 'xstate.init').map((step) => untag(step.event))
    // The stimuli of the end state come from the prefix replayed: its generation and epoch, not
    // those of another path that serialised the same.
    const end = prefix.reduce(applyModel, start)
    for (const last of stimuliOf(end, mode)) {
      // One path per (chart state, stimulus, whether stale events exist): the shortest one.
      const edge = `${JSON.stringify(end.value)}|${end.context.generation > 1}|${end.context.epoch > 1}|${last.name}`
      if (covered.has(edge)) continue
      covered.add(edge)
      const stimuli = [...prefix, last]
      let snapshot = start
      const steps: PathStep[] = []
      for (const stimulus of stimuli) {
        snapshot = applyModel(snapshot, stimulus)
        steps.push({ stimulus: stimulus.name, kind: stimulus.kind, event: stimulus.event, expect: expectationOf(snapshot) })
      }
      if (mode === 'wire') {
        // Follow the chart's own answers until the world can hold the state.
        for (let auto = onlyAuto(snapshot); auto; auto = onlyAuto(snapshot)) {
          snapshot = applyModel(snapshot, auto)
          steps.push({ stimulus: auto.name, kind: auto.kind, event: auto.event, expect: expectationOf(snapshot) })
        }
      }
      const name = steps.map((s) => s.stimulus).join(' > ')
      byName.set(name, { name, steps })
    }
  }
  // A path that is the start of a longer one adds nothing the longer one does not cross.
  const names = [...byName.keys()]
  return names
    .filter((name) => !names.some((other) => other !== name && other.startsWith(`${name} > `)))
    .map((name) => byName.get(name)!)
    .sort((a, b) => a.steps.length - b.steps.length || a.name.localeCompare(b.name))
}

function onlyAuto(snapshot: ConnectionSnapshot): Stimulus | null {
  const offered = stimuliOf(snapshot, 'wire')
  return offered.length > 0 && offered.every((s) => s.kind === 'auto') ? offered[0]! : null
}
