/**
 * Chart transitions no generated path crosses, each with why and the test that crosses it
 * instead. The coverage test (test/model/paths.test.ts) fails on a transition missing from both
 * the paths and this list, and on an entry here that a path now crosses.
 */
const IO_BUG =
  "only an I/O action that throws (a phoenix-link bug) sends it, through the link's chart runtime; no stimulus of the world does"
const CHART_BUG = "only a channel chart whose transition throws (a phoenix-link bug) sends it, through the link's chart runtime; no stimulus of the world does"

export const UNREACHABLE: Record<string, { states?: Record<string, string>; transitions?: Record<string, string> }> = {
  connection: {
    transitions: {
      'connection|channel.failed|0': `${CHART_BUG}. test/machines/routing.test.ts "a channel chart whose transition throws (a phoenix-link bug) is dropped with what it threw; the link and its other channels go on"`,
      'connection.session.online|io.failed|0': `${IO_BUG}. test/machines/connection.test.ts "the transport failing: a retryable other reason, reconnecting"`,
      'connection.session.online.attached.stopping|io.failed|0': `${IO_BUG}. test/machines/connection.test.ts "while stopping: still stopped, graceful (the host asked to stop), never a reconnect"`,
      'connection|socket.upgradeSent|0':
        'needs an upgradeSent of a transport the chart already ended: the adapter reports none once a transport ended (TransportHandle.onUpgradeSent), so only an adapter of the host\'s own sends one. test/machines/connection.test.ts "an upgrade sent of a transport the host stopped meanwhile: nothing claimed, nothing reported"',
      'connection.session.lost||1':
        'a conflict probe refused 409 past conflictRetryWindowMs (75 s by default) of the supersede becoming ambiguous: the model\'s monotonic clock stands still (chart delays run on a simulated clock; this window is read from env.monotonic), so every probed 409 of a path falls within it. test/machines/connection.test.ts "a conflict probe refused 409: within conflictRetryWindowMs it may be our own unanswered socket, still held (retried, still probing); past it another instance holds the key, and the session ends superseded"',
      'connection.session.online|socket.upgradeSent|1':
        'needs the host\'s onConflict \'reject\' (an upgrade that supersedes nothing claims no key); the model runs the default mode. test/machines/connection.test.ts "with the host\'s onConflict \'reject\' no supersede is the link\'s own doing: an upgrade claims the key only once accepted, and a supersede read after an unanswered upgrade ends the session at once"',
      'connection|control.dropped|0':
        'needs a control handler still running with another signal queued behind it when the host stops: a handler state the connection model does not track. test/wire/hardening.test.ts "after disconnect(), signals still waiting behind a slow handler are dropped and reported; the one in progress finishes"',
    },
  },
  channel: {
    transitions: {
      'channel.attached.live|io.failed|0': `${IO_BUG}. test/machines/channel.test.ts "a join attempt whose I/O throws (a phoenix-link bug) errors this attempt and retries it"`,
    },
  },
  reconnect: {
    transitions: {
      'reconnect.deciding||0':
        'the rapid-limit give-up needs onRapidLimit give-up; the model runs the default policy (suspend). test/machines/reconnect.test.ts "with onRapidLimit \'give-up\' it gives up with suppressed (terminal) after rapidLimit rapid connections"',
      'reconnect.suspended|reconnect.retryNow|0':
        'a second retry now in a row while suspended: the first one\'s attempt accepted and closed at once, suspended again, within one row; the model gives a path one retry now. test/machines/reconnect.test.ts "a suspended cooldown is cut by the first retry now of a row only; one in a row waits the cooldown out"',
    },
  },
  control: {
    transitions: {
      'control.delivering|io.failed|0': `${IO_BUG}. test/machines/control.test.ts "a deliver action that throws (a phoenix-link bug) reports that signal failed with what it threw, and delivery goes on"`,
      'control.delivering|control.flush|0':
        'a stop while a handler runs with signals queued behind it. test/wire/hardening.test.ts "after disconnect(), signals still waiting behind a slow handler are dropped and reported; the one in progress finishes"',
      'control|control.enqueue|1':
        'control.maxQueued signals waiting behind a handler that has not settled: a handler state the connection model does not track. test/wire/hardening.test.ts "a handler that never settles holds at most control.maxQueued signals: each one past it is an ignored report (overflow) and a warning; the queued ones follow in order once it settles"',
      'control.delivering|control.reset|0':
        'a new session while a handler of the old one still runs. test/wire/hardening.test.ts "a handler stuck in an old session is abandoned (its signal aborts) and the new session gets its signals"',
    },
  },
}
