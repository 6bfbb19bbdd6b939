/**
 * One accepted socket of the simulator: what it sent and received, its joined channels, and the
 * controls a test uses on it (close with any code, abort without a close frame, stall).
 */
import type { WebSocket } from 'ws'
import type { Socket } from 'node:net'
import { encodeTextFrame, isWellFormedText, type ClientFrame, type WireRef } from '../../protocol.js'
import { encodeV1, type SerializerVersion } from './serializers.js'
import { deepFreeze } from '../../freeze.js'
import { copyText } from '../../../machines/types.js'

/** A frame the simulator saw or sent on one socket. */
export interface RecordedFrame {
  /** `in`: from the client; `out`: to the client. */
  dir: 'in' | 'out'
  /** Milliseconds since the simulator started. */
  at: number
  /**
   * The decoded frame, or null for a frame that could not be decoded. The payload of a frame whose
   * text is longer than {@link RECORD_TEXT_LIMIT} characters is cut (see `length`).
   */
  frame: ClientFrame | null
  /** The raw text (binary frames: `<binary N bytes>`), at most {@link RECORD_TEXT_LIMIT} characters (a cut one ends in `…`). */
  raw: string
  /**
   * Set only when the frame was longer than {@link RECORD_TEXT_LIMIT}: its whole length (of a text
   * frame in UTF-16 code units, of a binary frame in bytes). The record then keeps the frame's
   * topic, event and refs and, of its payload, the first 20 top-level fields that are not objects or
   * arrays (a payload that is not an object: null), so a reply keeps its `status`; each text cut to
   * 200 characters, every cut a copy of its own (a V8 slice would keep the whole frame alive). So a
   * record holds at most a few kilobytes whatever the client sends (up to `maxFrameBytes` per frame),
   * and a long-running simulator's memory stays bounded.
   */
  length?: number
}

/** The phx_join frames of one socket its `joinsReceived` keeps (the first ones). */
export const JOINS_KEPT = 200

/** The characters of a frame's text a record keeps whole. */
export const RECORD_TEXT_LIMIT = 2000
/** The characters of a text of a cut record (a topic, a ref, a payload field and its name) it keeps. */
const CUT_FIELD_LIMIT = 200
/** The top-level fields of a cut payload a record keeps. */
const CUT_FIELDS = 20

/** A text of a cut record: whole when short, else its first 200 characters copied, then `…`. */
export function cutField(text: string): string {
  return text.length > CUT_FIELD_LIMIT ? `${copyText(text, CUT_FIELD_LIMIT)}…` : text
}

/** A ref as a record keeps it: a string cut as {@link cutField} cuts it, a number or boolean as it came. */
export function cutRef(ref: WireRef): WireRef {
  return typeof ref === 'string' ? cutField(ref) : ref
}

/** The part of a payload a record of a long frame keeps: its first top-level scalars, texts cut. */
function cutPayload(payload: unknown): Record<string, unknown> | null {
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload) || payload instanceof ArrayBuffer) return null
  const kept: Record<string, unknown> = {}
  let fields = 0
  for (const key in payload) {
    if (!Object.hasOwn(payload, key)) continue
    const value = (payload as Record<string, unknown>)[key]
    if (typeof value === 'object' && value !== null) continue
    if (typeof value === 'function' || typeof value === 'symbol' || typeof value === 'undefined') continue
    // defineProperty: an own `__proto__` key stays a field, as the payload carried it.
    Object.defineProperty(kept, cutField(key), { value: typeof value === 'string' ? cutField(value) : value, enumerable: true, writable: true, configurable: true })
    if (++fields === CUT_FIELDS) break
  }
  return kept
}

/** A channel joined on one socket. */
export interface SimChannel {
  topic: string
  /**
   * join_ref of the join that is current on this socket, as the client sent it (null when it joined
   * without one, as Phoenix allows): what the socket's own frames for the channel carry (its
   * phx_close and phx_error) and what a phx_leave must match.
   */
  joinRef: WireRef
  /**
   * What the channel's own process carries as join_ref on what it sends (replies to the channel's
   * pushes and leave, pushes, broadcasts, control signals, a supersede): the join's join_ref, or
   * the join's ref when it had none (phoenix lib/phoenix/channel/server.ex: `join_ref || ref`;
   * measured on Bandit and Cowboy 2026-12-07).
   */
  channelRef: WireRef
}

