/**
 * Test models of the channel and reconnect charts: the stimuli of each state, derived from the
 * shipped chart's own snapshot. `phoenix-link paths --chart channel|reconnect` prints their paths;
 * test/model runs them on the real wire.
 */
import type { AnyStateMachine, EventObject, SnapshotFrom } from 'xstate'
import { channelMachine, DEFAULT_CHANNEL_POLICY } from '../../../machines/channel.js'
import { DEFAULT_RECONNECT_POLICY, reconnectMachine } from '../../../machines/reconnect.js'
import { classifyChannelClose, classifyClose, classifyJoinError, classifyUpgrade } from '../../reasons.js'
import type { StimulusKind } from './connection-model.js'

/** A small chart's model. */
export interface ChartModel<M extends AnyStateMachine, E> {
  machine: M
  input: unknown
  stimuli(snapshot: SnapshotFrom<M>, mode: 'wire' | 'pure'): Array<{ name: string; kind: StimulusKind; event: EventObject }>
  serialize(snapshot: SnapshotFrom<M>): string
  edge(snapshot: SnapshotFrom<M>, stimulus: string): string
  expect(snapshot: SnapshotFrom<M>): E
}

const ENV = { now: () => 0, monotonic: () => 0, random: () => 0.5 }
const after = (delay: string, stateId: string) => ({ type: `xstate.after.${delay}.${stateId}` })

/** What a channel path step expects: the channel chart's state and the kind of its last reason. */
export interface ChannelExpectation {
  value: unknown
  reason: string | null
}

type ChannelSnapshot = SnapshotFrom<typeof channelMachine>

/** The topic channel paths use. */
export const MODEL_TOPIC = 'room:model'

/** The channel chart's model. */
export const channelModel: ChartModel<typeof channelMachine, ChannelExpectation> = {
  machine: channelMachine,
  input: { topic: MODEL_TOPIC, policy: DEFAULT_CHANNEL_POLICY, env: ENV },
  stimuli(snapshot: ChannelSnapshot, mode) {
    const c = snapshot.context
    const origin = { topic: c.topic, generation: c.generation, attachId: c.attachId }
    const value = JSON.stringify(snapshot.value)
    const out: Array<{ name: string; kind: StimulusKind; event: EventObject }> = []
    const add = (name: string, kind: StimulusKind, event: EventObject & Record<string, unknown>) => out.push({ name, kind, event })
    if (snapshot.status !== 'active') return out
    if (value === '"detached"') {
      // The attach id is monotonic, so it stands in for the next transport's generation.
      add('transport up', 'server', { type: 'transport.up', generation: c.attachId + 1 })
      add('host leave', 'host', { type: 'host.leave' })
      return out
    }
    add('transport down', 'server', { type: 'transport.down' })
    if (value.includes('joining')) {
      add('join ok', 'server', { type: 'channel.joinOk', ...origin })
      add('join refused', 'server', { type: 'channel.joinError', reason: classifyJoinError({ reason: 'unauthorized' }, c.generation, 0), ...origin })
      add('join crashed', 'server', { type: 'channel.joinError', reason: classifyJoinError({ reason: 'join crashed' }, c.generation, 0), ...origin })
      add('join timeout', 'clock', after('joinTimeout', 'channel.attached.live.joining'))
      add('host leave', 'host', { type: 'host.leave' })
      if (c.attachId > 1) add('stale join ok', 'inject', { type: 'channel.joinOk', ...origin, attachId: c.attachId - 1 })
      // The host's params function threw when this attempt started (the wire runner arms it one
      // step ahead: the function is read as the attempt starts).
      add('params throw', 'server', {
        type: 'channel.attachFailed',
        reason: { kind: 'other', retryable: true, detail: 'params threw', generation: c.generation, at: 0 },
        ...origin,
      })
    } else if (value.includes('joined')) {
      add('phx_error', 'server', { type: 'channel.error', ...origin })
      add('phx_close', 'server', { type: 'channel.close', reason: classifyChannelClose({}, c.generation, 0), ...origin })
      add('host leave', 'host', { type: 'host.leave' })
      add('join holds', 'clock', after('rejoinStableAfter', 'channel.attached.live.joined'))
    } else if (value.includes('leaving')) {
      add('leave settles', 'auto', { type: 'channel.left', ...origin })
      if (mode === 'pure') add('leave timeout', 'clock', after('leaveTimeout', 'channel.attached.live.leaving'))
      if (mode === 'wire') out.splice(0, out.length - 1) // only the leave's own answer happens on the wire
    } else if (value.includes('errored')) {
      add('rejoin delay passes', 'clock', after('rejoinDelay', 'channel.attached.errored'))
      add('host leave', 'host', { type: 'host.leave' })
    }
    return out
  },
  serialize: (snapshot) => `${snapshot.status}|${JSON.stringify(snapshot.value)}|${snapshot.context.reason?.kind ?? '-'}|${snapshot.context.attachId > 1}`,
  edge: (snapshot, stimulus) => `${JSON.stringify(snapshot.value)}|${snapshot.context.attachId > 1}|${stimulus}`,
  expect: (snapshot) => ({ value: snapshot.status === 'done' ? snapshot.value : snapshot.value, reason: snapshot.context.reason?.kind ?? null }),
}

