/**
 * The generated paths replayed on the chart alone (pure transitions), every stimulus in every
 * state, the ones the wire cannot reach included, each step judged by the rule oracles.
 */
import { describe, expect, it } from 'vitest'
import { connectionPaths } from '../../src/node/model/paths.js'
import { expectationOf, initialModel } from '../../src/node/model/connection-model.js'
import { LIFECYCLE_ORACLES, lifecyclePathOf, stepExpectation, type OracleInput } from '../../src/node/testing/index.js'

describe('connection chart: pure paths against the rules', () => {
  const paths = connectionPaths('pure')
  it(`${paths.length} paths, every step keeps every rule`, () => {
    const broken: string[] = []
    for (const path of paths.map(lifecyclePathOf)) {
      let before = stepExpectation(expectationOf(initialModel()))
      let wasConnected = false
      let wasAccepted = false
      for (const [index, step] of path.steps.entries()) {
        // No link here: the oracles judge the chart's own expectations.
        const input = { path, index, step, before, after: step.expect, wasConnected, wasAccepted } as OracleInput
        for (const oracle of LIFECYCLE_ORACLES) {
          const violation = oracle.check(input)
          if (violation) broken.push(`${path.name}: ${oracle.name}: ${violation}`)
        }
        wasConnected ||= step.expect.state === 'connected'
        wasAccepted ||= step.expect.state === 'joining' || step.expect.state === 'connected'
        before = step.expect
      }
    }
    expect(broken.slice(0, 10)).toEqual([])
  })
})
