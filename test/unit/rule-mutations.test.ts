/**
 * The rule mutations of `npm run mutate:rules` still apply: each breaks its rule by replacing a
 * text that must occur exactly once in its file. A change to that code would otherwise leave the
 * mutation behind unnoticed until the next (long) run of the script.
 */
import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { MUTATIONS } from '../../scripts/rule-mutations-list.js'

const root = fileURLToPath(new URL('../..', import.meta.url))

describe('rule mutations', () => {
  it('every mutation names a text that occurs exactly once in its file, and changes it', () => {
    expect(MUTATIONS.length).toBeGreaterThan(0)
    const stale = MUTATIONS.flatMap((m) => {
      const count = readFileSync(`${root}/${m.file}`, 'utf8').split(m.from).length - 1
      return count === 1 && m.to !== m.from ? [] : [`${m.rule} (${m.how}): ${count} occurrences in ${m.file}`]
    })
    expect(stale).toEqual([])
  })

  it('the tests a mutation runs beside the generated paths exist', () => {
    const missing = MUTATIONS.flatMap((m) => (m.also?.suites ?? []).filter((suite) => !existsSync(`${root}/${suite}`)).map((suite) => `${m.rule} (${m.how}): ${suite}`))
    expect(missing).toEqual([])
    expect(MUTATIONS.some((m) => m.also !== undefined)).toBe(true)
  })
})