/** Close frames seen on one socket. */
export interface CloseRecord {
  code: number
  /** The close frame's reason text; empty in every close Bandit and Cowboy send. */
  reason: string
}

/** Every {@link CloseCause}, for schemas (the simulator's OpenAPI document). */
export const CLOSE_CAUSES = Object.freeze(['scripted', 'disconnect', 'supersede', 'idle', 'restart', 'stop', 'malformed', 'protocol'] as const)
/**
 * Why the simulator closed a socket, as the platform knows it (never on the wire: the close
 * frame carries only the code). `scripted`: a test's `close()`.
 */
export type CloseCause = (typeof CLOSE_CAUSES)[number]

/**
 * The close codes an endpoint may send in a close frame (RFC 6455 section 7.4.1 and 7.4.2), as
 * `[low, high]` ranges, both ends included: 1000-1003 and 1007-1014 (1004 is reserved; 1005, 1006
 * and 1015 must never be sent), and 3000-4999 (registered and private use); 1016-2999 are
 * reserved for the protocol.
 */
export const SENDABLE_CLOSE_RANGES: ReadonlyArray<readonly [number, number]> = deepFreeze([
  [1000, 1003],
  [1007, 1014],
  [3000, 4999],
])

/** {@link SENDABLE_CLOSE_RANGES} as a message writes them: `1000-1003, 1007-1014 or 3000-4999 (RFC 6455 section 7.4.1)`. */
export const SENDABLE_CLOSE_CODES_TEXT = `${SENDABLE_CLOSE_RANGES.map(([low, high]) => `${low}-${high}`)
  .join(', ')
  .replace(/, (?=[^,]*$)/, ' or ')} (RFC 6455 section 7.4.1)`

/** Whether an endpoint may send `code` in a close frame: a whole number in one of {@link SENDABLE_CLOSE_RANGES}. */
export function isSendableCloseCode(code: number): boolean {
  return Number.isInteger(code) && SENDABLE_CLOSE_RANGES.some(([low, high]) => code >= low && code <= high)
}

/**
 * @throws {RangeError} for a close code an endpoint may not send, or a reason over 123 bytes
 *   (RFC 6455 section 5.5: a control frame's payload is at most 125 bytes, 2 of them the code).
 */
export function assertSendableClose(code: number, reason: string): void {
  if (!isSendableCloseCode(code)) throw new RangeError(`close code ${code} may not be sent: use ${SENDABLE_CLOSE_CODES_TEXT}`)
  if (Buffer.byteLength(reason) > 123) throw new RangeError(`a close reason is at most 123 bytes (RFC 6455 section 5.5), got ${Buffer.byteLength(reason)}`)
  if (!isWellFormedText(reason)) throw new RangeError(HALF_CHARACTER_TEXT)
}
/** Why a close reason holding half a character is refused. */
export const HALF_CHARACTER_TEXT =
  'a close reason must be well-formed text: it holds half of a character (a lone UTF-16 surrogate), which its UTF-8 on the wire (RFC 6455 section 5.5.1) cannot carry; the client would read U+FFFD instead'


/** How long a socket the server closes whole waits, after its close frame, for the client's end before it is cut. */
const CUT_AFTER_CLOSE_MS = 1_000

/**
 * One accepted WebSocket. Read its fields to assert what the server saw; call `close`,
 * `abort` or `stall` to script the peer.
 */
