/**
 * The frame the transport writes at the end of stream to find a reset there (ws-transport.ts
 * `LinkWebSocket.probeAfterEnd`) goes out only while the WebSocket is open: after the link's own
 * close frame the end of stream is the close handshake's, and nothing goes out behind that frame
 * (ws sends nothing there; RFC 6455 section 5.5.1 allows no data frame). (After the server's close
 * frame ws has already ended the socket when its end of stream comes, and Node writes nothing on an
 * ended socket: no test of the link's could fail there, so there is none.) The world: a TCP proxy in front of the simulator that records every byte the link sends,
 * and can end the link's connection right behind a frame it forwards (so a close frame and the FIN
 * reach the link in one read) or answer the link's close frame with a FIN alone.
 */
import net from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { next, useWorld } from '../support/wire.js'

const world = useWorld()
/** No close soon after the control join is taken for an unseen supersede (docs/rules.md), so a probe would show. */
const NO_UNSEEN_WINDOW = { connection: { unseenSupersedeWindowMs: 0 } }

/** Every proxy a test starts, closed (with its connections) after it. */
const opened: Array<{ server: net.Server; sockets: Set<net.Socket> }> = []
afterEach(async () => {
  for (const { server, sockets } of opened.splice(0)) {
    for (const s of sockets) s.destroy()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
})

/** A client frame's opcode and payload (RFC 6455 section 5.2: client frames are masked). */
interface ClientFrame {
  opcode: number
  payload: Buffer
}

/**
 * The frames in what a client sent after its upgrade request (the request's head skipped), in
 * order. Throws on a frame that is not masked or is cut short: the link sent something that is not
 * RFC 6455.
 */
function clientFrames(bytes: Buffer): ClientFrame[] {
  let at = bytes.indexOf('\r\n\r\n')
  if (at < 0) throw new Error('no upgrade request head in what the link sent')
  at += 4
  const frames: ClientFrame[] = []
  while (at < bytes.length) {
    const opcode = bytes[at]! & 0x0f
    const masked = (bytes[at + 1]! & 0x80) !== 0
    let length = bytes[at + 1]! & 0x7f
    at += 2
    if (length === 126) {
      length = bytes.readUInt16BE(at)
      at += 2
    } else if (length === 127) {
      length = Number(bytes.readBigUInt64BE(at))
      at += 8
    }
    if (!masked) throw new Error(`an unmasked client frame (opcode ${opcode})`)
    const mask = bytes.subarray(at, at + 4)
    at += 4
    if (at + length > bytes.length) throw new Error(`a client frame cut short (opcode ${opcode}, ${length} bytes)`)
    const payload = Buffer.from(bytes.subarray(at, at + length).map((b, i) => b ^ mask[i % 4]!))
    at += length
    frames.push({ opcode, payload })
  }
  return frames
}

/**
 * A proxy to the simulator's port. `sent()` is every byte the link sent on its first connection;
 * `endBehindNext()` makes the proxy end the link's connection (a FIN) right behind the next chunk
 * it forwards from the server; `finOnClose()` makes it answer the link's next close frame with a
 * FIN alone (neither passed on nor answered with a close frame), as a server that drops a closing
 * client does.
 */
async function recordingProxy(port: number) {
  const sockets = new Set<net.Socket>()
  const first: Buffer[] = []
  let connections = 0
  let endArmed = false
  let finOnCloseArmed = false
  let muted = false
  // Half-open on both sides: an end of one side is passed on as an end (a FIN), never as a close,
  // so each side's last bytes still get through.
  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    const mine = connections++ === 0
    const upstream = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true })
    for (const s of [client, upstream]) {
      sockets.add(s)
      s.on('close', () => sockets.delete(s))
      s.on('error', () => {})
    }
    client.on('data', (chunk: Buffer) => {
      if (mine) first.push(chunk)
      if (mine && finOnCloseArmed && clientFrames(Buffer.concat(first)).some((f) => f.opcode === 0x8)) {
        // The link's close frame: answered with a FIN alone, the server's own close frame withheld.
        finOnCloseArmed = false
        muted = true
        client.end()
        return
      }
      upstream.write(chunk)
    })
    upstream.on('data', (chunk: Buffer) => {
      if (mine && muted) return
      client.write(chunk)
      if (mine && endArmed) {
        endArmed = false
        client.end()
      }
    })
    client.on('end', () => upstream.end())
    upstream.on('end', () => client.end())
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
  })
  opened.push({ server, sockets })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as net.AddressInfo).port,
    sent: () => Buffer.concat(first),
    endBehindNext: () => void (endArmed = true),
    finOnClose: () => void (finOnCloseArmed = true),
  }
}

describe('the end-of-stream probe', () => {
  it('a FIN with no close frame before it: the probe is the last frame the link sends, one empty pong', async () => {
    const sim = await world().sim()
    const proxy = await recordingProxy(sim.port)
    const link = world().link(sim, { url: `ws://127.0.0.1:${proxy.port}/socket`, policy: NO_UNSEEN_WINDOW })
    await link.connect()
    await link.channel('room:r').push('ping', {})
    const [socket] = sim.live('agent-1')
    const lost = next(link, 'disconnected')
    const back = next(link, 'reconnected')
    proxy.endBehindNext()
    socket!.send({ join_ref: null, ref: null, topic: 'room:r', event: 'notice', payload: {} })
    const loss = await lost
    expect(loss).toMatchObject({ outcome: 'reconnect', conflictProbe: false, reason: { kind: 'dropped' } })
    await back
    const frames = clientFrames(proxy.sent())
    expect(frames.at(-1)).toEqual({ opcode: 0xa, payload: Buffer.alloc(0) })
    expect(frames.filter((f) => f.opcode === 0xa)).toHaveLength(1)
  })

  it("the link's own close frame answered by a FIN alone (no close frame back): nothing goes out behind the link's close frame, no pong", async () => {
    const sim = await world().sim()
    const proxy = await recordingProxy(sim.port)
    const link = world().link(sim, { url: `ws://127.0.0.1:${proxy.port}/socket`, policy: NO_UNSEEN_WINDOW })
    await link.connect()
    await link.channel('room:r').push('ping', {})
    proxy.finOnClose()
    await link.disconnect()
    expect(link.state).toBe('stopped')
    const frames = clientFrames(proxy.sent())
    const close = frames.findIndex((f) => f.opcode === 0x8)
    expect(close).toBeGreaterThan(0)
    expect(frames[close]!.payload.readUInt16BE(0)).toBe(1000)
    expect(frames.slice(close + 1).map((f) => f.opcode)).toEqual([])
  })
})
