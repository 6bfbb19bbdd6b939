/**
 * Writes docs/mutation.md from the mutation runs' reports, one section each, kept as they are
 * when their report is absent (reports/ is not committed):
 * - the charts and the reasons: Stryker's JSON report reports/mutation/mutation.json (`npm run mutate`);
 * - the library's pure parts: reports/mutation/unit.json (`npm run mutate:unit`);
 * - the socket-level parts, sampled: reports/mutation/sampled.json (`npm run mutate:lib`).
 * Each gives the score per file against its goal, and every surviving or uncovered mutant grouped
 * by the declaration it sits in (read with the TypeScript compiler API), with why that group
 * survives. A group without a reason is listed as unexplained.
 */
import { createHash } from 'node:crypto'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import ts from 'typescript'
import type { SampledResults } from './lib-mutations.js'
import { sameCode } from './same-code.js'

interface Mutant {
  mutatorName: string
  replacement?: string
  status: string
  location: { start: { line: number; column: number } }
}

type StrykerReport = { files: Record<string, { source: string; mutants: Mutant[] }> }

function readReport<T>(name: string): T | null {
  const url = new URL(`../reports/mutation/${name}`, import.meta.url)
  return existsSync(url) ? (JSON.parse(readFileSync(url, 'utf8')) as T) : null
}

