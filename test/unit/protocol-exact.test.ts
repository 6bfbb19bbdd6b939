/**
 * The frame codec to the character: each problem's kind, detail and raw preview, the size limits
 * at their boundaries, every binary header and field check, and the reserved-event test. A
 * changed bound or message shows here as a wrong value, not as a plausible one.
 */
import { runInNewContext } from 'node:vm'
import { describe, expect, it } from 'vitest'
import {
  BINARY_KINDS,
  controlTopic,
  decodeBinaryFromClient,
  decodeBinaryFromServer,
  decodeTextFrame,
  encodeBinaryToClient,
  encodeBinaryToServer,
  isReservedEvent,
  parseControlSignal,
  linkParamIn,
  notPlainObject,
} from '../../src/protocol.js'

const bytes = (...values: number[]) => new Uint8Array(values)
const text = (s: string) => Array.from(new TextEncoder().encode(s))

describe('isReservedEvent and controlTopic', () => {
  it('reserves phx_* and chan_reply_* only, by their exact prefixes', () => {
    for (const event of ['phx_join', 'phx_', 'chan_reply_7', 'chan_reply_']) expect(isReservedEvent(event), event).toBe(true)
    for (const event of ['phx', 'pxh_join', 'xphx_join', 'chan_reply', 'chan_replies', 'c', 'p', '', 'news', 'my_phx_event', 'reply_chan_reply_']) {
      expect(isReservedEvent(event), event).toBe(false)
    }
  })

  it('names the control channel of an agent', () => {
    expect(controlTopic('agent-7')).toBe('agent_control:agent-7')
  })
})

