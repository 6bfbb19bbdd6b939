/**
 * The simulator over HTTP, as another process scripts it: `phoenix-link serve` in a child
 * process, a link in this one, and every step driven and checked through the JSON routes alone
 * (long-poll waits, controls, records); bad bodies answered 400 naming the field; the OpenAPI
 * document lists every route; the access rule (loopback, or a bearer token).
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { request } from 'node:http'
import { connect } from 'node:net'
import { once } from 'node:events'
import { until } from '../support/until.js'
import { framesIn, next } from '../support/wire.js'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { createLink } from '../../src/link.js'
import { ADMIN_ROUTES, CONTROL_ROUTES, PlatformSimulator, adminAccess, isLoopbackAddress, startSimulator, type AdminRequest } from '../../src/node/server/index.js'
import { CONTROL_BODY_TIMEOUT_MS, isLoopbackHost, isLoopbackInterface, json } from '../../src/node/server/control-api.js'
import { isSendableCloseCode } from '../../src/node/server/connection.js'
import WebSocket from 'ws'

const root = fileURLToPath(new URL('../..', import.meta.url))

function serve(args: string[] = []): ChildProcessWithoutNullStreams {
  return spawn(process.execPath, ['--import', 'tsx', 'src/node/cli.ts', 'serve', '--port', '0', '--json', ...args], { cwd: root })
}

function listening(child: ChildProcessWithoutNullStreams): Promise<{ url: string; http: string; openapi: string }> {
  return new Promise((resolve, reject) => {
    let buffer = ''
    const timer = setTimeout(() => reject(new Error(`serve printed no listening line:\n${buffer}`)), 15_000)
    const onData = (chunk: Buffer) => {
      buffer += chunk.toString()
      for (const text of buffer.split('\n')) {
        if (!text.startsWith('{')) continue
        const event = JSON.parse(text) as { type: string; url: string; http: string; openapi: string }
        if (event.type === 'listening') {
          clearTimeout(timer)
          child.stdout.off('data', onData)
          resolve(event)
        }
      }
    }
    child.stdout.on('data', onData)
  })
}

function exited(child: ChildProcessWithoutNullStreams): Promise<number | null> {
  return new Promise((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.once('exit', (code) => resolve(code))))
}

/** The simulator's HTTP base (`http://127.0.0.1:<port>`), from its socket URL. */
const httpOf = (sim: { url: string }) => sim.url.replace(/^ws/, 'http').replace(/\/socket$/, '')

