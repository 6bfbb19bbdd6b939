/**
 * The host's handle on one app channel: its events, its pushes, its status. The channel chart
 * (machines/channel.ts) owns the lifecycle; this handle only mirrors it and carries data.
 */
import { isArrayBuffer, isReservedEvent, isWellFormedText, LONE_SURROGATE_MESSAGE, notJsonMap, type Payload } from './protocol.js'
import type { DisconnectReason } from './reasons.js'
import { abortError, checkSignal, onAbort } from './abort.js'
import { callOptions, checkFunction, isCallTimeout } from './call-checks.js'
import { PushError } from './errors/push-error.js'
import { ConfigurationError } from './errors/configuration-error.js'

import type { PushFailure } from './adapter/types.js'
import { settleReported, type Unsubscribe } from './emitter.js'
import { thrownText } from '../machines/types.js'
import type { LinkState } from '../machines/status.js'

/**
 * Status of an app channel: `joining` until the first join (or after a transport loss,
 * `detached`), `joined`, `errored` (phx_error, a join timeout or a refusal that passes such as rate_limited: rejoining), and the two ends:
 * `dropped` (the server refused or closed it; see `reason`) and `left` (the host left it).
 */
export type ChannelStatus = 'joining' | 'joined' | 'detached' | 'errored' | 'dropped' | 'left'

/** Metadata passed with each message to a channel handler. */
export interface MessageMeta {
  /** Transport generation the message arrived on. */
  generation: number
}

/**
 * Handler of one event on an app channel. Binary pushes arrive as an ArrayBuffer. It may be
 * `async`: what it throws, or the promise it returns rejects with, is logged (`error`) and never
 * thrown into the link.
 */
export type MessageHandler = (payload: Payload | ArrayBuffer, meta: MessageMeta) => void

/** What a handle needs from its link. */
export interface ChannelHost {
  /** Whether the link runs a session (not idle, stopping, stopped or terminated). */
  isRunning(): boolean
  /** Whether the link's session ended (stopping, stopped or terminated): no join is coming until a connect(). */
  isEnded(): boolean
  /** The link's public state, for an error's message. */
  linkState(): LinkState
  isJoined(topic: string): boolean
  /** The current join's `ok` reply response; undefined while not joined. */
  joinReply(topic: string): unknown
  /** Pushes on the current join; an abort of `signal` drops the wait for the reply (its timer too). */
  push(topic: string, event: string, payload: Payload | ArrayBuffer, timeoutMs: number, signal?: AbortSignal): Promise<unknown>
  leave(topic: string): void
  pushTimeoutMs: number
  /** The link's monotonic clock (env.monotonic), milliseconds: a push's timeout is measured on it. */
  monotonic(): number
  reportError(error: unknown, where: string): void
  reportUnhandled(topic: string, event: string): void
  /** The link's key redaction, for text that leaves as output (an error's message). */
  redact(text: string): string
}

interface Waiter {
  resolve: () => void
  reject: (error: PushError) => void
  timer: ReturnType<typeof setTimeout> | undefined
  event: string
}

/**
 * An app channel of a link, from `link.channel(topic, params)`. Rejoined with a fresh join_ref
 * on every transport until `leave()` or until the server drops it.
 */
export class LinkChannel {
  // Read-only to the host (getters below): only the channel's chart, through the link, moves them.
  #status: ChannelStatus = 'joining'
  #reason: DisconnectReason | null = null
  #joinReply: unknown = null

  /** Current status; see {@link ChannelStatus}. Read-only: the channel's chart sets it. */
  get status(): ChannelStatus {
    return this.#status
  }

  /** Why it last errored or was dropped; cleared when it joins again. Read-only. */
  get reason(): DisconnectReason | null {
    return this.#reason
  }

  /**
   * The `response` of the server's `ok` reply to the current join (phoenix.js
   * `channel.join().receive('ok', response)`), `{}` when it sent none; refreshed on every rejoin,
   * null before the first join and kept after a drop or leave. Read-only.
   */
  get joinReply(): unknown {
    return this.#joinReply
  }

  // Made on first use: a channel nobody listens to keeps none of them (a link with thousands of
  // channels, or a host with thousands of links, pays only for what it uses).
  private handlers: Map<string, Set<MessageHandler>> | null = null
  private anyHandlers: Set<(event: string, payload: Payload | ArrayBuffer, meta: MessageMeta) => void> | null = null
  private statusListeners: Set<(status: ChannelStatus, reason: DisconnectReason | null) => void> | null = null
  private waiters: Set<Waiter> | null = null
  /** Resolves the leave() calls waiting for the channel to end; null while none waits. */
  private endedWaiters: Array<() => void> | null = null