describe('decodeTextFrame: each problem exactly', () => {
  it('too-large: refused above the limit, accepted at it; the raw preview is the first 200 characters and an ellipsis', () => {
    const frame = JSON.stringify([null, '1', 'room:1', 'e', { pad: 'x'.repeat(300) }])
    expect(decodeTextFrame(frame, frame.length).ok).toBe(true)
    const result = decodeTextFrame(frame, frame.length - 1)
    expect(result).toEqual({ ok: false, problem: { kind: 'too-large', detail: `text frame of ${frame.length} bytes exceeds ${frame.length - 1}`, raw: `${frame.slice(0, 200)}…` } })
  })

  it('too-large counts the bytes of UTF-8 the frame came as, not its characters: a euro sign is 3, an emoji (a surrogate pair) 4, a lone surrogate 3', () => {
    const frame = (pad: string) => JSON.stringify([null, '1', 'room:1', 'e', { pad }])
    const euros = frame('€'.repeat(2000))
    const bytes = new TextEncoder().encode(euros).length
    expect([euros.length, bytes]).toEqual([euros.length, euros.length + 4000])
    expect(decodeTextFrame(euros, bytes).ok).toBe(true)
    expect(decodeTextFrame(euros, bytes - 1)).toMatchObject({ ok: false, problem: { kind: 'too-large', detail: `text frame of ${bytes} bytes exceeds ${bytes - 1}` } })
    // Within the UTF-16 length's limit, past the bytes': refused (it was delivered when characters were counted).
    expect(decodeTextFrame(euros, euros.length + 10)).toMatchObject({ ok: false, problem: { kind: 'too-large' } })
    const emoji = frame('😀'.repeat(10))
    expect(decodeTextFrame(emoji, new TextEncoder().encode(emoji).length).ok).toBe(true)
    expect(decodeTextFrame(emoji, new TextEncoder().encode(emoji).length - 1).ok).toBe(false)
    // A lone surrogate (a server's broken text, read by a browser as U+FFFD): 3 bytes.
    const lone = `["x","1","t","e",{"p":"${String.fromCharCode(0xd800)}"}]`
    expect(decodeTextFrame(lone, lone.length)).toMatchObject({ ok: false, problem: { kind: 'too-large', detail: `text frame of ${lone.length + 2} bytes exceeds ${lone.length}` } })
    expect(decodeTextFrame(lone, lone.length + 2)).not.toMatchObject({ problem: { kind: 'too-large' } })
  })

  it('a raw preview of exactly 200 characters is kept whole; of 201, cut with an ellipsis', () => {
    const exactly = `[${'1'.repeat(199)}`
    expect(decodeTextFrame(exactly)).toMatchObject({ ok: false, problem: { raw: exactly } })
    const longer = `[${'1'.repeat(200)}`
    expect(decodeTextFrame(longer)).toMatchObject({ ok: false, problem: { raw: `${longer.slice(0, 200)}…` } })
  })

  it('not-json: where the text ends or the position of the error, and none of the text V8 quotes', () => {
    const detail = (t: string) => (decodeTextFrame(t) as { ok: false; problem: { kind: string; detail: string } }).problem
    expect(detail('{"secret-key-0123": nope}')).toEqual({ kind: 'not-json', detail: 'not JSON: a syntax error', raw: '{"secret-key-0123": nope}' })
    expect(detail('[1,')).toMatchObject({ kind: 'not-json', detail: 'not JSON: the text ends inside a value' })
    expect(detail('[1 2]')).toMatchObject({ kind: 'not-json', detail: 'not JSON: a syntax error at position 3' })
    expect(detail('["abc')).toMatchObject({ kind: 'not-json', detail: 'not JSON: a syntax error at position 5' })
    expect(detail('{"a":1,}')).toMatchObject({ kind: 'not-json', detail: 'not JSON: a syntax error at position 7' })
  })

  it('not-array, wrong-arity and bad-reply say what the frame should be', () => {
    expect(decodeTextFrame('{"a":1}')).toEqual({ ok: false, problem: { kind: 'not-array', detail: 'a V2 frame is a JSON array', raw: '{"a":1}' } })
    expect(decodeTextFrame('[1,2,3]')).toEqual({ ok: false, problem: { kind: 'wrong-arity', detail: 'a V2 frame has 5 elements, this one has 3', raw: '[1,2,3]' } })
    const reply = '[null,"1","t","phx_reply",[]]'
    expect(decodeTextFrame(reply)).toEqual({ ok: false, problem: { kind: 'bad-reply', detail: 'a phx_reply payload is {"status": string, "response": ...}', raw: reply } })
    for (const payload of ['null', '"ok"', '7', '{}', '{"status":1}']) {
      expect(decodeTextFrame(`[null,"1","t","phx_reply",${payload}]`), payload).toMatchObject({ ok: false, problem: { kind: 'bad-reply' } })
    }
    expect(decodeTextFrame('[null,"1","t","phx_reply",{"status":"ok"}]').ok).toBe(true)
  })

  it('wrong-types names the element and what it must be', () => {
    const cases: Array<[string, string]> = [
      ['[1,"1","t","e",{}]', 'element 0 must be join_ref (string or null)'],
      ['[null,2,"t","e",{}]', 'element 1 must be ref (string or null)'],
      ['[null,null,3,"e",{}]', 'element 2 must be topic (string)'],
      ['[null,null,"t",4,{}]', 'element 3 must be event (string)'],
    ]
    for (const [frame, detail] of cases) {
      expect(decodeTextFrame(frame), frame).toEqual({ ok: false, problem: { kind: 'wrong-types', detail: `${detail} (expected [join_ref, ref, topic, event, payload])`, raw: frame } })
    }
  })
})

