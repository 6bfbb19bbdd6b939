/**
 * The browser side of test/browser/link.test.ts: one driver that runs the link in whatever
 * global scope it is bundled into (a page or a dedicated Web Worker). The test sends it commands
 * (name + JSON arguments) and gets JSON back; every wait here is for something the link reports
 * (a state, an event, a channel status, a message), re-checked when the link reports anything,
 * bounded by a deadline: never a sleep.
 *
 * Imports the package's main entry only (src/index.ts), as a browser app would.
 */
import { createLink, isAgentDisconnectedError, type Link, type LinkChannel, type LinkPolicyInput } from '../../../src/index.js'

/** What the link reported, in order, as plain data. */
export interface Recorded {
  /** Every public state the link entered, in order (the `state` event). */
  states: string[]
  /** Every event of `onAny`, summarized. */
  events: Array<{ type: string; outcome?: string; reason?: string; terminal?: boolean; status?: string; topic?: string }>
  /** Payloads delivered to the app channel's handler, in order. */
  messages: unknown[]
  /** Statuses of the app channel, in order. */
  channel: string[]
}

/** How a runForever() call ended, as data. */
export type Outcome =
  | { settled: false }
  | { settled: true; ok: true }
  | { settled: true; ok: false; name: string; agentDisconnected: boolean; reasonKind: string | null; message: string }

/** A snapshot of the current link. */
export interface Snapshot extends Recorded {
  state: string
  lastReason: string | null
  channelStatus: string | null
  /** Where the scope runs: 'page' or 'worker'. */
  scope: string
}

/** The commands, their arguments and what they answer. */
export interface Commands {
  /** A fresh link to the simulator (its URL from the scope's query string), key as a socket param. */
  /** `apiKeyIn` left out: the runtime's default (`'param'` in a browser or worker, which cannot send upgrade headers). */
  start(args: { agentId: string; apiKey: string; policy: LinkPolicyInput; apiKeyIn?: 'param' }): string
  /** What createLink() says to `apiKeyIn: 'header'` here: the error's name and message, or 'created'. */
  headerKey(args: { agentId: string; apiKey: string }): string
  /** `await link.connect()`, bounded by `timeoutMs` (default 5 s); answers the state after. */
  connect(args?: { timeoutMs?: number }): Promise<string>
  /** `link.channel(topic)` with `room.on(event, ...)`; answers once the channel is joined. */
  join(args: { topic: string; event: string }): Promise<string>
  /** `await room.push(event, payload)`; answers the reply. */
  push(args: { event: string; payload: Record<string, unknown> }): Promise<unknown>
  /** Waits until `count` messages reached the handler; answers them. */
  messages(args: { count: number; timeoutMs: number }): Promise<unknown[]>
  /**
   * Waits until the link is in `state` and, when given, the channel in `channel` and at least
   * `events.count` events of `events.type` were reported; answers the snapshot then.
   */
  until(args: { state: string; channel?: string; events?: { type: string; count: number }; timeoutMs: number }): Promise<Snapshot>
  /** Starts `link.runForever()` and keeps its outcome under `name`. */
  runForever(args: { name: string }): string
  /** The outcome of runForever `name`: as it is now without `waitMs`, else once settled, waiting up to `waitMs`. */
  outcome(args: { name: string; waitMs?: number }): Promise<Outcome>
  /** `await link.ping({ timeoutMs })`; answers its outcome, with the reason's kind and the disconnected outcome of a `lost`. */
  ping(args: { timeoutMs?: number }): Promise<{ outcome: string; reason?: string; disconnected?: string }>
  /** `await link.disconnect()`; answers the state after. */
  disconnect(): Promise<string>
  /**
   * `link.disconnect()` as a page's `pagehide` handler calls it, after a push of `pushBytes`
   * characters when given (so the socket's send buffer is not empty): answers the link's state and
   * the `readyState` of every WebSocket the scope made (an init script records them in
   * `globalThis.socketsMade`), both read in the same task, before the call's promise is awaited;
   * then awaits it.
   */
  disconnectInTask(args: { pushBytes?: number }): Promise<{ state: string; readyStates: number[] }>
  /** What the current link reported so far. */
  snapshot(): Snapshot
  /** Disconnects every link this scope made (the test's cleanup). */
  disposeAll(): Promise<number>
}

