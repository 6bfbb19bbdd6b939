/**
 * A chart runtime for the pure chart tests: the charts run as the link runs them (src/runtime/),
 * on a SimulatedClock, with every I/O action recorded instead of carried out, and optional hooks
 * that answer an action (a handler that settles, an I/O fault).
 */
import { SimulatedClock, type AnyStateMachine, type EventObject } from 'xstate'
import { ChartRuntime, type RunningChart, type RuntimeInspectionEvent } from '../../src/runtime/chart-runner.js'

/** One I/O action a chart named, with its resolved params. */
export interface RecordedIo {
  chart: string
  type: string
  params: unknown
}

export class TestRuntime extends ChartRuntime {
  readonly clock = new SimulatedClock()
  inspect: ((event: RuntimeInspectionEvent) => void) | null = null
  readonly io: RecordedIo[] = []
  readonly emittedEvents: EventObject[] = []
  readonly crashes: Array<{ chart: string; error: unknown }> = []
  readonly failures: Array<{ chart: string; type: string; error: unknown }> = []
  /** What the charts' listeners (subscribe, inspection) threw. */
  readonly listenerErrors: Array<{ chart: string; error: unknown }> = []
  /** Called for every I/O action after it is recorded; a throw is the action's fault. */
  onExecute: ((chart: RunningChart, type: string, params: unknown) => void) | null = null

  run<M extends AnyStateMachine>(machine: M, input: unknown, id = machine.id, parent: RunningChart | null = null): RunningChart<M> {
    return this.start(machine, id, input, parent)
  }

  execute(chart: RunningChart, type: string, params: unknown): void {
    this.io.push({ chart: chart.id, type, params })
    this.onExecute?.(chart, type, params)
  }
  actionFailed(chart: RunningChart, type: string, error: unknown): void {
    this.failures.push({ chart: chart.id, type, error })
  }
  emitted(_chart: RunningChart, event: EventObject): void {
    this.emittedEvents.push(event)
  }
  changed(_chart: RunningChart): void {}
  crashed(chart: RunningChart, error: unknown): void {
    this.crashes.push({ chart: chart.id, error })
  }
  listenerFailed(chart: RunningChart, error: unknown): void {
    this.listenerErrors.push({ chart: chart.id, error })
  }

  /** The params of every recorded I/O action of `type`, in order. */
  paramsOf<T = unknown>(type: string): T[] {
    return this.io.filter((a) => a.type === type).map((a) => a.params as T)
  }
}
