/**
 * traceSpans on a scripted link (its public events only) and a recording tracer: the reason
 * attributes each kind carries on the attempt span.
 */
import { describe, expect, it } from 'vitest'
import { traceSpans, type SpanAttributeValue, type TracedLink } from '../../src/tracing.js'
import { classifyClose, classifyUpgrade, heartbeatTimeout, type DisconnectReason } from '../../src/reasons.js'
import { suppressedReason } from '../../machines/types.js'

type Listener = (event: never) => void

function scripted() {
  const listeners = new Map<string, Set<Listener>>()
  const spans: Array<{ name: string; attributes: Record<string, SpanAttributeValue>; ended: boolean }> = []
  const link = {
    agentId: 'agent-1',
    state: 'idle',
    epoch: 0,
    on(type: string, listener: Listener) {
      const set = listeners.get(type) ?? new Set()
      listeners.set(type, set.add(listener))
      return () => set.delete(listener)
    },
    redactOutput: <T>(value: T) => value,
  } as unknown as TracedLink
  const emit = (type: string, event: object) => {
    for (const listener of listeners.get(type) ?? []) (listener as (e: object) => void)(event)
  }
  const tracer = {
    startSpan(name: string, options?: { attributes?: Record<string, SpanAttributeValue> }) {
      const span = { name, attributes: { ...options?.attributes }, ended: false }
      spans.push(span)
      return {
        setAttribute: (key: string, value: SpanAttributeValue) => (span.attributes[key] = value),
        setStatus: () => {},
        addEvent: () => {},
        end: () => (span.ended = true),
      }
    },
  }
  return { link, emit, spans, tracer }
}

describe('traceSpans reason attributes', () => {
  it('each reason kind puts what it has on its attempt span: phase, retry_after_ms, error_code, and a suppressed reason its attempts and last loss', () => {
    const { link, emit, spans, tracer } = scripted()
    const stop = traceSpans(link, tracer)
    const attempt = (reason: DisconnectReason) => {
      emit('state', { state: 'connecting', previous: 'idle', epoch: 1 })
      emit('disconnected', { reason, outcome: 'reconnect', nextDelayMs: 5 })
      return spans.filter((s) => s.name === 'phoenix_link.connect').at(-1)!.attributes
    }
    expect(attempt(heartbeatTimeout(1, 0))).toMatchObject({ 'phoenix_link.reason.kind': 'timed-out', 'phoenix_link.reason.phase': 'heartbeat' })
    expect(attempt(classifyUpgrade({ status: 429, retryAfter: '2', body: '{"error":{"code":"too_many_requests"}}' }, 1, 0))).toMatchObject({
      'phoenix_link.reason.kind': 'rejected',
      'phoenix_link.reason.phase': 'upgrade',
      'phoenix_link.reason.http_status': 429,
      'phoenix_link.reason.retry_after_ms': 2000,
      'phoenix_link.reason.error_code': 'too_many_requests',
    })
    const suppressed = attempt(suppressedReason('rapid-disconnects', 10, classifyClose({ code: 1011, reason: '' }, 4, 0), 0, true) as DisconnectReason)
    expect(suppressed).toMatchObject({
      'phoenix_link.reason.kind': 'suppressed',
      'phoenix_link.reason.cause': 'rapid-disconnects',
      'phoenix_link.reason.attempts': 10,
      'phoenix_link.reason.last_loss.kind': 'closed',
      'phoenix_link.reason.last_loss.close_code': 1011,
    })
    // Only the last loss's kind and codes, not the rest of it.
    expect(Object.keys(suppressed).filter((key) => key.includes('last_loss')).sort()).toEqual(['phoenix_link.reason.last_loss.close_code', 'phoenix_link.reason.last_loss.kind'])
    stop()
    expect(spans.every((s) => s.ended)).toBe(true)
  })
})