export type CommandName = keyof Commands
/** A command as it crosses postMessage / page.evaluate. */
export interface Call {
  cmd: CommandName
  args?: unknown
}

/** The driver: `run` a command, get its answer (a rejection carries the error's message). */
export interface Driver {
  run(call: Call): Promise<unknown>
}

/** A driver for links to `url`, in a scope named `scope`. */
export function createDriver(url: string, scope: string): Driver {
  const links: Link[] = []
  let link: Link | null = null
  let room: LinkChannel | null = null
  let recorded: Recorded = { states: [], events: [], messages: [], channel: [] }
  const outcomes = new Map<string, Outcome>()
  // Re-checks of pending waits, run after anything is recorded.
  const watchers = new Set<() => void>()
  const changed = () => {
    for (const w of [...watchers]) w()
  }

  const current = (): Link => {
    if (!link) throw new Error('no link: call start first')
    return link
  }

  /** Resolves with `check()`'s value once it is not undefined, re-checked on every change; rejects after `timeoutMs` naming `what`. */
  function waitFor<T>(check: () => T | undefined, timeoutMs: number, what: () => string): Promise<T> {
    const now = check()
    if (now !== undefined) return Promise.resolve(now)
    return new Promise<T>((resolve, reject) => {
      const watcher = () => {
        const value = check()
        if (value === undefined) return
        cleanup()
        resolve(value)
      }
      const timer = setTimeout(() => {
        cleanup()
        reject(new Error(`${scope}: timed out after ${timeoutMs} ms waiting for ${what()}`))
      }, timeoutMs)
      const cleanup = () => {
        clearTimeout(timer)
        watchers.delete(watcher)
      }
      watchers.add(watcher)
    })
  }

  function snapshot(): Snapshot {
    const l = current()
    return {
      scope,
      state: l.state,
      lastReason: l.lastDisconnectReason?.kind ?? null,
      channelStatus: room?.status ?? null,
      states: [...recorded.states],
      events: recorded.events.map((e) => ({ ...e })),
      messages: [...recorded.messages],
      channel: [...recorded.channel],
    }
  }

  const commands: Commands = {
    headerKey({ agentId, apiKey }) {
      try {
        links.push(createLink({ url, agentId, apiKey, apiKeyIn: 'header' }))
        return 'created'
      } catch (error) {
        return `${(error as Error).name}: ${(error as Error).message}`
      }
    },
    start({ agentId, apiKey, policy, apiKeyIn }) {
      recorded = { states: [], events: [], messages: [], channel: [] }
      room = null
      const fresh = createLink({ url, agentId, apiKey, policy, ...(apiKeyIn === undefined ? {} : { apiKeyIn }) })
      links.push(fresh)
      link = fresh
      const mine = recorded
      fresh.onAny((event) => {
        const e: Recorded['events'][number] = { type: event.type }
        if (event.type === 'state') mine.states.push(event.state)
        if (event.type === 'disconnected') Object.assign(e, { outcome: event.outcome, reason: event.reason.kind, terminal: event.terminal })
        if (event.type === 'channel') Object.assign(e, { topic: event.topic, status: event.status })
        mine.events.push(e)
        changed()
      })
      return fresh.state
    },
    async connect(args) {
      const l = current()
      const timeoutMs = args?.timeoutMs ?? 5_000
      const signal = AbortSignal.timeout(timeoutMs)
      try {
        await l.connect({ signal })
      } catch (error) {
        if (!signal.aborted) throw error
        throw new Error(`${scope}: connect() did not resolve within ${timeoutMs} ms (state ${l.state}, last reason ${l.lastDisconnectReason?.kind ?? 'none'})`)
      }
      return l.state
    },
    async join({ topic, event }) {
      const channel = current().channel(topic)
      room = channel
      const mine = recorded
      channel.on(event, (payload) => {
        mine.messages.push(payload)
        changed()
      })
      channel.onStatus((status) => {
        mine.channel.push(status)
        changed()
      })
      return waitFor(() => (channel.status === 'joined' ? channel.status : undefined), 4_000, () => `${topic} joined (status ${channel.status})`)
    },
    async push({ event, payload }) {
      if (!room) throw new Error('no channel: call join first')
      return room.push(event, payload)
    },
    messages({ count, timeoutMs }) {
      return waitFor(() => (recorded.messages.length >= count ? [...recorded.messages] : undefined), timeoutMs, () => `${count} messages (have ${recorded.messages.length})`)
    },
    until({ state, channel, events, timeoutMs }) {
      const l = current()
      const seen = () => (events ? recorded.events.filter((e) => e.type === events.type).length : 0)
      return waitFor(
        () => (l.state === state && (channel === undefined || room?.status === channel) && (!events || seen() >= events.count) ? snapshot() : undefined),
        timeoutMs,
        () =>
          `state ${state}${channel ? ` and channel ${channel}` : ''}${events ? ` and ${events.count} ${events.type} events` : ''} ` +
          `(state ${l.state}, channel ${room?.status ?? 'none'}${events ? `, ${seen()} ${events.type} events` : ''})`,
      )
    },
    runForever({ name }) {
      outcomes.set(name, { settled: false })
      current()
        .runForever()
        .then(
          () => outcomes.set(name, { settled: true, ok: true }),
          (error: unknown) =>
            outcomes.set(name, {
              settled: true,
              ok: false,
              name: error instanceof Error ? error.name : typeof error,
              agentDisconnected: isAgentDisconnectedError(error),
              reasonKind: isAgentDisconnectedError(error) ? error.reason.kind : null,
              message: error instanceof Error ? error.message : String(error),
            }),
        )
        .finally(changed)
      return name
    },
    async outcome({ name, waitMs }) {
      const now = outcomes.get(name)
      if (!now) throw new Error(`${scope}: no runForever named ${name}`)
      if (waitMs === undefined) return now
      return waitFor(
        () => {
          const o = outcomes.get(name)
          return o?.settled ? o : undefined
        },
        waitMs,
        () => `runForever ${name} to settle`,
      )
    },
    async disconnectInTask({ pushBytes }) {
      if (pushBytes !== undefined) void room?.push('last', { blob: 'x'.repeat(pushBytes) }).catch(() => {})
      const stopping = current().disconnect()
      const made = (globalThis as unknown as { socketsMade?: Array<{ readyState: number }> }).socketsMade ?? []
      const seen = { state: current().state, readyStates: made.map((ws) => ws.readyState) }
      await stopping
      return seen
    },
    async ping({ timeoutMs }) {
      const result = await current().ping(timeoutMs === undefined ? {} : { timeoutMs })
      if (result.outcome === 'lost') return { outcome: result.outcome, reason: result.reason.kind, disconnected: result.disconnected }
      return { outcome: result.outcome }
    },
    async disconnect() {
      await current().disconnect()
      return current().state
    },
    snapshot,
    async disposeAll() {
      await Promise.all(links.map((l) => l.disconnect()))
      return links.length
    },
  }

  return {
    async run({ cmd, args }) {
      const command = commands[cmd] as ((a: unknown) => unknown) | undefined
      if (typeof command !== 'function') throw new Error(`${scope}: unknown command ${String(cmd)}`)
      return command(args)
    },
  }
}

/** The simulator URL a scope was given: `?sim=<ws url>` on its own location. */
export function simulatorUrl(search: string): string {
  const url = new URLSearchParams(search).get('sim')
  if (!url) throw new Error('no ?sim= in the query string')
  return url
}
