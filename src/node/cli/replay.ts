/** `phoenix-link replay <file>`: a recorded trace in the visualizer's #replay, served on loopback. */
import { MAX_TRACE_BYTES, parseTrace } from '../visualize/parse-trace.js'
import { shippedChartStates } from '../visualize/index.js'
import { readTraceFile, startVisualizer } from '../visualize/server.js'
import { createOutput } from './output.js'

/** Options of {@link runReplay}. */
export interface ReplayOptions {
  /** The trace file (JSON lines, as `connect --trace` and `demo --trace` write). */
  file: string
  /** Port of the page; 0 picks one. */
  port: number
  json: boolean
  /** The replay is served until this settles (the CLI passes Ctrl-C). */
  holdUntil: Promise<unknown>
  write?: (line: string) => void
}

/**
 * Checks the trace (every record, every state against the shipped charts), serves the
 * visualizer with it at `/?trace#replay` until `holdUntil` settles, and resolves with the exit code.
 * The page gets the text that was checked, read once.
 *
 * @throws {Error} (rejects) naming the file when it cannot be read, is not a regular file (a pipe,
 *   a device: save the trace to a file first), is over {@link MAX_TRACE_BYTES}, or is not a trace of
 *   these charts (the line and what is wrong); or when the port cannot be bound.
 */
export async function runReplay(options: ReplayOptions): Promise<number> {
  let text: string
  try {
    text = readTraceFile(options.file)
  } catch (error) {
    throw new Error(`cannot read the trace ${options.file}: ${(error as Error).message}`)
  }
  let records
  try {
    records = parseTrace(text, shippedChartStates())
  } catch (error) {
    throw new Error(`cannot replay ${options.file}: ${(error as Error).message}`)
  }
  const out = createOutput(options.json, options.write)
  const viz = await startVisualizer({ port: options.port, traceText: text })
  try {
    const links = [...new Set(records.map((r) => r.link))]
    const url = `${viz.url}?trace#replay`
    out.event('visualizer', 'replay', { url, records: records.length, links }, `open ${url} to step through ${records.length} records of link${links.length === 1 ? '' : 's'} ${links.join(', ')}; Ctrl-C stops`)
    await options.holdUntil
  } finally {
    await viz.close()
  }
  return 0
}