  /** @internal created by `link.channel()`. */
  constructor(
    /** The channel's topic, e.g. `chat_room:42`. */
    readonly topic: string,
    private readonly host: ChannelHost,
    /** @internal The join params as `link.channel()` got them: an object, or a function of each join attempt. */
    readonly params: object | ((attempt: { generation: number; signal: AbortSignal }) => object | Promise<object>) = {},
  ) {}

  /** Whether the channel can still join: not dropped and not left. */
  get active(): boolean {
    return this.#status !== 'dropped' && this.#status !== 'left'
  }

  /**
   * Calls `handler` for every `event` pushed or broadcast on this channel's current join.
   * Handlers form a set per event: the same function registered twice is called once per message,
   * and either returned function, or one off(), removes it.
   *
   * @throws {ConfigurationError} when `event` is not a non-empty string, is one of phoenix.js's
   *   own (`phx_*`, `chan_reply_*`: a channel's replies, errors and closes, which reach no handler;
   *   the channel's status says what they did: `onStatus`, `joined()`), or `handler` is not a
   *   function (nothing is registered).
   */
  on(event: string, handler: MessageHandler): Unsubscribe {
    if (typeof event !== 'string' || event === '') throw new ConfigurationError(`channel ${this.topic}: on() needs an event name (a non-empty string), got ${event === '' ? 'an empty string' : event === null ? 'null' : typeof event}`)
    if (isReservedEvent(event)) {
      throw new ConfigurationError(`channel ${this.topic}: on(${JSON.stringify(event)}) would never be called: phoenix's own ${event.startsWith('phx_') ? 'phx_' : 'chan_reply_'} events (replies, errors, closes) reach no handler; listen with onStatus() (or await joined()) for what they do to the channel`)
    }
    checkFunction(handler, `channel ${this.topic}: the handler of ${JSON.stringify(event)}`)
    const handlers = (this.handlers ??= new Map())
    let set = handlers.get(event)
    if (!set) handlers.set(event, (set = new Set()))
    set.add(handler)
    return () => {
      set!.delete(handler)
      // No handler left: the event is unhandled again (reported as ignored), and nothing is kept.
      if (set!.size === 0 && this.handlers?.get(event) === set) this.handlers!.delete(event)
    }
  }

  /** Removes `handler` of `event` (as the function `on()` returned does). Does nothing when it is not registered. */
  off(event: string, handler: MessageHandler): void {
    const set = this.handlers?.get(event)
    if (!set) return
    set.delete(handler)
    if (set.size === 0) this.handlers!.delete(event)
  }

