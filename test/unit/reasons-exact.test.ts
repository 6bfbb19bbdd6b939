/**
 * The classification tables' output, whole: for each kind of input the complete reason a host
 * reads (every field, the detail text included), at the edges of each range and of each parse.
 * reasons.test.ts checks the kinds and the retryability over whole tables; this file pins what
 * each reason says.
 */
import { describe, expect, it } from 'vitest'
import {
  classifyChannelClose,
  classifyClose,
  classifyControlChannelLoss,
  classifyJoinError,
  classifySupersede,
  classifyUpgrade,
  clipText,
  heartbeatTimeout,
  wholeWordsOf,
  closeCodeName,
  CLOSE_CODES,
  parseRetryAfter,
  REASON_TEXT_LIMIT,
} from '../../src/reasons.js'

describe('heartbeatTimeout', () => {
  it('is a retryable timed-out reason of the heartbeat phase, stamped with its transport and time', () => {
    expect(heartbeatTimeout(3, 1_234)).toEqual({ kind: 'timed-out', retryable: true, phase: 'heartbeat', generation: 3, at: 1_234 })
  })
})

describe('closeCodeName', () => {
  it('names each code by its row, at both ends of a range, and unknown outside every range', () => {
    expect(closeCodeName(1000)).toBe('normal closure')
    expect(closeCodeName(1001)).toBe('going away')
    expect(closeCodeName(4000)).toBe('application (retryable)')
    expect(closeCodeName(4499)).toBe('application (retryable)')
    expect(closeCodeName(4500)).toBe('application (terminal)')
    expect(closeCodeName(4999)).toBe('application (terminal)')
    expect(closeCodeName(5000)).toBe('unknown')
    expect(closeCodeName(999)).toBe('unknown')
    for (const row of CLOSE_CODES) {
      expect(closeCodeName(row.from)).toBe(row.name)
      expect(closeCodeName(row.to)).toBe(row.name)
    }
  })
})

describe('classifyClose', () => {
  it('a normal close keeps its code, name and reason text', () => {
    expect(classifyClose({ code: 1000, reason: 'bye' }, 3, 9)).toEqual({
      kind: 'closed',
      retryable: true,
      closeCode: 1000,
      closeName: 'normal closure',
      closeReason: 'bye',
      generation: 3,
      at: 9,
    })
  })

  it('an abnormal closure is dropped at the socket, with the socket error or "no close frame"', () => {
    expect(classifyClose({ code: 1006, reason: '', error: 'ECONNRESET' }, 2, 5)).toEqual({
      kind: 'dropped',
      retryable: true,
      source: 'socket',
      detail: 'abnormal closure (1006): ECONNRESET',
      generation: 2,
      at: 5,
    })
    expect(classifyClose({ code: 1006, reason: '' }, 2, 5)).toMatchObject({ detail: 'abnormal closure (1006): no close frame' })
    expect(classifyClose({ code: 1006, reason: '', error: null }, 2, 5)).toMatchObject({ detail: 'abnormal closure (1006): no close frame' })
  })

  it("a refusing close is rejected at the close phase, its message the close reason or the code's name", () => {
    expect(classifyClose({ code: 1008, reason: 'policy says no' }, 1, 2)).toEqual({
      kind: 'rejected',
      retryable: false,
      cause: 'unauthorized',
      phase: 'close',
      status: null,
      closeCode: 1008,
      errorCode: null,
      message: 'policy says no',
      requestId: null,
      retryAfterMs: null,
      generation: 1,
      at: 2,
    })
    expect(classifyClose({ code: 4600, reason: '' }, 1, 2)).toMatchObject({ message: 'application (terminal)', cause: 'unauthorized' })
  })

  it('a code outside the table (one a browser passes on, where ws fails the connection) is a drop, retryable, naming the code and quoting the reason', () => {
    expect(classifyClose({ code: 5005, reason: 'odd' }, 1, 2)).toEqual({
      kind: 'dropped',
      retryable: true,
      source: 'socket',
      detail: 'close code 5005 is outside every range of the close code table: no peer may send it (RFC 6455 section 7.4.2), read as a drop (reason "odd")',
      generation: 1,
      at: 2,
    })
    expect(classifyClose({ code: 1004, reason: '' }, 1, 2)).toMatchObject({ kind: 'dropped', detail: 'close code 1004 is outside every range of the close code table: no peer may send it (RFC 6455 section 7.4.2), read as a drop' })
  })
})

