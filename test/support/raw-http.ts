/**
 * A WebSocket upgrade request over a bare TCP connection, to see exactly what a server answers a
 * refused upgrade with: status line, headers in order, body, and whether the connection then
 * serves a next request (keep-alive) or closes.
 */
import { connect } from 'node:net'

/** What a server answered to an upgrade it refused, and what it did next. */
export interface RawRefusal {
  statusLine: string
  /** Header names (lower case) and values, in the order sent. */
  headers: Array<[string, string]>
  body: string
  /** After the response: `answered` a next request on the same connection, `closed` it, or neither within the bound (`silent`). */
  afterward: 'answered' | 'closed' | 'silent'
}

/**
 * Sends `GET <path>?<query>` as a WebSocket upgrade, reads the response (its body by
 * content-length), then sends a plain `GET /` on the same connection and waits, at most
 * `timeoutMs`, for an answer or a close. The connection is destroyed before this resolves.
 *
 * @throws {Error} (rejects) when no complete response arrives within `timeoutMs`.
 */
export function rawUpgrade(port: number, query: Record<string, string>, options: { headers?: Record<string, string>; path?: string; timeoutMs?: number } = {}): Promise<RawRefusal> {
  const timeoutMs = options.timeoutMs ?? 3000
  const socket = connect(port, '127.0.0.1')
  return new Promise<RawRefusal>((resolve, reject) => {
    let buffer = Buffer.alloc(0)
    let phase: 'head' | 'body' | 'next' = 'head'
    let response: Omit<RawRefusal, 'afterward'> | null = null
    let length = 0
    const timer = setTimeout(() => finish(response ? null : new Error(`no complete response within ${timeoutMs} ms`), 'silent'), timeoutMs)
    const finish = (error: Error | null, afterward: RawRefusal['afterward']) => {
      clearTimeout(timer)
      socket.removeAllListeners('data')
      socket.removeAllListeners('end')
      const done = () => (error || !response || phase !== 'next' ? reject(error ?? new Error('the response ended early')) : resolve({ ...response, afterward }))
      if (socket.closed) done()
      else {
        socket.once('close', done)
        socket.destroy()
      }
    }
    socket.on('error', () => {})
    socket.once('connect', () => {
      const lines = [
        `GET ${options.path ?? '/socket/websocket'}?${new URLSearchParams(query)} HTTP/1.1`,
        `Host: 127.0.0.1:${port}`,
        'Upgrade: websocket',
        'Connection: Upgrade',
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
        'Sec-WebSocket-Version: 13',
        ...Object.entries(options.headers ?? {}).map(([k, v]) => `${k}: ${v}`),
      ]
      socket.write(`${lines.join('\r\n')}\r\n\r\n`)
    })
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk])
      if (phase === 'head') {
        const end = buffer.indexOf('\r\n\r\n')
        if (end < 0) return
        const [statusLine, ...headerLines] = buffer.subarray(0, end).toString('latin1').split('\r\n')
        const headers = headerLines.map((line): [string, string] => {
          const at = line.indexOf(':')
          return [line.slice(0, at).trim().toLowerCase(), line.slice(at + 1).trim()]
        })
        length = Number(headers.find(([k]) => k === 'content-length')?.[1] ?? 0)
        buffer = buffer.subarray(end + 4)
        response = { statusLine: statusLine!, headers, body: '' }
        phase = 'body'
      }
      if (phase === 'body') {
        if (buffer.length < length) return
        response!.body = buffer.subarray(0, length).toString('utf8')
        buffer = buffer.subarray(length)
        phase = 'next'
        // Sent only now, after the whole response: a pipelined request would be answered even by a server that then closes.
        socket.write(`GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`)
      }
      if (phase === 'next' && buffer.length >= 9) finish(buffer.toString('latin1').startsWith('HTTP/1.1 ') ? null : new Error('a next answer that is not HTTP'), 'answered')
    })
    socket.once('end', () => finish(null, 'closed'))
  })
}
