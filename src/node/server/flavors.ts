/**
 * What differs between the web servers a Phoenix platform runs on. The same platform event reaches
 * clients as a different close code depending on the server, and a refused upgrade comes with
 * the server's own headers and keep-alive behaviour.
 *
 * The `bandit` and `cowboy` rows were measured against the reference peer (Phoenix 1.7.14 on
 * Bandit 1.6.11 and on Cowboy 2.12.0, loopback; docs/field-notes.md "Real Phoenix", checked in
 * CI by test/conformance). The `phoenix` row models Phoenix 1.8.8+, which sends an explicit 1001
 * for the "disconnect" broadcast (phoenix PR #6678); it has no reference server here, so only its
 * close codes and its phx_error payload differ from `cowboy`.
 */
import { deepFreeze } from '../../freeze.js'
import type { RequestParser } from './request-limits.js'

/** A web server's behaviour for the platform events the simulator reproduces. */
export interface ServerFlavor {
  /** Human name for logs and the CLI. */
  name: string
  /** Close code of the `"disconnect"` broadcast to a socket id. */
  disconnect: number
  /** Close code sent to the older socket after its `supersede` push. */
  supersede: number
  /** Close code of the transport's idle timeout (nothing received for `idleTimeoutMs`). */
  idle: number
  /**
   * Whether a frame the server sends restarts the idle timeout too. Bandit's WebSocket handler
   * returns its `read_timeout` from every `handle_info` of the socket process, a push or broadcast
   * to the client included (bandit 1.6.11 lib/bandit/websocket/handler.ex), so a silent client the
   * server pushes to every 10 s stays open past 60 s; Cowboy counts only what it receives
   * (measured 2026-12-06 against the reference peer).
   */
  idleCountsSends: boolean
  /**
   * Whether WebSocket frames that came in the same TCP read as the upgrade request are read. Cowboy
   * reads them; Bandit drops them unanswered and reads on from the next (a heartbeat written with
   * the request was lost in 3 of 3 runs, the next one answered; measured 2026-12-06). No client
   * that waits for the 101 before it sends, as `ws`, browsers and phoenix.js do, meets this.
   */
  readsFramesWithUpgrade: boolean
  /** Close code of a drain or server stop (SIGTERM). */
  restart: number
  /** Headers a refused upgrade carries besides content-length, content-type, retry-after and connection, in the server's order. */
  refusalHeaders: ReadonlyArray<readonly [string, string]>
  /**
   * Headers the 101 of an accepted upgrade carries besides date and the WebSocket ones, in the
   * server's order (Phoenix's transport adds cache-control; Cowboy its server header).
   */
  upgradeHeaders: ReadonlyArray<readonly [string, string]>
  /** Whether header names come sorted (Cowboy sorts them; Bandit writes date and content-length first). */
  sortsHeaders: boolean
  /**
   * How long a refused upgrade's connection stays open for a next request, in milliseconds:
   * Bandit's `read_timeout` (60 s), Cowboy's `request_timeout` (5 s).
   */
  refusalKeepAliveMs: number
  /** Whether a refusal sent with `Connection: close` closes the TCP connection (Cowboy does; Bandit sends the header and keeps it open). */
  honoursConnectionClose: boolean
  /** Payload of phx_error after a channel crash: `{}` in Phoenix 1.7 (socket.ex encode_on_exit). */
  channelErrorPayload: Readonly<Record<string, string>>
  /**
   * What a drain (SIGTERM) does to a socket that joined no channel: Phoenix's drainer closes only
   * sockets with channels (1012); the web server ends the rest as it stops. Bandit closes them
   * with 1000 at once; Cowboy cuts them (no close frame, 1006) after 5 s.
   */
  drainWithoutChannels: { readonly close: number } | { readonly abortAfterMs: number }
  /**
   * Whose HTTP/1.1 parser limits a request's size, and answers 414 or 431 past them
   * (request-limits.ts: Bandit counts whole lines, Cowboy what it has read of one).
   */
  requestParser: RequestParser
  /**
   * Close codes after which the server reads on until the client ends the connection. After
   * every other close frame, its own or its answer to the client's, the server closes the
   * connection whole: Cowboy's socket process exits (cowboy 2.12.0 src/cowboy_websocket.erl
   * `websocket_close/3`), and Bandit ends it too except after a stop that continues, a normal
   * close (1000) or the drain's 1012 (bandit 1.6.11 lib/bandit/websocket/connection.ex `do_stop`
   * against `do_error`, and `handle_control_frame` for the client's close). Either way the FIN
   * follows the close frame at once; neither waits for the client's close frame (measured
   * 2026-12-06, a client that never answers saw the FIN within 9 ms on both; a breaker's `ss`
   * showed Bandit's end orphaned after a "disconnect", still read after a normal close). The
   * simulator ends its sending side at once and, for a whole close, cuts the connection a second
   * later or at the client's end (connection.ts `endAfterCloseFrame`; docs/field-notes.md).
   */
  readsOnAfterClose: readonly number[]
}