describe('parseRetryAfter', () => {
  it('reads whole and fractional delta-seconds, trimmed', () => {
    expect(parseRetryAfter('120', 0)).toBe(120_000)
    expect(parseRetryAfter(' 7 ', 0)).toBe(7_000)
    expect(parseRetryAfter('1.5', 0)).toBe(1_500)
    expect(parseRetryAfter('12.25', 0)).toBe(12_250)
    // Rounded up: never a shorter wait than the server asked.
    expect(parseRetryAfter('0.0004', 0)).toBe(1)
  })

  it('reads an HTTP-date as the wait from now, a past one as 0', () => {
    const now = Date.parse('Tue, 01 Dec 2026 12:00:00 GMT')
    expect(parseRetryAfter('Tue, 01 Dec 2026 12:00:30 GMT', now)).toBe(30_000)
    expect(parseRetryAfter('Tue, 01 Dec 2026 11:00:00 GMT', now)).toBe(0)
  })

  it('refuses what is neither, and a number with junk around it', () => {
    expect(parseRetryAfter(null, 0)).toBeNull()
    expect(parseRetryAfter(undefined, 0)).toBeNull()
    expect(parseRetryAfter('soon', 0)).toBeNull()
    expect(parseRetryAfter('', 0)).toBeNull()
    // Junk after digits must not be read as seconds: Date.parse reads "12abc" as no date either.
    expect(parseRetryAfter('12abc', 0)).toBeNull()
    expect(parseRetryAfter('x12', 0)).toBeNull()
    expect(parseRetryAfter('1.5s', 0)).toBeNull()
    expect(parseRetryAfter('.5', 0)).not.toBe(500)
  })
})

describe('classifyUpgrade', () => {
  it('a listed status with a platform error body keeps its code, message and request id', () => {
    const body = JSON.stringify({ error: { code: 'invalid_api_key', message: 'bad key', request_id: 'req-1' } })
    expect(classifyUpgrade({ status: 401, retryAfter: null, body }, 1, 2)).toEqual({
      kind: 'rejected',
      retryable: false,
      cause: 'unauthenticated',
      phase: 'upgrade',
      status: 401,
      errorCode: 'invalid_api_key',
      message: 'bad key',
      requestId: 'req-1',
      retryAfterMs: null,
      generation: 1,
      at: 2,
    })
  })

  it('a body without the error shape is kept as the message, clipped; JSON of another shape too', () => {
    expect(classifyUpgrade({ status: 403, retryAfter: null, body: 'Forbidden' }, 1, 2)).toMatchObject({ message: 'Forbidden', errorCode: null })
    expect(classifyUpgrade({ status: 403, retryAfter: null, body: '{"other":1}' }, 1, 2)).toMatchObject({ message: '{"other":1}' })
    expect(classifyUpgrade({ status: 403, retryAfter: null, body: '' }, 1, 2)).toMatchObject({ message: null })
    const long = 'word '.repeat(100)
    expect((classifyUpgrade({ status: 403, retryAfter: null, body: long }, 1, 2) as { message: string }).message).toBe(clipText(long, REASON_TEXT_LIMIT))
  })

  it('any 5xx is unavailable and retryable, at both ends of the range; 499 and 600 are other', () => {
    for (const status of [500, 599, 507]) {
      expect(classifyUpgrade({ status, retryAfter: null, body: null }, 1, 2)).toMatchObject({ kind: 'rejected', cause: 'unavailable', retryable: true, status })
    }
    for (const status of [499, 600]) {
      expect(classifyUpgrade({ status, retryAfter: null, body: 'x' }, 1, 2)).toEqual({
        kind: 'other',
        retryable: true,
        detail: `upgrade refused with HTTP ${status}, a status the upgrade table does not list`,
        raw: 'x',
        generation: 1,
        at: 2,
      })
    }
  })

  it('a 404 says the url has no WebSocket endpoint; a missing body is kept as ""', () => {
    expect(classifyUpgrade({ status: 404, retryAfter: null, body: null }, 1, 2)).toEqual({
      kind: 'other',
      retryable: true,
      detail: 'upgrade refused with HTTP 404: no WebSocket endpoint at this path; check the url (it ends at the socket mount, e.g. /socket)',
      raw: '',
      generation: 1,
      at: 2,
    })
  })

  it('reads Retry-After against the reason time', () => {
    expect(classifyUpgrade({ status: 429, retryAfter: '3', body: null }, 1, 2)).toMatchObject({ retryAfterMs: 3_000, cause: 'rate-limited' })
  })
})