export class SimConnection {
  /** `sock-<n>`, the socket id sent as `target_socket_id` in supersede pushes. */
  readonly id: string
  /** The `agent_id` socket param. */
  readonly agentId: string
  /** All query params of the upgrade, the API key removed. */
  readonly params: Readonly<Record<string, string>>
  /** Milliseconds since the simulator started. */
  readonly openedAt: number
  /**
   * The serializer its upgrade's `vsn` chose (serializers.ts): `v2` (`vsn=2.0.x`, what phoenix.js
   * and the link send) or `v1` (`vsn=1.0.x` or no vsn: frames are JSON objects, with no join_ref
   * in what the server sends).
   */
  readonly serializer: SerializerVersion
  /**
   * `open` until the simulator or the client starts the closing handshake (the client's close
   * frame counts when it is read), `closed` once the TCP connection ended.
   */
  state: 'open' | 'closing' | 'closed' = 'open'
  closedAt: number | null = null
  /** The close frame the simulator sent, if it closed. */
  closeSent: CloseRecord | null = null
  /** When it sent that close frame (ms since the simulator started); null while it sent none. */
  closeSentAt: number | null = null
  /** Why the simulator closed it, if it did. */
  closeCause: CloseCause | null = null
  /** The close the server's socket reported: the client's close frame, or 1006 with no frame. */
  closeSeen: CloseRecord | null = null
  /**
   * The close frame the client sent to start the closing handshake (read while the socket was
   * open; 1005 when it carried no code), or null when the simulator started it or none came. Once
   * set, the simulator's own close() does nothing and abort() only ends the TCP connection: the
   * close is the client's, whatever is scripted after it.
   */
  clientClosed: CloseRecord | null = null
  /** Whether abort() ended it without a close frame. */
  aborted = false
  /** Whether stall() stopped it answering heartbeats and reading. */
  stalled = false
  /** The supersede payload pushed to it, when the simulator superseded it. */
  superseded: Record<string, unknown> | null = null
  /** Channels joined on this socket, by topic. */
  readonly channels = new Map<string, SimChannel>()
  /** Frames in both directions, the most recent `recordLimit`. */
  readonly frames: RecordedFrame[] = []
  /** Frames this socket's record lost, closed, to the simulator's `historyFrameLimit` (frames past `recordLimit` are not counted). */
  framesForgotten = 0
  /** Heartbeats answered. */
  heartbeats = 0
  /** phx_join frames received, every one (the frame record keeps only the most recent `recordLimit` frames). */
  joins = 0
  /**
   * The first {@link JOINS_KEPT} phx_join frames received, whatever the frame record keeps (a chatty
   * client's joins leave a `recordLimit` record quickly): topic and join_ref (each cut to 200
   * characters, as a cut record's), and when (ms since the simulator started). What a rejoin is
   * judged by (a fresh join_ref for every topic). A closed socket's count toward `historyFrameLimit`,
   * which empties them with its frames.
   */
  readonly joinsReceived: Array<{ topic: string; joinRef: WireRef; at: number }> = []
  /** Inbound frames that could not be decoded, with why. */
  readonly problems: string[] = []

  /** @internal Called once, as the socket stops being live by the simulator's close or abort (the simulator's presence ends there). */
  onClosing: (() => void) | null = null
  /** @internal Called after each frame sent to the client (a Bandit-flavored simulator restarts its idle timeout on it). */
  onSent: (() => void) | null = null

  /** @internal The flavor's `readsOnAfterClose`: close codes after which the server reads on until the client's end. */
  readsOnAfterClose: readonly number[] = []

  /** @internal */
  idleTimer: NodeJS.Timeout | null = null
  /** @internal A drain's cut of a socket with no channel (Cowboy's way), pending. */
  drainTimer: NodeJS.Timeout | null = null

  /** @internal */
  constructor(
    readonly ws: WebSocket,
    init: { id: string; agentId: string; params: Record<string, string>; openedAt: number; serializer: SerializerVersion },
    private readonly recordLimit: number,
    private readonly clock: () => number,
  ) {
    this.id = init.id
    this.agentId = init.agentId
    this.params = init.params
    this.openedAt = init.openedAt
    this.serializer = init.serializer
  }

  /**
   * Whether the socket is open: neither side has started the closing handshake. A close frame the
   * client sent counts as soon as it is read, before the handshake completes (as a Phoenix socket
   * process ends on it), so a reconnect right after never supersedes a socket already closing.
   */
  get live(): boolean {
    return this.state === 'open' && this.ws.readyState === this.ws.OPEN
  }

  /** @internal Records a frame, keeping at most `recordLimit`; `length`: the frame's (a binary frame's bytes; default the text's). */
  record(dir: 'in' | 'out', frame: ClientFrame | null, raw: string, length = raw.length): void {
    if (this.recordLimit <= 0) return
    if (this.frames.length >= this.recordLimit) this.frames.shift()
    if (length <= RECORD_TEXT_LIMIT) {
      this.frames.push({ dir, at: this.clock(), frame, raw })
      return
    }
    this.frames.push({
      dir,
      at: this.clock(),
      frame:
        frame === null
          ? null
          : {
              join_ref: cutRef(frame.join_ref),
              ref: cutRef(frame.ref),
              topic: cutField(frame.topic),
              event: cutField(frame.event),
              payload: cutPayload(frame.payload),
            },
      raw: raw.length > RECORD_TEXT_LIMIT ? `${copyText(raw, RECORD_TEXT_LIMIT)}…` : raw,
      length,
    })
  }

