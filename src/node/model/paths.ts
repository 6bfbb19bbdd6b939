/**
 * Paths through the shipped charts, generated with xstate/graph: the shortest path to every model
 * state (getShortestPaths), then one path per stimulus offered there, so every (state, stimulus)
 * edge is the last step of some path. A wire path is followed by the chart's own follow-ups
 * (`auto` stimuli) until a state the world can hold. Paths that are the start of a longer one are
 * dropped: the longer one crosses everything they do.
 */
import { getShortestPaths } from 'xstate/graph'
import { initialTransition, transition, type AnyStateMachine, type EventObject, type SnapshotFrom } from 'xstate'
import {
  afterReset,
  applyModel,
  expectationOf,
  initialModel,
  serializeModel,
  stimuliOf,
  type Expectation,
  type StimulusKind,
} from './connection-model.js'
import { channelModel, reconnectModel, type ChartModel } from './small-models.js'

/** One step of a generated path: the stimulus and what the chart says holds after it. */
export interface PathStep<E = unknown> {
  stimulus: string
  kind: StimulusKind
  event: EventObject
  expect: E
}

/** A generated path from the chart's initial state. */
export interface ModelPath<E = Expectation> {
  /** The stimuli, joined with ` > `: a stable name. */
  name: string
  steps: Array<PathStep<E>>
}

/** A chart's test model, for {@link generatePaths}. */
export interface PathModel<S, E> {
  machine: AnyStateMachine
  initial(): S
  apply(snapshot: S, event: EventObject): S
  stimuli(snapshot: S, mode: 'wire' | 'pure'): Array<{ name: string; kind: StimulusKind; event: EventObject }>
  serialize(snapshot: S): string
  /** What distinguishes one edge from another for coverage: by default the state value and the stimulus. */
  edge(snapshot: S, stimulus: string): string
  expect(snapshot: S): E
}

type Tagged = EventObject & { stimulus: string; kind: StimulusKind }

/** Generates edge-covering paths of a chart model. */
export function generatePaths<S, E>(model: PathModel<S, E>, mode: 'wire' | 'pure'): Array<ModelPath<E>> {
  const start = model.initial()
  const statePaths = getShortestPaths(model.machine, {
    fromState: start,
    events: (snapshot: S) => model.stimuli(snapshot, mode).map((s) => ({ ...s.event, stimulus: s.name, kind: s.kind })),
    serializeState: (snapshot: S) => model.serialize(snapshot),
    serializeEvent: (event: Tagged) => event.stimulus,
  } as never) as unknown as Array<{ steps: Array<{ event: Tagged }> }>

  const byName = new Map<string, ModelPath<E>>()
  const covered = new Set<string>()
  const ordered = [...statePaths].sort((a, b) => a.steps.length - b.steps.length)
  for (const statePath of ordered) {
    const prefix = statePath.steps
      .filter((step) => step.event.type !== 'xstate.init')
      .map((step) => {
        const { stimulus, kind, ...event } = step.event
        return { name: stimulus, kind, event: event as EventObject }
      })
    // The stimuli of the end state come from the prefix replayed, so their generation, epoch or
    // attempt are this path's, not those of another path that serialised the same.
    const end = prefix.reduce((s, p) => model.apply(s, p.event), start)
    for (const last of model.stimuli(end, mode)) {
      const edge = model.edge(end, last.name)
      if (covered.has(edge)) continue
      covered.add(edge)
      let snapshot = start
      const steps: Array<PathStep<E>> = []
      for (const stimulus of [...prefix, last]) {
        snapshot = model.apply(snapshot, stimulus.event)
        steps.push({ stimulus: stimulus.name, kind: stimulus.kind, event: stimulus.event, expect: model.expect(snapshot) })
      }
      if (mode === 'wire') {
        for (let auto = onlyAuto(model, snapshot); auto; auto = onlyAuto(model, snapshot)) {
          snapshot = model.apply(snapshot, auto.event)
          steps.push({ stimulus: auto.name, kind: auto.kind, event: auto.event, expect: model.expect(snapshot) })
        }
      }
      const name = steps.map((s) => s.stimulus).join(' > ')
      byName.set(name, { name, steps })
    }
  }
  const names = [...byName.keys()]
  return names
    .filter((name) => !names.some((other) => other !== name && other.startsWith(`${name} > `)))
    .map((name) => byName.get(name)!)
    .sort((a, b) => a.steps.length - b.steps.length || a.name.localeCompare(b.name))
}

function onlyAuto<S, E>(model: PathModel<S, E>, snapshot: S) {
  const offered = model.stimuli(snapshot, 'wire')
  return offered.length > 0 && offered.every((s) => s.kind === 'auto') ? offered[0]! : null
}

/** What a 409 edge depends on: no accepted socket lost yet, or one lost before or after the link first connected. */
function ownConflictEdge(context: { acceptedLostAt: number | null; connects: number }): string {
  if (context.acceptedLostAt === null) return ''
  return context.connects > 0 ? '|own' : '|own-never-connected'
}

