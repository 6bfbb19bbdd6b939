/** The link's logger wrapper: redacts the key, never throws, and passes no `undefined` to console-like loggers. */
import { describe, expect, it } from 'vitest'
import { redacting } from '../../src/logger.js'

describe('redacting logger', () => {
  it('passes one argument when there are no fields, so console.log prints no "undefined"', () => {
    const calls: unknown[][] = []
    const log = redacting({ info: (...args: unknown[]) => calls.push(args) }, 'sk-secret')
    log.info('state idle -> connecting')
    log.info('with fields sk-secret', { key: 'sk-secret', n: 1 })
    expect(calls).toEqual([['state idle -> connecting'], ['with fields [redacted]', { key: '[redacted]', n: 1 }]])
  })

  it('a logger that throws does not throw into the link', () => {
    const log = redacting(
      {
        warn: () => {
          throw new Error('broken logger')
        },
      },
      'k',
    )
    expect(() => log.warn('x')).not.toThrow()
  })
})
