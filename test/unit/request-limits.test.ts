import type { IncomingMessage } from 'node:http'
import { describe, expect, it } from 'vitest'
import { requestTooLarge, SIMULATOR_MAX_HEADER_BYTES, tooLargeResponse } from '../../src/node/server/request-limits.js'

/**
 * The parser models at their exact bounds. The bounds themselves were measured against Phoenix on
 * Bandit and Cowboy (test/conformance/differential.test.ts checks them there in CI); these tests
 * pin the arithmetic that reproduces them, byte by byte, without a server.
 */

/** A request as Node parsed it: method, URL, version and raw header pairs. */
function request(url: string, headers: Array<[string, string]> = [], method = 'GET'): IncomingMessage {
  return { method, url, httpVersion: '1.1', rawHeaders: headers.flat() } as unknown as IncomingMessage
}

/** A URL that makes the request line (`GET <url> HTTP/1.1`, without its CRLF) exactly `length` bytes. */
function urlForLine(length: number): string {
  const fixed = 'GET  HTTP/1.1'.length
  return `/${'a'.repeat(length - fixed - 1)}`
}

/** `count` headers with distinct short names. */
function distinct(count: number, prefix = 'x-h'): Array<[string, string]> {
  return Array.from({ length: count }, (_, i) => [`${prefix}${i}`, 'v'] as [string, string])
}

describe('requestTooLarge: Bandit (request line and each header line counted with their CRLF, at most 50 header lines)', () => {
  it('passes a request line of 9,998 bytes (10,000 with its CRLF) and answers one of 9,999 414', () => {
    expect(`GET ${urlForLine(9_998)} HTTP/1.1`).toHaveLength(9_998)
    expect(requestTooLarge(request(urlForLine(9_998)), 'bandit')).toBeNull()
    expect(requestTooLarge(request(urlForLine(9_999)), 'bandit')).toEqual({ status: 414, limit: 'request line over 10000 bytes (Bandit)' })
  })

  it('passes a header line of 10,000 bytes with `: ` and CRLF, and answers one of 10,001 431, whichever header it is', () => {
    // name + ': ' + value + CRLF: 4 bytes beside name and value.
    const fits: [string, string] = ['x-long', 'v'.repeat(10_000 - 4 - 'x-long'.length)]
    const over: [string, string] = ['x-long', 'v'.repeat(10_001 - 4 - 'x-long'.length)]
    expect(requestTooLarge(request('/socket', [['host', 'h'], fits]), 'bandit')).toBeNull()
    expect(requestTooLarge(request('/socket', [['host', 'h'], over]), 'bandit')).toEqual({ status: 431, limit: 'header line over 10000 bytes (Bandit)' })
    // The name counts as the value does.
    expect(requestTooLarge(request('/socket', [['n'.repeat(9_995), 'v']]), 'bandit')).toBeNull()
    expect(requestTooLarge(request('/socket', [['n'.repeat(9_996), 'v']]), 'bandit')).toMatchObject({ status: 431 })
  })

  it('passes 50 header lines and answers a 51st 431, even a repeated name (Bandit counts lines)', () => {
    expect(requestTooLarge(request('/socket', distinct(50)), 'bandit')).toBeNull()
    expect(requestTooLarge(request('/socket', distinct(51)), 'bandit')).toEqual({ status: 431, limit: 'more than 50 headers (Bandit)' })
    expect(requestTooLarge(request('/socket', [...distinct(50), ['x-h0', 'again']]), 'bandit')).toMatchObject({ status: 431 })
  })

  it('counts the method and the HTTP version in the request line', () => {
    const url = urlForLine(9_998)
    expect(requestTooLarge(request(url, [], 'GET'), 'bandit')).toBeNull()
    expect(requestTooLarge(request(url, [], 'POST'), 'bandit')).toMatchObject({ status: 414 })
    expect(requestTooLarge({ ...request(url), httpVersion: '1.10' } as IncomingMessage, 'bandit')).toMatchObject({ status: 414 })
    // A request without a method (Node's parser always sets one) is measured as a GET.
    expect(requestTooLarge({ ...request(urlForLine(9_999)), method: undefined } as unknown as IncomingMessage, 'bandit')).toMatchObject({ status: 414 })
  })
})