describe('classifyJoinError', () => {
  it('a listed reason keeps the message and a retry_after (a number or numeric text) in milliseconds', () => {
    expect(classifyJoinError({ reason: 'too_many_requests', message: 'slow down', retry_after: 2 }, 1, 2)).toEqual({
      kind: 'rejected',
      retryable: true,
      cause: 'rate-limited',
      phase: 'join',
      status: null,
      errorCode: 'too_many_requests',
      message: 'slow down',
      requestId: null,
      retryAfterMs: 2_000,
      generation: 1,
      at: 2,
    })
    expect(classifyJoinError({ reason: 'too_many_requests', retry_after: '2', message: 3 }, 1, 2)).toMatchObject({ retryAfterMs: 2_000, message: null })
    expect(classifyJoinError({ reason: 'too_many_requests', retry_after: '2x' }, 1, 2)).toMatchObject({ retryAfterMs: null })
  })

  it('an unlisted, missing or non-text reason is other, naming it, with the response raw', () => {
    expect(classifyJoinError({ reason: 'nope' }, 1, 2)).toEqual({
      kind: 'other',
      retryable: true,
      detail: 'join refused with a reason the join table does not list: nope',
      raw: '{"reason":"nope"}',
      generation: 1,
      at: 2,
    })
    expect(classifyJoinError({}, 1, 2)).toMatchObject({ detail: 'join refused with a reason the join table does not list: (no reason)', raw: '{}' })
    expect(classifyJoinError({ reason: 7 }, 1, 2)).toMatchObject({ detail: 'join refused with a reason the join table does not list: (no reason)' })
    expect(classifyJoinError('text', 1, 2)).toMatchObject({ detail: 'join refused with a reason the join table does not list: (no reason)', raw: '"text"' })
    expect(classifyJoinError(null, 1, 2)).toMatchObject({ raw: 'null' })
    expect(classifyJoinError(undefined, 1, 2)).toMatchObject({ raw: 'undefined' })
    // What JSON.stringify throws on: a BigInt (not an object) as its text; an object whose toJSON throws, said so.
    expect(classifyJoinError(10n, 1, 2)).toMatchObject({ raw: '10' })
    expect(
      classifyJoinError(
        {
          toJSON() {
            throw 'not an Error'
          },
        },
        1,
        2,
      ),
    ).toMatchObject({ raw: '(a payload JSON.stringify cannot write: it threw)' })
    // A prototype key is not a listed reason.
    expect(classifyJoinError({ reason: 'constructor' }, 1, 2)).toMatchObject({ kind: 'other' })
  })
})

