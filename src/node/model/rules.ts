/**
 * The lifecycle rules of DESIGN.md, each with its sentence and the tests that fail when it is
 * removed. Transitions carry the rule id as `meta.rule`; docs/lifecycle.md and the visualizer
 * show the sentence next to the transitions that encode it.
 */
/** The lifecycle rules, each with the sentence and the tests that fail when it is removed. */
export const RULES: Array<{ id: string; rule: string; tests: Array<[file: string, name: string]> }> = [
  {
    id: 'normal-close-reconnects',
    rule: 'A peer close 1000, 1001, 1002, 1003, 1005, 1007, 1009-1014 or 3000-4499, or a drop (1006, 1015), reconnects and rejoins every channel; only 1008 and 4500-4999 say the agent is not allowed; only disconnect() stops.',
    tests: [
      ['test/machines/connection.test.ts', 'close 1000 while connected -> reconnecting, never stopped'],
      ['test/wire/normal-closes.test.ts', 'close 1000 -> reconnect with backoff, control and app channels rejoined with fresh join_refs'],
      ['test/unit/reasons.test.ts', 'never reads 1000, 1001 or 1011 as a stop'],
    ],
  },
  {
    id: 'supersede-is-terminal',
    rule: "A supersede push ends the session for good, while connecting, joining, connected and in the backoff after; the socket is ended; no reconnect follows. One the link's own unanswered upgrade may have caused is decided without evicting anyone: held while that upgrade is out (a 4xx ends the session, an accepted upgrade leaves it ignored; no answer or a 5xx, such as the platform's 503 that follows its supersede, leaves its cause unknown), and otherwise probed: the next attempts ask on_conflict=reject, an accepted probe leaves it ignored, a 409 past conflictRetryWindowMs ends the session. The platform pushes a supersede only through a joined control channel, so a server's \"disconnect\" close (1000, 1001, 1011) before the control join, or within unseenSupersedeWindowMs after it, is probed the same way (a 409 past the window ends the session superseded, cause unseen), and so is a reset of an accepted socket at any time within transport.resetAfterSendMs of a frame the link sent (Node: ECONNRESET or EPIPE), which can discard a supersede push the link had not yet read.",
    tests: [
      ['test/machines/connection.test.ts', 'while the backoff (waiting): terminated with the superseded reason; the transport is stopped'],
      ['test/wire/supersede.test.ts', 'supersede push then close 1000 -> terminated, superseded with the payload fields, no new connection (scenario 9)'],
      ['test/wire/supersede.test.ts', 'supersede in the same read just before the join reply: connect() rejects, never connected (scenario 11)'],
      ['test/wire/supersede.test.ts', 'a supersede read on the lost socket while the next upgrade is out ends the link superseded once the server refuses that upgrade with a 4xx (429): it caused nothing; the newer instance stays'],
      [
        'test/wire/supersede.test.ts',
        'a supersede read on the lost socket while the next upgrade is out, which then ends with no answer (dropped: the server may have accepted it), is ambiguous: the next attempts probe with on_conflict=reject, are refused 409 while the newer instance is live, and past conflictRetryWindowMs the link ends superseded; the newer instance is never evicted',
      ],
      [
        'test/wire/supersede.test.ts',
        "a supersede read on the lost socket while the next upgrade is out, which then is refused 503 (the platform's tracking_failed comes after it superseded), is ambiguous: the next attempts probe with on_conflict=reject, are refused 409 while the newer instance is live, and past conflictRetryWindowMs the link ends superseded; the newer instance is never evicted",
      ],
      ['test/wire/supersede.test.ts', 'a newer instance holds the key when the probes go out: refused 409 past the window, the older ends superseded (unseen); the newer is never evicted'],
    ],
  },
  {
    id: 'upgrade-rejection-is-terminal',
    rule: 'HTTP 400/401/402/403/409/414/431 on the upgrade end the session with rejected (a 409 from our own lost socket is retried: own-conflict-retries); 429 and 503 wait at least Retry-After and retry.',
    tests: [
      ['test/machines/connection.test.ts', 'HTTP 403 -> terminated, rejected'],
      ['test/wire/upgrade.test.ts', 'a wrong API key: HTTP 403 -> rejected(unauthenticated), connect() rejects, no retry (scenario 17)'],
      ['test/wire/upgrade.test.ts', 'HTTP 429 with Retry-After waits at least that long, then retries (scenario 19)'],
    ],
  },
  {
    id: 'own-conflict-retries',
    rule: 'A 409 (the platform\'s conflict answer under on_conflict=reject; the mode is not read) within conflictRetryWindowMs (75 s) of losing or closing (disconnect()) a socket of this link that the server had accepted, joined or not, or of losing or abandoning (disconnect(), an I/O fault) one whose upgrade left and had no answer (the server may have accepted it), may be the platform still holding our own lost socket: retried with backoff. A 409 before the server may have accepted a socket of this link, or after the window, is terminal.',
    tests: [
      ['test/machines/connection.test.ts', 'a 409 within the window after a connected transport was lost -> reconnecting, the reason marked retryable'],
      ['test/machines/connection.test.ts', 'a 409 after the window -> terminated: another instance holds the key'],
      ['test/machines/connection.test.ts', 'a 409 before the server ever accepted a socket of this link -> terminated: another instance holds the key'],
      ['test/machines/connection.test.ts', 'a socket the server accepted counts though it never joined: a 409 within the window after it was lost while joining -> reconnecting'],
      ['test/wire/upgrade.test.ts', 'a 409 from our own lost socket still held by the platform is retried until the platform lets go'],
      ['test/wire/upgrade.test.ts', "a socket the server accepted counts though it never joined: a first connect() whose control join timed out on a stalled server meets its own socket's 409, retries, and gets in once the platform lets go"],
    ],
  },
  {
    id: 'control-crash-rejoins',
    rule: 'A phx_error on the control channel (its server process crashed) rejoins it on the same socket with backoff, as phoenix.js does for any channel; the link reads joining meanwhile. The socket and the app channels stay; it is not a loss and never counts toward the rapid-disconnect limit. Its phx_close, or a refused rejoin, is a session-level loss.',
    tests: [
      ['test/machines/connection.test.ts', 'phx_error on the control channel -> joining on the same transport, after a delay a fresh join; no loss, no reconnect'],
      ['test/wire/long-life.test.ts', 'ten control channel crashes in a row: rejoined on the same socket each time, never suppressed, app channels untouched'],
    ],
  },
  {
    id: 'leave-leaves-the-server',
    rule: 'leave() in any state leaves the server without the topic: a join still pending is followed by its phx_leave (Phoenix answers a socket in order), a join the chart gave up on is left on the wire before any rejoin, and a channel left while detached is never joined on the next socket.',
    tests: [
      ['test/wire/long-life.test.ts', 'leave() while the join is pending: phx_leave follows the join, the server ends without the topic, and no join goes out on the next socket'],
      ['test/wire/long-life.test.ts', 'a join that timed out is left on the wire before the rejoin, so a late accept keeps nothing'],
    ],
  },
  {
    id: 'retryable-join-refusal-rejoins',
    rule: 'An app channel whose join is refused for a cause that passes (rate_limited, too_many_requests, join crashed) is kept: rejoined on the same socket with the rejoin backoff, no sooner than the refusal\'s retry_after (a new socket joins it at once). Any other refusal (unauthorized, an unlisted reason) drops the channel with its typed reason.',
    tests: [
      ['test/machines/channel.test.ts', 'a join refused for a cause that passes (rate_limited, join crashed) is rejoined, no sooner than its retry_after (capped by maxRetryAfterMs); an unlisted reason drops it'],
      ['test/wire/channels.test.ts', 'a join refused for a cause that passes (rate_limited with retry_after) keeps the channel: rejoined on the same socket no sooner than retry_after, then joined'],
    ],
  },
  {
    id: 'suspend-not-give-up',
    rule: 'Past the rapid-disconnect limit (the server accepted and then closed ten sockets within seconds) the link slows down, it does not give up: suspended, one attempt per cooldown growing to about five minutes, for ever, reported as suppressed (retryable). Only a supersede, an upgrade rejection or a policy give-up (onRapidLimit: give-up, maxAttempts) end a session.',
    tests: [
      ['test/machines/reconnect.test.ts', 'past rapidLimit rapid connections in a row it slows down, it does not give up: suspended, one attempt per growing cooldown, for ever'],
      ['test/machines/connection.test.ts', 'reconnect.suspended -> suspended: the reason suppressed (retryable) with the cooldown as the next delay; due -> a new transport'],
      ['test/wire/normal-closes.test.ts', 'a server that accepts then closes at once: suspended after ten, then one attempt per cooldown, and back to connected once the server holds the socket (scenario 6)'],
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
    rule: 'disconnect() succeeds from every state, is idempotent, and leaves no timer, socket or listener; a connected link has closed its socket when the call returns.',
    tests: [
      ['test/machines/connection.test.ts', 'from connecting -> stopped'],
      ['test/wire/conventions.test.ts', 'the phx_leave, then close 1000, both written before disconnect() returns, a 4 MB push still in the send buffer too: nothing waits for the buffer to drain'],
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