describe("requestTooLarge: Cowboy (a limit checked only where a 1,460-byte read ends inside the part it limits)", () => {
  it('passes a request line of 8,758 bytes (its end in the sixth read) and answers one of 8,759 414', () => {
    expect(requestTooLarge(request(urlForLine(8_000)), 'cowboy')).toBeNull()
    expect(requestTooLarge(request(urlForLine(8_758)), 'cowboy')).toBeNull()
    expect(requestTooLarge(request(urlForLine(8_759)), 'cowboy')).toEqual({ status: 414, limit: 'request line over 8000 bytes in a read (Cowboy)' })
  })

  it("answers a header name 431 only when a read ends more than 64 bytes into it, before its colon", () => {
    // `GET /x HTTP/1.1` is 15 bytes, so the first header starts at byte 17; the first read ends at 1,460.
    expect(requestTooLarge(request('/x', [['n'.repeat(1_442), 'v']]), 'cowboy')).toBeNull()
    expect(requestTooLarge(request('/x', [['n'.repeat(1_443), 'v']]), 'cowboy')).toEqual({ status: 431, limit: 'header name over 64 bytes in a read (Cowboy)' })
    // A name that starts within 64 bytes of the read's end is read whole by the next read.
    const before: [string, string] = ['x-pad', 'p'.repeat(1_460 - 17 - 'x-pad'.length - 4 - 60)]
    expect(requestTooLarge(request('/x', [before, ['n'.repeat(1_000), 'v']]), 'cowboy')).toBeNull()
    // The same name 10 bytes earlier has the read end 70 bytes into it.
    const earlier: [string, string] = ['x-pad', 'p'.repeat(1_460 - 17 - 'x-pad'.length - 4 - 70)]
    expect(requestTooLarge(request('/x', [earlier, ['n'.repeat(1_000), 'v']]), 'cowboy')).toMatchObject({ status: 431, limit: 'header name over 64 bytes in a read (Cowboy)' })
  })

  it('answers a header value 431 only when a read ends more than 4,096 bytes into it, before its line ends', () => {
    // The value of `x-a` starts at byte 22; the read that ends past 22 + 4,096 ends at 4,380.
    expect(requestTooLarge(request('/x', [['x-a', 'v'.repeat(4_356)]]), 'cowboy')).toBeNull()
    expect(requestTooLarge(request('/x', [['x-a', 'v'.repeat(4_357)]]), 'cowboy')).toEqual({ status: 431, limit: 'header value over 4096 bytes in a read (Cowboy)' })
    // Each header's bytes move the next one's start: one byte more before it tips the same value over.
    expect(requestTooLarge(request('/x', [['h', '1'], ['x-a', 'v'.repeat(4_356 - 6)]]), 'cowboy')).toBeNull()
    expect(requestTooLarge(request('/x', [['h', '12'], ['x-a', 'v'.repeat(4_356 - 6)]]), 'cowboy')).toMatchObject({ status: 431 })
  })

  it('passes 100 distinct header names and refuses a header line met with 100 names read, a repeat too; names compare without case', () => {
    expect(requestTooLarge(request('/x', distinct(100)), 'cowboy')).toBeNull()
    expect(requestTooLarge(request('/x', distinct(101)), 'cowboy')).toEqual({ status: 431, limit: 'more than 100 header names (Cowboy)' })
    expect(requestTooLarge(request('/x', [...distinct(100), ['x-h0', 'again']]), 'cowboy')).toMatchObject({ status: 431 })
    // 101 lines, 100 names: a repeat before the hundredth name is merged, not counted.
    expect(requestTooLarge(request('/x', [...distinct(99), ['X-H0', 'again'], ['x-last', 'v']]), 'cowboy')).toBeNull()
    expect(requestTooLarge(request('/x', [...distinct(99), ['X-H0', 'again'], ['x-last', 'v'], ['x-one-more', 'v']]), 'cowboy')).toMatchObject({ status: 431 })
  })

  it('lets through what Bandit refuses, and the other way round', () => {
    const line = request(urlForLine(9_000))
    expect(requestTooLarge(line, 'bandit')).toBeNull()
    expect(requestTooLarge(line, 'cowboy')).toMatchObject({ status: 414 })
    const many = request('/x', distinct(60))
    expect(requestTooLarge(many, 'cowboy')).toBeNull()
    expect(requestTooLarge(many, 'bandit')).toMatchObject({ status: 431 })
  })
})

describe('tooLargeResponse', () => {
  it("writes each server's status line and headers, as measured", () => {
    expect(tooLargeResponse(414, 'bandit')).toBe('HTTP/1.0 414 Request-URI Too Long\r\nconnection: close\r\n\r\n')
    expect(tooLargeResponse(431, 'bandit')).toBe('HTTP/1.0 431 Request Header Fields Too Large\r\nconnection: close\r\n\r\n')
    expect(tooLargeResponse(414, 'cowboy')).toBe('HTTP/1.1 414 Request-URI Too Long\r\nconnection: close\r\ncontent-length: 0\r\n\r\n')
    expect(tooLargeResponse(431, 'cowboy')).toBe('HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\n\r\n')
  })

  it("leaves Node's own cap on a head above what either server lets through", () => {
    // Bandit: a request line and 50 header lines of 10,000 bytes; Cowboy: 100 names and values, a read each.
    expect(SIMULATOR_MAX_HEADER_BYTES).toBeGreaterThan(10_000 + 50 * 10_000)
    expect(SIMULATOR_MAX_HEADER_BYTES).toBeGreaterThan(8_760 + 100 * (64 + 4_096 + 2 * 1_460))
  })
})
