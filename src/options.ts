/**
 * The shape of createLink()'s options as a zod schema, checked before anything else: strict
 * at configuration, so a typo or a wrong type fails at createLink() with the option's name.
 */
import * as z from 'zod/mini'
import { ConfigurationError } from './errors/configuration-error.js'
import { describeIssue } from './zod-issues.js'
import { deepFreeze } from './freeze.js'
import { thrownText } from '../machines/types.js'
import { isWellFormedText, linkParamIn, LONE_SURROGATE_CANNOT_GO_IN } from './protocol.js'
import { SupersededReason } from './reasons.js'

const wellFormed = (what: string, carrier = 'a URL') => z.refine<string>(isWellFormedText, `${what} cannot be sent: ${LONE_SURROGATE_CANNOT_GO_IN} ${carrier}`)

/** A time in milliseconds on env.monotonic, as a link's `supersedeDoubt` gives it. */
const monotonicMs = z.number({ error: 'must be a finite number of milliseconds on env.monotonic' }).check(z.refine(Number.isFinite, 'must be a finite number of milliseconds on env.monotonic'))

const fn = (what: string) => z.custom<(...args: never[]) => unknown>((v) => typeof v === 'function', `${what} must be a function`)

/** createLink() options, as checked (the policy is checked field by field by resolvePolicy). */
export const LinkOptionsSchema = z.strictObject({
  url: z.string({ error: 'url must be a string such as wss://platform.example/socket' }),
  agentId: z.string({ error: 'agentId must be a string' }).check(z.minLength(1, 'agentId must be a non-empty string'), wellFormed('agentId')),
  apiKey: z.union([z.string().check(z.minLength(1, 'apiKey must be a non-empty string'), wellFormed('apiKey', 'a URL or an HTTP header')), fn('apiKey')], {
    error: (issue) => (typeof issue.input === 'string' ? 'apiKey must be a non-empty string' : 'apiKey must be a string or a function returning one'),
  }),
  policy: z.optional(z.record(z.string(), z.unknown())),
  logger: z.optional(
    z.looseObject({
      debug: z.optional(fn('logger.debug')),
      info: z.optional(fn('logger.info')),
      warn: z.optional(fn('logger.warn')),
      error: z.optional(fn('logger.error')),
    }),
  ),
  inspect: z.optional(z.union([fn('inspect'), z.looseObject({ next: fn('inspect.next') })])),
  onControl: z.optional(fn('onControl')),
  apiKeyIn: z.optional(z.enum(['header', 'param'])),
  onConflict: z.optional(z.enum(['supersede', 'reject'])),
  supersedeDoubt: z.optional(
    z.nullable(
      z.strictObject({
        agentId: z.string({ error: 'must be the agent id of the link the doubt came from' }),
        reason: SupersededReason,
        sinceMs: monotonicMs,
        socketLostMs: z.nullable(monotonicMs),
      }),
    ),
  ),
  params: z.optional(
    z.union([z.record(z.string(), z.string().check(wellFormed('a params value'))).check(z.refine((params) => Object.keys(params).every(isWellFormedText), `a params key cannot be sent: ${LONE_SURROGATE_CANNOT_GO_IN} a URL`)), fn('params')], {
      error: 'params must be an object of string values, or a function returning one',
    }),
  ),
  allowInsecureTransport: z.optional(z.boolean()),
  env: z.optional(z.strictObject({ now: z.optional(fn('env.now')), monotonic: z.optional(fn('env.monotonic')), random: z.optional(fn('env.random')) })),
  clock: z.optional(z.looseObject({ setTimeout: fn('clock.setTimeout'), clearTimeout: fn('clock.clearTimeout'), now: fn('clock.now') })),
  tracer: z.optional(z.looseObject({ startSpan: fn('tracer.startSpan') })),
  runs: z.optional(
    z.strictObject({
      hookTimeoutMs: z.optional(
        z.number({ error: 'must be a whole number of milliseconds in [0, 2^31-1]' }).check(
          z.refine((ms) => Number.isInteger(ms) && ms >= 0 && ms <= 2 ** 31 - 1, 'must be a whole number of milliseconds in [0, 2^31-1]'),
        ),
      ),
    }),
  ),
})

/**
 * Checks createLink() options and returns them as read, once: a plain object with each option's
 * value (own or inherited, getters read once), so what was checked is what the link uses, whatever
 * the host's object does later (a getter that changes, a field reassigned).
 *
 * @throws {ConfigurationError} naming the first option that is missing, unknown or of the wrong
 *   type, or whose read threw (a getter, a Proxy); for `params` that set a param the link sets
 *   itself (protocol.ts LINK_PARAMS: agent_id, api_key, on_conflict, vsn).
 */
export function checkOptions<T>(options: T): T {
  const read = readOnce(options)
  let parsed: ReturnType<typeof LinkOptionsSchema.safeParse>
  try {
    parsed = LinkOptionsSchema.safeParse(read, { reportInput: true })
  } catch (error) {
    // A nested option read by the check (env, clock, tracer, policy: a getter, a Proxy) threw.
    throw new ConfigurationError(`reading the options threw: ${thrownText(error)}`, { cause: error })
  }
  if (parsed.success) {
    const { params, supersedeDoubt } = parsed.data
    const taken = params !== undefined && typeof params === 'object' ? linkParamIn(params) : null
    if (taken !== null) throw new ConfigurationError(taken)
    // Data, not a callback: the link keeps the values the check read (zod's copy, copied whole and
    // frozen), so neither a getter read again nor the host's later change reaches the chart.
    if (supersedeDoubt) (read as { supersedeDoubt?: unknown }).supersedeDoubt = deepFreeze(structuredClone(supersedeDoubt))
    return read
  }
  const issue = parsed.error.issues[0]!
  const where = issue.path.length > 0 ? issue.path.join('.') : 'options'
  const message =
    issue.code === 'unrecognized_keys'
      ? `unknown option ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}; see createLink() in the README`
      : describeIssue(issue).startsWith(where)
        ? describeIssue(issue)
        : `${where}: ${describeIssue(issue)}`
  throw new ConfigurationError(message)
}

/** Options the link calls as methods of the host's object, as it always has: they stay bound to it (a class with private state). */
const METHODS = new Set(['apiKey', 'params'])

/** The options object as a plain copy, each option read once; anything but an object is returned as it is, for the schema to refuse. */
function readOnce<T>(options: T): T {
  if (options === null || typeof options !== 'object') return options
  const copy: Record<string, unknown> = {}
  let key = ''
  try {
    for (key of new Set([...Object.keys(options), ...Object.keys(LinkOptionsSchema.shape)])) {
      if (!(key in options)) continue
      const value = (options as Record<string, unknown>)[key]
      // Defined, not assigned: an own `__proto__` key stays a key (refused as unknown), never the copy's prototype.
      Object.defineProperty(copy, key, {
        value: METHODS.has(key) && typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(options) : value,
        enumerable: true,
        writable: true,
        configurable: true,
      })
    }
  } catch (error) {
    const what = key === '' ? 'the options object' : `option ${key}`
    throw new ConfigurationError(`reading ${what} threw: ${thrownText(error)}`, { cause: error })
  }
  return copy as T
}