describe('binary frames from a server: every header and field check', () => {
  const push = encodeBinaryToClient({ kind: 'push', join_ref: '1', topic: 'room:1', event: 'e', payload: bytes(9, 8) })
  const reply = encodeBinaryToClient({ kind: 'reply', join_ref: '1', ref: '22', topic: 'room:1', status: 'ok', payload: bytes(7) })
  const broadcast = encodeBinaryToClient({ kind: 'broadcast', topic: 'room:1', event: 'news', payload: bytes(6, 5, 4) })

  it('encodes the header sizes and fields of each kind as the V2 serializer does', () => {
    expect(Array.from(push)).toEqual([0, 1, 6, 1, ...text('1'), ...text('room:1'), ...text('e'), 9, 8])
    expect(Array.from(reply)).toEqual([1, 1, 2, 6, 2, ...text('1'), ...text('22'), ...text('room:1'), ...text('ok'), 7])
    expect(Array.from(broadcast)).toEqual([2, 6, 4, ...text('room:1'), ...text('news'), 6, 5, 4])
  })

  it('decodes each kind with its payload starting after the last field', () => {
    const p = decodeBinaryFromServer(push)
    expect(p).toMatchObject({ ok: true, frame: { join_ref: '1', ref: null, topic: 'room:1', event: 'e' } })
    expect(Array.from(new Uint8Array((p as { frame: { payload: ArrayBuffer } }).frame.payload))).toEqual([9, 8])
    const r = decodeBinaryFromServer(reply) as { ok: true; frame: { join_ref: string; ref: string; topic: string; event: string; payload: { status: string; response: ArrayBuffer } } }
    expect(r.frame).toMatchObject({ join_ref: '1', ref: '22', topic: 'room:1', event: 'phx_reply', payload: { status: 'ok' } })
    expect(Array.from(new Uint8Array(r.frame.payload.response))).toEqual([7])
    const b = decodeBinaryFromServer(broadcast)
    expect(b).toMatchObject({ ok: true, frame: { join_ref: null, ref: null, topic: 'room:1', event: 'news' } })
    expect(Array.from(new Uint8Array((b as { frame: { payload: ArrayBuffer } }).frame.payload))).toEqual([6, 5, 4])
  })

  it('refuses above the size limit, accepts at it; the raw preview is hex of the first 64 bytes', () => {
    expect(decodeBinaryFromServer(push, push.length).ok).toBe(true)
    const big = new Uint8Array(100).fill(0xab)
    big[0] = 0
    expect(decodeBinaryFromServer(big, 99)).toEqual({ ok: false, problem: { kind: 'too-large', detail: 'binary frame of 100 bytes exceeds 99', raw: `00${'ab'.repeat(63)}` } })
    expect(decodeBinaryFromServer(bytes(1, 2, 3), 2)).toEqual({ ok: false, problem: { kind: 'too-large', detail: 'binary frame of 3 bytes exceeds 2', raw: '010203' } })
  })

  it('a header shorter than its kind needs, a field past the end, a field that is not UTF-8, an unknown kind', () => {
    expect(decodeBinaryFromServer(bytes(0, 1, 1))).toEqual({ ok: false, problem: { kind: 'bad-binary', detail: 'push header needs 4 bytes', raw: '000101' } })
    expect(decodeBinaryFromServer(bytes(0, 0, 0, 0)).ok).toBe(true) // a header of exactly 4 bytes, empty fields
    expect(decodeBinaryFromServer(bytes(1, 1, 1, 1))).toEqual({ ok: false, problem: { kind: 'bad-binary', detail: 'reply header needs 5 bytes', raw: '01010101' } })
    expect(decodeBinaryFromServer(bytes(1, 0, 0, 0, 0)).ok).toBe(true)
    expect(decodeBinaryFromServer(bytes(2, 1))).toEqual({ ok: false, problem: { kind: 'bad-binary', detail: 'broadcast header needs 3 bytes', raw: '0201' } })
    expect(decodeBinaryFromServer(bytes(2, 0, 0)).ok).toBe(true)
    expect(decodeBinaryFromServer(bytes(2, 1, 2, 97, 98))).toEqual({ ok: false, problem: { kind: 'bad-binary', detail: 'field of 2 bytes at offset 4 runs past the frame end (5)', raw: '0201026162' } })
    expect(decodeBinaryFromServer(bytes(2, 1, 1, 97, 98)).ok).toBe(true) // fields that end exactly at the frame end
    expect(decodeBinaryFromServer(bytes(0, 1, 1, 1, 0xff, 97, 98))).toEqual({ ok: false, problem: { kind: 'bad-binary', detail: 'field at offset 4 is not UTF-8', raw: '010101ff6162'.replace(/^/, '00').slice(0, 14) } })
    expect(decodeBinaryFromServer(bytes(1, 1, 1, 1, 9, 97))).toMatchObject({ ok: false, problem: { kind: 'bad-binary', detail: 'field of 1 bytes at offset 6 runs past the frame end (6)' } })
    expect(decodeBinaryFromServer(bytes(7, 0))).toEqual({ ok: false, problem: { kind: 'bad-binary', detail: 'unknown binary kind 7 (expected 0 push, 1 reply, 2 broadcast)', raw: '0700' } })
    expect(decodeBinaryFromServer(bytes())).toEqual({ ok: false, problem: { kind: 'bad-binary', detail: 'unknown binary kind undefined (expected 0 push, 1 reply, 2 broadcast)', raw: '' } })
  })
})

