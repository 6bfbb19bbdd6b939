/**
 * The API key never appears in logs, errors, events or inspection events: a scripted run whose
 * server even echoes the key back, every output scanned for it.
 */
import { describe, expect, it } from 'vitest'
import type { InspectionEvent } from 'xstate'
import { createLink } from '../../src/link.js'
import { ConfigurationError } from '../../src/errors/configuration-error.js'
import type { AgentDisconnectedError } from '../../src/errors/agent-disconnected.js'
import { next, settle, useWorld } from '../support/wire.js'
import { linkMetrics } from '../../src/node/metrics.js'
import { parseTrace, traceLink, type TraceRecord } from '../../src/node/visualize/index.js'
import { chartsData } from '../../src/node/model/visual.js'
import { get } from 'node:http'
import { inspect } from 'node:util'

/** GET `url` on loopback and resolve with the body. */
function fetchText(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    get(url, (res) => {
      let body = ''
      res.on('data', (chunk: Buffer) => (body += chunk.toString()))
      res.on('end', () => resolve(body))
    }).on('error', reject)
  })
}

const world = useWorld()
const KEY = 'sk-live-7Hq2-SECRET-do-not-log'

function text(value: unknown): string {
  const seen = new WeakSet<object>()
  return JSON.stringify(value, (_k, v: unknown) => {
    if (typeof v === 'function') return `fn ${(v as { name?: string }).name ?? ''}`
    if (v && typeof v === 'object') {
      if (seen.has(v)) return '[cycle]'
      seen.add(v)
      if (v instanceof Error) return { name: v.name, message: v.message, stack: v.stack, reason: (v as { reason?: unknown }).reason }
    }
    return v
  })
}

/** Every place a cut-off piece of KEY could hide: its first 8 characters, anywhere not followed by the rest. */
function cutPieces(out: string): string[] {
  const pieces: string[] = []
  for (let i = out.indexOf(KEY.slice(0, 8)); i >= 0; i = out.indexOf(KEY.slice(0, 8), i + 1)) {
    if (!out.startsWith(KEY, i)) pieces.push(out.slice(i, i + KEY.length))
  }
  return pieces
}

