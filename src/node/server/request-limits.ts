/**
 * The HTTP/1.1 request parsers' size limits of the web servers Phoenix runs on, applied to a
 * request (an upgrade or any other) the way each server applies them, and the answer each writes
 * past one, before any route or the platform's code sees the request. A host
 * that puts a long token in its socket params connects to a server with no limits and is
 * refused by Phoenix: the simulator refuses it too.
 *
 * Measured 2026-12-06 against the reference peer (Phoenix 1.7.14 on Bandit 1.6.11 and on Cowboy
 * 2.12.0, loopback; checked in CI by test/conformance/differential.test.ts), and read in their
 * sources:
 * - Bandit (lib/bandit/http1/socket.ex) reads the request line and each header line with
 *   `:erlang.decode_packet`, whose `packet_size` counts the line with its CRLF: a request line of
 *   more than `max_request_line_length` (10,000) bytes is answered 414, a header line of more than
 *   `max_header_length` (10,000) or a 51st header line (`max_header_count`, 50) 431. It writes
 *   `HTTP/1.0 414 Request-URI Too Long` (or `431 Request Header Fields Too Large`), `connection:
 *   close` and no body, then closes.
 * - Cowboy (src/cowboy_http.erl) checks a limit only while the part of a line it has read holds
 *   no end of line, each time a read comes in: `max_request_line_length` (8,000) for the request
 *   line, `max_header_name_length` (64) for a header's name up to its colon,
 *   `max_header_value_length` (4,096) for its value; and at most `max_headers` (100) distinct
 *   header names. Erlang reads a TCP socket 1,460 bytes at a time (gen_tcp's default `buffer`),
 *   so a line passes if its end arrives in the first read that takes it past its limit: a request
 *   line of up to 8,758 bytes passes when the request comes in one write (8,760 = 6 x 1,460), one
 *   of 8,759 is refused. It writes `HTTP/1.1 414 Request-URI Too Long`, `connection: close`,
 *   `content-length: 0`, then closes.
 */
import type { IncomingMessage } from 'node:http'

/** Which server's request parser a simulator flavor models. */
export type RequestParser = 'bandit' | 'cowboy'

/** A request past a parser's limits: the status it is answered with, and which limit it crossed. */
export interface RequestTooLarge {
  /** 414 (the request line) or 431 (a header). */
  status: 414 | 431
  /** The limit crossed, in words, for the simulator's records. */
  limit: string
}

/** Bandit's defaults (bandit 1.6.11 lib/bandit/http1/socket.ex). */
const BANDIT = { requestLine: 10_000, headerLine: 10_000, headers: 50 } as const
/** Cowboy's defaults (cowboy 2.12.0 src/cowboy_http.erl) and Erlang's read size. */
const COWBOY = { requestLine: 8_000, headerName: 64, headerValue: 4_096, headers: 100, readBytes: 1_460 } as const

/**
 * Whether Cowboy refuses a line part that starts at byte `start` of the request and whose end
 * (the newline or colon it looks for) is at byte `end`: it is refused when a read boundary (a
 * multiple of Erlang's read size) falls past `start + limit` and before `end`. The request's own
 * end, where the last read stops, lies past `end`, so it never cuts.
 */
function cowboyCuts(start: number, end: number, limit: number): boolean {
  const firstBoundaryPast = (Math.floor((start + limit) / COWBOY.readBytes) + 1) * COWBOY.readBytes
  return firstBoundaryPast <= end
}

/**
 * Checks a request against a server's parser limits. The request's bytes are rebuilt
 * from what Node parsed (`METHOD url HTTP/x.y`, each header as `name: value`, lines ending CRLF,
 * the request starting a connection's bytes), which is how every WebSocket client writes one.
 * Returns null when the server would parse it. Never throws.
 */
export function requestTooLarge(req: IncomingMessage, parser: RequestParser): RequestTooLarge | null {
  const requestLine = `${req.method ?? 'GET'} ${req.url ?? '/'} HTTP/${req.httpVersion}`.length
  const raw = req.rawHeaders
  if (parser === 'bandit') {
    if (requestLine + 2 > BANDIT.requestLine) return { status: 414, limit: `request line over ${BANDIT.requestLine} bytes (Bandit)` }
    for (let i = 0; i < raw.length; i += 2) {
      if (i / 2 + 1 > BANDIT.headers) return { status: 431, limit: `more than ${BANDIT.headers} headers (Bandit)` }
      if (raw[i]!.length + 2 + raw[i + 1]!.length + 2 > BANDIT.headerLine) return { status: 431, limit: `header line over ${BANDIT.headerLine} bytes (Bandit)` }
    }
    return null
  }
  if (cowboyCuts(0, requestLine + 1, COWBOY.requestLine)) return { status: 414, limit: `request line over ${COWBOY.requestLine} bytes in a read (Cowboy)` }
  let at = requestLine + 2
  const names = new Set<string>()
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!
    const value = raw[i + 1]!
    if (names.size >= COWBOY.headers) return { status: 431, limit: `more than ${COWBOY.headers} header names (Cowboy)` }
    if (cowboyCuts(at, at + name.length, COWBOY.headerName)) return { status: 431, limit: `header name over ${COWBOY.headerName} bytes in a read (Cowboy)` }
    const valueAt = at + name.length + 2
    if (cowboyCuts(valueAt, valueAt + value.length + 1, COWBOY.headerValue)) return { status: 431, limit: `header value over ${COWBOY.headerValue} bytes in a read (Cowboy)` }
    names.add(name.toLowerCase())
    at = valueAt + value.length + 2
  }
  return null
}

/**
 * The response each server writes for a request past its limits, before it closes the
 * connection (the status lines and headers as measured; see the module comment).
 */
export function tooLargeResponse(status: 414 | 431, parser: RequestParser): string {
  const phrase = status === 414 ? 'Request-URI Too Long' : 'Request Header Fields Too Large'
  return parser === 'bandit'
    ? `HTTP/1.0 ${status} ${phrase}\r\nconnection: close\r\n\r\n`
    : `HTTP/1.1 ${status} ${phrase}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`
}

/**
 * Node's cap on a request's head for a simulator that models these parsers, in bytes: above
 * what either server lets through (Bandit: 10,000 + 50 x 10,000; Cowboy: 100 names of 64 and
 * values of 4,096, plus a read each), so the flavor's own limits answer first.
 */
export const SIMULATOR_MAX_HEADER_BYTES = 1_048_576
