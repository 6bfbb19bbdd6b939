/**
 * Renders docs/lifecycle.md and docs/reasons.md from the source of truth: the shipped charts
 * (states, transitions, guards, delays, rule tags), the policy defaults (values and their JSDoc,
 * read with the TypeScript compiler API) and the classification tables. `npm run docs` writes
 * them; test/unit/docs.test.ts fails when a file is out of date.
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import type { AnyStateMachine } from 'xstate'
import { allNodes, CHARTS, transitionRows } from '../src/model/chart-info.js'
import { DEFAULT_LINK_POLICY } from '../src/policy.js'
import { DEFAULT_PRESENCE_POLICY } from '../machines/presence.js'
import { CLOSE_CODES, DisconnectReason, JOIN_ERRORS, REASON_KINDS, UPGRADE_STATUSES } from '../src/reasons.js'

const root = fileURLToPath(new URL('..', import.meta.url))

export { CHARTS, transitionRows }
/** The charts as a plain record, for iteration by name. */
const CHART_LIST: Record<string, AnyStateMachine> = CHARTS

/** The lifecycle rules, each with the sentence and the tests that fail when it is removed. */
export const RULES: Array<{ id: string; rule: string; tests: Array<[file: string, name: string]> }> = [
  {
    id: 'normal-close-reconnects',
    rule: 'A peer close 1000/1001 (and 1002, 1009, 1011, 1012, 1013, 1006, 3000-4499) reconnects and rejoins every channel; only 1008 and 4500-4999 say the agent is not allowed; only disconnect() stops.',
    tests: [
      ['test/machines/connection.test.ts', 'close 1000 while connected -> reconnecting, never stopped'],
      ['test/wire/normal-closes.test.ts', 'close 1000 -> reconnect with backoff, control and app channels rejoined with fresh join_refs'],
      ['test/unit/reasons.test.ts', 'never reads 1000, 1001 or 1011 as a stop'],
    ],
  },
  {
    id: 'supersede-is-terminal',
    rule: 'A supersede push ends the session for good, while connecting, joining, connected and in the backoff after; the socket is ended; no reconnect follows.',
    tests: [
      ['test/machines/connection.test.ts', 'while the backoff (waiting): terminated with the superseded reason; the transport is stopped'],
      ['test/wire/supersede.test.ts', 'supersede push then close 1000 -> terminated, superseded with the payload fields, no new connection (scenario 9)'],
      ['test/wire/supersede.test.ts', 'supersede in the same read just before the join reply: connect() rejects, never connected (scenario 11)'],
    ],
  },
  {
    id: 'upgrade-rejection-is-terminal',
    rule: 'HTTP 400/401/403/409 on the upgrade end the session with rejected; 429 and 503 wait at least Retry-After and retry.',
    tests: [
      ['test/machines/connection.test.ts', 'HTTP 403 -> terminated, rejected'],
      ['test/wire/upgrade.test.ts', 'a wrong API key: HTTP 403 -> rejected(unauthenticated), connect() rejects, no retry (scenario 17)'],
      ['test/wire/upgrade.test.ts', 'HTTP 429 with Retry-After waits at least that long, then retries (scenario 19)'],
    ],
  },
  {
    id: 'stale-events-ignored',
    rule: 'An event from an older transport generation or an earlier session changes nothing; it is reported as ignored.',
    tests: [
      ['test/machines/connection.test.ts', 'a close from the previous transport after the new one opened is ignored and reported'],
      ['test/wire/stale.test.ts', 'a close from the previous transport after the new one opened is ignored and reported (scenario 28)'],
      ['test/wire/stale.test.ts', 'a push carrying an old join_ref is dropped and reported; the handler never sees it (scenario 29)'],
    ],
  },
  {
    id: 'cancel-is-not-stop',
    rule: "Aborting the signal of runForever() or connect() rejects that waiter only; the transport stays up. (Encoded by the link: waits never send host events.)",
    tests: [['test/wire/host.test.ts', 'aborting runForever() rejects that waiter only; the transport stays up; disconnect and connect still work (scenario 21)']],
  },
  {
    id: 'disconnect-always-succeeds',
    rule: 'disconnect() succeeds from every state, is idempotent, and leaves no timer, socket or listener.',
    tests: [
      ['test/machines/connection.test.ts', 'from connecting -> stopped'],
      ['test/wire/host.test.ts', 'during the backoff: stopped at once, no later attempt'],
      ['test/wire/supersede.test.ts', 'after superseded, disconnect() succeeds, sends no leave, logs no warning (scenario 14)'],
    ],
  },
  {
    id: 'control-in-order',
    rule: 'Control signals apply in order, one at a time; a slow handler never delays or drops a supersede or a close.',
    tests: [
      ['test/machines/control.test.ts', 'delivers one at a time, in arrival order, even when the handler is slow'],
      ['test/wire/supersede.test.ts', 'supersede while a slow control handler runs: terminated at once; earlier signals delivered in order; later ones never (scenario 12)'],
    ],
  },
]

