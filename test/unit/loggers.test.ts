/**
 * The loggers hosts already run keep every structured field: pino (the real one, writing JSON
 * lines to a stream), a bunyan-style logger (`(fields, message)`), and the console (called
 * `(message, fields)` so its output starts with the message). Driven through a real link's
 * lines (a refused connect on a closed loopback port), not only through the wrapper.
 */
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { createLink, type Logger } from '../../src/index.js'
import { redacting } from '../../src/logger.js'

const KEY = 'sk-logger-test-0001'

/** A pino logger writing JSON lines into `lines`, at debug level. */
function pinoInto(lines: Record<string, unknown>[]): ReturnType<typeof pino> {
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>)
      done()
    },
  })
  return pino({ level: 'debug' }, stream)
}

afterEach(() => {
  vi.restoreAllMocks()
})

describe('loggers hosts already run', () => {
  it('pino keeps the fields of a line as JSON properties, with the message as msg, redacted', () => {
    const lines: Record<string, unknown>[] = []
    const logger: Logger = pinoInto(lines)
    const log = redacting(logger, KEY)
    log.warn(`reconnecting with ${KEY}`, { generation: 3, reason: 'closed', detail: `key ${KEY}` })
    log.info('plain line')
    expect(lines).toHaveLength(2)
    expect(lines[0]).toMatchObject({ level: 40, msg: 'reconnecting with [redacted]', generation: 3, reason: 'closed', detail: 'key [redacted]' })
    expect(lines[1]).toMatchObject({ level: 30, msg: 'plain line' })
  })

  it("a link's own lines reach pino with their fields (a connect refused by a closed port)", async () => {
    const lines: Record<string, unknown>[] = []
    // Port 9 on loopback: nothing listens, so the attempt fails at once and the link logs why.
    const link = createLink({ url: 'ws://127.0.0.1:9/socket', agentId: 'agent-1', apiKey: KEY, logger: pinoInto(lines), policy: { reconnect: { initialDelayMs: 60_000, maxDelayMs: 60_000 } } })
    const lost = new Promise((resolve) => link.once('disconnected', resolve))
    void link.connect().catch(() => {})
    await lost
    await link.disconnect()
    const withFields = lines.filter((line) => Object.keys(line).some((k) => !['level', 'time', 'pid', 'hostname', 'msg'].includes(k)))
    expect(withFields.length).toBeGreaterThan(0)
    // A query or an alert reads the outcome and the reason's own fields, not the message text.
    expect(lines.find((line) => String(line.msg).startsWith('disconnected'))).toMatchObject({ kind: 'dropped', source: 'socket', retryable: true, outcome: 'reconnect', generation: 1, attempt: 1, nextDelayMs: expect.any(Number) })
    expect(lines.find((line) => line.msg === 'state idle -> connecting')).toMatchObject({ state: 'connecting', previous: 'idle' })
    expect(lines.every((line) => typeof line.msg === 'string' && line.msg !== '')).toBe(true)
    expect(JSON.stringify(lines)).not.toContain(KEY)
  })

  it('a bunyan-style logger gets (fields, message)', () => {
    const calls: unknown[][] = []
    const bunyanStyle = { info: (fields: Record<string, unknown>, message?: string) => void calls.push([fields, message]) }
    redacting(bunyanStyle as Logger, KEY).info('connected', { generation: 1 })
    expect(calls).toEqual([[{ generation: 1 }, 'connected']])
  })

  it("a Console instance and an object of the console's own methods get (message, fields) too", async () => {
    const { Console } = await import('node:console')
    const out: string[] = []
    const stream = new Writable({ write: (chunk: Buffer, _e, done) => (out.push(chunk.toString('utf8')), done()) })
    redacting(new Console(stream), KEY).info('connected', { generation: 1 })
    expect(out.join('')).toMatch(/^connected \{ generation: 1 \}/)
    const info = vi.spyOn(console, 'info').mockImplementation(() => {})
    redacting({ info: console.info }, KEY).info('connected', { generation: 2 })
    expect(info.mock.calls).toEqual([['connected', { generation: 2 }]])
  })

  it("a logger with only part of the console's surface (a dir method, say) is not taken for the console", () => {
    const calls: unknown[][] = []
    const partial = { dir: () => {}, info: (...args: unknown[]) => void calls.push(args) }
    redacting(partial as Logger, KEY).info('connected', { generation: 1 })
    expect(calls).toEqual([[{ generation: 1 }, 'connected']])
  })

  it('an Error in the fields without the key is handed over as it is (its class and own fields kept); one with the key is a redacted copy', () => {
    const calls: unknown[][] = []
    const log = redacting({ warn: (...args: unknown[]) => void calls.push(args) } as Logger, KEY)
    const plain = Object.assign(new TypeError('socket closed'), { code: 'ECONNRESET' })
    log.warn('lost', { error: plain, echoed: `api_key=${KEY}` })
    const [fields] = calls[0] as [Record<string, unknown>]
    expect(fields.error).toBe(plain)
    expect(fields.echoed).toBe('api_key=[redacted]')
    log.warn('lost', { error: new Error(`bad key ${KEY}`) })
    const [again] = calls[1] as [{ error: Error }]
    expect(again.error.message).toBe('bad key [redacted]')
  })

  it('fields beside a redacted one keep their values: null, undefined, numbers, booleans (nested too)', () => {
    const calls: unknown[][] = []
    const log = redacting({ warn: (...args: unknown[]) => void calls.push(args) } as Logger, KEY)
    log.warn('lost', { echoed: `api_key=${KEY}`, status: null, retryAfter: undefined, code: 1006, retryable: true, nested: { id: null, n: 0 } })
    expect(calls).toEqual([[{ echoed: 'api_key=[redacted]', status: null, retryAfter: undefined, code: 1006, retryable: true, nested: { id: null, n: 0 } }, 'lost']])
  })

  it('the console gets (message, fields), and (message) alone for a line without fields', () => {
    const info = vi.spyOn(console, 'info').mockImplementation(() => {})
    const log = redacting(console, KEY)
    log.info('connected', { generation: 1 })
    log.info('idle')
    expect(info.mock.calls).toEqual([['connected', { generation: 1 }], ['idle']])
  })
})
