/**
 * The network between a link and any peer, as a TCP relay on 127.0.0.1 that a test can break:
 * faults no server can produce on its own, so every peer (the simulator, Bandit, Cowboy) meets
 * them the same way.
 *
 * - `blackhole()`: the current connections stop carrying bytes in either direction and stay
 *   open, as a silent network path does. The client's close never reaches the server, so the
 *   server keeps "our lost socket" until its idle timeout (60 s) or until `release()`.
 * - `stallUplink()`: the current connections stop carrying the client's bytes and stay open, while
 *   the server's still reach the client, as a congested or one-way-broken uplink does: the
 *   client's heartbeats and its close never reach the server, which goes on pushing.
 * - `release()`: ends the server side of blackholed or stalled connections (the server sees the TCP
 *   connection end, as when its idle timeout finally fires).
 * - `cut()`: ends both sides of the current connections with no close frame (RST).
 * - `refuseNew()` / `acceptNew()`: the relay's port stops listening, so a new TCP connection is
 *   refused (ECONNREFUSED: no byte of the attempt reaches the server), and listens again; the
 *   current connections are untouched.
 * - `holdNew('request')`: a new TCP connection is accepted and its bytes (the upgrade request)
 *   are held, not relayed, so the client's upgrade is sent and goes unanswered; no byte of it
 *   reaches the server until `passHeld()` relays it (and what follows) after all.
 * - `holdNew('response')`: a new connection's bytes reach the server, but the server's answer (its
 *   101, or its refusal) is held from the client: the server accepted an upgrade whose answer the
 *   client never gets.
 * - `dropHeld()`: ends every held connection with no answer (RST; on both sides for a held
 *   response). After `passHeld()` or `dropHeld()` later connections flow again.
 * - `stallNextAfterRequest()`: the next connection relays the client's upgrade request, then
 *   none of the client's bytes (its channel joins, heartbeats, close) while the server's still
 *   flow: a socket the server accepted whose joins never reach it, as an uplink that fails just
 *   after the upgrade. `stallNextAfterRequest('delay')` keeps those bytes instead, and
 *   `flushUplink()` relays them (and what follows): a join that reaches the server late.
 */
import { createServer, connect, type Server, type Socket } from 'node:net'

interface Pair {
  client: Socket
  upstream: Socket
  holed: boolean
}

/** A relay from a loopback port to `127.0.0.1:targetPort`. */
export class FaultProxy {
  /** Connections relayed so far, blackholed or not. */
  accepted = 0
  private readonly server: Server
  private readonly pairs = new Set<Pair>()
  /** Held connections: the client's socket, and the server's once the request was relayed. */
  private readonly held = new Set<{ client: Socket; upstream: Socket | null }>()
  private holding: 'request' | 'response' | null = null
  /** The next connection's uplink stalls once its upgrade request has passed: its bytes dropped, or kept until {@link flushUplink}. */
  private stallAfterRequest: 'drop' | 'delay' | null = null
  /** Connections whose uplink is delayed, with the bytes kept. */
  private readonly delayed = new Set<{ pair: Pair; kept: Buffer[]; onData: (chunk: Buffer) => void }>()
  /** Waits of {@link untilHeld}, each told when a connection is held. */
  private readonly heldWaiters = new Set<() => void>()
  private boundPort = 0

  private constructor(private readonly targetPort: number) {
    this.server = createServer((client) => this.relay(client))
  }

  /**
   * Starts a relay to `targetPort` and resolves once it listens.
   *
   * @throws {Error} (rejects) when no loopback port can be bound.
   */
  static async start(targetPort: number): Promise<FaultProxy> {
    const proxy = new FaultProxy(targetPort)
    await new Promise<void>((resolve, reject) => {
      proxy.server.once('error', reject)
      proxy.server.listen(0, '127.0.0.1', () => {
        proxy.server.off('error', reject)
        resolve()
      })
    })
    const address = proxy.server.address()
    proxy.boundPort = typeof address === 'object' && address ? address.port : 0
    return proxy
  }

  /** The socket endpoint through the relay (phoenix.js appends `/websocket`). */
  get url(): string {
    return `ws://127.0.0.1:${this.boundPort}/socket`
  }

