/** V2 frames: every inbound frame decodes to a frame or a typed problem, never a throw. */
import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import {
  decodeBinaryFromClient,
  decodeBinaryFromServer,
  decodeTextFrame,
  decodeTextFrameFromClient,
  encodeBinaryToClient,
  encodeBinaryToServer,
  encodeTextFrame,
  hasLoneSurrogate,
  isWellFormedText,
  parseControlSignal,
  TextFrame,
} from '../../src/protocol.js'

describe('text frames', () => {
  it('decode a V2 frame', () => {
    const r = decodeTextFrame('["1","2","room:1","phx_reply",{"status":"ok","response":{}}]')
    expect(r).toEqual({ ok: true, frame: { join_ref: '1', ref: '2', topic: 'room:1', event: 'phx_reply', payload: { status: 'ok', response: {} } } })
  })
  it('type every bad frame', () => {
    const cases: Array<[string, string]> = [
      ['not json', 'not-json'],
      ['{"a":1}', 'not-array'],
      ['[1,2,3]', 'wrong-arity'],
      ['[null,null,"t","e",{},6]', 'wrong-arity'],
      ['[1,null,"t","e",{}]', 'wrong-types'],
      ['[null,5,"t","e",{}]', 'wrong-types'],
      ['[null,{},"t","e",{}]', 'wrong-types'],
      ['[null,null,7,"e",{}]', 'wrong-types'],
      ['[null,null,"t",{},{}]', 'wrong-types'],
      ['[null,"1","t","phx_reply",{"response":{}}]', 'bad-reply'],
    ]
    for (const [text, kind] of cases) {
      const r = decodeTextFrame(text)
      expect(r.ok, text).toBe(false)
      if (!r.ok) expect(r.problem.kind, text).toBe(kind)
    }
    expect(decodeTextFrame('x'.repeat(50), 10)).toMatchObject({ ok: false, problem: { kind: 'too-large' } })
    // A server reads a client's frame as Phoenix does (its V2 serializer matches [j, r, t, e, p | _]):
    // a phx_reply of any shape (Phoenix routes it as any event), an array longer than 5 (the rest
    // ignored), a join_ref or ref that is any JSON scalar, kept as it came so a reply echoes it.
    // Objects and arrays as refs, which Phoenix echoes too, stay refused (not modelled).
    const served: Record<string, object> = {
      '[null,null,"t","e",{},6]': { join_ref: null, ref: null, topic: 't', event: 'e', payload: {} },
      '[1,null,"t","e",{}]': { join_ref: 1, ref: null, topic: 't', event: 'e', payload: {} },
      '[null,5,"t","e",{}]': { join_ref: null, ref: 5, topic: 't', event: 'e', payload: {} },
      '[null,"1","t","phx_reply",{"response":{}}]': { join_ref: null, ref: '1', topic: 't', event: 'phx_reply', payload: { response: {} } },
    }
    for (const [text, kind] of cases) {
      const r = decodeTextFrameFromClient(text)
      if (served[text]) expect(r, text).toEqual({ ok: true, frame: served[text] })
      else expect(r, text).toMatchObject({ ok: false, problem: { kind } })
    }
    expect(decodeTextFrameFromClient('[true,-2.5,"t","e",{},[1],{"x":1}]')).toEqual({ ok: true, frame: { join_ref: true, ref: -2.5, topic: 't', event: 'e', payload: {} } })
    expect(decodeTextFrameFromClient('[[1],"1","t","e",{}]')).toEqual({
      ok: false,
      problem: { kind: 'wrong-types', detail: 'element 0 must be join_ref (a string, number, boolean or null) (expected [join_ref, ref, topic, event, payload])', raw: '[[1],"1","t","e",{}]' },
    })
    expect(decodeTextFrameFromClient('[null,null,"t","e"]')).toMatchObject({ ok: false, problem: { kind: 'wrong-arity', detail: 'a V2 frame has 5 elements, this one has 4' } })
    // Echoed as it came.
    const numeric = decodeTextFrameFromClient('[7,8,"t","e",{}]')
    expect(numeric.ok && encodeTextFrame(numeric.frame)).toBe('[7,8,"t","e",{}]')
    expect(decodeTextFrameFromClient('["1","7","room:none","phx_reply",{}]')).toMatchObject({ ok: true, frame: { event: 'phx_reply', payload: {} } })
    expect(decodeTextFrameFromClient('x'.repeat(50), 10)).toMatchObject({ ok: false, problem: { kind: 'too-large' } })
    // Payloads other than objects are kept (a null supersede still means supersede); replies are checked.
    expect(decodeTextFrame('[null,null,"t","e",null]')).toMatchObject({ ok: true, frame: { payload: null } })
    expect(decodeTextFrame('[null,null,"t","e",[1]]')).toMatchObject({ ok: true, frame: { payload: [1] } })
  })
  it('never throw, and agree with the TextFrame schema', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.jsonValue().map((v) => JSON.stringify(v)), fc.tuple(fc.option(fc.string()), fc.option(fc.string()), fc.string(), fc.string(), fc.dictionary(fc.string(), fc.jsonValue())).map((t) => JSON.stringify(t))), (text) => {
        const r = decodeTextFrame(text)
        if (r.ok) {
          expect(TextFrame.safeParse(JSON.parse(text)).success).toBe(true)
          expect(JSON.parse(encodeTextFrame(r.frame))).toEqual(JSON.parse(text))
        }
      }),
      { numRuns: 300 },
    )
  })
})

