/**
 * Checks of what a host passes to the link's calls, made before the call does anything, so a
 * wrong value fails where it was passed (a {@link ConfigurationError} naming the call) instead of
 * later, far from the mistake. The `signal` option's check is `checkSignal` (src/abort.ts).
 */
import { ConfigurationError } from './errors/configuration-error.js'
import { isAbortSignal } from './abort.js'
import { thrownText } from '../machines/types.js'

/**
 * A host's argument as an error message names it: a string quoted (`"conected"`), `null`,
 * `undefined`, `an array`, `an object`, `a function`, or `a <type>` (`a number`, `a bigint`).
 */
export function describeArgument(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value)
  if (value === null || value === undefined) return String(value)
  if (Array.isArray(value)) return 'an array'
  const type = typeof value
  return `${type === 'object' ? 'an' : 'a'} ${type}`
}

/**
 * The options object of one of the link's calls, as WebIDL reads a dictionary (as `fetch(url,
 * null)` does): `undefined` and `null` are no options (`{}`); an object is used as it is.
 *
 * @param where the call, for the message, e.g. `link.connect`.
 * @throws {ConfigurationError} (`INVALID_OPTIONS`) `<where>: options must be an object, got <type>`
 *   for anything else (a number, a string, a function); for an AbortSignal given as the options
 *   object, a message saying to pass it as `{ signal }`.
 */
export function callOptions<T extends object>(options: T | null | undefined, where: string): Partial<T> {
  if (options === undefined || options === null) return {}
  if (typeof options !== 'object') throw new ConfigurationError(`${where}: options must be an object, got ${typeof options}`)
  // A signal passed where its options go (`whenState('connected', signal)`) would be read as
  // options with no signal, and the wait would never end.
  if (isAbortSignal(options)) throw new ConfigurationError(`${where}: pass the AbortSignal as { signal }, not as the options object`)
  // Read once, here: a getter that throws is this call's ConfigurationError, not a raw throw
  // later, and what was checked is what the call uses.
  const read: Record<string, unknown> = {}
  let key = ''
  try {
    for (key of new Set([...Object.keys(options), ...CALL_OPTIONS])) if (key in options) read[key] = (options as Record<string, unknown>)[key]
  } catch (error) {
    throw new ConfigurationError(`${where}: reading ${key === '' ? 'the options' : `options.${key}`} threw: ${thrownText(error)}`, { cause: error })
  }
  return read as Partial<T>
}

/** The options the link's calls read (`signal`, a push's `timeoutMs`, events()' `untilSessionEnds`), inherited ones too. */
const CALL_OPTIONS = ['signal', 'timeoutMs', 'untilSessionEnds'] as const

/** The type of a host's argument as an error message names it: `null`, `an array`, or its `typeof`. */
export function typeName(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value
}

/**
 * Refuses a misspelt key, which would otherwise be ignored and its default used.
 *
 * @throws {TypeError} `<where>: unknown <noun> "<key>" (known: <keys>)` (without `<where>: ` when
 *   `where` is empty) naming the first own key of `value` that `known` lacks.
 */
export function checkKnownKeys(value: object, known: ReadonlySet<string>, where: string, noun = 'option'): void {
  const stray = unknownKey(value, known)
  if (stray !== undefined) throw new TypeError(`${where === '' ? '' : `${where}: `}unknown ${noun} ${JSON.stringify(stray)} (known: ${[...known].join(', ')})`)
}

/**
 * Whether `value` is a call's timeout a timer can keep: a whole number of milliseconds in
 * [1, 2^31-1] (Node and browsers run a longer timer at once). `push` and `ping` take one.
 */
export function isCallTimeout(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 2 ** 31 - 1
}

/** The first own key of `options` that `known` lacks (a typo), or undefined. */
export function unknownKey(options: object, known: ReadonlySet<string>): string | undefined {
  return Object.keys(options).find((key) => !known.has(key))
}

/**
 * Throws unless `value` is a function: a listener or handler that is not one would be registered
 * and then fail at every call, far from the mistake. `what` names it, e.g. `link.on: the listener`.
 *
 * @throws {ConfigurationError} `<what> must be a function, got <type>`.
 */
export function checkFunction(value: unknown, what: string): void {
  if (typeof value !== 'function') throw new ConfigurationError(`${what} must be a function, got ${typeName(value)}`)
}
