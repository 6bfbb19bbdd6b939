/** `phoenix-link conform -- <command…>`: the lifecycle rules judged on any agent, from what the server saw. */
import { formatConformance, runConformance, visible, type ConformanceOptions } from '../conform/index.js'

/** Options of {@link runConform}: the conformance options, and how to print. */
export interface ConformOptions extends ConformanceOptions {
  json: boolean
  write?: (line: string) => void
}

/**
 * Runs the conformance scenarios against the agent command and prints the verdicts: a table,
 * or with `json` one JSON object (`{ passed, verdicts, ms, output }`).
 *
 * @returns the exit code: 0 when every rule held, 1 otherwise.
 * @throws {Error} (rejects) when the command is empty or the simulator cannot listen.
 */
export async function runConform(options: ConformOptions): Promise<number> {
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`))
  // Ctrl-C or SIGTERM: every agent (each in a process group of its own, so the terminal's signal
  // never reaches it) is stopped before the command exits.
  // The first signal starts the stop; later ones (a second Ctrl-C, the terminal's SIGHUP) are
  // absorbed until every agent is gone, so none is left behind.
  const controller = new AbortController()
  const stop = (signal: NodeJS.Signals) => {
    if (!controller.signal.aborted) controller.abort(new Error(`stopped by ${signal}`))
  }
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const
  for (const signal of signals) process.on(signal, stop)
  let report
  try {
    // Only the conformance options: how to print is this command's own.
    const { json: _json, write: _write, ...conformance } = options
    report = await runConformance({
      ...conformance,
      signal: controller.signal,
      onScenario: (name, verdicts) => {
        if (!options.json) process.stderr.write(`scenario ${name}: ${verdicts.map((v) => `${v.rule} ${v.pass ? 'held' : 'broken'}`).join(', ')}\n`)
      },
    })
  } catch (error) {
    if (!controller.signal.aborted) throw error
    process.stderr.write(`conform: ${(error as Error).message}; every agent stopped\n`)
    return 130
  } finally {
    for (const signal of signals) process.off(signal, stop)
  }
  if (options.json) write(JSON.stringify(report))
  else {
    write(formatConformance(report))
    for (const [name, text] of Object.entries(report.output)) {
      if (report.verdicts.some((v) => !v.pass) && text.trim() !== '') write(`\n--- agent output, scenario ${name} (last 4,000 characters)\n${visible(text.trimEnd())}`)
    }
  }
  return report.passed ? 0 : 1
}

