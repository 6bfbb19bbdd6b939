/**
 * Every table and default the package exports is deeply frozen: the classification tables decide
 * whether a link reconnects or stops, and one host module changing a row (a 403 made retryable, a
 * state name removed) would change every link in the process.
 */
import { describe, expect, it } from 'vitest'
import * as client from '../../src/index.js'
import * as machines from '../../machines/index.js'
import * as server from '../../src/node/server/index.js'
import * as testing from '../../src/node/testing/index.js'
import * as metrics from '../../src/node/metrics.js'
import * as visualizer from '../../src/node/visualize/index.js'

/** Plain objects and arrays only: classes, functions and zod schemas are not data tables. */
function isPlainData(value: unknown): value is object {
  if (value === null || typeof value !== 'object') return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === Array.prototype || proto === null
}

/** The paths inside `value` that are plain data and not frozen. */
function unfrozen(value: object, path: string, seen = new Set<object>()): string[] {
  if (seen.has(value)) return []
  seen.add(value)
  const found = Object.isFrozen(value) ? [] : [path]
  for (const [key, inner] of Object.entries(value)) if (isPlainData(inner)) found.push(...unfrozen(inner, `${path}.${key}`, seen))
  return found
}

describe('exported tables and defaults', () => {
  it('every plain object or array exported by the client and every subpath is frozen, all the way down', () => {
    const tables: string[] = []
    const open: string[] = []
    for (const [entry, module] of Object.entries({ client, machines, server, testing, metrics, visualizer })) {
      for (const [name, value] of Object.entries(module)) {
        if (!isPlainData(value)) continue
        tables.push(`${entry}.${name}`)
        open.push(...unfrozen(value, `${entry}.${name}`))
      }
    }
    // The tables the rules are read from are among those checked.
    expect(tables).toEqual(expect.arrayContaining(['client.CLOSE_CODES', 'client.UPGRADE_STATUSES', 'client.JOIN_ERRORS', 'client.LINK_STATES', 'client.DEFAULT_LINK_POLICY']))
    expect(open).toEqual([])
  })

  it('changing a row of a classification table throws, and the rule it carries holds', () => {
    expect(() => {
      ;(client.UPGRADE_STATUSES[403] as { retryable: boolean }).retryable = true
    }).toThrow(TypeError)
    expect(() => {
      ;(client.CLOSE_CODES[0]!.outcome as { kind: string }).kind = 'rejected'
    }).toThrow(TypeError)
    expect(() => {
      ;(client.LINK_STATES as unknown as string[]).pop()
    }).toThrow(TypeError)
    expect(client.classifyUpgrade({ status: 403, body: '' }, 1, 0)).toMatchObject({ kind: 'rejected', retryable: false })
    expect(client.LINK_STATES).toContain('terminated')
  })
})
