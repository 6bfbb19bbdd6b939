/**
 * SCENARIOS 17-20 on the real wire: a refused upgrade is terminal, except 429 and 503, and a
 * 409 from our own lost socket that the platform still holds (on_conflict=reject).
 */
import { connect, createServer, type Server, type Socket } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import WebSocket from 'ws'
import { AgentDisconnectedError } from '../../src/errors/agent-disconnected.js'
import { ConfigurationError } from '../../src/errors/configuration-error.js'
import { transportClass, type RefusedUpgrade, type TransportHooks } from '../../src/adapter/ws-transport.js'
import type { LinkPolicyInput } from '../../src/policy.js'
import { PROTOCOL_VSN } from '../../src/protocol.js'
import type { DisconnectReason } from '../../src/reasons.js'
import { rawUpgrade, type RawRefusal } from '../support/raw-http.js'
import { next, settle, untilState, useWorld } from '../support/wire.js'

const world = useWorld()

/**
 * A bare TCP server that answers every upgrade with `response` and then does nothing more:
 * keeps the connection open, sends no more bytes. Records when each connection closed.
 */
class RefusingServer {
  readonly closed: Array<Promise<void>> = []
  private readonly sockets = new Set<Socket>()
  private constructor(private readonly server: Server) {}

  /**
   * A server answering every upgrade with `response`; given parts, it writes them one after
   * another, `gapMs` apart (a slow server's body, so the client reads each part on its own). A
   * part that is a function acts on the connection instead (`(s) => s.resetAndDestroy()`: a TCP reset).
   */
  static async start(response: string | Array<string | ((socket: Socket) => void)>, gapMs = 50): Promise<RefusingServer> {
    const server = createServer()
    const r = new RefusingServer(server)
    const parts = typeof response === 'string' ? [response] : response
    server.on('connection', (socket) => {
      r.sockets.add(socket)
      r.closed.push(new Promise((resolve) => socket.once('close', () => resolve())))
      let timer: ReturnType<typeof setTimeout> | null = null
      socket.once('close', () => {
        r.sockets.delete(socket)
        if (timer) clearTimeout(timer)
      })
      socket.on('error', () => {})
      const write = (i: number): void => {
        timer = null
        if (socket.destroyed) return
        const part = parts[i]!
        if (typeof part === 'function') part(socket)
        else socket.write(part)
        if (i + 1 < parts.length) timer = setTimeout(write, gapMs, i + 1)
      }
      socket.once('data', () => write(0))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return r
  }

  get url(): string {
    const address = this.server.address()
    return `ws://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/socket`
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy()
    await Promise.all(this.closed)
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}

const servers: RefusingServer[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()))
})

/**
 * Connects a link to a {@link RefusingServer} answering `response` (parts `gapMs` apart when
 * several), with `transport` policy and a connect timeout of `connectTimeoutMs` (30 s unless
 * given, so only the refusal can end the attempt): the reason connect() rejected with, how long
 * it took in milliseconds, and the server.
 */
async function refusedConnect(
  response: string | Array<string | ((socket: Socket) => void)>,
  transport: NonNullable<LinkPolicyInput['transport']>,
  connectTimeoutMs = 30_000,
): Promise<{ reason: DisconnectReason; elapsedMs: number; server: RefusingServer }> {
  const server = await RefusingServer.start(response)
  servers.push(server)
  const sim = await world().sim()
  const link = world().link(sim, { url: server.url, policy: { transport, connection: { connectTimeoutMs } } })
  const started = performance.now()
  const r = await settle(link.connect())
  const elapsedMs = performance.now() - started
  if (r.ok) throw new Error('expected connect() to reject with AgentDisconnectedError, it resolved')
  expect(r.error).toBeInstanceOf(AgentDisconnectedError)
  return { reason: (r.error as AgentDisconnectedError).reason, elapsedMs, server }
}

