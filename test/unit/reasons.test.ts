/** The classification tables and the DisconnectReason schema. */
import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import {
  CLOSE_CODES,
  classifyClose,
  classifyJoinError,
  classifySupersede,
  classifyUpgrade,
  describeReason,
  DisconnectReason,
  parseRetryAfter,
  REASON_KINDS,
  UPGRADE_STATUSES,
} from '../../src/reasons.js'
import { gracefulReason, suppressedReason, timedOutReason } from '../../machines/types.js'
import { normalLoss } from '../support/chart.js'

describe('close code table', () => {
  it('never reads 1000, 1001 or 1011 as a stop', () => {
    for (const code of [1000, 1001, 1011]) {
      const r = classifyClose({ code, reason: '' }, 1, 0)
      expect(r).toMatchObject({ kind: 'closed', retryable: true, closeCode: code })
    }
  })
  it('1006 is dropped, 1008 and 4500-4999 are rejected, 4000-4499 reconnect', () => {
    expect(classifyClose({ code: 1006, reason: '', error: 'ECONNRESET' }, 1, 0)).toMatchObject({ kind: 'dropped', detail: expect.stringContaining('ECONNRESET') })
    expect(classifyClose({ code: 1008, reason: 'no' }, 1, 0)).toMatchObject({ kind: 'rejected', cause: 'unauthorized', retryable: false })
    expect(classifyClose({ code: 4500, reason: '' }, 1, 0)).toMatchObject({ kind: 'rejected', retryable: false })
    expect(classifyClose({ code: 4001, reason: '' }, 1, 0)).toMatchObject({ kind: 'closed', retryable: true })
  })
  it('classifies every integer code without throwing, and every result parses', () => {
    fc.assert(
      fc.property(fc.integer({ min: -10, max: 70_000 }), fc.string(), (code, reason) => {
        const r = classifyClose({ code, reason }, 1, 0)
        expect(DisconnectReason.safeParse(r).success).toBe(true)
        if (!CLOSE_CODES.some((row) => code >= row.from && code <= row.to)) expect(r.kind).toBe('dropped')
      }),
    )
  })
})

