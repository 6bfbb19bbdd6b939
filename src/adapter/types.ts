/** What the adapter and the link's public types share: credentials and push failures. */

/** What one connection attempt sends: the API key and the extra socket params. */
export interface Credentials {
  apiKey: string
  params: Record<string, string>
}

/** Rejection of an app channel push. */
export interface PushFailure {
  code: 'PUSH_TIMEOUT' | 'PUSH_REJECTED' | 'TRANSPORT_LOST' | 'PUSH_INVALID'
  response: unknown
  /** Why a push could not be encoded, for PUSH_INVALID. */
  cause?: unknown
}
