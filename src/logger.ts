/**
 * The logger a host passes to createLink(): any object with some of debug/info/warn/error
 * (console works). Every line the link logs goes through {@link redacting}, which replaces each
 * API key the link has used wherever it appears, so a key echoed by a server or embedded in a URL
 * never reaches a log.
 *
 * Redaction is for output only: log lines, error messages, traces and inspection events. Values
 * handed to host code (payloads, control signals, reasons) are never rewritten.
 */
import { settleReported } from './emitter.js'
import { isWellFormedText } from './protocol.js'

/**
 * One level of a host's logger, called the way pino and bunyan take structured lines: `(fields,
 * message)` when the line has fields, `(message)` when it has none. The console is recognised
 * and called `(message, fields)` instead, so its output starts with the message. Declared as a
 * method so loggers typed with their own overloads (pino's `LogFn`) are accepted.
 */
export type LogMethod = { bivarianceHack(...line: [fields: Record<string, unknown>, message: string] | [message: string]): void }['bivarianceHack']

/**
 * A structured logger: pino, a bunyan-style logger or `console`; any of debug/info/warn/error,
 * all optional. Fields are a flat object (`generation`, `reason`, `detail`, ...).
 */
export interface Logger {
  debug?: LogMethod
  info?: LogMethod
  warn?: LogMethod
  error?: LogMethod
}

/** How the link logs internally: message first, then fields; {@link redacting} reorders for the host's logger. */
export interface LinkLog {
  debug(message: string, fields?: Record<string, unknown>): void
  info(message: string, fields?: Record<string, unknown>): void
  warn(message: string, fields?: Record<string, unknown>): void
  error(message: string, fields?: Record<string, unknown>): void
}

/** The text that replaces a secret. */
export const REDACTED = '[redacted]'

/**
 * Returns `value` with every occurrence of `secret` (one key, or several: every key a link has
 * used; verbatim, URL-encoded or JSON-escaped, and a clipped run of at least half of a key of
 * {@link SHORT_KEY} characters or more: see minimumRun; and as hex) in its strings replaced by
 * `[redacted]`, and in property names when the key is {@link SHORT_KEY} characters or more;
 * identifier fields of the link's typed values left alone when the key is shorter than
 * {@link SHORT_KEY} (see IDENTIFIER_FIELDS) unless one holds the key whole,
 * copying only when something changes. Iterative (server-supplied payloads can nest thousands of
 * levels deep; recursion would overflow the stack), handles cycles; non-plain objects are kept
 * as they are except Errors, whose message is redacted.
 */
export function redact<T>(value: T, secret: string | readonly string[]): T {
  const forms = formsOf(secret)
  if (forms.length === 0 || !containsSecret(value, forms)) return value
  return replaceSecret(value, forms)
}

/**
 * The forms of a key list, with a copy of the keys they were built from: kept while the list holds
 * those keys in that order. Every key is compared, not only the count and the ends: a link's list
 * only grows or drops its oldest, but a host's list given to redact() may have a key replaced anywhere.
 */
const FORMS = new WeakMap<readonly string[], { keys: readonly string[]; forms: SecretForm[] }>()

/** Every form of every key (see secretForms), built once per key list while it holds the same keys. */
function formsOf(secret: string | readonly string[]): SecretForm[] {
  if (typeof secret === 'string') return buildForms([secret])
  const cached = FORMS.get(secret)
  if (cached !== undefined && sameKeys(cached.keys, secret)) return cached.forms
  const forms = buildForms(secret)
  FORMS.set(secret, { keys: [...secret], forms })
  return forms
}

/** Whether two key lists hold the same keys in the same order. */
function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

function buildForms(secrets: readonly string[]): SecretForm[] {
  const forms: SecretForm[] = []
  for (const one of secrets) {
    if (!one) continue
    for (const form of secretForms(one)) forms.push({ form, needle: form.slice(0, minimumRun(one, form)), long: one.length >= SHORT_KEY })
  }
  return forms
}

/** One form of one key (see secretForms): the text, the least of its start that counts, and whether the key is long (see SHORT_KEY). */
interface SecretForm {
  form: string
  needle: string
  long: boolean
}

/**
 * How many leading characters of a key form count as the key. Server text the link keeps is
 * clipped (see clipText in reasons.ts), and a clip can cut a key that holds a character outside
 * the token set: so for a key of at least {@link SHORT_KEY} characters, any run of at least half
 * of it (and at least SHORT_KEY characters) from its start is redacted, the run taken as long as
 * it goes on matching. A shorter key is redacted only whole.
 */
function minimumRun(secret: string, form: string): number {
  if (secret.length < SHORT_KEY) return form.length
  return Math.min(form.length, Math.max(SHORT_KEY, Math.ceil(form.length / 2)))
}

