/** The exact text and fields of each reason: what an alert or a log line shows a person. */
import { describe, expect, it } from 'vitest'
import {
  classifyChannelClose,
  classifyClose,
  classifyControlChannelLoss,
  classifyJoinError,
  classifySupersede,
  classifyUpgrade,
  describeReason,
  heartbeatTimeout,
  parseRetryAfter,
  DisconnectReason as DisconnectReasonSchema,
  MAX_RETRY_AFTER_MS,
  REASON_TEXT_LIMIT,
  type DisconnectReason,
} from '../../src/reasons.js'
import { assertMs, gracefulReason, suppressedReason, timedOutReason } from '../../machines/types.js'
import { normalLoss } from '../support/chart.js'
import { DEFAULT_RECONNECT_POLICY, validateReconnectPolicy } from '../../machines/reconnect.js'
import { DEFAULT_CONNECTION_POLICY, validateConnectionPolicy } from '../../machines/connection.js'
import { DEFAULT_CHANNEL_POLICY, validateChannelPolicy } from '../../machines/channel.js'

describe('describeReason', () => {
  const cases: Array<[DisconnectReason, string]> = [
    [gracefulReason(1, 0), 'stopped by the host (disconnect)'],
    [classifySupersede({ reason: 'session.already_connected', message: 'newer' }, 1, 0) as DisconnectReason, 'superseded by a newer session with the same key (session.already_connected: newer), terminal'],
    [classifySupersede({}, 1, 0) as DisconnectReason, 'superseded by a newer session with the same key (unknown), terminal'],
    [classifyUpgrade({ status: 403 }, 1, 0), 'rejected (unauthenticated) by upgrade HTTP 403, terminal'],
    [
      classifyUpgrade({ status: 429, retryAfter: '2', body: JSON.stringify({ error: { code: 'too_many_requests', message: 'slow down' } }) }, 1, 0),
      'rejected (rate-limited) by upgrade HTTP 429 too_many_requests: slow down, retry after 2000 ms, will reconnect',
    ],
    [classifyClose({ code: 1008, reason: 'nope' }, 1, 0), 'rejected (unauthorized) by close 1008: nope, terminal'],
    [classifyJoinError({ reason: 'unauthorized' }, 1, 0), 'rejected (unauthorized) by join error unauthorized, terminal'],
    [classifyClose({ code: 1001, reason: '' }, 1, 0), 'closed 1001 (going away), will reconnect'],
    [classifyClose({ code: 1000, reason: 'bye' }, 1, 0), 'closed 1000 (normal closure) "bye", will reconnect'],
    [classifyClose({ code: 1006, reason: '' }, 1, 0), 'dropped: abnormal closure (1006): no close frame, will reconnect'],
    [heartbeatTimeout(1, 0), 'timed out waiting for the heartbeat reply, will reconnect'],
    [timedOutReason('join', 1, 0) as DisconnectReason, 'timed out waiting for the control channel join reply, will reconnect'],
    [timedOutReason('connect', 1, 0) as DisconnectReason, 'timed out waiting for the transport to open, will reconnect'],
    [suppressedReason('rapid-disconnects', 10, normalLoss(1), 0) as DisconnectReason, 'gave up after 10 attempts (rapid-disconnects, the last closed 1000 (normal closure)), terminal'],
    [
      suppressedReason('rapid-disconnects', 10, classifyClose({ code: 1011, reason: 'boom' }, 1, 0), 0, true) as DisconnectReason,
      'suspended after 10 attempts (rapid-disconnects, the last closed 1011 (internal error) "boom"): one attempt per cooldown, will reconnect',
    ],
    [
      suppressedReason('max-attempts', 4, classifyUpgrade({ status: 503, retryAfter: '2' }, 1, 0), 0) as DisconnectReason,
      'gave up after 4 attempts (max-attempts, the last rejected (unavailable) by upgrade HTTP 503, retry after 2000 ms), terminal',
    ],
    [{ kind: 'suppressed', cause: 'rapid-disconnects', attempts: 10, retryable: true, generation: 1, at: 0 }, 'suspended after 10 attempts (rapid-disconnects): one attempt per cooldown, will reconnect'],
    [classifyClose({ code: 999, reason: '' }, 1, 0), 'dropped: close code 999 is outside every range of the close code table: no peer may send it (RFC 6455 section 7.4.2), read as a drop, will reconnect'],
    [classifyUpgrade({ status: 404 }, 1, 0), 'other: upgrade refused with HTTP 404: no WebSocket endpoint at this path; check the url (it ends at the socket mount, e.g. /socket), will reconnect'],
  ]
  for (const [reason, text] of cases) it(text, () => expect(describeReason(reason)).toBe(text))
})