/** A policy field as documented in its defaults object. */
export interface PolicyDoc {
  concern: string
  field: string
  value: unknown
  doc: string
  defaultTag: string
}

const POLICY_SOURCES: Record<string, [file: string, constant: string]> = {
  connection: ['machines/connection.ts', 'DEFAULT_CONNECTION_POLICY'],
  reconnect: ['machines/reconnect.ts', 'DEFAULT_RECONNECT_POLICY'],
  channel: ['machines/channel.ts', 'DEFAULT_CHANNEL_POLICY'],
  control: ['machines/control.ts', 'DEFAULT_CONTROL_POLICY'],
  transport: ['src/adapter/phoenix-adapter.ts', 'DEFAULT_TRANSPORT_POLICY'],
  presence: ['machines/presence.ts', 'DEFAULT_PRESENCE_POLICY'],
}

/** Reads every policy field's JSDoc (text and `@default`) from its source file. */
export function policyDocs(): PolicyDoc[] {
  const out: PolicyDoc[] = []
  for (const [concern, [file, constant]] of Object.entries(POLICY_SOURCES)) {
    const source = ts.createSourceFile(file, readFileSync(`${root}/${file}`, 'utf8'), ts.ScriptTarget.ES2022, true)
    let literal: ts.ObjectLiteralExpression | undefined
    source.forEachChild(function visit(node) {
      if (ts.isVariableDeclaration(node) && node.name.getText(source) === constant && node.initializer) {
        let init: ts.Expression = node.initializer
        while (ts.isAsExpression(init) || ts.isSatisfiesExpression(init)) init = init.expression
        if (ts.isObjectLiteralExpression(init)) literal = init
      }
      node.forEachChild(visit)
    })
    if (!literal) throw new Error(`${constant} not found in ${file}`)
    for (const prop of literal.properties) {
      if (!ts.isPropertyAssignment(prop)) continue
      const field = prop.name.getText(source)
      const docs = ts.getJSDocCommentsAndTags(prop).filter(ts.isJSDoc)
      const jsdoc = docs.at(-1)
      const text = ts.getTextOfJSDocComment(jsdoc?.comment)?.replace(/\s+/g, ' ').trim() ?? ''
      const tag = jsdoc?.tags?.find((t) => t.tagName.text === 'default')
      const defaultTag = ts.getTextOfJSDocComment(tag?.comment)?.replace(/\s+/g, ' ').trim() ?? ''
      const value = ({ ...DEFAULT_LINK_POLICY, presence: DEFAULT_PRESENCE_POLICY } as unknown as Record<string, Record<string, unknown>>)[concern]![field]
      out.push({ concern, field, value, doc: text, defaultTag })
    }
  }
  return out
}

const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ')

function table(head: string[], rows: string[][]): string {
  return [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.map(cell).join(' | ')} |`)].join('\n')
}

const HEADER = '<!-- Generated by `npm run docs` from machines/, src/policy.ts and src/reasons.ts. Do not edit by hand. -->'

/** docs/lifecycle.md. */
export function renderLifecycle(): string {
  const parts: string[] = [HEADER, '', '# The lifecycle, as the charts encode it', '']
  parts.push(
    'Each rule below is a guard or transition of a shipped chart (its `meta.rule` tag) and at least one',
    'test that fails when it is removed.',
    '',
  )
  const tagged = new Map<string, string[]>()
  for (const [chart, machine] of Object.entries(CHART_LIST)) {
    for (const row of transitionRows(machine)) {
      if (!row.rule) continue
      const list = tagged.get(row.rule) ?? []
      list.push(`${chart}: ${row.state} on ${row.event}${row.guard ? ` [${row.guard}]` : ''} -> ${row.target}`)
      tagged.set(row.rule, list)
    }
  }
  parts.push(
    table(
      ['rule', 'encoded by', 'tests'],
      RULES.map((r) => [
        `**${r.id}**: ${r.rule}`,
        (tagged.get(r.id) ?? ['the link (src/link.ts)']).join('<br>'),
        r.tests.map(([f, n]) => `${f}: "${n}"`).join('<br>'),
      ]),
    ),
    '',
  )
  for (const [chart, machine] of Object.entries(CHART_LIST)) {
    parts.push(`## ${chart} chart (machines/${chart}.ts)`, '')
    parts.push(
      table(
        ['state', 'what holds', 'invokes'],
        allNodes(machine)
          .filter((n) => n.path.length > 0)
          .map((n) => [
            `${n.path.join('.')}${n.type === 'final' ? ' (final)' : n.type === 'parallel' ? ' (parallel)' : ''}`,
            n.description ?? '',
            (n.invoke ?? []).map((i: { id: string; src: unknown }) => `${i.id}${typeof i.src === 'string' && i.src !== i.id ? ` (${i.src})` : ''}`).join(', '),
          ]),
      ),
      '',
    )
    const rootInvokes = (machine.root.invoke ?? []).map((i: { id: string }) => i.id)
    if (rootInvokes.length > 0) parts.push(`The chart invokes ${rootInvokes.join(', ')} for its whole life.`, '')
    parts.push(
      table(
        ['state', 'event', 'guard', 'target', 'actions', 'rule'],
        transitionRows(machine).map((r) => [r.state, r.event, r.guard, r.target, r.actions, r.rule]),
      ),
      '',
    )
  }
  parts.push(
    '## Policy',
    '',
    'Every number a chart or the adapter waits on; override any of them with `createLink({ policy })` (presence: `startSimulator({ presence })`).',
    '',
  )
  const docs = policyDocs()
  for (const concern of Object.keys(POLICY_SOURCES)) {
    parts.push(`### policy.${concern}`, '')
    parts.push(
      table(
        ['field', 'default', 'meaning and why'],
        docs.filter((d) => d.concern === concern).map((d) => [`\`${d.field}\``, `\`${JSON.stringify(d.value)}\``, `${d.doc}${d.defaultTag.includes('—') ? ` Why: ${d.defaultTag.slice(d.defaultTag.indexOf('—') + 1).trim()}` : ''}`]),
      ),
      '',
    )
  }
  return `${parts.join('\n').trimEnd()}\n`
}

