/**
 * The control-signal delivery statechart: `agent.control` signals reach the host's handler once
 * each, in arrival order, one at a time. It is its own chart, told of signals by the connection
 * chart, so a slow handler holds up only the signals queued behind it: a supersede or a close is
 * handled by the connection chart at once. It runs for the life of a link (the dedupe window spans
 * sessions); its I/O (`deliver`, `abandonDelivery`, `report`) is carried out by the link's runtime.
 *
 *   idle --control.enqueue--> delivering (entry: deliver the head) --control.delivered | deliveryFailed--> idle | delivering
 *
 * A signal already delivered or queued with the same correlation id is dropped and reported
 * (the platform does not deduplicate; see docs/field-notes.md "agent.control payload"); so is one
 * that arrives while `maxQueued` signals (or `maxQueuedBytes` of them) wait behind a handler that
 * has not settled.
 */
import { assign, enqueueActions, setup } from 'xstate'
import type { ControlPolicy } from './control-policy.js'
import { copyText } from './types.js'

/** What the chart needs of a control signal; the full schema is `ControlSignal` in src/protocol.ts. */
export interface SignalLike {
  /** The platform's correlation id; `null` or missing means "never deduplicate". */
  readonly correlationId?: string | null
}

/**
 * Correlation ids up to this many characters are remembered as they are; a longer one (the
 * platform's are UUIDs, 36) by {@link dedupeKey}'s digest, so the `dedupeWindow` ids a link
 * remembers stay small whatever a server sends (each id may be as long as a frame).
 */
export const MAX_REMEMBERED_ID_CHARS = 128

/** A 32-bit value as 8 hex digits. */
const hex8 = (value: number) => (value >>> 0).toString(16).padStart(8, '0')

/**
 * The key a correlation id is remembered by: the id itself when it has at most
 * {@link MAX_REMEMBERED_ID_CHARS} characters, else its first 64 characters, its length and two
 * 32-bit FNV-1a digests of it (different offset bases; 8 hex digits each), about 100 characters. Two long ids share a
 * key only if they agree in all of those: a server could make one of its own signals look like a
 * resend, which it could do by resending.
 */
export function dedupeKey(id: string): string {
  if (id.length <= MAX_REMEMBERED_ID_CHARS) return id
  let a = 0x811c9dc5
  let b = 0x050c5d1f
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i)
    a = Math.imul(a ^ c, 0x01000193)
    b = Math.imul(b ^ c, 0x01000193)
  }
  // The start copied (copyText): `id.slice()` would be a V8 sliced string, which keeps the whole
  // id alive (measured: about 0.4 MB kept per 7.5 MB id). Not cut inside a surrogate pair.
  return `${copyText(id, 64)}…#${id.length}#${hex8(a)}${hex8(b)}`
}

export { DEFAULT_CONTROL_POLICY, type ControlPolicy } from './control-policy.js'

/** Events of the control delivery chart. */
export type ControlEvent =
  /**
   * Connection chart: a valid `agent.control` signal arrived on the current transport of session
   * `epoch`; `bytes`: the size of its frame as read (see `maxQueuedBytes`), absent counts 0.
   */
  | { type: 'control.enqueue'; signal: SignalLike; sequence: number; epoch: number; bytes?: number }
  /** Connection chart: the host stopped the session; signals not yet handed over are dropped. */
  | { type: 'control.flush' }
  /** Connection chart: a new session starts; signals of the old one still waiting are dropped and a handler still running is no longer waited for (its signal counts as delivered). */
  | { type: 'control.reset' }
  /** Link: the host's handler settled for the signal of arrival number `sequence`. */
  | { type: 'control.delivered'; sequence: number }
  /** Link: the host's handler threw or rejected for the signal of arrival number `sequence`. */
  | { type: 'control.deliveryFailed'; sequence: number; error: unknown }
  /** Runtime: the `deliver` action itself threw (a phoenix-link bug): that signal is reported failed. */
  | { type: 'io.failed'; action: string; error: unknown }

/** What the control delivery chart reports to the connection chart. */
export type ControlReport =
  /** A signal's correlation id was seen before; it is not delivered again. */
  | { type: 'control.duplicate'; signal: SignalLike; sequence: number }
  /** The host's handler threw or rejected for this signal; delivery goes on with the next one. */
  | { type: 'control.handlerFailed'; signal: SignalLike; sequence: number; error: unknown }
  /**
   * Signals dropped before their turn: by a flush (`stopped`: the host stopped the session; the one
   * in the handler finishes), a reset (`reset`: a new session started; the one in the handler was
   * delivered, so it is not among them: its AbortSignal aborts and a resend of it is a duplicate) or a
   * full queue (`overflow`: the signal that arrived when `maxQueued` were waiting, or that would
   * have taken the waiting ones past `maxQueuedBytes`).
   */
  | { type: 'control.dropped'; signals: QueuedSignal[]; cause: ControlDropCause }