describe('reason fields', () => {
  it('a join error keeps the message and a retry_after in seconds (a number, or numeric text as every source reads it)', () => {
    expect(classifyJoinError({ reason: 'rate_limited', message: 'later', retry_after: 3 }, 2, 7)).toEqual({
      kind: 'rejected',
      retryable: true,
      cause: 'rate-limited',
      phase: 'join',
      status: null,
      errorCode: 'rate_limited',
      message: 'later',
      requestId: null,
      retryAfterMs: 3000,
      generation: 2,
      at: 7,
    })
    expect(classifyJoinError({ reason: 'unauthorized', retry_after: '3', message: 5 }, 1, 0)).toMatchObject({ retryAfterMs: 3000, message: null })
    expect(classifyJoinError({ reason: 'unauthorized', retry_after: [3] }, 1, 0)).toMatchObject({ retryAfterMs: null })
    expect(classifyJoinError({ reason: 7 }, 1, 0)).toMatchObject({ kind: 'other', detail: expect.stringContaining('(no reason)') })
    expect(classifyJoinError('text', 1, 0)).toMatchObject({ kind: 'other' })
  })

  it('control channel losses and channel closes say which, with the payload when there is one', () => {
    expect(classifyControlChannelLoss('phx_error', {}, 1, 0)).toMatchObject({ kind: 'dropped', source: 'channel', detail: 'the control channel crashed (phx_error)', retryable: true })
    expect(classifyControlChannelLoss('phx_close', { reason: 'x' }, 1, 0)).toMatchObject({ detail: 'the server closed the control channel (phx_close): {"reason":"x"}' })
    expect(classifyControlChannelLoss('phx_close', null, 1, 0)).toMatchObject({ detail: 'the server closed the control channel (phx_close)' })
    expect(classifyChannelClose({}, 1, 0)).toMatchObject({ detail: 'the server closed the channel (phx_close)' })
    expect(classifyChannelClose({ why: 1 }, 1, 0)).toMatchObject({ detail: 'the server closed the channel (phx_close): {"why":1}' })
    expect(classifyControlChannelLoss('phx_error', { big: 10n }, 1, 0)).toMatchObject({ detail: 'the control channel crashed (phx_error): (a payload JSON.stringify cannot write: Do not know how to serialize a BigInt)' })
  })

  it('a supersede of a payload that is no object, or of an object without a prototype, is superseded and terminal, and nothing throws', () => {
    for (const payload of [null, undefined, 'supersede', 7, [], Object.create(null), { reason: { toString: () => 'x' } }]) {
      expect(classifySupersede(payload, 1, 0)).toMatchObject({ kind: 'superseded', retryable: false, cause: 'unknown', message: null })
    }
    expect(classifySupersede({ reason: 'session.already_connected', message: 'newer', target_socket_id: 's-2', correlation_id: 'c-9' }, 1, 0)).toMatchObject({
      cause: 'session.already_connected',
      message: 'newer',
      targetSocketId: 's-2',
      correlationId: 'c-9',
    })
  })

  it('supersede retry_after: seconds as a number or numeric string; negative, malformed or missing is null', () => {
    expect(classifySupersede({ retry_after: 1.5 }, 1, 0)).toMatchObject({ retryAfterMs: 1500 })
    expect(classifySupersede({ retry_after: ' 4 ' }, 1, 0)).toMatchObject({ retryAfterMs: 4000 })
    expect(classifySupersede({ retry_after: -1 }, 1, 0)).toMatchObject({ retryAfterMs: null })
    expect(classifySupersede({ retry_after: 'x4' }, 1, 0)).toMatchObject({ retryAfterMs: null })
    expect(classifySupersede({ retry_after: '4x' }, 1, 0)).toMatchObject({ retryAfterMs: null })
    expect(classifySupersede({ retry_after: Infinity }, 1, 0)).toMatchObject({ retryAfterMs: null })
    expect(classifySupersede([1], 1, 0)).toMatchObject({ raw: { value: [1] } })
    // A value that only reads as digits once made a string is not one.
    expect(classifySupersede({ retry_after: ['5'] }, 1, 0)).toMatchObject({ retryAfterMs: null })
    expect(classifySupersede({ retry_after: '5' }, 1, 0)).toMatchObject({ retryAfterMs: 5000 })
  })

  it('a wait too long for a timer (1e308 seconds, 400 nines) is reported as MAX_RETRY_AFTER_MS, never Infinity; a negative join retry_after is null; every such reason passes the schema', () => {
    const nines = '9'.repeat(400)
    const reasons: DisconnectReason[] = [
      classifySupersede({ retry_after: 1e308 }, 1, 0),
      classifySupersede({ retry_after: nines }, 1, 0),
      classifyJoinError({ reason: 'rate_limited', retry_after: 1e308 }, 1, 0),
      classifyUpgrade({ status: 429, retryAfter: nines, body: '' }, 1, 0),
      classifyUpgrade({ status: 503, retryAfter: 'Fri, 31 Dec 9999 23:59:59 GMT', date: 'Thu, 01 Jan 1970 00:00:00 GMT', body: '' }, 1, 0),
    ]
    for (const reason of reasons) {
      expect(reason).toMatchObject({ retryAfterMs: MAX_RETRY_AFTER_MS })
      expect(DisconnectReasonSchema.safeParse(reason).success).toBe(true)
      expect(JSON.parse(JSON.stringify(reason)).retryAfterMs).toBe(MAX_RETRY_AFTER_MS)
    }
    expect(MAX_RETRY_AFTER_MS).toBe(2 ** 31 - 1)
    const negative = classifyJoinError({ reason: 'rate_limited', retry_after: -1 }, 1, 0)
    expect(negative).toMatchObject({ kind: 'rejected', retryAfterMs: null })
    expect(DisconnectReasonSchema.safeParse(negative).success).toBe(true)
    // Fractions of a millisecond round up (a wait never shorter than asked), from whole microseconds.
    expect(classifyJoinError({ reason: 'rate_limited', retry_after: 0.0004 }, 1, 0)).toMatchObject({ retryAfterMs: 1 })
    expect(classifyJoinError({ reason: 'rate_limited', retry_after: 1.1 }, 1, 0)).toMatchObject({ retryAfterMs: 1100 })
    // A join error's retry_after is read as every source's: numeric text too.
    expect(classifyJoinError({ reason: 'rate_limited', retry_after: '30' }, 1, 0)).toMatchObject({ retryAfterMs: 30_000 })
    expect(classifyJoinError({ reason: 'rate_limited', retry_after: 'soon' }, 1, 0)).toMatchObject({ retryAfterMs: null })
  })

  it('a supersede whose fields have the wrong types is still a supersede, with none of them kept', () => {
    expect(classifySupersede({ reason: 42, message: 7, target_socket_id: {}, correlation_id: [] }, 3, 9)).toEqual({
      kind: 'superseded',
      retryable: false,
      cause: 'unknown',
      message: null,
      retryAfterMs: null,
      targetSocketId: null,
      correlationId: null,
      raw: { reason: 42, message: 7, target_socket_id: {}, correlation_id: [] },
      generation: 3,
      at: 9,
    })
  })

  it('a refused upgrade: a JSON body that is not the error shape is kept as text; an error with a message and no code keeps its message', () => {
    expect(classifyUpgrade({ status: 403, body: '[1,2]' }, 1, 0)).toMatchObject({ errorCode: null, message: '[1,2]', requestId: null })
    expect(classifyUpgrade({ status: 403, body: JSON.stringify({ error: { message: 'key revoked' } }) }, 1, 0)).toMatchObject({ errorCode: null, message: 'key revoked' })
    expect(parseRetryAfter('a1.5', 0)).toBeNull()
  })

  it('a refused upgrade keeps the error body fields, or the body text when it has none', () => {
    expect(classifyUpgrade({ status: 409, body: JSON.stringify({ error: { code: 'connection_conflict', request_id: 'r' } }) }, 1, 0)).toMatchObject({
      errorCode: 'connection_conflict',
      message: null,
      requestId: 'r',
    })
    expect(classifyUpgrade({ status: 403, body: JSON.stringify({ other: true }) }, 1, 0)).toMatchObject({ errorCode: null, message: '{"other":true}' })
    // Kept to 200 characters, never cut inside a token (a key a server echoed stays whole or out).
    expect(classifyUpgrade({ status: 403, body: 'bad key '.repeat(40) }, 1, 0)).toMatchObject({ message: 'bad key '.repeat(25) })
    expect(classifyUpgrade({ status: 403, body: `${'y'.repeat(190)} sk-live-0123456789abcdef` }, 1, 0)).toMatchObject({ message: `${'y'.repeat(190)} ` })
    expect(classifyUpgrade({ status: 403, body: 'x'.repeat(500) }, 1, 0)).toMatchObject({ message: null })
    expect(classifyUpgrade({ status: 404 }, 1, 0)).toMatchObject({ kind: 'other', detail: expect.stringContaining('no WebSocket endpoint at this path') })
    expect(classifyUpgrade({ status: 418 }, 1, 0)).toMatchObject({ kind: 'other', detail: expect.stringContaining('does not list') })
  })
})