describe('upgrade status table', () => {
  it('ends the session on 400, 401, 402, 403, 409, 414 and 431 and waits on 429 and 503', () => {
    for (const [status, row] of Object.entries(UPGRADE_STATUSES)) {
      const r = classifyUpgrade({ status: Number(status) }, 1, 0)
      expect(r).toMatchObject({ kind: 'rejected', cause: row.cause, retryable: row.retryable })
    }
    expect(classifyUpgrade({ status: 403 }, 1, 0).retryable).toBe(false)
    expect(classifyUpgrade({ status: 429 }, 1, 0).retryable).toBe(true)
  })
  it('a request too large for the server (414, 431) is a terminal protocol error, and its line says what to shorten', () => {
    expect(describeReason(classifyUpgrade({ status: 414 }, 1, 0))).toBe(
      'rejected (protocol-error) by upgrade HTTP 414 (the url with its socket params is too long for the server: shorten the params), terminal',
    )
    expect(describeReason(classifyUpgrade({ status: 431 }, 1, 0))).toBe(
      'rejected (protocol-error) by upgrade HTTP 431 (a header is too large for the server: shorten it (an x-api-key, say), or send the key as a param), terminal',
    )
    expect(describeReason(classifyUpgrade({ status: 400 }, 1, 0))).toBe('rejected (protocol-error) by upgrade HTTP 400, terminal')
  })
  it('reads the platform error body and Retry-After', () => {
    const r = classifyUpgrade(
      { status: 429, retryAfter: '7', body: JSON.stringify({ error: { code: 'too_many_requests', message: 'slow down', request_id: 'r1' } }) },
      1,
      0,
    )
    expect(r).toMatchObject({ errorCode: 'too_many_requests', message: 'slow down', requestId: 'r1', retryAfterMs: 7000 })
  })
  it('keeps a body that is not JSON as the message, and other statuses as other or unavailable', () => {
    expect(classifyUpgrade({ status: 403, body: '<html>nope</html>' }, 1, 0)).toMatchObject({ message: '<html>nope</html>' })
    expect(classifyUpgrade({ status: 418 }, 1, 0)).toMatchObject({ kind: 'other', retryable: true })
    expect(classifyUpgrade({ status: 502 }, 1, 0)).toMatchObject({ kind: 'rejected', cause: 'unavailable', retryable: true })
  })
  it('parses Retry-After as seconds or an HTTP date, and refuses garbage', () => {
    expect(parseRetryAfter('2', 0)).toBe(2000)
    expect(parseRetryAfter(' 1.5 ', 0)).toBe(1500)
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 4_000)).toBe(6000)
    expect(parseRetryAfter('soon', 0)).toBeNull()
    expect(parseRetryAfter(undefined, 0)).toBeNull()
  })
  it('reads the three HTTP-date forms alike, and nothing else Date.parse would take as a date', () => {
    const at = Date.UTC(1994, 10, 6, 8, 49, 37)
    for (const form of ['Sun, 06 Nov 1994 08:49:37 GMT', 'Sunday, 06-Nov-94 08:49:37 GMT', 'Sun Nov  6 08:49:37 1994']) {
      expect(parseRetryAfter(form, at - 5_000), form).toBe(5_000)
      // As the response's Date header too.
      expect(parseRetryAfter(new Date(at + 7_000).toUTCString(), 0, form), form).toBe(7_000)
    }
    for (const junk of ['foo 2030', 'tomorrow 12:00', '2030-01-01', 'Sun, 06 Nov 1994 08:49:37', '1e3', '-5', 'Sat, 31 Feb 2026 10:00:00 GMT', 'Sun, 06 Nov 1994 24:00:00 GMT', 'Sun, 06 Nov 1994 08:60:00 GMT', 'Sun, 00 Nov 1994 08:49:37 GMT']) {
      expect(parseRetryAfter(junk, 0), junk).toBeNull()
    }
    // A leap second reads as :59; a one-digit asctime day; a Date header with spaces around it.
    expect(parseRetryAfter('Wed, 31 Dec 2025 23:59:60 GMT', Date.UTC(2025, 11, 31, 23, 59, 0))).toBe(59_000)
    expect(parseRetryAfter('Wed Dec  3 00:00:05 2025', Date.UTC(2025, 11, 3))).toBe(5_000)
    expect(parseRetryAfter('Wed Dec 31 23:59:59 2025', 0, '  Wed, 31 Dec 2025 23:59:49 GMT  ')).toBe(10_000)
    expect(parseRetryAfter('Wed, 31 Dec 2025 23:59:61 GMT', 0)).toBeNull()
    // RFC 850's two-digit year: not more than 50 years ahead of now, else the century before.
    expect(parseRetryAfter('Wednesday, 05-Dec-76 00:00:00 GMT', Date.UTC(2026, 11, 5))).toBe(2 ** 31 - 1) // 2076: exactly 50 years ahead, kept
    const in2026 = Date.UTC(2026, 11, 5)
    expect(parseRetryAfter('Tuesday, 05-Dec-60 00:00:00 GMT', in2026)).toBe(2 ** 31 - 1) // 2060 (at the parse's cap), not 1960's 0
    expect(parseRetryAfter('Wednesday, 05-Dec-77 00:00:00 GMT', in2026)).toBe(0) // 2077 is past the 50 years: 1977
    expect(parseRetryAfter('Saturday, 05-Dec-26 00:00:10 GMT', in2026)).toBe(10_000)
  })
  it('reads an HTTP-date Retry-After against the response Date header: the local wall clock, an hour off, changes nothing', () => {
    const sent = Date.UTC(2026, 11, 1, 12, 0, 0)
    const retry = new Date(sent + 30_000).toUTCString()
    const hourAhead = sent + 3_600_000
    expect(parseRetryAfter(retry, hourAhead, new Date(sent).toUTCString())).toBe(30_000)
    expect(parseRetryAfter(retry, hourAhead)).toBe(0) // no Date header: the local clock is all there is
    expect(parseRetryAfter(retry, hourAhead, 'not a date')).toBe(0)
    // Only an IMF-fixdate counts as the server's Date: Date.parse would read "0" as the year 2000.
    expect(parseRetryAfter(retry, hourAhead, '0')).toBe(0)
    expect(classifyUpgrade({ status: 503, retryAfter: retry, date: new Date(sent).toUTCString() }, 1, hourAhead)).toMatchObject({ retryAfterMs: 30_000 })
    // Delta-seconds need no date at all.
    expect(parseRetryAfter('30', hourAhead, new Date(sent).toUTCString())).toBe(30_000)
  })
})

