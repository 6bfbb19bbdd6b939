/**
 * Freezes `value` and every plain object and array inside it, in place, and returns it. Class
 * instances, functions and zod schemas inside are left as they are (they are not data tables,
 * and zod fills some of its own fields lazily). Cycles are safe.
 *
 * @returns `value`, now frozen. Never throws.
 */
export function deepFreeze<T>(value: T, seen: WeakSet<object> = new WeakSet()): T {
  if (!isPlainData(value) || seen.has(value)) return value
  seen.add(value)
  for (const inner of Object.values(value)) deepFreeze(inner, seen)
  Object.freeze(value)
  return value
}

/** A plain object (`{}` or a null prototype) or an array. */
function isPlainData(value: unknown): value is object {
  if (value === null || typeof value !== 'object') return false
  const proto = Object.getPrototypeOf(value) as unknown
  return proto === Object.prototype || proto === Array.prototype || proto === null
}
