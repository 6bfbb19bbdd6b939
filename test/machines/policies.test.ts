/**
 * The policy checks: every field of every policy, at and past each bound, with the exact error a
 * host reads when it configures the link wrong (the field, the bound, the value it got).
 */
import { describe, expect, it } from 'vitest'
import { DEFAULT_CHANNEL_POLICY, validateChannelPolicy, type ChannelPolicy } from '../../machines/channel.js'
import { DEFAULT_CONNECTION_POLICY, validateConnectionPolicy, type ConnectionPolicy } from '../../machines/connection.js'
import { DEFAULT_RECONNECT_POLICY, validateReconnectPolicy, type ReconnectPolicy } from '../../machines/reconnect.js'
import { assertMs, copyText, isRefusedBeforeSupersede, isRefusedUnaccepted, thrownText } from '../../machines/types.js'

const reconnect = (patch: Partial<Record<keyof ReconnectPolicy, unknown>>) => () => validateReconnectPolicy({ ...DEFAULT_RECONNECT_POLICY, ...patch } as ReconnectPolicy)
const connection = (patch: Partial<ConnectionPolicy>) => () => validateConnectionPolicy({ ...DEFAULT_CONNECTION_POLICY, ...patch })
const channel = (patch: Partial<ChannelPolicy>) => () => validateChannelPolicy({ ...DEFAULT_CHANNEL_POLICY, ...patch })

describe('assertMs', () => {
  it('takes whole milliseconds in [min, 2^31-1]', () => {
    expect(() => assertMs('x.delayMs', 0)).not.toThrow()
    expect(() => assertMs('x.delayMs', 2 ** 31 - 1)).not.toThrow()
    expect(() => assertMs('x.delayMs', 1, 1)).not.toThrow()
  })

  it.each([
    [-1, '-1'],
    [2 ** 31, '2147483648'],
    [1.5, '1.5'],
    [Number.NaN, 'NaN'],
    ['5', '5'],
    [null, 'null'],
  ])('refuses %s, naming the field, the unit and the value', (value, shown) => {
    expect(() => assertMs('x.delayMs', value)).toThrow(new RangeError(`x.delayMs must be a whole number of milliseconds in [0, 2^31-1], got ${shown}`))
  })

  it('names bytes for a field that counts bytes', () => {
    expect(() => assertMs('transport.maxFrameBytes', -1)).toThrow(new RangeError('transport.maxFrameBytes must be a whole number of bytes in [0, 2^31-1], got -1'))
  })

  it('refuses a value under its minimum with the minimum', () => {
    expect(() => assertMs('x.timeoutMs', 0, 1)).toThrow(new RangeError('x.timeoutMs must be at least 1, got 0'))
  })
})

