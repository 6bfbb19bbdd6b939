/** `phoenix-link connect`: one link against any platform, its transitions logged until Ctrl-C. */
import { startVisualizer } from '../visualize/server.js'
import { traceLink, traceToFile } from '../visualize/trace.js'
import { createLink } from '../../link.js'
import { isAgentDisconnectedError } from '../../errors/agent-disconnected.js'
import { describeReason } from '../../reasons.js'
import { createOutput, describeLinkEvent, reasonForOutput } from './output.js'

/** Options of {@link runConnect}. */
export interface ConnectOptions {
  url: string
  agentId: string
  apiKey: string
  onConflict?: 'supersede' | 'reject'
  allowInsecure: boolean
  json: boolean
  /** Serve the visualizer on loopback (this port; 0 picks one) and stream the link's transitions to it. */
  visualizePort?: number
  /** Write the link's transitions to this file as JSON lines (replayable in the visualizer). */
  trace?: string
}

/**
 * Runs a link until Ctrl-C (exit 0 after a graceful stop; 1 when the trace asked for failed to
 * write) or a terminal reason (exit 2).
 *
 * @throws {ConfigurationError} for a bad URL, agent id or key (before connecting).
 */
export async function runConnect(options: ConnectOptions): Promise<number> {
  const output = createOutput(options.json)
  // Everything printed is redacted of every key the link has used (a server may echo one back).
  const out = {
    event: (source: string, type: string, fields: Record<string, unknown>, human: string): void =>
      output.event(source, type, link.redactOutput(fields), link.redactOutput(human)),
  }
  const link = createLink({
    url: options.url,
    agentId: options.agentId,
    apiKey: options.apiKey,
    ...(options.onConflict ? { onConflict: options.onConflict } : {}),
    allowInsecureTransport: options.allowInsecure,
    onControl: (signal) => out.event('agent', 'control', { signal: { ...signal, raw: undefined } }, `control ${signal.mode} (${signal.correlationId ?? 'no correlation id'})`),
  })
  link.onAny((event) => {
    const line = describeLinkEvent(event)
    if (line) out.event('link', line.type, line.fields, line.human)
  })
  // The visualizer first: a port in use fails before the trace file is opened (and an earlier
  // trace at that path emptied). Then the trace, before anything connects: an unwritable path
  // fails here with a clear error.
  const viz = options.visualizePort !== undefined ? await startVisualizer({ port: options.visualizePort }) : null
  let traceError: Error | null = null
  let stopTrace: (() => Promise<void>) | null = null
  try {
    stopTrace = options.trace !== undefined
      ? traceToFile(link, options.agentId, options.trace, (error) => {
          traceError = error
          out.event('trace', 'failed', { error: error.message }, `the trace stopped: ${error.message}`)
        })
      : null
  } catch (error) {
    await viz?.close()
    throw error
  }
  const stopLive = viz ? traceLink(link, options.agentId, (record) => viz.publish(record)) : null
  if (viz) out.event('visualizer', 'listening', { url: `${viz.url}#live` }, `follow the link at ${viz.url}#live`)
  const stop = () => void link.disconnect()
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
  process.once('SIGHUP', stop)
  try {
    await link.runForever()
    // Stopped as asked; a trace that failed to write is not the run the user asked for.
    await stopTrace?.()
    if (traceError !== null) {
      const { message } = traceError as Error
      out.event('trace', 'not-written', { error: message }, `the trace was not written: ${message}`)
      return 1
    }
    return 0
  } catch (error) {
    if (isAgentDisconnectedError(error)) {
      out.event('link', 'ended', { reason: reasonForOutput(error.reason) }, `ended: ${describeReason(error.reason)}`)
      return 2
    }
    throw error
  } finally {
    process.off('SIGINT', stop)
    process.off('SIGTERM', stop)
    process.off('SIGHUP', stop)
    await link.disconnect()
    stopLive?.()
    await stopTrace?.()
    await viz?.close()
  }
}