/** Why queued control signals were dropped; see {@link ControlReport}. */
export type ControlDropCause = 'stopped' | 'reset' | 'overflow'

/** A signal waiting for delivery, with its arrival sequence number. */
export interface QueuedSignal {
  signal: SignalLike
  sequence: number
  /** Session epoch the signal arrived in. */
  epoch: number
  /** The size of its frame as read (characters of a text frame), counted against `maxQueuedBytes`. */
  bytes: number
  /**
   * The key its correlation id is remembered by ({@link dedupeKey}), or null (no id: never
   * deduplicated), computed once as it arrives: a long id is hashed once, not again for each
   * signal that arrives after it.
   */
  key: string | null
}

/** Context of the control delivery chart. */
export interface ControlContext {
  policy: ControlPolicy
  /** Signals received and not yet handed to the handler, oldest first. */
  queue: QueuedSignal[]
  /** Recent correlation ids as {@link dedupeKey} keys, oldest first, at most `policy.dedupeWindow`. */
  seen: string[]
}

/** Input of the control delivery chart. */
export interface ControlInput {
  policy: ControlPolicy
}

function forget(seen: string[], dropped: QueuedSignal[]): string[] {
  const keys = new Set(dropped.map((q) => q.key))
  return seen.filter((key) => !keys.has(key))
}

/** The key a signal's correlation id is remembered by ({@link dedupeKey}), or null: never deduplicated. */
const correlationOf = (signal: SignalLike) =>
  typeof signal.correlationId === 'string' && signal.correlationId !== '' ? dedupeKey(signal.correlationId) : null

/** The size of the signals waiting behind the one in the handler (the head of the queue). */
function waitingBytes(context: ControlContext): number {
  let total = 0
  for (let i = 1; i < context.queue.length; i++) total += context.queue[i]!.bytes
  return total
}

type Enqueue = Extract<ControlEvent, { type: 'control.enqueue' }>
/** The event of an action or guard that only `control.enqueue` transitions name. */
const enqueued = (event: unknown) => event as Enqueue

/** The report of the signals waiting behind the one in the handler, dropped with `cause`. */
function waitingDropped(context: ControlContext, cause: ControlDropCause): ControlReport {
  return { type: 'control.dropped', signals: context.queue.slice(1), cause }
}

/** Why a delivery event settles the head of the queue: it names the signal being delivered now. */
type Settled = Extract<ControlEvent, { type: 'control.delivered' | 'control.deliveryFailed' }>

