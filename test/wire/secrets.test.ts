/**
 * The API key never appears in logs, errors, events or inspection events: a scripted run whose
 * server even echoes the key back, every output scanned for it.
 */
import { describe, expect, it } from 'vitest'
import type { InspectionEvent } from 'xstate'
import { createLink } from '../../src/link.js'
import { ConfigurationError } from '../../src/errors/configuration-error.js'
import { settle, useWorld } from '../support/wire.js'
import { linkMetrics } from '../../src/metrics.js'
import { get } from 'node:http'

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

describe('secrets', () => {
  for (const apiKeyIn of ['header', 'param'] as const) {
    it(`the key (sent as ${apiKeyIn}) is in no log line, event, error or inspection event of a scripted run`, async () => {
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
      // The server echoes the key in a refusal body and in a supersede payload.
      sim.refuseUpgrades({ status: 403, body: { text: JSON.stringify({ error: { code: 'bad_key', message: `key ${KEY} is not valid` } }) } })
      sim.close({ agent: 'agent-1' }, 1000)
      const error = await settle(link.runForever())
      expect(error.ok).toBe(false)
      await link.disconnect()
      const captured = world().captured.get(link)!
      const outputs = [text(captured.lines), text(captured.events), text((error as { error: unknown }).error), inspected.join('\n'), text(link.lastDisconnectReason)]
      for (const out of outputs) expect(out).not.toContain(KEY)
      expect(text(captured.events)).toContain('[redacted]')
      expect(sim.upgrades.map((u) => u.status)).toEqual([101, 101, 403])
    })
  }

  it('a key echoed across the cut of kept server text (refusal body, join error, bad frame, event name) is redacted whole', async () => {
    const sim = await world().sim({ agents: { 'agent-1': KEY } })
    const link = world().link(sim, { apiKey: KEY })
    await link.connect()
    // No handler for an event whose name carries the key: reported as ignored, redacted.
    const room = link.channel('room:1')
    await room.push('hello', {})
    const unhandled = new Promise<void>((resolve) => link.once('ignored', () => resolve()))
    sim.push({ agent: 'agent-1' }, 'room:1', `echo:${KEY}`, {})
    await unhandled
    // A bad frame whose first 80 characters end inside the key.
    const badFrame = new Promise<void>((resolve) => link.once('ignored', () => resolve()))
    sim.sendRaw({ agent: 'agent-1' }, `${'z'.repeat(80 - KEY.length + 1)}${KEY} not json`)
    await badFrame
    // A join refused with a response whose JSON, kept to 200 characters, ends inside the key.
    sim.onJoin('room:echo', { reply: 'error', response: { reason: `${'w'.repeat(200 - '{"reason":"'.length - KEY.length + 4)}${KEY}` } })
    const echo = link.channel('room:echo')
    await new Promise<void>((resolve) => echo.onStatus((status) => status === 'dropped' && resolve()))
    // A refusal body whose first 200 characters end inside the key.
    sim.refuseUpgrades({ status: 403, body: { text: `${'y'.repeat(200 - KEY.length + 1)}${KEY}` } })
    sim.close({ agent: 'agent-1' }, 1000)
    const ended = await settle(link.runForever())
    const captured = world().captured.get(link)!
    const cut = KEY.slice(0, 8)
    const outputs = [text(captured.lines), text(captured.events), text((ended as { error: unknown }).error), text(link.lastDisconnectReason)]
    for (const out of outputs) expect(out).not.toContain(cut)
    expect(text(captured.events).match(/\[redacted\]/g)?.length).toBeGreaterThanOrEqual(4)
    expect(link.lastDisconnectReason).toMatchObject({ kind: 'rejected', status: 403 })
  })

  it('the key is in no metrics label or value, simulator log line, admin answer, event feed or simulator record', async () => {
    const simLines: string[] = []
    const sim = await world().sim({
      agents: { 'agent-1': KEY },
      logger: { info: (m, f) => simLines.push(text({ m, f })), warn: (m, f) => simLines.push(text({ m, f })) },
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
      await link.connect()
      expect(link.state).toBe('connected')
      await link.disconnect()
      const wrong = world().link(sim, { apiKey: `${key}-wrong` })
      const r = await settle(wrong.connect())
      expect((r as { error: { reason: { kind: string; status: number } } }).error.reason).toMatchObject({ kind: 'rejected', status: 403 })
    })
  }

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