/**
 * The key as it may be echoed back: verbatim, percent-encoded (`encodeURIComponent`, as in the
 * `api_key` socket param), form-encoded (`+` for a space, as URLSearchParams writes it),
 * JSON-escaped once or twice (a key with `"` or `\\` inside a JSON text, and inside a detail that
 * quotes that text: the adapter's `frame starts "…"`), and as lowercase hex of its UTF-8 bytes
 * (the adapter quotes a binary frame it cannot decode in hex: protocol.ts hexPreview), for a key
 * of {@link SHORT_KEY} characters or more.
 */
function secretForms(secret: string): string[] {
  const json = JSON.stringify(secret).slice(1, -1)
  // A key with half of a character has no percent-encoding (encodeURIComponent throws URIError)
  // and is never sent in a URL; URLSearchParams would write U+FFFD for the half, not the key.
  const inUrl = isWellFormedText(secret) ? [encodeURIComponent(secret), new URLSearchParams({ k: secret }).toString().slice(2)] : []
  const forms = new Set([secret, ...inUrl, json, JSON.stringify(json).slice(1, -1)])
  // Not for a short key: the hex of `e` is `65`, found in any number.
  if (secret.length >= SHORT_KEY) {
    let hex = ''
    for (const byte of new TextEncoder().encode(secret)) hex += byte.toString(16).padStart(2, '0')
    forms.add(hex)
  }
  return [...forms]
}

/**
 * Keys shorter than this (characters) leave the identifier fields of typed values alone: a key
 * `e` must not turn `superseded` into `sup[redacted]rs[redacted]d`. A longer key is redacted there
 * too, since a server payload (an agent.control signal's extra `type` field, say) may echo it.
 */
export const SHORT_KEY = 8

/**
 * Fields that in the link's own typed values (reason kinds, causes, phases and sources, states,
 * close names, the names of ignored events, channel statuses) hold
 * identifiers from this code: a short key that happens to occur inside `superseded` must not turn
 * a reason kind into `sup[redacted]rs[redacted]d` (see {@link SHORT_KEY}).
 */
const IDENTIFIER_FIELDS = new Set(['kind', 'cause', 'phase', 'source', 'closeName', 'outcome', 'state', 'previous', 'type', 'event', 'status'])

/**
 * Fields whose value is the server's (or a host's) data, kept as it came: a supersede's or a
 * control signal's `raw` payload, a frame's `payload`, a reply's `response`. Inside them no field
 * is an identifier of this code, whatever its name: a short key is redacted there as in any text.
 */
const FOREIGN_FIELDS = new Set(['raw', 'payload', 'response'])
const IDENTIFIER = /^[a-z][a-z0-9_.\- ]{0,47}$/i

function isPlain(value: object): boolean {
  const proto = Object.getPrototypeOf(value)
  return Array.isArray(value) || proto === Object.prototype || proto === null
}

function containsSecret(root: unknown, forms: readonly SecretForm[]): boolean {
  const holds = (text: string) => forms.some((f) => text.includes(f.needle))
  const longForms = forms.filter((f) => f.long)
  const stack: unknown[] = [root]
  const seen = new Set<object>()
  while (stack.length > 0) {
    const value = stack.pop()
    if (typeof value === 'string') {
      if (holds(value)) return true
      continue
    }
    if (!value || typeof value !== 'object' || seen.has(value)) continue
    seen.add(value)
    if (value instanceof Error) {
      if (holds(value.message)) return true
      continue
    }
    if (!isPlain(value)) continue
    for (const [k, v] of Object.entries(value)) {
      // A property name may be server text too (a payload keyed by a key, a map keyed by topic).
      if (longForms.some((f) => k.includes(f.needle))) return true
      stack.push(v)
    }
  }
  return false
}

/**
 * `text` with every match of any form replaced: at every place a form's needle occurs, the
 * match runs as long as the text goes on following that form; overlapping matches (a verbatim
 * key's head inside its percent-encoded echo, an older key's shared prefix inside the current
 * key, a needle that overlaps itself) are merged, so the longest reading of each place wins.
 */
function redactText(text: string, forms: readonly SecretForm[]): string {
  const spans: Array<[number, number]> = []
  for (const { form, needle } of forms) {
    for (let at = text.indexOf(needle); at >= 0; at = text.indexOf(needle, at + 1)) {
      let end = at + needle.length
      while (end < text.length && end - at < form.length && text[end] === form[end - at]) end++
      spans.push([at, end])
    }
  }
  if (spans.length === 0) return text
  spans.sort((a, b) => a[0] - b[0] || b[1] - a[1])
  let out = ''
  let from = 0
  let [start, end] = spans[0]!
  for (const [s, e] of spans.slice(1)) {
    if (s < end) {
      end = Math.max(end, e)
      continue
    }
    out += text.slice(from, start) + REDACTED
    from = end
    ;[start, end] = [s, e]
  }
  return out + text.slice(from, start) + REDACTED + text.slice(end)
}

