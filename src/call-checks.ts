/**
 * Checks of what a host passes to the link's calls, made before the call does anything, so a
 * wrong value fails where it was passed (a {@link ConfigurationError} naming the call) instead of
 * later, far from the mistake. The `signal` option's check is `checkSignal` (src/abort.ts).
 */
import { ConfigurationError } from './errors/configuration-error.js'

/**
 * The options object of one of the link's calls, as WebIDL reads a dictionary (as `fetch(url,
 * null)` does): `undefined` and `null` are no options (`{}`); an object is used as it is.
 *
 * @param where the call, for the message, e.g. `link.connect`.
 * @throws {ConfigurationError} (`INVALID_OPTIONS`) `<where>: options must be an object, got <type>`
 *   for anything else (a number, a string, a function).
 */
export function callOptions<T extends object>(options: T | null | undefined, where: string): Partial<T> {
  if (options === undefined || options === null) return {}
  if (typeof options !== 'object') throw new ConfigurationError(`${where}: options must be an object, got ${typeof options}`)
  return options
}

/**
 * Throws unless `value` is a function: a listener or handler that is not one would be registered
 * and then fail at every call, far from the mistake. `what` names it, e.g. `link.on: the listener`.
 *
 * @throws {ConfigurationError} `<what> must be a function, got <type>`.
 */
export function checkFunction(value: unknown, what: string): void {
  if (typeof value !== 'function') throw new ConfigurationError(`${what} must be a function, got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}`)
}