  /** Connections open through the relay that still carry bytes. */
  get flowing(): number {
    return [...this.pairs].filter((p) => !p.holed).length
  }

  /** Stops carrying bytes on every current connection; both sides stay open. Later connections flow. */
  blackhole(): void {
    for (const pair of this.pairs) {
      if (pair.holed) continue
      pair.holed = true
      pair.client.unpipe(pair.upstream)
      pair.upstream.unpipe(pair.client)
      // Discard what the client sends meanwhile (its heartbeats, its close) instead of buffering it.
      pair.client.on('data', () => {})
      pair.upstream.pause()
    }
  }

  /** Stops carrying the client's bytes on every current connection (the server's still flow); both sides stay open. Later connections flow. */
  stallUplink(): void {
    for (const pair of this.pairs) {
      if (pair.holed) continue
      pair.holed = true
      pair.client.unpipe(pair.upstream)
      // Discard what the client sends meanwhile (its heartbeats, its close) instead of buffering it.
      pair.client.on('data', () => {})
    }
  }

  /**
   * The server's bytes of every blackholed connection flow to the client again, what the server
   * sent meanwhile first (a path that recovers late); the client's bytes stay discarded.
   */
  resumeDownlink(): void {
    for (const pair of this.pairs) {
      if (!pair.holed) continue
      pair.upstream.pipe(pair.client)
      pair.upstream.resume()
    }
  }

  /** Ends the server side of every blackholed or stalled connection, as an idle timeout would. */
  release(): void {
    for (const pair of this.pairs) if (pair.holed) this.end(pair)
  }

  /** Ends both sides of every current connection without a close frame. */
  cut(): void {
    for (const pair of this.pairs) this.end(pair)
  }

  /** Holds every later connection's request (`'request'`) or the server's answer to it (`'response'`) until {@link passHeld} or {@link dropHeld}. */
  holdNew(what: 'request' | 'response' = 'request'): void {
    this.holding = what
  }

  /** The next connection carries the client's upgrade request and then none of its bytes; the server's flow (a stalled uplink from the first frame on). */
  stallNextAfterRequest(how: 'drop' | 'delay' = 'drop'): void {
    this.stallAfterRequest = how
  }

  /** Relays the bytes kept by `stallNextAfterRequest('delay')`, in order, and what follows. */
  flushUplink(): void {
    for (const d of this.delayed) {
      this.delayed.delete(d)
      d.pair.client.off('data', d.onData)
      for (const chunk of d.kept) d.pair.upstream.write(chunk)
      d.pair.holed = false
      d.pair.client.pipe(d.pair.upstream)
    }
  }