/** Why the mutants of a declaration survive, by `file#declaration`. */
const WHY: Record<string, string> = {
  'src/link-channel.ts#LinkChannel.waitForJoin':
    "the code of a push whose join never came (`PUSH_TIMEOUT` emptied): the tests timed pushes out only after their join; killed since by test/wire/channels.test.ts \"a push whose join never comes ends PUSH_TIMEOUT at its own timeout\u2026\" (added after the run)",
  'src/link-channel.ts#LinkChannel.setStatus':
    "equivalent: the guard that drops a status reported to a handle already ended (`if (!this.active) return` made false): the link forgets a handle in the very call that ends it (its `link.channel` report, link.ts) and a crash ends only the handles still active, so no status ever reaches an ended handle; a new handle of the topic is another object",
  'src/adapter/phoenix-adapter.ts#LinkSocket.make':
    'equivalent: `writable: false` in the shadowing property (`value: undefined` while phoenix.js\'s Socket constructor runs): nothing assigns `window.addEventListener` in those few synchronous lines, and the property is configurable, so the restore redefines or deletes it either way (the run of 2026-12-05 recorded it killed by the page scenario of test/browser/link.test.ts, which passes with it applied, whole file, by hand: a failure of that scenario under the run\'s load, recorded here as survived). And the property name in the restore of a page\'s own `window.addEventListener` emptied (the page listeners phoenix.js would add are skipped by shadowing it while the Socket is made): survived the wire tests alone, in Node, where no `window` exists; killed by test/browser/link.test.ts "on a page whose window has an addEventListener of its own…" once the adapter\'s sampled run included the browser tests (2026-12-05, `--survivors`)',
  'src/adapter/phoenix-adapter.ts#AttachedChannel.trigger':
    'equivalent: the `attachment === null` early return made false: the adapter sets a channel\'s attachment right after socket.channel() made it (attach()), before the join is sent, and never clears it; phoenix.js\'s Channel constructor triggers nothing, so no trigger() runs while the attachment is null',
  'src/adapter/phoenix-adapter.ts#PhoenixAdapter.endTransport':
    'equivalent: the `?.` of `handle.credentials?.abort()`: the connection chart ends a transport only on leaving `online`, whose entry opened it, once per generation, and openTransport() sets `credentials` before anything can end it (a disconnect() that a synchronous credentials function calls is queued behind the transition in progress); endAll(), which clears it too, runs only once the chart crashed, when no endTransport follows. So `credentials` is never null there',
  'src/adapter/phoenix-adapter.ts#PhoenixAdapter.dropTopic':
    "equivalent from outside: the phx_leave of a crashed channel chart's topic when the server had accepted its join (`true` made `false`). A channel chart crashes only when one of its transitions throws, and the only ones that can (an injected env.now or env.random that throws) run on a phx_error, a phx_close, a join timeout or a failed join attempt, each after the adapter marked the attachment not joined; a joined attachment is left on the wire by this leave only after a phoenix-link bug in a transition of the joined state. A crash with the join still pending is covered: test/wire/hardening.test.ts \"a channel chart's crash drops that channel alone\u2026\"",
  'src/emitter.ts#Emitter.once':
    "the `original` a once() wrapper carries for off(): killed since by test/unit/emitter.test.ts \"off() removes a listener added with on() or once()…\" (added after the run)",
  'src/emitter.ts#Emitter.off':
    "no unit test called off(): killed since by test/unit/emitter.test.ts \"off() removes a listener added with on() or once()…\" and, for the `?.` of an emitter that never had a listener, \"off() on an emitter that never had a listener does nothing\" (added after the run)",
  'machines/types.ts#thrownText':
    'equivalent: the `?.` before `message`: for null or undefined the property read throws into the catch, which falls through to String(), as the `?.` does',
  'machines/reconnect-policy.ts#validateReconnectPolicy':
    'the message for a range given as a function: killed since by test/machines/policies.test.ts "checks %s as a [low, high] range of milliseconds" (a function; added after the run)',
  'machines/channel.ts#channelMachine.guards.isCurrentRetryableRefusal':
    'the attempt check (`attachId === context.attachId` made true): killed since by test/machines/channel.test.ts "a retryable refusal of an earlier join attempt changes nothing…" (added after the run)',
  'src/reasons.ts#wholeWordsOf':
    "equivalent: the `next !== undefined` half of the first test (DELIMITER.test(undefined) reads the text `undefined`, which holds no delimiter); the `end > 0` of either loop made `>= 0` or true: the half-way bound stops the first loop before `end` reaches 0 for every text but the empty one, and at 0 both read `text[-1]`, undefined, which is no delimiter and no token character, so either loop stops there as it would",
  'src/reasons.ts#retryAfterSecondsToMs':
    'equivalent: the `typeof … number` half: Number.isFinite is false for anything that is not a number, so a string still goes to the digits test',
  'src/runtime/chart-runner.ts#ChartRuntime.busy':
    "no coverage in this run: only the link reads it (src/link.ts: a wait or a deferred connect() while the queue is processed), and the wire tests that do are outside the pure test set",
  'src/node/server/admin.ts#AdminApi.openStream':
    'the comment line that opens the event stream (so a proxy passes the headers on at once): event-stream clients skip comments, and the test reads the events',
  'src/node/server/connection.ts#SimConnection.abort':
    "the closed-socket check: killed since by test/wire/simulator-http.test.ts \"recordLimit keeps the most recent frames…; abort() and close() of a closed socket change nothing\" (added after the run: the test an earlier note named was not in the suite)",
  'src/node/server/connection.ts#assertSendableClose':
    "the RangeError's message: killed since by test/wire/simulator-http.test.ts \"bad requests…\" (both messages checked; added after the run)",
  'src/adapter/phoenix-adapter.ts#PhoenixAdapter.openTransport':
    "equivalent: the `!handle.ended` check before opening the socket with settled credentials, made true: a transport that ends aborts its credentials wait (end() calls abort(), whose onGiveUp marks the wait settled, so a late answer is dropped before this callback), and a synchronous answer settles inside openTransport(), before anything can end the transport (a disconnect() the credentials function calls is queued behind the transition in progress). Earlier: the detail of a socket that could not be opened, unreachable from a link (ws throws synchronously only on a URL or a header value the link refuses before it opens anything)",
  'src/adapter/phoenix-adapter.ts#PhoenixAdapter.isExpected':
    "equivalent: the test for a phx_close (`event !== close` for `=== close`) in the branch for a frame of another join of a topic that is being left: no frame meets an attachment marked leaving. leave() marks it, and phoenix.js 1.8.16's channel.leave() answers its own leave `ok` at once (docs/field-notes.md), so its phx_close, and the adapter's channel.left or control.left, come inside that call; the runtime handles that event in the same drain of its queue, which releases an app channel's attachment from its transport (later frames of the topic meet no attachment, isLeaveTail) or, for the control channel, ends the transport (decodeFrame drops every frame of an ended one). The branch, and the `leaving` check of a reply below it, are unreachable with the pinned phoenix.js",
  'src/adapter/phoenix-adapter.ts#errorText':
    "equivalent: the object test made true: for anything that is not an object (a string, a number, null) every field read finds nothing (or throws into the catch), and the function falls through to thrownText(), as it does with the test in place. Earlier: an event-like object's `type`, killed by test/wire/long-life.test.ts \"whatever a params function throws is described in the reason\u2026\"",
  'src/adapter/phoenix-adapter.ts#PhoenixAdapter.runAttachment':
    "the `channel.left` report of a leave before the join params settled (without it the chart waits out its leave timeout): killed since by test/wire/long-life.test.ts \"leave() settles at once (not after the leave timeout)…\" (added after the run)",
  'src/node/server/connection.ts#isSendableCloseCode':
    "the top edge of 3000-4999: killed since by test/wire/simulator-http.test.ts \"bad requests…\" (every edge of the sendable ranges; added after the run)",
  'src/node/server/connection.ts#SimConnection.resume':
    "the stalled check: killed since by test/wire/simulator-http.test.ts \"a stalled socket reads nothing until resume()…\" (no test resumed a stalled socket; added after the run)",
  'src/node/server/control-api.ts#adminAccess':
    "equivalent: the bearer pattern's `$` anchor after a greedy `(.+)` changes nothing, since an HTTP header value holds no line break (Node refuses one)",
  'src/node/server/control-api.ts#ControlApi.handle':
    "equivalent: `req.url ?? '/'` (the query's base when a request has no URL): a request Node's HTTP server hands over always has its URL, so the fallback is never read",
  'src/node/server/simulator.ts#PlatformSimulator.onCrossing':
    'equivalent: a last-disconnected crossing always carries the reason of the close that ended the principal\'s last connection (machines/presence.ts rememberClose runs on that close), so the `unknown` label is never written',
  'src/node/server/simulator.ts#PlatformSimulator.answerHeldJoin':
    'killed since by test/interop/phoenix-client.test.ts "held joins are answered by age: the newest first when asked, then the oldest" (the tests held one join at a time, so oldest and newest were the same; added after the run)',
  'src/node/server/simulator.ts#PlatformSimulator.answerUpgrade':
    "equivalent: the supersede cooldown's `>` for `>=`: the simulator reads performance.now() at each upgrade, and no upgrade arrives at the exact instant (a float in microseconds) the cooldown ends",
  'src/node/server/simulator.ts#PlatformSimulator.receive':
    'both mutants turn off the queueing of frames behind a held join: killed since: a frame behind a held join of the same topic and join_ref is queued until the join is answered, which test/wire/long-life.test.ts "leave() while the join is pending…" reads (that file was outside the sampled run\'s test set; it is in it now)',
  'src/link.ts#Link.channel':
    'killed since by test/wire/hardening.test.ts "reserved topics and URLs with a query or fragment are refused at configuration" (the control topic, null and an array as params: added after the run)',
  'src/link-channel.ts#LinkChannel.on':
    'killed since by test/wire/bad-input.test.ts "an unsubscribe called again after a new handler of the same event was added leaves the new one" (added after the retest: the mutant is the `handlers.get(event) === set` half, which only a second call of an old unsubscribe reaches)',
  'src/link-channel.ts#LinkChannel.push':
    'killed since by test/wire/hardening.test.ts "reserved topics and URLs…" (the exact timeoutMs error, added after the run)',
  'src/link.ts#Link.disconnect':
    "equivalent: the `idle` test in the wait after a stop: a session sent host.disconnect never returns to `idle` (the state before the first connect), so it ends stopped or terminated either way",
  'src/link.ts#Link.onCrash':
    "equivalent: the already-crashed guard: onCrash runs only when a chart other than a channel's fails on the link's runtime (src/runtime/link-charts.ts crashed), and its first call stops every chart (charts.stopAll()), so no second failure can reach it",
  'src/link.ts#Link.runForever':
    "equivalent: `s.epoch > epoch` for `true`, where the wait sees a state of another session: runForever starts a session only from `idle`, where no chart step is under way (nothing runs before the first host.connect), so the runtime handles host.connect at once and the first state the wait sees already carries the new epoch; an older epoch is never seen, and for a newer one both forms are true. The check for another session made false: a session ends through a public state the waiter sees (`stopped`, or `terminated`, which rejects it) before a next session's epoch begins, even when disconnect() and connect() are called in one turn (test/wire/hardening.test.ts \"runForever() of a session that disconnect() and connect() replaced in one turn…\" passes with the check made false); the check guards a waiter against ever reading the next session's states",
  'src/link.ts#Link.constructor':
    "equivalent: the browser's default key place `'param'` emptied: the place is only ever compared with `'header'` (the adapter's upgrade request, the header-value checks), so any other value sends the key as a param. The run that sampled it was Node's alone, which takes the `'header'` branch; test/browser/link.test.ts's Web Worker scenario leaves apiKeyIn out and proves the browser default on the wire. The header check made `apiKeyIn !== 'header'`: in Node, which sends upgrade headers, the check is false either way; in a browser the mutant refuses every key place but 'header', and test/browser/link.test.ts's page and Web Worker (apiKeyIn left out, and 'param') would not connect: killed since by those browser tests, which the link's sampled run includes from 2026-12-05",
  'src/link-channel.ts#LinkChannel.joined':
    "the check of a signal already aborted made false: on a channel already joined, joined() resolved instead of rejecting AbortError; killed since by test/wire/channels.test.ts \"joined() with a signal already aborted rejects AbortError\u2026\" (added after the run)",
  'src/link-channel.ts#LinkChannel.onStatus':
    'no wire test called the unsubscribe onStatus() returns: killed since by test/wire/conventions.test.ts "onStatus() returns an unsubscribe…" (added after the run)',
  'src/link.ts#Link.onChartEmitted':
    'killed since by test/wire/hardening.test.ts "a signal dropped by disconnect() is an ignored report (stopped) and no warning…" (the warning of an overflow given for every drop; added after the run)',
  'src/link.ts#Link.credentials':
    'killed since: the params function is asked at every attempt in test/wire/long-life.test.ts "params may be a function too" and "params that throw while the key is still being fetched…" (that file was outside the sampled run\'s test set; it is in it now), and params left undefined now fail every attempt with a typed reason instead of reading as {}',
  'src/adapter/phoenix-adapter.ts#PhoenixAdapter.leaveControl':
    "equivalent: the `if (attachment)` made true: the connection chart leaves the control channel only on entering `stopping`, which only `connected` (control channel joined on the current transport) leads to, so the current transport always holds the control attachment there; were it missing, leave() of undefined would throw, and the chart takes a failed I/O action in `stopping` to `stopped`, as the leave would have. (An earlier sample's survivor here, phoenix.js's own timer for the control channel's leave made a second shorter, is equivalent too: phoenix.js 1.8.16's channel.leave() answers its own leave push `ok` at once (docs/field-notes.md), which cancels that timer before it can fire; test/wire/normal-closes.test.ts \"disconnect() counts the control channel left once its phx_leave is sent…\" pins that behaviour.)",
  'src/adapter/phoenix-adapter.ts#PhoenixAdapter.settleLater':
    "equivalent: `settled = true` in the timeout's callback made false: the callback then calls the attempt's `abort()`, whose `onGiveUp` (set by settleLater before the timer can fire) sets `settled` itself, so a credentials or params promise that settles after the timeout is ignored either way (test/wire/long-life.test.ts and test/wire/hardening.test.ts time such promises out)",
  'src/adapter/phoenix-adapter.ts#PhoenixAdapter.isJoined':
    "the `?.` before `joined` (an attempt whose join params are still being asked has no attachment yet): no test pushed on a channel in that window, where the mutant throws a TypeError out of push(); killed since by test/wire/channels.test.ts \"a push made while the join params are still being asked waits for the join…\" (added after the run; the mutant applied by hand fails it)",
  'src/adapter/phoenix-adapter.ts#PhoenixAdapter.replyOfOtherStatus':
    "not reached by a test: the wording of the `ignored` detail for a reply of another status (neither ok nor error) to a ref phoenix.js waits for that is neither the join nor a push of the link, which leaves the phx_leave of a joined channel; the simulator answers every phx_leave ok as it reads it, so a test cannot send its ref another status first. What the branch does (report the frame as ignored and drop it) is the join's case, pinned by test/wire/hardening.test.ts \"a join answered with another status is reported…\"",
  'src/adapter/phoenix-adapter.ts#TransportHandle.pingExpired':
    "equivalent: the `this.socket === null` half of the early return made false: a ping is sent only on a transport whose socket is open (PhoenixAdapter.ping() returns false with nothing sent otherwise), and a transport's socket, once set, is never unset, so a ping's timer never finds it null (the check narrows the type for the two lines after it)",
  'src/adapter/phoenix-adapter.ts#TransportHandle.forgetPing':
    "the filter that forgets an answered or expired ping (`other !== ping` made true): the tests never answered a ping's heartbeat twice, so a ping kept after its answer went unseen; killed since by test/wire/ping.test.ts \"an answered ping is forgotten: the server's second reply to its heartbeat answers nothing and is reported as ignored\" (added after the run; the mutant applied by hand fails it)",
  'src/adapter/phoenix-adapter.ts#describeValue':
    "equivalent: the last fallback, `'an object'` emptied: describeValue() is called only for params the check refused, and it reaches that line only for an object that is neither null nor an array, which the check refuses only when one of its values is not a string, so `wrong` is always found and the fallback never read. (The run of 2026-12-07 also drew `'an array'` emptied in `an object with an array at \"a\"`, which the tests missed: no test put an array inside the params. test/wire/long-life.test.ts \"socket params that are not a plain object of strings fail that attempt…\" was added, with an array and a null as values, and killed it in the `--survivors` rerun; the `'null'` mutant applied by hand fails it too.)",
  'src/adapter/phoenix-adapter.ts#PhoenixAdapter.end':
    "equivalent: the `handle.ended` guard of end(): a second end() of one transport finds its attachments already released (release() deleted each from the handle) and calls phoenix.js's disconnect() on a socket already closing or closed, which sends nothing (its connection closes only when not `closing` already) and calls back once the socket is closed, as the first did",
  'src/adapter/ws-transport.ts#readRefusal':
    "equivalent: the Retry-After of an array of headers (`header[0] ?? null` made `header[0] && null`): Node's HTTP client keeps the first of a repeated `retry-after` and discards the others (node lib/_http_incoming.js `matchKnownFields`), so the header is never an array there, and a browser reads no refusal at all. (The `done` latch of an earlier sample, killed since by test/wire/upgrade.test.ts \"a refusal cut short is reported once…\", is no longer in this sample: the source changed and the sample was drawn again on 2026-12-07.)",
  'src/adapter/ws-transport.ts#LinkWebSocket.errored':
    "equivalent: a non-string error code passed on as it is (`typeof code === 'string' ? code : null` made `code`): the hooks compare it with one string only (`WS_ERR_UNSUPPORTED_MESSAGE_LENGTH`, phoenix-adapter.ts `onError`), which undefined or a number never equals, as null does not",
  'src/adapter/ws-transport.ts#LinkWebSocket.closed':
    "equivalent: the once-only guard of the close report (`if (this.#reported) return` made false): in Node ws emits `close` once; in a browser the close bound may report first and the browser's own close later, and a second `onClosed()` changes nothing there either (phoenix-adapter.ts `checkClosed` runs once, its `isClosed` latch set by the first)",
  'src/adapter/ws-transport.ts#LinkWebSocket.finishRequest':
    "equivalent: `!tls` made `tls` in the check for a socket already connected: ws makes a fresh connection for every handshake (no agent; a link passes no `createConnection`), so the socket is always still connecting when the request's `socket` event fires, `!socket.connecting` is false, and the upgrade is reported on `connect` (`secureConnect` over TLS) whichever value the `tls` half has; the check only guards against a connection handed over already open",
  'src/adapter/ws-transport.ts#LinkWebSocket.refused':
    "equivalent: the refused connection's close reports the transport closed only when ws's close came first (`if (awaited)` made true): ws's own close on a refusal comes from terminate() on a next tick after the request is aborted (ws websocket.js `abortHandshake`), before the TCP socket's `close`, so it is awaited anyway; a connection the server ends first (`Connection: close`) reports onClosed at its TCP close and again at ws's close, and the adapter's `isClosed` latch (phoenix-adapter.ts `checkClosed`) ignores the second. The refusal itself is reported at the response's end, before either, so the chart sees the same events in the same order",
  'src/adapter/ws-transport.ts#LinkWebSocket.constructor':
    "equivalent: `isNodeWs` for `true` before the `super` call: in Node the link's WebSocket is always ws, and a browser's WebSocket constructor ignores a third argument, so the options object changes nothing there",
  'machines/reconnect.ts#reconnectMachine.guards.isServerClose':
    'equivalent: only a `dropped` reason has a `source`, so testing the kind beside `source === socket` changes nothing (the kind test is gone since)',
  'src/logger.ts#redactText':
    "equivalent: either bound of the match loop stops it alone (past the end of the text or of the form, a character compares unequal to undefined), the tie-break of the sort only orders spans the merge takes the larger of, and merging the first span with itself (`spans` for `spans.slice(1)`) changes nothing",
  'src/node/server/presence.ts#PresenceTracker.actorOf':
    "equivalent: the `absent` and no-connections halves of the forgetting check are each implied by the other at the moment it runs, and the crossing-kind test only saves a check that finds a present principal anyway",
  'src/emitter.ts#Emitter.iterate':
    "equivalent: the early returns of a finished iterator (off() already removed its listener; finishing twice removes nothing more)",
  'src/logger.ts#containsSecret':
    "equivalent: the `typeof value !== object` half (a number or boolean is not a plain object, so it is skipped anyway)",
  'src/logger.ts#replaceSecret':
    'equivalent: the `typeof value !== object` half of the early return: a number or boolean is neither an Error nor a plain object, so the checks after it return it unchanged. The `!value` half (a null would throw in isPlain and drop the whole line) is killed by test/unit/loggers.test.ts "fields beside a redacted one keep their values…". `shortForms` holding the long forms too (`forms` for the filter): an identifier field that is a long key\'s form whole is `[redacted]` through redactText(v, longForms) as well. `longForms.length > 0` made true or `>= 0`: redactText with no forms finds no span and returns the name as it is',
  'src/emitter.ts#Emitter.emit':
    'equivalent: the draining flag only saves a microtask; a second drain finds the queue empty',
  'src/logger.ts#minimumRun':
    'killed since by test/unit/pure-parts-exact.test.ts "the last survivors of the unit mutation run" (added after the run)',
  'src/logger.ts#redact':
    "equivalent: with no forms containsSecret finds nothing, so the early return only saves a walk",
  'src/protocol.ts#isReservedEvent':
    'equivalent: the first-character test only saves a startsWith on every frame; startsWith decides',
  'src/link.ts#Link.#Wiring':
    'the log line of a chart listener that threw (link.actor.subscribe) emptied: no test subscribed a listener that throws; killed since by test/wire/hardening.test.ts "a throwing subscriber of link.actor is logged with its error…" (added after the run)',
  'src/link.ts#Link.untilConnected':
    'equivalent: the check for a state of another session made `return true`: connect() sends host.connect outside the charts\' processing (called inside it, it first waits for the processing to end), so the runtime handles it at once and the first state the wait sees already carries its epoch; a later session begins only after this one ended through `stopped` or `terminated`, which reject the wait first (test/wire/hardening.test.ts "disconnect() immediately followed by connect()" reads the state the moment connect() resolves)',
  'src/runs.ts#runProblem':
    'the `null` in the messages for a null run id or hook (made `"got object"`, or the hook\'s test made true), and the `undefined` half of the no-options check (equivalent through startRun() and runSignal(), whose default parameter turns undefined into `{}`): killed since by test/unit/runs.test.ts "runProblem() names what is wrong…" (added after the run)',
  'src/logger.ts#secretForms':
    "equivalent: the empty list of URL forms for a key holding half of a character, made a list holding Stryker's own text: that text becomes one more form to redact, and no test's output holds it",
  'src/runs.ts#RunSupervisor.report':
    "equivalent: the `?? []` of a supervisor that never had a listener: a non-empty array in its place is called as a listener, which throws inside the try that swallows a listener's failure",
  'src/node/server/metrics.ts#assertFits':
    "equivalent: the `?? []` for a metric without labelNames (prom-client gives every Gauge and Counter an array; a Gauge without one cannot even be constructed), and the separator of the label list in the message (each of the simulator's metrics has one label at most)",
  'src/protocol.ts#hasLoneSurrogate':
    "equivalent: the fast exit (made false, or `includes('')`: text with no `\\u` and no surrogate holds no escape of a code unit for the scan to find either), and reading at or past the end (`<=` in the loop, the `next >= json.length` check made false or `>`): a position past the end reads NaN, which is neither a high nor a low surrogate",
  'src/logger.ts#formsOf':
    'equivalent: the check made false and the copy of the keys emptied only stop the cached forms from being used: they are built again, the same forms. The check that the list still holds the keys it was built from is killed by test/unit/logger.test.ts "a key list changed in place is read again…"',
  'src/logger.ts#sameKeys':
    "equivalent: each only has a list that holds the same keys read as changed (the length check made true, the key check made true, the last `true` made false, the body emptied), so its forms are built again, the same forms; or compares one place past both ends (`<=`: undefined with undefined)",
  'src/runs.ts#RunSupervisor.abortPrincipal':
    "equivalent: the `size === 0` half (endRun forgets a principal with no runs, so an empty map is never found); in the reason check, the `typeof reason === object` half (a string or number has no `kind` either), the `typeof kind === string` half (the set of kinds holds only strings), and the `reason === null` half of the message (a null reason is never refused). The `?? undefined` of a reason object without a kind is killed since by test/unit/runs.test.ts \"refuses bad arguments to endRun, endRunOf, onAborted and abortPrincipal…\" (`got kind undefined`, added after the run)",
  'src/node/server/metrics.ts#ServerMetrics.running':
    "equivalent: the `!entry` check made false: the constructor's shared() makes the registry's entry before running() can be called, so it is always there",
  'src/node/server/metrics.ts#shared':
    'killed since by test/unit/server-metrics.test.ts "keeps nothing for a simulator that never ran…" (added after the run): the `running.size > 0` test made true or `>= 0` kept the metrics of a simulator that never ran',
  'src/logger.ts#redacting':
    "equivalent: the missing-level check (without it the call throws inside the try that keeps a host's logger from breaking the link), `consoleRef?.` (every runtime the link runs in has a console), and `surface !== undefined` made true (an undefined logger returned the silent log before it; a null one throws there either way, and createLink refuses it first)",
  'src/protocol.ts#decodeText':
    'equivalent: a payload that is a string or number has no string `status`, so the `typeof reply !== object` half changes nothing',
  'src/node/server/request-limits.ts#requestTooLarge':
    "equivalent: the case a header name is folded to before Cowboy's distinct names are counted (`toUpperCase` for `toLowerCase`: any one fold merges the same names), and the `req.url ?? '/'` default emptied: Node's HTTP parser gives every request it hands over a URL, so the default is never read (the method's default is killed by test/unit/request-limits.test.ts)",
  'src/protocol.ts#notJsonDetail':
    'killed since by test/unit/pure-parts-exact.test.ts "the last survivors of the unit mutation run" (added after the run)',
  'src/protocol.ts#parseControlSignal':
    "equivalent: the separator of a joined field path (`join('.')`): the control payload is flat, so a problem's path has at most one element",
  'src/adapter/phoenix-adapter.ts#PhoenixAdapter.checkCredentials':
    'killed since by test/wire/long-life.test.ts "socket params that are not a plain object of strings fail that attempt…": the array and null cases (added after the run of 2026-12-05; the link no longer spreads an array or null into params), and the refusal of a Map or a class instance (`notPlain !== null` made false: a Map, whose entries are no properties, would be sent as no params; its cases added after the run of 2026-12-07; the mutant applied by hand fails the test)',
  'src/adapter/phoenix-adapter.ts#PhoenixAdapter.release':
    'equivalent: resetting onMessage only lets go of the wrapper that held the attachment (memory, issue 13); a channel removed from its socket gets no more messages, so what the function returns is never read',
  'machines/connection.ts#connectionMachine.guards.isOwnConflict':
    'equivalent: only a refused upgrade (409) is ever `rejected` with cause `conflict` (no join error or close code maps to it), so dropping the kind or phase half, or the `?.` on a reason that is never null in `lost`, changes nothing; the cause, the window and the first-connection checks are each killed',
  'machines/presence.ts#validatePresencePolicy': 'the message of a configuration error',
  'src/reasons.ts#describeReason': 'human-readable text; each kind is checked by test/unit/reasons-details.test.ts, the rest of the wording is free to change',
  'src/reasons.ts#safeJson':
    "equivalent: JSON.stringify(undefined) is undefined, and clipText of it throws into the fallback, which writes the same String(value); and the `value !== null` half of the fallback's object test: JSON.stringify(null) never throws, so null never reaches the fallback",
  'src/reasons.ts#classifyControlChannelLoss': 'the detail text of a control channel loss; the kind, source and retryability are checked',
  'src/reasons.ts#classifyChannelClose': 'the detail text of a phx_close; the kind is checked',
  'src/reasons.ts#classifyClose': 'detail and message text; every code\'s kind and retryability is checked (test/unit/reasons.test.ts)',
  'src/reasons.ts#classifyUpgrade': 'text of the body or detail kept for diagnostics; status to cause and retryability are checked',
  'src/reasons.ts#classifyJoinError':
    'equivalent: a response that is not an object reads as one without a listed reason (a string or number has no `reason` field), and the table has no row for a missing reason, so the `typeof` and `!== null` halves change nothing; the causes, retryability and detail are checked',
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
  'machines/connection.ts#connectionMachine.guards.awaitsUpgradeOutcome':
    'equivalent: `priorKeyHolder === lastAccepted` fails only when the prior key holder never opened (its upgrade went unanswered), and no event comes on a transport that never opened',
  'machines/connection.ts#connectionMachine.guards.isProbeConflictInWindow':
    'equivalent on a monotonic clock: `elapsed >= 0` fails only if env.monotonic went back (a clock bug of the host), which it reads as outside the window',
  'machines/connection.ts#dismissDoubt':
    'equivalent: clearing fields that are already null changes nothing; the check saves a context copy on every open',
  'machines/connection.ts#connectionMachine.guards.isTerminalLoss':
    'equivalent: the guard runs in `lost`, after recordLoss, so lastReason is never null there',
  'machines/connection.ts#connectionMachine.guards.isCurrentTransport':
    'equivalent: generations grow across sessions, so the generation alone names the transport',
  'machines/connection.ts#connectionMachine.guards.isNewChannel': 'a defensive `topic in event` test',
  'machines/connection.ts#connectionMachine (state config)':
    'descriptions and rule tags of states and transitions (documentation), the default policies of the input, and the initial `probing` and `upgradeLeft`, which openCurrentTransport sets on entering `online` before anything reads them',
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
  'machines/control.ts#controlMachine.guards.isDuplicate':
    'equivalent: the remembered correlation ids never include null (enqueue remembers none for a signal without one), so the `id !== null` half changes nothing',
  'machines/control.ts#controlMachine.guards.hasWaiting': 'equivalent: with one signal, dropping the waiting ones drops nothing',
  'machines/control.ts#forget': 'equivalent shortcut: filtering by an empty set changes nothing',
  'machines/control.ts#correlationOf': 'the empty-string case; null and strings are checked',
  'src/reasons.ts#closeCodeName': 'a helper for hosts (names a code); the charts and tests read the table directly',
  'machines/types.ts#assertMs': 'the message of a configuration error',
  'machines/reconnect.ts#validateReconnectPolicy': 'messages of configuration errors',
  'machines/connection.ts#validateConnectionPolicy': 'messages of configuration errors',
  'machines/channel.ts#validateChannelPolicy': 'messages of configuration errors',
  'machines/status.ts#linkStateOf':
    'equivalent: a string where the chart keeps a child object (online, attached) has no `attached` or `live` field, so the `typeof … === object` halves change nothing; and the message of an error the chart cannot cause',
  'machines/connection.ts#connectionMachine.actions.spawnChannel': 'a defensive event-type check and the spawned input (policy, env) the pure tests do not read',
  'machines/channel.ts#channelMachine.actions.countRejoin': 'the rejoin count only scales the rejoin delay (see rejoinDelay)',
  // The charts' runtime (src/runtime/, issue 17).
  'src/runtime/chart-runner.ts#ChartRuntime.pendingOf':
    'equivalent: the `?? []` for no pending delay replaced by any other array is filtered by chart, and no array the mutant builds holds a delay of the chart',
  'src/runtime/chart-runner.ts#ChartRuntime.fire':
    "equivalent: the timer is armed only while a delay is pending (arm() clears it when none is), so fire() never finds the list empty; the tolerance of a timer that fires early (`> 1` ms made `>= 1`): a timer fires at most about a millisecond early, and at exactly 1 ms either branch delivers the delay within that millisecond; and going on after the clock failed (`now === null` made false): readClock() crashed the chart of the first delay, cancelling its delays, and with a null reading only delays due at clock time 1 or earlier would be delivered, which every timer fires after",
  'src/runtime/chart-runner.ts#RunningChart.halt':
    'equivalent: halting a chart twice finds no observer (finish() let them go) and no delay of it left, so the second halt changes nothing',
  'src/runtime/chart-runner.ts#RunningChart.compute':
    "equivalent: the `finally` releases the last transition's action list, chart and inspection target, and compute() sets all three again before the next transition; the inspection target set while nobody observes (made always the chart) is read only by the inspection events inspectEvent drops when nobody observes",
  'src/runtime/chart-runner.ts#shareParts':
    "equivalent: `children` and `historyValue` are never anything but empty on this runtime (checkChart refuses spawns and invokes; the charts have no history state), so the halves of their checks that keep a non-empty one cannot be reached; looking up the shared configuration even when `_nodes` is the previous snapshot's (the shortcut made false) finds the same shared parts the previous snapshot holds",
  'src/runtime/chart-runner.ts#sharedConfiguration':
    'equivalent: a trie node made as `{}` instead of `{ next: null, shared: null }` (its fields start undefined, and `??=` fills undefined as it fills null)',
  'src/runtime/chart-runner.ts#RunningChart.commit':
    "equivalent: the counter that keys a delayed raise without an id counts down as well as up (each key still differs from every pending one); the checks that build an inspection event only while someone observes (inspectEvent finds no observer and returns); `'complete'` emptied in the call that ends the observers of a chart in its final state (call() takes every `how` but 'next' and 'error' as complete)",
  'src/runtime/chart-runner.ts#RunningChart.constructor': 'equivalent: the check that builds an inspection event only while someone observes (inspectEvent finds no observer and returns)',
  'src/runtime/chart-runner.ts#RunningChart.process': 'equivalent: the check that builds an inspection event only while someone observes (inspectEvent finds no observer and returns)',
  'src/runtime/chart-runner.ts#ChartRuntime.start':
    "equivalent: the `urgent !== null` half; outside the queue's processing the queue is empty, so a drain with no io.failed to process finds nothing",
  'src/runtime/chart-runner.ts#RunningChart.call':
    "equivalent: `result !== undefined` made true: settleReported() returns at once for a value that is neither an object nor a function, undefined among them; and the `how === 'complete'` test of the last of three cases (`next` and `error` are taken before it)",
  'src/runtime/link-charts.ts#LinkCharts.constructor':
    "no coverage in this run: passing the host's onConflict to the connection chart is read only by links in reject mode, whose tests are wire tests (test/wire/supersede.test.ts \"with the host's onConflict 'reject' no supersede can be the link's own doing…\"), outside this run's test set",
  'src/runtime/link-charts.ts#LinkCharts.abandon':
    'equivalent: the control chart abandons only the signal it is delivering, which is always the one `delivery` holds (a settled delivery leaves the chart before it can abandon it)',
  'src/runtime/chart-runner.ts#checkChart': 'equivalent: the `typeof … string` half (the set of refused actions holds only strings)',
  'src/runtime/link-charts.ts#LinkCharts.dispatchInspection':
    'equivalent: the runtime reads `inspect` (null while nobody observes) before each inspection event, so the dispatcher is never called with no observer',
  'src/runtime/link-charts.ts#LinkCharts.execute':
    "equivalent: the connection chart stops a reconnect chart only on leaving `session`, which started one on entry, so there always is one (the `?.`); a channel chart's initial transition reads only its input, so none can crash while it starts (the `isStopped` check)",
  'src/runtime/link-charts.ts#LinkCharts.crashed':
    "equivalent: the half for a channel chart that crashed while it started (no chart holds its topic yet): a channel chart's initial transition reads only its input and cannot throw",
  'machines/reconnect.ts#reconnectMachine.guards.isRetryFloorPast':
    "equivalent on a monotonic clock: `floor === 0` made false leaves `waited(context) >= 0`, which fails only if env.monotonic went back (a clock bug of the host)",
  'machines/types.ts#copyText':
    "equivalent: the block loop's `at < stop` made `<=`: its extra round, when `stop` is a multiple of 4096 (0 among them), copies no code unit (`String.fromCharCode()` is `''`)",
  'src/reasons.ts#lineOf':
    "equivalent: the `phase === 'upgrade'` half of the too-large hint made true: only a refused upgrade carries an HTTP status (a close or a join rejection has status null), so 414 and 431 meet no other phase",
  'src/runtime/chart-runner.ts#RunningChart.inspectEvent':
    "equivalent: `result !== undefined` made true: settleReported() returns at once for a value that is neither an object nor a function, undefined among them (an async observer's rejection is pinned by test/runtime/chart-runner.test.ts \"an async snapshot observer or inspection observer that rejects…\")",
  'src/runtime/chart-runner.ts#RunningChart.stop':
    "equivalent: `'complete'` emptied in the call that ends the observers: call() takes every `how` but 'next' and 'error' as complete",
  'src/runtime/chart-runner.ts#RunningChart.subscribe':
    "equivalent: `'complete'` emptied in the call that completes an observer of a stopped chart: call() takes every `how` but 'next' and 'error' as complete",
  'src/runtime/link-charts.ts#LinkCharts.stopAll':
    "the error a failing stop threw, kept for the end (`{ error }` made `{}`: stopAll() then threw undefined): the test asserted it with `toThrow('…')`, which passes on a thrown undefined; killed since by test/runtime/link-charts.test.ts \"stopAll() stops every chart though a stop throws…\", which compares the value thrown (changed after the run)",
  'src/runtime/link-charts.ts#LinkCharts.emitted':
    'equivalent: only the connection chart emits; the other charts tell it with `report` actions',
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
  const cls = chain.find((n) => ts.isClassDeclaration(n) && n.name) as ts.ClassDeclaration | undefined
  if (cls) {
    const member = chain.find((n) => ts.isClassElement(n) && n.parent === cls) as ts.ClassElement | undefined
    const name = member ? (ts.isConstructorDeclaration(member) ? 'constructor' : (member.name?.getText(sf) ?? '(member)')) : '(class)'
    return `${cls.name!.getText(sf)}.${name}`
  }
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

/** The score of detected (killed or timed out) among the mutants that count. */
function percent(detected: number, of: number): string {
  return `${((detected / Math.max(1, of)) * 100).toFixed(1)}%`
}

/** A 95% Wilson interval for a score measured on a sample, as "a–b%". */
function wilson(detected: number, n: number): string {
  if (n === 0) return '–'
  const z = 1.96
  const p = detected / n
  const centre = (p + (z * z) / (2 * n)) / (1 + (z * z) / n)
  const half = (z * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n))) / (1 + (z * z) / n)
  return `${Math.max(0, (centre - half) * 100).toFixed(0)}–${Math.min(100, (centre + half) * 100).toFixed(0)}%`
}

