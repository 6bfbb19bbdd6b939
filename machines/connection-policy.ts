/**
 * Session timeouts of the connection chart (machines/connection.ts).
 * Plain data and pure functions with no XState import, so the package's public types
 * (src/policy.ts, the main entry) reach them without pulling in a chart; the chart imports them
 * from here and re-exports them. Frozen: a default cannot be changed for later links.
 */
import { assertMs } from './types.js'

/** Session timeouts; milliseconds. */
export const DEFAULT_CONNECTION_POLICY = {
  /** Wait for the transport to open (TCP, TLS, HTTP upgrade). @default 10000 — a handshake slower than this is a dead path. */
  connectTimeoutMs: 10_000,
  /** Wait for the control channel's join reply. @default 10000 — phoenix.js's default push timeout. */
  joinTimeoutMs: 10_000,
  /**
   * Longest wait for the control channel's leave on disconnect() before the socket closes
   * anyway. With the pinned phoenix.js 1.8.16 the leave counts as done once its phx_leave is
   * sent (its channel.leave() answers its own push 'ok' at once; docs/field-notes.md), so the
   * stop does not wait for the server's reply and this bound is not reached on the wire.
   * @default 1000 — stopping must be quick; the close frame follows anyway.
   */
  leaveTimeoutMs: 1_000,
  /**
   * After a transport of this link that the server had accepted ends (joined or not), an upgrade refused with HTTP 409
   * `connection_conflict` (`on_conflict=reject`) within this window is retried with backoff,
   * not terminal: the platform may still hold that socket, since its transport closes a
   * socket only 60 s after it last received anything (docs/field-notes.md: Phoenix transport
   * timeout; Cowboy and Bandit alike). A transport the host's disconnect() closed counts too: a
   * stalled peer never reads that close, so a disconnect() and connect() in a row may meet the old
   * socket; the cost is that after a clean stop, a 409 from another instance that took the key
   * meanwhile is retried until the window ends rather than at once terminal. The window counts
   * from the moment the link left a socket the server had accepted (`attached`: joined or not, since
   * the platform tracks the agent from the upgrade on), on the monotonic clock (a wall-clock step changes
   * nothing), across a host disconnect() and connect() too. An upgrade of this link that left and
   * had no answer (dropped, timed out, abandoned by disconnect() or an I/O fault, or a gateway's
   * 500/502/504) counts from when it ended, as the server may have accepted it, its 101 lost. 0
   * makes every 409 terminal; at most 600000 (10 min). A 409 before the server may have accepted
   * any socket of this link (none accepted, none unanswered) is terminal: another instance holds the key.
   * @default 75000 — the platform's 60 s, plus margin for the heartbeat that noticed the loss.
   */
  conflictRetryWindowMs: 75_000,
  /**
   * How long after the control channel joins (or rejoins) a server's "disconnect" close of the
   * socket (1000, 1001, 1011) may still be a supersede the channel never heard. The platform
   * broadcasts `supersede` to the control channel's subscription, made in its join, and closes
   * the socket a moment later (the reference peer 50 ms later): a join that lands in between
   * hears nothing, then sees the close (docs/field-notes.md). Such a close, like one before the
   * join, makes the next attempts conflict probes (`on_conflict=reject`), so the link never evicts
   * a newer instance to find out; a lone agent's probe is accepted (its closed socket holds no
   * key). 0: only a close before the join.
   * @default 5000 — a hundred times the reference peer's gap, for a platform under load.
   */
  unseenSupersedeWindowMs: 5_000,
}

/** Session timeouts; see {@link DEFAULT_CONNECTION_POLICY}. */
export type ConnectionPolicy = typeof DEFAULT_CONNECTION_POLICY

/**
 * Checks the session timeouts: whole milliseconds; connectTimeoutMs and joinTimeoutMs at least 1;
 * conflictRetryWindowMs at most 600000.
 *
 * @throws {RangeError} naming the first field that is out of range.
 */
export function validateConnectionPolicy(policy: ConnectionPolicy): ConnectionPolicy {
  for (const [name, value] of Object.entries(policy)) assertMs(`connection.${name}`, value, MIN_CONNECTION_POLICY[name as keyof ConnectionPolicy] ?? 0)
  if (policy.conflictRetryWindowMs > MAX_CONFLICT_RETRY_WINDOW_MS) {
    throw new RangeError(
      `connection.conflictRetryWindowMs must be at most ${MAX_CONFLICT_RETRY_WINDOW_MS} (the platform lets go of a lost socket within about a minute; past that a 409 is another instance), got ${policy.conflictRetryWindowMs}`,
    )
  }
  return policy
}

/** Upper bound of conflictRetryWindowMs: 10 minutes. */
const MAX_CONFLICT_RETRY_WINDOW_MS = 600_000

/** Lower bounds above 0: a connect or join wait of 0 ms could never be met (each attempt would time out at once, forever). */
const MIN_CONNECTION_POLICY: Partial<ConnectionPolicy> = { connectTimeoutMs: 1, joinTimeoutMs: 1 }

Object.freeze(DEFAULT_CONNECTION_POLICY)
