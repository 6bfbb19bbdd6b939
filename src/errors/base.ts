/**
 * Base of every error phoenix-link throws or rejects with: a stable string `code` to switch on
 * (messages may change; codes do not). See the README section "Errors" for each code.
 */
export class PhoenixLinkError extends Error {
  /** Stable identifier of the error, e.g. `AGENT_DISCONNECTED`. */
  readonly code: string

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'PhoenixLinkError'
    this.code = code
  }
}

/** Whether `error` is any phoenix-link error. */
export function isPhoenixLinkError(error: unknown): error is PhoenixLinkError {
  return error instanceof PhoenixLinkError
}