  /**
   * Sends a JSON frame to the client, in its {@link serializer}'s form (a V1 frame carries no
   * join_ref, and is recorded with none). Does nothing once the socket is closing.
   */
  send(frame: ClientFrame): void {
    if (this.state !== 'open') return
    const v1 = this.serializer === 'v1'
    const text = v1 ? encodeV1(frame) : encodeTextFrame(frame)
    this.record('out', v1 ? { ...frame, join_ref: null } : frame, text)
    this.ws.send(text)
    this.onSent?.()
  }

  /** Sends raw text or bytes (a malformed frame, for fuzzing a client); false (nothing sent) once the socket is closing. */
  sendRaw(data: string | Uint8Array): boolean {
    if (this.state !== 'open') return false
    this.record('out', null, typeof data === 'string' ? data : `<binary ${data.byteLength} bytes>`, typeof data === 'string' ? data.length : data.byteLength)
    this.ws.send(data)
    this.onSent?.()
    return true
  }

  /**
   * Starts the closing handshake with `code` and `reason` (RFC 6455 section 5.5.1).
   * 1005, 1006 and 1015 cannot be sent on the wire; use abort() for a close without a frame.
   */
  close(code: number, reason = '', cause: CloseCause = 'scripted'): void {
    assertSendableClose(code, reason)
    if (this.state !== 'open') return
    this.state = 'closing'
    this.closeSent = { code, reason }
    this.closeSentAt = this.clock()
    this.closeCause = cause
    this.ws.close(code, reason)
    this.endAfterCloseFrame(code)
    this.closing()
  }

  /**
   * @internal Ends the TCP connection as the flavor's server does once a close frame with `code`
   * has gone out, or (`null`) its answer to the client's close (`ws` writes the frame into the
   * socket at once; the FIN follows it): after a code in `readsOnAfterClose` it reads on until
   * the client's end (or ws's close timeout); after any other, and after its answer, it cuts the
   * connection at the client's end or `CUT_AFTER_CLOSE_MS` (1 s) later.
   */
  endAfterCloseFrame(code: number | null): void {
    const socket = this.rawSocket()
    if (!socket || socket.destroyed) return
    if (!socket.writableEnded) socket.end()
    if (code !== null && this.readsOnAfterClose.includes(code)) return
    // The real servers close at once: a close(2) with the client's latest bytes unread sends a
    // reset, which can drop on the client the frames written just before it. Phoenix's platform
    // pushes a supersede 50 ms before its close; the simulator pushes and closes in one tick, and
    // a reset then lost the push under a client's load (the link reconnected and evicted the
    // newer instance: a breaker, 2026-12-06). So the cut waits a moment.
    const cut = setTimeout(() => socket.destroy(), CUT_AFTER_CLOSE_MS)
    socket.once('close', () => clearTimeout(cut))
  }

  /**
   * Ends the TCP connection without a close frame: the client sees 1006. After the client's own
   * close frame (the handshake already answered by `ws`) it only ends the TCP connection, and the
   * close stays the client's. With `reset`, the connection is reset (a TCP RST, Node's
   * `socket.resetAndDestroy()`) instead of ended: what a real server's close does to a client
   * whose bytes it had not read. Node's client reports `ECONNRESET`, or, when the reset comes
   * right behind bytes it had not read yet, an end of stream (docs/field-notes.md "Node reports a
   * reset that arrives behind unread bytes as an end of stream").
   */
  abort(reset = false): void {
    if (this.state === 'closed') return
    if (this.clientClosed === null) this.aborted = true
    this.state = 'closing'
    if (reset) {
      const socket = this.rawSocket()
      if (socket && !socket.destroyed) socket.resetAndDestroy()
    }
    this.ws.terminate()
    this.closing()
  }

  private closing(): void {
    const onClosing = this.onClosing
    this.onClosing = null
    onClosing?.()
  }

  /** Stops answering heartbeats and stops reading from the socket; it never closes by itself. */
  stall(): void {
    this.stalled = true
    this.rawSocket()?.pause()
  }

  /** Undoes stall(): reads again, and handles what the client sent meanwhile (its close, say). */
  resume(): void {
    if (!this.stalled) return
    this.stalled = false
    this.rawSocket()?.resume()
  }

  private rawSocket(): Socket | undefined {
    return (this.ws as unknown as { _socket?: Socket })._socket
  }
}