describe('binary frames from a client', () => {
  it('encodes null refs as empty fields, which a server reads as empty strings (as Phoenix\'s V2 serializer does, and echoes "")', () => {
    const frame = encodeBinaryToServer({ join_ref: null, ref: null, topic: 't', event: 'e', payload: bytes(1) })
    expect(Array.from(frame)).toEqual([0, 0, 0, 1, 1, ...text('t'), ...text('e'), 1])
    expect(decodeBinaryFromClient(frame)).toMatchObject({ ok: true, frame: { join_ref: '', ref: '', topic: 't', event: 'e' } })
    const full = encodeBinaryToServer({ join_ref: '3', ref: '4', topic: 'room', event: 'go', payload: bytes(5, 6) })
    const decoded = decodeBinaryFromClient(full) as { ok: true; frame: { join_ref: string; ref: string; payload: ArrayBuffer } }
    expect(decoded.frame).toMatchObject({ join_ref: '3', ref: '4', topic: 'room', event: 'go' })
    expect(Array.from(new Uint8Array(decoded.frame.payload))).toEqual([5, 6])
  })

  it('refuses other kinds, a short header, a field past the end, above the limit (accepts at it)', () => {
    expect(decodeBinaryFromClient(bytes(BINARY_KINDS.reply, 0, 0, 0, 0))).toEqual({ ok: false, problem: { kind: 'bad-binary', detail: 'a client sends only binary kind 0 (push), got 1', raw: '0100000000' } })
    expect(decodeBinaryFromClient(bytes(0, 0, 0, 0))).toEqual({ ok: false, problem: { kind: 'bad-binary', detail: 'push header needs 5 bytes', raw: '00000000' } })
    expect(decodeBinaryFromClient(bytes(0, 0, 0, 0, 0)).ok).toBe(true)
    expect(decodeBinaryFromClient(bytes(0, 0, 0, 3, 0, 97))).toEqual({ ok: false, problem: { kind: 'bad-binary', detail: 'field of 3 bytes at offset 5 runs past the frame end (6)', raw: '000000030061' } })
    const ok = bytes(0, 0, 0, 1, 1, 97, 98)
    expect(decodeBinaryFromClient(ok, ok.length).ok).toBe(true)
    expect(decodeBinaryFromClient(ok, ok.length - 1)).toEqual({ ok: false, problem: { kind: 'too-large', detail: 'binary frame of 7 bytes exceeds 6', raw: '00000001016162' } })
  })

  it('a field of 255 bytes is encoded; of 256, refused with the start of the field and its size', () => {
    expect(() => encodeBinaryToServer({ join_ref: null, ref: null, topic: 't'.repeat(255), event: 'e', payload: bytes() })).not.toThrow()
    expect(() => encodeBinaryToServer({ join_ref: null, ref: null, topic: 'x'.repeat(256), event: 'e', payload: bytes() })).toThrow(
      new RangeError(`binary frame field "${'x'.repeat(20)}…" is 256 bytes; the limit is 255`),
    )
  })
})

