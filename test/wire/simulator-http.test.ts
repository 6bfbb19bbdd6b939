/**
 * The simulator's HTTP side of refused upgrades and drains, where it models what Bandit and Cowboy
 * do with the TCP connection: nothing it keeps open outlives stop(), a kept-alive connection that
 * carries a later upgrade is drained like any socket, and a drain ends a socket with no channel
 * the way the flavor's server does (docs/field-notes.md "Real Phoenix").
 */
import { Agent } from 'node:http'
import { connect } from 'node:net'
import WebSocket from 'ws'
import { describe, expect, it } from 'vitest'
import { next, useWorld } from '../support/wire.js'
import { rawUpgrade } from '../support/raw-http.js'

const world = useWorld()

const UPGRADE = (port: number, query: string) =>
  `GET /socket/websocket?${query} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`

describe('the simulator keeps nothing open that stop() does not end', () => {
  it('a refusal with Connection: close to a client that never ends its side (half-open): stop() still ends it at once', async () => {
    const sim = await world().sim({ flavor: 'cowboy' })
    sim.refuseUpgrades({ status: 403, connection: 'close' })
    const socket = connect({ port: sim.port, host: '127.0.0.1', allowHalfOpen: true })
    socket.on('error', () => {})
    const answered = new Promise<string>((resolve) => socket.once('data', (d: Buffer) => resolve(d.toString('latin1'))))
    const ended = new Promise<void>((resolve) => socket.once('end', () => resolve()))
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
    socket.write(UPGRADE(sim.port, 'agent_id=agent-1&api_key=key-1&vsn=2.0.0'))
    expect(await answered).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n[\s\S]*connection: close/)
    const started = performance.now()
    await sim.stop()
    expect(performance.now() - started).toBeLessThan(1_000)
    await ended // the server's side is gone; this client keeps its own half open until it ends it
    socket.destroy()
    await closed
  })

  it('a connection refused, then upgraded on the same TCP socket, is drained like any socket: 1012 with a channel joined', async () => {
    const sim = await world().sim({ flavor: 'bandit' })
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    try {
      const ports: number[] = []
      const bad = new WebSocket(`${sim.url}/websocket?agent_id=agent-1&api_key=wrong&vsn=2.0.0`, { agent })
      await new Promise<void>((resolve) =>
        bad.once('unexpected-response', (req, res) => {
          ports.push(req.socket!.localPort!)
          res.resume()
          res.once('end', () => resolve())
        }),
      )
      const ws = new WebSocket(`${sim.url}/websocket?agent_id=agent-1&api_key=key-1&vsn=2.0.0`, { agent })
      ws.once('upgrade', (res) => ports.push(res.socket.localPort!))
      await new Promise((resolve, reject) => {
        ws.once('open', resolve)
        ws.once('error', reject)
      })
      expect(ports[0]).toBe(ports[1]) // the same TCP connection, refused then upgraded
      ws.send(JSON.stringify(['1', '1', 'room:x', 'phx_join', {}]))
      await new Promise((resolve) => ws.once('message', resolve))
      const close = new Promise<number>((resolve) => ws.once('close', (code: number) => resolve(code)))
      // (The refused client is not ended: its TCP connection now carries the upgraded socket.)
      await sim.stop()
      expect(await close).toBe(1012)
    } finally {
      agent.destroy()
    }
  })
})

