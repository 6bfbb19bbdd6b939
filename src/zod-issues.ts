/**
 * A sentence for a zod issue. The link imports `zod/mini` so that a browser bundle carries only
 * the schemas it uses; zod/mini loads no locale, so its own messages read "Invalid input". This
 * writes the English sentence from the issue's fields instead (zod 4 `$ZodIssue`: `code`,
 * `expected`, `values`, `minimum`, `keys`), without changing zod's global config (a host that uses
 * zod keeps its own).
 */
import type { core } from 'zod/mini'

/** What zod/mini puts in `message` when no locale and no custom error applies. */
const GENERIC = 'Invalid input'

/** A JavaScript type name for `value`, as zod's English locale writes it (`null`, `array`, `number`, ...). */
function typeName(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'array'
  return typeof value
}

/**
 * Describes one issue in a sentence, e.g. `expected string, received number`, `expected one of
 * "interrupt" | "stop" | "play"`. A custom message set on the schema is returned as it is.
 * Never throws. Parse with `{ reportInput: true }` to name the received type.
 */
export function describeIssue(issue: core.$ZodIssue): string {
  if (issue.message && issue.message !== GENERIC) return issue.message
  const input = 'input' in issue ? (issue as { input?: unknown }).input : undefined
  switch (issue.code) {
    case 'invalid_type':
      // JSON.parse reads 1e309 as Infinity: a number, but not one a schema of numbers takes.
      if (issue.expected === 'number' && typeof input === 'number') return `expected a finite number, received ${String(input)}`
      return `expected ${issue.expected}, received ${typeName(input)}`
    case 'invalid_value':
      return `expected ${issue.values.length === 1 ? '' : 'one of '}${issue.values.map((v) => JSON.stringify(v)).join(' | ')}`
    case 'too_small':
      return `expected ${issue.origin === 'string' ? 'at least' : '>='} ${String(issue.minimum)}${issue.origin === 'string' ? ' characters' : ''}`
    case 'too_big':
      return `expected ${issue.origin === 'string' ? 'at most' : '<='} ${String(issue.maximum)}${issue.origin === 'string' ? ' characters' : ''}`
    case 'unrecognized_keys':
      return `unknown key${issue.keys.length === 1 ? '' : 's'} ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}`
    case 'invalid_union':
      return 'matches none of the allowed shapes'
    default:
      return `invalid (${issue.code})`
  }
}