describe('validateReconnectPolicy', () => {
  it('returns the policy it accepts', () => {
    const policy = { ...DEFAULT_RECONNECT_POLICY }
    expect(validateReconnectPolicy(policy)).toBe(policy)
  })

  it.each(['initialDelayMs', 'maxDelayMs', 'stableAfterMs', 'rapidWindowMs', 'maxRetryAfterMs'] as const)('checks %s as milliseconds', (name) => {
    expect(reconnect({ [name]: -1 })).toThrow(new RangeError(`reconnect.${name} must be a whole number of milliseconds in [0, 2^31-1], got -1`))
  })

  it('takes a factor of exactly 1, not below it or infinite', () => {
    expect(reconnect({ factor: 1 })).not.toThrow()
    expect(reconnect({ factor: 0.99 })).toThrow(new RangeError('reconnect.factor must be a finite number >= 1, got 0.99'))
    expect(reconnect({ factor: Number.POSITIVE_INFINITY })).toThrow(new RangeError('reconnect.factor must be a finite number >= 1, got Infinity'))
  })

  it('takes stableAfterMs equal to rapidWindowMs, not below it', () => {
    expect(reconnect({ stableAfterMs: 5_000, rapidWindowMs: 5_000 })).not.toThrow()
    expect(reconnect({ stableAfterMs: 4_999, rapidWindowMs: 5_000 })).toThrow(
      new RangeError('reconnect.stableAfterMs (4999) must be at least reconnect.rapidWindowMs (5000): a connection is stable only once it is no longer rapid'),
    )
  })

  it('takes a rapid limit of 1, not 0 or a fraction', () => {
    expect(reconnect({ rapidLimit: 1 })).not.toThrow()
    expect(reconnect({ rapidLimit: 0 })).toThrow(new RangeError('reconnect.rapidLimit must be a whole number >= 1, got 0'))
    expect(reconnect({ rapidLimit: 2.5 })).toThrow(new RangeError('reconnect.rapidLimit must be a whole number >= 1, got 2.5'))
  })

  it("takes onRapidLimit 'suspend' or 'give-up' and nothing else", () => {
    expect(reconnect({ onRapidLimit: 'suspend' })).not.toThrow()
    expect(reconnect({ onRapidLimit: 'give-up' })).not.toThrow()
    expect(reconnect({ onRapidLimit: 'stop' })).toThrow(new RangeError("reconnect.onRapidLimit must be 'suspend' or 'give-up', got stop"))
    expect(reconnect({ onRapidLimit: undefined })).toThrow(new RangeError("reconnect.onRapidLimit must be 'suspend' or 'give-up', got undefined"))
  })

  it('checks the suspension delays: at least 1 ms each, the maximum not below the initial', () => {
    expect(reconnect({ suspendInitialDelayMs: 0 })).toThrow(new RangeError('reconnect.suspendInitialDelayMs must be at least 1, got 0'))
    expect(reconnect({ suspendMaxDelayMs: 0, suspendInitialDelayMs: 1 })).toThrow(new RangeError('reconnect.suspendMaxDelayMs must be at least 1, got 0'))
    expect(reconnect({ suspendInitialDelayMs: 1_000, suspendMaxDelayMs: 1_000 })).not.toThrow()
    expect(reconnect({ suspendInitialDelayMs: 1_000, suspendMaxDelayMs: 999 })).toThrow(
      new RangeError('reconnect.suspendMaxDelayMs (999) must be at least reconnect.suspendInitialDelayMs (1000)'),
    )
  })

  it('checks the backoff ceiling against the first delay: a maxDelayMs below initialDelayMs (a unit slip) would silently cap every delay', () => {
    expect(reconnect({ initialDelayMs: 1_000, maxDelayMs: 1_000 })).not.toThrow()
    expect(reconnect({ initialDelayMs: 1_000, maxDelayMs: 10 })).toThrow(new RangeError('reconnect.maxDelayMs (10) must be at least reconnect.initialDelayMs (1000)'))
  })

  it('takes maxAttempts null or a whole number from 0', () => {
    expect(reconnect({ maxAttempts: null })).not.toThrow()
    expect(reconnect({ maxAttempts: 0 })).not.toThrow()
    expect(reconnect({ maxAttempts: -1 })).toThrow(new RangeError('reconnect.maxAttempts must be null or a whole number >= 0, got -1'))
    expect(reconnect({ maxAttempts: 1.5 })).toThrow(new RangeError('reconnect.maxAttempts must be null or a whole number >= 0, got 1.5'))
  })

  it.each(['goingAwayFloorMs', 'serviceRestartFloorMs', 'tryAgainLaterFloorMs'] as const)('checks %s as a [low, high] range of milliseconds', (name) => {
    expect(reconnect({ [name]: [1_000, 1_000] })).not.toThrow()
    expect(reconnect({ [name]: [-1, 10] })).toThrow(new RangeError(`reconnect.${name}[0] must be a whole number of milliseconds in [0, 2^31-1], got -1`))
    expect(reconnect({ [name]: [0, -1] })).toThrow(new RangeError(`reconnect.${name}[1] must be a whole number of milliseconds in [0, 2^31-1], got -1`))
    expect(reconnect({ [name]: [2, 1] })).toThrow(new RangeError(`reconnect.${name} must be [low, high] with low <= high, got [2, 1]`))
    expect(reconnect({ [name]: 5 })).toThrow(new RangeError(`reconnect.${name} must be a [low, high] pair of milliseconds, got 5`))
    expect(reconnect({ [name]: null })).toThrow(new RangeError(`reconnect.${name} must be a [low, high] pair of milliseconds, got null`))
    expect(reconnect({ [name]: undefined })).toThrow(new RangeError(`reconnect.${name} must be a [low, high] pair of milliseconds, got undefined`))
    expect(reconnect({ [name]: [1, 2, 3] })).toThrow(new RangeError(`reconnect.${name} must be a [low, high] pair of milliseconds, got an array of 3`))
    expect(reconnect({ [name]: [1] })).toThrow(new RangeError(`reconnect.${name} must be a [low, high] pair of milliseconds, got an array of 1`))
    expect(reconnect({ [name]: 5n })).toThrow(new RangeError(`reconnect.${name} must be a [low, high] pair of milliseconds, got 5n`))
    expect(reconnect({ [name]: { 0: 1, 1: 2 } })).toThrow(new RangeError(`reconnect.${name} must be a [low, high] pair of milliseconds, got an object`))
    expect(reconnect({ [name]: () => [1, 2] })).toThrow(new RangeError(`reconnect.${name} must be a [low, high] pair of milliseconds, got a function`))
  })
})

describe('validateConnectionPolicy', () => {
  it('returns the policy it accepts', () => {
    const policy = { ...DEFAULT_CONNECTION_POLICY }
    expect(validateConnectionPolicy(policy)).toBe(policy)
  })

  it('needs at least 1 ms to connect or join, and takes 0 for the leave and the conflict window', () => {
    expect(connection({ connectTimeoutMs: 0 })).toThrow(new RangeError('connection.connectTimeoutMs must be at least 1, got 0'))
    expect(connection({ joinTimeoutMs: 0 })).toThrow(new RangeError('connection.joinTimeoutMs must be at least 1, got 0'))
    expect(connection({ leaveTimeoutMs: 0, conflictRetryWindowMs: 0 })).not.toThrow()
    expect(connection({ leaveTimeoutMs: -1 })).toThrow(new RangeError('connection.leaveTimeoutMs must be a whole number of milliseconds in [0, 2^31-1], got -1'))
  })

  it('takes a conflict window of at most 10 minutes', () => {
    expect(connection({ conflictRetryWindowMs: 600_000 })).not.toThrow()
    expect(connection({ conflictRetryWindowMs: 600_001 })).toThrow(
      new RangeError(
        'connection.conflictRetryWindowMs must be at most 600000 (the platform lets go of a lost socket within about a minute; past that a 409 is another instance), got 600001',
      ),
    )
  })
})

