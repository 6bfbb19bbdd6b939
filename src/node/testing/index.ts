/**
 * phoenix-link/testing: the connection chart's generated lifecycle paths as a test kit for a
 * host's own suite. {@link lifecyclePaths} gives the paths as data (every step a structured
 * {@link LifecycleStimulus} and what the chart says holds after it); {@link startPathKit} starts
 * a platform simulator and runs one path at a time against a host the caller builds with
 * `createLink`; {@link LIFECYCLE_ORACLES} are the rules every step is checked against, to extend
 * with the host's own; {@link checkPath} checks a path built or edited by hand. `SimulatedClock` is XState's, re-exported: the kit advances it for chart
 * delays.
 *
 * @example
 * ```ts
 * import { createLink } from 'phoenix-link'
 * import { lifecyclePaths, startPathKit } from 'phoenix-link/testing'
 *
 * const kit = await startPathKit()
 * for (const path of lifecyclePaths()) {
 *   await kit.run(path, (options) => createLink({ ...options, onControl: myHandler }))
 * }
 * await kit.stop()
 * ```
 */
export { SimulatedClock } from 'xstate'
export * from './stimuli.js'
export * from './paths.js'
export * from './oracles.js'
export * from './runner.js'
export { checkPath } from './check-path.js'
export * from '../conform/index.js'
export type { ModelPath, PathStep } from '../model/paths.js'
export type { Expectation, StimulusKind } from '../model/connection-model.js'
