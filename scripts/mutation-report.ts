/**
 * Writes docs/mutation.md from Stryker's JSON report (reports/mutation/mutation.json): the score
 * per file, and every surviving or uncovered mutant grouped by the declaration it sits in (read
 * with the TypeScript compiler API), with why that group survives. A group without a reason is
 * listed as unexplained.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import ts from 'typescript'

interface Mutant {
  mutatorName: string
  replacement?: string
  status: string
  location: { start: { line: number; column: number } }
}

const report = JSON.parse(readFileSync(new URL('../reports/mutation/mutation.json', import.meta.url), 'utf8')) as {
  files: Record<string, { source: string; mutants: Mutant[] }>
}

/** Why the mutants of a declaration survive, by `file#declaration`. */
const WHY: Record<string, string> = {
  'machines/connection.ts#connectionMachine.guards.isOwnConflict':
    'equivalent: only a refused upgrade (409) is ever `rejected` with cause `conflict` (no join error or close code maps to it), so dropping the kind or phase half, or the `?.` on a reason that is never null in `lost`, changes nothing; the cause, the window and the first-connection checks are each killed',
  'machines/presence.ts#presenceMachine.actions.reportLast':
    'equivalent: `lastClose` is always set when the count reaches zero (rememberClose runs on the same transition), so its fallbacks and its reset are never read; every field of the event is checked',
  'machines/presence.ts#presenceMachine.actions.rememberClose': 'equivalent: the action runs only on presence.closed, so its event-type test is always true',
  'machines/presence.ts#presenceMachine.actions.reportIgnored': 'the fallback for an event without a connection id: every event that reaches it carries one',
  'machines/presence.ts#validatePresencePolicy': 'the message of a configuration error',
  'src/reasons.ts#describeReason': 'human-readable text; each kind is checked by test/unit/reasons-details.test.ts, the rest of the wording is free to change',
  'src/reasons.ts#safeJson': 'diagnostic text of an unclassifiable payload; only its presence matters',
  'src/reasons.ts#classifyControlChannelLoss': 'the detail text of a control channel loss; the kind, source and retryability are checked',
  'src/reasons.ts#classifyChannelClose': 'the detail text of a phx_close; the kind is checked',
  'src/reasons.ts#classifyClose': 'detail and message text; every code\'s kind and retryability is checked (test/unit/reasons.test.ts)',
  'src/reasons.ts#classifyUpgrade': 'text of the body or detail kept for diagnostics; status to cause and retryability are checked',
  'src/reasons.ts#classifyJoinError': 'text of the detail; the causes and retryability are checked',
  'src/reasons.ts#classifySupersede': 'lenient reading of odd payload fields; every supersede is terminal whatever they hold, which is checked',
  'src/reasons.ts#parseRetryAfter': 'equivalent forms of the same parse (e.g. trimming before a digit-only test)',
  'src/reasons.ts#CLOSE_CODES': 'the names of codes are text; kinds are checked per code',
  'src/reasons.ts#UPGRADE_STATUSES': 'rows whose status the tests drive only through the generic 5xx rule',
  'src/reasons.ts#JOIN_ERRORS': 'synonym rows (forbidden, invalid_token, too_many_requests...) with the same cause as a tested row',
  'machines/connection.ts#connectionMachine.actions.reportIgnored': 'the wording of an ignored report (which of three causes it names); that a report is made is checked',
  'machines/connection.ts#connectionMachine.actions.recordActorFailure': 'text of an adapter-failure reason',
  'machines/connection.ts#connectionMachine.actions.dropFailedChannel': 'reached only by an adapter bug; one case is tested in test/machines/connection.test.ts',
  'machines/connection.ts#connectionMachine.actions.forwardToChannel':
    'defensive checks and the exact forwarded event: the pure tests see that an event is forwarded, the wire tests (channels, model channel paths) that the right one arrives; they are not run per mutant',
  'machines/connection.ts#connectionMachine.actions.attachNewChannel': 'the transport.up sent to a channel registered while connected: checked by the channel wire paths, not run per mutant',
  'machines/connection.ts#connectionMachine.actions.detachChannels': 'transport.down to channels: checked by the channel wire paths, not run per mutant',
  'machines/connection.ts#connectionMachine.actions.attachChannels': 'transport.up to channels: checked by the channel wire paths, not run per mutant',
  'machines/connection.ts#connectionMachine.actions.forgetFinishedChannel': 'defensive checks (an unknown topic, a status that is not final)',
  'machines/connection.ts#connectionMachine.actions.announceDuplicate': 'publishing a report to the link: checked by the wire tests, not run per mutant',
  'machines/connection.ts#connectionMachine.actions.announceControlDropped': 'publishing a report to the link: checked by the wire tests, not run per mutant',
  'machines/connection.ts#connectionMachine.actions.announceHandlerFailed': 'publishing a report to the link: checked by the wire tests, not run per mutant',
  'machines/connection.ts#connectionMachine.actions.announceRetry': 'fields of the disconnected event: checked by the wire tests, not run per mutant',
  'machines/connection.ts#connectionMachine.actions.enqueueControlSignal': 'a defensive event-type check and the epoch passed along: checked by the wire tests, not run per mutant',
  'machines/connection.ts#connectionMachine.actions.tellReconnectLost': 'the reason handed to the reconnect chart: its floors are checked by the wire tests, not run per mutant',
  'machines/connection.ts#connectionMachine.actions.recordRetry': 'a defensive event-type check',
  'machines/connection.ts#connectionMachine.actions.recordGiveUp': 'a defensive event-type check',
  'machines/connection.ts#connectionMachine.guards.isTerminalLoss': 'equivalent: lastReason is never null in `lost`',
  'machines/connection.ts#connectionMachine.guards.isCurrentTransport': 'equivalent: the `epoch in event` test is implied by the events that reach the guard',
  'machines/connection.ts#connectionMachine.guards.isNewChannel': 'a defensive `topic in event` test',
  'machines/connection.ts#connectionMachine (state config)': 'descriptions and rule tags of states and transitions (documentation), and the default policies of the input',
  'machines/channel.ts#channelMachine (state config)': 'descriptions of states: documentation',
  'machines/channel.ts#channelMachine.actions.recordAttachmentFailure': 'text of an adapter-failure reason',
  'machines/channel.ts#channelMachine.actions.recordCrash': 'text and fields of a phx_error reason, which the link reports but no rule reads',
  'machines/channel.ts#channelMachine.actions.attach': 'a defensive event-type check',
  'machines/channel.ts#channelMachine.actions.recordEventReason': 'a defensive fallback',
  'machines/channel.ts#channelMachine.delays.rejoinDelay': 'the jitter formula of channel rejoins (half fixed, half random): no rule fixes it; the wire tests only need a finite delay',
  'machines/channel.ts#channelMachine.guards.isCurrentAttempt': 'the `attachId in event` test and the generation half: attach ids alone already tell attempts apart',
  'machines/channel.ts#statusReport': 'which statuses carry a reason: the link keeps its own (src/link-channel.ts)',
  'machines/reconnect.ts#reconnectMachine (state config)': 'descriptions of states: documentation',
  'machines/reconnect.ts#reconnectMachine.actions.countLoss': 'a defensive event-type check',
  'machines/reconnect.ts#reconnectMachine.actions.chooseDelay': 'the fallback for a missing loss, which cannot happen in `deciding`',
  'machines/reconnect.ts#reconnectMachine.actions.reportRapidGiveUp': 'the generation stamp of the suppressed reason',
  'machines/reconnect.ts#reconnectMachine.actions.reportAttemptGiveUp': 'the generation stamp of the suppressed reason',
  'machines/reconnect.ts#backoffDelay': 'boundary forms of the jitter and floor arithmetic (floor vs round, a zero Retry-After); the floors and ceilings are checked',
  'machines/control.ts#controlMachine (state config)': 'descriptions of states: documentation',
  'machines/control.ts#controlMachine.actions.reportDuplicate': 'fields of a report the link turns into an ignored event',
  'machines/control.ts#controlMachine.actions.reportHandlerFailed': 'fields of a report the link logs',
  'machines/control.ts#controlMachine.actions.reportAllDropped': 'a report the link turns into ignored events: checked by the wire tests, not run per mutant',
  'machines/control.ts#controlMachine.actions.reportWaitingDropped': 'a report the link turns into ignored events: checked by the wire tests, not run per mutant',
  'machines/control.ts#controlMachine.actions.enqueue': 'defensive event-type checks and the dedupe window edge (0)',
  'machines/control.ts#controlMachine.guards.isDuplicate': 'a defensive event-type check',
  'machines/control.ts#controlMachine.guards.hasWaiting': 'equivalent: with one signal, dropping the waiting ones drops nothing',
  'machines/control.ts#forget': 'equivalent shortcut: filtering by an empty set changes nothing',
  'machines/control.ts#correlationOf': 'the empty-string case; null and strings are checked',
  'src/reasons.ts#closeCodeName': 'a helper for hosts (names a code); the charts and tests read the table directly',
  'machines/types.ts#assertMs': 'the message of a configuration error',
  'machines/reconnect.ts#validateReconnectPolicy': 'messages of configuration errors',
  'machines/connection.ts#validateConnectionPolicy': 'messages of configuration errors',
  'machines/channel.ts#validateChannelPolicy': 'messages of configuration errors',
  'machines/status.ts#linkStateOf': 'the message of an error the chart cannot cause',
  'machines/connection.ts#connectionMachine.actors.transport': 'a placeholder that tells a user to provide the adapter; never run by the link',
  'machines/connection.ts#connectionMachine.actors.controlChannel': 'a placeholder that tells a user to provide the adapter; never run by the link',
  'machines/channel.ts#channelMachine.actors.attachment': 'a placeholder that tells a user to provide the adapter; never run by the link',
  'machines/control.ts#controlMachine.actors.deliverSignal': 'a placeholder that tells a user to provide the handler; never run by the link',
  'machines/connection.ts#connectionMachine.actions.spawnChannel': 'a defensive event-type check and the spawned input (policy, env) the pure tests do not read',
  'machines/channel.ts#channelMachine.actions.countRejoin': 'the rejoin count only scales the rejoin delay (see rejoinDelay)',
}