describe('rule: a refused upgrade is classified within one round trip, whatever the server does with the connection', () => {
  it('a body that never ends: classified after refusalBodyTimeoutMs from what arrived, and the connection is released', async () => {
    const { reason, elapsedMs, server } = await refusedConnect('HTTP/1.1 403 Forbidden\r\ncontent-length: 100000\r\n\r\nthe key is not', { refusalBodyTimeoutMs: 150 })
    expect(elapsedMs).toBeLessThan(5_000)
    expect(reason).toMatchObject({ kind: 'rejected', cause: 'unauthenticated', status: 403, message: 'the key is not' })
    await server.closed[0]
    expect(server.closed).toHaveLength(1)
  })

  it('a body that never ends, cut by the time limit inside a long word: that word is dropped, as it may be the start of a key the server echoed', async () => {
    // Stopped 16 hex digits into what could be a longer key: the part that came must not reach a
    // reason whole, since redaction recognises a key only from enough of it (reasons.ts wholeWordsOf).
    const { reason, server } = await refusedConnect('HTTP/1.1 403 Forbidden\r\ncontent-length: 100000\r\n\r\nthe key was revoked: 4f9c2b7e1d8a6350', { refusalBodyTimeoutMs: 150 })
    expect(reason).toMatchObject({ kind: 'rejected', cause: 'unauthenticated', status: 403 })
    expect((reason as { message: string }).message).toMatch(/^the key was revoked:\s*$/)
    await server.closed[0]
  })

  it('a body over refusalBodyLimitBytes: classified at once from the first bytes; a kept-alive connection is released', async () => {
    const body = JSON.stringify({ error: { code: 'too_many_requests', message: 'slow down' } }) + ' '.repeat(64 * 1024)
    const server = await RefusingServer.start(`HTTP/1.1 429 Too Many Requests\r\nretry-after: 1\r\ncontent-length: ${body.length}\r\n\r\n${body}`)
    servers.push(server)
    const sim = await world().sim()
    const link = world().link(sim, { url: server.url, policy: { transport: { refusalBodyLimitBytes: 1024, refusalBodyTimeoutMs: 20_000 } } })
    const lost = next(link, 'disconnected')
    void link.connect().catch(() => {})
    const { reason, nextDelayMs } = await lost
    expect(reason).toMatchObject({ kind: 'rejected', cause: 'rate-limited', status: 429, retryAfterMs: 1000, retryable: true })
    expect(nextDelayMs).toBeGreaterThanOrEqual(1000)
    await server.closed[0]
    await link.disconnect()
    expect(server.closed).toHaveLength(1)
  })

  it('a body slower than the connect timeout: still rejected, not a retryable connect timeout (the body wait ends before it)', async () => {
    const { reason, server } = await refusedConnect('HTTP/1.1 403 Forbidden\r\ncontent-length: 100\r\n\r\nabc', { refusalBodyTimeoutMs: 5_000 }, 1_000)
    expect(reason).toMatchObject({ kind: 'rejected', cause: 'unauthenticated', status: 403, message: 'abc' })
    expect(server.closed).toHaveLength(1)
  })

  it('the body wait is refusalBodyTimeoutMs, not the close timeout', async () => {
    const { reason, elapsedMs } = await refusedConnect('HTTP/1.1 403 Forbidden\r\ncontent-length: 100\r\n\r\nabc', { refusalBodyTimeoutMs: 100, closeTimeoutMs: 10_000 })
    expect(reason).toMatchObject({ kind: 'rejected', status: 403 })
    expect(elapsedMs).toBeLessThan(5_000)
  })

  it('a body that reaches refusalBodyLimitBytes ends the read there, cut to the limit (the rest is never read or kept)', async () => {
    // A whole JSON error body of 1.5 KiB, with a content-length that promises far more: only the
    // byte limit can end this read before the 20 s body wait, and a body cut to 1 KiB is not JSON.
    const body = JSON.stringify({ error: { code: 'too_big', message: 'm'.repeat(1400) } })
    const { reason } = await refusedConnect(`HTTP/1.1 403 Forbidden\r\ncontent-length: 100000\r\n\r\n${body}`, { refusalBodyLimitBytes: 1024, refusalBodyTimeoutMs: 20_000 })
    expect(reason).toMatchObject({ kind: 'rejected', status: 403, errorCode: null })
    expect((reason as { message: string }).message.startsWith('{"error":{"code":"too_big"')).toBe(true)
  })

  it('a body that reaches refusalBodyLimitBytes over two reads is cut to the limit too', async () => {
    // 600 bytes, then 900 more: the second read may add only the 424 bytes left under the limit.
    const body = JSON.stringify({ error: { code: 'too_big', message: 'm'.repeat(1459) } })
    expect(body.length).toBe(1500)
    const refused = await refusedConnect([`HTTP/1.1 403 Forbidden\r\ncontent-length: 100000\r\n\r\n${body.slice(0, 600)}`, body.slice(600)], {
      refusalBodyLimitBytes: 1024,
      refusalBodyTimeoutMs: 20_000,
    })
    // Cut to 1024 bytes the body is not JSON: no error code. Read whole, it would be 'too_big'.
    const reason = refused.reason as { kind: string; errorCode: unknown; message: string }
    expect({ kind: reason.kind, errorCode: reason.errorCode }).toEqual({ kind: 'rejected', errorCode: null })
    expect(reason.message.startsWith('{"error":{"code":"too_big"')).toBe(true)
  })

  it('a body of exactly refusalBodyLimitBytes, the response never ending: the read ends at the limit, not after the body wait', async () => {
    const body = 'stop '.repeat(204) + 'stop' // 1024 bytes
    const { reason, elapsedMs, server } = await refusedConnect(`HTTP/1.1 403 Forbidden\r\ncontent-length: 100000\r\n\r\n${body}`, {
      refusalBodyLimitBytes: 1024,
      refusalBodyTimeoutMs: 20_000,
    })
    expect(elapsedMs).toBeLessThan(5_000)
    expect(reason).toMatchObject({ kind: 'rejected', status: 403, message: expect.stringMatching(/^stop stop /) })
    await server.closed[0]
  })

  // Node's http client errors the handshake request on a reset or a body its parser refuses, and
  // ws reports error and close 1006 before the response closes: the status already read decides.
  for (const [name, parts, status] of [
    ['reset in the middle of the body', ['HTTP/1.1 403 Forbidden\r\ncontent-length: 100\r\n\r\npartial', (s: Socket) => s.resetAndDestroy()], 403],
    ['reset before any of the body', ['HTTP/1.1 401 Unauthorized\r\ncontent-length: 10\r\n\r\n', (s: Socket) => s.resetAndDestroy()], 401],
    ['a malformed chunk', ['HTTP/1.1 403 Forbidden\r\ntransfer-encoding: chunked\r\n\r\n', 'ZZZ\r\n'], 403],
  ] as const) {
    it(`a body the peer ends in an error (${name}): rejected from the status, not a retryable drop`, async () => {
      const { reason, elapsedMs, server } = await refusedConnect([...parts], { refusalBodyTimeoutMs: 20_000 })
      expect(reason).toMatchObject({ kind: 'rejected', cause: 'unauthenticated', status, retryable: false })
      expect(elapsedMs).toBeLessThan(5_000)
      // One attempt: a terminal refusal is not retried.
      expect(server.closed).toHaveLength(1)
      await server.closed[0]
    })
  }

  it('no body and the connection kept open (stock Phoenix): rejected at once, the connection released', async () => {
    const { reason, server } = await refusedConnect('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\ncache-control: max-age=0, private, must-revalidate\r\n\r\n', {
      refusalBodyTimeoutMs: 20_000,
    })
    expect(reason).toMatchObject({ kind: 'rejected', cause: 'unauthenticated', status: 403, message: null })
    await server.closed[0]
  })
})

