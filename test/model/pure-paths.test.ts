/**
 * The generated paths replayed on the chart alone (pure transitions), every stimulus in every
 * state, the ones the wire cannot reach included, each step judged by the rule oracles.
 */
import { describe, expect, it } from 'vitest'
import { connectionPaths } from '../../src/node/model/paths.js'
import { expectationOf, initialModel } from '../../src/node/model/connection-model.js'
import { ruleViolation, trackConnected } from './oracles.js'

describe('connection chart: pure paths against the rules', () => {
  const paths = connectionPaths('pure')
  it(`${paths.length} paths, every step keeps every rule`, () => {
    const broken: string[] = []
    for (const path of paths) {
      let before = expectationOf(initialModel())
      let linkConnected = false
      for (const step of path.steps) {
        const violation = ruleViolation(step.stimulus, before, step.expect, linkConnected)
        if (violation) broken.push(`${path.name}: ${violation}`)
        linkConnected = trackConnected(linkConnected, step.expect)
        before = step.expect
      }
    }
    expect(broken.slice(0, 10)).toEqual([])
  })
})