  /**
   * Resolves with the join reply's response once the channel is joined: at once when it is
   * joined now, else at its next join (after a reconnect, a rejoin).
   *
   * @throws {PushError} (rejects) `CHANNEL_CLOSED` when the channel is dropped (refused join:
   *   `reason` says why) or left first, when the link stops meanwhile, or at once when the
   *   channel is no longer active or the session ended (stopped, terminated: connect() first).
   *   Called before the first connect(), it waits for the join that connect() brings; a
   *   disconnect() meanwhile (the host stopping, even a link still idle) rejects it.
   * @throws the signal's reason (an AbortError) when `signal` aborts; the channel is unaffected.
   * @throws {ConfigurationError} (rejects) when `options` is not an object, or `options.signal` is
   *   given and is not an AbortSignal.
   */
  joined(options: { signal?: AbortSignal | undefined } | null = {}): Promise<unknown> {
    let signal: AbortSignal | undefined
    try {
      signal = callOptions(options, 'channel.joined').signal
      checkSignal(signal, 'channel.joined')
    } catch (error) {
      return Promise.reject(error)
    }
    if (signal?.aborted) return Promise.reject(abortError(signal))
    // No join is coming once the session ended (as disconnect() rejects the waits already made); before the first connect() it waits.
    if (!this.active || this.host.isEnded()) return Promise.reject(this.closedError('phx_join'))
    if (this.#status === 'joined') return Promise.resolve(this.#joinReply)
    return this.waitForJoin('phx_join', null, signal).then(() => this.#joinReply)
  }

  /**
   * Calls `handler` for every event on this channel.
   *
   * @throws {ConfigurationError} when `handler` is not a function (nothing is registered).
   */
  onAny(handler: (event: string, payload: Payload | ArrayBuffer, meta: MessageMeta) => void): Unsubscribe {
    checkFunction(handler, `channel ${this.topic}: the onAny handler`)
    ;(this.anyHandlers ??= new Set()).add(handler)
    return () => this.anyHandlers!.delete(handler)
  }

  /**
   * Calls `listener` on every status change, with the reason for `errored` and `dropped`.
   *
   * @throws {ConfigurationError} when `listener` is not a function (nothing is registered).
   */
  onStatus(listener: (status: ChannelStatus, reason: DisconnectReason | null) => void): Unsubscribe {
    checkFunction(listener, `channel ${this.topic}: the onStatus listener`)
    ;(this.statusListeners ??= new Set()).add(listener)
    return () => this.statusListeners!.delete(listener)
  }

  /**
   * Pushes `event` and resolves with the server's `ok` reply response. While the channel is not
   * joined the push waits for the join, all within `timeoutMs`.
   *
   * @param options.timeoutMs defaults to the transport policy's `pushTimeoutMs` (10000).
   * @throws {PushError} (rejects) `PUSH_TIMEOUT`, `PUSH_REJECTED` (error reply; `response` holds
   *   it), `PUSH_REPLY_STATUS` (a reply whose status is neither ok nor error; `status` and
   *   `response` hold it), `TRANSPORT_LOST` (the join ended before a reply; `reason` says why when the transport was lost: a close 1009 from
   *   the server says the push was over its frame limit), `CHANNEL_CLOSED` (left or dropped,
   *   or the link is not running a session: call connect() first; at once, not after the timeout),
   *   `PUSH_INVALID` (a reserved event name such as phx_join; a payload that is neither a plain
   *   JSON object nor an ArrayBuffer: an array, a scalar, null, a typed array or Buffer, a Map or
   *   a class instance, which JSON would send as something else; or one that cannot be encoded).
   * @throws {ConfigurationError} (rejects) for a timeoutMs that is not a whole number in [1, 2^31-1].
   * @throws the signal's reason (an AbortError) when `signal` aborts: before the push is sent
   *   nothing goes out; after, the link stops waiting for the reply (the server may still act on
   *   it, as with a timeout).
   * @throws {ConfigurationError} (rejects) when `options` is not an object, or `options.signal` is
   *   given and is not an AbortSignal.
   */
  async push(event: string, payload: Payload | ArrayBuffer = {}, options: { timeoutMs?: number | undefined; signal?: AbortSignal | undefined } | null = {}): Promise<unknown> {
    options = callOptions(options, 'channel.push')
    const { signal } = options
    checkSignal(signal, 'channel.push')
    if (signal?.aborted) throw abortError(signal)
    const timeoutMs = options.timeoutMs ?? this.host.pushTimeoutMs
    if (!isCallTimeout(timeoutMs)) {
      throw new ConfigurationError(`push timeoutMs must be a whole number of milliseconds in [1, 2^31-1], got ${String(timeoutMs)}`)
    }
    if (typeof event !== 'string' || event === '' || isReservedEvent(event)) {
      throw this.invalid(String(event), new Error('the event must be a non-empty string outside phoenix\'s phx_ and chan_reply_ names'))
    }
    // Checked here for both frames: a binary push's TextEncoder would send the half character as
    // U+FFFD, a name the caller never used (the JSON frame's check is the adapter's encodeFrame).
    if (!isWellFormedText(event)) throw this.invalid(event, new Error(`the event name cannot be sent: ${LONE_SURROGATE_MESSAGE}`))
    const checked = checkPayload(payload)
    if (typeof checked === 'string') {
      throw this.invalid(event, new Error(`a payload is a plain JSON object (a Phoenix map) or an ArrayBuffer (a binary push); got ${checked}`))
    }
    payload = checked.payload
    const started = this.host.monotonic()
    // Not sendable now and no join coming: the channel ended, or the link is not running a session.
    if (!this.active || !this.host.isRunning()) throw this.closedError(event)
    if (!this.host.isJoined(this.topic)) await this.waitForJoin(event, timeoutMs, signal)
    // The wait for the join came out of this push's time: the reply gets what is left, not the whole
    // again, and never more than the whole (a host clock that stepped back reads as no time spent).
    const remaining = Math.min(timeoutMs, Math.max(1, Math.round(timeoutMs - (this.host.monotonic() - started))))
    try {
      return await this.host.push(this.topic, event, payload, remaining, signal)
    } catch (failure) {
      // The adapter dropped the wait for the reply (the push was on the wire).
      if (signal?.aborted) throw abortError(signal)
      const f = failure as Partial<PushFailure> | null
      if (f && typeof f.code === 'string') throw new PushError(f.code, this.topic, event, f.response, f.cause, f.status, { reason: f.reason ?? null, redact: (text) => this.host.redact(text) })
      // Anything else thrown on the way out (phoenix.js internals): the push could not be made.
      throw this.invalid(event, failure)
    }
  }

  /** Leaves the channel (phx_leave when joined) and resolves once it is left. Idempotent. */
  async leave(): Promise<void> {
    if (!this.active) return
    this.host.leave(this.topic)
    if (!this.active) return
    await new Promise<void>((resolve) => (this.endedWaiters ??= []).push(resolve))
  }

  /** @internal A message from the adapter. */
  deliver(event: string, payload: Payload | ArrayBuffer, meta: MessageMeta): void {
    const set = this.handlers?.get(event)
    const any = this.anyHandlers
    if (!set && (any === null || any.size === 0)) {
      this.host.reportUnhandled(this.topic, event)
      return
    }
    // Over a copy, as the link's emitter does: a handler added while this message is delivered
    // (one that removes and adds itself again included) gets the next message, not this one; one
    // removed meanwhile (by a handler before it) is not called.
    // A handler's result is looked at only when it returned something (an async handler's promise):
    // the common handler returns nothing, and this runs for every inbound message.
    // Both copies are taken before any handler runs, so an any-handler added by a handler of this
    // event gets the next message too.
    const every = any === null || any.size === 0 ? null : [...any]
    if (set) {
      for (const handler of [...set]) {
        if (!set.has(handler)) continue
        try {
          const result: unknown = handler(payload, meta)
          if (result !== undefined) settleReported(result, (error) => this.handlerFailed(error, event))
        } catch (error) {
          this.handlerFailed(error, event)
        }
      }
    }
    // Guarded: iterating even an empty Set allocates an iterator, on every inbound message.
    if (every === null) return
    for (const handler of every) {
      if (!any!.has(handler)) continue
      try {
        const result: unknown = handler(event, payload, meta)
        if (result !== undefined) settleReported(result, (error) => this.handlerFailed(error, null))
      } catch (error) {
        this.handlerFailed(error, null)
      }
    }
  }

  /** Reports what a handler of `event` (an any-handler for null) threw or rejected with. */
  private handlerFailed(error: unknown, event: string | null): void {
    this.host.reportError(error, event === null ? `any-handler on ${this.topic}` : `handler of ${event} on ${this.topic}`)
  }

  /** @internal The chart reported a status. */
  setStatus(status: ChannelStatus, reason: DisconnectReason | null): void {
    if (!this.active) return
    this.#status = status
    // Like the chart's context: a join clears the reason, an error or a drop sets it, the rest keep it.
    if (status === 'joined') {
      this.#reason = null
      this.#joinReply = this.host.joinReply(this.topic) ?? {}
      this.releaseWaiters(null)
    } else if (reason) this.#reason = reason
    if (!this.active) {
      this.releaseWaiters('CHANNEL_CLOSED')
      const ended = this.endedWaiters
      this.endedWaiters = null
      for (const resolve of ended ?? []) resolve()
    }
    // Listeners run outside the chart's processing, in order (the change arrives mid-transition).
    if (this.statusListeners === null || this.statusListeners.size === 0) return
    const registered = this.statusListeners
    const listeners = [...registered]
    queueMicrotask(() => {
      const where = `status listener on ${this.topic}`
      for (const listener of listeners) {
        // One removed meanwhile (by a listener before it, or since the change) is not called.
        if (!registered.has(listener)) continue
        try {
          settleReported(listener(status, reason), (error) => this.host.reportError(error, where))
        } catch (error) {
          this.host.reportError(error, where)
        }
      }
    })
  }

  /**
   * @internal The link stopped or ended: pushes waiting for a join fail now. `stopped`: by the
   * host's disconnect() (a link still idle reads idle after it, so the state alone cannot say).
   */
  failWaiting(stopped = false): void {
    this.releaseWaiters('CHANNEL_CLOSED', stopped)
  }

  /**
   * Waits for the join, within `timeoutMs` (null: no bound, as `joined()` waits); an abort of
   * `signal` ends the wait at once, its timer cleared.
   */
  private waitForJoin(event: string, timeoutMs: number | null, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const aborted = () => {
        clearTimeout(waiter.timer)
        this.waiters?.delete(waiter)
        reject(abortError(signal!))
      }
      let unwatch: (() => void) | undefined
      const done = () => unwatch?.()
      const waiter: Waiter = {
        resolve: () => (done(), resolve()),
        reject: (error) => (done(), reject(error)),
        event,
        timer:
          timeoutMs === null
            ? undefined
            : setTimeout(() => {
                done()
                this.waiters?.delete(waiter)
                reject(new PushError('PUSH_TIMEOUT', this.topic, event, null, undefined, null, { redact: (text) => this.host.redact(text) }))
              }, timeoutMs),
      }
      ;(this.waiters ??= new Set()).add(waiter)
      if (signal) unwatch = onAbort(signal, aborted)
    })
  }