/** A transport's hooks for a test of the transport alone: nothing reported anywhere but where `overrides` says. */
function hooks(overrides: Partial<TransportHooks>): TransportHooks {
  return {
    headers: {},
    maxPayload: 1 << 20,
    closeTimeout: 100,
    bodyLimit: 4096,
    bodyWaitMs: () => 10_000,
    onCreate: () => {},
    onClosed: () => {},
    onRefused: () => {},
    onUpgradeSent: () => {},
    onClientClose: () => {},
    onError: () => {},
    onSocketError: () => {},
    ...overrides,
  }
}

/**
 * What one transport reported of a refused upgrade (`response`, the raw HTTP answer) once it has
 * closed, the server has seen its TCP connection end, and whatever the response emits after its
 * end or its cut (its close) has run.
 */
async function refusalsOf(response: string, limits: Partial<TransportHooks> = {}): Promise<RefusedUpgrade[]> {
  const server = await RefusingServer.start(response)
  servers.push(server)
  const refusals: RefusedUpgrade[] = []
  const Transport = transportClass(hooks({ ...limits, onRefused: (refusal) => void refusals.push(refusal) }))
  const ws = new Transport(`${server.url}/websocket`) as unknown as { on(event: string, listener: (...args: unknown[]) => void): void }
  ws.on('error', () => {})
  await new Promise<void>((resolve) => ws.on('close', () => resolve()))
  await server.closed[0]
  await new Promise<void>((resolve) => setImmediate(resolve))
  return refusals
}