describe('secrets: redaction is for output, never for values handed to host code', () => {
  for (const apiKeyIn of ['header', 'param'] as const) {
    it(`the key (sent as ${apiKeyIn}) is in no log line, error message or inspection event of a scripted run; what the server echoes reaches events unchanged`, async () => {
      const sim = await world().sim({ agents: { 'agent-1': KEY } })
      const inspected: string[] = []
      const link = world().link(sim, {
        apiKey: KEY,
        apiKeyIn,
        inspect: (e: InspectionEvent) => inspected.push(text({ type: e.type, event: (e as { event?: unknown }).event, snapshot: (e as { snapshot?: { value?: unknown; context?: unknown } }).snapshot?.context })),
      })
      await link.connect()
      sim.close({ agent: 'agent-1' }, 1000, `bye ${KEY}`)
      await new Promise<void>((resolve) => link.once('reconnected', () => resolve()))
      // The server echoes the key in a refusal body.
      sim.refuseUpgrades({ status: 403, body: { text: JSON.stringify({ error: { code: 'bad_key', message: `key ${KEY} is not valid` } }) } })
      sim.close({ agent: 'agent-1' }, 1000)
      const error = await settle(link.runForever())
      expect(error.ok).toBe(false)
      await link.disconnect()
      const captured = world().captured.get(link)!
      // Output: redacted.
      const thrown = (error as { error: Error }).error
      for (const out of [text(captured.lines), thrown.message, thrown.stack ?? '', inspected.join('\n')]) expect(out).not.toContain(KEY)
      expect(text(captured.lines)).toContain('[redacted]')
      expect(inspected.join('\n')).toContain('[redacted]')
      // Data: what the server sent, as it sent it; nothing the link wrote itself holds the key.
      expect(link.lastDisconnectReason).toMatchObject({ kind: 'rejected', message: `key ${KEY} is not valid` })
      const closed = captured.events.find((e) => e.type === 'disconnected' && e.reason.kind === 'closed')
      expect(closed).toMatchObject({ reason: { closeReason: `bye ${KEY}` } })
      const withoutEchoes = text(captured.events).split(`bye ${KEY}`).join('').split(`key ${KEY} is not valid`).join('')
      expect(withoutEchoes).not.toContain(KEY)
      expect(sim.upgrades.map((u) => u.status)).toEqual([101, 101, 403])
    })
  }

  it("a channel refused with the key in the server's reason: the CHANNEL_CLOSED message is redacted, its reason keeps the server's text", async () => {
    const sim = await world().sim({ agents: { 'agent-1': KEY } })
    sim.onJoin('room:k', { reply: 'error', response: { reason: `key ${KEY} may not join` } })
    const link = world().link(sim, { apiKey: KEY })
    await link.connect()
    const room = link.channel('room:k')
    const outcome = await settle(room.joined())
    expect(outcome.ok).toBe(false)
    const error = (outcome as { error: { message: string; stack?: string; reason: { detail: string } } }).error
    expect(error.message).toContain('CHANNEL_CLOSED (the channel was dropped: ')
    expect(error.message).toContain('[redacted]')
    for (const out of [error.message, error.stack ?? '']) expect(out).not.toContain(KEY)
    expect(error.reason.detail).toContain(`key ${KEY} may not join`)
    const pushed = await settle(room.push('x', {}))
    expect((pushed as { error: Error }).error.message).not.toContain(KEY)
  })

  it('a key echoed across the cut of kept server text (refusal body, join error, bad frame) is kept whole or not at all, and redacted whole in output', async () => {
    const sim = await world().sim({ agents: { 'agent-1': KEY } })
    const link = world().link(sim, { apiKey: KEY })
    await link.connect()
    // No handler for an event whose name carries the key: reported as ignored, its name as sent.
    const room = link.channel('room:1')
    await room.push('hello', {})
    const unhandled = new Promise<void>((resolve) => link.once('ignored', () => resolve()))
    sim.push({ agent: 'agent-1' }, 'room:1', `echo:${KEY}`, {})
    await unhandled
    // A bad frame whose first 80 characters end inside the key.
    const badFrame = new Promise<void>((resolve) => link.once('ignored', () => resolve()))
    sim.sendRaw({ agent: 'agent-1' }, `${'z'.repeat(80 - KEY.length + 1)} ${KEY} not json`)
    await badFrame
    // A join refused with a response whose JSON, kept to 200 characters, ends inside the key.
    sim.onJoin('room:echo', { reply: 'error', response: { reason: `${'w'.repeat(200 - '{"reason":"'.length - KEY.length + 4)} ${KEY}` } })
    const echo = link.channel('room:echo')
    await new Promise<void>((resolve) => echo.onStatus((status) => status === 'dropped' && resolve()))
    // A refusal body whose first 200 characters end inside the key.
    sim.refuseUpgrades({ status: 403, body: { text: `${'y'.repeat(200 - KEY.length)} ${KEY}` } })
    sim.close({ agent: 'agent-1' }, 1000)
    const ended = await settle(link.runForever())
    const captured = world().captured.get(link)!
    const thrown = (ended as { error: Error }).error
    // No piece of the key, cut short, anywhere: in data or in output.
    for (const out of [text(captured.lines), text(captured.events), thrown.message, text(link.lastDisconnectReason)]) expect(cutPieces(out)).toEqual([])
    // Output holds no whole copy either.
    for (const out of [text(captured.lines), thrown.message]) expect(out).not.toContain(KEY)
    expect(link.lastDisconnectReason).toMatchObject({ kind: 'rejected', status: 403, message: `${'y'.repeat(200 - KEY.length)} ` })
  })

  it('a refusal body cut by the body limit inside the key keeps no piece of it; nor does a binary frame quoted in hex', async () => {
    const sim = await world().sim({ agents: { 'agent-1': KEY } })
    const link = world().link(sim, { apiKey: KEY, policy: { transport: { refusalBodyLimitBytes: 60 } } })
    await link.connect()
    // A binary frame of an unknown kind whose bytes hold the key: the ignored report quotes its start in hex.
    const hexed = new Promise<string>((resolve) => link.once('ignored', (e) => resolve(e.detail)))
    sim.sendRaw({ agent: 'agent-1' }, new Uint8Array([0x7f, ...new TextEncoder().encode(KEY)]))
    const detail = await hexed
    const hex = [...new TextEncoder().encode(KEY)].map((b) => b.toString(16).padStart(2, '0')).join('')
    // The event hands the host the frame as it came; the log line written about it is redacted.
    expect(detail).toContain(hex.slice(0, 16))
    // The body's first 60 bytes end inside the key.
    sim.refuseUpgrades({ status: 403, body: { text: `denied ${'y'.repeat(60 - 'denied '.length - 12)} ${KEY} and more` } })
    sim.close({ agent: 'agent-1' }, 1000)
    const ended = await settle(link.runForever())
    const thrown = (ended as { error: Error }).error
    const captured = world().captured.get(link)!
    for (const out of [text(captured.lines), thrown.message, text(link.lastDisconnectReason)]) expect(cutPieces(out)).toEqual([])
    expect(text(captured.lines)).not.toContain(hex.slice(0, 16))
    expect(link.lastDisconnectReason).toMatchObject({ kind: 'rejected', status: 403, message: `denied ${'y'.repeat(60 - 'denied '.length - 12)} ` })
  })

  it('an inspector that reads the chart an event names (as @statelyai/inspect does) gets its snapshots redacted too; the host keeps the data', async () => {
    const sim = await world().sim({ agents: { 'agent-1': KEY } })
    const read: string[] = []
    const link = world().link(sim, {
      apiKey: KEY,
      inspect: (event) => {
        const ref = event.actorRef as { id: string; getSnapshot(): unknown; _parent: { sessionId: string } | null; sessionId: string; logic: { config: { id: string } } }
        read.push(JSON.stringify([ref.sessionId, ref._parent?.sessionId ?? null, ref.logic.config.id, ref.id, ref.getSnapshot()]))
      },
    })
    const handled = new Promise<string>((resolve) => link.onControl((signal) => resolve(signal.correlationId!)))
    await link.connect()
    // A control signal whose correlation id echoes the key: the control chart remembers it.
    sim.control('agent-1', { mode: 'stop', correlation_id: `corr-${KEY}` })
    expect(await handled).toBe(`corr-${KEY}`)
    // A channel whose topic holds the key: the chart's id an inspector names it by is redacted.
    const room = link.channel(`room:${KEY}`)
    await room.joined()
    const all = read.join('\n')
    expect(all).toContain('"control"')
    expect(all).toContain('"channel:room:[redacted]"')
    expect(all).toContain('[redacted]')
    expect(all).not.toContain(KEY.slice(0, 8))
  })

  it('a rotated key is used on the next attempt, and every key the link used is redacted from its output', async () => {
    const keys = ['sk-live-first-0001', 'sk-live-second-0002']
    const sim = await world().sim({ agents: { 'agent-1': keys[0]! } })
    let current = keys[0]!
    const seen: Array<{ generation: number; aborted: boolean }> = []
    const link = world().link(sim, {
      apiKey: async ({ generation, signal }) => {
        seen.push({ generation, aborted: signal.aborted })
        return current
      },
    })
    await link.connect()
    // Rotation: the platform accepts only the new key from now on.
    sim.setKeys('agent-1', keys[1]!)
    current = keys[1]!
    const back = next(link, 'reconnected')
    sim.close({ agent: 'agent-1' }, 1000, `old ${keys[0]}`)
    await back
    expect(seen.map((s) => s.generation)).toEqual([1, 2])
    expect(seen.every((s) => !s.aborted)).toBe(true)
    expect(sim.upgrades.map((u) => u.status)).toEqual([101, 101])
    // Both keys are known now: an echo of either is redacted.
    const again = next(link, 'reconnected')
    sim.close({ agent: 'agent-1' }, 1000, `old ${keys[0]} new ${keys[1]}`)
    await again
    await link.disconnect()
    const lines = text(world().captured.get(link)!.lines)
    for (const key of keys) expect(lines).not.toContain(key)
  })

  it('the key is in no metrics label or value, simulator log line, admin answer, event feed or simulator record', async () => {
    const simLines: string[] = []
    const sim = await world().sim({
      agents: { 'agent-1': KEY },
      logger: { info: (...line) => simLines.push(text(line)), warn: (...line) => simLines.push(text(line)) },
    })
    for (const apiKeyIn of ['header', 'param'] as const) {
      const link = world().link(sim, { apiKey: KEY, apiKeyIn })
      const metrics = linkMetrics(link)
      await link.connect()
      sim.close({ agent: 'agent-1' }, 1011, 'oops')
      await new Promise<void>((resolve) => link.once('reconnected', () => resolve()))
      sim.refuseUpgrades({ status: 403, body: { text: JSON.stringify({ error: { code: 'bad_key', message: `key ${KEY}` } }) } })
      sim.close({ agent: 'agent-1' }, 1000)
      await settle(link.runForever())
      const linkText = await metrics.registry.metrics()
      metrics.stop()
      await link.disconnect()
      expect(linkText).toContain('link_reconnects_total')
      expect(linkText).not.toContain(KEY)
    }
    const serverText = await sim.metrics.registry.metrics()
    const admin = await fetchText(`${sim.url.replace('ws://', 'http://').replace(/\/socket$/, '')}/admin/connections`)
    const records = text({
      connections: sim.connections.map((c) => ({ params: c.params, frames: c.frames, problems: c.problems, closeSeen: c.closeSeen, closeSent: c.closeSent })),
      upgrades: sim.upgrades,
      presence: sim.presence,
      aborts: sim.aborts,
    })
    for (const out of [serverText, admin, records, simLines.join('\n')]) expect(out).not.toContain(KEY)
    expect(serverText).toContain('principal_disconnects_total')
    expect(records).toContain('agent-1')
  })

  for (const key of ['open', 'sock', 'e', 'k']) {
    it(`a short key (${JSON.stringify(key)}) that occurs inside event names still connects and is still refused typed`, async () => {
      const sim = await world().sim({ agents: { 'agent-1': key } })
      const link = world().link(sim, { apiKey: key })
      // Its trace keeps the charts' own state names and event names whole (they are no output of the key), so it replays.
      const records: TraceRecord[] = []
      const stopTrace = traceLink(link, `label-${key}`, (record) => void records.push(record))
      const room = link.channel(`room:${key}`)
      await link.connect()
      await room.joined()
      expect(link.state).toBe('connected')
      await link.disconnect()
      stopTrace()
      expect(parseTrace(records.map((r) => JSON.stringify(r)).join('\n'), chartsData()).at(-1)).toMatchObject({ state: 'stopped' })
      // Text the host chose is output, redacted: the label, the topic as a channel's name.
      expect(records[0]!.link).toBe(link.redactOutput(`label-${key}`))
      expect(records[0]!.link).toMatch(/\[redacted\]$/)
      expect(Object.keys(records.at(-1)!.charts.channels)).toEqual([link.redactOutput(`room:${key}`)])
      const wrong = world().link(sim, { apiKey: `${key}-wrong` })
      const r = await settle(wrong.connect())
      expect((r as { error: { reason: { kind: string; status: number } } }).error.reason).toMatchObject({ kind: 'rejected', status: 403 })
    })
  }

  it("logging the simulator (what a chained control returns) shows where it listens, never an agent's key or the admin token", async () => {
    const sim = await world().sim({ agents: { 'agent-1': KEY }, adminToken: 'admin-token-sesame' })
    const link = world().link(sim, { apiKey: KEY })
    await link.connect()
    const shown = inspect(sim.refuseUpgrades({ status: 503 }), { depth: 8 })
    expect(shown).toBe(`PlatformSimulator { url: '${sim.url}', flavor: '${sim.flavor.name}', running, live sockets: 1, upgrades seen: 1 }`)
    expect(inspect(sim.connections, { depth: 8 })).not.toContain(KEY)
  })

  it("the AgentDisconnectedError of connect(), runForever() and whenState() is redacted in its message; its reason keeps the server's text", async () => {
    const sim = await world().sim({ agents: { 'agent-1': KEY } })
    sim.refuseUpgrades({ status: 403, body: { text: JSON.stringify({ error: { code: 'bad_key', message: `key ${KEY} revoked` } }) } })
    const link = world().link(sim, { apiKey: KEY })
    const waits = [link.whenState('connected'), link.connect(), link.runForever()]
    const errors = await Promise.all(waits.map((wait) => wait.then(() => null, (error: unknown) => error as AgentDisconnectedError)))
    expect(errors.map((e) => e?.code)).toEqual(['AGENT_DISCONNECTED', 'AGENT_DISCONNECTED', 'AGENT_DISCONNECTED'])
    for (const error of errors) {
      expect(error!.message).toContain('[redacted]')
      expect(error!.message).not.toContain(KEY)
      expect(JSON.stringify(error!.reason)).toContain(KEY)
    }
  })

  it('a configuration error never echoes the key', () => {
    let error: unknown
    try {
      createLink({ url: `not a url ${KEY}`, agentId: 'a', apiKey: KEY })
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(ConfigurationError)
    expect(text(error)).not.toContain(KEY)
  })

  it('plain ws:// to a host that is not loopback is refused unless allowed explicitly', () => {
    expect(() => createLink({ url: 'ws://platform.example/socket', agentId: 'a', apiKey: 'k' })).toThrow(/not loopback/)
    // Loopback as the URL parser writes it: 127.0.0.0/8, [::1], and a 127.0.0.0/8 address IPv4-mapped (hex).
    for (const host of ['localhost', '127.0.0.1', '127.9.8.7', '[::1]', '[::ffff:127.0.0.1]', '[::ffff:7f01:203]']) {
      expect(() => createLink({ url: `ws://${host}:4000/socket`, agentId: 'a', apiKey: 'k' }), host).not.toThrow()
    }
    for (const host of ['[::ffff:10.0.0.1]', '[::ffff:8000:1]', '[::2]', '128.0.0.1', 'localhost.example']) {
      expect(() => createLink({ url: `ws://${host}:4000/socket`, agentId: 'a', apiKey: 'k' }), host).toThrow(/which is not loopback/)
    }
    expect(() => createLink({ url: 'ws://platform.example/socket', agentId: 'a', apiKey: 'k', allowInsecureTransport: true })).not.toThrow()
    expect(() => createLink({ url: 'wss://platform.example/socket', agentId: 'a', apiKey: 'k' })).not.toThrow()
    expect(() => createLink({ url: 'http://platform.example/socket', agentId: 'a', apiKey: 'k' })).toThrow(/ws:\/\/ or wss:\/\//)
    expect(() => createLink({ url: 'wss://x/socket', agentId: '', apiKey: 'k' })).toThrow(/agentId/)
    expect(() => createLink({ url: 'wss://x/socket', agentId: 'a', apiKey: 'k', policy: { reconnect: { factor: 0 } } })).toThrow(/factor/)
    expect(() => createLink({ url: 'wss://x/socket', agentId: 'a', apiKey: 'k', policy: { reconnect: { jitter: 1 } as never } })).toThrow(/not a policy field/)
    expect(() => createLink({ url: 'wss://x/socket', agentId: 'a', apiKey: 'k', params: 5 as never })).toThrow(/params/)
    expect(() => createLink({ url: 'wss://x/socket', agentId: 'a', apiKey: 'k', params: { n: 1 } as never })).toThrow(/params/)
    expect(() => createLink({ url: 'wss://x/socket', agentId: 'a', apiKey: 'k', onControl: 'x' as never })).toThrow(/onControl must be a function/)
    expect(() => createLink({ url: 'wss://x/socket', agentId: 'a', apiKey: 'k', reconnect: true } as never)).toThrow(/unknown option "reconnect"/)
    expect(() => createLink({ url: 'wss://x/socket', agentId: 'a', apiKey: 7 } as never)).toThrow(/apiKey must be a string/)
    expect(() => createLink({ url: 'wss://x/socket', agentId: 'a', apiKey: 'k', apiKeyIn: 'query' } as never)).toThrow(/apiKeyIn/)
  })
})
