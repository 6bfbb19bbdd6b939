import type { DisconnectReason } from '../reasons.js'
import { describeReason } from '../reasons.js'
import { PhoenixLinkError } from './base.js'

/**
 * The session ended and will not come back by itself: `connect()` and `runForever()` reject with
 * it. `reason` is the typed DisconnectReason: `superseded`, `rejected` (non-retryable),
 * `suppressed`, or `graceful` when disconnect() ended a pending connect(). Code `AGENT_DISCONNECTED`.
 *
 * Fix: read `reason.kind`. `superseded` means a newer instance holds the key: do not reconnect.
 * `rejected` with `unauthenticated` means the API key or agent id is wrong.
 */
export class AgentDisconnectedError extends PhoenixLinkError {
  /** Why the session ended. */
  readonly reason: DisconnectReason

  /**
   * @param reason why the session ended, as it is (never rewritten).
   * @param options.redact applied to the message only (the link passes its key redaction: the
   *   message is output, the reason is data).
   */
  constructor(reason: DisconnectReason, options: { redact?: (text: string) => string } = {}) {
    const message = `agent disconnected: ${describeReason(reason)}`
    super('AGENT_DISCONNECTED', options.redact ? options.redact(message) : message)
    this.name = 'AgentDisconnectedError'
    this.reason = reason
  }
}

/** Whether `error` is an {@link AgentDisconnectedError}. */
export function isAgentDisconnectedError(error: unknown): error is AgentDisconnectedError {
  return error instanceof AgentDisconnectedError
}
