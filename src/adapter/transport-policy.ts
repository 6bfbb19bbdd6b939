/**
 * The transport policy: what the adapter hands to phoenix.js and ws. Plain data and a validator,
 * with no XState or ws import, so the package's public types reach it without pulling in the
 * adapter. Frozen: a default cannot be changed for later links.
 */
import { assertMs } from '../../machines/types.js'

/** Transport policy: what the adapter hands to phoenix.js and ws. Milliseconds unless said. */
export const DEFAULT_TRANSPORT_POLICY = {
  /**
   * Heartbeat interval; a reply must arrive within one interval, so a dead peer is detected in
   * at most two (docs/field-notes.md "Heartbeat timeout"); at least 10. @default 30000 — phoenix.js's default.
   */
  heartbeatIntervalMs: 30_000,
  /**
   * Wait for the peer's close frame after the link closes a socket: in Node, ws then ends the TCP
   * connection; in a browser, whose WebSocket waits on its own clock (Chromium 60 s), the link
   * stops waiting and counts the socket closed (`disconnect()` there waits the longer of this and
   * phoenix.js's 1.5 s of teardown polling). @default 1000 — ws waits 30 s by default; a stop
   * must be quick.
   */
  closeTimeoutMs: 1_000,
  /**
   * Largest frame in bytes (a text frame's UTF-8), both ways. Inbound: in Node a larger one closes
   * the socket with 1009, message too big (RFC 6455 section 7.4.1: `ws`'s limit), and the link
   * reconnects; a browser's WebSocket reads a frame of any size and lets a page send only 1000 and
   * 3000-4999, so there a larger frame is dropped and reported `ignored` (`too-large`), the socket
   * kept. Outbound: a larger frame is not sent (a push rejects `PUSH_INVALID`; a channel's join
   * attempt fails with an `other` reason and is retried on the channel's backoff), since a server
   * with that limit would close the socket 1009, every channel with it, and the join would go
   * again on every socket. Set it to the server's limit (Phoenix's `max_frame_size`; stock Phoenix
   * has none). @default 8388608 — 8 MiB.
   */
  maxFrameBytes: 8 * 1024 * 1024,
  /** Wait for a reply to an app channel push. @default 10000 — phoenix.js's default push timeout. */
  pushTimeoutMs: 10_000,
  /** Bytes of a refused upgrade's body to read for its error code. @default 8192 */
  refusalBodyLimitBytes: 8 * 1024,
  /**
   * Longest wait for an `apiKey` or `params` function (and a channel's params function) to
   * settle before an attempt; then the attempt fails with a retryable `other` reason naming it.
   * @default 5000 — a secret store that takes longer is down; the connect and join timeouts
   * (10 s) stay the outer bound.
   */
  credentialsTimeoutMs: 5_000,
  /**
   * Longest wait for a refused upgrade's body, after its status and headers arrived; the
   * refusal is then classified from what was read. Cut shorter when the connect timeout is
   * near (the refusal must reach the chart before it). @default 1000 — a body slower than this
   * is not worth delaying the decision: status and Retry-After already decide it.
   */
  refusalBodyTimeoutMs: 1_000,
  /**
   * How soon after the link last sent a frame (a push, join or leave; not a heartbeat) a reset of
   * an accepted socket's TCP connection (Node: `ECONNRESET`, `EPIPE`) reads as a server's close
   * that may have lost frames: a `dropped` reason with `reset: true`, after which the next
   * upgrades are conflict probes (docs/rules.md "Supersede is terminal"). Phoenix closes a
   * connection with the client's bytes unread with a reset, which discards what the client had
   * not yet read, a supersede push among it (docs/field-notes.md "A reset loses what it
   * overtakes"); a server has unread bytes only just after the client sent. A reset of a link
   * that sent nothing that recently (a NAT or proxy that dropped an idle flow, the server still
   * holding the socket) is a plain drop: a probe would meet that socket's 409 until the server's
   * idle timeout. 0: no reset counts. In a browser no reset is ever seen. @default 2000 — the
   * server's read lag under load plus a round trip, with margin.
   */
  resetAfterSendMs: 2_000,
}

/** Transport policy; see {@link DEFAULT_TRANSPORT_POLICY}. */
export type TransportPolicy = typeof DEFAULT_TRANSPORT_POLICY

/**
 * Checks the transport policy: whole numbers; heartbeatIntervalMs at least 10; pushTimeoutMs, refusalBodyTimeoutMs and credentialsTimeoutMs at least 1;
 * maxFrameBytes at least 1024.
 *
 * @throws {RangeError} naming the first field that is out of range.
 */
export function validateTransportPolicy(policy: TransportPolicy): TransportPolicy {
  for (const [name, value] of Object.entries(policy)) assertMs(`transport.${name}`, value, MIN_TRANSPORT_POLICY[name as keyof TransportPolicy] ?? 0)
  return policy
}

/**
 * Lower bounds above 0. A push wait of 0 could never be met; nor could a heartbeat interval under
 * 10 ms, since phoenix.js waits one interval for each heartbeat's reply (1 and 2 ms looped through
 * `timed-out(heartbeat)` reconnects even on loopback, 5 ms held: a breaker, 2026-12-06); a frame
 * limit under 1 KiB cannot carry a join reply (and `ws` reads 0 as "no limit" while the decoder
 * would refuse every frame).
 */
const MIN_TRANSPORT_POLICY: Partial<TransportPolicy> = { heartbeatIntervalMs: 10, pushTimeoutMs: 1, maxFrameBytes: 1024, refusalBodyTimeoutMs: 1, credentialsTimeoutMs: 1 }

Object.freeze(DEFAULT_TRANSPORT_POLICY)