describe('the transport reads a refusal once', () => {
  it('a refused upgrade is reported once, though its response both ends and closes, and the socket is released', async () => {
    const refusals = await refusalsOf('HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: 5\r\ndate: Tue, 01 Dec 2026 12:00:00 GMT\r\n\r\nnope!')
    expect(refusals).toEqual([{ status: 403, retryAfter: null, date: 'Tue, 01 Dec 2026 12:00:00 GMT', body: 'nope!' }])
  })

  // The read ends at the byte limit or the time limit; ending the WebSocket then destroys the TCP
  // socket, and the response emits close (its body incomplete), which must not report it again.
  for (const [name, limits] of [
    ['cut by the byte limit', { bodyLimit: 8, bodyWaitMs: () => 10_000 }],
    ['cut by the time limit', { bodyLimit: 4096, bodyWaitMs: () => 50 }],
  ] as const) {
    it(`a refusal cut short is reported once, though its response closes after the cut: ${name}`, async () => {
      const refusals = await refusalsOf('HTTP/1.1 403 Forbidden\r\ncontent-length: 100000\r\n\r\nnope nope nope', limits)
      expect(refusals).toHaveLength(1)
      expect(refusals[0]).toMatchObject({ status: 403, retryAfter: null })
    })
  }
})

describe('a refused upgrade is reported closed once its TCP connection has closed', () => {
  for (const [name, response] of [
    ['kept alive, no body (stock Phoenix)', 'HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n'],
    ['connection: close, a body', 'HTTP/1.1 403 Forbidden\r\nconnection: close\r\ncontent-length: 5\r\n\r\nnope!'],
  ] as const) {
    it(name, async () => {
      const server = await RefusingServer.start(response)
      servers.push(server)
      // Whether the refused upgrade's TCP socket had emitted close (its handle closed) when the transport reported closed.
      let tcpClosed: boolean | null = null
      let closedWhenReported: boolean | null = null
      let reported!: () => void
      const onClosed = new Promise<void>((resolve) => (reported = resolve))
      const Transport = transportClass(
        hooks({
          onClosed: () => {
            closedWhenReported = tcpClosed
            reported()
          },
        }),
      )
      const ws = new Transport(`${server.url}/websocket`) as unknown as { on(event: string, listener: (...args: any[]) => void): void }
      ws.on('error', () => {})
      ws.on('unexpected-response', (_req: unknown, res: { socket: { prependOnceListener(event: 'close', listener: () => void): void } }) => {
        tcpClosed = false
        res.socket.prependOnceListener('close', () => (tcpClosed = true))
      })
      await onClosed
      // disconnect() waits for this report: the link's socket is closed when it resolves.
      expect(closedWhenReported).toBe(true)
      await server.closed[0]
    })
  }
})