describe('parseControlSignal', () => {
  it('names each problem by its field (the payload is flat: a path of one element), the payload itself as (payload)', () => {
    expect(parseControlSignal('nope')).toEqual({ ok: false, issues: [expect.stringMatching(/^\(payload\): /)] })
    const nested = parseControlSignal({ mode: 'stop', scope: 'agent', agent_id: 'a', room_id: { deep: 1 } })
    expect(nested).toEqual({ ok: false, issues: [expect.stringMatching(/^room_id: /)] })
    const many = parseControlSignal({ mode: 'fly', scope: 'agent' }) as { ok: false; issues: string[] }
    expect(many.issues.map((i) => i.split(':')[0])).toEqual(['mode', 'agent_id'])
  })
})

describe('notPlainObject: what JSON would send as something other than the object the caller holds', () => {
  it('passes a plain object, one with a null prototype and one from another realm', () => {
    expect(notPlainObject({ a: 1 })).toBeNull()
    expect(notPlainObject(Object.create(null))).toBeNull()
    expect(notPlainObject(runInNewContext('({ a: 1 })'))).toBeNull()
  })

  it('names every other value', () => {
    expect(notPlainObject(null)).toBe('null')
    expect(notPlainObject('text')).toBe('a string')
    expect(notPlainObject(7)).toBe('a number')
    expect(notPlainObject(undefined)).toBe('a undefined')
    expect(notPlainObject([1])).toBe('an array')
    expect(notPlainObject(new Map())).toBe('a Map')
    expect(notPlainObject(new Uint8Array(2))).toBe('a Uint8Array')
    expect(notPlainObject(new Date(0))).toBe('a Date')
    class Task {}
    expect(notPlainObject(new Task())).toBe('a Task')
  })

  it('names a toJSON method on a plain object (JSON sends what it returns)', () => {
    const withToJson = { toJSON: () => 'other' }
    expect(notPlainObject(withToJson)).toBe('an object with a toJSON method (JSON would send what it returns)')
    const bare = Object.assign(Object.create(null) as object, { toJSON: () => 1 })
    expect(notPlainObject(bare)).toBe('an object with a toJSON method (JSON would send what it returns)')
    // A toJSON that is not a function is only data.
    expect(notPlainObject({ toJSON: 'data' })).toBeNull()
  })

  it('names a prototype whose constructor has no name, or none at all', () => {
    const anonymous = Object.create({ constructor: { name: '' } }) as object
    expect(notPlainObject(anonymous)).toBe('an object with a prototype of its own')
    const noConstructor = Object.create(Object.create(Object.prototype, { constructor: { value: undefined } })) as object
    expect(notPlainObject(noConstructor)).toBe('an object with a prototype of its own')
    const numbered = Object.create({ constructor: { name: 42 } }) as object
    expect(notPlainObject(numbered)).toBe('an object with a prototype of its own')
  })

  it('never throws: a value that cannot be read says why', () => {
    const { proxy, revoke } = Proxy.revocable({}, {})
    revoke()
    expect(notPlainObject(proxy)).toMatch(/^a value that cannot be read \(.*revoked.*\)$/)
    const throwsText = new Proxy({}, {
      getPrototypeOf() {
        throw 'no prototype today'
      },
    })
    expect(notPlainObject(throwsText)).toBe('a value that cannot be read (no prototype today)')
  })
})

describe('linkParamIn', () => {
  it('passes params that name none of the link\'s own, and names the first of them that a host set', () => {
    expect(linkParamIn({})).toBeNull()
    expect(linkParamIn({ room: 'r1', token: 't' })).toBeNull()
    const why = (name: string) =>
      `params must not set ${JSON.stringify(name)}: the link sets agent_id, api_key, on_conflict and vsn itself (use the agentId, apiKey and onConflict options)`
    for (const name of ['agent_id', 'api_key', 'on_conflict', 'vsn']) expect(linkParamIn({ room: 'r1', [name]: 'x' })).toBe(why(name))
    // Set to undefined is still set: the host's params would carry it.
    expect(linkParamIn({ api_key: undefined })).toBe(why('api_key'))
    // Inherited keys are not the host's params.
    expect(linkParamIn(Object.create({ agent_id: 'a' }) as Record<string, unknown>)).toBeNull()
  })
})
