/**
 * phoenix-link/visualizer (Node only): the trace writer ({@link traceLink}, {@link traceToFile}),
 * its reader ({@link parseTrace}) and the loopback server of the chart page ({@link startVisualizer}).
 */
export { openTraceFile, traceLink, traceToFile, type TraceFile, type TraceRecord } from './trace.js'
export { startVisualizer, type VisualizerServer } from './server.js'
export { MAX_TRACE_BYTES, parseTrace, statePaths, type TraceChartStates } from './parse-trace.js'
