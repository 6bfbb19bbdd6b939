import { PhoenixLinkError } from './base.js'

/**
 * createLink() or the CLI got options it cannot work with: a missing agent id, a URL that is not
 * ws:// or wss://, plain ws:// to a host that is not loopback without `allowInsecureTransport`,
 * a policy number out of range. Thrown at configuration, never later. Code `INVALID_OPTIONS`.
 * The message names the option and the fix.
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