describe('a drain ends a socket that joined no channel the way the flavor\'s server does', () => {
  it('Bandit: 1000 for a socket with no channel, 1012 for one with a channel', async () => {
    const sim = await world().sim({ flavor: 'bandit' })
    const bare = new WebSocket(`${sim.url}/websocket?agent_id=agent-1&api_key=key-1&vsn=2.0.0`)
    const joined = new WebSocket(`${sim.url}/websocket?agent_id=agent-2&api_key=key-2&vsn=2.0.0`)
    await Promise.all([bare, joined].map((w) => new Promise((resolve) => w.once('open', resolve))))
    joined.send(JSON.stringify(['1', '1', 'room:x', 'phx_join', {}]))
    await new Promise((resolve) => joined.once('message', resolve))
    const codes = Promise.all([bare, joined].map((w) => new Promise<number>((resolve) => w.once('close', (code: number) => resolve(code)))))
    sim.restart()
    expect(await codes).toEqual([1000, 1012])
  })

  it('Cowboy: stop() cuts a socket with no channel (no close frame), and closes one with a channel 1012', async () => {
    const sim = await world().sim({ flavor: 'cowboy' })
    const bare = new WebSocket(`${sim.url}/websocket?agent_id=agent-1&api_key=key-1&vsn=2.0.0`)
    const joined = new WebSocket(`${sim.url}/websocket?agent_id=agent-2&api_key=key-2&vsn=2.0.0`)
    await Promise.all([bare, joined].map((w) => new Promise((resolve) => w.once('open', resolve))))
    joined.send(JSON.stringify(['1', '1', 'room:x', 'phx_join', {}]))
    await new Promise((resolve) => joined.once('message', resolve))
    bare.on('error', () => {})
    const codes = Promise.all([bare, joined].map((w) => new Promise<number>((resolve) => w.once('close', (code: number) => resolve(code)))))
    await sim.stop()
    expect(await codes).toEqual([1006, 1012])
  })
})

describe('simulator controls and refusals, exactly', () => {
  it('an upgrade to a path with no socket is refused 404 with a not_found error body naming the path', async () => {
    const sim = await world().sim()
    const refusal = await rawUpgrade(sim.port, { agent_id: 'agent-1', api_key: 'key-1', vsn: '2.0.0' }, { path: '/elsewhere/websocket' })
    expect(refusal.statusLine).toMatch(/^HTTP\/1\.1 404/)
    expect(JSON.parse(refusal.body)).toEqual({ error: { code: 'not_found', message: 'no socket at /elsewhere/websocket' } })
  })

  it('a control aimed at one socket by id reaches that socket alone', async () => {
    const sim = await world().sim({ agents: { a: 'key-a', b: 'key-b' } })
    const first = world().link(sim, { agentId: 'a', apiKey: 'key-a' })
    const second = world().link(sim, { agentId: 'b', apiKey: 'key-b' })
    await Promise.all([first.connect(), second.connect()])
    const [socketA] = sim.live('a')
    const lost = next(first, 'disconnected')
    sim.close({ socket: socketA!.id }, 1000)
    await lost
    expect(sim.accepted('b')).toHaveLength(1)
    expect(sim.accepted('b')[0]!.state).toBe('open')
    expect(second.state).toBe('connected')
  })

  it('setKeys keeps a copy of the keys it is given: changing the array afterwards changes nothing', async () => {
    const sim = await world().sim({ agents: { a: 'key-a' } })
    const keys = ['key-1']
    sim.setKeys('a', keys)
    keys.push('key-2')
    const link = world().link(sim, { agentId: 'a', apiKey: 'key-2' })
    await expect(link.connect()).rejects.toMatchObject({ reason: { kind: 'rejected', cause: 'unauthenticated' } })
  })

  it('recordLimit keeps at most that many frames per socket (the latest), 0 keeps none; abort() of a closed socket changes nothing', async () => {
    const three = await world().sim({ recordLimit: 3 })
    const link = world().link(three)
    await link.connect()
    for (let i = 0; i < 4; i++) {
      const signal = next(link, 'control')
      three.control('agent-1', { mode: 'interrupt', correlation_id: `c${i}` })
      await signal
    }
    const [socket] = three.live('agent-1')
    expect(socket!.problems).toEqual([])
    expect(socket!.frames).toHaveLength(3)
    expect((socket!.frames.at(-1)!.frame!.payload as { correlation_id?: string }).correlation_id).toBe('c3')
    const none = await world().sim({ recordLimit: 0 })
    const other = world().link(none)
    await other.connect()
    expect(none.live('agent-1')[0]!.frames).toEqual([])
    const closed = next(link, 'disconnected')
    three.close({ agent: 'agent-1' }, 1000)
    await closed
    await three.waitFor(() => socket!.state === 'closed', { what: 'the old socket closed' })
    socket!.abort()
    expect(socket!.state).toBe('closed')
  })
})
