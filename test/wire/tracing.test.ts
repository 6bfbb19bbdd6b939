/**
 * OpenTelemetry spans through the real SDK (@opentelemetry/sdk-trace-base, in-memory exporter):
 * one session span per connect()...end, one connect span per attempt with its outcome, the
 * losses as session events, a terminal reason as the session's error status, and no key in any
 * attribute.
 */
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { SpanStatusCode } from '@opentelemetry/api'
import { afterEach, describe, expect, it } from 'vitest'
import { untilState, useWorld } from '../support/wire.js'

const world = useWorld()
const exporter = new InMemorySpanExporter()
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })

afterEach(() => exporter.reset())

describe('OpenTelemetry spans', () => {
  it('a session with a refused attempt, a reconnect after close 1000, then a supersede', async () => {
    const sim = await world().sim({ agents: { 'agent-1': 'sk-otel-secret-1' } })
    sim.refuseUpgrades({ status: 503, retryAfter: '0' })
    const link = world().link(sim, { apiKey: 'sk-otel-secret-1', tracer: provider.getTracer('test') })
    await link.connect()
    sim.close({ agent: 'agent-1' }, 1000, 'bye')
    await untilState(link, 'reconnecting')
    await untilState(link, 'connected')
    sim.supersede('agent-1')
    await untilState(link, 'terminated')
    // untilState() resolves in the same delivery of the `state` event as the tracer's listener,
    // registered before it (at createLink), so every span of the session has ended by now.
    const spans = exporter.getFinishedSpans()
    const connects = spans.filter((s) => s.name === 'phoenix_link.connect')
    const sessions = spans.filter((s) => s.name === 'phoenix_link.session')
    expect(connects.map((s) => [s.status.code, s.attributes['phoenix_link.outcome'], s.attributes['phoenix_link.reason.http_status'] ?? null])).toEqual([
      [SpanStatusCode.ERROR, 'reconnect', 503],
      [SpanStatusCode.OK, 'connected', null],
      [SpanStatusCode.OK, 'connected', null],
    ])
    expect(connects.map((s) => s.attributes['phoenix_link.attempt'])).toEqual([1, 2, 3])
    expect(sessions).toHaveLength(1)
    const session = sessions[0]!
    expect(session.status).toEqual({ code: SpanStatusCode.ERROR, message: 'superseded' })
    expect(session.attributes).toMatchObject({ 'phoenix_link.outcome': 'terminated', 'phoenix_link.reason.kind': 'superseded', 'phoenix_link.epoch': 1 })
    expect(session.events.map((e) => [e.name, e.attributes?.['phoenix_link.reason.close_code'] ?? e.attributes?.['phoenix_link.reason.kind']])).toEqual([
      ['phoenix_link.disconnected', 1000],
      ['phoenix_link.disconnected', 'superseded'],
    ])
    for (const span of connects) expect(span.parentSpanContext).toBeUndefined()
    expect(JSON.stringify(spans.map((s) => [s.attributes, s.events, s.status]))).not.toContain('sk-otel-secret-1')
  })

  it('a disconnect() ends the session span unset (not an error); a second connect() is a new session', async () => {
    const sim = await world().sim()
    const link = world().link(sim, { tracer: provider.getTracer('test') })
    await link.connect()
    await link.disconnect()
    await link.connect()
    await link.disconnect()
    await untilState(link, 'stopped')
    const sessions = exporter.getFinishedSpans().filter((s) => s.name === 'phoenix_link.session')
    expect(sessions.map((s) => [s.attributes['phoenix_link.epoch'], s.attributes['phoenix_link.outcome'], s.status.code])).toEqual([
      [1, 'stopped', SpanStatusCode.UNSET],
      [2, 'stopped', SpanStatusCode.UNSET],
    ])
  })

  it("a refused upgrade the tables do not know (404) carries the detail that names its status; a dropped socket its source", async () => {
    const sim = await world().sim()
    sim.refuseUpgrades({ status: 404 })
    const link = world().link(sim, { tracer: provider.getTracer('test') })
    await link.connect()
    sim.abort({ agent: 'agent-1' })
    await untilState(link, 'reconnecting')
    await untilState(link, 'connected')
    await link.disconnect()
    const connects = exporter.getFinishedSpans().filter((s) => s.name === 'phoenix_link.connect')
    expect(connects[0]!.attributes).toMatchObject({ 'phoenix_link.reason.kind': 'other', 'phoenix_link.outcome': 'reconnect' })
    expect(connects[0]!.attributes['phoenix_link.reason.detail']).toMatch(/^upgrade refused with HTTP 404/)
    const session = exporter.getFinishedSpans().find((s) => s.name === 'phoenix_link.session')!
    expect(session.events.map((e) => [e.attributes?.['phoenix_link.reason.kind'], e.attributes?.['phoenix_link.reason.source'] ?? null])).toEqual([
      ['dropped', 'socket'],
      ['graceful', null],
    ])
  })

  it('traceSpans started during a session joins it: the link\'s epoch, the session span open at once, its losses recorded on it', async () => {
    const { traceSpans } = await import('../../src/index.js')
    const sim = await world().sim()
    const link = world().link(sim)
    await link.connect()
    await link.disconnect()
    await link.connect()
    expect(link.epoch).toBe(2)
    const stop = traceSpans(link, provider.getTracer('test'))
    sim.close({ agent: 'agent-1' }, 1000)
    await untilState(link, 'reconnecting')
    await untilState(link, 'connected')
    await link.disconnect()
    stop()
    const spans = exporter.getFinishedSpans()
    const sessions = spans.filter((s) => s.name === 'phoenix_link.session')
    expect(sessions.map((s) => [s.attributes['phoenix_link.epoch'], s.attributes['phoenix_link.traced_from'], s.attributes['phoenix_link.outcome']])).toEqual([[2, 'connected', 'stopped']])
    expect(sessions[0]!.events.map((e) => [e.attributes?.['phoenix_link.reason.kind'], e.attributes?.['phoenix_link.reason.close_code'] ?? null])).toEqual([
      ['closed', 1000],
      ['graceful', null],
    ])
    const connects = spans.filter((s) => s.name === 'phoenix_link.connect')
    expect(connects.map((s) => [s.attributes['phoenix_link.epoch'], s.attributes['phoenix_link.attempt'], s.attributes['phoenix_link.outcome']])).toEqual([[2, 1, 'connected']])
  })

  it('traceSpans started while the control channel rejoins (joining, the socket up) opens no attempt: the next close is a session event, not a failed attempt', async () => {
    const { traceSpans } = await import('../../src/index.js')
    const sim = await world().sim()
    const link = world().link(sim, { policy: { channel: { rejoinInitialDelayMs: 50 } } })
    await link.connect()
    let stop: (() => void) | null = null
    const rejoining = new Promise<void>((resolve) =>
      link.on('state', ({ state }) => {
        if (state === 'joining' && stop === null) {
          stop = traceSpans(link, provider.getTracer('test'))
          resolve()
        }
      }),
    )
    sim.channelError({ agent: 'agent-1' }, 'agent_control:agent-1')
    await rejoining
    await untilState(link, 'connected')
    sim.close({ agent: 'agent-1' }, 1000)
    await untilState(link, 'reconnecting')
    await untilState(link, 'connected')
    await link.disconnect()
    stop!()
    const spans = exporter.getFinishedSpans()
    const connects = spans.filter((s) => s.name === 'phoenix_link.connect')
    expect(connects.map((s) => [s.attributes['phoenix_link.attempt'], s.attributes['phoenix_link.outcome'], s.status.code])).toEqual([[1, 'connected', SpanStatusCode.OK]])
    const session = spans.find((s) => s.name === 'phoenix_link.session')!
    expect(session.attributes['phoenix_link.traced_from']).toBe('joining')
    expect(session.events.map((e) => [e.attributes?.['phoenix_link.reason.kind'], e.attributes?.['phoenix_link.reason.close_code'] ?? null])).toEqual([
      ['closed', 1000],
      ['graceful', null],
    ])
  })
})