describe('supersede payloads', () => {
  it('are always terminal, odd fields kept raw', () => {
    const cases: unknown[] = [
      { reason: 'session.already_connected', message: 'm', retry_after: 30, target_socket_id: 's', correlation_id: 'c' },
      { retry_after: '12' },
      { retry_after: 'soon', correlation_id: null, extra: { x: 1 } },
      { reason: 42, message: ['x'] },
      null,
      'text',
      [],
    ]
    for (const payload of cases) {
      const r = classifySupersede(payload, 2, 9)
      expect(r).toMatchObject({ kind: 'superseded', retryable: false, generation: 2, at: 9 })
      expect(DisconnectReason.safeParse(r).success).toBe(true)
    }
    expect(classifySupersede({ retry_after: '12' }, 1, 0)).toMatchObject({ retryAfterMs: 12_000 })
    expect(classifySupersede({ retry_after: 'soon', extra: 1 }, 1, 0)).toMatchObject({ retryAfterMs: null, raw: { retry_after: 'soon', extra: 1 } })
    expect(classifySupersede({ reason: 'x.y', correlation_id: 'c' }, 1, 0)).toMatchObject({ cause: 'x.y', correlationId: 'c' })
  })
  it('never throws on arbitrary JSON', () => {
    fc.assert(fc.property(fc.jsonValue(), (v) => {
      expect(classifySupersede(v, 1, 0).kind).toBe('superseded')
    }))
  })
})

describe('join errors', () => {
  it('map known reasons to causes and unknown ones to other', () => {
    expect(classifyJoinError({ reason: 'unauthorized' }, 1, 0)).toMatchObject({ kind: 'rejected', cause: 'unauthorized', retryable: false })
    expect(classifyJoinError({ reason: 'join crashed' }, 1, 0)).toMatchObject({ kind: 'rejected', cause: 'unavailable', retryable: true })
    expect(classifyJoinError({ reason: 'weird' }, 1, 0)).toMatchObject({ kind: 'other', retryable: true })
    expect(classifyJoinError(null, 1, 0)).toMatchObject({ kind: 'other' })
  })
})

