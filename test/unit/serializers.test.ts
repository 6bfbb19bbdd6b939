/**
 * The simulator's serializer negotiation and V1 codec (src/node/server/serializers.ts); what real
 * Phoenix does with each is in test/conformance/differential.test.ts.
 */
import { describe, expect, it } from 'vitest'
import { decodeV1FromClient, encodeV1, negotiateSerializer } from '../../src/node/server/serializers.js'

describe('negotiateSerializer', () => {
  it('maps ~> 1.0.0 to v1 and ~> 2.0.0 to v2, a missing vsn to v1; anything else to null (a 403)', () => {
    const table = Object.fromEntries(
      [null, '1.0.0', '1.0.7', '2.0.0', '2.0.1', '2.0.0+build.5', '2.0.1-rc.1', '2.0.1-01', '2.0.1-alpha.01', '2', '', '2.9.9', '1.1.0', '3.0.0', '0.0.0', '2.0.0-rc.1', '02.0.0', '2.00.0', ' 2.0.0', '2.0.0 ', 'v2.0.0', '2.0'].map((v) => [String(v), negotiateSerializer(v)]),
    )
    expect(table).toEqual({
      null: 'v1',
      '1.0.0': 'v1',
      '1.0.7': 'v1',
      '2.0.0': 'v2',
      '2.0.1': 'v2',
      '2.0.0+build.5': 'v2',
      '2.0.1-rc.1': 'v2',
      '2.0.1-01': null,
      '2.0.1-alpha.01': null,
      '2': null,
      '': null,
      '2.9.9': null,
      '1.1.0': null,
      '3.0.0': null,
      '0.0.0': null,
      '2.0.0-rc.1': null,
      '02.0.0': null,
      '2.00.0': null,
      ' 2.0.0': null,
      '2.0.0 ': null,
      'v2.0.0': null,
      '2.0': null,
    })
  })
})

describe('the V1 codec', () => {
  it('encodes event, payload, ref, topic in that order and drops the join_ref', () => {
    expect(encodeV1({ join_ref: '3', ref: '4', topic: 'room:a', event: 'phx_reply', payload: { status: 'ok', response: {} } })).toBe(
      '{"event":"phx_reply","payload":{"status":"ok","response":{}},"ref":"4","topic":"room:a"}',
    )
  })

  it('decodes an object with topic, event, payload and ref; join_ref optional (null when absent)', () => {
    expect(decodeV1FromClient('{"topic":"t","event":"e","payload":{"a":1},"ref":"1"}')).toEqual({ ok: true, frame: { join_ref: null, ref: '1', topic: 't', event: 'e', payload: { a: 1 } } })
    expect(decodeV1FromClient('{"ref":null,"join_ref":"2","payload":[],"event":"e","topic":"t"}')).toEqual({ ok: true, frame: { join_ref: '2', ref: null, topic: 't', event: 'e', payload: [] } })
    // Scalar refs kept as they came (Phoenix echoes them); encoded back as numbers.
    const numeric = decodeV1FromClient('{"topic":"t","event":"e","payload":{},"ref":1,"join_ref":true}')
    expect(numeric).toEqual({ ok: true, frame: { join_ref: true, ref: 1, topic: 't', event: 'e', payload: {} } })
    expect(numeric.ok && encodeV1(numeric.frame)).toBe('{"event":"e","payload":{},"ref":1,"topic":"t"}')
  })

  it('refuses what Phoenix crashes on (not JSON, not an object, a key missing) and wrong types, naming the problem', () => {
    const kinds = ['nope', '[null,"1","t","e",{}]', 'null', '"text"', '{"topic":"t","event":"e","payload":{}}', '{"topic":"t","event":"e","ref":"1"}', '{"topic":1,"event":"e","payload":{},"ref":"1"}', '{"topic":"t","event":"e","payload":{},"ref":{}}', '{"topic":"t","event":"e","payload":{},"ref":"1","join_ref":[7]}'].map((text) => {
      const decoded = decodeV1FromClient(text)
      return decoded.ok ? 'ok' : `${decoded.problem.kind}: ${decoded.problem.detail}`
    })
    expect(kinds).toEqual([
      'not-json: not JSON',
      'not-array: a V1 frame is a JSON object (vsn 1.0.0; an array is a V2 frame)',
      'not-array: a V1 frame is a JSON object (vsn 1.0.0; an array is a V2 frame)',
      'not-array: a V1 frame is a JSON object (vsn 1.0.0; an array is a V2 frame)',
      'wrong-arity: a V1 frame has topic, event, payload and ref; this one lacks ref',
      'wrong-arity: a V1 frame has topic, event, payload and ref; this one lacks payload',
      "wrong-types: a V1 frame's topic and event are strings",
      "wrong-types: a V1 frame's ref and join_ref are strings, numbers, booleans or null here (Phoenix echoes objects and arrays too)",
      "wrong-types: a V1 frame's ref and join_ref are strings, numbers, booleans or null here (Phoenix echoes objects and arrays too)",
    ])
  })
})
