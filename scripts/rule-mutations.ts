/**
 * Breaks each lifecycle rule of docs/design.md on purpose, one at a time (remove a guard, flip a
 * classification, drop the generation check, ...), runs the generated paths and the property
 * runs against the broken code, and records which of them fail. Every rule must make at least one
 * fail. Writes docs/rule-mutations.md; `npm run mutate:rules`. The sources are restored after
 * each run, also on failure.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))

interface RuleMutation {
  rule: string
  how: string
  file: string
  from: string
  to: string
}

const MUTATIONS: RuleMutation[] = [
  {
    rule: 'normal-close-reconnects',
    how: 'flip the classification: close 1000 becomes a refusal',
    file: 'src/reasons.ts',
    from: "{ from: 1000, to: 1000, name: 'normal closure', outcome: { kind: 'closed', retryable: true } }",
    to: "{ from: 1000, to: 1000, name: 'normal closure', outcome: { kind: 'rejected', cause: 'protocol-error' } }",
  },
  {
    rule: 'supersede-is-terminal',
    how: 'remove the session-level supersede transition',
    file: 'machines/connection.ts',
    from: "'control.supersede': {\n          guard: 'isCurrentTransport',",
    to: "'control.supersede.removed': {\n          guard: 'isCurrentTransport',",
  },
  {
    rule: 'upgrade-rejection-is-terminal',
    how: 'remove the guard: no loss is terminal',
    file: 'machines/connection.ts',
    from: 'isTerminalLoss: ({ context }) => context.lastReason !== null && !context.lastReason.retryable,',
    to: 'isTerminalLoss: () => false,',
  },
  {
    rule: 'own-conflict-retries',
    how: 'remove the guard: every 409 is terminal',
    file: 'machines/connection.ts',
    from: "{ guard: 'isOwnConflict', target: 'reconnecting',",
    to: "{ guard: () => false, target: 'reconnecting',",
  },
  {
    rule: 'own-conflict-retries',
    how: 'drop the "a socket of this link was accepted before" check: a 409 on the first upgrade is retried too',
    file: 'machines/connection.ts',
    from: "if (context.lastReason!.cause !== 'conflict' || context.acceptedLostAt === null) return false",
    to: "if (context.lastReason!.cause !== 'conflict') return false",
  },
  {
    rule: 'control-crash-rejoins',
    how: 'a control channel crash is a transport loss again',
    file: 'machines/connection.ts',
    from: "'control.crashed': { guard: 'isCurrentTransport', target: 'controlErrored', meta: { rule: 'control-crash-rejoins' } },",
    to: "'control.crashed': { guard: 'isCurrentTransport', target: '#connection.session.lost', actions: 'recordLoss' },",
  },
  {
    rule: 'suspend-not-give-up',
    how: 'past the rapid limit the chart gives up, whatever the policy',
    file: 'machines/reconnect.ts',
    from: "{ guard: 'isRapidLimitReached', target: 'suspended', actions: ['countSuspension', 'chooseCooldown', 'reportSuspended'] },",
    to: "{ guard: 'isRapidLimitReached', target: 'gaveUp', actions: 'reportRapidGiveUp' },",
  },
  {
    rule: 'retryable-join-refusal-rejoins',
    how: 'every refused join drops the channel, whatever its cause',
    file: 'machines/channel.ts',
    from: "guard: 'isCurrentRetryableRefusal',",
    to: "guard: ({ context }) => context.attachId < 0,",
  },
  {
    rule: 'leave-leaves-the-server',
    how: 'a join forgotten unanswered (timed out, or left while pending) is not left on the wire',
    file: 'src/adapter/phoenix-adapter.ts',
    from: 'else if (joinPending && !handle.ended && socket.isConnected()) {',
    to: 'else if (false) {',
  },
  {
    rule: 'stale-events-ignored',
    how: 'drop the generation check',
    file: 'machines/connection.ts',
    from: 'isCurrentTransport: ({ context, event }) => (event as unknown as Origin).generation === context.generation,',
    to: 'isCurrentTransport: () => true,',
  },
  {
    rule: 'cancel-is-not-stop',
    how: 'aborting a wait stops the link',
    file: 'src/link.ts',
    from: 'const onAbort = () => finish(() => reject(abortError(signal!)))',
    to: "const onAbort = () => finish(() => (this.send({ type: 'host.disconnect' }), reject(abortError(signal!))))",
  },
  {
    rule: 'disconnect-always-succeeds',
    how: 'disconnect() during a session is not handled (only in connected)',
    file: 'machines/connection.ts',
    from: "'host.disconnect': { target: 'stopped', actions: 'recordGraceful', meta: { rule: 'disconnect-always-succeeds' } },",
    to: '',
  },
  {
    rule: 'control-in-order',
    how: 'deliver from the wrong end of the queue (the head is handed over again)',
    file: 'machines/control.ts',
    from: 'dequeue: assign({ queue: ({ context }) => context.queue.slice(1) }),',
    to: 'dequeue: assign({ queue: ({ context }) => context.queue.slice(0, -1) }),',
  },
  {
    rule: 'control-in-order',
    how: 'signals are accepted in every state, after a supersede too',
    file: 'machines/connection.ts',
    from: "    'socket.malformed': { actions: 'reportIgnored' },",
    to: "    'socket.malformed': { actions: 'reportIgnored' },\n    'control.signal': { actions: 'enqueueControlSignal' },",
  },
]

const SUITES = ['test/model/paths.test.ts', 'test/model/pure-paths.test.ts', 'test/model/properties.test.ts', 'test/wire/long-life.test.ts']

function run(): { failed: string[]; summary: string } {
  try {
    execFileSync('npx', ['vitest', 'run', ...SUITES, '--reporter=json', '--outputFile=reports/rule-mutation.json'], { cwd: root, stdio: 'ignore', timeout: 600_000 })
  } catch {
    // a failing run is what a mutation should cause; the JSON says which tests failed
  }
  const json = JSON.parse(readFileSync(`${root}/reports/rule-mutation.json`, 'utf8')) as {
    testResults: Array<{ name: string; assertionResults: Array<{ status: string; fullName: string }> }>
  }
  const failed = json.testResults.flatMap((f) =>
    f.assertionResults.filter((a) => a.status === 'failed').map((a) => `${f.name.replace(`${root}/`, '').replace(root, '')}: ${a.fullName}`),
  )
  const total = json.testResults.reduce((n, f) => n + f.assertionResults.length, 0)
  return { failed, summary: `${failed.length} of ${total} failed` }
}

const lines = [
  '<!-- Generated by `npm run mutate:rules` (scripts/rule-mutations.ts). Do not edit by hand. -->',
  '',
  '# Rule mutations',
  '',
  'Each lifecycle rule broken on purpose; the generated paths (wire and chart-only), the property',
  'runs and the long-life wire tests against the broken code. Every rule makes some of them fail.',
  '',
  '| rule | how it was broken | result | first failures |',
  '|---|---|---|---|',
]
let survivors = 0
for (const m of MUTATIONS) {
  const path = `${root}/${m.file}`
  const original = readFileSync(path, 'utf8')
  const count = original.split(m.from).length - 1
  if (count !== 1) throw new Error(`${m.rule}: the text to mutate occurs ${count} times in ${m.file}; update scripts/rule-mutations.ts`)
  writeFileSync(path, original.replace(m.from, m.to))
  let result: ReturnType<typeof run>
  try {
    result = run()
  } finally {
    writeFileSync(path, original)
  }
  if (result.failed.length === 0) survivors++
  process.stdout.write(`${m.rule}: ${result.summary}\n`)
  lines.push(`| ${m.rule} | ${m.how} (${m.file}) | ${result.failed.length === 0 ? '**survived**' : `killed: ${result.summary}`} | ${result.failed.slice(0, 2).join('<br>').replace(/\|/g, '\\|')} |`)
}
writeFileSync(`${root}/docs/rule-mutations.md`, `${lines.join('\n')}\n`)
process.stdout.write(`wrote docs/rule-mutations.md; ${survivors} rule mutation(s) survived\n`)
process.exitCode = survivors === 0 ? 0 : 1