describe('rule: upgrade rejection is terminal', () => {
  it('a wrong API key: HTTP 403 -> rejected(unauthenticated), connect() rejects, no retry (scenario 17)', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { apiKey: 'wrong-key' })
    const r = await settle(link.connect())
    const error = (r as { error: AgentDisconnectedError }).error
    expect(error).toBeInstanceOf(AgentDisconnectedError)
    expect(error.reason).toMatchObject({ kind: 'rejected', cause: 'unauthenticated', phase: 'upgrade', status: 403, retryable: false })
    expect(link.state).toBe('terminated')
    await link.disconnect()
    expect(sim.upgrades.map((u) => u.status)).toEqual([403])
  })

  it('the key sent both ways: the api_key param wins over the x-api-key header, as on Phoenix (a good header with a stale param is refused 403; a stale header with a good param connects)', async () => {
    const sim = await world().sim()
    const query = { vsn: PROTOCOL_VSN, agent_id: 'agent-1' }
    const stale = await rawUpgrade(sim.port, { ...query, api_key: 'old-key' }, { headers: { 'x-api-key': 'key-1' } })
    expect(stale.statusLine).toBe('HTTP/1.1 403 Forbidden')
    const rescued = new WebSocket(`${sim.url}/websocket?${new URLSearchParams({ ...query, api_key: 'key-1' })}`, { headers: { 'x-api-key': 'old-key' } })
    await new Promise<void>((resolve, reject) => {
      rescued.once('open', () => resolve())
      rescued.once('error', reject)
    })
    rescued.close()
    await new Promise<void>((resolve) => rescued.once('close', () => resolve()))
    expect(sim.upgrades.map((u) => u.status)).toEqual([403, 101])
  })

  it('params that set a param the link sets itself (agent_id, api_key, on_conflict, vsn) are refused: at createLink(), or, from a params function, as a typed reason of that attempt; nothing is sent', async () => {
    const sim = await world().sim()
    for (const name of ['agent_id', 'api_key', 'on_conflict', 'vsn']) {
      expect(() => world().link(sim, { params: { [name]: 'x' } })).toThrow(
        new ConfigurationError(`params must not set "${name}": the link sets agent_id, api_key, on_conflict and vsn itself (use the agentId, apiKey and onConflict options)`),
      )
    }
    const link = world().link(sim, { params: () => ({ team: 'a', api_key: 'stale' }) })
    const lost = next(link, 'disconnected')
    void link.connect().catch(() => {})
    expect((await lost).reason).toMatchObject({
      kind: 'other',
      retryable: true,
      detail: 'the apiKey/params of this connection attempt: params must not set "api_key": the link sets agent_id, api_key, on_conflict and vsn itself (use the agentId, apiKey and onConflict options)',
    })
    await link.disconnect()
    expect(sim.upgrades).toEqual([])
  })

  it("the host's onConflict is the on_conflict param the server sees, and other params reach it as given", async () => {
    const sim = await world().sim()
    const link = world().link(sim, { onConflict: 'reject', params: { team: 'a' } })
    await link.connect()
    expect(sim.upgrades.map((u) => u.onConflict)).toEqual(['reject'])
    expect(sim.accepted('agent-1')[0]!.params).toMatchObject({ team: 'a', on_conflict: 'reject', agent_id: 'agent-1', vsn: PROTOCOL_VSN })
  })

  for (const [status, cause] of [
    [401, 'unauthenticated'],
    [400, 'protocol-error'],
    [409, 'conflict'],
  ] as const) {
    it(`HTTP ${status} -> rejected(${cause}), terminal (scenario 18)`, async () => {
      const sim = await world().sim()
      sim.refuseUpgrades({ status })
      const link = world().link(sim)
      const r = await settle(link.connect())
      expect((r as { error: AgentDisconnectedError }).error.reason).toMatchObject({ kind: 'rejected', cause, status })
      await link.disconnect()
      expect(sim.upgrades).toHaveLength(1)
    })
  }

  for (const flavor of ['bandit', 'cowboy'] as const) {
    it(`an upgrade request too large for the server's HTTP parser (${flavor}): a long param is 414, a long x-api-key header 431, each rejected(protocol-error) at once and terminal, one upgrade each`, async () => {
      const sim = await world().sim({ flavor, agents: 'any' })
      const cases = [
        { options: { params: { token: 't'.repeat(11_000) } }, status: 414 },
        { options: { apiKey: 'k'.repeat(11_000), apiKeyIn: 'header' as const }, status: 431 },
      ]
      for (const { options, status } of cases) {
        const link = world().link(sim, options)
        const started = performance.now()
        const r = await settle(link.connect())
        expect(performance.now() - started).toBeLessThan(1_000)
        expect((r as { error: AgentDisconnectedError }).error.reason).toMatchObject({ kind: 'rejected', cause: 'protocol-error', phase: 'upgrade', status, retryable: false })
        expect(link.state).toBe('terminated')
        await link.disconnect()
      }
      expect(sim.upgrades.map((u) => u.status)).toEqual([414, 431])
      // Any request, not only an upgrade: the web server refuses it before a route sees it.
      const plain = connect(sim.port, '127.0.0.1')
      plain.on('error', () => {})
      const answer = await new Promise<string>((resolve) => {
        let text = ''
        plain.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')))
        plain.once('close', () => resolve(text))
        plain.write(`GET /admin/sockets HTTP/1.1\r\nhost: 127.0.0.1\r\nx-pad: ${'p'.repeat(11_000)}\r\n\r\n`)
      })
      expect(answer.split('\r\n')[0]).toBe(`${flavor === 'bandit' ? 'HTTP/1.0' : 'HTTP/1.1'} 431 Request Header Fields Too Large`)
    })
  }

  it('HTTP 429 with Retry-After waits at least that long, then retries (scenario 19)', async () => {
    const sim = await world().sim()
    sim.refuseUpgrades({ status: 429, retryAfter: '1', body: 'platform' })
    const link = world().link(sim)
    const d = next(link, 'disconnected')
    await link.connect()
    const { reason, nextDelayMs } = await d
    expect(reason).toMatchObject({ kind: 'rejected', cause: 'rate-limited', retryAfterMs: 1000, errorCode: 'too_many_requests' })
    expect(nextDelayMs).toBeGreaterThanOrEqual(1000)
    expect(sim.upgrades[1]!.at - sim.upgrades[0]!.at).toBeGreaterThanOrEqual(995)
  })

  it('HTTP 429 without Retry-After uses the normal backoff (scenario 19)', async () => {
    const sim = await world().sim()
    sim.refuseUpgrades({ status: 429 })
    const link = world().link(sim)
    const d = next(link, 'disconnected')
    await link.connect()
    expect((await d).nextDelayMs).toBeLessThanOrEqual(20)
  })

  it('a refused reconnect (403) after a normal close is terminal on that attempt (scenario 20)', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const run = settle(link.runForever())
    sim.refuseUpgrades({ status: 403 })
    sim.close({ agent: 'agent-1' }, 1000)
    const r = await run
    expect((r as { error: AgentDisconnectedError }).error.reason).toMatchObject({ kind: 'rejected', status: 403 })
    await link.disconnect()
    expect(sim.upgrades.map((u) => u.status)).toEqual([101, 403])
  })

  it('an unreachable port is dropped and retried, never terminal', async () => {
    const sim = await world().sim()
    const url = sim.url
    await sim.stop()
    const link = world().link(sim, { url })
    const d1 = next(link, 'disconnected')
    const d2 = next(link, 'disconnected', { filter: (e) => e.attempt === 2 })
    void link.connect().catch(() => {})
    expect((await d1).reason).toMatchObject({ kind: 'dropped', detail: expect.stringContaining('ECONNREFUSED') })
    await d2
    expect(link.state).toBe('reconnecting')
  })
})

