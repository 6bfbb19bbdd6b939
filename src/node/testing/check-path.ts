/**
 * The shape of a lifecycle path, checked before a run does anything: a path is data a user may
 * edit, store, or build by hand, and a step the runner cannot carry out must fail with the step
 * and the field named, not be skipped (an unknown stimulus type), read as another (an unknown
 * delivery), or turn the clock to NaN (an unknown delay).
 */
import * as z from 'zod/mini'
import { LINK_STATES } from '../../../machines/status.js'
import { describeIssue } from '../../zod-issues.js'
import { SendableCloseCode } from '../server/control-api.js'
import type { LifecyclePath } from './paths.js'
import type { LifecycleStimulus } from './stimuli.js'

const Topic = z.literal('control', { error: 'expected "control" (the kit answers the control channel only)' })
const Whole = (min: number, max = Number.MAX_SAFE_INTEGER) => z.number().check(z.int(), z.gte(min), z.lte(max))

/** Every {@link LifecycleStimulus} (stimuli.ts), strict: a field the runner would not read is refused. */
const Stimulus = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('upgrade.accept') }),
  z.strictObject({ type: z.literal('upgrade.refuse'), status: Whole(400, 599), retryAfterS: z.optional(Whole(0)) }),
  z.strictObject({ type: z.literal('upgrade.drop') }),
  z.strictObject({ type: z.literal('server.close'), code: SendableCloseCode }),
  z.strictObject({ type: z.literal('server.drop') }),
  z.strictObject({ type: z.literal('server.reset') }),
  z.strictObject({ type: z.literal('server.stall') }),
  z.strictObject({ type: z.literal('server.supersede') }),
  z.strictObject({ type: z.literal('server.malformed'), data: z.string() }),
  // One `type`, two shapes: told apart by `status`.
  z.discriminatedUnion(
    'status',
    [
      z.strictObject({ type: z.literal('join.reply'), topic: Topic, status: z.literal('ok') }),
      z.strictObject({ type: z.literal('join.reply'), topic: Topic, status: z.literal('error'), reason: z.string() }),
    ],
    { error: 'expected status "ok", or "error" with a reason' },
  ),
  z.strictObject({ type: z.literal('channel.error'), topic: Topic }),
  z.strictObject({ type: z.literal('channel.close'), topic: Topic }),
  z.strictObject({ type: z.literal('control.signal'), delivery: z.enum(['once', 'duplicate', 'handler-throws', 'queued']) }),
  z.strictObject({
    type: z.literal('clock.advance'),
    delay: z.enum(['backoff', 'controlRejoin', 'connectTimeout', 'joinTimeout', 'leaveTimeout']),
    ms: z.nullable(z.number()),
  }),
  z.strictObject({ type: z.literal('host.connect') }),
  z.strictObject({ type: z.literal('host.disconnect') }),
  z.strictObject({ type: z.literal('host.cancelWait') }),
  z.strictObject({
    type: z.literal('adapter.late'),
    what: z.enum(['stale close', 'late supersede', 'stale supersede', 'ambiguous supersede', 'earlier-session supersede']),
    event: z.looseObject({ type: z.string() }),
  }),
  z.strictObject({ type: z.literal('await'), what: z.string() }),
])

// Every stimulus the vocabulary's type allows is one the schema takes, and the other way round: a
// member added to one and not the other fails to compile.
const _typeToSchema = (s: LifecycleStimulus): z.infer<typeof Stimulus> => s
const _schemaToType = (s: z.infer<typeof Stimulus>): LifecycleStimulus => s
void _typeToSchema
void _schemaToType

const Expectation = z.strictObject({
  state: z.enum(LINK_STATES as unknown as [string, ...string[]]),
  // The connection chart's state value: a state name, or an object of them.
  chartState: z.union([z.string(), z.record(z.string(), z.unknown())]),
  reason: z.nullable(z.string()),
  code: z.nullable(z.number()),
  generation: Whole(0),
  epoch: Whole(0),
})

// Loose at the top: `phoenix-link paths --json` prints each path with `chart`, `mode` and `index`
// beside it, and such a line is a path the kit runs. Its steps are strict.
const Path = z.looseObject({
  name: z.string(),
  steps: z.array(z.strictObject({ name: z.string(), stimulus: Stimulus, expect: Expectation })).check(z.minLength(1, { error: 'expected at least one step' })),
})

/** The stimulus types a path may hold (the `type` of each {@link LifecycleStimulus}), as the union above knows them. */
const TYPES = [...(Stimulus._zod.propValues.type ?? [])].map(String)

/**
 * Throws unless `path` is a {@link LifecyclePath} the runner can carry out: a `name`, at least one
 * step, each with a `name`, a stimulus of the vocabulary (stimuli.ts) with exactly its fields, and
 * an expectation (`state` a link state, `generation` and `epoch` whole numbers).
 *
 * @throws {TypeError} naming the path, the step (1-based, with its name) and the field, e.g.
 *   `path "host connect > upgrade sent > open", step 3 (open): stimulus.type: expected one of "upgrade.accept" | …`.
 */
export function checkPath(path: unknown): asserts path is LifecyclePath {
  if (path === null || typeof path !== 'object' || Array.isArray(path)) {
    throw new TypeError(`the path must be a lifecycle path object ({ name, steps }, from lifecyclePaths()), got ${path === null ? 'null' : Array.isArray(path) ? 'an array' : typeof path}`)
  }
  const parsed = Path.safeParse(path, { reportInput: true })
  if (parsed.success) return
  const issue = parsed.error.issues[0]!
  const name = typeof (path as { name?: unknown }).name === 'string' ? JSON.stringify((path as { name: string }).name) : '(unnamed)'
  const [first, index, ...field] = issue.path
  let where = `path ${name}`
  let at = issue.path.join('.')
  if (first === 'steps' && typeof index === 'number') {
    const step = (path as { steps: unknown[] }).steps[index] as { name?: unknown } | undefined
    where += `, step ${index + 1}${typeof step?.name === 'string' ? ` (${step.name})` : ''}`
    at = field.join('.')
  }
  // A discriminated union names no field when the discriminator itself is unknown.
  const unknownType = issue.code === 'invalid_union' && field[0] === 'stimulus' && (field.length === 1 || (field.length === 2 && field[1] === 'type'))
  const message = unknownType
    ? `stimulus.type: expected one of ${TYPES.map((t) => JSON.stringify(t)).join(' | ')}`
    : at === ''
      ? describeIssue(issue) // the step itself, or the path itself, is what is wrong
      : `${at}: ${describeIssue(issue)}`
  throw new TypeError(`${where}: ${message}`)
}