describe('policy checks', () => {
  it('accept 0 and 2^31-1 milliseconds and refuse the rest', () => {
    expect(() => assertMs('x', 0)).not.toThrow()
    expect(() => assertMs('x', 2 ** 31 - 1)).not.toThrow()
    for (const bad of [-1, 2 ** 31, Number.NaN, Infinity, '5', null]) expect(() => assertMs('x', bad), String(bad)).toThrow(/x must be/)
  })
  it('check every field of the connection and channel policies', () => {
    expect(() => validateConnectionPolicy({ ...DEFAULT_CONNECTION_POLICY, joinTimeoutMs: -5 })).toThrow(/connection.joinTimeoutMs/)
    expect(() => validateChannelPolicy({ ...DEFAULT_CHANNEL_POLICY, rejoinMaxDelayMs: Number.NaN })).toThrow(/channel.rejoinMaxDelayMs/)
    expect(validateConnectionPolicy(DEFAULT_CONNECTION_POLICY)).toBe(DEFAULT_CONNECTION_POLICY)
  })
  it('check maxAttempts and the retry-after cap', () => {
    expect(() => validateReconnectPolicy({ ...DEFAULT_RECONNECT_POLICY, maxAttempts: -1 })).toThrow(/maxAttempts/)
    expect(() => validateReconnectPolicy({ ...DEFAULT_RECONNECT_POLICY, maxAttempts: 1.5 })).toThrow(/maxAttempts/)
    expect(() => validateReconnectPolicy({ ...DEFAULT_RECONNECT_POLICY, maxAttempts: 0 })).not.toThrow()
    expect(() => validateReconnectPolicy({ ...DEFAULT_RECONNECT_POLICY, maxRetryAfterMs: -1 })).toThrow(/maxRetryAfterMs/)
  })
})

