/**
 * Defects found by an adversarial review, each now guarded: deep payloads, prototype-named
 * topics, throwing host callbacks, reentrant calls, a chart crash, unencodable pushes, and the
 * simulator's own robustness.
 */
import { request } from 'node:http'
import { inspect } from 'node:util'
import { describe, expect, it } from 'vitest'
import { waitFor } from 'xstate'
import { CONTROL_EVENT, SUPERSEDE_EVENT, controlTopic } from '../../src/protocol.js'
import { next, settle, untilState, useWorld } from '../support/wire.js'

const world = useWorld()

function deepArray(depth: number): string {
  return `${'['.repeat(depth)}"SECRET-KEY"${']'.repeat(depth)}`
}

describe('hostile payloads', () => {
  it('a supersede nested 20,000 levels deep is still terminal and crashes nothing', async () => {
    const sim = await world().sim({ agents: { 'agent-1': 'SECRET-KEY' } })
    const link = world().link(sim, { apiKey: 'SECRET-KEY' })
    await link.connect()
    const conn = sim.live('agent-1')[0]!
    const ref = conn.channels.get(controlTopic('agent-1'))!.joinRef
    const ended = untilState(link, 'terminated')
    conn.sendRaw(`[${JSON.stringify(ref)},null,${JSON.stringify(controlTopic('agent-1'))},"${SUPERSEDE_EVENT}",{"reason":"x","extra":${deepArray(20_000)}}]`)
    await ended
    expect(link.lastDisconnectReason?.kind).toBe('superseded')
  })

  it('an agent.control signal with a 20,000-level extra field is delivered', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const conn = sim.live('agent-1')[0]!
    const ref = conn.channels.get(controlTopic('agent-1'))!.joinRef
    const control = next(link, 'control')
    conn.sendRaw(`[${JSON.stringify(ref)},null,${JSON.stringify(controlTopic('agent-1'))},"${CONTROL_EVENT}",{"mode":"stop","scope":"agent","agent_id":"agent-1","correlation_id":"deep","extra":${deepArray(20_000)}}]`)
    expect((await control).signal.correlationId).toBe('deep')
  })

  it('a supersede with a null payload is still terminal', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const conn = sim.live('agent-1')[0]!
    const ended = untilState(link, 'terminated')
    conn.sendRaw(JSON.stringify([conn.channels.get(controlTopic('agent-1'))!.joinRef, null, controlTopic('agent-1'), SUPERSEDE_EVENT, null]))
    await ended
    expect(link.lastDisconnectReason).toMatchObject({ kind: 'superseded', cause: 'unknown' })
  })
})

describe('host input', () => {
  for (const topic of ['toString', '__proto__', 'constructor', 'hasOwnProperty']) {
    it(`an app channel named ${JSON.stringify(topic)} joins and leaves like any other`, async () => {
      const sim = await world().sim()
      const link = world().link(sim)
      await link.connect()
      const room = link.channel(topic)
      await next(link, 'channel', { filter: (e) => e.topic === topic && e.status === 'joined' })
      await room.leave()
      expect(room.status).toBe('left')
      expect(link.state).toBe('connected')
    })
  }

  it('a throwing inspect observer is logged and changes nothing', async () => {
    const sim = await world().sim()
    let calls = 0
    const link = world().link(sim, {
      inspect: () => {
        calls++
        throw new Error('observer bug')
      },
    })
    await link.connect()
    sim.close({ agent: 'agent-1' }, 1000)
    await next(link, 'reconnected')
    expect(calls).toBeGreaterThan(0)
    expect(world().captured.get(link)!.lines.some((l) => l.level === 'error' && l.message.includes('inspect observer threw'))).toBe(true)
  })

  it('a throwing channel params function fails that join attempt typed, and it is retried', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    let fail = true
    const room = link.channel('room:1', () => {
      if (fail) throw new Error('token service down')
      return { token: 't' }
    })
    const errored = await next(link, 'channel', { filter: (e) => e.status === 'errored' })
    expect(errored.reason).toMatchObject({ kind: 'other', detail: expect.stringContaining('token service down') })
    fail = false
    await next(link, 'channel', { filter: (e) => e.status === 'joined' })
    expect(room.status).toBe('joined')
  })

  it('a push that cannot be encoded rejects PUSH_INVALID at once, with the cause', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const room = link.channel('room:1')
    await next(link, 'channel', { filter: (e) => e.status === 'joined' })
    await expect(room.push('x', { n: 10n } as never)).rejects.toMatchObject({ code: 'PUSH_INVALID', cause: expect.any(TypeError) })
    await expect(room.push('e'.repeat(300), new Uint8Array([1]).buffer)).rejects.toMatchObject({ code: 'PUSH_INVALID' })
    expect(await room.push('ok', {})).toEqual({})
  })

  it('the API key is not in util.inspect(link)', async () => {
    const sim = await world().sim({ agents: { 'agent-1': 'sk-VISIBLE?' } })
    const link = world().link(sim, { apiKey: 'sk-VISIBLE?' })
    await link.connect()
    expect(inspect(link, { depth: 8 })).not.toContain('sk-VISIBLE?')
  })
})