  /**
   * `CHANNEL_CLOSED` for `event`, with the typed reason when the server refused or closed the
   * channel, else a message that says what closed it (the channel left, the link idle, stopped or
   * terminated), so a push made before connect() says to connect first.
   */
  private closedError(event: string, stopped = false): PushError {
    const reason = this.#status === 'dropped' ? this.#reason : null
    const state = this.host.linkState()
    const detail =
      reason !== null
        ? undefined
        : this.#status === 'left'
          ? 'the channel was left'
          : stopped || state === 'stopping' || state === 'stopped'
            ? 'the link was stopped by disconnect(); connect() starts a new session'
            : state === 'idle'
              ? 'the link is idle: call connect() first'
              : state === 'terminated'
                ? 'the session ended (terminated: see link.lastDisconnectReason)'
                : undefined
    // The reason is data, kept as it is; the message is output, redacted (its text may hold what the server sent).
    // A push never carries phx_join (a reserved name, refused before it waits): the event names joined()'s wait.
    return new PushError('CHANNEL_CLOSED', this.topic, event, null, undefined, null, { reason, redact: (text) => this.host.redact(text), join: event === 'phx_join', ...(detail === undefined ? {} : { detail }) })
  }

  /** `PUSH_INVALID` for `event`: the push cannot be made (`cause` says why); its message redacted as every error's. */
  private invalid(event: string, cause: unknown): PushError {
    return new PushError('PUSH_INVALID', this.topic, event, null, cause, null, { redact: (text) => this.host.redact(text) })
  }