describe('server text in reasons is bounded', () => {
  it("a supersede's text fields and a join error's message are cut to REASON_TEXT_LIMIT; a field that is one long token is null, not half of it", () => {
    const r = classifySupersede({ reason: 'session.already_connected', message: 'word '.repeat(1000), correlation_id: 'c'.repeat(5000), target_socket_id: '' }, 1, 0) as { cause: string; message: string; correlationId: string | null; targetSocketId: string | null }
    expect(r.cause).toBe('session.already_connected')
    expect(r.message.length).toBeLessThanOrEqual(REASON_TEXT_LIMIT)
    expect(r.message.length).toBeGreaterThan(REASON_TEXT_LIMIT - 10)
    expect(r.correlationId).toBeNull()
    expect(r.targetSocketId).toBe('')
    expect((classifySupersede({ reason: 'x'.repeat(5000) }, 1, 0) as { cause: string }).cause).toBe('unknown')
    const join = classifyJoinError({ reason: 'rate_limited', message: 'slow down '.repeat(1000) }, 1, 0) as { message: string }
    expect(join.message.length).toBeLessThanOrEqual(REASON_TEXT_LIMIT)
  })

  it('a binary supersede payload is kept as base64 of its first 150 bytes and its length; a view of a buffer as the bytes it views', () => {
    const buffer = new Uint8Array([1, 2, 3, 4, 5, 6]).buffer
    expect(classifySupersede(buffer, 1, 0)).toMatchObject({ raw: { binary: Buffer.from([1, 2, 3, 4, 5, 6]).toString('base64'), bytes: 6 } })
    expect(classifySupersede(new Uint8Array(buffer, 2, 3), 1, 0)).toMatchObject({ raw: { binary: Buffer.from([3, 4, 5]).toString('base64'), bytes: 3 } })
    expect(classifySupersede(new ArrayBuffer(1000), 1, 0)).toMatchObject({ raw: { binary: Buffer.alloc(150).toString('base64'), bytes: 1000 } })
  })

  it('a control channel phx_close nested too deep for JSON.stringify says so in its detail', () => {
    let deep: unknown = {}
    for (let i = 0; i < 20_000; i++) deep = { d: deep }
    const { detail } = classifyControlChannelLoss('phx_close', deep, 1, 0) as { detail: string }
    expect(detail).toMatch(/^the server closed the control channel \(phx_close\): \(a payload JSON.stringify cannot write: Maximum call stack size exceeded\)$/)
  })
})
