/**
 * The link's real chart wiring (src/runtime/link-charts.ts) with every socket operation recorded
 * and the host's side (the control handler, the link's publishing) answered by the test.
 */
import { SimulatedClock } from 'xstate'
import type { ConnectionEmitted } from '../../machines/connection.js'
import type { QueuedSignal } from '../../machines/control.js'
import { resolvePolicy, type LinkPolicyInput } from '../../src/policy.js'
import type { RuntimeInspectionEvent } from '../../src/runtime/chart-runner.js'
import { LinkCharts, type ChartIo } from '../../src/runtime/link-charts.js'

export const ENV = { now: () => 1_000, monotonic: () => 1_000, random: () => 0.5 }

export function wired(options: { env?: typeof ENV; policy?: LinkPolicyInput; inspect?: (e: RuntimeInspectionEvent) => void; failOn?: string } = {}) {
  const io: Array<[string, unknown]> = []
  const record = (name: keyof ChartIo) => (params: unknown) => {
    io.push([name, params])
    if (options.failOn === name) throw new Error(`${name} broke`)
  }
  const chartIo: ChartIo = {
    openTransport: record('openTransport'),
    endTransport: record('endTransport'),
    joinControl: record('joinControl'),
    rejoinControl: record('rejoinControl'),
    leaveControl: record('leaveControl'),
    joinAttempt: record('joinAttempt'),
    releaseAttempt: record('releaseAttempt'),
    leaveAttempt: record('leaveAttempt'),
    dropTopic: record('dropTopic'),
  }
  const emitted: ConnectionEmitted[] = []
  const crashes: Array<[string, unknown]> = []
  const failures: Array<[string, string, unknown]> = []
  const listenerErrors: Array<[string, unknown]> = []
  let changes = 0
  /** The signals handed to the host's handler, each with its AbortSignal and the means to settle it. */
  const delivered: Array<{ queued: QueuedSignal; signal: AbortSignal; resolve: () => void; reject: (e: unknown) => void }> = []
  const clock = new SimulatedClock()
  const charts = new LinkCharts({
    io: chartIo,
    clock,
    inspect: options.inspect ?? null,
    env: options.env ?? ENV,
    policy: resolvePolicy(options.policy),
    host: {
      deliver: (queued, signal) => new Promise<void>((resolve, reject) => void delivered.push({ queued, signal, resolve, reject })),
      emitted: (e) => void emitted.push(e),
      changed: () => void changes++,
      crashed: (chart, error) => void crashes.push([chart, error]),
      actionFailed: (chart, action, error) => void failures.push([chart, action, error]),
      listenerFailed: (chart, error) => void listenerErrors.push([chart, error]),
    },
  })
  /** Drives the connection chart from idle to connected on transport 1 of session 1. */
  const connect = () => {
    charts.send({ type: 'host.connect' })
    charts.send({ type: 'socket.open', generation: 1, epoch: 1 })
    charts.send({ type: 'control.joinOk', generation: 1, epoch: 1 })
  }
  return { charts, io, emitted, crashes, failures, listenerErrors, delivered, clock, connect, changes: () => changes }
}