describe('rule: our own conflict is retried (on_conflict=reject)', () => {
  // The platform closes a socket 60 s after it last received anything (docs/field-notes.md), so after a
  // loss it may still hold ours: a stalled peer stops reading, so our close never reaches it.
  it('a 409 from our own lost socket still held by the platform is retried until the platform lets go', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { onConflict: 'reject', policy: { transport: { heartbeatIntervalMs: 100 } } })
    await link.connect()
    const conflicts: Array<{ outcome: string; retryable: boolean }> = []
    link.on('disconnected', ({ reason, outcome }) => {
      if (reason.kind === 'rejected') conflicts.push({ outcome, retryable: reason.retryable })
    })
    const secondConflict = next(link, 'disconnected', { filter: (e) => e.reason.kind === 'rejected' && conflicts.length >= 2 })
    sim.stall({ agent: 'agent-1' })
    await secondConflict
    expect(conflicts.slice(0, 2)).toEqual([
      { outcome: 'reconnect', retryable: true },
      { outcome: 'reconnect', retryable: true },
    ])
    expect(link.state).not.toBe('terminated')
    // The platform lets go of the ghost (its idle timeout); the next attempt is accepted.
    const back = next(link, 'reconnected', { timeoutMs: 4_000 })
    sim.close({ agent: 'agent-1' }, 1000)
    await back
    expect(link.state).toBe('connected')
    const statuses = sim.upgrades.map((u) => u.status)
    expect(statuses[0]).toBe(101)
    expect(statuses.filter((s) => s === 409).length).toBeGreaterThanOrEqual(2)
    expect(statuses.at(-1)).toBe(101)
    expect(sim.live('agent-1')).toHaveLength(1)
  })

  it('a disconnect() counts as closing a connection: a 409 on the next connect() within the window is retried, and the link gets in once the key is free', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { onConflict: 'reject' })
    await link.connect()
    await link.disconnect()
    expect(sim.live('agent-1')).toHaveLength(0)
    // Another instance of the agent takes the key meanwhile.
    const other = world().link(sim, { onConflict: 'reject' })
    await other.connect()
    const conflict = next(link, 'disconnected', { filter: (e) => e.reason.kind === 'rejected' })
    const back = settle(link.connect())
    expect(await conflict).toMatchObject({ outcome: 'reconnect', reason: { cause: 'conflict', status: 409, retryable: true } })
    await other.disconnect()
    expect(await back).toMatchObject({ ok: true })
    expect(link.state).toBe('connected')
    expect(sim.live('agent-1')).toHaveLength(1)
  })

  it("a socket the server accepted counts though it never joined: a first connect() whose control join timed out on a stalled server meets its own socket's 409, retries, and gets in once the platform lets go", async () => {
    const sim = await world().sim()
    let first = true
    sim.on('connection', (c) => {
      if (first) sim.stall(c)
      first = false
    })
    const link = world().link(sim, { onConflict: 'reject', policy: { connection: { joinTimeoutMs: 300 } } })
    const conflict = next(link, 'disconnected', { filter: (e) => e.reason.kind === 'rejected' })
    const connected = settle(link.connect())
    expect(await conflict).toMatchObject({ outcome: 'reconnect', reason: { cause: 'conflict', status: 409, retryable: true } })
    expect(link.state).not.toBe('terminated')
    // The platform lets go of the stalled socket (it never read our close); the next attempt gets in.
    sim.close({ agent: 'agent-1' }, 1000)
    expect(await connected).toMatchObject({ ok: true })
    expect(link.state).toBe('connected')
    expect(sim.live('agent-1')).toHaveLength(1)
    const statuses = sim.upgrades.map((u) => u.status)
    expect(statuses.slice(0, 2)).toEqual([101, 409])
    expect(statuses.at(-1)).toBe(101)
  })

  it("a disconnect() while joining counts too: connect() right after meets that socket's 409 and is retried, not rejected", async () => {
    const sim = await world().sim()
    sim.on('connection', (c) => sim.stall(c))
    const link = world().link(sim, { onConflict: 'reject' })
    void link.connect().catch(() => {})
    await untilState(link, 'joining')
    await link.disconnect()
    const conflict = next(link, 'disconnected', { filter: (e) => e.reason.kind === 'rejected' })
    const connected = settle(link.connect())
    expect(await conflict).toMatchObject({ outcome: 'reconnect', reason: { cause: 'conflict', status: 409, retryable: true } })
    sim.removeAllListeners('connection')
    sim.close({ agent: 'agent-1' }, 1000)
    expect(await connected).toMatchObject({ ok: true })
    expect(sim.live('agent-1')).toHaveLength(1)
  })

  it('with conflictRetryWindowMs 0 the same 409 is terminal', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { onConflict: 'reject', policy: { transport: { heartbeatIntervalMs: 100 }, connection: { conflictRetryWindowMs: 0 } } })
    await link.connect()
    const ended = settle(link.runForever())
    sim.stall({ agent: 'agent-1' })
    const r = await ended
    expect((r as { error: AgentDisconnectedError }).error.reason).toMatchObject({ kind: 'rejected', cause: 'conflict', status: 409, retryable: false })
    expect(link.state).toBe('terminated')
    expect(sim.upgrades.map((u) => u.status)).toEqual([101, 409])
  })
})

