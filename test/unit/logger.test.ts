/** The link's logger wrapper: redacts the key, never throws, and passes no `undefined` to console-like loggers. */
import { describe, expect, it } from 'vitest'
import { redact, redacting } from '../../src/logger.js'
import { clipText } from '../../src/reasons.js'

describe('redacting logger', () => {
  it('passes one argument when there are no fields, so console.log prints no "undefined"', () => {
    const calls: unknown[][] = []
    const log = redacting({ info: (...args: unknown[]) => calls.push(args) }, 'sk-secret')
    log.info('state idle -> connecting')
    log.info('with fields sk-secret', { key: 'sk-secret', n: 1 })
    expect(calls).toEqual([['state idle -> connecting'], [{ key: '[redacted]', n: 1 }, 'with fields [redacted]']])
  })

  it('a logger that throws does not throw into the link', () => {
    let calls = 0
    const log = redacting(
      {
        warn: () => {
          calls++
          throw new Error('broken logger')
        },
      },
      'k',
    )
    expect(() => log.warn('x')).not.toThrow()
    expect(calls).toBe(1)
  })

  it('an async logger whose promise rejects raises no unhandled rejection', async () => {
    let rejected!: () => void
    const settled = new Promise<void>((resolve) => (rejected = resolve))
    const log = redacting(
      {
        error: async () => {
          await Promise.resolve()
          queueMicrotask(rejected)
          throw new Error('async logger bug')
        },
      },
      'k',
    )
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => void unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      log.error('x', { a: 1 })
      await settled
      // A turn past the rejection: an unhandled one has been reported by now.
      await new Promise((resolve) => setImmediate(resolve))
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
    expect(unhandled).toEqual([])
  })

  it('redacts the key percent-encoded and form-encoded too, as a server echoing the api_key param would send it', () => {
    const key = 'sk+live/SECRET== x'
    const echoed = { kind: 'closed', closeReason: `bad api_key=${encodeURIComponent(key)}`, body: `api_key=${new URLSearchParams({ k: key }).toString().slice(2)}` }
    const out = JSON.stringify(redact(echoed, key))
    expect(out).not.toContain(encodeURIComponent(key))
    expect(out).not.toContain('SECRET')
    expect(out).toContain('[redacted]')
  })

  it('a key holding half of a character (no percent-encoding exists for it) is redacted verbatim and JSON-escaped, and nothing throws', () => {
    const key = 'sk-live-SECRET-\ud800'
    const out = redact({ detail: `key ${key}`, json: JSON.stringify({ key }), ok: 'fine' }, key) as Record<string, string>
    expect(out).toEqual({ detail: 'key [redacted]', json: '{"key":"[redacted]"}', ok: 'fine' })
    // A whole key right beside it keeps its percent-encoded form redacted.
    const whole = 'sk live/SECRET'
    expect(redact(`api_key=${encodeURIComponent(whole)}`, [key, whole])).toBe('api_key=[redacted]')
  })

  it('a short key never rewrites the identifiers of a typed reason; free text is still redacted', () => {
    const reason = { kind: 'rejected', cause: 'unauthenticated', closeName: 'policy violation', detail: 'e is the key' }
    expect(redact(reason, 'e')).toEqual({ kind: 'rejected', cause: 'unauthenticated', closeName: 'policy violation', detail: '[redacted] is th[redacted] k[redacted]y' })
    // A dropped reason's source, an ignored event's name and a channel's status, as the CLI prints them.
    const printed = { reason: { kind: 'dropped', source: 'socket' }, ignored: { event: 'socket.malformed', detail: 'k' }, channel: { status: 'joined' } }
    expect(redact(printed, 'k')).toEqual({ reason: { kind: 'dropped', source: 'socket' }, ignored: { event: 'socket.malformed', detail: '[redacted]' }, channel: { status: 'joined' } })
    // Inside the server's data (a signal's or a supersede's raw payload, a reply's response), no field is ours: redacted as any text.
    const signal = { type: 'control.signal', signal: { mode: 'stop', raw: { status: 'key Zq7 revoked', nested: { type: 'Zq7 x' } } }, response: { kind: 'Zq7' } }
    expect(redact(signal, 'Zq7')).toEqual({ type: 'control.signal', signal: { mode: 'stop', raw: { status: 'key [redacted] revoked', nested: { type: '[redacted] x' } } }, response: { kind: '[redacted]' } })
  })

  it('redacts the key JSON-escaped too, and in identifier fields once it is 8 characters or more', () => {
    const quoted = 'sk"live\\key-0001'
    expect(redact(`no handler for ${JSON.stringify(`echo:${quoted}`)}`, quoted)).toBe('no handler for "echo:[redacted]"')
    // A server payload may put the key where the link's typed values keep identifiers.
    const key = 'sk_live_4f9a2b7c1d8e'
    expect(redact({ raw: { type: key, state: key }, kind: 'closed' }, key)).toEqual({ raw: { type: '[redacted]', state: '[redacted]' }, kind: 'closed' })
  })

  it('redacts no run shorter than half the key: ids that share the key\'s start; keys with a repeating start', () => {
    const key = 'agent-0001.9f8e7d6c5b4a'
    expect(redact({ agentId: 'agent-0001', roomId: 'room-agent-0001-a' }, key)).toEqual({ agentId: 'agent-0001', roomId: 'room-agent-0001-a' })
    const repeating = 'aaaaaaaaZq7Lw2xPTsecretTail'
    expect(redact(`token=a${repeating}`, repeating)).toBe('token=a[redacted]')
  })

  it('redacts a clipped key: a run of at least half of it from its start, as long as it matches, inside any text', () => {
    const key = 'AAAABBBBCCCCDDDDEEEEFFFF!x'
    // clipText stops at the 200-character limit inside the key: it goes back to the space before
    // it, keeping none of the key (its '!' is part of the token).
    const body = `${'y'.repeat(175)} ${key} is not a valid key`
    expect(clipText(body, 200)).toBe(`${'y'.repeat(175)} `)
    expect(clipText(`${'y'.repeat(150)} sk_live_ABCDEFGHIJ!KLMNOPQRSTUVWXYZ0123456789abcdefghij tail`, 200)).toBe(`${'y'.repeat(150)} `)
    // A cut that leaves a run of half of the key or more (a text cut elsewhere) is still redacted.
    const clipped = `${'y'.repeat(175)} AAAABBBBCCCCDDDDEEEEFFFF`
    expect(redact({ detail: `server said ${JSON.stringify(clipped)}; retrying` }, key)).toEqual({ detail: `server said "${'y'.repeat(175)} [redacted]"; retrying` })
    // Half the key is the least that counts; less is left alone (ids may share a key's start).
    expect(redact('AAAABBBBCCCC then', key)).toBe('AAAABBBBCCCC then')
    expect(redact('AAAABBBBCCCCD then', key)).toBe('[redacted] then')
    // A key shorter than SHORT_KEY is redacted only whole.
    expect(redact('abcdef abcde', 'abcdefg')).toBe('abcdef abcde')
  })

  it('redacts the key as hex (a binary frame quoted in hex), in property names once it is 8 characters or more, and a short key that fills an identifier field whole', () => {
    const key = 'sk-live-HexEcho-42'
    const hex = [...new TextEncoder().encode(key)].map((b) => b.toString(16).padStart(2, '0')).join('')
    expect(redact(`frame starts "7f${hex}00"`, key)).toBe('frame starts "7f[redacted]00"')
    expect(redact({ channels: { [`room:${key}`]: 'joined', lobby: 'joined' } }, key)).toEqual({ channels: { 'room:[redacted]': 'joined', lobby: 'joined' } })
    // A short key renames no property (they are structure) and leaves identifiers alone unless it is one whole.
    expect(redact({ e: 'kept', reason: { state: 'hunter2', type: 'superseded', cause: 'hunter2x' } }, 'hunter2')).toEqual({ e: 'kept', reason: { state: '[redacted]', type: 'superseded', cause: 'hunter2x' } })
    // The server's own data (raw) has no identifiers of this code: redacted as any text.
    expect(redact({ raw: { cause: 'hunter2x' } }, 'hunter2')).toEqual({ raw: { cause: '[redacted]x' } })
    expect(redact({ e: { kind: 'e' } }, 'e')).toEqual({ e: { kind: '[redacted]' } })
  })

  it('an encoded echo is redacted whole though the verbatim key matches its head (a + / = \" past the key\'s middle)', () => {
    const key = 'c2VjcmV0LWtleQ+/Zm9yLWFnZW50+LTc='
    const url = `GET /socket/websocket?agent_id=a&api_key=${encodeURIComponent(key)}&vsn=2.0.0`
    expect(redact(url, key)).toBe('GET /socket/websocket?agent_id=a&api_key=[redacted]&vsn=2.0.0')
    expect(redact(`body: api_key=${new URLSearchParams({ k: key }).toString().slice(2)}`, key)).toBe('body: api_key=[redacted]')
    const quoted = 'abcdefghijklmnopqrst"uvwxyz0123456789'
    expect(redact(`server said ${JSON.stringify({ key: quoted })}`, quoted)).toBe('server said {"key":"[redacted]"}')
    expect(redact(`frame starts ${JSON.stringify(JSON.stringify({ key: quoted }))}`, quoted)).toBe('frame starts "{\\"key\\":\\"[redacted]\\"}"')
  })

  it('rotated keys that share a long prefix: the current key is redacted whole, whichever key is listed first', () => {
    const older = 'sk_live_AAAAAAAAzzzzzzzz'
    const current = 'sk_live_AAAAAAAAR4nT9wXc'
    expect(redact(`rejected ${current}`, [older, current])).toBe('rejected [redacted]')
    expect(redact(`rejected ${current}`, [current, older])).toBe('rejected [redacted]')
    expect(redact(`rejected ${older} and ${current}`, [older, current])).toBe('rejected [redacted] and [redacted]')
  })

  it('a key whose start repeats a character, after one more of it in the text, leaves none of its tail', () => {
    const key = '00000000000a1b2c3d4'
    expect(redact(`invoice 10${key} refused`, key)).not.toContain('a1b2c3d4')
    expect(redact(`invoice 10${key} refused`, key)).toMatch(/^invoice 1.?\[redacted\] refused$/)
  })

  it('two copies of a key side by side are two redactions', () => {
    expect(redact('keykey-0123keykey-0123', 'keykey-0123')).toBe('[redacted][redacted]')
  })

  it('redacts a key JSON-escaped twice, as a detail quoting a malformed frame that echoes it holds it', () => {
    const key = 'sk"live-0123456789'
    const frame = JSON.stringify(['1', null, 'room:x', 'evt', { echoed: key }, 'extra'])
    const detail = `wrong-arity: frame starts ${JSON.stringify(frame)}`
    expect(detail).not.toContain(JSON.stringify(key).slice(1, -1))
    const out = redact(detail, key)
    expect(out).not.toContain('live-0123456789')
    expect(out).toContain('[redacted]')
  })

  it('a key list changed in place is read again: a key inserted in the middle, or one replaced first, last, in the middle or all at once', () => {
    const keys = ['key-aaaa-0000', 'key-bbbb-1111']
    expect(redact('key-aaaa-0000 key-bbbb-1111', keys)).toBe('[redacted] [redacted]')
    keys.splice(1, 0, 'key-cccc-2222')
    expect(redact('key-cccc-2222', keys)).toBe('[redacted]')
    keys[0] = 'key-dddd-3333'
    expect(redact('key-dddd-3333 key-aaaa-0000', keys)).toBe('[redacted] key-aaaa-0000')
    keys[2] = 'key-eeee-4444'
    expect(redact('key-eeee-4444 key-bbbb-1111', keys)).toBe('[redacted] key-bbbb-1111')
    keys[1] = 'key-ffff-5555'
    expect(redact('key-ffff-5555 key-cccc-2222', keys)).toBe('[redacted] key-cccc-2222')
    keys.splice(0, 3, 'key-gggg-6666', 'key-hhhh-7777', 'key-iiii-8888')
    expect(redact('key-gggg-6666 key-hhhh-7777 key-iiii-8888 key-ffff-5555', keys)).toBe('[redacted] [redacted] [redacted] key-ffff-5555')
    keys.push('key-jjjj-9999')
    expect(redact('key-jjjj-9999', keys)).toBe('[redacted]')
    // The same list unchanged gives the same redaction again.
    expect(redact('key-jjjj-9999 key-gggg-6666', keys)).toBe('[redacted] [redacted]')
  })

  it('a key of exactly SHORT_KEY (8) characters is redacted inside identifier fields, in property names and as hex; a shorter one in none of them', () => {
    const key = 'abcd1234'
    const hex = '6162636431323334'
    expect(redact({ kind: `${key}-x`, [`room:${key}`]: 1 }, key)).toEqual({ kind: '[redacted]-x', 'room:[redacted]': 1 })
    expect(redact(`frame ${hex}`, key)).toBe('frame [redacted]')
    const short = 'abcd123'
    expect(redact({ kind: `${short}-x`, [`room:${short}`]: 1 }, short)).toEqual({ kind: `${short}-x`, [`room:${short}`]: 1 })
    expect(redact('frame 61626364313233', short)).toBe('frame 61626364313233')
    expect(redact('code 6162', 'ab')).toBe('code 6162')
  })

  it('the hex form of a key writes every byte as two digits (a byte under 0x10 with its leading 0)', () => {
    const key = '\tsk-live-0001'
    const hex = [...new TextEncoder().encode(key)].map((b) => b.toString(16).padStart(2, '0')).join('')
    expect(hex.startsWith('09')).toBe(true)
    expect(redact(`frame 7f${hex}00`, key)).toBe('frame 7f[redacted]00')
  })

  it('a value where a short key is only in a property name is returned as it is, not copied (a short key renames no property)', () => {
    const value = { e: 1, list: [2] }
    expect(redact(value, 'e')).toBe(value)
  })

  it('with no logger, every link shares one silent log, which does nothing', () => {
    const silent = redacting(undefined, 'key-a')
    expect(redacting(undefined, () => ['key-b'])).toBe(silent)
    expect(Object.isFrozen(silent)).toBe(true)
    expect(() => silent.error('no logger', { k: 1 })).not.toThrow()
  })
})