function survivorTable(groups: Map<string, Mutant[]>): string[] {
  if (groups.size === 0) return ['No mutant survived.']
  const out = ['| declaration | survived | no coverage | why |', '|---|---|---|---|']
  for (const [key, mutants] of [...groups.entries()].sort((a, b) => b[1].length - a[1].length || a[0].localeCompare(b[0]))) {
    const survived = mutants.filter((m) => m.status === 'Survived').length
    out.push(`| ${key} | ${survived} | ${mutants.length - survived} | ${WHY[key] ?? '**unexplained**'} |`)
  }
  return out
}

/** A section from a Stryker report: every mutant of each file. */
function strykerSection(report: StrykerReport, goal: (file: string) => number, intro: string[]): string[] {
  const lines = [...intro, '', '| file | mutants | killed | timeout | survived | no coverage | score | goal |', '|---|---|---|---|---|---|---|---|']
  const groups = new Map<string, Mutant[]>()
  let total = { all: 0, detected: 0, killed: 0, timeout: 0, survived: 0, noCoverage: 0 }
  for (const [file, data] of Object.entries(report.files).sort()) {
    const count = (status: string) => data.mutants.filter((m) => m.status === status).length
    const killed = count('Killed')
    const timeout = count('Timeout')
    const survived = count('Survived')
    const noCoverage = count('NoCoverage')
    const all = killed + timeout + survived + noCoverage
    total = { all: total.all + all, detected: total.detected + killed + timeout, killed: total.killed + killed, timeout: total.timeout + timeout, survived: total.survived + survived, noCoverage: total.noCoverage + noCoverage }
    const score = (killed + timeout) / Math.max(1, all)
    // A row measured on an older source says so (Stryker's report keeps the source it mutated); a
    // change to comments alone, every token still in its place, leaves its mutants as they were.
    const stale = existsSync(file) && sameCode(file, readFileSync(file, 'utf8'), data.source) ? '' : ' (source changed since this run)'
    // A file Stryker finds nothing to mutate in (constants only) has no score, and is not below its goal.
    const shown = all === 0 ? '– (no mutants)' : `${percent(killed + timeout, all)}${score * 100 >= goal(file) ? '' : ' (below)'}`
    lines.push(`| ${file}${stale} | ${all} | ${killed} | ${timeout} | ${survived} | ${noCoverage} | ${shown} | ${goal(file)}% |`)
    for (const m of data.mutants) {
      if (m.status !== 'Survived' && m.status !== 'NoCoverage') continue
      const key = `${file}#${declarationAt(file, data.source, m.location.start.line, m.location.start.column)}`
      groups.set(key, [...(groups.get(key) ?? []), m])
    }
  }
  lines.push(`| **all** | ${total.all} | ${total.killed} | ${total.timeout} | ${total.survived} | ${total.noCoverage} | **${percent(total.detected, total.all)}** | |`)
  lines.push('', '### Surviving and uncovered mutants, by declaration', '', ...survivorTable(groups))
  return lines
}