/** The control delivery statechart. Its I/O actions (`deliver`, `abandonDelivery`, `report`) are carried out by the link's runtime. */
export const controlMachine = setup({
  types: {
    context: {} as ControlContext,
    events: {} as ControlEvent,
    input: {} as ControlInput,
  },
  guards: {
    /**
     * The signal's correlation id is among the `dedupeWindow` most recent ones, or is that of the
     * signal in the handler or one waiting (whatever the window: a window smaller than the queue
     * must not let a resend of a queued signal through). A window of 0 turns it off.
     */
    isDuplicate: ({ context, event }) => {
      if (context.policy.dedupeWindow === 0) return false
      const key = correlationOf(enqueued(event).signal)
      if (key === null) return false
      return context.seen.includes(key) || context.queue.some((queued) => queued.key === key)
    },
    /**
     * A handler runs, and `maxQueued` signals wait behind it, or the arriving one would take the
     * waiting ones past `maxQueuedBytes` (in idle the queue is empty: a signal goes to the handler).
     */
    isQueueFull: ({ context, event }) =>
      context.queue.length > context.policy.maxQueued ||
      (context.queue.length > 0 &&
        (context.policy.maxQueuedBytes === 0 || waitingBytes(context) + (enqueued(event).bytes ?? 0) > context.policy.maxQueuedBytes)),
    hasQueued: ({ context }) => context.queue.length > 0,
    hasWaiting: ({ context }) => context.queue.length > 1,
    /**
     * The handler that settled is the one running now: a delivery abandoned by a new session
     * (control.reset) may still settle later, for a signal no longer at the head.
     */
    // Named in `delivering` only, where the queue holds the signal in the handler.
    isCurrentDelivery: ({ context, event }) => (event as Settled).sequence === context.queue[0]!.sequence,
  },
  actions: {
    enqueue: assign(({ context, event }) => {
      const { signal, sequence, epoch, bytes } = enqueued(event)
      const key = correlationOf(signal)
      const window = context.policy.dedupeWindow
      const seen = key === null || window === 0 ? context.seen : [...context.seen, key].slice(-window)
      return { queue: [...context.queue, { signal, sequence, epoch, bytes: bytes ?? 0, key }], seen }
    }),
    // A dropped signal was never delivered: forget its correlation id so a resend is delivered. The
    // head of the queue is in the handler (named in delivering only): it was delivered, and stays seen.
    dropWaiting: assign(({ context }) => ({ queue: context.queue.slice(0, 1), seen: forget(context.seen, context.queue.slice(1)) })),
    /** Reports the signals waiting behind the one in the handler as dropped by a flush (the host stopped). */
    reportWaitingStopped: enqueueActions(({ context, enqueue }) => enqueue({ type: 'report', params: waitingDropped(context, 'stopped') })),
    /** Reports the signals waiting behind the one in the handler, if any, as dropped by a new session. */
    reportWaitingReset: enqueueActions(({ context, enqueue }) => {
      if (context.queue.length > 1) enqueue({ type: 'report', params: waitingDropped(context, 'reset') })
    }),
    reportOverflow: enqueueActions(({ event, enqueue }) => {
      const { signal, sequence, epoch, bytes } = enqueued(event)
      enqueue({ type: 'report', params: { type: 'control.dropped', signals: [{ signal, sequence, epoch, bytes: bytes ?? 0, key: correlationOf(signal) }], cause: 'overflow' } })
    }),
    dequeue: assign({ queue: ({ context }) => context.queue.slice(1) }),
    reportDuplicate: enqueueActions(({ event, enqueue }) =>
      enqueue({ type: 'report', params: { type: 'control.duplicate', signal: enqueued(event).signal, sequence: enqueued(event).sequence } }),
    ),
    // Named on control.deliveryFailed and io.failed only: the head of the queue is the signal that failed.
    reportHandlerFailed: enqueueActions(({ context, event, enqueue }) =>
      enqueue({
        type: 'report',
        params: { type: 'control.handlerFailed', signal: context.queue[0]!.signal, sequence: context.queue[0]!.sequence, error: (event as { error?: unknown }).error },
      }),
    ),
    /** Hands the head of the queue to the host's handler (entry of `delivering`). */
    deliverHead: enqueueActions(({ context, enqueue }) => enqueue({ type: 'deliver', params: context.queue[0]! })),
    /** A new session: the handler still running is no longer waited for; its AbortSignal aborts. */
    abandonHead: enqueueActions(({ context, enqueue }) => enqueue({ type: 'abandonDelivery', params: { sequence: context.queue[0]!.sequence } })),
    /**
     * I/O: calls the host's handler with one signal; the link answers `control.delivered` or
     * `control.deliveryFailed` with its sequence when the handler settles.
     */
    deliver: (_: unknown, _signal: QueuedSignal) => {},
    /** I/O: aborts the AbortSignal handed to the handler of signal `sequence`. */
    abandonDelivery: (_: unknown, _delivery: { sequence: number }) => {},
    /** I/O: hands a report to the connection chart. */
    report: (_: unknown, _report: ControlReport) => {},
  },
}).createMachine({
  id: 'control',
  context: ({ input }) => ({ policy: input.policy, queue: [], seen: [] }),
  initial: 'idle',
  on: {
    'control.enqueue': [
      { guard: 'isDuplicate', actions: 'reportDuplicate' },
      // Dropped, not queued: its correlation id is not remembered, so a resend is delivered.
      { guard: 'isQueueFull', actions: 'reportOverflow' },
      { actions: 'enqueue' },
    ],
  },
  states: {
    /** Nothing to deliver. */
    idle: {
      description: 'Nothing to deliver.',
      // The queue is empty here: a signal queued in idle leaves for delivering at once.
      always: { guard: 'hasQueued', target: 'delivering' },
    },
    /** The handler is running for the head of the queue. */
    delivering: {
      description: "The host's handler runs for the oldest queued signal; others wait.",
      on: {
        // The signal in the handler finishes; the ones waiting behind it are dropped and reported.
        'control.flush': { guard: 'hasWaiting', actions: ['reportWaitingStopped', 'dropWaiting'] },
        // A new session does not wait for a handler of the old one: it is abandoned (its
        // AbortSignal aborts), and the signals waiting behind it are dropped and reported. The one
        // in the handler was delivered: its correlation id stays seen, so a resend in the new
        // session is a duplicate (delivered once).
        'control.reset': {
          target: 'idle',
          actions: ['abandonHead', 'reportWaitingReset', 'dropWaiting', 'dequeue'],
        },
        'control.delivered': { guard: 'isCurrentDelivery', target: 'idle', actions: 'dequeue' },
        'control.deliveryFailed': { guard: 'isCurrentDelivery', target: 'idle', actions: ['reportHandlerFailed', 'dequeue'] },
        // The deliver action itself failed: that signal is reported as a handler failure, and delivery goes on.
        'io.failed': { target: 'idle', actions: ['reportHandlerFailed', 'dequeue'] },
      },
      entry: 'deliverHead',
    },
  },
})
