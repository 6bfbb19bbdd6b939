/** What the adapter and the link's public types share: credentials and push failures. */
import type { DisconnectReason } from '../reasons.js'

/** What one connection attempt sends: the API key and the extra socket params. */
export interface Credentials {
  apiKey: string
  /** The host's own socket params: none of those the link sets itself (protocol.ts LINK_PARAMS). */
  params: Record<string, string>
  /** The `on_conflict` param the host asked for (LinkOptions.onConflict); a conflict probe asks `reject` whatever it is. */
  onConflict?: 'supersede' | 'reject'
}

/** Rejection of an app channel push. */
export interface PushFailure {
  code: 'PUSH_TIMEOUT' | 'PUSH_REJECTED' | 'TRANSPORT_LOST' | 'PUSH_INVALID' | 'PUSH_REPLY_STATUS'
  response: unknown
  /** Why a push could not be encoded, for PUSH_INVALID; what the reply was, for PUSH_REPLY_STATUS. */
  cause?: unknown
  /** The reply's status, for PUSH_REPLY_STATUS. */
  status?: string
  /**
   * For TRANSPORT_LOST: why the transport ended, when the adapter saw it end (its close, a
   * heartbeat timeout, a supersede, the control channel's phx_close or refused join); null when
   * the link ended it.
   */
  reason?: DisconnectReason | null
}