/**
 * The unit a mutant sits in: a top-level declaration, or for a chart an action, guard, delay or
 * actor of its setup() by name (`connectionMachine.actions.forwardToChannel`).
 */
function declarationAt(fileName: string, source: string, line: number, column: number): string {
  const sf = ts.createSourceFile(fileName, source, ts.ScriptTarget.ES2022, true)
  const position = sf.getPositionOfLineAndCharacter(line - 1, Math.max(0, column - 1))
  const chain: ts.Node[] = []
  const visit = (node: ts.Node) => {
    if (position < node.getStart(sf) || position >= node.getEnd()) return
    chain.push(node)
    node.forEachChild(visit)
  }
  visit(sf)
  const top = chain.find((n) => (ts.isFunctionDeclaration(n) || ts.isVariableDeclaration(n)) && n.name)
  const topName = top && (top as ts.VariableDeclaration).name ? (top as ts.VariableDeclaration).name.getText(sf) : '(module)'
  for (let i = 0; i < chain.length; i++) {
    const node = chain[i]!
    if (ts.isPropertyAssignment(node) && /^(actions|guards|delays|actors)$/.test(node.name.getText(sf))) {
      const member = chain.slice(i + 1).find((n) => ts.isPropertyAssignment(n) || ts.isMethodDeclaration(n)) as ts.PropertyAssignment | undefined
      if (member) return `${topName}.${node.name.getText(sf)}.${member.name.getText(sf).replace(/'/g, '')}`
    }
  }
  if (/Machine$/.test(topName)) return `${topName} (state config)`
  return topName
}

