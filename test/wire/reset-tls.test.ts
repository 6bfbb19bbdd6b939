/**
 * A reset behind unread bytes over `wss:`, the scheme a link uses off loopback. Node reports such
 * a reset as an end of stream (docs/field-notes.md), and its TLS layer reports every empty write
 * as done, so only a frame of some bytes written at the end of stream finds the reset there
 * (ws-transport.ts `LinkWebSocket.probeAfterEnd`). The world: the link speaks TLS to a TCP proxy
 * (which can reset the link's connection right behind the bytes it forwards), in front of a TLS
 * terminator (this folder's self-signed certificate for 127.0.0.1, trusted by the test alone), in
 * front of the simulator.
 */
import { readFileSync } from 'node:fs'
import net from 'node:net'
import tls from 'node:tls'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { next, useWorld } from '../support/wire.js'

const world = useWorld()
const CERT = readFileSync(new URL('../fixtures/tls/cert.pem', import.meta.url))
const KEY = readFileSync(new URL('../fixtures/tls/key.pem', import.meta.url))

/** A listening server's loopback port. */
async function listen(server: net.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return (server.address() as net.AddressInfo).port
}

/**
 * Pipes each accepted connection to `port` (what comes back through `back`, by default a pipe); a
 * close of either side ends the other.
 */
function pipeTo(port: number, back?: (chunk: Buffer, client: net.Socket) => void): (socket: net.Socket) => void {
  return (client) => {
    const upstream = net.connect(port, '127.0.0.1')
    for (const s of [client, upstream]) s.on('error', () => {})
    client.pipe(upstream)
    if (back) upstream.on('data', (chunk: Buffer) => back(chunk, client))
    else upstream.pipe(client)
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
  }
}

/** Every server a test starts, closed (with its connections) after it. */
const opened: Array<{ server: net.Server; sockets: Set<net.Socket> }> = []
function serve(server: net.Server): net.Server {
  const sockets = new Set<net.Socket>()
  server.on('connection', (s: net.Socket) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  opened.push({ server, sockets })
  return server
}

// The link's TLS client trusts the test's certificate: ws opens its TLS connection with
// tls.connect(options), read from the module at each call.
const connect = tls.connect
beforeEach(() => {
  ;(tls as { connect: unknown }).connect = (options: tls.ConnectionOptions, ...rest: unknown[]) => (connect as (...a: unknown[]) => tls.TLSSocket)({ ...options, ca: CERT }, ...rest)
})
afterEach(async () => {
  ;(tls as { connect: unknown }).connect = connect
  for (const { server, sockets } of opened.splice(0)) {
    for (const s of sockets) s.destroy()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
})

/**
 * The link over `wss:` to the simulator (through the proxy and the TLS terminator), connected, and
 * just sent (a push); then the simulator sends a frame, and the proxy forwards it and at once does
 * `cut` to the link's connection. Resolves with the loss the link reported, once it reconnected.
 */
async function frameThenCut(cut: (client: net.Socket) => void) {
  const sim = await world().sim()
  const terminatorPort = await listen(serve(tls.createServer({ key: KEY, cert: CERT }, pipeTo(sim.port))))
  let armed = false
  const proxyPort = await listen(
    serve(
      net.createServer(
        pipeTo(terminatorPort, (chunk, client) => {
          client.write(chunk)
          if (armed) cut(client)
        }),
      ),
    ),
  )
  const link = world().link(sim, {
    url: `wss://127.0.0.1:${proxyPort}/socket`,
    policy: { connection: { unseenSupersedeWindowMs: 0, conflictRetryWindowMs: 150 }, reconnect: { initialDelayMs: 250, maxDelayMs: 250 } },
  })
  await link.connect()
  await link.channel('room:r').push('ping', {})
  const [socket] = sim.live('agent-1')
  const lost = next(link, 'disconnected')
  const back = next(link, 'reconnected')
  armed = true
  socket!.send({ join_ref: null, ref: null, topic: 'room:r', event: 'notice', payload: {} })
  const loss = await lost
  armed = false
  await back
  return { loss, upgrades: sim.upgrades.map((u) => [u.status, u.onConflict]) }
}

describe('a reset over wss:', () => {
  it('a reset right behind a frame the link has not read yet (Node: an end of stream) counts as one over TLS too: the next upgrade probes', async () => {
    const { loss, upgrades } = await frameThenCut((client) => client.resetAndDestroy())
    expect(loss).toMatchObject({ outcome: 'reconnect', conflictProbe: true, reason: { kind: 'dropped', reset: true, source: 'socket' } })
    // TLS writes on reading (its record layer answers), so the reset meets a write or, on a loaded machine, the read first.
    expect((loss.reason as { detail: string }).detail).toMatch(/^abnormal closure \(1006\): (write|read) ECONNRESET$/)
    expect(upgrades).toEqual([[101, null], [101, 'reject']])
  })

  it('the same frame, then an end of the connection (a FIN) over TLS: a plain drop, no probe', async () => {
    const { loss, upgrades } = await frameThenCut((client) => client.end())
    expect(loss).toMatchObject({ outcome: 'reconnect', conflictProbe: false, reason: { kind: 'dropped' } })
    expect(loss.reason).not.toHaveProperty('reset')
    expect(upgrades).toEqual([[101, null], [101, null]])
  })
})
