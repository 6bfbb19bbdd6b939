/**
 * phoenix-link/visualizer (Node only): the trace writer ({@link traceLink}, {@link traceToFile})
 * and the loopback server of the chart page ({@link startVisualizer}).
 */
export { openTraceFile, traceLink, traceToFile, type TraceFile, type TraceRecord } from './trace.js'
export { startVisualizer, type VisualizerServer } from './server.js'
