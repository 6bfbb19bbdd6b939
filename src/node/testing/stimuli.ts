/**
 * The stimulus vocabulary of the lifecycle test kit: what a test world does at each step of a
 * generated path, as data (`{ type: 'server.close', code: 1000 }`, `{ type: 'upgrade.refuse',
 * status: 403 }`, `{ type: 'clock.advance', delay: 'backoff', ms: null }`), so a path can be
 * stored, printed (`phoenix-link paths --json`), sent to another process, or applied by a runner
 * in any language through the simulator's HTTP routes (docs/simulator-http.md).
 *
 * The model (src/node/model/connection-model.ts) names each stimulus (`close 1000`); this module
 * maps those names onto the vocabulary and refuses a name it does not know, so a stimulus added
 * to the model without a world action fails `npm test` (test/unit/testing.test.ts).
 */
import type { EventObject } from 'xstate'
import { MODEL_UPGRADE_STATUSES, type StimulusKind } from '../model/connection-model.js'
import { DEFAULT_CONNECTION_POLICY } from '../../../machines/connection-policy.js'

/**
 * A chart delay a `clock.advance` step lets pass. `backoff` (the reconnect chart's drawn delay,
 * or a suspended link's cooldown) and `controlRejoin` (the control channel's rejoin after a
 * crash) are drawn with jitter, so their `ms` is null: the runner reads the delay the link
 * scheduled. The timeouts have fixed lengths, given for the default policy; a runner uses the
 * link's own `policy.connection` value.
 */
export type ChartDelay = 'backoff' | 'controlRejoin' | 'connectTimeout' | 'joinTimeout' | 'leaveTimeout'

/** The topic a channel stimulus is about; `control` is the agent's `agent_control:<agent_id>`. */
export type StimulusTopic = 'control'

/**
 * One action of the test world. Every member names who acts by its prefix:
 * - `upgrade.*`: the server answers the socket's held HTTP upgrade (the runner waits until the
 *   upgrade has arrived before answering it): `accept` (101), `refuse` with an HTTP status (and
 *   `Retry-After` in seconds for 429/503), or `drop` (the TCP connection ends unanswered).
 * - `server.*`: the server acts on the open socket: `close` with an RFC 6455 close code (section
 *   7.4.1), `drop` (the TCP connection ended, no close frame: the client sees 1006; `abort` without `reset`),
 *   `reset` (the TCP connection reset, as Phoenix's close is when the client's bytes are unread:
 *   `abort` with `reset`; the link had just sent, so it may have lost a supersede push and
 *   probes; docs/field-notes.md "A reset loses what it overtakes"), `stall` (stops reading and
 *   answering, so the client's heartbeat times out), `supersede` (the platform's supersede push
 *   on the control channel; the socket is left open, so only the client's own rule ends it),
 *   `malformed` (a frame the V2 JSON serializer cannot decode).
 * - `join.reply`: the server answers the held `phx_join` of `topic` (Phoenix channel.ex replies).
 * - `channel.error` / `channel.close`: the server-side channel process crashes (`phx_error`) or
 *   ends (`phx_close`), the socket stays up.
 * - `control.signal`: `agent.control` pushes on the control channel: `once` (one signal),
 *   `duplicate` (the same correlation id twice: handed to the host once), `handler-throws` (the
 *   host's handler throws; delivery goes on), `queued` (three signals behind a slow handler:
 *   handed over once each, in order). The runner's step lasts until the host's own handler
 *   returned for each signal it was handed (`handler-throws`: the kit's throw, before it).
 * - `clock.advance`: chart time passes by the named delay (on the link's SimulatedClock).
 * - `host.*`: the host calls `connect()`, `disconnect()`, or aborts a `runForever()` wait.
 * - `adapter.late`: a late event of an older transport or session, delivered into the running
 *   link's chart exactly as a delayed adapter callback would (`event` is the chart event).
 * - `await`: nothing to do; the chart's own follow-up (a leave settling, the reconnect chart's
 *   answer) happens by itself.
 */
export type LifecycleStimulus =
  | { type: 'upgrade.accept' }
  | { type: 'upgrade.refuse'; status: number; retryAfterS?: number }
  | { type: 'upgrade.drop' }
  | { type: 'server.close'; code: number }
  | { type: 'server.drop' }
  | { type: 'server.reset' }
  | { type: 'server.stall' }
  | { type: 'server.supersede' }
  | { type: 'server.malformed'; data: string }
  | { type: 'join.reply'; topic: StimulusTopic; status: 'ok' }
  | { type: 'join.reply'; topic: StimulusTopic; status: 'error'; reason: string }
  | { type: 'channel.error'; topic: StimulusTopic }
  | { type: 'channel.close'; topic: StimulusTopic }
  | { type: 'control.signal'; delivery: 'once' | 'duplicate' | 'handler-throws' | 'queued' }
  | { type: 'clock.advance'; delay: ChartDelay; ms: number | null }
  | { type: 'host.connect' }
  | { type: 'host.disconnect' }
  | { type: 'host.cancelWait' }
  | { type: 'adapter.late'; what: 'stale close' | 'late supersede' | 'stale supersede' | 'ambiguous supersede' | 'earlier-session supersede'; event: EventObject }
  | { type: 'await'; what: string }