describe('reentrant and concurrent calls', () => {
  it('disconnect() immediately followed by connect(): both settle', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const stopped = link.disconnect()
    await link.connect()
    await stopped
    expect(link.state).toBe('connected')
    expect(sim.live('agent-1')).toHaveLength(1)
  })

  it('connect() called from a state listener on terminated starts the new session and resolves', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const again = new Promise<unknown>((resolve) => {
      const off = link.on('state', (e) => {
        if (e.state !== 'terminated') return
        off()
        resolve(settle(link.connect()))
      })
    })
    sim.supersede('agent-1')
    expect(await again).toMatchObject({ ok: true })
    expect(link.state).toBe('connected')
  })

  it('after disconnect(), signals still waiting behind a slow handler are dropped and reported; the one in progress finishes', async () => {
    const sim = await world().sim()
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const handled: string[] = []
    const link = world().link(sim, {
      onControl: async (s) => {
        if (s.correlationId === 'a') await gate
        handled.push(s.correlationId!)
      },
    })
    await link.connect()
    const first = next(link, 'control')
    sim.control('agent-1', { mode: 'stop', correlation_id: 'a' })
    expect((await first).epoch).toBe(1)
    const dropped: string[] = []
    link.on('ignored', (e) => e.detail.includes('dropped') && dropped.push(e.detail))
    const queued = waitFor(link.actor, (snapshot) => snapshot.context.signalSeq >= 3, { timeout: 4000 })
    sim.control('agent-1', { mode: 'stop', correlation_id: 'b' })
    sim.control('agent-1', { mode: 'stop', correlation_id: 'c' })
    await queued
    await link.disconnect()
    expect(dropped).toHaveLength(2)
    release()
    await link.connect()
    expect(handled).toEqual(['a'])
  })
})

describe('a chart crash', () => {
  it('ends every socket, rejects waiters INTERNAL, reads terminated, and disconnect() still resolves', async () => {
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    const run = settle(link.runForever())
    ;(link as unknown as { onCrash(e: unknown): void }).onCrash(new Error('simulated bug'))
    expect(((await run) as { error: { code: string } }).error.code).toBe('INTERNAL')
    expect(link.state).toBe('terminated')
    expect(link.lastDisconnectReason).toMatchObject({ kind: 'other', detail: expect.stringContaining('simulated bug') })
    await link.disconnect()
    await sim.waitFor(() => sim.live('agent-1').length === 0)
  })
})

describe('the simulator under bad requests', () => {
  for (const path of ['//%', '/socket/websocket?agent_id=%zz']) {
    it(`answers an unparsable upgrade (${path}) and keeps serving`, async () => {
      const sim = await world().sim()
      const status = await new Promise<number>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port: sim.port, path, headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' } })
        req.on('response', (res) => {
          res.resume()
          res.on('end', () => resolve(res.statusCode ?? 0))
        })
        req.on('error', reject)
        req.end()
      })
      expect(status).toBeGreaterThanOrEqual(400)
      const link = world().link(sim)
      await link.connect()
      expect(link.state).toBe('connected')
    })
  }
})
