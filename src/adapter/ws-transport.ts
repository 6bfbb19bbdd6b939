/**
 * The WebSocket handed to phoenix.js as its `transport`: one class, and per transport generation
 * that class bound to the generation's hooks, so its instances report to that generation's
 * handle. In Node (isomorphic-ws resolves to `ws`) it adds the upgrade headers (the API key),
 * the inbound frame limit and the close timeout, and reads a refused upgrade (status, Retry-After, a bounded body) from ws's
 * `unexpected-response`, then ends the WebSocket itself, so the refusal is classified within one
 * round trip whether the server keeps the HTTP connection alive (stock Phoenix on Bandit and
 * Cowboy) or closes it (docs/field-notes.md "A refused upgrade"). In a browser it is the native
 * WebSocket with only the close hook (a browser sees a refusal only as close 1006).
 */
import WebSocket from 'isomorphic-ws'
import type { ClientRequest, IncomingMessage } from 'node:http'
import { wholeWordsOf } from '../reasons.js'

/** What a refused upgrade carried. */
export interface RefusedUpgrade {
  status: number
  retryAfter: string | null
  /** The response's Date header (RFC 9110 section 6.6.1), to read an HTTP-date Retry-After on the server's own clock. */
  date: string | null
  body: string
}

/** Callbacks and settings of one generation's transport class. */
export interface TransportHooks {
  /** Upgrade headers (Node only), e.g. `{ 'x-api-key': key }`. */
  headers: Record<string, string>
  /** Largest inbound message in bytes; ws closes a larger one with 1009 (RFC 6455 section 7.4.1). */
  maxPayload: number
  /**
   * Wait for the peer's close frame after close(), in milliseconds: in Node ws then ends the TCP
   * connection; in a browser the transport stops waiting and reports itself closed.
   */
  closeTimeout: number
  /** Bytes of a refused upgrade's body to read. */
  bodyLimit: number
  /**
   * Longest wait, in milliseconds from now, for a refused upgrade's body to end (a slow or
   * endless body): asked when the status arrives, so the link can bound it by its own connect
   * timeout too (a refusal read past that would be lost to a retryable timeout).
   */
  bodyWaitMs(): number
  /** The instance phoenix.js created. */
  onCreate(ws: WebSocket): void
  /** The instance emitted its close event (once): in Node after the TCP connection ended. */
  onClosed(): void
  /** The upgrade was refused; called before ws's error and close events. */
  onRefused(refusal: RefusedUpgrade): void
  /**
   * Node only: the upgrade request left, its TCP connection (a `wss:` URL: its TLS session) up, so
   * the server may now read it (Node's http writes a request's head once its socket connects).
   * Never called when the connection fails first (refused, unreachable, a TLS failure): the server
   * saw nothing of the attempt.
   */
  onUpgradeSent(): void
  /** phoenix.js called close() on the transport (its heartbeat timeout passes "heartbeat timeout"). */
  onClientClose(code: number | undefined, reason: string | undefined): void
  /**
   * ws's `error` event (Node), with its code (e.g. `WS_ERR_UNSUPPORTED_MESSAGE_LENGTH`, a frame over
   * `maxPayload`), also once phoenix.js no longer listens: it replaces its onerror with a no-op
   * when it closes a socket (connection.js close()).
   */
  onError(code: string | null): void
  /**
   * Node only: the TCP connection of an accepted socket errored, with Node's code (`ECONNRESET`
   * when the peer reset it; on Linux `EPIPE` when a write met a reset that came after the peer's
   * FIN, net/ipv4/tcp_input.c `tcp_reset` in CLOSE_WAIT; a reset that came behind unread bytes
   * shows only to the frame written at the end of stream, as `write ECONNRESET`: see
   * `LinkWebSocket.probeAfterEnd`), and whether the connection's readable side had ended
   * (`afterEnd`: an `EPIPE` then overtook nothing, as the link read all the peer sent before its
   * FIN; before it, ws destroys the socket on the error, and what the link had not read is lost).
   * `ws` reports no error event for it (websocket.js socketOnError destroys the socket, then the
   * close reads 1006), so this is the only place a reset of an accepted socket shows (one during
   * the handshake comes as ws's error, {@link TransportHooks.onError}).
   */
  onSocketError(code: string | null, message: string, afterEnd: boolean): void
}

/**
 * An empty, unsolicited pong (RFC 6455 section 5.5.3: "A Pong frame MAY be sent unsolicited"),
 * masked as every client frame must be (section 5.3: FIN and opcode 0xA, the mask bit and length
 * 0, then a fresh 4-byte masking key): the write of {@link LinkWebSocket.probeAfterEnd}.
 */
