/**
 * The connection chart's generated lifecycle paths as data: generated with `xstate/graph` from
 * the shipped chart (machines/connection.ts) by src/node/model/paths.ts, every step a
 * {@link LifecycleStimulus} with what the chart says a link shows after it.
 */
import { connectionPaths, reconnectedPaths, type ModelPath } from '../model/paths.js'
import { linkStateOf } from '../../../machines/status.js'
import type { Expectation, StimulusKind } from '../model/connection-model.js'
import { stimulusOf, type LifecycleStimulus } from './stimuli.js'
import { deepFreeze } from '../../freeze.js'

/**
 * What a link shows once a step has settled, as the chart says: `state` is `link.state`,
 * `chartState` the connection chart's state value (`link.actor.getSnapshot().value`), `reason`
 * the kind of `link.lastDisconnectReason` (null before any), `code` its close code or HTTP status
 * when it has one, `generation` and `epoch` the chart's transport and session counters.
 */
export interface StepExpectation {
  state: Expectation['state']
  chartState: unknown
  reason: string | null
  code: number | null
  generation: number
  epoch: number
}

/** One step of a lifecycle path: the stimulus (its stable model name and its world action) and what holds after it. */
export interface LifecycleStep {
  /** The model's stable name of the stimulus, e.g. `close 1000`, `upgrade 403`, `supersede`. */
  name: string
  /** What the test world does. */
  stimulus: LifecycleStimulus
  expect: StepExpectation
}

/**
 * A generated path from a link just created (`idle`). `name` joins the steps' names with ` > `
 * and is stable across runs of the same chart.
 */
export interface LifecyclePath {
  name: string
  steps: LifecycleStep[]
}

/** A model expectation as a step expectation. */
export function stepExpectation(e: Expectation): StepExpectation {
  return { state: e.state, chartState: e.value, reason: e.reason, code: e.code, generation: e.generation, epoch: e.epoch }
}

/** A model path (src/node/model/paths.ts) as a lifecycle path. @throws {Error} for a stimulus with no world action. */
export function lifecyclePathOf(path: ModelPath<Expectation>): LifecyclePath {
  let state = 'idle'
  const steps = path.steps.map((step) => {
    const stimulus = stimulusOf(step.stimulus, step.kind as StimulusKind, step.event, state)
    state = linkStateOf(step.expect.value as never)
    return { name: step.stimulus, stimulus, expect: stepExpectation(step.expect) }
  })
  return { name: path.name, steps }
}

let cached: readonly LifecyclePath[] | null = null

/**
 * The connection chart's lifecycle paths a real link and the simulator can produce on the wire
 * (every (state, stimulus) edge the wire can reach is the last step of one; `phoenix-link paths
 * --chart connection --json | wc -l` counts them: without `--chart` the command prints the
 * channel and reconnect charts' paths too), shortest first. Generated once per process (about 0.5 s), then shared: the array and
 * its paths are frozen.
 */
export function lifecyclePaths(): readonly LifecyclePath[] {
  if (!cached) cached = Object.freeze(connectionPaths('wire').map((p) => deepFreeze(lifecyclePathOf(p))))
  return cached
}


let reconnects: readonly LifecyclePath[] | null = null

/**
 * The paths on which a connected link loses its socket and is connected again on the next, twice:
 * one for every loss a connected link reconnects after (close 1000, 1001, 1011, 1012, 1013 and
 * 4001, a drop, a reset, a heartbeat timeout, the control channel closed), each continued through
 * the backoff, the next upgrade and the control join, then the same loss on the second socket and
 * the same way back on the third (16 steps, `connected` after the 4th, 10th and 16th: indexes 3, 9
 * and 15, as `PathFailure.step` counts them; generations 1 to 3).
 * {@link lifecyclePaths} ends every path at its last edge, so none of them reaches `connected`
 * twice: these are where a host's app channels are judged on a new socket (the kit's
 * `app-channels-joined`), on the second and on the third, so join params that work for one rejoin
 * only fail here, and where an oracle of the host's own sees it come back. Run them with the same
 * `kit.run()`. Frozen, generated once per process.
 */
export function reconnectPaths(): readonly LifecyclePath[] {
  if (!reconnects) reconnects = Object.freeze(reconnectedPaths().map((p) => deepFreeze(lifecyclePathOf(p))))
  return reconnects
}