describe('classifySupersede', () => {
  it('keeps every field of a well-formed payload', () => {
    const payload = { reason: 'new_session', message: 'moved', retry_after: 0, target_socket_id: 's-1', correlation_id: 'c-1' }
    expect(classifySupersede(payload, 4, 5)).toEqual({
      kind: 'superseded',
      retryable: false,
      cause: 'new_session',
      message: 'moved',
      retryAfterMs: 0,
      targetSocketId: 's-1',
      correlationId: 'c-1',
      raw: payload,
      generation: 4,
      at: 5,
    })
  })

  it('a payload of the wrong shape is still superseded: cause unknown, the fields null, kept raw', () => {
    for (const payload of [{ reason: 5, message: ['x'] }, 'text', null, [1, 2]]) {
      const reason = classifySupersede(payload, 1, 2)
      expect(reason).toMatchObject({ kind: 'superseded', retryable: false, cause: 'unknown', message: null, targetSocketId: null, correlationId: null })
    }
    expect(classifySupersede('text', 1, 2)).toMatchObject({ raw: { value: 'text' } })
    expect(classifySupersede([1, 2], 1, 2)).toMatchObject({ raw: { value: [1, 2] } })
  })

  it('retry_after: whole or fractional seconds as a number or numeric text; negative, infinite or junk is null', () => {
    expect(classifySupersede({ retry_after: 1.5 }, 1, 2)).toMatchObject({ retryAfterMs: 1_500 })
    expect(classifySupersede({ retry_after: ' 2.25 ' }, 1, 2)).toMatchObject({ retryAfterMs: 2_250 })
    expect(classifySupersede({ retry_after: '3' }, 1, 2)).toMatchObject({ retryAfterMs: 3_000 })
    expect(classifySupersede({ retry_after: -1 }, 1, 2)).toMatchObject({ retryAfterMs: null })
    expect(classifySupersede({ retry_after: Number.POSITIVE_INFINITY }, 1, 2)).toMatchObject({ retryAfterMs: null })
    expect(classifySupersede({ retry_after: '2.x' }, 1, 2)).toMatchObject({ retryAfterMs: null })
    expect(classifySupersede({ retry_after: '2.' }, 1, 2)).toMatchObject({ retryAfterMs: null })
    expect(classifySupersede({ retry_after: 'soon' }, 1, 2)).toMatchObject({ retryAfterMs: null })
  })
})

describe('channel losses', () => {
  it("an app channel's phx_close is dropped at the channel, with its payload when it has one", () => {
    expect(classifyChannelClose({}, 1, 2)).toEqual({ kind: 'dropped', retryable: true, source: 'channel', detail: 'the server closed the channel (phx_close)', generation: 1, at: 2 })
    expect(classifyChannelClose({ why: 'kick' }, 1, 2)).toMatchObject({ detail: 'the server closed the channel (phx_close): {"why":"kick"}' })
    expect(classifyChannelClose(null, 1, 2)).toMatchObject({ detail: 'the server closed the channel (phx_close)' })
    expect(classifyChannelClose('text', 1, 2)).toMatchObject({ detail: 'the server closed the channel (phx_close)' })
  })

  it('a control channel loss says which event, with its payload when it has one', () => {
    expect(classifyControlChannelLoss('phx_error', {}, 1, 2)).toEqual({
      kind: 'dropped',
      retryable: true,
      source: 'channel',
      detail: 'the control channel crashed (phx_error)',
      generation: 1,
      at: 2,
    })
    expect(classifyControlChannelLoss('phx_close', { a: 1 }, 1, 2)).toMatchObject({ detail: 'the server closed the control channel (phx_close): {"a":1}' })
    expect(classifyControlChannelLoss('phx_close', 'x', 1, 2)).toMatchObject({ detail: 'the server closed the control channel (phx_close)' })
  })
})