describe('the simulator writes a scripted refusal as a platform would', () => {
  it('a JSON body (the platform\'s own, or any text that parses) is sent as application/json; plain text and an empty body carry no content-type', async () => {
    const sim = await world().sim()
    sim.refuseUpgrades(
      { status: 429, retryAfter: '3', body: 'platform' },
      { status: 503, body: { text: '{"error":{"code":"maintenance"}}' } },
      { status: 403, body: { text: 'forbidden' } },
      { status: 401 },
    )
    const query = { agent_id: 'agent-1', api_key: 'key-1', vsn: PROTOCOL_VSN }
    const refusals: RawRefusal[] = []
    for (let i = 0; i < 4; i++) refusals.push(await rawUpgrade(sim.port, query))
    const header = (r: RawRefusal, name: string) => r.headers.find(([k]) => k === name)?.[1] ?? null
    expect(refusals.map((r) => [r.statusLine, header(r, 'content-type'), header(r, 'retry-after')])).toEqual([
      ['HTTP/1.1 429 Too Many Requests', 'application/json; charset=utf-8', '3'],
      ['HTTP/1.1 503 Service Unavailable', 'application/json; charset=utf-8', null],
      ['HTTP/1.1 403 Forbidden', null, null],
      ['HTTP/1.1 401 Unauthorized', null, null],
    ])
    expect(JSON.parse(refusals[0]!.body)).toMatchObject({ error: { code: expect.any(String), message: 'too many connection attempts' } })
    expect(refusals.map((r) => r.body.length > 0)).toEqual([true, true, true, false])
  })

  it('an upgrade to a path with no socket is 404, with a JSON body naming the path', async () => {
    const sim = await world().sim()
    const r = await rawUpgrade(sim.port, { agent_id: 'agent-1', api_key: 'key-1', vsn: PROTOCOL_VSN }, { path: '/elsewhere/websocket' })
    expect(r.statusLine).toBe('HTTP/1.1 404 Not Found')
    expect(JSON.parse(r.body)).toEqual({ error: { code: 'not_found', message: 'no socket at /elsewhere/websocket' } })
    expect(r.afterward).toBe('answered')
    expect(sim.upgrades.map((u) => u.status)).toEqual([404])
  })
})

