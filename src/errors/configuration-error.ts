import { PhoenixLinkError } from './base.js'

/**
 * createLink() or the CLI got options it cannot work with: a missing agent id, a URL that is not
 * ws:// or wss://, plain ws:// to a host that is not loopback without `allowInsecureTransport`,
 * a policy number out of range: thrown at configuration. Also what a call rejects with (or throws,
 * for the synchronous `events()`) for an option of that call it cannot work with, before the call
 * does anything: a push `timeoutMs` out of range, an unknown state for `whenState`, an
 * `options.signal` that is not an AbortSignal. Code `INVALID_OPTIONS`. The message names the
 * option and the fix.
 */
export class ConfigurationError extends PhoenixLinkError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('INVALID_OPTIONS', message, options)
    this.name = 'ConfigurationError'
  }
}

/** Whether `error` is a {@link ConfigurationError}. */
export function isConfigurationError(error: unknown): error is ConfigurationError {
  return error instanceof ConfigurationError
}
