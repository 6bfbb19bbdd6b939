/**
 * The logger a host passes to createLink(): any object with some of debug/info/warn/error
 * (console works). Every line the link logs goes through {@link redacting}, which replaces the
 * API key wherever it appears, so a key echoed by a server or embedded in a URL never reaches a log.
 */

/** A structured logger; each method takes a message and optional fields. All are optional. */
export interface Logger {
  debug?(message: string, fields?: Record<string, unknown>): void
  info?(message: string, fields?: Record<string, unknown>): void
  warn?(message: string, fields?: Record<string, unknown>): void
  error?(message: string, fields?: Record<string, unknown>): void
}

/** The text that replaces a secret. */
export const REDACTED = '[redacted]'

/**
 * Returns `value` with every occurrence of `secret` in its strings replaced by `[redacted]`,
 * copying only what changes. Handles nesting and cycles; non-plain objects are kept as they are
 * except Errors, whose message is redacted.
 */
export function redact<T>(value: T, secret: string, seen = new WeakMap<object, unknown>()): T {
  if (!secret) return value
  if (typeof value === 'string') return (value.includes(secret) ? value.split(secret).join(REDACTED) : value) as T
  if (!value || typeof value !== 'object') return value
  if (seen.has(value)) return seen.get(value) as T
  if (value instanceof Error) {
    if (!value.message.includes(secret)) return value
    const copy = new Error(redact(value.message, secret))
    copy.name = value.name
    return copy as T
  }
  if (Array.isArray(value)) {
    const out: unknown[] = []
    seen.set(value, out)
    let changed = false
    for (const item of value) {
      const r = redact(item, secret, seen)
      changed ||= r !== item
      out.push(r)
    }
    return (changed ? out : value) as T
  }
  const proto = Object.getPrototypeOf(value)
  if (proto !== Object.prototype && proto !== null) return value
  const out: Record<string, unknown> = {}
  seen.set(value, out)
  let changed = false
  for (const [k, v] of Object.entries(value)) {
    const r = redact(v, secret, seen)
    changed ||= r !== v
    out[k] = r
  }
  return (changed ? out : value) as T
}

/** Wraps a logger so every message and field is redacted of `secret` and a throwing logger cannot break the link. */
export function redacting(logger: Logger | undefined, secret: string): Required<Logger> {
  const call = (level: keyof Logger) => (message: string, fields?: Record<string, unknown>) => {
    const fn = logger?.[level]
    if (!fn) return
    try {
      fn.call(logger, redact(message, secret), fields === undefined ? undefined : redact(fields, secret))
    } catch {
      // A host's logger must not take the link down.
    }
  }
  return { debug: call('debug'), info: call('info'), warn: call('warn'), error: call('error') }
}
