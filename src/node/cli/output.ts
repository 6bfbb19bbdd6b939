/**
 * How the CLI prints: one line per lifecycle event, readable by a person, or with `--json` one
 * JSON object per line (`{"t": ms, "source": ..., "type": ..., ...}`) for machines.
 */
import type { LinkEvent } from '../../link.js'
import { describeReason, type DisconnectReason } from '../../reasons.js'
import { visibleLine } from '../visible.js'

/** A line printer shared by the CLI commands. */
export interface Output {
  /** A lifecycle event from `source` (e.g. `link A`, `simulator`). */
  event(source: string, type: string, fields: Record<string, unknown>, human: string): void
  /** A heading for a step of a scripted run. */
  step(title: string): void
  /** Milliseconds since the output started. */
  elapsed(): number
}

/** Makes an output to `write` (stdout by default). */
export function createOutput(json: boolean, write: (line: string) => void = (l) => process.stdout.write(`${l}\n`)): Output {
  const started = performance.now()
  const elapsed = () => Math.round(performance.now() - started)
  return {
    elapsed,
    event(source, type, fields, human) {
      if (json) write(JSON.stringify({ t: elapsed(), source, type, ...fields }))
      // What a line quotes may come from outside (a trace's labels, an agent id, a server's reason):
      // no terminal escape and no line break of its own get through.
      else write(`${String(elapsed()).padStart(6)} ms  ${visibleLine(source.padEnd(10))} ${visibleLine(human)}`)
    },
    step(title) {
      if (json) write(JSON.stringify({ t: elapsed(), source: 'demo', type: 'step', title }))
      else write(`\n         ▸ ${title}`)
    },
  }
}

/** Characters of a reason's `raw` (a supersede's payload, kept whole in the reason) a line prints. */
export const RAW_OUTPUT_CHARS = 1000

/**
 * A reason as a line prints it: a `raw` whose JSON is over {@link RAW_OUTPUT_CHARS} characters
 * (a server's megabyte supersede payload) is replaced by `{ omitted }`, saying how long it was;
 * the reason's other fields are already cut (src/reasons.ts `REASON_TEXT_LIMIT`).
 */
export function reasonForOutput(reason: DisconnectReason): DisconnectReason {
  if (!('raw' in reason) || reason.raw === undefined) return reason
  let length: number
  try {
    length = JSON.stringify(reason.raw)?.length ?? 0
  } catch {
    length = Number.POSITIVE_INFINITY
  }
  if (length <= RAW_OUTPUT_CHARS) return reason
  const omitted = Number.isFinite(length) ? `${length} characters of JSON, over the ${RAW_OUTPUT_CHARS} a line prints` : 'a payload JSON cannot write'
  return { ...reason, raw: reason.kind === 'other' ? `(omitted: ${omitted})` : { omitted } } as DisconnectReason
}

/** The line for one link event, or null for events not worth a line. */
export function describeLinkEvent(event: LinkEvent): { type: string; fields: Record<string, unknown>; human: string } | null {
  switch (event.type) {
    case 'state':
      return { type: 'state', fields: { state: event.state, previous: event.previous, epoch: event.epoch }, human: `${event.previous} → ${event.state}` }
    case 'connected':
      return { type: 'connected', fields: { generation: event.generation, epoch: event.epoch }, human: `connected: control channel joined (transport ${event.generation}, session ${event.epoch})` }
    case 'reconnected':
      return {
        type: 'reconnected',
        fields: { generation: event.generation, downtimeMs: event.downtimeMs },
        human: `reconnected on transport ${event.generation} after ${event.downtimeMs} ms`,
      }
    case 'disconnected': {
      const reason = event.reason as DisconnectReason
      const wait = event.nextDelayMs === null ? '' : `; next attempt in ${event.nextDelayMs} ms`
      // Why the next upgrade asks on_conflict=reject: another instance may hold the key.
      const probe = event.conflictProbe ? '; the next upgrade asks on_conflict=reject: another instance may hold the key' : ''
      return {
        type: 'disconnected',
        fields: { reason: reasonForOutput(reason), outcome: event.outcome, nextDelayMs: event.nextDelayMs, attempt: event.attempt, terminal: event.terminal, conflictProbe: event.conflictProbe },
        human: `disconnected: ${describeReason(reason)}${wait}${probe}`,
      }
    }
    case 'control':
      return {
        type: 'control',
        fields: { sequence: event.sequence, signal: { ...event.signal, raw: undefined } },
        human: `control signal #${event.sequence}: ${event.signal.mode} (${event.signal.scope}${event.signal.roomId ? ` ${event.signal.roomId}` : ''}, correlation ${event.signal.correlationId ?? 'none'})`,
      }
    case 'channel':
      return {
        type: 'channel',
        fields: { topic: event.topic, status: event.status, reason: event.reason === null ? null : reasonForOutput(event.reason) },
        human: `channel ${event.topic} ${event.status}${event.reason ? `: ${describeReason(event.reason)}` : ''}`,
      }
    case 'ignored':
      return { type: 'ignored', fields: { event: event.event, detail: event.detail }, human: `ignored ${event.event}: ${event.detail}` }
  }
}