function emptyPong(): Uint8Array {
  const frame = new Uint8Array(6)
  frame[0] = 0x8a
  frame[1] = 0x80
  globalThis.crypto.getRandomValues(frame.subarray(2))
  return frame
}

const isNodeWs = typeof (WebSocket as unknown as { prototype: { on?: unknown } }).prototype.on === 'function'

/**
 * What an HTTP header value may hold (RFC 9110 section 5.5: visible ASCII and obs-text, with
 * spaces and tabs only between them). A space or tab at either end is not part of a field value:
 * Node's http and Cowboy drop it, Bandit 1.6 keeps a trailing one (measured on the reference peer
 * 2026-12-07: `x-api-key: k1 ` is refused 403 on Bandit, accepted on Cowboy), so such a key would
 * be a different key on each server.
 */
const HEADER_VALUE = /^(?:[\x21-\x7e\x80-\xff](?:[\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?)?$/

/** Whether `value` can be sent exactly as an HTTP header value (the `x-api-key` upgrade header). */
export function isHeaderValue(value: string): boolean {
  return HEADER_VALUE.test(value)
}

/** Whether this runtime's WebSocket is Node's `ws` (headers, refused-upgrade details). */
export const SUPPORTS_UPGRADE_HEADERS = isNodeWs

/**
 * The one WebSocket subclass every transport uses; each instance carries its generation's hooks.
 * One class for all (not one per generation) keeps every socket's hidden class the same, so
 * ws's hot paths stay monomorphic (bench/ push throughput and idle memory).
 */
class LinkWebSocket extends (WebSocket as unknown as new (...args: unknown[]) => WebSocket) {
  readonly #hooks: TransportHooks
  /**
   * Browser only: the timer that stops waiting for the close event `closeTimeout` ms after
   * close() (undefined until close()). A browser's WebSocket takes no close timeout and waits for
   * the peer's close frame on its own clock (Chromium 60 s, measured against a stalled server), so
   * without it a host's disconnect() would wait as long. In Node ws's `closeTimeout` ends the TCP
   * connection and emits the close itself.
   */
  #closeBound: ReturnType<typeof setTimeout> | undefined = undefined
  /** The close was reported (once: the browser's bound and the close event both report it). */
  #reported = false
  /**
   * Node only: the TCP socket of a refused upgrade, until its close event. ws reports that
   * WebSocket closed on the tick after it destroys the socket (websocket.js abortHandshake), before
   * the socket's handle has closed (net.js emits close from the handle's close callback; its
   * `closed` is already true), so the close is waited for: disconnect() resolves once every socket
   * is closed. `awaited` once ws reported close first.
   */
  #refusedSocket: 'open' | 'awaited' | null = null
  /**
   * Node only: ends the read of a refused upgrade's body now and reports the refusal, set while
   * that read goes on. ws's error and close call it first: a connection the peer resets, or a body
   * Node's parser refuses (a malformed chunk), errors the handshake request, and ws reports error
   * and close 1006 before the response closes; the status read before it is still the answer.
   */
  #cutRefusal: (() => void) | null = null

  constructor(hooks: TransportHooks, url: string, protocols: string | string[] | undefined) {
    if (isNodeWs) {
      super(url, protocols, {
        headers: hooks.headers,
        maxPayload: hooks.maxPayload,
        closeTimeout: hooks.closeTimeout,
        // ws's documented hook for the handshake request (websocket.js initAsClient), here to
        // learn when the request leaves; it ends the request as ws would.
        finishRequest: (req: ClientRequest) => LinkWebSocket.finishRequest(req, hooks),
        // A refused upgrade is read by the listener below; without it ws only reports the status.
      })
    } else {
      super(url, protocols)
    }
    this.#hooks = hooks
    hooks.onCreate(this)
    // Listeners shared by every instance (`this` is the WebSocket): no closure per socket. None is
    // a once(): ws emits `upgrade` once per WebSocket anyway, and removing a listener deletes its
    // key from the emitter's `_events`, which turns that object into a dictionary for the socket's
    // life (about 190 bytes more per link, and a slower lookup on every `message` emit).
    if (isNodeWs) {
      const emitter = this as unknown as NodeJS.EventEmitter
      emitter.on('unexpected-response', LinkWebSocket.refused)
      emitter.on('close', LinkWebSocket.closed)
      emitter.on('error', LinkWebSocket.errored)
      emitter.on('upgrade', LinkWebSocket.upgraded)
    } else {
      this.addEventListener('close', LinkWebSocket.closed)
    }
  }

  /**
   * ws's `finishRequest` (Node): ends the handshake request, and reports the upgrade sent once
   * its socket connects (`secureConnect` for TLS), when Node's http writes the buffered request
   * head (net.js writes a connecting socket's data on its connect). Called inside ws's
   * constructor, before this instance's fields exist: the hooks come as an argument.
   */
  private static finishRequest(req: ClientRequest, hooks: TransportHooks): void {
    req.once('socket', (socket) => {
      // ws makes a fresh connection for every handshake (no agent), still connecting here.
      const tls = (socket as { encrypted?: boolean }).encrypted === true
      if (!tls && !socket.connecting) hooks.onUpgradeSent()
      else socket.once(tls ? 'secureConnect' : 'connect', () => hooks.onUpgradeSent())
    })
    req.end()
  }

  /** ws's `unexpected-response` (Node): the upgrade was answered with another status than 101. */
  private static refused(this: LinkWebSocket, _req: ClientRequest, res: IncomingMessage): void {
    // ws emits unexpected-response from the http client's parse of the response head, inside the
    // TCP socket's own data event (websocket.js initAsClient), so the socket is there and still open.
    this.#refusedSocket = 'open'
    res.socket.once('close', () => {
      const awaited = this.#refusedSocket === 'awaited'
      this.#refusedSocket = null
      if (awaited) this.#hooks.onClosed()
    })
    this.#cutRefusal = readRefusal(this, res, this.#hooks)
  }

  /**
   * ws's `upgrade` (Node): the server answered 101 on this TCP connection. Its errors from now on
   * (a reset) are the hooks' to know: ws swallows them (see {@link TransportHooks.onSocketError}).
   */
  private static upgraded(this: LinkWebSocket, res: IncomingMessage): void {
    const hooks = this.#hooks
    const socket = res.socket
    socket.on('error', (error: Error & { code?: unknown }) => hooks.onSocketError(typeof error.code === 'string' ? error.code : null, error.message, socket.readableEnded))
    socket.on('end', () => LinkWebSocket.probeAfterEnd(this, socket))
  }

  /**
   * Node only, at the end of stream of an accepted socket's TCP connection (its `end` event) while
   * the WebSocket is still open (no close frame came, and the link sent none: after its own close
   * frame, behind which ws sends nothing and RFC 6455 section 5.5.1 allows no data frame, the end
   * is that of a close handshake, cut short or not; test/wire/end-probe.test.ts): the server's FIN,
   * or a reset that arrived behind bytes the link had not read yet. libuv takes a hang-up seen
   * after a read that did not fill its buffer as the end of stream without reading again (libuv
   * src/unix/stream.c `uv__stream_io`), so for such a reset Node emits `end`, never `ECONNRESET`
   * (docs/field-notes.md "Node reports a reset that arrives behind unread bytes as an end of
   * stream"). One frame written now tells them apart: the kernel fails a write to a reset
   * connection with `ECONNRESET`, which reaches the socket's `error` listener as `write
   * ECONNRESET`, while a connection the server only ended takes it. The frame is an empty pong
   * ({@link emptyPong}), not an empty write: Node's TLS layer reports every empty write as done and
   * drops its error (src/crypto/crypto_tls.cc `TLSWrap::DoWrite`, "Empty write"), so over `wss:`
   * only a frame of some bytes reaches the connection (a breaker, 2026-12-06: 0 of 6 resets found
   * with the empty write over TLS, 5 of 5 with the pong). It goes through the prototype's `write`:
   * at the end of stream Node gives the socket an own `write` that fails without writing (node
   * lib/net.js `onReadableStreamEnd`, `writeAfterFIN`). This listener runs before ws's own `end`
   * listener (which ends the socket), as ws adds that one only after the `upgrade` event returns
   * (websocket.js `initAsClient`).
   */
  private static probeAfterEnd(ws: LinkWebSocket, socket: IncomingMessage['socket']): void {
    // OPEN is the whole condition: ws ends or destroys the socket only once it is CLOSING (its close
    // frame sent or read, or terminate()), and Node emits no `end` on a destroyed socket.
    if (ws.readyState !== WebSocket.OPEN) return
    ;(Object.getPrototypeOf(socket) as { write(this: unknown, chunk: Uint8Array): boolean }).write.call(socket, emptyPong())
  }

  /** ws's error event (Node): its code to the hooks, after a refusal being read is reported. */
  private static errored(this: LinkWebSocket, error: unknown): void {
    this.#cutRefusal?.()
    const code = (error as { code?: unknown } | null)?.code
    this.#hooks.onError(typeof code === 'string' ? code : null)
  }

  /** The close event: ws and a browser's WebSocket emit it once; reported once, the browser's bound cleared. */
  private static closed(this: LinkWebSocket): void {
    this.#cutRefusal?.()
    this.#cutRefusal = null
    if (this.#reported) return
    this.#reported = true
    clearTimeout(this.#closeBound)
    if (this.#refusedSocket === 'open') {
      this.#refusedSocket = 'awaited'
      return
    }
    this.#hooks.onClosed()
  }

  /** The browser's close bound passed: reported as closed; the browser ends the handshake on its own, unheard. */
  private static abandoned(ws: LinkWebSocket): void {
    LinkWebSocket.closed.call(ws)
  }

  override close(code?: number, reason?: string): void {
    this.#hooks.onClientClose(code, reason)
    super.close(code, reason)
    if (!isNodeWs && !this.#reported) this.#closeBound ??= setTimeout(LinkWebSocket.abandoned, this.#hooks.closeTimeout, this)
  }
}

/**
 * Makes the transport constructor for one generation: what phoenix.js calls as
 * `new transport(url, protocols)` (socket.js transportConnect): {@link LinkWebSocket} bound to
 * `hooks` (a bound class is a constructor whose instances are LinkWebSockets; it makes no prototype
 * object or hidden class of its own, as a constructor function per transport did).
 */
export function transportClass(hooks: TransportHooks): new (url: string, protocols?: string | string[]) => WebSocket {
  return LinkWebSocket.bind(null, hooks) as unknown as new (url: string, protocols?: string | string[]) => WebSocket
}

/**
 * Reads status, Retry-After and up to `bodyLimit` bytes of body within `bodyWaitMs()` ms, reports
 * them, then ends the WebSocket with `terminate()`: ws aborts the handshake request, destroys its
 * TCP socket and emits error and close 1006, after the status is known.
 *
 * Destroying the request is not enough. Stock Phoenix answers a refusal with `content-length: 0`
 * and keeps the connection alive (Bandit for 60 s, Cowboy for 5 s); once such a response ends,
 * Node's http client detaches the socket from the request (responseKeepAlive), so
 * `req.destroy()` does nothing and ws would emit neither error nor close: every attempt would
 * hang until the connect timeout (docs/field-notes.md, checked against Phoenix 1.7.14 on Bandit
 * 1.6.11 and Cowboy 2.12.0).
 *
 * @returns what ends the read now, reporting what arrived as a cut body (once: a later end or
 *   cut reports nothing); the transport calls it when ws errors or closes first.
 */
function readRefusal(ws: WebSocket, res: IncomingMessage, hooks: TransportHooks): () => void {
  const status = res.statusCode ?? 0
  const header = res.headers['retry-after']
  const retryAfter = Array.isArray(header) ? (header[0] ?? null) : (header ?? null)
  const date = res.headers.date ?? null
  const chunks: Buffer[] = []
  let size = 0
  let done = false
  const finish = (whole: boolean) => {
    if (done) return
    done = true
    clearTimeout(timer)
    res.off('data', onData)
    const text = Buffer.concat(chunks).toString('utf8')
    // A body cut by the byte limit or the time limit loses the word the cut split when it is long
    // enough to be the start of a key the server echoed, which a part of would no longer be
    // recognised, and redacted, on output (reasons.ts wholeWordsOf).
    hooks.onRefused({ status, retryAfter, date, body: whole ? text : wholeWordsOf(text) })
    // A connection the server keeps alive is detached from the request once the response ends, so
    // ws's abort of the request would leave it open until the http client or the server ends it.
    res.socket?.destroy()
    ws.terminate()
  }
  const onData = (chunk: Buffer) => {
    if (size < hooks.bodyLimit) chunks.push(chunk.subarray(0, hooks.bodyLimit - size))
    size += chunk.length
    // The read ends at the limit, whatever follows (a server may never end the body); what was
    // read counts as cut, since whether the body ended there is not known yet.
    if (size >= hooks.bodyLimit) finish(false)
  }
  const timer = setTimeout(() => finish(false), hooks.bodyWaitMs())
  res.on('data', onData)
  // The response's close ends the read (Node 20: emitted after 'end' for a whole body, and for a
  // body cut short by the peer, when `complete` stays false; node lib/_http_incoming.js). An
  // 'error' listener is not needed: IncomingMessage emits an error only to a listener.
  res.once('close', () => finish(res.complete))
  return () => finish(false)
}