describe("the simulator's refusals on one kept-alive connection", () => {
  it('many upgrades refused on one TCP connection (as a pooling proxy sends them) each leave it as they found it: no listener piles up on its socket, so Node never warns MaxListenersExceeded', async () => {
    const sim = await world().sim()
    const warnings: string[] = []
    const onWarning = (warning: Error) => void warnings.push(`${warning.name}: ${warning.message}`)
    process.on('warning', onWarning)
    const socket = connect(sim.port, '127.0.0.1')
    socket.on('error', () => {})
    try {
      await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject))
      let read = ''
      const answered = (n: number) =>
        new Promise<void>((resolve, reject) => {
          const look = () => {
            if ((read.match(/^HTTP\/1\.1 403 /gm) ?? []).length < n) return
            socket.off('data', onData)
            socket.off('close', onClose)
            resolve()
          }
          const onData = (chunk: Buffer) => {
            read += chunk.toString('latin1')
            look()
          }
          const onClose = () => reject(new Error(`the connection closed after ${n - 1} answers`))
          socket.on('data', onData)
          socket.on('close', onClose)
        })
      // Past Node's default of 10 listeners per event, by a margin.
      for (let n = 1; n <= 25; n++) {
        const answer = answered(n)
        socket.write(`GET /socket/websocket?vsn=${PROTOCOL_VSN}&agent_id=agent-1&api_key=wrong HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`)
        await answer
      }
      // Node emits its warning on the next tick of the listener that crossed the limit.
      await new Promise((resolve) => setImmediate(resolve))
      expect(sim.upgrades.map((u) => u.status)).toEqual(Array.from({ length: 25 }, () => 403))
      expect(warnings).toEqual([])
    } finally {
      process.off('warning', onWarning)
      socket.destroy()
    }
  })
})
