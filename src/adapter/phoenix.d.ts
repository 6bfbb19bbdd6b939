/**
 * The parts of the `phoenix` 1.8.16 client this adapter uses. `@types/phoenix` describes 1.6,
 * so the 1.8 options and the few internals the adapter touches are typed here, against
 * node_modules/phoenix/assets/js/phoenix/{socket,channel,push,timer}.js of the pinned version.
 */
declare module 'phoenix' {
  export interface SocketOptions {
    transport?: new (url: string, protocols?: string | string[]) => unknown
    encode?: (payload: object, callback: (encoded: string | ArrayBuffer) => void) => void
    decode?: (payload: string | ArrayBuffer, callback: (decoded: unknown) => void) => void
    timeout?: number
    heartbeatIntervalMs?: number
    reconnectAfterMs?: (tries: number) => number
    rejoinAfterMs?: (tries: number) => number
    logger?: (kind: string, msg: string, data: unknown) => void
    params?: Record<string, unknown> | (() => Record<string, unknown>)
    binaryType?: 'arraybuffer' | 'blob'
    vsn?: string
    sessionStorage?: unknown
  }

  export class Push {
    receive(status: string, callback: (response?: any) => any): this
    /** @internal */ cancelTimeout(): void
    /** @internal Stops listening for this push's reply (push.js cancelRefEvent: channel.off of its ref event). */ cancelRefEvent(): void
    ref: string | null
    /** @internal Whether it was sent (push.js send). */ sent: boolean
    /** @internal The reply, once one came (or a timeout's); null before (push.js). */ receivedResp: unknown
    /** @internal The event its reply is dispatched as, `chan_reply_<ref>` (push.js startTimeout); undefined before the first send, null after a reset. */ refEvent?: string | null
  }

  export class Channel {
    constructor(topic: string, params?: object | (() => object), socket?: Socket)
    topic: string
    state: 'closed' | 'errored' | 'joined' | 'joining' | 'leaving'
    join(timeout?: number): Push
    leave(timeout?: number): Push
    push(event: string, payload: object, timeout?: number): Push
    on(event: string, callback: (payload?: any, ref?: any, joinRef?: any) => void): number
    off(event: string, ref?: number): void
    onClose(callback: (payload: any, ref: any, joinRef: any) => void): number
    onError(callback: (reason?: any) => void): number
    /** Overridable hook phoenix.js calls for every message before its bindings; must return the payload. */
    onMessage: (event: string, payload: unknown, ref?: unknown, joinRef?: unknown) => unknown
    socket: Socket
    /** @internal The channel's bindings; replies wait as `chan_reply_<ref>` (channel.js, push.js). */
    bindings: Array<{ event: string; ref: number }>
    /** @internal */ joinRef(): string | null
    /** @internal */ joinPush: Push
    /** @internal */ rejoinTimer: { reset(): void }
    /**
     * @internal Dispatches an event to the channel's bindings (channel.js trigger): a server
     * message, a reply as `chan_reply_<ref>`, phx_error, phx_close, and the close of a leave.
     */
    trigger(event: string, payload?: unknown, ref?: unknown, joinRef?: unknown): void
  }

  /** The V2 JSON serializer (serializer.js). */
  export const Serializer: {
    encode(message: object, callback: (encoded: string | ArrayBuffer) => void): void
    decode(raw: string | ArrayBuffer, callback: (decoded: unknown) => void): void
  }

  export class Socket {
    constructor(endPoint: string, opts?: SocketOptions)
    connect(params?: any): void
    disconnect(callback?: () => void, code?: number, reason?: string): void
    channel(topic: string, chanParams?: object | (() => object)): Channel
    isConnected(): boolean
    connectionState(): 'connecting' | 'open' | 'closing' | 'closed'
    endPointURL(): string
    onOpen(callback: () => void): string
    onClose(callback: (event: any) => void): string
    onError(callback: (error: any, transport?: any, establishedConnections?: number) => void): string
    onMessage(callback: (message: any) => void): string
    off(refs: string[]): void
    makeRef(): string
    /** @internal */ remove(channel: Channel): void
    /** @internal Every channel of the socket (socket.js channel(), remove()). */ channels: Channel[]
    /** @internal Sends one message as is (socket.js push). */ push(message: { topic: string; event: string; payload: object; ref: string | null; join_ref: string | null }): void
    /** @internal */ conn: unknown
    /** @internal The last ref made (socket.js makeRef). */ ref: number
    /** @internal The ref of the heartbeat awaiting its reply (socket.js sendHeartbeat). */ pendingHeartbeatRef: string | null
    /** @internal Sends a heartbeat now and arms its timeout at heartbeatIntervalMs (socket.js sendHeartbeat). */ sendHeartbeat(): void
    /**
     * @internal With a heartbeat pending: closes the connection (1000, "heartbeat timeout"),
     * errors the channels and schedules phoenix.js's own reconnect (socket.js heartbeatTimeout);
     * without one, nothing.
     */
    heartbeatTimeout(): void
    /**
     * @internal Closes the connection and calls back once its transport reads closed, polling
     * readyState every 150·n ms up to 4 times (socket.js teardown, waitForSocketClosed); called by
     * disconnect() and by phoenix.js itself after a heartbeat timeout (teardownAndReconnect).
     */
    teardown(callback?: () => void, code?: number, reason?: string): void
    /** @internal The transport opened: phoenix.js's own handling, then the `onOpen` callbacks (socket.js onConnOpen). */ onConnOpen(): void
    /** @internal The transport errored: the `onError` callbacks, then the channels are errored (socket.js onConnError). */ onConnError(error: unknown): void
    /** @internal The transport closed: phoenix.js's own handling (channels errored), then the `onClose` callbacks (socket.js onConnClose). */ onConnClose(event: unknown): void
  }
}