/** The connection chart's model (src/node/model/connection-model.ts) as a PathModel. */
export const connectionModel: PathModel<ReturnType<typeof initialModel>, Expectation> = {
  machine: initialModel().machine as unknown as AnyStateMachine,
  initial: initialModel,
  apply: (snapshot, event) => applyModel(snapshot, { name: '', kind: 'auto', event: event as never }),
  stimuli: (snapshot, mode) => stimuliOf(snapshot, mode),
  serialize: serializeModel,
  // A 409 means one thing before the server first accepted a socket of this link and another after it lost one
  // (isOwnConflict): both are edges to cover, and the second both before the link ever connected (a
  // stalled first join) and after. A supersede held until the upgrade's answer, or one being
  // probed, changes what the stimuli after it mean: each is an edge again; so does a reset, until
  // the next upgrade's answer (whatever the chart decided on it). An ambiguous supersede
  // before the current upgrade left starts the attempt again as a probe: an edge of its own.
  edge: (snapshot, stimulus) =>
    `${JSON.stringify(snapshot.value)}|${snapshot.context.generation > 1}|${snapshot.context.epoch > 1}|${stimulus}${stimulus === 'upgrade 409' ? ownConflictEdge(snapshot.context) : ''}${snapshot.context.heldSupersede === null ? '' : '|held-supersede'}${snapshot.context.ambiguousSupersede === null ? '' : '|probing'}${afterReset(snapshot)}${stimulus === 'ambiguous supersede' && snapshot.context.keyHolder !== snapshot.context.generation ? '|before-upgrade' : ''}`,
  expect: expectationOf,
}

/** The connection chart's paths. */
export function connectionPaths(mode: 'wire' | 'pure'): Array<ModelPath<Expectation>> {
  return generatePaths(connectionModel, mode)
}

/**
 * The wire paths that lose a connected link's socket and connect again, twice: the generated paths
 * end at the loss (every edge is the last step of one path), so none of them crosses a second
 * `connected`. One path per way a connected link loses its socket and reconnects (a close with
 * each code, a drop, a reset, a heartbeat timeout, a control channel closed, ...): the loss, the
 * chart's own follow-ups, the backoff elapsed, the upgrade accepted and the control channel joined,
 * with what the chart says after each; then the same loss on the second socket and the same way
 * back to `connected` on the third. A channel judged at both connected steps after a loss is caught
 * when it rejoins once and not again (join params that work twice, a token refreshed only once).
 *
 * @throws {Error} when the chart offers no way to the next step (a chart that no longer reconnects).
 */
export function reconnectedPaths(): Array<ModelPath<Expectation>> {
  const model = connectionModel
  // The shortest way to `connected` on the first socket (host connect, upgrade sent, open, join ok).
  const first = connectionPaths('wire').find((path) => path.steps.some((step) => step.expect.state === 'connected'))
  if (!first) throw new Error('no generated path reaches connected')
  const prefix = first.steps.slice(0, first.steps.findIndex((step) => step.expect.state === 'connected') + 1)
  const atConnected = prefix.reduce((s, step) => model.apply(s, step.event), model.initial())
  const out: Array<ModelPath<Expectation>> = []
  for (const loss of model.stimuli(atConnected, 'wire')) {
    let snapshot = atConnected
    const steps = [...prefix]
    const step = (stimulus: { name: string; kind: StimulusKind; event: EventObject }): void => {
      snapshot = model.apply(snapshot, stimulus.event)
      steps.push({ stimulus: stimulus.name, kind: stimulus.kind, event: stimulus.event, expect: model.expect(snapshot) })
      for (let auto = onlyAuto(model, snapshot); auto; auto = onlyAuto(model, snapshot)) {
        snapshot = model.apply(snapshot, auto.event)
        steps.push({ stimulus: auto.name, kind: auto.kind, event: auto.event, expect: model.expect(snapshot) })
      }
    }
    step(loss)
    // Only the losses the link reconnects after (not a supersede, a refusal or the host's stop).
    if (steps.at(-1)!.expect.state !== 'reconnecting') continue
    const back = (round: number): void => {
      for (const name of ['backoff elapsed', 'open', 'join ok']) {
        const offered = model.stimuli(snapshot, 'wire').find((s) => s.name === name)
        if (!offered) throw new Error(`after ${loss.name} (loss ${round}): the chart offers no "${name}" in ${JSON.stringify(snapshot.value)}`)
        step(offered)
      }
      if (steps.at(-1)!.expect.state !== 'connected') throw new Error(`after ${loss.name} (loss ${round}): continued, the path ends ${steps.at(-1)!.expect.state}, not connected`)
    }
    back(1)
    // The same loss on the second socket: the stimulus of that name the chart offers there.
    const again = model.stimuli(snapshot, 'wire').find((s) => s.name === loss.name)
    if (!again) throw new Error(`connected again after ${loss.name}: the chart offers no second "${loss.name}" in ${JSON.stringify(snapshot.value)}`)
    step(again)
    if (steps.at(-1)!.expect.state !== 'reconnecting') throw new Error(`after a second ${loss.name}: the path is ${steps.at(-1)!.expect.state}, not reconnecting`)
    back(2)
    out.push({ name: steps.map((s) => s.stimulus).join(' > '), steps })
  }
  return out
}

/** A small chart's model as a PathModel, built on XState's pure transition functions. */
function pathModelOf<M extends AnyStateMachine, E>(chart: ChartModel<M, E>): PathModel<SnapshotFrom<M>, E> {
  return {
    machine: chart.machine,
    initial: () => initialTransition(chart.machine, chart.input as never)[0] as SnapshotFrom<M>,
    apply: (snapshot, event) => transition(chart.machine, snapshot as never, event as never)[0] as SnapshotFrom<M>,
    stimuli: (snapshot, mode) => chart.stimuli(snapshot, mode),
    serialize: chart.serialize,
    edge: chart.edge,
    expect: chart.expect,
  }
}

/** The paths of every chart that has a model, by chart name. */
export function allPaths(mode: 'wire' | 'pure') {
  return {
    connection: connectionPaths(mode),
    channel: generatePaths(pathModelOf(channelModel), mode),
    reconnect: generatePaths(pathModelOf(reconnectModel), mode),
  }
}