describe('binary frames', () => {
  it('round-trip server push, reply and broadcast, and client push', () => {
    const payload = new Uint8Array([1, 2, 3])
    const push = decodeBinaryFromServer(encodeBinaryToClient({ kind: 'push', join_ref: '1', topic: 't', event: 'e', payload }))
    expect(push).toMatchObject({ ok: true, frame: { join_ref: '1', ref: null, topic: 't', event: 'e' } })
    if (push.ok) expect(new Uint8Array(push.frame.payload as ArrayBuffer)).toEqual(payload)
    const reply = decodeBinaryFromServer(encodeBinaryToClient({ kind: 'reply', join_ref: '1', ref: '2', topic: 't', status: 'ok', payload }))
    expect(reply).toMatchObject({ ok: true, frame: { ref: '2', event: 'phx_reply', payload: { status: 'ok' } } })
    const cast = decodeBinaryFromServer(encodeBinaryToClient({ kind: 'broadcast', topic: 't', event: 'e', payload }))
    expect(cast).toMatchObject({ ok: true, frame: { join_ref: null, topic: 't', event: 'e' } })
    const fromClient = decodeBinaryFromClient(encodeBinaryToServer({ join_ref: '3', ref: '4', topic: 't', event: 'e', payload }))
    expect(fromClient).toMatchObject({ ok: true, frame: { join_ref: '3', ref: '4', topic: 't', event: 'e' } })
  })
  it('type truncated frames, unknown kinds and bad UTF-8, never throwing', () => {
    expect(decodeBinaryFromServer(new Uint8Array([9]))).toMatchObject({ ok: false, problem: { kind: 'bad-binary' } })
    expect(decodeBinaryFromServer(new Uint8Array([0, 200, 1, 1]))).toMatchObject({ ok: false, problem: { kind: 'bad-binary' } })
    expect(decodeBinaryFromServer(new Uint8Array([2, 1, 1, 0xff, 0x41]))).toMatchObject({ ok: false, problem: { kind: 'bad-binary' } })
    expect(decodeBinaryFromServer(new Uint8Array([]))).toMatchObject({ ok: false })
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        decodeBinaryFromServer(bytes)
        decodeBinaryFromClient(bytes)
      }),
    )
  })
  it('refuses fields longer than 255 bytes when encoding', () => {
    expect(() => encodeBinaryToServer({ join_ref: null, ref: null, topic: 'x'.repeat(256), event: 'e', payload: new Uint8Array() })).toThrow(RangeError)
  })
})

describe('agent.control payloads', () => {
  it('parse a valid signal to camelCase with the raw payload kept', () => {
    const raw = { mode: 'interrupt', scope: 'room', agent_id: 'a', room_id: 'r', correlation_id: 'c', extra: 1 }
    expect(parseControlSignal(raw)).toEqual({
      ok: true,
      signal: { mode: 'interrupt', scope: 'room', agentId: 'a', roomId: 'r', executionId: null, reason: null, correlationId: 'c', raw },
    })
    expect(parseControlSignal({ mode: 'stop', scope: 'agent', agent_id: 'a', correlation_id: null })).toMatchObject({ ok: true, signal: { correlationId: null } })
  })
  it('list the problems of a malformed one', () => {
    const r = parseControlSignal({ mode: 'pause', scope: 'agent' })
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.issues.join(' ')).toMatch(/mode.*agent_id|agent_id.*mode/s)
    expect(parseControlSignal(null).ok).toBe(false)
    expect(parseControlSignal({ mode: 'stop', scope: 'agent', agent_id: 7 }).ok).toBe(false)
    // Each problem names its field and what arrived there; a payload that is no object, itself.
    expect(parseControlSignal({ mode: 'stop', scope: 'agent', agent_id: 7 })).toEqual({ ok: false, issues: ['agent_id: expected string, received number'] })
    expect(parseControlSignal('stop')).toEqual({ ok: false, issues: ['(payload): expected object, received string'] })
  })
})