/** docs/reasons.md. */
export function renderReasons(): string {
  const parts: string[] = [HEADER, '', '# DisconnectReason and the classification tables', '']
  parts.push('`DisconnectReason` (src/reasons.ts) is a zod discriminated union on `kind`; every variant has `retryable`, `generation` and `at`.', '')
  parts.push(
    table(
      ['kind', 'retryable', 'fields'],
      DisconnectReason.options.map((o) => {
        const shape = o.shape as Record<string, { def?: { type?: string; values?: unknown[] } }>
        const retry = shape.retryable?.def?.type === 'literal' ? String(shape.retryable.def.values?.[0]) : 'per table'
        return [`\`${String(o.shape.kind.value)}\``, retry, Object.keys(shape).filter((k) => !['kind', 'retryable', 'generation', 'at'].includes(k)).join(', ')]
      }),
    ),
    '',
  )
  parts.push('## Close codes (RFC 6455 section 7.4, IANA registry)', '', 'No close code means "stop". Codes outside every range classify as `other` (retryable).', '')
  parts.push(
    table(
      ['code', 'name', 'reason kind', 'retryable'],
      CLOSE_CODES.map((r) => [
        r.from === r.to ? String(r.from) : `${r.from}-${r.to}`,
        r.name,
        r.outcome.kind === 'rejected' ? `rejected (${r.outcome.cause})` : r.outcome.kind,
        r.outcome.kind === 'rejected' ? 'no' : 'yes',
      ]),
    ),
    '',
  )
  parts.push('## Refused upgrades (HTTP status)', '', 'Other 5xx statuses are `rejected (unavailable)`, retryable; anything else is `other`.', '')
  parts.push(table(['status', 'reason kind', 'retryable'], Object.entries(UPGRADE_STATUSES).map(([s, r]) => [s, `rejected (${r.cause})`, r.retryable ? 'yes, after Retry-After' : 'no'])), '')
  parts.push('## Control channel join errors (`response.reason`)', '', 'Unlisted reasons are `other` (retryable; the rapid-disconnect window ends a server that refuses forever).', '')
  parts.push(table(['reason', 'reason kind', 'retryable'], Object.entries(JOIN_ERRORS).map(([s, r]) => [`\`${s}\``, `rejected (${r.cause})`, r.retryable ? 'yes' : 'no'])), '')
  parts.push(
    '## Other sources',
    '',
    table(
      ['what happened', 'reason'],
      [
        ['`supersede` push on the control channel, any payload', '`superseded`, terminal; payload fields read leniently, the payload kept in `raw`'],
        ['phx_error or phx_close on the control channel', '`dropped` (source `channel`), retried'],
        ['no heartbeat reply within one interval', '`timed-out` (heartbeat), retried'],
        ['no control channel join reply within `connection.joinTimeoutMs`', '`timed-out` (join), retried'],
        ['the socket did not open within `connection.connectTimeoutMs`', '`timed-out` (connect), retried'],
        ['host `disconnect()`', '`graceful`'],
        ['the reconnect chart gave up', '`suppressed` (rapid-disconnects or max-attempts), terminal'],
      ],
    ),
    '',
    `Kinds: ${REASON_KINDS.map((k) => `\`${k}\``).join(', ')}.`,
  )
  return `${parts.join('\n').trimEnd()}\n`
}
