/**
 * The shape of createLink()'s options as a zod schema, checked before anything else: strict
 * at configuration, so a typo or a wrong type fails at createLink() with the option's name.
 */
import { z } from 'zod'
import { ConfigurationError } from './errors/configuration-error.js'

const fn = (what: string) => z.custom<(...args: never[]) => unknown>((v) => typeof v === 'function', `${what} must be a function`)

/** createLink() options, as checked (the policy is checked field by field by resolvePolicy). */
export const LinkOptionsSchema = z
  .object({
    url: z.string({ error: 'url must be a string such as wss://platform.example/socket' }),
    agentId: z.string({ error: 'agentId must be a string' }).min(1, 'agentId must be a non-empty string'),
    apiKey: z.union([z.string().min(1, 'apiKey must be a non-empty string'), fn('apiKey')], {
      error: (issue) => (typeof issue.input === 'string' ? 'apiKey must be a non-empty string' : 'apiKey must be a string or a function returning one'),
    }),
    policy: z.record(z.string(), z.unknown()).optional(),
    logger: z
      .object({ debug: fn('logger.debug').optional(), info: fn('logger.info').optional(), warn: fn('logger.warn').optional(), error: fn('logger.error').optional() })
      .loose()
      .optional(),
    inspect: z.union([fn('inspect'), z.object({ next: fn('inspect.next') }).loose()]).optional(),
    onControl: fn('onControl').optional(),
    apiKeyIn: z.enum(['header', 'param']).optional(),
    onConflict: z.enum(['supersede', 'reject']).optional(),
    params: z
      .union([z.record(z.string(), z.string()), fn('params')], { error: 'params must be an object of string values, or a function returning one' })
      .optional(),
    allowInsecureTransport: z.boolean().optional(),
    env: z.object({ now: fn('env.now').optional(), monotonic: fn('env.monotonic').optional(), random: fn('env.random').optional() }).strict().optional(),
    clock: z.object({ setTimeout: fn('clock.setTimeout'), clearTimeout: fn('clock.clearTimeout') }).loose().optional(),
  })
  .strict()

/**
 * Checks createLink() options.
 *
 * @throws {ConfigurationError} naming the first option that is missing, unknown or of the wrong type.
 */
export function checkOptions(options: unknown): void {
  const parsed = LinkOptionsSchema.safeParse(options)
  if (parsed.success) return
  const issue = parsed.error.issues[0]!
  const where = issue.path.length > 0 ? issue.path.join('.') : 'options'
  const message =
    issue.code === 'unrecognized_keys'
      ? `unknown option ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}; see createLink() in the README`
      : issue.message.startsWith(where)
        ? issue.message
        : `${where}: ${issue.message}`
  throw new ConfigurationError(message)
}