/** Every `type` of {@link LifecycleStimulus}. */
export type LifecycleStimulusType = LifecycleStimulus['type']

/** The frame a `server.malformed` step sends: not JSON. */
export const MALFORMED_FRAME = '[not json'

const SIGNALS: Record<string, 'once' | 'duplicate' | 'handler-throws' | 'queued'> = {
  'control signal': 'once',
  'duplicate signal': 'duplicate',
  'failing signal': 'handler-throws',
  'queued signals': 'queued',
}

const DELAYS: Record<string, ChartDelay> = {
  'backoff elapsed': 'backoff',
  'rejoin delay': 'controlRejoin',
  'connect timeout': 'connectTimeout',
  'join timeout': 'joinTimeout',
  'leave timeout': 'leaveTimeout',
}

function delayMs(delay: ChartDelay): number | null {
  if (delay === 'connectTimeout') return DEFAULT_CONNECTION_POLICY.connectTimeoutMs
  if (delay === 'joinTimeout') return DEFAULT_CONNECTION_POLICY.joinTimeoutMs
  if (delay === 'leaveTimeout') return DEFAULT_CONNECTION_POLICY.leaveTimeoutMs
  return null
}

/**
 * The world action of a model stimulus: its stable name (`close 1000`), its kind and its chart
 * event, as {@link LifecycleStimulus}. `state` is the public link state the stimulus is applied
 * in (a `drop` while connecting is an unanswered upgrade; later, the TCP connection ended with no close frame).
 *
 * @throws {Error} for a name the vocabulary has no action for.
 */
export function stimulusOf(name: string, kind: StimulusKind, event: EventObject, state: string): LifecycleStimulus {
  if (kind === 'auto') return { type: 'await', what: name }
  if (kind === 'inject') {
    if (name === 'stale close' || name === 'late supersede' || name === 'stale supersede' || name === 'ambiguous supersede' || name === 'earlier-session supersede') return { type: 'adapter.late', what: name, event }
  }
  if (kind === 'clock') {
    const delay = DELAYS[name]
    if (delay) return { type: 'clock.advance', delay, ms: delayMs(delay) }
  }
  if (kind === 'host') {
    if (name === 'host connect') return { type: 'host.connect' }
    if (name === 'host disconnect') return { type: 'host.disconnect' }
    if (name === 'cancelled wait') return { type: 'host.cancelWait' }
  }
  if (kind === 'server') {
    if (name === 'open') return { type: 'upgrade.accept' }
    if (name === 'drop') return state === 'connecting' ? { type: 'upgrade.drop' } : { type: 'server.drop' }
    const upgrade = /^upgrade (\d{3})$/.exec(name)
    if (upgrade) {
      const status = Number(upgrade[1])
      if (!(MODEL_UPGRADE_STATUSES as readonly number[]).includes(status)) throw new Error(`no world action for stimulus ${JSON.stringify(name)}`)
      return status === 429 || status === 503 ? { type: 'upgrade.refuse', status, retryAfterS: 1 } : { type: 'upgrade.refuse', status }
    }
    const close = /^close (\d{4})$/.exec(name)
    if (close) return { type: 'server.close', code: Number(close[1]) }
    if (name === 'reset') return { type: 'server.reset' }
    if (name === 'heartbeat timeout') return { type: 'server.stall' }
    if (name === 'supersede') return { type: 'server.supersede' }
    if (name === 'malformed frame') return { type: 'server.malformed', data: MALFORMED_FRAME }
    if (name === 'join ok') return { type: 'join.reply', topic: 'control', status: 'ok' }
    if (name === 'join refused') return { type: 'join.reply', topic: 'control', status: 'error', reason: 'unauthorized' }
    if (name === 'join crashed') return { type: 'join.reply', topic: 'control', status: 'error', reason: 'join crashed' }
    if (name === 'control phx_error') return { type: 'channel.error', topic: 'control' }
    if (name === 'control phx_close') return { type: 'channel.close', topic: 'control' }
    const delivery = SIGNALS[name]
    if (delivery) return { type: 'control.signal', delivery }
  }
  throw new Error(`no world action for stimulus ${JSON.stringify(name)} (${kind})`)
}