/** A section from the sampled runs: a seeded draw of Stryker's mutants of each file. */
function sampledSection(results: SampledResults, goal: number): string[] {
  const lines = [
    '## The socket-level parts, sampled (`npm run mutate:lib`)',
    '',
    "Stryker's mutators list every mutant of the adapter, the ws transport, the link, the channel",
    'handle and the simulator; scripts/lib-mutations.ts draws a seeded sample of each file and runs',
    "the file's wire tests against each mutant (--bail; with the browser tests for the files that have a browser branch: the adapter, the ws transport and the link; the simulator's HTTP routes, admin.ts and",
    'control-api.ts, by the tests that call them over HTTP and the generated-docs check, since the',
    'rest of the wire suite reaches them only through those). The score is measured on the sample; the',
    'interval is its 95% Wilson interval. A full run would take about a day on two cores: a surviving',
    'mutant runs the whole wire suite (75-90 s), so the samples (10 to 25 per file) are sized for a',
    'run of about an hour, and one file\'s interval is wide (about ±15 points at 25 draws; `--scale 2`',
    'doubles every sample and keeps the results in hand). Not sampled: src/node/server/flavors.ts (the two',
    "servers' constants) and the index files (re-exports). A survivor whose why says \"killed since\"",
    'has a test added after the run that the run has not judged yet (`--survivors` runs them again;',
    'a changed source draws its sample anew). A row marked "source changed since this run" was',
    "measured on an earlier version of the file: its figures are the last measured, not the file's now",
    '(a change to comments alone, every token of code still at its line and column, does not count).',
    '',
    '| file | mutants | sampled | killed | timeout | survived | runtime error | score (95% interval) | goal |',
    '|---|---|---|---|---|---|---|---|---|',
  ]
  const groups = new Map<string, Mutant[]>()
  let t = { population: 0, sampled: 0, killed: 0, timeout: 0, survived: 0, runtime: 0 }
  for (const [file, data] of Object.entries(results).sort()) {
    const count = (status: string) => data.mutants.filter((m) => m.status === status).length
    const killed = count('Killed')
    const timeout = count('Timeout')
    const survived = count('Survived')
    const runtime = count('RuntimeError')
    const n = killed + timeout + survived
    t = { population: t.population + data.population, sampled: t.sampled + data.mutants.length, killed: t.killed + killed, timeout: t.timeout + timeout, survived: t.survived + survived, runtime: t.runtime + runtime }
    const below = ((killed + timeout) / Math.max(1, n)) * 100 < goal ? ' (below)' : ''
    const pending = data.mutants.length < data.sampleSize ? ` (${data.sampleSize - data.mutants.length} not run yet)` : ''
    // A row measured on an older source says so: its mutants are not the file's mutants now (a
    // change to comments alone, every token still in its place, leaves them as they were).
    const current = existsSync(file) ? readFileSync(file, 'utf8') : null
    const stale = current !== null && (createHash('sha256').update(current).digest('hex') === data.sourceHash || sameCode(file, current, data.source)) ? '' : ' (source changed since this run)'
    lines.push(`| ${file}${stale} | ${data.population} | ${data.mutants.length}${pending} | ${killed} | ${timeout} | ${survived} | ${runtime} | ${percent(killed + timeout, n)} (${wilson(killed + timeout, n)})${below} | ${goal}% |`)
    for (const m of data.mutants) {
      if (m.status !== 'Survived') continue
      const key = `${file}#${declarationAt(file, data.source, m.location.start.line, m.location.start.column)}`
      groups.set(key, [...(groups.get(key) ?? []), m])
    }
  }
  // Files with no results here (a run limited with --file, on a checkout without the other files'
  // results) keep their rows, survivors and explanations from the current docs/mutation.md.
  const carried = carriedRows(new Set(Object.keys(results)))
  for (const row of carried.files) {
    lines.push(row.line)
    t = { population: t.population + row.population, sampled: t.sampled + row.sampled, killed: t.killed + row.killed, timeout: t.timeout + row.timeout, survived: t.survived + row.survived, runtime: t.runtime + row.runtime }
  }
  const n = t.killed + t.timeout + t.survived
  lines.push(`| **all** | ${t.population} | ${t.sampled} | ${t.killed} | ${t.timeout} | ${t.survived} | ${t.runtime} | **${percent(t.killed + t.timeout, n)}** (${wilson(t.killed + t.timeout, n)}) | |`)
  if (carried.files.length > 0) {
    lines.push(
      '',
      `Carried over from the previous docs/mutation.md as they stood (this checkout has no results for them): ${carried.files.map((r) => r.file).join(', ')}. ` +
        'Their figures are those of the source their run mutated; a source changed since is not marked on a carried row.',
    )
  }
  const declarations = survivorTable(groups)
  if (carried.declarations.length > 0) {
    if (groups.size === 0) declarations.splice(0, declarations.length, '| declaration | survived | no coverage | why |', '|---|---|---|---|')
    declarations.push(...carried.declarations)
  }
  lines.push('', '### Surviving sampled mutants, by declaration', '', ...declarations)
  lines.push('', '<details><summary>Every surviving sampled mutant</summary>', '', '| file:line | mutator | replacement |', '|---|---|---|')
  for (const [file, data] of Object.entries(results).sort()) {
    for (const m of data.mutants.filter((x) => x.status === 'Survived')) {
      lines.push(`| ${file}:${m.location.start.line} | ${m.mutatorName} | \`${m.replacement.replace(/\s+/g, ' ').replace(/\|/g, '\\|').slice(0, 80)}\` |`)
    }
  }
  lines.push(...carried.survivors)
  lines.push('', '</details>')
  return lines
}