describe('isWellFormedText', () => {
  it('is false for text holding half of a character anywhere, true for whole text (backslashes and escapes as text included)', () => {
    const half = '😀'.slice(0, 1)
    expect(['', 'agent-7', '😀', 'a\\ud800', '\\u0041', 'ключ'].map(isWellFormedText)).toEqual([true, true, true, true, true, true])
    expect([half, `a${half}`, `${half}z`, '😀'.slice(1), `😀${half}`, '\udc00\ud800'].map(isWellFormedText)).toEqual([false, false, false, false, false, false])
  })
})

describe('hasLoneSurrogate', () => {
  it('finds half a character, escaped (either case) or raw, and passes a whole one however it is written', () => {
    const half = '😀'.slice(0, 1)
    expect(hasLoneSurrogate(JSON.stringify({ text: half }))).toBe(true)
    expect(hasLoneSurrogate(JSON.stringify({ text: '😀'.slice(1) }))).toBe(true)
    expect(hasLoneSurrogate(JSON.stringify({ [half]: 1 }))).toBe(true)
    expect(hasLoneSurrogate('{"n":"\\uD800"}')).toBe(true)
    expect(hasLoneSurrogate('{"n":"\\uDBFF\\u0041"}')).toBe(true)
    expect(hasLoneSurrogate('"\\ud83d')).toBe(true)
    expect(hasLoneSurrogate(`"${half}"`)).toBe(true)
    // Whole: the character itself, a pair of escapes as Python's json.dumps writes it, upper case too.
    expect(hasLoneSurrogate(JSON.stringify({ text: '😀 ok' }))).toBe(false)
    expect(hasLoneSurrogate('{"n":"\\ud83d\\ude00"}')).toBe(false)
    expect(hasLoneSurrogate('{"n":"\\uD83D\\uDE00"}')).toBe(false)
    // An escaped backslash before `u`: text, not an escape.
    expect(hasLoneSurrogate(JSON.stringify({ text: '\\ud83d' }))).toBe(false)
    expect(hasLoneSurrogate(JSON.stringify({ text: `\\${half}` }))).toBe(true)
    expect(hasLoneSurrogate('["1","1","room:1","say",{}]')).toBe(false)
  })

  it('the surrogate ranges exactly: D800-DBFF high, DC00-DFFF low, neither E000 nor FFFD', () => {
    // The first and last low surrogates, alone and after a high one.
    expect(hasLoneSurrogate('"\\uDC00"')).toBe(true)
    expect(hasLoneSurrogate('"\\uDFFF"')).toBe(true)
    expect(hasLoneSurrogate('"\\uD800\\uDC00"')).toBe(false)
    expect(hasLoneSurrogate('"\\uDBFF\\uDFFF"')).toBe(false)
    // Characters past the surrogates (private use, the replacement character), escaped or raw, alone or after a high one.
    expect(hasLoneSurrogate('"\\uE000 \\uFFFD \uE000"')).toBe(false)
    expect(hasLoneSurrogate('"\\uD83D\\uE000"')).toBe(true)
  })

  it('a backslash or a u that is not an escape of a code unit is text: a u after a character, hex after an escaped backslash', () => {
    // `au` then four hex digits: not an escape, so no low surrogate.
    expect(hasLoneSurrogate('"\\u0041 audc00"')).toBe(false)
    // A high surrogate, then an escaped backslash and `dc00`: text, so the high one is alone.
    expect(hasLoneSurrogate('"\\uD83D\\\\dc00"')).toBe(true)
    expect(hasLoneSurrogate(JSON.stringify({ text: `${'😀'.slice(0, 1)}\\dc00` }))).toBe(true)
  })
})