describe('DisconnectReason', () => {
  it('has the kinds of the design table', () => {
    expect(REASON_KINDS).toEqual(['graceful', 'superseded', 'rejected', 'closed', 'dropped', 'timed-out', 'suppressed', 'other'])
  })
  it('accepts every reason the charts make themselves', () => {
    for (const r of [gracefulReason(1, 2), timedOutReason('connect', 1, 2), timedOutReason('join', 1, 2), suppressedReason('rapid-disconnects', 10, normalLoss(1), 2)]) {
      expect(DisconnectReason.safeParse(r).success, JSON.stringify(r)).toBe(true)
    }
  })
  it("a suppressed reason names the loss that reached the limit: any retryable loss kind, never another session end", () => {
    const reason = suppressedReason('rapid-disconnects', 10, classifyClose({ code: 1013, reason: 'later' }, 7, 5), 9, true)
    expect(DisconnectReason.parse(reason)).toMatchObject({ generation: 7, lastLoss: { kind: 'closed', closeCode: 1013, closeReason: 'later', generation: 7 } })
    for (const loss of [classifyUpgrade({ status: 429 }, 1, 0), classifyClose({ code: 1006, reason: '' }, 1, 0), timedOutReason('join', 1, 0), classifyClose({ code: 999, reason: '' }, 1, 0)]) {
      expect(DisconnectReason.safeParse({ ...reason, lastLoss: loss }).success, loss.kind).toBe(true)
    }
    for (const loss of [gracefulReason(1, 0), classifySupersede({}, 1, 0), reason, { kind: 'closed', closeCode: 1000 }]) {
      expect(DisconnectReason.safeParse({ ...reason, lastLoss: loss }).success, JSON.stringify(loss)).toBe(false)
    }
    const { lastLoss: _, ...recordedBefore } = reason
    expect(DisconnectReason.safeParse(recordedBefore).success).toBe(true)
  })
  it('describes every kind in one line', () => {
    const samples = [
      gracefulReason(1, 0),
      classifySupersede({}, 1, 0),
      classifyUpgrade({ status: 403 }, 1, 0),
      classifyClose({ code: 1001, reason: '' }, 1, 0),
      classifyClose({ code: 1006, reason: '' }, 1, 0),
      timedOutReason('join', 1, 0),
      suppressedReason('max-attempts', 3, normalLoss(1), 0),
      classifyUpgrade({ status: 404 }, 1, 0),
    ] as DisconnectReason[]
    expect(new Set(samples.map((s) => s.kind)).size).toBe(REASON_KINDS.length)
    for (const s of samples) expect(describeReason(s)).not.toMatch(/\n/)
  })
})

describe('describeReason of what is not a reason', () => {
  it('never throws: a line naming what is wrong', () => {
    const lines = [null, undefined, 5, 'closed', {}, { kind: 'bogus', retryable: true }, { kind: 'closed', retryable: true }].map((v) => describeReason(v as never))
    expect(lines).toEqual([
      'not a DisconnectReason: null',
      'not a DisconnectReason: undefined',
      'not a DisconnectReason: a number',
      'not a DisconnectReason: a string',
      'not a DisconnectReason: an object, no kind it knows',
      'not a DisconnectReason: an object of kind "bogus", no kind it knows',
      'not a DisconnectReason: an object of kind "closed", closeCode, closeName, closeReason, generation, at missing or of the wrong type',
    ])
    // An array is an object with no kind (its issue has no path: no field is named); a field of a nested reason is named by its path.
    expect(describeReason([] as never)).toBe('not a DisconnectReason: an object, no kind it knows')
    // The last loss's line loses only its own ending: ", terminal" inside a close reason stays.
    expect(describeReason(suppressedReason('rapid-disconnects', 10, classifyClose({ code: 1011, reason: 'a, terminal b' }, 1, 0), 0, true) as DisconnectReason)).toBe(
      'suspended after 10 attempts (rapid-disconnects, the last closed 1011 (internal error) "a, terminal b"): one attempt per cooldown, will reconnect',
    )
    const nested = { kind: 'suppressed', cause: 'rapid-disconnects', attempts: 3, retryable: false, generation: 1, at: 0, lastLoss: { kind: 'closed', retryable: true, closeName: 'normal closure', closeReason: '', generation: 1, at: 0 } }
    expect(describeReason(nested as never)).toBe('not a DisconnectReason: an object of kind "suppressed", lastLoss.closeCode missing or of the wrong type')
  })

  it('escapes every control character of server text, so a line stays one line', () => {
    const line = describeReason({ kind: 'other', retryable: true, detail: 'a\r\nb\tc\u0000d\u007fe\u0085f\u2029g', generation: 1, at: 0 })
    expect(line).toBe('other: a\\r\\nb\\tc\\u0000d\\u007fe\\u0085f\\u2029g, will reconnect')
    expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/)
  })
})
