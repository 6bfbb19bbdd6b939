/**
 * Close codes of the web servers a Phoenix platform runs on. The same platform event reaches
 * clients as a different close code depending on the server (docs/field-notes.md "Close codes a real
 * server sends", observed against Phoenix 1.7.24 with Bandit 1.6 and Cowboy 2.12; Phoenix 1.8.8+
 * sends an explicit 1001 for the "disconnect" broadcast, phoenix PR #6678).
 */

/** A web server's close codes for the platform events the simulator reproduces. */
export interface ServerFlavor {
  /** Human name for logs and the CLI. */
  name: string
  /** Close code of the `"disconnect"` broadcast to a socket id. */
  disconnect: number
  /** Close code sent to the older socket after its `supersede` push. */
  supersede: number
  /** Close code of the transport's idle timeout (nothing received for `idleTimeoutMs`). */
  idle: number
  /** Close code of a drain or server stop (SIGTERM). */
  restart: number
}

/** The flavors the simulator can behave as. */
export const SERVER_FLAVORS = {
  /** Phoenix 1.8.8+ on Cowboy: explicit 1001 "going away" for the disconnect broadcast. */
  phoenix: { name: 'Phoenix 1.8 (1001)', disconnect: 1001, supersede: 1001, idle: 1000, restart: 1012 },
  /** Phoenix up to 1.8.7 on Cowboy 2.12. */
  cowboy: { name: 'Cowboy 2.12 (1000)', disconnect: 1000, supersede: 1000, idle: 1000, restart: 1012 },
  /** Phoenix on Bandit 1.6. Bandit closes an idle socket with 1002. */
  bandit: { name: 'Bandit 1.6 (1011)', disconnect: 1011, supersede: 1011, idle: 1002, restart: 1012 },
} as const satisfies Record<string, ServerFlavor>

/** A flavor name: `phoenix`, `cowboy` or `bandit`. */
export type FlavorName = keyof typeof SERVER_FLAVORS
