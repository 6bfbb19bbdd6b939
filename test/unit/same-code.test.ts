/**
 * scripts/same-code.ts decides whether docs/mutation.md marks a file's measured score as stale:
 * a comment edit must not, any change of code or of where code sits must.
 */
import { describe, expect, it } from 'vitest'
import { sameCode } from '../../scripts/same-code.js'

const SOURCE = [
  '/** Doubles `x` (a count, not milliseconds). */',
  'export function double(x: number): number {',
  '  // the fast path',
  "  return x * 2 // two, see `/docs`",
  '}',
  "export const PATTERN = /a\\/\\/b/ // a regex holding two slashes",
  'export const TEXT = `x ${1 + 1} /* not a comment */`',
  '',
].join('\n')

describe('sameCode', () => {
  it('holds for a change to comments alone: a JSDoc, a line comment, a trailing comment, every token in place', () => {
    const edited = SOURCE.replace('Doubles `x` (a count', 'Twice `x` (a whole count')
      .replace('the fast path', 'no slow path')
      .replace('see `/docs`', 'as documented')
      .replace('a regex holding two slashes', 'slashes')
    expect(edited).not.toBe(SOURCE)
    expect(sameCode('a.ts', SOURCE, edited)).toBe(true)
  })

  it('fails for any change of code: an operator, a literal, a regex, a template, an identifier', () => {
    for (const [from, to] of [
      ['x * 2', 'x * 3'],
      ['x * 2', 'x + 2'],
      ['a\\/\\/b', 'a\\/b'],
      ['not a comment', 'not a comment!'],
      ['double', 'twice'],
    ] as const) {
      const edited = SOURCE.replace(from, to)
      expect(edited, from).not.toBe(SOURCE)
      expect(sameCode('a.ts', SOURCE, edited), `${from} -> ${to}`).toBe(false)
    }
  })

  it('fails for what is not a comment though it is not a token either: a shebang, a conflict marker, a Stryker directive', () => {
    const script = `#!/usr/bin/env node\n${SOURCE}`
    expect(sameCode('a.ts', script, script.replace('node', 'bun'))).toBe(false)
    expect(sameCode('a.ts', SOURCE, SOURCE.replace('  // the fast path', '  // Stryker disable next-line all'))).toBe(false)
    expect(sameCode('a.ts', SOURCE, SOURCE.replace('  // the fast path', '<<<<<<< HEAD'))).toBe(false)
    // A JSDoc-style type written in code is code.
    expect(sameCode('a.ts', 'let a: ?string\n', 'let a: ?number\n')).toBe(false)
  })

  it('fails when code moves: a comment line added above it, or a column shifted by an inline comment', () => {
    expect(sameCode('a.ts', SOURCE, SOURCE.replace('/** Doubles', '/**\n * Doubles'))).toBe(false)
    expect(sameCode('a.ts', SOURCE, SOURCE.replace('  return x', '  /* hot */ return x'))).toBe(false)
  })
})