function replaceSecret<T>(root: T, forms: readonly SecretForm[]): T {
  const longForms = forms.filter((f) => f.long)
  const shortForms = forms.filter((f) => !f.long)
  const copies = new Map<object, unknown>()
  const copyOf = (value: unknown, foreign: boolean): unknown => {
    if (typeof value === 'string') return redactText(value, forms)
    if (!value || typeof value !== 'object') return value
    if (value instanceof Error) {
      const message = redactText(value.message, forms)
      if (message === value.message) return value
      const copy = new Error(message)
      copy.name = value.name
      return copy
    }
    if (!isPlain(value)) return value
    const existing = copies.get(value)
    if (existing) return existing
    const copy: unknown = Array.isArray(value) ? [] : Object.create(Object.getPrototypeOf(value) as object | null)
    copies.set(value, copy)
    work.push([value, copy as Record<string, unknown>, foreign])
    return copy
  }
  const work: Array<[object, Record<string, unknown>, boolean]> = []
  const result = copyOf(root, false)
  while (work.length > 0) {
    const [source, target, foreign] = work.pop()!
    for (const [k, v] of Object.entries(source)) {
      // A short key leaves the identifiers of typed values alone unless one is the key whole; a
      // long one is redacted there too. Server data (FOREIGN_FIELDS) has no identifiers of ours.
      const value =
        !foreign && IDENTIFIER_FIELDS.has(k) && typeof v === 'string' && IDENTIFIER.test(v)
          ? shortForms.some((f) => f.form === v)
            ? REDACTED
            : redactText(v, longForms)
          : copyOf(v, foreign || FOREIGN_FIELDS.has(k))
      // Property names are structure (`kind`, `reason`) that a short key must not rename, but a
      // name may be server text (a payload keyed by a key, a map keyed by topic): a long key is
      // redacted there.
      target[longForms.length > 0 ? redactText(k, longForms) : k] = value
    }
  }
  return result as T
}

/** The log of a link given no logger: one for every such link. */
const SILENT: LinkLog = Object.freeze({ debug: () => {}, info: () => {}, warn: () => {}, error: () => {} })

/**
 * Wraps a logger so every message and field is redacted of the secrets (a key, or a function
 * giving every key used so far, read at each line), each line reaches it in its own argument
 * order ({@link LogMethod}), and a throwing logger cannot break the link.
 */
export function redacting(logger: Logger | undefined, secrets: string | (() => readonly string[])): LinkLog {
  // No logger: one silent log for every link (nothing to redact, nothing to keep per link).
  if (logger === undefined) return SILENT
  const current = typeof secrets === 'string' ? () => [secrets] : secrets
  // The console prints its arguments in order: the message first reads better there. A console is
  // anything with the console's own surface (the global one, node:console `new Console(stream)`, a
  // test runner's replacement: table, group and dir, which pino and bunyan do not have), or an
  // object holding the global console's own methods (`{ info: console.info }`).
  const consoleRef = (globalThis as unknown as { console?: Record<string, unknown> }).console
  const surface = logger as Record<string, unknown> | undefined
  let isConsole = false
  try {
    isConsole = surface !== undefined && ['table', 'group', 'dir'].every((name) => typeof surface[name] === 'function')
  } catch {
    // A getter of the logger that throws: not the console's surface.
  }
  const call = (level: keyof Logger) => (message: string, fields?: Record<string, unknown>) => {
    try {
      // Read at each line, inside the guard: a logger whose method reads throw (a getter, a revoked
      // proxy) loses the line and never breaks the link.
      const fn = logger?.[level] as ((...args: unknown[]) => void) | undefined
      if (!fn) return
      const messageFirst = isConsole || fn === consoleRef?.[level]
      const keys = current()
      // No second argument when there are no fields: console.log would print `undefined`.
      let result: unknown
      if (fields === undefined) result = fn.call(logger, redact(message, keys))
      else if (messageFirst) result = fn.call(logger, redact(message, keys), redact(fields, keys))
      else result = fn.call(logger, redact(fields, keys), redact(message, keys))
      // An async logger's rejection is dropped as its throw is: it has nowhere else to be told.
      settleReported(result, () => {})
    } catch {
      // A host's logger must not take the link down.
    }
  }
  return { debug: call('debug'), info: call('info'), warn: call('warn'), error: call('error') }
}