const CACHE_CONTROL = ['cache-control', 'max-age=0, private, must-revalidate'] as const

/** The flavors the simulator can behave as. */
export const SERVER_FLAVORS = deepFreeze({
  /** Phoenix 1.8.8+ on Cowboy: explicit 1001 "going away" for the disconnect broadcast. */
  phoenix: {
    name: 'Phoenix 1.8 (1001)',
    disconnect: 1001,
    supersede: 1001,
    idle: 1000,
    idleCountsSends: false,
    readsFramesWithUpgrade: true,
    restart: 1012,
    refusalHeaders: [CACHE_CONTROL, ['server', 'Cowboy']],
    upgradeHeaders: [CACHE_CONTROL, ['server', 'Cowboy']],
    sortsHeaders: true,
    refusalKeepAliveMs: 5_000,
    honoursConnectionClose: true,
    // Phoenix 1.8.10+ names the crash (docs/field-notes.md "Phoenix V2 wire protocol").
    channelErrorPayload: { reason: 'channel_crash' },
    drainWithoutChannels: { abortAfterMs: 5_000 },
    requestParser: 'cowboy',
    readsOnAfterClose: [],
  },
  /** Phoenix 1.7.14 on Cowboy 2.12.0 (measured). */
  cowboy: {
    name: 'Cowboy 2.12 (1000)',
    disconnect: 1000,
    supersede: 1000,
    idle: 1000,
    idleCountsSends: false,
    readsFramesWithUpgrade: true,
    restart: 1012,
    refusalHeaders: [CACHE_CONTROL, ['server', 'Cowboy']],
    upgradeHeaders: [CACHE_CONTROL, ['server', 'Cowboy']],
    sortsHeaders: true,
    refusalKeepAliveMs: 5_000,
    honoursConnectionClose: true,
    channelErrorPayload: {},
    drainWithoutChannels: { abortAfterMs: 5_000 },
    requestParser: 'cowboy',
    readsOnAfterClose: [],
  },
  /** Phoenix 1.7.14 on Bandit 1.6.11 (measured). Bandit closes an idle socket with 1002. */
  bandit: {
    name: 'Bandit 1.6 (1011)',
    disconnect: 1011,
    supersede: 1011,
    idle: 1002,
    idleCountsSends: true,
    readsFramesWithUpgrade: false,
    restart: 1012,
    refusalHeaders: [['vary', 'accept-encoding'], CACHE_CONTROL],
    upgradeHeaders: [CACHE_CONTROL],
    sortsHeaders: false,
    refusalKeepAliveMs: 60_000,
    honoursConnectionClose: false,
    channelErrorPayload: {},
    drainWithoutChannels: { close: 1000 },
    requestParser: 'bandit',
    readsOnAfterClose: [1000, 1012],
  },
} as const satisfies Record<string, ServerFlavor>)

/** A flavor name: `phoenix`, `cowboy` or `bandit`. */
export type FlavorName = keyof typeof SERVER_FLAVORS