describe('validateChannelPolicy', () => {
  it('returns the policy it accepts', () => {
    const policy = { ...DEFAULT_CHANNEL_POLICY }
    expect(validateChannelPolicy(policy)).toBe(policy)
  })

  it('needs at least 1 ms to join; the rejoin delays and the leave take 0', () => {
    expect(channel({ joinTimeoutMs: 0 })).toThrow(new RangeError('channel.joinTimeoutMs must be at least 1, got 0'))
    expect(channel({ rejoinInitialDelayMs: 0, rejoinMaxDelayMs: 0, leaveTimeoutMs: 0 })).not.toThrow()
    expect(channel({ rejoinInitialDelayMs: -1 })).toThrow(new RangeError('channel.rejoinInitialDelayMs must be a whole number of milliseconds in [0, 2^31-1], got -1'))
  })
})

describe('what a refused upgrade says', () => {
  // [status, the server holds no socket for it, it superseded nothing]
  const table: Array<[number, boolean, boolean]> = [
    [399, false, false],
    [400, true, true],
    [403, true, true],
    [409, true, true],
    [429, true, true],
    [499, true, true],
    [500, false, false],
    [502, false, false],
    [503, true, false],
    [504, false, false],
  ]
  it.each(table)('HTTP %i on the upgrade: no socket held %s, superseded nothing %s', (status, unaccepted, beforeSupersede) => {
    const reason = { kind: 'rejected', retryable: false, phase: 'upgrade', status, generation: 1, at: 0 }
    expect(isRefusedUnaccepted(reason)).toBe(unaccepted)
    expect(isRefusedBeforeSupersede(reason)).toBe(beforeSupersede)
  })
  it('only an upgrade refusal with a status says either: a close, a join refusal, a missing status do not', () => {
    for (const reason of [
      { kind: 'closed', retryable: true, phase: 'socket', status: 403, generation: 1, at: 0 },
      { kind: 'rejected', retryable: false, phase: 'join', status: 403, generation: 1, at: 0 },
      { kind: 'rejected', retryable: false, phase: 'upgrade', status: null, generation: 1, at: 0 },
      { kind: 'rejected', retryable: false, phase: 'upgrade', generation: 1, at: 0 },
      { kind: 'rejected', retryable: false, phase: 'upgrade', status: '403' as unknown as number, generation: 1, at: 0 },
    ]) {
      expect(isRefusedUnaccepted(reason), JSON.stringify(reason)).toBe(false)
      expect(isRefusedBeforeSupersede(reason), JSON.stringify(reason)).toBe(false)
    }
  })
})

describe('copyText', () => {
  it('copies up to end, never ending inside a surrogate pair it cut; a text that ends in half a pair, not cut, is copied whole', () => {
    expect(copyText('abcdef', 3)).toBe('abc')
    expect(copyText('abc')).toBe('abc')
    expect(copyText('abc', 10)).toBe('abc')
    expect(copyText('', 5)).toBe('')
    // A cut between the halves of a pair drops the first half.
    expect(copyText('ab\ud83d\ude00c', 3)).toBe('ab')
    expect(copyText('ab\ud83d\ude00c', 4)).toBe('ab\ud83d\ude00')
    // Nothing cut: the text as it is, even when it ends in a lone high surrogate.
    expect(copyText('ab\ud83d')).toBe('ab\ud83d')
    expect(copyText('ab\ud83d', 3)).toBe('ab\ud83d')
    // Longer than one block of 4096 code units, to the unit.
    const long = `${'x'.repeat(4095)}yz${'w'.repeat(4096)}`
    expect(copyText(long)).toBe(long)
    expect(copyText(long, 4097)).toBe(`${'x'.repeat(4095)}yz`)
  })
})

describe('thrownText', () => {
  it("gives a thrown value's message, else the value as text, and never throws: an unprintable value says what it is", () => {
    expect(thrownText(new Error('boom'))).toBe('boom')
    expect(thrownText({ message: 'plain' })).toBe('plain')
    expect(thrownText(null)).toBe('null')
    expect(thrownText(undefined)).toBe('undefined')
    expect(thrownText(42)).toBe('42')
    // A message getter that throws: the value itself, as text.
    expect(thrownText({ get message(): string { throw new Error('no') }, toString: () => 'as text' })).toBe('as text')
    expect(thrownText(Object.create(null))).toBe('an unprintable object')
    expect(thrownText({ toString: () => { throw new Error('no') } })).toBe('an unprintable object')
    expect(thrownText(Object.assign(() => {}, { toString: () => { throw new Error('no') } }))).toBe('an unprintable function')
  })
})