  /**
   * Resolves once `n` connections are held by {@link holdNew}. The client's socket reports itself
   * connected (and the link its upgrade sent) before this relay's server has handled the
   * connection, so a test waits here rather than reading {@link heldConnections} at once.
   *
   * @throws {Error} (rejects) after `timeoutMs` (8000) with fewer held.
   */
  untilHeld(n: number, timeoutMs = 8_000): Promise<void> {
    if (this.held.size >= n) return Promise.resolve()
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.held.size < n) return
        clearTimeout(timer)
        this.heldWaiters.delete(check)
        resolve()
      }
      const timer = setTimeout(() => {
        this.heldWaiters.delete(check)
        reject(new Error(`${this.held.size} connection(s) held after ${timeoutMs} ms, waiting for ${n}`))
      }, timeoutMs)
      this.heldWaiters.add(check)
    })
  }

  /** Connections held by {@link holdNew}, still open. */
  get heldConnections(): number {
    return this.held.size
  }

  /** Relays every connection whose request is held after all (bytes and all), and stops holding. */
  passHeld(): void {
    this.holding = null
    for (const held of this.held) {
      if (held.upstream !== null) continue
      this.held.delete(held)
      this.pair(held.client)
      held.client.resume()
    }
  }

  /** Ends every held connection with no answer (RST, on both sides) and stops holding: later connections flow. */
  dropHeld(): void {
    this.holding = null
    for (const { client, upstream } of this.held) {
      client.resetAndDestroy()
      upstream?.resetAndDestroy()
    }
    this.held.clear()
  }

  /** Stops listening: new connections are refused; the current ones go on. */
  refuseNew(): void {
    if (this.server.listening) this.server.close()
  }

  /**
   * Listens again on the same port.
   *
   * @throws {Error} (rejects) when the port cannot be bound again.
   */
  async acceptNew(): Promise<void> {
    if (this.server.listening) return
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject)
      this.server.listen(this.boundPort, '127.0.0.1', () => {
        this.server.off('error', reject)
        resolve()
      })
    })
  }

  /** Ends every connection and stops listening; resolves once every socket is closed. */
  async close(): Promise<void> {
    const closing = [...[...this.pairs].flatMap((p) => [p.client, p.upstream]), ...[...this.held].flatMap((h) => (h.upstream ? [h.client, h.upstream] : [h.client]))].map(closed)
    for (const pair of this.pairs) this.end(pair)
    this.dropHeld()
    await Promise.all(closing)
    // After refuseNew() the server no longer listens; close() then only reports that, at once.
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }

  private relay(client: Socket): void {
    this.accepted++
    if (this.holding === 'request') {
      // Accepted, not relayed: the client's upgrade request stays in the socket's buffers.
      const held = { client, upstream: null }
      client.pause()
      client.on('error', () => {})
      client.on('close', () => this.held.delete(held))
      this.held.add(held)
      for (const check of [...this.heldWaiters]) check()
      return
    }
    if (this.holding === 'response') {
      // The request reaches the server; its answer is read and never passed on.
      const upstream = connect(this.targetPort, '127.0.0.1')
      const held = { client, upstream }
      client.pipe(upstream)
      upstream.on('data', () => {})
      for (const socket of [client, upstream]) {
        socket.on('error', () => {})
        socket.on('close', () => {
          this.held.delete(held)
          client.destroy()
          upstream.destroy()
        })
      }
      this.held.add(held)
      for (const check of [...this.heldWaiters]) check()
      return
    }
    const afterRequest = this.stallAfterRequest
    this.stallAfterRequest = null
    this.pair(client, afterRequest)
  }

  private pair(client: Socket, stallAfterRequest: 'drop' | 'delay' | null = null): void {
    const upstream = connect(this.targetPort, '127.0.0.1')
    const pair: Pair = { client, upstream, holed: false }
    this.pairs.add(pair)
    if (stallAfterRequest !== null) {
      // Relay the request head (up to its blank line), then discard the client's bytes, or keep them.
      let head = ''
      const delayed = { pair, kept: [] as Buffer[], onData: (_chunk: Buffer) => {} }
      const onData = (chunk: Buffer) => {
        if (pair.holed) {
          if (stallAfterRequest === 'delay' && this.delayed.has(delayed)) delayed.kept.push(chunk)
          return
        }
        const end = (head + chunk.toString('latin1')).indexOf('\r\n\r\n')
        if (end === -1) {
          head += chunk.toString('latin1')
          upstream.write(chunk)
          return
        }
        const cut = end + 4 - head.length
        upstream.write(chunk.subarray(0, cut))
        pair.holed = true
        if (stallAfterRequest === 'delay') {
          this.delayed.add(delayed)
          if (cut < chunk.length) delayed.kept.push(chunk.subarray(cut))
        }
      }
      delayed.onData = onData
      client.on('data', onData)
    } else {
      client.pipe(upstream)
    }
    upstream.pipe(client)
    // A side that ends or fails ends the other, unless the pair is blackholed: then the other
    // side must not learn of it.
    const onGone = () => {
      if (!pair.holed) this.end(pair)
      if (client.destroyed && upstream.destroyed) this.pairs.delete(pair)
    }
    for (const socket of [client, upstream]) {
      socket.on('error', () => {})
      socket.on('close', onGone)
    }
  }

  private end(pair: Pair): void {
    pair.client.resetAndDestroy()
    pair.upstream.resetAndDestroy()
  }
}

function closed(socket: Socket): Promise<void> {
  return socket.destroyed && socket.closed ? Promise.resolve() : new Promise((resolve) => socket.once('close', () => resolve()))
}
