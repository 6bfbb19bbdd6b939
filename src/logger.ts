/**
 * The logger a host passes to createLink(): any object with some of debug/info/warn/error
 * (console works). Every line the link logs goes through {@link redacting}, which replaces each
 * API key the link has used wherever it appears, so a key echoed by a server or embedded in a URL
 * never reaches a log.
 *
 * Redaction is for output only: log lines, error messages, traces and inspection events. Values
 * handed to host code (payloads, control signals, reasons) are never rewritten.
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
 * Returns `value` with every occurrence of `secret` (one key, or several: every key a link has
 * used; verbatim, URL-encoded or JSON-escaped) in its strings replaced by `[redacted]`,
 * identifier fields of the link's typed values left alone when the key is shorter than
 * {@link SHORT_KEY} (see IDENTIFIER_FIELDS),
 * copying only when something changes. Iterative (server-supplied payloads can nest thousands of
 * levels deep; recursion would overflow the stack), handles cycles; non-plain objects are kept
 * as they are except Errors, whose message is redacted.
 */
export function redact<T>(value: T, secret: string | readonly string[]): T {
  let out = value
  for (const one of typeof secret === 'string' ? [secret] : secret) {
    if (!one) continue
    for (const form of secretForms(one)) if (containsSecret(out, form)) out = replaceSecret(out, form, one.length)
  }
  return out
}

/**
 * The key as it may be echoed back: verbatim, percent-encoded (`encodeURIComponent`, as in the
 * `api_key` socket param), form-encoded (`+` for a space, as URLSearchParams writes it) and
 * JSON-escaped (a key with `"` or `\\` inside a JSON text, as a detail quoting a frame has it).
 */
function secretForms(secret: string): string[] {
  const forms = new Set([secret, encodeURIComponent(secret), new URLSearchParams({ k: secret }).toString().slice(2), JSON.stringify(secret).slice(1, -1)])
  return [...forms]
}

/**
 * Keys shorter than this (characters) leave the identifier fields of typed values alone: a key
 * `e` must not turn `superseded` into `sup[redacted]rs[redacted]d`. A longer key is redacted there
 * too, since a server payload (an agent.control signal's extra `type` field, say) may echo it.
 */
export const SHORT_KEY = 8

/**
 * Fields that in the link's own typed values (reason kinds and causes, states, close names) hold
 * identifiers from this code: a short key that happens to occur inside `superseded` must not turn
 * a reason kind into `sup[redacted]rs[redacted]d` (see {@link SHORT_KEY}).
 */
const IDENTIFIER_FIELDS = new Set(['kind', 'cause', 'phase', 'closeName', 'outcome', 'state', 'previous', 'type'])
const IDENTIFIER = /^[a-z][a-z0-9_.\- ]{0,47}$/i

function isPlain(value: object): boolean {
  const proto = Object.getPrototypeOf(value)
  return Array.isArray(value) || proto === Object.prototype || proto === null
}

function containsSecret(root: unknown, secret: string): boolean {
  const stack: unknown[] = [root]
  const seen = new Set<object>()
  while (stack.length > 0) {
    const value = stack.pop()
    if (typeof value === 'string') {
      if (value.includes(secret)) return true
      continue
    }
    if (!value || typeof value !== 'object' || seen.has(value)) continue
    seen.add(value)
    if (value instanceof Error) {
      if (value.message.includes(secret)) return true
      continue
    }
    if (!isPlain(value)) continue
    for (const v of Object.values(value)) stack.push(v)
  }
  return false
}

function replaceSecret<T>(root: T, secret: string, keyLength: number): T {
  const swap = (s: string) => (s.includes(secret) ? s.split(secret).join(REDACTED) : s)
  const copies = new Map<object, unknown>()
  const copyOf = (value: unknown): unknown => {
    if (typeof value === 'string') return swap(value)
    if (!value || typeof value !== 'object') return value
    if (value instanceof Error) {
      if (!value.message.includes(secret)) return value
      const copy = new Error(swap(value.message))
      copy.name = value.name
      return copy
    }
    if (!isPlain(value)) return value
    const existing = copies.get(value)
    if (existing) return existing
    const copy: unknown = Array.isArray(value) ? [] : Object.create(Object.getPrototypeOf(value) as object | null)
    copies.set(value, copy)
    work.push([value, copy as Record<string, unknown>])
    return copy
  }
  const work: Array<[object, Record<string, unknown>]> = []
  const result = copyOf(root)
  while (work.length > 0) {
    const [source, target] = work.pop()!
    // Values only: keys are structure (`kind`, `reason`), and a short key must not rename them.
    for (const [k, v] of Object.entries(source)) {
      target[k] = keyLength < SHORT_KEY && IDENTIFIER_FIELDS.has(k) && typeof v === 'string' && IDENTIFIER.test(v) ? v : copyOf(v)
    }
  }
  return result as T
}

/**
 * Wraps a logger so every message and field is redacted of the secrets (a key, or a function
 * giving every key used so far, read at each line) and a throwing logger cannot break the link.
 */
export function redacting(logger: Logger | undefined, secrets: string | (() => readonly string[])): Required<Logger> {
  const current = typeof secrets === 'string' ? () => [secrets] : secrets
  const call = (level: keyof Logger) => (message: string, fields?: Record<string, unknown>) => {
    const fn = logger?.[level]
    if (!fn) return
    try {
      const keys = current()
      // No second argument when there are no fields: console.log would print `undefined`.
      if (fields === undefined) fn.call(logger, redact(message, keys))
      else fn.call(logger, redact(message, keys), redact(fields, keys))
    } catch {
      // A host's logger must not take the link down.
    }
  }
  return { debug: call('debug'), info: call('info'), warn: call('warn'), error: call('error') }
}