/** A file row of the sampled table kept from the current docs/mutation.md, with its counts. */
interface CarriedRow {
  file: string
  line: string
  population: number
  sampled: number
  killed: number
  timeout: number
  survived: number
  runtime: number
}

/**
 * The sampled section's rows in the current docs/mutation.md for files not in `have`: their file
 * rows (with the counts the totals need), their survivors' declaration rows and their rows in
 * the list of every survivor.
 */
function carriedRows(have: Set<string>): { files: CarriedRow[]; declarations: string[]; survivors: string[] } {
  const match = /<!-- section:sampled -->\n([\s\S]*?)\n<!-- \/section:sampled -->/.exec(previous)
  const out = { files: [] as CarriedRow[], declarations: [] as string[], survivors: [] as string[] }
  if (!match) return out
  for (const line of match[1]!.split('\n')) {
    const cells = line.split('|').map((c) => c.trim())
    const first = cells[1] ?? ''
    const file = /^(src\/[^\s#:|]+)/.exec(first)?.[1]
    if (!file || have.has(file)) continue
    if (first.includes('#')) out.declarations.push(line)
    else if (/^src\/[^\s:]+:\d+$/.test(first)) out.survivors.push(line)
    else {
      const [population, sampled, killed, timeout, survived, runtime] = cells.slice(2, 8).map((c) => Number.parseInt(c, 10))
      out.files.push({ file, line, population: population!, sampled: sampled!, killed: killed!, timeout: timeout!, survived: survived!, runtime: runtime! })
    }
  }
  return out
}

const DOC = new URL('../docs/mutation.md', import.meta.url)
const previous = existsSync(DOC) ? readFileSync(DOC, 'utf8') : ''

/** The text between a section's markers in the current docs/mutation.md, or a note that it was never run. */
function kept(name: string, title: string): string[] {
  const match = new RegExp(`<!-- section:${name} -->\\n([\\s\\S]*?)\\n<!-- /section:${name} -->`).exec(previous)
  return match ? match[1]!.split('\n') : [title, '', 'Not run yet.']
}

function section(name: string, body: string[]): string[] {
  return [`<!-- section:${name} -->`, ...body, `<!-- /section:${name} -->`, '']
}

const charts = readReport<StrykerReport>('mutation.json')
const unit = readReport<StrykerReport>('unit.json')
const sampled = readReport<SampledResults>('sampled.json')
const CHARTS_TITLE = '## The charts and the reasons (`npm run mutate`)'
const UNIT_TITLE = "## The library's pure parts (`npm run mutate:unit`)"

const out = [
  '<!-- Generated by `npm run mutate`, `npm run mutate:unit` and `npm run mutate:lib` (scripts/mutation-report.ts). Do not edit by hand. -->',
  '',
  '# Mutation testing',
  '',
  'Three runs, each rewriting its own section: Stryker over the charts and the classification tables,',
  "Stryker over the library's pure parts with the unit tests, and a sample of Stryker's mutants of the",
  'socket-level parts with the wire tests. Goals: 90% on machines/ and src/reasons.ts, 85% elsewhere.',
  'In every section, a row marked "source changed since this run" was measured on an earlier version',
  'of its file (the report keeps the source it mutated): its figures are the last measured, not the',
  "file's now. A change to comments alone, every token of code still at its line and column, leaves",
  "a file's mutants as they were and does not mark its row (scripts/same-code.ts).",
  '',
  ...section(
    'charts',
    charts
      ? strykerSection(charts, () => 90, [
          CHARTS_TITLE,
          '',
          'Stryker 9 mutates machines/, the charts\' runtime (src/runtime/) and src/reasons.ts and runs, against each',
          'mutant, the pure chart tests, the runtime\'s tests, the classification tables and the generated paths',
          'replayed with their rule oracles (vitest.mutation.config.ts; one test is left out, the heap test of long',
          'control ids in test/machines/control.test.ts: instrumented, its 80 MB of ids take over 20 s to hash).',
        ])
      : kept('charts', CHARTS_TITLE),
  ),
  ...section(
    'unit',
    unit
      ? strykerSection(unit, () => 85, [
          UNIT_TITLE,
          '',
          'Stryker 9 mutates the frame codec, the emitter, the logger, the run supervisor and the',
          "simulator's presence tracker, metrics and request-size limits, and runs the unit tests against each mutant",
          '(vitest.mutation-unit.config.ts).',
        ])
      : kept('unit', UNIT_TITLE),
  ),
  ...section('sampled', sampled ? sampledSection(sampled, 85) : kept('sampled', '## The socket-level parts, sampled (`npm run mutate:lib`)')),
]
writeFileSync(DOC, out.join('\n'))
process.stdout.write(`wrote docs/mutation.md (${[charts && 'charts', unit && 'unit', sampled && 'sampled'].filter(Boolean).join(', ') || 'no new report'})\n`)