describe('clipText', () => {
  it('keeps text up to the limit whole', () => {
    expect(clipText('abc', 3)).toBe('abc')
    expect(clipText('', 0)).toBe('')
  })

  it('cuts past the limit, before a token the cut would split, not before a whole one', () => {
    expect(clipText('abcd', 3)).toBe('')
    expect(clipText('ab cd', 4)).toBe('ab ')
    expect(clipText('ab cd ef', 5)).toBe('ab cd')
    expect(clipText('ab, cd', 3)).toBe('ab,')
    expect(clipText('key sk-live-123 tail', 10)).toBe('key ')
  })

  it('cuts back to the last delimiter when it is near, so a key with a character outside the token set goes whole', () => {
    expect(clipText('denied key sk_live_Zz9!Yy8Xw7Vv6', 22)).toBe('denied key ')
    expect(clipText('a "quoted" word', 13)).toBe('a "quoted" ')
    // The delimiter farther back than half of what is kept: before the split token run instead.
    expect(clipText('x abcdefghijklmnop', 12)).toBe('x ')
    // A key holding a character outside letters and digits ('!') is a token too: none of it is kept.
    expect(clipText('abcdefgh!ijklmnop', 12)).toBe('')
    expect(clipText(`${'x'.repeat(60)}ABCDEFGHIJKLMNOP!qrstuvwxyz0123456789`, 80)).toBe('')
    expect(clipText('Fehler: Schlüssel abgelehnt', 20)).toBe('Fehler: Schlüssel ')
    expect(wholeWordsOf('denied key sk_live_Zz9Yy8X')).toBe('denied key ')
    // Cut at an unknown point: a last word shorter than 8 characters stays (it tells little of a key).
    expect(wholeWordsOf('the key is not')).toBe('the key is not')
    expect(wholeWordsOf('abc')).toBe('abc')
    expect(wholeWordsOf('a "sk_live_1')).toBe('a "')
    expect(wholeWordsOf('denied key sk_live_Zz9Yy8X', ' ')).toBe('denied key sk_live_Zz9Yy8X')
    expect(wholeWordsOf('')).toBe('')
    // Never half a character: a cut between the halves of an emoji drops the first half.
    expect(clipText(`a${'😀'.repeat(150)}`, 200)).toBe(`a${'😀'.repeat(99)}`)
  })

  it('at each edge: a text of exactly the limit, a last word of 7 or 8 characters, a delimiter at exactly half, past half, a surrogate at either end of the high range', () => {
    // Exactly the limit: whole, even with a long last word (nothing was cut).
    expect(clipText('abcdefghij', 10)).toBe('abcdefghij')
    // Cut at an unknown point: a last word of 7 characters stays, one of 8 goes.
    expect(wholeWordsOf('abcdefg')).toBe('abcdefg')
    expect(wholeWordsOf('ab cdefghi')).toBe('ab cdefghi')
    expect(wholeWordsOf('ab cdefghij')).toBe('ab ')
    // A delimiter exactly half-way back is near: the split word goes whole, its '!' too.
    expect(wholeWordsOf('abc d!ef', 'g')).toBe('abc ')
    // One farther back is not: the cut goes back over the token run only (visible ASCII, '!' too; not 'é').
    expect(clipText('a b!cdefghijk', 12)).toBe('a ')
    expect(clipText('a b\u00e9cdefghijk', 12)).toBe('a b\u00e9')
    // Half a character at either end of the high-surrogate range is dropped; a character above it is kept.
    expect(clipText(`a${'\ud800\udc00'.repeat(150)}`, 200)).toBe(`a${'\ud800\udc00'.repeat(99)}`)
    expect(clipText(`a${'\udbff\udc00'.repeat(150)}`, 200)).toBe(`a${'\udbff\udc00'.repeat(99)}`)
    expect(clipText('ab\ue000\ue000', 3)).toBe('ab\ue000')
  })

  it('a near delimiter decides over the token run: a split word with a character outside the token set still goes whole back to it', () => {
    // 'é' is no token character: the run back from the cut stops at it, the delimiter does not.
    expect(wholeWordsOf('abc d\u00e9fg', 'h')).toBe('abc ')
    // A delimiter exactly half-way back (8 kept, at 4) is near; one past half is not, and the run stops at 'é'.
    expect(wholeWordsOf('a bcd\u00e9fgh', 'i')).toBe('a bcd\u00e9')
    expect(wholeWordsOf('a\u00e9bc defgh', 'i')).toBe('a\u00e9bc ')
  })

  it('token characters are visible ASCII from ! to ~ and no delimiter: a control character or one above ~ ends the run', () => {
    // No delimiter at all: back over the token run the cut split.
    expect(clipText('a\u0001bcdefghijklm', 12)).toBe('a\u0001')
    expect(clipText('a!bcdefghijklm', 12)).toBe('')
    expect(clipText('a~bcdefghijklm', 12)).toBe('')
    expect(clipText('a\u007fbcdefghijklm', 12)).toBe('a\u007f')
  })

  it('keeps the JSON of a payload that is longer than the limit clipped between tokens', () => {
    const detail = (classifyChannelClose({ token: 'x'.repeat(300) }, 1, 2) as { detail: string }).detail
    expect(detail).toBe('the server closed the channel (phx_close): {"token":"')
  })
})
