/** The link's logger wrapper: redacts the key, never throws, and passes no `undefined` to console-like loggers. */
import { describe, expect, it } from 'vitest'
import { redact, redacting } from '../../src/logger.js'

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

  it('redacts the key percent-encoded and form-encoded too, as a server echoing the api_key param would send it', () => {
    const key = 'sk+live/SECRET== x'
    const echoed = { kind: 'closed', closeReason: `bad api_key=${encodeURIComponent(key)}`, body: `api_key=${new URLSearchParams({ k: key }).toString().slice(2)}` }
    const out = JSON.stringify(redact(echoed, key))
    expect(out).not.toContain(encodeURIComponent(key))
    expect(out).not.toContain('SECRET')
    expect(out).toContain('[redacted]')
  })

  it('a short key never rewrites the identifiers of a typed reason; free text is still redacted', () => {
    const reason = { kind: 'rejected', cause: 'unauthenticated', closeName: 'policy violation', detail: 'e is the key' }
    expect(redact(reason, 'e')).toEqual({ kind: 'rejected', cause: 'unauthenticated', closeName: 'policy violation', detail: '[redacted] is th[redacted] k[redacted]y' })
  })

  it('redacts a cut-off copy of the key (its first 8 characters or more), wherever it stands', () => {
    const key = 'sk_live_ABCDEFGHIJKLMNOP'
    const cut = (n: number) => key.slice(0, n)
    // As reasons keep it: a body cut at 200 characters, a frame excerpt quoted by JSON.stringify.
    expect(redact({ body: `xx ${cut(20)}` }, key)).toEqual({ body: 'xx [redacted]' })
    expect(redact(`frame starts ${JSON.stringify(`zz${cut(12)}`)}`, key)).toBe('frame starts "zz[redacted]"')
    expect(redact(`${key}${key} and ${cut(8)}!`, key)).toBe('[redacted][redacted] and [redacted]!')
    // Under 8 characters of the key is not a copy of it; a key shorter than 8 is redacted whole only.
    expect(redact(`see ${cut(7)}`, key)).toBe(`see ${cut(7)}`)
    expect(redact('keyword keyed', 'keyed')).toBe('keyword [redacted]')
  })
})