/** What a reconnect path step expects: the reconnect chart's state and its counters. */
export interface ReconnectExpectation {
  value: unknown
  attempt: number
  rapidStreak: number
  /** Whether the current wait has a part the server asked for (Retry-After): a retry now then holds until it ends. */
  serverFloor: boolean
}

type ReconnectSnapshot = SnapshotFrom<typeof reconnectMachine>

/** The reconnect policy of the model: small limits, so slow-down and give-up paths are short. */
export const MODEL_RECONNECT_POLICY = { ...DEFAULT_RECONNECT_POLICY, rapidLimit: 2, maxAttempts: 3, rapidWindowMs: 1_000, stableAfterMs: 5_000 }

/** Whether a wait has a part the server asked for, for the states where a retry now reads it (elsewhere it is a leftover of the last wait). */
function floorOf(snapshot: ReconnectSnapshot): string {
  return snapshot.matches('waiting') || snapshot.matches('suspended') ? `|f${snapshot.context.floorMs > 0}` : ''
}

/** The reconnect chart's model. */
export const reconnectModel: ChartModel<typeof reconnectMachine, ReconnectExpectation> = {
  machine: reconnectMachine,
  input: { policy: MODEL_RECONNECT_POLICY, env: ENV },
  stimuli(snapshot: ReconnectSnapshot) {
    const out: Array<{ name: string; kind: StimulusKind; event: EventObject }> = []
    const add = (name: string, kind: StimulusKind, event: EventObject & Record<string, unknown>) => out.push({ name, kind, event })
    if (snapshot.status !== 'active') return out
    const value = JSON.stringify(snapshot.value)
    if (value === '"idle"') {
      add('open', 'server', { type: 'reconnect.opened' })
      add('connect failure', 'server', { type: 'reconnect.lost', reason: classifyUpgrade({ status: 503 }, 1, 0) })
      // Refused with a Retry-After: the part of the wait a host's retry now cannot cut.
      add('connect refused, Retry-After', 'server', { type: 'reconnect.lost', reason: classifyUpgrade({ status: 429, retryAfter: '2' }, 1, 0) })
    } else if (value.includes('rapidness')) {
      add('loss', 'server', { type: 'reconnect.lost', reason: classifyClose({ code: 1000, reason: '' }, 1, 0) })
      if (value.includes('young')) add('rapid window passes', 'clock', after('rapidWindow', 'reconnect.up.rapidness.young'))
      // stableAfterMs >= rapidWindowMs (validateReconnectPolicy), so the stable window ends second.
      else if (value.includes('settling')) add('stable window passes', 'clock', after('stableAfter', 'reconnect.up.stability.settling'))
    } else if (value === '"waiting"') {
      add('backoff passes', 'clock', after('backoffDelay', 'reconnect.waiting'))
      add('retry now', 'host', { type: 'reconnect.retryNow' })
    } else if (value === '"suspended"') {
      add('cooldown passes', 'clock', after('cooldown', 'reconnect.suspended'))
      add('retry now', 'host', { type: 'reconnect.retryNow' })
    } else if (value === '"holding"') {
      add('server floor passes', 'clock', after('floorRemaining', 'reconnect.holding'))
    }
    return out
  },
  serialize: (snapshot) => `${snapshot.status}|${JSON.stringify(snapshot.value)}|a${snapshot.context.attempt}|r${snapshot.context.rapidStreak}${floorOf(snapshot)}`,
  edge: (snapshot, stimulus) => `${JSON.stringify(snapshot.value)}|a${snapshot.context.attempt}|r${snapshot.context.rapidStreak}${floorOf(snapshot)}|${stimulus}`,
  expect: (snapshot) => ({ value: snapshot.value, attempt: snapshot.context.attempt, rapidStreak: snapshot.context.rapidStreak, serverFloor: snapshot.context.floorMs > 0 }),
}