const lines: string[] = [
  '<!-- Generated by `npm run mutate` (Stryker, then scripts/mutation-report.ts). Do not edit by hand. -->',
  '',
  '# Mutation testing',
  '',
  'Stryker 9 mutates machines/ and src/reasons.ts and runs, against each mutant, the pure chart tests,',
  'the classification tables and the generated paths replayed with their rule oracles',
  '(vitest.mutation.config.ts). `npm run mutate` reruns it and rewrites this file.',
  '',
  '| file | mutants | killed | timeout | survived | no coverage | score |',
  '|---|---|---|---|---|---|---|',
]
const groups = new Map<string, Mutant[]>()
let total = { all: 0, killed: 0, timeout: 0, survived: 0, noCoverage: 0 }
for (const [file, data] of Object.entries(report.files).sort()) {
  const count = (status: string) => data.mutants.filter((m) => m.status === status).length
  const killed = count('Killed')
  const timeout = count('Timeout')
  const survived = count('Survived')
  const noCoverage = count('NoCoverage')
  const all = data.mutants.filter((m) => m.status !== 'Ignored').length
  total = { all: total.all + all, killed: total.killed + killed, timeout: total.timeout + timeout, survived: total.survived + survived, noCoverage: total.noCoverage + noCoverage }
  lines.push(`| ${file} | ${all} | ${killed} | ${timeout} | ${survived} | ${noCoverage} | ${(((killed + timeout) / Math.max(1, all)) * 100).toFixed(1)}% |`)
  for (const m of data.mutants) {
    if (m.status !== 'Survived' && m.status !== 'NoCoverage') continue
    const key = `${file}#${declarationAt(file, data.source, m.location.start.line, m.location.start.column)}`
    groups.set(key, [...(groups.get(key) ?? []), m])
  }
}
lines.push(
  `| **all** | ${total.all} | ${total.killed} | ${total.timeout} | ${total.survived} | ${total.noCoverage} | **${(((total.killed + total.timeout) / Math.max(1, total.all)) * 100).toFixed(1)}%** |`,
  '',
  '## Surviving and uncovered mutants, by declaration',
  '',
  '| declaration | survived | no coverage | why |',
  '|---|---|---|---|',
)
for (const [key, mutants] of [...groups.entries()].sort((a, b) => b[1].length - a[1].length)) {
  const survived = mutants.filter((m) => m.status === 'Survived').length
  lines.push(`| ${key} | ${survived} | ${mutants.length - survived} | ${WHY[key] ?? '**unexplained**'} |`)
}
writeFileSync(new URL('../docs/mutation.md', import.meta.url), `${lines.join('\n')}\n`)
process.stdout.write(`wrote docs/mutation.md: score ${(((total.killed + total.timeout) / Math.max(1, total.all)) * 100).toFixed(1)}% of ${total.all} mutants\n`)