async function call(http: string, method: 'GET' | 'POST', path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any; allow: string | null }> {
  const response = await fetch(`${http}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  })
  const text = await response.text()
  const json = response.headers.get('content-type')?.startsWith('application/json') ?? false
  return { status: response.status, body: text === '' ? null : json ? JSON.parse(text) : text, allow: response.headers.get('allow') }
}

describe('the simulator over HTTP', () => {
  it('a host in another process is scripted through the routes alone: waits, closes, a control signal, a supersede, the records', async () => {
    const child = serve()
    try {
      const { url, http } = await listening(child)
      const agent = 'http-agent'
      const post = (path: string, body: unknown) => call(http, 'POST', path, body)
      const link = createLink({ url, agentId: agent, apiKey: 'k', policy: { reconnect: { initialDelayMs: 10, maxDelayMs: 20 } } })
      const signals: string[] = []
      link.onControl((signal) => void signals.push(signal.correlationId ?? ''))
      try {
        // A long-poll issued before the link connects answers once the control channel is joined.
        const joined = post('/admin/wait', { until: 'joined', agent, atLeast: 1, timeoutMs: 5000 })
        await link.connect()
        expect(await joined).toEqual({ status: 200, body: { count: 1 }, allow: null })

        // A close 1000 over HTTP: the link reconnects; the server's records say so.
        const reconnected = link.once('reconnected')
        expect((await post('/admin/close', { target: { agent }, code: 1000, reason: 'bye' })).body).toEqual({ ok: true, sockets: 1 })
        await reconnected
        // A control of an agent with no socket open acts on none, and says so.
        expect((await post('/admin/abort', { target: { agent: 'nobody' } })).body).toEqual({ ok: true, sockets: 0 })
        expect((await post('/admin/wait', { until: 'accepted', agent, atLeast: 2, timeoutMs: 5000 })).body).toEqual({ count: 2 })
        const sockets = (await call(http, 'GET', `/admin/sockets?agent=${agent}`)).body.sockets as Array<{ id: string; closeSent: unknown; channels: Array<{ topic: string }> }>
        expect(sockets).toHaveLength(2)
        expect(sockets[0]!.closeSent).toEqual({ code: 1000, reason: 'bye' })
        expect(sockets[1]!.channels.map((c) => c.topic)).toEqual([`agent_control:${agent}`])
        const frames = (await call(http, 'GET', `/admin/sockets/${sockets[1]!.id}/frames`)).body.frames as Array<{ dir: string; frame: { event: string } | null }>
        expect(frames.some((f) => f.dir === 'in' && f.frame?.event === 'phx_join')).toBe(true)

        // A control signal, then a supersede: terminal, and no upgrade after it.
        const handled = link.once('control')
        expect((await post('/admin/control', { agent, signal: { mode: 'stop', correlation_id: 'over-http' } })).body).toEqual({ sent: 1 })
        await handled
        expect(signals).toEqual(['over-http'])
        const ended = link.once('disconnected')
        expect((await post('/admin/supersede', { agent })).body).toEqual({ sent: 1 })
        expect(await ended).toMatchObject({ outcome: 'terminated', reason: { kind: 'superseded' } })
        expect(((await call(http, 'GET', `/admin/upgrades?agent=${agent}`)).body.upgrades as Array<{ status: number }>).map((u) => u.status)).toEqual([101, 101])

        // A wait that cannot be met answers 408 with the count it saw.
        const timedOut = await post('/admin/wait', { until: 'accepted', agent, atLeast: 3, timeoutMs: 50 })
        expect(timedOut.status).toBe(408)
        expect(timedOut.body.error).toMatchObject({ code: 'timeout', count: 2 })
      } finally {
        await link.disconnect()
      }
      // A refusal scripted for one agent only, and a held upgrade answered over HTTP.
      expect((await post('/admin/refuse-upgrades', { agent: 'second', refusals: [{ status: 429, retryAfter: '1' }] })).body).toEqual({ ok: true })
      expect((await post('/admin/hold-upgrades', { agents: '^held-' })).body).toEqual({ ok: true })
      const held = createLink({ url, agentId: 'held-1', apiKey: 'k' })
      const connecting = held.connect().then(() => null, (error: unknown) => error)
      expect((await post('/admin/wait', { until: 'heldUpgrades', agent: 'held-1', timeoutMs: 5000 })).body).toEqual({ count: 1 })
      expect((await call(http, 'GET', '/admin/held')).body).toMatchObject({ upgrades: 1 })
      expect((await post('/admin/answer-upgrade', { agent: 'held-1', answer: { status: 403 } })).body).toEqual({ answered: true })
      expect(await connecting).toMatchObject({ reason: { kind: 'rejected', status: 403 } })
      await held.disconnect()
      // The newest held upgrade answered first; the oldest dropped, counted as ended unanswered.
      const [older, newer] = ['held-a', 'held-b'].map((agentId) => createLink({ url, agentId, apiKey: 'k', policy: { reconnect: { initialDelayMs: 60_000, maxDelayMs: 60_000 } } }))
      const olderUp = older!.connect().then(() => null, (error: unknown) => error)
      expect((await post('/admin/wait', { until: 'heldUpgrades', agent: 'held-a', timeoutMs: 5000 })).body).toEqual({ count: 1 })
      const newerUp = newer!.connect().then(() => null, (error: unknown) => error)
      expect((await post('/admin/wait', { until: 'heldUpgrades', agent: 'held-b', timeoutMs: 5000 })).body).toEqual({ count: 1 })
      expect((await post('/admin/answer-upgrade', { which: 'newest', answer: { status: 403 } })).body).toEqual({ answered: true })
      expect(await newerUp).toMatchObject({ reason: { kind: 'rejected', status: 403 } })
      expect((await call(http, 'GET', '/admin/held')).body).toMatchObject({ upgrades: 1, unanswered: 0 })
      const dropped = older!.once('disconnected')
      expect((await post('/admin/answer-upgrade', { which: 'oldest', answer: 'drop' })).body).toEqual({ answered: true })
      expect(await dropped).toMatchObject({ reason: { kind: 'dropped' } })
      expect((await call(http, 'GET', '/admin/held')).body).toMatchObject({ upgrades: 0, unanswered: 1 })
      expect((await post('/admin/answer-upgrade', { which: 'last' })).status).toBe(400)
      await Promise.all([older!.disconnect(), newer!.disconnect()])
      expect(await olderUp).toMatchObject({ reason: { kind: 'graceful' } })
    } finally {
      child.kill('SIGTERM')
      expect(await exited(child)).toBe(0)
    }
  })

  it('serve outlives the reader of its output (serve --json | head -n 1, to learn the port): it says so once on stderr, serves on, and drains on SIGTERM with exit 0', async () => {
    const child = serve()
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    try {
      const { url, http } = await listening(child)
      // The reader goes away: the next log line ("accepted") meets a closed pipe (EPIPE).
      child.stdout.destroy()
      for (const agent of ['after-1', 'after-2']) {
        const link = createLink({ url, agentId: agent, apiKey: 'k' })
        try {
          await link.connect()
          expect((await call(http, 'POST', '/admin/wait', { until: 'joined', agent, timeoutMs: 5000 })).body).toEqual({ count: 1 })
        } finally {
          await link.disconnect()
        }
      }
      await until(() => stderr.includes('no more log lines'), 5000, 'serve to say its log lines stopped')
      expect(child.exitCode).toBe(null)
      expect(stderr.match(/no more log lines/g)).toHaveLength(1)
      expect(stderr).toContain('phoenix-link: no more log lines (the reader of the output went away); running on until Ctrl-C or SIGTERM')
    } finally {
      child.kill('SIGTERM')
      expect(await exited(child)).toBe(0)
    }
    // stderr on the same pipe (`serve --json 2>&1 | head -n 1`): the notice itself cannot be written, and the server still serves on.
    const both = spawn('sh', ['-c', `exec "${process.execPath}" --import tsx src/node/cli.ts serve --port 0 --json 2>&1`], { cwd: root })
    try {
      const { url, http } = await listening(both)
      both.stdout.destroy()
      const link = createLink({ url, agentId: 'after-both', apiKey: 'k' })
      try {
        await link.connect()
        expect((await call(http, 'POST', '/admin/wait', { until: 'joined', agent: 'after-both', timeoutMs: 5000 })).body).toEqual({ count: 1 })
      } finally {
        await link.disconnect()
      }
      expect((await call(http, 'GET', '/admin/clock')).status).toBe(200)
      expect(both.exitCode).toBe(null)
    } finally {
      both.kill('SIGTERM')
      expect(await exited(both)).toBe(0)
    }
  })

  it('bad requests: a wrong type names the field (400), bad JSON (400), an unknown control (404), a wrong method (405 with Allow)', async () => {
    const sim = await startSimulator()
    try {
      const http = httpOf(sim)
      const wrong = await call(http, 'POST', '/admin/close', { target: { agent: 'a' }, code: 'x' })
      expect(wrong.status).toBe(400)
      expect(wrong.body.error).toMatchObject({ code: 'bad_request', message: 'code: expected a close code a server may send: 1000-1003, 1007-1014 or 3000-4999 (RFC 6455 section 7.4.1)' })
      const missing = await call(http, 'POST', '/admin/supersede', {})
      expect(missing.body.error.message).toBe('agent: expected string, received undefined')
      const badCode = await call(http, 'POST', '/admin/close', { target: 'all', code: 999 })
      expect(badCode.status).toBe(400)
      // A code no endpoint may send (RFC 6455 section 7.4.1) is refused before any socket is touched.
      for (const code of [1004, 1005, 1006, 1015, 2999]) {
        const reserved = await call(http, 'POST', '/admin/close', { target: 'all', code })
        expect([reserved.status, reserved.body.error.message]).toEqual([400, 'code: expected a close code a server may send: 1000-1003, 1007-1014 or 3000-4999 (RFC 6455 section 7.4.1)'])
      }
      expect(() => sim.close('all', 1005)).toThrow(RangeError)
      expect(() => sim.close('all', 1005)).toThrow('close code 1005 may not be sent: use 1000-1003, 1007-1014 or 3000-4999 (RFC 6455 section 7.4.1)')
      expect(() => sim.close('all', 1000, 'x'.repeat(124))).toThrow('a close reason is at most 123 bytes (RFC 6455 section 5.5), got 124')
      // Half of a character cannot go out as UTF-8 (the client would read U+FFFD, the record the original): refused both ways.
      expect(() => sim.close('all', 4000, 'x\ud800')).toThrow(/a close reason must be well-formed text: it holds half of a character/)
      const half = await call(http, 'POST', '/admin/close', { target: 'all', code: 4000, reason: 'x\udc00y' })
      expect([half.status, half.body.error.message]).toEqual([400, expect.stringMatching(/^reason: a close reason must be well-formed text/)])
      expect(() => sim.close('all', 4000, 'x\ud83d\ude00')).not.toThrow()
      // Every edge of the ranges RFC 6455 section 7.4 lets an endpoint send.
      const edges = [999, 1000, 1003, 1004, 1006, 1007, 1014, 1015, 2999, 3000, 4999, 5000, 1000.5]
      expect(edges.filter((code) => isSendableCloseCode(code))).toEqual([1000, 1003, 1007, 1014, 3000, 4999])
      expect(() => sim.close('all', 4999)).not.toThrow()
      expect(() => sim.supersede('nobody', { close: 1005 })).toThrow(RangeError)
      // A target of none of the shapes (a bare agent id, say) is a clear TypeError, not a crash inside.
      const bare = 'agent-1' as unknown as Parameters<typeof sim.stall>[0]
      expect(() => sim.stall(bare)).toThrow(new TypeError('a simulator target is a connection, { agent: id }, { socket: id } or \'all\'; got "agent-1"'))
      expect(() => sim.push({ agent: 7 } as unknown as Parameters<typeof sim.stall>[0], 't', 'e', {})).toThrow(/; got \{"agent":7\}$/)
      // A body nested too deeply to be encoded again is refused, not a crash.
      const deep = `${'['.repeat(10_000)}1${']'.repeat(10_000)}`
      const nested = await call(http, 'POST', '/admin/broadcast', `{"topic":"t","event":"e","payload":{"x":${deep}}}`)
      expect([nested.status, nested.body.error.message]).toEqual([400, 'the body is nested deeper than 64 levels'])
      // A typo is an error, never a default: an unknown field, or a value outside the choices, names itself.
      const typo = await call(http, 'POST', '/admin/wait', { until: 'accepted', agent: 'a', atleast: 5 })
      expect([typo.status, typo.body.error.message]).toEqual([400, 'body: unknown key "atleast"'])
      const choice = await call(http, 'POST', '/admin/wait', { until: 'joinz' })
      expect(choice.body.error.message).toBe('until: expected one of "live" | "joined" | "heldUpgrades" | "heldJoins" | "accepted" | "upgrades" | "refused" | "closed" | "joins"')
      const target = await call(http, 'POST', '/admin/abort', { target: { agnt: 'x' } })
      expect(target.body.error.message).toBe('target: expected {"agent": "<agent id>"}, {"socket": "<socket id>"} or "all"')
      expect((await call(http, 'POST', '/admin/close', '{"target":')).body.error.code).toBe('bad_json')
      expect((await call(http, 'POST', '/admin/launch-missiles', {})).status).toBe(404)
      const method = await call(http, 'GET', '/admin/close')
      expect([method.status, method.allow]).toEqual([405, 'POST'])
      const tooBig = await call(http, 'POST', '/admin/raw', { target: 'all', data: 'x'.repeat(1_100_000) })
      expect(tooBig.status).toBe(413)
      // A Retry-After that would break the refusal's HTTP head (a CR LF would inject a header) is refused, over HTTP and in the API.
      const injected = await call(http, 'POST', '/admin/refuse-upgrades', { refusals: [{ status: 429, retryAfter: '1\r\nx-evil: 1' }] })
      expect([injected.status, injected.body.error.message]).toEqual([400, 'refusals.0.retryAfter: expected an HTTP field value: visible ASCII, spaces and tabs (no CR or LF)'])
      expect(() => sim.refuseUpgrades({ status: 429, retryAfter: '1\nx: 1' })).toThrow(new TypeError('refusal retryAfter must be an HTTP field value (visible ASCII, spaces and tabs), got "1\\nx: 1"'))
      expect(() => sim.refuseUpgradesOf('a', { status: 302 })).toThrow(new TypeError('refusal status must be a whole number in 400-599, got 302'))
      expect(() => sim.answerHeldUpgrade({ status: 429, retryAfter: '1\r\nx: 1' })).toThrow(/refusal retryAfter must be an HTTP field value/)
      // A body, connection or message the response could not be written from is refused when scripted, not answered as a 400 later.
      expect(() => sim.refuseUpgrades({ status: 503, body: 'platfrom' as never })).toThrow(new TypeError("refusal body must be 'none', 'platform' or { text: string }, got \"platfrom\""))
      expect(() => sim.refuseUpgrades({ status: 503, body: { text: 42 } as never })).toThrow(/refusal body must be 'none', 'platform' or \{ text: string \}/)
      expect(() => sim.refuseUpgrades({ status: 503, connection: 'klose' as never })).toThrow(new TypeError("refusal connection must be 'keep-alive' or 'close', got \"klose\""))
      expect(() => sim.refuseUpgrades({ status: 503, message: 7 as never })).toThrow(new TypeError('refusal message must be a string, got 7'))
      expect(() => sim.refuseUpgrades(null as never)).toThrow(/a refusal is an object/)
      // Keys of a simulator that accepts any agent: a conflict with its configuration, not a crash (500).
      const keys = await call(http, 'POST', '/admin/keys', { agent: 'a', keys: 'k' })
      expect([keys.status, keys.body.error.code]).toEqual([409, 'no_agent_map'])
      // The simulator serves on after all of it.
      expect((await call(http, 'GET', '/admin/clock')).status).toBe(200)
    } finally {
      await sim.stop()
    }
  })

  it('a wait with atMost waits for a count to fall: the last socket of an agent closing; atLeast above atMost is refused', async () => {
    const sim = await startSimulator({ agents: { a: 'ka' } })
    const a = createLink({ url: sim.url, agentId: 'a', apiKey: 'ka' })
    try {
      const http = httpOf(sim)
      await a.connect()
      const stillOpen = await call(http, 'POST', '/admin/wait', { until: 'live', agent: 'a', atMost: 0, timeoutMs: 50 })
      expect([stillOpen.status, stillOpen.body.error.message, stillOpen.body.error.count]).toEqual([408, 'live of a is 1, not at most 0, after 50 ms', 1])
      const gone = call(http, 'POST', '/admin/wait', { until: 'live', agent: 'a', atMost: 0, timeoutMs: 5000 })
      await until(() => sim.listenerCount('change') > 0, 2000, 'the wait to listen')
      const stopped = a.disconnect()
      expect(await gone).toMatchObject({ status: 200, body: { count: 0 } })
      await stopped
      const between = await call(http, 'POST', '/admin/wait', { until: 'accepted', agent: 'a', atLeast: 1, atMost: 1, timeoutMs: 50 })
      expect(between).toMatchObject({ status: 200, body: { count: 1 } })
      const never = await call(http, 'POST', '/admin/wait', { until: 'live', atLeast: 2, atMost: 1 })
      expect([never.status, never.body.error.message]).toEqual([400, 'atLeast: 2 is more than atMost (1): no count meets both'])
    } finally {
      await a.disconnect()
      await sim.stop()
    }
  })

  it('a query parameter a route does not read (a typo) is a 400 naming it, not an answer for every agent', async () => {
    const sim = await startSimulator({ agents: 'any' })
    try {
      const http = httpOf(sim)
      const typo = await call(http, 'GET', '/admin/sockets?agnet=a')
      expect([typo.status, typo.body.error.message]).toEqual([400, 'unknown query parameter "agnet"; this route reads agent (and token, for access)'])
      const none = await call(http, 'GET', '/admin/connections?agent=a')
      expect([none.status, none.body.error.message]).toEqual([400, 'unknown query parameter "agent"; this route reads none (and token, for access)'])
      expect((await call(http, 'GET', '/admin/sockets?agent=a')).status).toBe(200)
      // One given twice: which one a route would read is a guess (it read the first).
      const twice = await call(http, 'GET', '/admin/sockets?agent=a&agent=b')
      expect([twice.status, twice.body.error.message]).toEqual([400, 'query parameter "agent" given 2 times; give it once'])
      expect((await call(http, 'GET', '/admin/openapi.json?v=2')).status).toBe(400)
      // A POST reads its body, not its query.
      expect((await call(http, 'POST', '/admin/reset?note=x', {})).status).toBe(200)
      // /metrics is left to scrapers, which may add parameters of their own.
      expect((await fetch(`${http}/metrics?scrape=1`)).status).toBe(200)
      // The OpenAPI document says so of every GET of /admin, and names the token they may carry.
      const doc = (await call(http, 'GET', '/admin/openapi.json')).body as { paths: Record<string, Record<string, { responses: object; parameters?: Array<{ name: string; in: string }> }>> }
      const gets = Object.entries(doc.paths).filter(([path, ops]) => path.startsWith('/admin/') && ops.get !== undefined)
      expect(gets.map(([path]) => path)).toEqual(expect.arrayContaining(['/admin/sockets', '/admin/connections', '/admin/events', '/admin/openapi.json', '/admin/clock']))
      for (const [path, ops] of gets) {
        expect(Object.keys(ops.get!.responses), path).toContain('400')
        expect(ops.get!.parameters?.filter((p) => p.in === 'query').map((p) => p.name), path).toContain('token')
      }
      expect(Object.keys(doc.paths['/metrics']!.get!.responses)).not.toContain('400')
      // A wait's 408 carries the count it saw, as the document says (or, for a body that never came, none).
      const timeout = (doc.paths['/admin/wait']!.post!.responses as Record<string, { content: Record<string, { schema: { anyOf: Array<{ properties: { error: { required: string[] } } }> } }> }>)['408']!
      expect(timeout.content['application/json']!.schema.anyOf.map((s) => s.properties.error.required)).toEqual([
        ['code', 'message', 'count'],
        ['code', 'message'],
      ])
    } finally {
      await sim.stop()
    }
  })

  it('records and waits filter by agent; /admin itself is behind the access rule; a held join answered over HTTP', async () => {
    const sim = await startSimulator({ agents: { a: 'ka', b: 'kb' } })
    const a = createLink({ url: sim.url, agentId: 'a', apiKey: 'ka' })
    const b = createLink({ url: sim.url, agentId: 'b', apiKey: 'kb' })
    try {
      const http = httpOf(sim)
      await Promise.all([a.connect(), b.connect()])
      const ids = async (query: string) => ((await call(http, 'GET', `/admin/sockets${query}`)).body.sockets as Array<{ agentId: string }>).map((c) => c.agentId)
      expect(await ids('?agent=a')).toEqual(['a'])
      expect((await ids('')).sort()).toEqual(['a', 'b'])
      // A join held for agent a is counted for a, for every agent, and not for b.
      expect((await call(http, 'POST', '/admin/join-rule', { topic: 'room:held', outcome: { reply: 'hold' } })).body).toEqual({ ok: true })
      const room = a.channel('room:held')
      const joined = room.joined()
      const held = (agent: string | undefined, timeoutMs: number) => call(http, 'POST', '/admin/wait', { until: 'heldJoins', ...(agent === undefined ? {} : { agent }), timeoutMs })
      expect((await held('a', 5000)).body).toEqual({ count: 1 })
      expect((await held(undefined, 5000)).body).toEqual({ count: 1 })
      const none = await held('b', 50)
      expect([none.status, none.body.error.count]).toEqual([408, 0])
      // A malformed answer names the forms it takes; a good one releases the join.
      const bad = await call(http, 'POST', '/admin/answer-join', { topic: 'room:held', outcome: { reply: 'maybe' } })
      expect([bad.status, bad.body.error.message]).toEqual([400, 'outcome: expected {"reply": "ok", "response"?: {...}} or {"reply": "error", "response": {...}}'])
      expect((await call(http, 'POST', '/admin/answer-join', { topic: 'room:held', outcome: { reply: 'ok', response: { n: 1 } } })).body).toEqual({ answered: true })
      expect(await joined).toEqual({ n: 1 })
      // A push with a joinRef of its own carries it; without one, the join's.
      const push = (joinRef?: string | number) => call(http, 'POST', '/admin/push', { target: { agent: 'a' }, topic: 'room:held', event: 'note', payload: {}, ...(joinRef === undefined ? {} : { joinRef }) })
      expect((await push('stale-99')).body).toEqual({ sent: 1 })
      // A joinRef as a client in another language may use one: a number (the simulator serves and echoes those).
      expect((await push(99)).body).toEqual({ sent: 1 })
      expect((await push()).body).toEqual({ sent: 1 })
      const [socket] = (await call(http, 'GET', '/admin/sockets?agent=a')).body.sockets as Array<{ id: string; channels: Array<{ topic: string; joinRef: string }> }>
      const notes = ((await call(http, 'GET', `/admin/sockets/${socket!.id}/frames`)).body.frames as Array<{ dir: string; frame: { event: string; join_ref: string | null } | null }>)
        .filter((f) => f.dir === 'out' && f.frame?.event === 'note')
        .map((f) => f.frame!.join_ref)
      expect(notes).toEqual(['stale-99', 99, socket!.channels.find((c) => c.topic === 'room:held')!.joinRef])
      // Refusals for no agent in particular refuse the next upgrade of any agent; an empty body is {}.
      expect((await call(http, 'POST', '/admin/reset', '')).body).toEqual({ ok: true })
      expect((await call(http, 'POST', '/admin/refuse-upgrades', { refusals: [{ status: 503 }] })).body).toEqual({ ok: true })
      const back = b.once('reconnected')
      sim.close({ agent: 'b' }, 1000)
      await back
      expect(((await call(http, 'GET', '/admin/upgrades?agent=b')).body.upgrades as Array<{ status: number }>).map((u) => u.status)).toEqual([101, 503, 101])
    } finally {
      await Promise.all([a.disconnect(), b.disconnect()])
      await sim.stop()
    }
    // `/admin` itself is an admin path: a rebound Host gets the access rule's 403, not a 404.
    const other = await startSimulator()
    let rebound: { status: number; body: string }
    try {
      rebound = await new Promise((resolve, reject) => {
        request({ host: '127.0.0.1', port: other.port, path: '/admin', headers: { host: 'rebound.evil.example' }, agent: false }, (res) => {
          let body = ''
          res.setEncoding('utf8')
          res.on('data', (c: string) => (body += c))
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
        })
          .on('error', reject)
          .end()
      })
    } finally {
      await other.stop()
    }
    expect(rebound.status).toBe(403)
    expect(JSON.parse(rebound.body).error.message).toBe('the admin routes answer only to a loopback Host, not "rebound.evil.example"')
  })

  it('recordLimit keeps the most recent frames of each socket; a new socket has no problems; abort() and close() of a closed socket change nothing', async () => {
    const sim = await startSimulator({ agents: { a: 'ka' }, recordLimit: 3 })
    const link = createLink({ url: sim.url, agentId: 'a', apiKey: 'ka' })
    try {
      await link.connect()
      const [socket] = sim.accepted('a')
      expect(socket!.problems).toEqual([])
      // Join, its reply, then three pushes: only the last three frames are kept, in order.
      for (const n of [1, 2, 3]) sim.push({ agent: 'a' }, 'agent_control:a', 'note', { n })
      const n = (f: { frame: { payload: unknown } | null } | undefined) => (f?.frame?.payload as { n?: number } | undefined)?.n
      await sim.waitFor(() => n(socket!.frames.at(-1)) === 3, { what: 'the third push recorded' })
      expect(socket!.frames.map(n)).toEqual([1, 2, 3])
      await link.disconnect()
      await sim.waitFor(() => socket!.state === 'closed', { what: 'the socket to close' })
      const closeSeen = socket!.closeSeen
      socket!.abort()
      socket!.close(4000)
      expect([socket!.state, socket!.aborted, socket!.closeSent, socket!.closeSeen]).toEqual(['closed', false, null, closeSeen])
    } finally {
      await link.disconnect()
      await sim.stop()
    }
  })

  it('the per-agent records a wait counts stay equal to the records themselves as historyLimit trims them: sockets, upgrades, refusals', async () => {
    const sim = await startSimulator({ agents: { a: 'ka', b: 'kb' }, historyLimit: 3 })
    const http = httpOf(sim)
    const opened: WebSocket[] = []
    const attempt = async (agent: string, key: string) => {
      const ws = new WebSocket(`${sim.url}/websocket?agent_id=${agent}&vsn=2.0.0`, { headers: { 'x-api-key': key } })
      opened.push(ws)
      const outcome = await Promise.race([once(ws, 'open').then(() => 'open'), once(ws, 'unexpected-response').then(() => 'refused'), once(ws, 'error').then(() => 'error')])
      if (outcome === 'open') {
        ws.close()
        await once(ws, 'close')
      } else ws.terminate()
    }
    try {
      const script: Array<[string, string]> = [['a', 'ka'], ['b', 'wrong'], ['a', 'wrong'], ['b', 'kb'], ['a', 'ka'], ['b', 'wrong'], ['a', 'ka'], ['a', 'wrong']]
      for (const [agent, key] of script) {
        await attempt(agent, key)
        await sim.settled()
        for (const who of ['a', 'b', 'nobody', undefined]) {
          const mine = sim.upgrades.filter((u) => who === undefined || u.agentId === who)
          expect(sim.upgradeCounts(who)).toEqual({ upgrades: mine.length, refused: mine.filter((u) => u.status !== 101).length })
          if (who !== undefined) expect(sim.accepted(who).map((c) => c.id)).toEqual(sim.accepted().filter((c) => c.agentId === who).map((c) => c.id))
        }
      }
      // Three upgrade records kept, the most recent: a refused, a accepted, a refused (the script's last three).
      expect(sim.upgrades.map((u) => [u.agentId, u.status])).toEqual([['b', 403], ['a', 101], ['a', 403]])
      expect((await call(http, 'POST', '/admin/wait', { until: 'refused', agent: 'a', timeoutMs: 1000 })).body).toEqual({ count: 1 })
      expect((await call(http, 'POST', '/admin/wait', { until: 'upgrades', agent: 'b', timeoutMs: 1000 })).body).toEqual({ count: 1 })
      expect((await call(http, 'POST', '/admin/wait', { until: 'accepted', agent: 'a', timeoutMs: 1000 })).body).toEqual({ count: 2 })
      expect(sim.accepted('a')).toHaveLength(2)
      expect(sim.accepted('b')).toHaveLength(1)
    } finally {
      for (const ws of opened) ws.terminate()
      await sim.stop()
    }
  })

  it('checkOrigin: an upgrade from a page of another site is refused 403 with no body, as Phoenix\'s check_origin does, so it cannot supersede the agent under test; loopback pages and clients without an Origin connect', async () => {
    const outcomeOf = async (sim: PlatformSimulator, origin: string | undefined) => {
      const ws = new WebSocket(`${sim.url}/websocket?agent_id=agent-o&vsn=2.0.0`, { headers: { 'x-api-key': 'k' }, ...(origin === undefined ? {} : { origin }) })
      const outcome = await new Promise<string>((resolve) => {
        ws.once('open', () => resolve('101'))
        ws.once('unexpected-response', (_req, res) => {
          let body = ''
          res.on('data', (chunk: Buffer) => (body += chunk.toString()))
          res.on('end', () => resolve(`${res.statusCode} ${JSON.stringify(body)}`))
        })
        ws.once('error', () => {})
      })
      await new Promise((resolve) => (ws.readyState === WebSocket.CLOSED ? resolve(undefined) : ws.once('close', resolve).terminate()))
      await sim.settled()
      return outcome
    }
    const sim = await startSimulator({ agents: 'any' })
    try {
      const origins = [undefined, 'http://127.0.0.1:5173', 'http://localhost:3000', 'http://[::1]:8080', 'https://evil.example', 'null', 'http://127.0.0.1.evil.example', 'chrome-extension://abc']
      const got: Record<string, string> = {}
      for (const origin of origins) got[origin ?? '(none)'] = await outcomeOf(sim, origin)
      expect(got).toEqual({
        '(none)': '101', 'http://127.0.0.1:5173': '101', 'http://localhost:3000': '101', 'http://[::1]:8080': '101',
        'https://evil.example': '403 ""', null: '403 ""', 'http://127.0.0.1.evil.example': '403 ""', 'chrome-extension://abc': '403 ""',
      })
      expect(sim.upgrades.filter((u) => u.status === 403).map((u) => u.outcome)).toEqual(Array(4).fill('origin not allowed'))
    } finally {
      await sim.stop()
    }
    const any = await startSimulator({ agents: 'any', checkOrigin: false })
    // An entry is read as a browser serializes an origin: case, a default port and a bare '/' do not matter.
    const listed = await startSimulator({ agents: 'any', checkOrigin: ['https://App.example:443/'] })
    try {
      expect(await outcomeOf(any, 'https://evil.example')).toBe('101')
      expect([await outcomeOf(listed, 'https://app.example'), await outcomeOf(listed, 'https://app.example:8443'), await outcomeOf(listed, 'http://127.0.0.1:5173'), await outcomeOf(listed, undefined)]).toEqual(['101', '403 ""', '101', '101'])
    } finally {
      await any.stop()
      await listed.stop()
    }
    for (const bad of ['app.example', 'https://app.example/path', 'ws://app.example', 'https://app.example?x']) {
      await expect(startSimulator({ checkOrigin: [bad] })).rejects.toThrow(`checkOrigin: ${JSON.stringify(bad)} is not an origin: give scheme://host[:port]`)
    }
    await expect(startSimulator({ checkOrigin: 'yes' as unknown as boolean })).rejects.toThrow("checkOrigin must be true, false or a list of origins such as ['https://app.example'], got \"yes\"")
  })

  it("serve --allow-origin accepts that page's upgrades besides loopback pages; '*' accepts any", async () => {
    const statusFor = async (url: string, origin: string) => {
      const ws = new WebSocket(`${url}/websocket?agent_id=agent-s&vsn=2.0.0`, { headers: { 'x-api-key': 'k' }, origin })
      const status = await new Promise<number>((resolve) => {
        ws.once('open', () => resolve(101))
        ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0))
        ws.once('error', () => {})
      })
      await new Promise((resolve) => (ws.readyState === WebSocket.CLOSED ? resolve(undefined) : ws.once('close', resolve).terminate()))
      return status
    }
    const cases = [
      [[], [403, 403, 101]],
      [['--allow-origin', 'https://app.example'], [101, 403, 101]],
      [['--allow-origin', '*'], [101, 101, 101]],
    ] as Array<[string[], number[]]>
    // The three servers at once: each is its own process and port.
    await Promise.all(
      cases.map(async ([args, want]) => {
        const child = serve(args)
        try {
          const { url } = await listening(child)
          const got = [await statusFor(url, 'https://app.example'), await statusFor(url, 'https://evil.example'), await statusFor(url, 'http://localhost:5173')]
          expect(got, args.join(' ')).toEqual(want)
        } finally {
          child.kill('SIGTERM')
          expect(await exited(child)).toBe(0)
        }
      }),
    )
  })

  it('a frame record stays small: a long frame keeps its envelope and top-level scalars (a reply its status); historyFrameLimit empties the oldest closed sockets\' records', async () => {
    const sim = await startSimulator({ agents: { a: 'ka' }, historyFrameLimit: 6 })
    const links: Array<ReturnType<typeof createLink>> = []
    try {
      const link = createLink({ url: sim.url, agentId: 'a', apiKey: 'ka' })
      links.push(link)
      await link.connect()
      const channel = link.channel('room:big')
      await channel.joined()
      sim.onPush(() => ({ status: 'ok', response: { echo: 'y'.repeat(5000) } }))
      await channel.push('big', { blob: 'x'.repeat(100_000), note: 'n'.repeat(300), n: 7, flag: true, nothing: null, nested: { a: 1 }, list: [1] })
      const [socket] = sim.accepted('a')
      const pushed = socket!.frames.find((f) => f.dir === 'in' && f.frame?.event === 'big')!
      expect(pushed.length).toBeGreaterThan(100_000)
      expect(pushed.raw).toHaveLength(2001)
      expect(pushed.frame).toEqual({ join_ref: pushed.frame!.join_ref, ref: pushed.frame!.ref, topic: 'room:big', event: 'big', payload: { blob: `${'x'.repeat(200)}…`, note: `${'n'.repeat(200)}…`, n: 7, flag: true, nothing: null } })
      const reply = socket!.frames.find((f) => f.dir === 'out' && f.frame?.event === 'phx_reply' && f.frame.ref === pushed.frame!.ref)!
      expect([reply.length! > 5000, reply.frame!.payload]).toEqual([true, { status: 'ok' }])
      // A short frame's record is whole, with no length.
      const join = socket!.frames.find((f) => f.dir === 'in' && f.frame?.event === 'phx_join' && f.frame.topic === 'room:big')!
      expect([join.length, join.frame!.payload]).toEqual([undefined, {}])
      await link.disconnect()
      // Two more sessions: the closed sockets' frames together exceed 6, so the oldest lose theirs.
      for (let i = 0; i < 2; i++) {
        const next = createLink({ url: sim.url, agentId: 'a', apiKey: 'ka' })
        links.push(next)
        await next.connect()
        await next.disconnect()
      }
      await sim.settled('a')
      const sockets = sim.accepted('a')
      expect(sockets).toHaveLength(3)
      const kept = sockets.map((c) => c.frames.length)
      const forgotten = sockets.map((c) => c.framesForgotten)
      // The newest closed socket keeps its record (a join, its reply and a leave at least: the leave's
      // reply, from the channel's turn, may not beat the client's close that follows it); older ones are emptied.
      expect(kept.slice(0, 2)).toEqual([0, 0])
      expect(kept[2]).toBeGreaterThanOrEqual(3)
      // The first: two joins, a push, their replies, and its leaves; the second: a join, its reply, a leave.
      expect(forgotten[0]).toBeGreaterThanOrEqual(7)
      expect(forgotten[1]).toBeGreaterThanOrEqual(3)
      expect(forgotten[2]).toBe(0)
      await expect(startSimulator({ historyFrameLimit: -1 })).rejects.toThrow(/historyFrameLimit must be a whole number/)
    } finally {
      for (const link of links) await link.disconnect()
      await sim.stop()
    }
  })

  it('the record of long frames holds kilobytes, not the frames: 60 frames of about 1 MB (a long field, a long topic, 100,000 fields) keep under 8 MB of heap (measured in a process of its own)', async () => {
    const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', 'test/support/record-memory.ts'], { cwd: root })
    let out = ''
    let err = ''
    child.stdout.on('data', (c: Buffer) => (out += c.toString()))
    child.stderr.on('data', (c: Buffer) => (err += c.toString()))
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve))
    expect(code, err.slice(-800)).toBe(0)
    const { sentMB, keptMB, recorded } = JSON.parse(out.trim().split('\n').at(-1)!) as { sentMB: number; keptMB: number; recorded: number }
    // Before: the parsed payload was kept whole (about 70 MB); then its cut, a V8 slice, kept it alive all the same.
    expect([sentMB > 60, recorded]).toEqual([true, 120])
    expect(keptMB).toBeLessThan(8)
  }, 60_000)

  it('an answer too large to write as one JSON string is a 500 answer_failed, not a throw (a throw there would end the process)', () => {
    const written: { status?: number; text?: string } = {}
    const res = { writeHead: (status: number) => (written.status = status), end: (text: string) => (written.text = text) } as unknown as Parameters<typeof json>[0]
    const loop: Record<string, unknown> = {}
    loop.self = loop
    json(res, 200, { frames: [loop] })
    expect(written.status).toBe(500)
    expect(JSON.parse(written.text!)).toEqual({ error: { code: 'answer_failed', message: expect.stringMatching(/^the answer could not be written: .*circular/i) } })
  })

  it("abort() ends a socket stuck in its closing handshake (a close sent to a stalled socket is never read back): both sides close at once, not at ws's 30 s close timeout", async () => {
    const sim = await startSimulator({ agents: { a: 'ka' } })
    const link = createLink({ url: sim.url, agentId: 'a', apiKey: 'ka' })
    try {
      await link.connect()
      const [socket] = sim.accepted('a')
      // Bounded well below ws's 30 s close timeout, the only other end of this handshake.
      const lost = next(link, 'disconnected', { timeoutMs: 10_000 })
      socket!.stall()
      expect(sim.close(socket!, 4000)).toBe(1)
      // The client answers the close frame; the stalled server never reads the answer, so neither side ends the TCP connection.
      expect(socket!.state).toBe('closing')
      expect(link.state).toBe('connected')
      // Every other control acts on open sockets only, as abort() does on an agent's; abort() of this socket, named, reaches it.
      expect(sim.close(socket!, 4001)).toBe(0)
      expect(sim.abort({ agent: 'a' })).toBe(0)
      expect(sim.abort({ socket: 'no-such-socket' })).toBe(0)
      expect(sim.abort({ socket: socket!.id })).toBe(1)
      await sim.waitFor(() => socket!.state === 'closed', { timeoutMs: 2_000, what: 'the aborted socket to close' })
      // The client had read the server's close frame: its close is the server's code, within the same bound.
      expect((await lost).reason).toMatchObject({ kind: 'closed', closeCode: 4000 })
      expect(socket!.closeSent).toEqual({ code: 4000, reason: '' })
      expect([sim.abort(socket!), sim.abort({ socket: socket!.id })]).toEqual([0, 0])
    } finally {
      await link.disconnect()
      await sim.stop()
    }
  })

  it('a stalled socket reads nothing until resume(); then it handles what the client sent meanwhile', async () => {
    const sim = await startSimulator({ agents: { a: 'ka' } })
    const link = createLink({ url: sim.url, agentId: 'a', apiKey: 'ka' })
    try {
      await link.connect()
      const room = link.channel('room:stall')
      await room.joined()
      const [socket] = sim.accepted('a')
      socket!.stall()
      const pushes = () => framesIn(socket!, 'ping', 'room:stall').length
      const reply = room.push('ping', { n: 1 }, { timeoutMs: 5000 }).then(() => 'answered', (error: Error) => error.message)
      // The client's push is on the wire, and the server has not read it: then it is resumed.
      expect(pushes()).toBe(0)
      socket!.resume()
      expect(socket!.stalled).toBe(false)
      expect(await reply).toBe('answered')
      expect(pushes()).toBe(1)
    } finally {
      await link.disconnect()
      await sim.stop()
    }
  })

  it('every public control and record of the TypeScript API has its route', () => {
    const byMethod: Record<string, string> = {
      live: 'GET /admin/sockets', accepted: 'GET /admin/sockets', settled: 'POST /admin/wait', waitFor: 'POST /admin/wait', closesSent: 'GET /admin/closes',
      refuseUpgrades: 'POST /admin/refuse-upgrades', refuseUpgradesOf: 'POST /admin/refuse-upgrades', onJoin: 'POST /admin/join-rule',
      holdUpgrades: 'POST /admin/hold-upgrades', heldUpgrades: 'GET /admin/held', heldUpgradesOf: 'GET /admin/held', unansweredUpgradesOf: 'GET /admin/held', answerHeldUpgrade: 'POST /admin/answer-upgrade',
      heldJoins: 'GET /admin/held', answerHeldJoin: 'POST /admin/answer-join', resetScripts: 'POST /admin/reset', onPush: 'POST /admin/push-reply',
      close: 'POST /admin/close', abort: 'POST /admin/abort', disconnect: 'POST /admin/disconnect', setKeys: 'POST /admin/keys', revoke: 'POST /admin/revoke',
      unrevoke: 'POST /admin/unrevoke', freeze: 'POST /admin/freeze', stall: 'POST /admin/stall', restart: 'POST /admin/restart', push: 'POST /admin/push',
      sendRaw: 'POST /admin/raw', control: 'POST /admin/control', broadcast: 'POST /admin/broadcast', supersede: 'POST /admin/supersede',
      channelError: 'POST /admin/channel-error', channelClose: 'POST /admin/channel-close', now: 'GET /admin/clock', upgradeCounts: 'GET /admin/upgrades', upgradesSeenOf: 'GET /admin/held',
    }
    // Not controls: the process's own lifecycle (serve starts and stops it; a stopping simulator answers every POST 503) and its address (serve prints it).
    const notControls = new Set(['constructor', 'listen', 'stop', 'isStopping', 'port', 'url'])
    const source = readFileSync(new URL('../../src/node/server/simulator.ts', import.meta.url), 'utf8')
    const publicNames = Object.getOwnPropertyNames(PlatformSimulator.prototype).filter(
      (name) => !notControls.has(name) && !new RegExp(`\\n  private (get )?${name}\\(`).test(source),
    )
    const served = new Set(CONTROL_ROUTES.map((r) => `${r.method} ${r.path}`))
    expect(publicNames.filter((name) => !byMethod[name])).toEqual([])
    expect(Object.entries(byMethod).filter(([, route]) => !served.has(route))).toEqual([])
  })

  it('the OpenAPI document lists every route with its body schema', async () => {
    const sim = await startSimulator()
    try {
      const http = httpOf(sim)
      const doc = (await call(http, 'GET', '/admin/openapi.json')).body
      expect(doc.openapi).toBe('3.1.0')
      for (const r of CONTROL_ROUTES) {
        const op = doc.paths[r.path]?.[r.method.toLowerCase()]
        expect(op, `${r.method} ${r.path}`).toBeDefined()
        if (r.body) {
          const schema = op.requestBody.content['application/json'].schema
          expect(schema.type ?? schema.anyOf, `${r.path} has a body schema`).toBeDefined()
        }
      }
      expect(doc.paths['/admin/close'].post.requestBody.content['application/json'].schema.required).toEqual(['target', 'code'])
      expect(doc.paths['/admin/events'].get.summary).toMatch(/Server-sent events/)
    } finally {
      await sim.stop()
    }
  })

  it('with an admin token every /admin route needs it; without one only loopback callers are served', async () => {
    const sim = await startSimulator({ adminToken: 'sesame' })
    try {
      const http = httpOf(sim)
      expect((await call(http, 'GET', '/admin/clock')).status).toBe(401)
      expect((await call(http, 'GET', '/admin/connections')).status).toBe(401)
      expect((await call(http, 'GET', '/admin/clock', undefined, { authorization: 'Bearer nope!!' })).status).toBe(401)
      expect((await call(http, 'GET', '/admin/clock', undefined, { authorization: 'Bearer sesame' })).status).toBe(200)
      expect((await call(http, 'GET', '/metrics')).status).toBe(200)
    } finally {
      await sim.stop()
    }
    expect([isLoopbackAddress('127.0.0.1'), isLoopbackAddress('127.8.9.1'), isLoopbackAddress('::1'), isLoopbackAddress('::ffff:127.0.0.1')]).toEqual([true, true, true, true])
    expect([isLoopbackAddress('10.0.0.7'), isLoopbackAddress('::ffff:192.168.1.2'), isLoopbackAddress('fe80::1'), isLoopbackAddress(undefined)]).toEqual([false, false, false, false])
    expect(['127.0.0.1', '127.0.0.1:4000', 'localhost:4000', '[::1]:4000', '[::ffff:127.0.0.1]:4000', '[::ffff:7f00:1]:4000', '[::FFFF:7F01:203]', '127.255.255.254', 'LOCALHOST:4000', 'LocalHost'].map(isLoopbackHost)).toEqual([true, true, true, true, true, true, true, true, true, true])
    expect(['127.256.0.1', '127.0.0.1.example.com', '[::ffff:10.0.0.7]:4000', '1270.0.0.1', 'localhost.example.com', '[::ffff:a00:7]', '[::ffff:7f00:1:2]', '[::ffff:ff00:1]', '[::ffff:127.256.0.1]', '[::ffff:7f0000:1]', '[::ffff:7f00:10000]', ''].map(isLoopbackHost)).toEqual([false, false, false, false, false, false, false, false, false, false, false, false])
  })

  it('the access rule: a remote peer, a rebound Host, a foreign Origin and a simple cross-origin POST are refused; the token works as a header or a GET query', () => {
    const local: AdminRequest = { method: 'GET', remoteAddress: '127.0.0.1', host: '127.0.0.1:4000', origin: undefined, authorization: undefined, contentType: undefined, queryToken: null }
    const status = (req: Partial<AdminRequest>, token: string | null = null) => adminAccess({ ...local, ...req }, token)?.status ?? 200
    expect(status({})).toBe(200)
    expect(status({ host: 'localhost:4000' })).toBe(200)
    expect(status({ host: '[::1]:4000', remoteAddress: '::1' })).toBe(200)
    expect(status({ remoteAddress: '10.0.0.7' })).toBe(403)
    expect(status({ host: 'rebound.evil.example:4000' })).toBe(403)
    expect(status({ origin: 'https://evil.example' })).toBe(403)
    expect(status({ origin: 'null' })).toBe(403)
    expect(status({ origin: 'http://127.0.0.1:4000' })).toBe(200)
    expect(status({ method: 'POST', contentType: 'text/plain;charset=UTF-8' })).toBe(415)
    expect(status({ method: 'POST', contentType: 'application/x-www-form-urlencoded' })).toBe(415)
    expect(status({ method: 'POST', contentType: 'text/x.application/json' })).toBe(415)
    expect(status({ method: 'POST', contentType: 'application/jsonp' })).toBe(415)
    expect(status({ method: 'POST', contentType: 'application/json; charset=utf-8' })).toBe(200)
    expect(status({ remoteAddress: '10.0.0.7', host: 'sim.example' }, 't0k')).toBe(401)
    expect(adminAccess({ ...local, host: undefined }, null)?.message).toBe('the admin routes answer only to a loopback Host, not ""')
    expect(adminAccess({ ...local, authorization: 'Bearer nope' }, 't0k')?.message).toBe('send Authorization: Bearer <admin token> (or ?token= on a GET)')
    expect(status({ remoteAddress: '10.0.0.7', authorization: 'bearer t0k' }, 't0k')).toBe(200)
    expect(status({ remoteAddress: '10.0.0.7', queryToken: 't0k' }, 't0k')).toBe(200)
    expect(status({ method: 'POST', contentType: 'application/json', queryToken: 't0k' }, 't0k')).toBe(401)
  })

  it('over the wire: a foreign Origin, a rebound Host and a text/plain POST touch nothing; a long-poll ends when its caller goes or the simulator stops', async () => {
    const sim = await startSimulator()
    const http = httpOf(sim)
    const link = createLink({ url: sim.url, agentId: 'victim', apiKey: 'k' })
    try {
      await link.connect()
      const raw = (headers: Record<string, string>, body: string) =>
        new Promise<number>((resolve, reject) => {
          const req = request({ host: '127.0.0.1', port: sim.port, path: '/admin/close', method: 'POST', headers: { ...headers, 'content-length': Buffer.byteLength(body) }, agent: false }, (res) => {
            res.resume()
            resolve(res.statusCode ?? 0)
          })
          req.on('error', reject)
          req.end(body)
        })
      const body = JSON.stringify({ target: 'all', code: 4000 })
      expect(await raw({ 'content-type': 'text/plain' }, body)).toBe(415)
      expect(await raw({ 'content-type': 'application/json', origin: 'https://evil.example' }, body)).toBe(403)
      expect(await raw({ 'content-type': 'application/json', host: 'rebound.evil.example' }, body)).toBe(403)
      expect(sim.live('victim')).toHaveLength(1)
      expect(link.state).toBe('connected')
      // A wait whose caller goes away leaves no listener behind.
      const listeners = sim.listenerCount('change')
      const controller = new AbortController()
      const gone = fetch(`${http}/admin/wait`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ until: 'accepted', atLeast: 99, timeoutMs: 60_000 }), signal: controller.signal }).catch((e: Error) => e.name)
      // Listener counts are no simulator record (waitFor re-checks on records): poll them, bounded.
      await until(() => sim.listenerCount('change') > listeners, 2000, 'the wait to listen')
      controller.abort()
      expect(await gone).toBe('AbortError')
      await until(() => sim.listenerCount('change') === listeners, 2000, 'the wait to stop listening')
    } finally {
      await link.disconnect()
    }
    // A wait pending when the simulator stops is answered 503 at once: stop() does not wait it out.
    const pending = call(http, 'POST', '/admin/wait', { until: 'accepted', atLeast: 99, timeoutMs: 60_000 })
    await until(() => sim.listenerCount('change') > 0, 2000, 'the wait to listen')
    const started = performance.now()
    await sim.stop()
    expect(performance.now() - started).toBeLessThan(5_000)
    expect(await pending).toMatchObject({ status: 503, body: { error: { code: 'stopping', message: 'the simulator is stopping: it scripts nothing more' } } })
  })

  it("a wait that stop()'s own closes would meet is answered 503 stopping, not 200", async () => {
    const sim = await startSimulator({ agents: { 'agent-1': 'key-1' } })
    const http = httpOf(sim)
    const link = createLink({ url: sim.url, agentId: 'agent-1', apiKey: 'key-1' })
    await link.connect()
    const ended = new Promise<void>((resolve) => link.once('disconnected', () => resolve()))
    const pending = call(http, 'POST', '/admin/wait', { until: 'closed', agent: 'agent-1', timeoutMs: 60_000 })
    await until(() => sim.listenerCount('change') > 0, 2000, 'the wait to listen')
    await sim.stop()
    expect(await pending).toMatchObject({ status: 503, body: { error: { code: 'stopping' } } })
    await ended
    await link.disconnect()
  })

  it('a refusal scripted with a bad body is never queued: the next upgrade is accepted, and a held upgrade stays held', async () => {
    const sim = await startSimulator({ agents: { 'agent-1': 'key-1' } })
    try {
      const release = sim.holdUpgrades()
      const socket = new WebSocket(`${sim.url}/websocket?vsn=2.0.0&agent_id=agent-1&api_key=key-1`)
      socket.on('error', () => {})
      await sim.waitFor(() => sim.heldUpgrades === 1)
      expect(() => sim.answerHeldUpgrade({ status: 503, body: { text: 42 } as never })).toThrow(/refusal body must be/)
      expect(sim.heldUpgrades).toBe(1)
      release()
      await once(socket, 'open')
      expect(sim.upgrades.map((u) => u.status)).toEqual([101])
      socket.close()
      await once(socket, 'close')
    } finally {
      await sim.stop()
    }
  })

  it("a socket mounted at '/' (path '/') serves at /websocket; sim.url names no path", async () => {
    const sim = await startSimulator({ path: '/', agents: { 'agent-1': 'key-1' } })
    try {
      expect(sim.url).toBe(`ws://127.0.0.1:${sim.port}`)
      const socket = new WebSocket(`${sim.url}/websocket?vsn=2.0.0&agent_id=agent-1&api_key=key-1`)
      await once(socket, 'open')
      expect(sim.live('agent-1')).toHaveLength(1)
      socket.close()
      await once(socket, 'close')
    } finally {
      await sim.stop()
    }
  })

  it('an admin token that is not a non-empty string of visible ASCII is refused at start, naming it; a token with a space inside works', async () => {
    for (const token of [1234, '', ' sesame', 'ses\name', null]) {
      const started = startSimulator({ adminToken: token as unknown as string })
      await expect(started, JSON.stringify(token)).rejects.toBeInstanceOf(TypeError)
      await expect(started, JSON.stringify(token)).rejects.toThrow(/^adminToken must be a non-empty string of visible ASCII/)
    }
    // serve: an empty --admin-token (or PHOENIX_LINK_ADMIN_TOKEN set empty) is said, not dropped.
    const child = serve(['--admin-token', ''])
    let errors = ''
    child.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()))
    expect(await exited(child)).toBe(1)
    expect(errors).toMatch(/^phoenix-link: --admin-token \(or PHOENIX_LINK_ADMIN_TOKEN\) must be a non-empty string of visible ASCII/)
    const sim = await startSimulator({ adminToken: 'open sesame' })
    try {
      const http = httpOf(sim)
      expect((await call(http, 'GET', '/admin/clock', undefined, { authorization: 'Bearer open sesame' })).status).toBe(200)
      expect((await call(http, 'GET', '/admin/clock?token=')).status).toBe(401)
      expect((await call(http, 'GET', '/admin/clock', undefined, { authorization: 'Bearer 1234' })).status).toBe(401)
    } finally {
      await sim.stop()
    }
  })

  it('a payload is carried exactly, an own __proto__ key included; /admin/raw counts the sockets it wrote to; a wrong method on the OpenAPI document is 405', async () => {
    const sim = await startSimulator({ agents: { 'agent-1': 'key-1' } })
    const link = createLink({ url: sim.url, agentId: 'agent-1', apiKey: 'key-1' })
    try {
      const http = httpOf(sim)
      expect((await call(http, 'POST', '/admin/raw', { target: 'all', data: '[not json' })).body).toEqual({ ok: true, sockets: 0 })
      const room = link.channel('room:1')
      await link.connect()
      await room.joined()
      const got: string[] = []
      const arrived = new Promise<void>((resolve) =>
        room.on('news', (payload) => {
          got.push(JSON.stringify(payload))
          resolve()
        }),
      )
      const answer = await call(http, 'POST', '/admin/push', '{"target":"all","topic":"room:1","event":"news","payload":{"__proto__":{"x":1},"a":1}}')
      expect(answer.body).toEqual({ sent: 1 })
      await arrived
      expect(got).toEqual(['{"__proto__":{"x":1},"a":1}'])
      // What went out on the wire, as the simulator recorded its text.
      const sent = sim.live('agent-1')[0]!.frames.filter((f) => f.dir === 'out' && f.frame?.event === 'news')
      expect(sent.map((f) => f.raw.replace(/^\["\d+"/, '["<join_ref>"'))).toEqual(['["<join_ref>",null,"room:1","news",{"__proto__":{"x":1},"a":1}]'])
      const problems = link.once('ignored')
      expect((await call(http, 'POST', '/admin/raw', { target: { agent: 'agent-1' }, data: '[not json' })).body).toEqual({ ok: true, sockets: 1 })
      expect((await problems).detail).toMatch(/not-json|not JSON/)
      const put = await fetch(`${http}/admin/openapi.json`, { method: 'PUT' })
      expect([put.status, put.headers.get('allow'), ((await put.json()) as { error: { code: string } }).error.code]).toEqual([405, 'GET', 'method_not_allowed'])
      const doc = (await call(http, 'GET', '/admin/openapi.json')).body
      expect(Object.keys(doc.paths['/admin/close'].post.responses).sort()).toEqual(['200', '400', '401', '403', '405', '408', '413', '415', '500', '503'])
      expect(Object.keys(doc.paths['/admin/sockets/{id}/frames'].get.responses).sort()).toEqual(['200', '400', '401', '403', '404', '405', '500'])
      expect((await call(http, 'GET', '/admin/sockets/nope/frames')).status).toBe(404)
    } finally {
      await link.disconnect()
      await sim.stop()
    }
  })

  it('while stop() drains a socket whose client never answers the close (on Bandit, which reads on until the client ends), a control is 503 stopping, not a 500', async () => {
    const sim = await startSimulator({ agents: 'any', flavor: 'bandit' })
    const socket = new WebSocket(`${sim.url}/websocket?vsn=2.0.0&agent_id=a1&api_key=k`)
    socket.on('error', () => {})
    await once(socket, 'open')
    socket.send(JSON.stringify(['1', '1', 'agent_control:a1', 'phx_join', {}]))
    await sim.waitFor(() => sim.live('a1')[0]?.channels.size === 1, { what: 'the control join' })
    // The client stops reading: it never answers the server's close frame, so stop() waits for it.
    ;(socket as unknown as { _socket: { pause(): void } })._socket.pause()
    // A control whose body is still arriving when stop() begins.
    const late = connect(sim.port, '127.0.0.1')
    await once(late, 'connect')
    const body = JSON.stringify({ target: 'all', code: 1000 })
    // The server has the request (its route chosen) before stop() begins: its HTTP server's own event says so.
    const received = once((sim as unknown as { http: NodeJS.EventEmitter }).http, 'request')
    late.write(`POST /admin/close HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body.slice(0, 5)}`)
    await received
    const lateAnswer = new Promise<string>((resolve) => {
      let text = ''
      late.on('data', (chunk: Buffer) => (text += chunk.toString()))
      late.on('close', () => resolve(text))
    })
    const stopping = sim.stop()
    expect(sim.isStopping).toBe(true)
    try {
      const http = httpOf(sim)
      for (const [path, body] of [['/admin/close', { target: 'all', code: 1000 }], ['/admin/revoke', { agent: 'a1' }], ['/admin/wait', { until: 'live' }]] as const) {
        const answer = await call(http, 'POST', path, body)
        expect([path, answer.status, answer.body.error.code]).toEqual([path, 503, 'stopping'])
      }
      // The records are still read.
      expect((await call(http, 'GET', '/admin/sockets')).body.sockets).toHaveLength(1)
      late.write(body.slice(5))
      expect(await lateAnswer).toMatch(/^HTTP\/1\.1 503[^]*"code":"stopping"/)
    } finally {
      await stopping
      socket.terminate()
    }
  })

  it('stop() with a close code no endpoint may send rejects before tearing anything down, and the simulator can still be stopped', async () => {
    const sim = await startSimulator({ agents: { 'agent-1': 'key-1' } })
    const socket = new WebSocket(`${sim.url}/websocket?vsn=2.0.0&agent_id=agent-1&api_key=key-1`)
    await once(socket, 'open')
    await expect(sim.stop({ code: 1006 })).rejects.toThrow(/close code 1006 may not be sent/)
    // Nothing was touched: the socket is open and the simulator serves.
    expect(sim.live('agent-1')).toHaveLength(1)
    const closed = once(socket, 'close')
    await sim.stop({ code: 4001 })
    expect((await closed)[0]).toBe(4001)
  })

  it('after stop(): a pending waitFor rejects as the simulator stops, a new one rejects at once, and scripting calls throw naming the call', async () => {
    const sim = await startSimulator()
    const pending = sim.waitFor(() => false, { timeoutMs: 60_000, what: 'a socket that never comes' })
    const started = performance.now()
    await sim.stop()
    await expect(pending).rejects.toThrow('simulator: stopped while waiting for a socket that never comes; it was not met and nothing will change any more')
    expect(performance.now() - started).toBeLessThan(5_000)
    await expect(sim.waitFor(() => false, { what: 'x' })).rejects.toThrow(/simulator: stopped while waiting for x/)
    // A condition already met still resolves.
    await sim.waitFor(() => true)
    expect(() => sim.close('all', 1000)).toThrow(/simulator: scripting a socket \(close, abort, push, stall, \.\.\.\) after stop\(\)/)
    expect(() => sim.refuseUpgrades({ status: 503 })).toThrow(/simulator: refuseUpgrades\(\) after stop\(\)/)
    expect(() => sim.holdUpgrades()).toThrow(/simulator: holdUpgrades\(\) after stop\(\)/)
    expect(() => sim.onJoin('room:1', { reply: 'ok' })).toThrow(/simulator: onJoin\(\) after stop\(\)/)
    expect(() => sim.supersede('a')).toThrow(/simulator: supersede\(\) after stop\(\)/)
    // A run started now would never be aborted: nothing connects to a stopped simulator.
    expect(() => sim.runs.startRun('agent-1', 'run-1')).toThrow(/startRun\("agent-1", "run-1"\) after close\(\): the simulator has stopped/)
    for (const [name, call] of [
      ['revoke', () => sim.revoke('a')],
      ['unrevoke', () => sim.unrevoke('a')],
      ['onPush', () => sim.onPush(() => null)],
      ['resetScripts', () => sim.resetScripts()],
    ] as const) {
      expect(call, name).toThrow(new RegExp(`simulator: ${name}\\(\\) after stop\\(\\)`))
    }
  })

  it('stop() ends HTTP requests still arriving (half the headers, half a body) instead of waiting for them', async () => {
    const sim = await startSimulator()
    const errors: Array<string | undefined> = []
    // A whole request answered first on the same connection proves the server holds it.
    const partial = async (text: string) => {
      const socket = connect(sim.port, '127.0.0.1')
      // The server cuts the connection: a reset is what the client may read.
      socket.on('error', (error: NodeJS.ErrnoException) => errors.push(error.code))
      await once(socket, 'connect')
      socket.write('GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
      const [answer] = (await once(socket, 'data')) as [Buffer]
      expect(answer.toString()).toMatch(/^HTTP\/1\.1 200/)
      socket.write(text)
      return socket
    }
    const sockets = [
      await partial('GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n'),
      await partial('POST /admin/close HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"tar'),
    ]
    const ended = sockets.map((socket) => new Promise((resolve) => socket.once('close', resolve)))
    let timer: NodeJS.Timeout | undefined
    const outcome = await Promise.race([
      sim.stop().then(() => 'stopped'),
      new Promise<string>((resolve) => (timer = setTimeout(() => resolve('still stopping after 5 s'), 5_000))),
    ])
    clearTimeout(timer)
    expect(outcome).toBe('stopped')
    await Promise.all(ended)
    for (const socket of sockets) expect(socket.destroyed).toBe(true)
    for (const code of errors) expect(code).toBe('ECONNRESET')
  })

  it(`a body that never completes (a Content-Length never met) is answered 408 after ${CONTROL_BODY_TIMEOUT_MS} ms and its connection closed, not held until Node's own request timeout`, async () => {
    const sim = await startSimulator()
    try {
      const socket = connect(sim.port, '127.0.0.1')
      await once(socket, 'connect')
      let answer = ''
      socket.on('data', (chunk: Buffer) => (answer += chunk.toString()))
      socket.on('error', () => {})
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
      const started = performance.now()
      socket.write('POST /admin/close HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{')
      // Bounded: the server closes it within the timeout and a margin, or the test cuts it and fails below.
      const cut = setTimeout(() => socket.destroy(), CONTROL_BODY_TIMEOUT_MS + 5_000)
      await closed
      clearTimeout(cut)
      expect(performance.now() - started).toBeGreaterThanOrEqual(CONTROL_BODY_TIMEOUT_MS - 50)
      expect(answer).toMatch(/^HTTP\/1\.1 408 /)
      expect(answer.toLowerCase()).toContain('connection: close')
      expect(answer).toContain('"request_timeout"')
      expect((await call(httpOf(sim), 'GET', '/admin/clock')).status).toBe(200)
    } finally {
      await sim.stop()
    }
  }, CONTROL_BODY_TIMEOUT_MS + 10_000)

  it('an upload past the body limit is answered 413 as the limit is passed, and the rest is not read: the connection closes', async () => {
    const sim = await startSimulator()
    try {
      const socket = connect(sim.port, '127.0.0.1')
      await once(socket, 'connect')
      // A chunked body with no end: the answer cannot wait for it.
      socket.write('POST /admin/raw HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n')
      let answer = ''
      socket.on('data', (chunk: Buffer) => (answer += chunk.toString()))
      socket.on('error', () => {})
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
      const chunk = `10000\r\n${'x'.repeat(0x10000)}\r\n`
      let sent = 0
      // Writes 64 KiB chunks until the server answers or ends the connection, at most 24 MiB (more
      // than the limit and every kernel buffer between the two ends of a loopback connection).
      const cap = 24 * 1024 * 1024
      while (!answer.includes('\r\n\r\n') && !socket.destroyed && sent < cap) {
        // (not events.once: it rejects on the EPIPE the server's close may cause)
        if (!socket.write(chunk)) await Promise.race([new Promise((resolve) => socket.once('drain', resolve)), closed])
        sent += 0x10000
      }
      // A server still reading after 24 MiB has not answered: end the upload and fail below.
      if (!answer.includes('\r\n\r\n')) socket.destroy()
      await closed
      expect(answer).toMatch(/^HTTP\/1\.1 413 /)
      expect(answer.toLowerCase()).toContain('connection: close')
      expect(answer).toContain('"too_large"')
      // Answered while the upload was still going.
      expect(sent).toBeLessThan(cap)
      // The simulator serves on.
      expect((await call(httpOf(sim), 'GET', '/admin/clock')).status).toBe(200)
    } finally {
      await sim.stop()
    }
  })

  it('a request target that begins with // is read as a path, not as a host; a number JSON cannot hold is named as such', async () => {
    const sim = await startSimulator()
    try {
      const socket = connect(sim.port, '127.0.0.1')
      await once(socket, 'connect')
      socket.write('GET //admin/clock HTTP/1.1\r\nHost: 127.0.0.1\r\nconnection: close\r\n\r\n')
      let answer = ''
      socket.on('data', (chunk: Buffer) => (answer += chunk.toString()))
      await once(socket, 'close')
      expect(answer).toMatch(/^HTTP\/1\.1 404 /)
      expect(answer).toContain('no route GET //admin/clock')
      const huge = await call(httpOf(sim), 'POST', '/admin/wait', '{"until":"live","atLeast":1,"timeoutMs":1e309}')
      expect([huge.status, huge.body.error.message]).toEqual([400, 'timeoutMs: expected a finite number, received Infinity'])
    } finally {
      await sim.stop()
    }
  })

  it('the OpenAPI document states what the server checks: the close codes a server may send, a reason of at most 123 bytes, and which bodies may be left out', async () => {
    const sim = await startSimulator()
    try {
      const doc = (await call(httpOf(sim), 'GET', '/admin/openapi.json')).body
      const close = doc.paths['/admin/close'].post.requestBody
      expect(close.required).toBe(true)
      expect(close.content['application/json'].schema.properties.code).toEqual({
        anyOf: [
          { type: 'integer', minimum: 1000, maximum: 1003 },
          { type: 'integer', minimum: 1007, maximum: 1014 },
          { type: 'integer', minimum: 3000, maximum: 4999 },
        ],
      })
      // Bytes, said in words: a maxLength (characters) would let 100 "é" (200 bytes) through the document and not the server.
      expect(close.content['application/json'].schema.properties.reason).toEqual({ type: 'string', description: expect.stringMatching(/^At most 123 bytes of UTF-8 /) })
      // A route whose every field is optional takes an empty body (read as {}): its body is not required.
      expect(doc.paths['/admin/reset'].post.requestBody.required).toBe(false)
      const emptied = await fetch(`${httpOf(sim)}/admin/reset`, { method: 'POST', headers: { 'content-type': 'application/json' } })
      expect(emptied.status).toBe(200)
      await emptied.text()
      for (const r of CONTROL_ROUTES) {
        if (!r.body) continue
        const required = doc.paths[r.path][r.method.toLowerCase()].requestBody.required
        const answer = await call(httpOf(sim), r.method as 'POST', r.path, '')
        // An empty body is refused exactly where the document says a body is required.
        expect(answer.status === 400, `${r.path}: required ${required}, empty body answered ${answer.status}`).toBe(required)
      }
    } finally {
      await sim.stop()
    }
  })

  it('every record route answers what its OpenAPI schema says, field by field: sockets, frames (undecodable and cut ones too), upgrades (refused, superseding), closes, held joins, connections', async () => {
    const sim = await startSimulator({ agents: { a: 'ka', raw: 'kr' } })
    const a = createLink({ url: sim.url, agentId: 'a', apiKey: 'ka' })
    const raws: WebSocket[] = []
    const opened = async (key: string) => {
      const ws = new WebSocket(`${sim.url}/websocket?agent_id=raw&vsn=2.0.0`, { headers: { 'x-api-key': key } })
      raws.push(ws)
      const outcome = await Promise.race([once(ws, 'open').then(() => 'open'), once(ws, 'unexpected-response').then(() => 'refused')])
      if (outcome === 'refused') ws.terminate()
      return outcome
    }
    try {
      const http = httpOf(sim)
      await a.connect()
      await a.channel('room:x').joined()
      sim.onJoin('room:held', { reply: 'hold' })
      const held = a.channel('room:held').joined().catch(() => {})
      await sim.waitFor(() => sim.heldJoins.length === 1)
      expect(await opened('wrong')).toBe('refused')
      expect(await opened('kr')).toBe('open')
      // A frame long enough to be cut on the first raw socket's record; then a newer socket of the
      // agent supersedes it (an upgrade with superseded ids, a socket with its payload and cause),
      // and a frame that cannot be decoded ends the newer one.
      raws.at(-1)!.send(JSON.stringify(['1', '1', 'room:long', 'note', { text: 'x'.repeat(5000), n: 1 }]))
      await sim.waitFor(() => sim.accepted('raw')[0]!.frames.some((f) => f.dir === 'in'))
      expect(await opened('kr')).toBe('open')
      await sim.waitFor(() => sim.accepted('raw')[0]!.state === 'closed')
      raws.at(-1)!.send('not a frame')
      await sim.waitFor(() => sim.accepted('raw')[1]!.state === 'closed')
      const schemaOf = (method: string, path: string) => (CONTROL_ROUTES.find((r) => r.method === method && r.path === path) ?? ADMIN_ROUTES.find((r) => r.method === method && r.path === path))!.response!
      const checked = async (path: string, route = path) => {
        const answer = await call(http, 'GET', path)
        expect(answer.status, path).toBe(200)
        const parsed = schemaOf('GET', route).safeParse(answer.body)
        expect(parsed.success ? null : parsed.error.issues, path).toBeNull()
        return answer.body
      }
      const { sockets } = await checked('/admin/sockets')
      expect(sockets.map((c: { agentId: string; closeCause: string | null }) => [c.agentId, c.closeCause])).toEqual([['a', null], ['raw', 'supersede'], ['raw', 'malformed']])
      expect(sockets[1].superseded).not.toBeNull()
      const frames = async (socket: { id: string }) => (await checked(`/admin/sockets/${socket.id}/frames`, '/admin/sockets/{id}/frames')).frames
      expect((await frames(sockets[1])).some((f: { length?: number }) => typeof f.length === 'number')).toBe(true)
      expect((await frames(sockets[2])).some((f: { frame: unknown }) => f.frame === null)).toBe(true)
      const { upgrades } = await checked('/admin/upgrades')
      expect(upgrades.map((u: { status: number; superseded?: string[] }) => [u.status, u.superseded?.length])).toEqual([[101, 0], [403, undefined], [101, 0], [101, 1]])
      const closes = (await checked('/admin/closes')).closes as Array<{ agentId: string; code: number; at: number }>
      expect(closes.map((c) => [c.agentId, c.code])).toEqual([['raw', 1001], ['raw', 1011]])
      // Each close is timed, on the records' clock; ?agent= filters as on the other records.
      expect(closes[0]!.at).toBeLessThanOrEqual(closes[1]!.at)
      expect(closes[1]!.at).toBeLessThanOrEqual((await call(http, 'GET', '/admin/clock')).body.now)
      expect((await checked('/admin/closes?agent=a', '/admin/closes')).closes).toEqual([])
      expect((await checked('/admin/held')).joins).toHaveLength(1)
      expect((await checked('/admin/connections')).connections.map((c: { principal: string }) => c.principal)).toEqual(['a'])
      // The document carries the same schemas: each record's fields typed and required, no others.
      const doc = (await call(http, 'GET', '/admin/openapi.json')).body
      const items = doc.paths['/admin/sockets'].get.responses['200'].content['application/json'].schema.properties.sockets.items
      expect([items.additionalProperties, items.required]).toEqual([false, Object.keys(sockets[0])])
      expect(items.properties.closeCause.anyOf).toContainEqual({ type: 'string', enum: ['scripted', 'disconnect', 'supersede', 'idle', 'restart', 'stop', 'malformed', 'protocol'] })
      expect(doc.paths['/admin/connections'].get.responses['200'].content['application/json'].schema.properties.connections.items.required).toEqual(['principal', 'socket', 'since', 'state', 'channels'])
      expect(sim.answerHeldJoin('room:held', { reply: 'ok' })).toBe(true)
      await held
    } finally {
      for (const ws of raws) ws.terminate()
      await a.disconnect()
      await sim.stop()
    }
  })

  it('a simulator listens beyond loopback only with an admin token', async () => {
    for (const host of ['127.0.0.1', '127.8.9.10', '::1', '[::1]', '0:0:0:0:0:0:0:1', '0000::1', 'localhost', 'LOCALHOST', '::ffff:127.0.0.1', '::FFFF:7F00:1']) expect(isLoopbackInterface(host), host).toBe(true)
    for (const host of ['0.0.0.0', '::', '[::]', '192.0.2.1', 'example.com', '127.0.0.1.example.com', '::ffff:192.0.2.1', 'fe80::1']) expect(isLoopbackInterface(host), host).toBe(false)
    await expect(startSimulator({ host: '0.0.0.0' })).rejects.toThrow(
      new RangeError(
        `host "0.0.0.0" is not a loopback interface: other machines could reach the simulator there (its socket endpoint takes any agent unless agents lists them, and /metrics is open to all); set adminToken to listen beyond loopback anyway (the /admin routes then require it), or use '127.0.0.1'`,
      ),
    )
    expect(() => new PlatformSimulator({ host: '::' })).toThrow(RangeError)
    // With a token the rule lets it through to listen (a documentation address no interface holds: the bind fails, not the rule).
    const bind = await startSimulator({ host: '192.0.2.1', adminToken: 'secret-token' }).then(
      (sim) => sim.stop().then(() => 'listened'),
      (error: Error) => error,
    )
    expect(bind).not.toBeInstanceOf(RangeError)
    // An IPv6 loopback, as written or bracketed as a URL writes it.
    for (const host of ['::1', '[::1]']) {
      const ipv6 = await startSimulator({ host }).catch((error: NodeJS.ErrnoException) => error)
      if (ipv6 instanceof PlatformSimulator) {
        expect(ipv6.url, host).toMatch(/^ws:\/\/\[::1\]:\d+\/socket$/)
        await ipv6.stop()
      } else expect(ipv6.code, 'a machine without IPv6 loopback cannot bind ::1').toBe('EADDRNOTAVAIL')
    }
  })

  it("agents: a map is checked at start, copied (setKeys changes the simulator's, not the caller's), and any text is an agent id, constructor and __proto__ too", async () => {
    expect(() => new PlatformSimulator({ agents: 5 as never })).toThrow(new TypeError("agents must be 'any' or a map of agent id to an API key (or a list of keys), got a number"))
    expect(() => new PlatformSimulator({ agents: ['a'] as never })).toThrow(/got an array$/)
    // The error names the agent and the type, never the value (it may hold a key).
    expect(() => new PlatformSimulator({ agents: { 'agent-1': ['key-1', 7] } as never })).toThrow(new TypeError('agents["agent-1"] must be an API key or a list of keys, got a list holding a number'))
    const given: Record<string, string> = { 'agent-1': 'key-1', constructor: 'key-c' }
    const sim = await startSimulator({ agents: given })
    try {
      sim.setKeys('agent-1', ['key-1', 'key-2'])
      expect(given).toEqual({ 'agent-1': 'key-1', constructor: 'key-c' })
      for (const [agentId, apiKey, ok] of [
        ['constructor', 'key-c', true],
        ['toString', 'anything', false],
        ['__proto__', 'anything', false],
        ['agent-1', 'key-2', true],
      ] as const) {
        const link = createLink({ url: sim.url, agentId, apiKey })
        try {
          if (ok) await expect(link.connect(), agentId).resolves.toBeUndefined()
          else await expect(link.connect(), agentId).rejects.toMatchObject({ reason: { kind: 'rejected', cause: 'unauthenticated' } })
        } finally {
          await link.disconnect()
        }
      }
    } finally {
      await sim.stop()
    }
  })

  it('serve: a host beyond loopback without --admin-token, or an empty --admin-token, is refused naming the flag; one agent given twice keeps both keys', async () => {
    const open = serve(['--host', '0.0.0.0'])
    let err = ''
    open.stderr.on('data', (c: Buffer) => (err += c.toString()))
    expect(await exited(open)).toBe(1)
    expect(err.trim()).toBe(
      `phoenix-link: --host "0.0.0.0" is not a loopback interface: other machines could reach the simulator there (its socket endpoint takes any agent unless --agent lists them, and /metrics is open to all); pass --admin-token to listen beyond loopback anyway (the /admin routes then require it), or use '127.0.0.1'`,
    )
    const empty = serve(['--admin-token', ''])
    let emptyErr = ''
    empty.stderr.on('data', (c: Buffer) => (emptyErr += c.toString()))
    expect(await exited(empty)).toBe(1)
    expect(emptyErr).toMatch(/^phoenix-link: --admin-token \(or PHOENIX_LINK_ADMIN_TOKEN\) must be a non-empty string of visible ASCII/)
    const child = serve(['--agent', 'rotating:key-1', '--agent', 'rotating:key-2', '--agent', 'constructor:key-c'])
    try {
      const { url } = await listening(child)
      for (const [agentId, apiKey] of [['rotating', 'key-1'], ['rotating', 'key-2'], ['constructor', 'key-c']] as const) {
        const link = createLink({ url, agentId, apiKey })
        try {
          await link.connect()
          expect(link.state, apiKey).toBe('connected')
        } finally {
          await link.disconnect()
        }
      }
      const wrong = createLink({ url, agentId: 'rotating', apiKey: 'key-3' })
      await expect(wrong.connect()).rejects.toMatchObject({ reason: { kind: 'rejected' } })
      await wrong.disconnect()
    } finally {
      child.kill('SIGINT')
      await exited(child)
    }
  })
})
