/**
 * Runs once per `vitest run`, before any test file: says in one line when the reference peer
 * (real Phoenix on Bandit and Cowboy, test/conformance) cannot run here and why, so a skipped
 * conformance suite is never silent. The build itself happens in the conformance files.
 */
import { realPhoenixStatus } from './real-phoenix.js'

export default function setup(): void {
  const status = realPhoenixStatus()
  if (!status.ok) process.stdout.write(`conformance: real Phoenix (Bandit, Cowboy) skipped: ${status.why}\n`)
}
