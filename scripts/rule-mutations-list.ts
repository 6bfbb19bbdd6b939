/**
 * The rule mutations `npm run mutate:rules` applies (scripts/rule-mutations.ts), one at a time:
 * each replaces `from`, which must occur exactly once in `file`, with `to`.
 * test/unit/rule-mutations.test.ts checks every `from` still occurs once, so a change to the code
 * cannot leave a mutation behind unnoticed until the next run.
 */

/** One lifecycle rule broken on purpose. */
export interface RuleMutation {
  rule: string
  how: string
  file: string
  from: string
  to: string
  /**
   * Test files run beside the generated paths, the property runs and the long-life tests, for a
   * mutation of a mode the model does not run (its transition listed in test/model/unreachable.ts
   * with the test that crosses it instead), and why.
   */
  also?: { suites: string[]; why: string }
}

export const MUTATIONS: RuleMutation[] = [
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
    from: "'control.supersede': [\n          {\n            guard: 'isKeyHolder',",
    to: "'control.supersede.removed': [\n          {\n            guard: 'isKeyHolder',",
  },
  {
    rule: 'supersede-is-terminal',
    how: 'a supersede held while the next upgrade is out never ends the session, though the server refused that upgrade',
    file: 'machines/connection.ts',
    from: 'return context.heldSupersede !== null && e.generation === context.generation && isRefusedBeforeSupersede(e.reason)',
    to: 'return false',
  },
  {
    rule: 'supersede-is-terminal',
    how: 'a supersede whose cause is unknown is stale: the next attempt asks nothing and evicts the instance that sent it',
    file: 'machines/connection.ts',
    from: 'isAmbiguousSupersede: ({ context, event }) => causeUnknown(context, event as unknown as Origin),',
    to: 'isAmbiguousSupersede: () => false,',
  },
  {
    rule: 'supersede-is-terminal',
    how: 'a conflict probe asks nothing (no on_conflict=reject): it evicts the instance it probes for',
    file: 'machines/connection.ts',
    from: 'const conflictProbe = context.ambiguousSupersede !== null',
    to: 'const conflictProbe = false',
  },
  {
    rule: 'supersede-is-terminal',
    how: "a conflict probe's 409 ends the session at once, though within the window it may be our own unanswered socket",
    file: 'machines/connection.ts',
    from: 'return elapsed <= context.config.policy.conflictRetryWindowMs\n    },\n    /** A conflict probe was refused 409 past the window',
    to: 'return false\n    },\n    /** A conflict probe was refused 409 past the window',
  },
  {
    rule: 'supersede-is-terminal',
    how: 'a socket lost before its control channel joined reads as a plain loss: the reconnect supersedes the newer instance that took the key unseen (no supersede can be pushed there)',
    file: 'machines/connection.ts',
    from: 'isLostUnseen: ({ context }) => closedUnseen(context, context.lastReason!),',
    to: 'isLostUnseen: () => false,',
  },
  {
    rule: 'supersede-is-terminal',
    how: 'a "disconnect" close soon after the control join is read as a plain loss: a join that landed between the platform\'s supersede and its close heard nothing, and the reconnect evicts the newer instance',
    file: 'machines/connection.ts',
    from: '< context.config.policy.unseenSupersedeWindowMs',
    to: '< 0',
    also: {
      suites: ['test/machines/connection.test.ts', 'test/conformance/bandit.test.ts', 'test/conformance/cowboy.test.ts'],
      why: 'the gap between the platform\'s supersede and its close exists on Phoenix, not on the simulator (it closes in the tick it supersedes), so the wire paths never put a join in it',
    },
  },
  {
    rule: 'supersede-is-terminal',
    how: 'a reset of an accepted socket reads as a plain drop: the supersede push it discarded unread goes unprobed, and the reconnect evicts the newer instance',
    file: 'machines/connection.ts',
    from: '  if (reason.reset === true) return reason.generation === context.lastAccepted',
    to: '  if (reason.reset === true) return false',
    also: {
      suites: ['test/machines/connection.test.ts', 'test/wire/supersede.test.ts', 'test/conformance/bandit.test.ts', 'test/conformance/cowboy.test.ts'],
      why: "the model's drops carry no socket error and the simulator never resets a connection on its own (it cuts a second after its close), so no generated path resets; the chart tests, the simulator's reset on purpose and Phoenix's resets under load do",
    },
  },
  {
    rule: 'supersede-is-terminal',
    how: "a new session forgets a supersede whose cause is unknown: a host's disconnect() then connect() in the backoff upgrades without on_conflict=reject and evicts the instance that may hold the key",
    file: 'machines/connection.ts',
    from: "      // A supersede whose cause is still unknown is kept (`carrySupersedeDoubt`): this session's attempts probe.\n      heldSupersede: null,",
    to: '      heldSupersede: null,\n      ambiguousSupersede: null,',
    also: {
      suites: ['test/machines/connection.test.ts', 'test/wire/supersede.test.ts', 'test/conformance/bandit.test.ts', 'test/conformance/cowboy.test.ts'],
      why: 'the model is generated from the chart under mutation: without the carried doubt a restarted session is a state the model already reached, so no generated path probes it; the hand-written restart tests do',
    },
  },
  {
    rule: 'supersede-is-terminal',
    how: "a supersede read after the host's disconnect() on a socket still closing is ignored: the next connect() upgrades without on_conflict=reject and evicts the newer instance",
    file: 'machines/connection.ts',
    from: "        // Read on a socket still closing: its cause is unknown, so the next session's attempts probe.\n        'control.supersede': { guard: 'isSupersedeAfterEnd', actions: 'recordAmbiguousSupersede', meta: { rule: 'supersede-is-terminal' } },\n",
    to: '',
    also: {
      suites: ['test/machines/connection.test.ts', 'test/wire/supersede.test.ts'],
      why: 'the model is generated from the chart under mutation: a stopped chart that ignores the supersede stays in a state the model already reached, so no generated path probes after it',
    },
  },
  {
    rule: 'supersede-is-terminal',
    how: 'a supersede read after the session ended by a refusal or a policy give-up (terminated, not superseded) is ignored: the next connect() evicts the newer instance',
    file: 'machines/connection.ts',
    from: "        // Read on a socket still closing, unless the session ended superseded: its cause is unknown, so the next session's attempts probe.\n        'control.supersede': { guard: 'isSupersedeAfterEnd', actions: 'recordAmbiguousSupersede', meta: { rule: 'supersede-is-terminal' } },\n",
    to: '',
    also: {
      suites: ['test/machines/connection.test.ts'],
      why: 'the model is generated from the chart under mutation: a terminated chart that ignores the supersede stays in a state the model already reached',
    },
  },
  {
    rule: 'supersede-is-terminal',
    how: 'a "disconnect" close just after the control join, read while disconnect() leaves the control channel, is a plain close: the next connect() asks nothing',
    file: 'machines/connection.ts',
    from: "      return e.generation === context.generation && closedUnseen(context, e.reason)",
    to: '      return false',
    also: {
      suites: ['test/machines/connection.test.ts'],
      why: "phoenix.js settles a leave at once (channel.js leave()), so with the shipped adapter `stopping` ends in the turn it starts and no server close reaches it on the wire; only an adapter whose leave waits for the server's reply reaches this transition",
    },
  },
  {
    rule: 'supersede-is-terminal',
    how: "an earlier session's socket superseded before this session has an accepted socket is taken as stale: the new session's attempt does not probe",
    file: 'machines/connection.ts',
    from: 'return context.config.upgradesSupersede && event.epoch !== context.epoch && context.lastAccepted === 0',
    to: 'return false',
    also: {
      suites: ['test/machines/connection.test.ts'],
      why: 'the model is generated from the chart under mutation: the supersede then changes nothing, and the attempt after it is a state the model already reached',
    },
  },
  {
    rule: 'supersede-is-terminal',
    how: "the host's onConflict 'reject' is not read: an unanswered upgrade, which cannot have superseded anything, makes another instance's supersede ambiguous",
    file: 'machines/connection.ts',
    from: "isCurrentSupersedingUpgrade: ({ context, event }) => (event as unknown as Origin).generation === context.generation && context.config.upgradesSupersede,",
    to: "isCurrentSupersedingUpgrade: ({ context, event }) => (event as unknown as Origin).generation === context.generation,",
    also: {
      suites: ['test/machines/connection.test.ts', 'test/wire/supersede.test.ts'],
      why: "the model runs the default onConflict only (test/model/unreachable.ts: 'connection.session.online|socket.upgradeSent|1')",
    },
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
    from: 'if (signal) unwatch = onAbort(signal, () => finish(() => reject(abortError(signal))))',
    to: "if (signal) unwatch = onAbort(signal, () => finish(() => (this.send({ type: 'host.disconnect' }), reject(abortError(signal)))))",
  },
  {
    rule: 'disconnect-always-succeeds',
    how: 'disconnect() during a session is not handled (only in connected)',
    file: 'machines/connection.ts',
    from: "'host.disconnect': {\n          target: 'stopped',\n          actions: ['recordGraceful', 'redeliverChannelReports'],\n          meta: { rule: 'disconnect-always-succeeds' },\n        },",
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