  private releaseWaiters(failure: 'CHANNEL_CLOSED' | null, stopped = false): void {
    if (this.waiters === null) return
    const waiters = this.waiters
    // An idle channel keeps no set: a link that awaited joined() once holds nothing for it after.
    this.waiters = null
    for (const waiter of waiters) {
      clearTimeout(waiter.timer)
      if (failure) waiter.reject(this.closedError(waiter.event, stopped))
      else waiter.resolve()
    }
  }
}



/**
 * A push payload as it can go, or what is wrong with it. It can go as a plain object (its prototype
 * an Object.prototype of any realm, or null, and no `toJSON` of its own), which phoenix.js sends as
 * a JSON map, or as an ArrayBuffer (a binary push, Phoenix's V2 binary frame; one of another realm,
 * which phoenix.js would send as JSON `{}` (its serializer tests `constructor === ArrayBuffer`), is
 * copied into this realm's). Anything else JSON would send as something else (a typed array or
 * Buffer as an object of its indexes or `{type, data}`, a Map as `{}`, a Date as a string, an
 * object's `toJSON()` as what it returns, null as `{}` through phoenix.js's default) or as no map
 * at all (an array, a scalar). Never throws: a value that cannot even be looked at (a revoked
 * proxy) says so.
 */
function checkPayload(payload: unknown): { payload: Payload | ArrayBuffer } | string {
  try {
    if (payload !== null && typeof payload === 'object' && !Array.isArray(payload) && isArrayBuffer(payload)) {
      return { payload: payload instanceof ArrayBuffer ? payload : new Uint8Array(payload as ArrayBuffer).slice().buffer }
    }
    // Inside it too: a Map, a Set or binary data one level down or deeper would be sent as {} or indexes.
    const what = notJsonMap(payload)
    if (what === null) return { payload: payload as Payload }
    return ArrayBuffer.isView(payload) ? `${what} (push its bytes as an ArrayBuffer: view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength))` : what
  } catch (error) {
    return `a value that cannot be read (${thrownText(error)})`
  }
}
