/**
 * phoenix-link/visualizer (Node only): the trace writer ({@link traceLink}, {@link traceToFile}),
 * its reader ({@link parseTrace}) and the loopback server of the chart page ({@link startVisualizer}).
 */
import { chartsData } from '../model/visual.js'
import type { TraceChartStates } from './parse-trace.js'

export { openTraceFile, traceLink, traceToFile, type TraceFile, type TraceRecord } from './trace.js'
export { readTraceFile, startVisualizer, type VisualizerServer } from './server.js'
export { MAX_TRACE_BYTES, parseTrace, statePaths, TRACE_FORMAT, type TraceChartStates } from './parse-trace.js'

/**
 * The shipped charts' states (connection, channel, reconnect, control, presence), by dotted path,
 * as the visualizer draws them: pass them to {@link parseTrace} to check a trace's states as the
 * replay page does (`parseTrace(text, shippedChartStates())`).
 */
export function shippedChartStates(): TraceChartStates[] {
  return chartsData().map((chart) => ({ name: chart.name, states: chart.states.map((state) => ({ path: state.path })) }))
}
