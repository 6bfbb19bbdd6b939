/**
 * The connection chart's actor of a link with its full XState type, for this repository's own
 * tools (the trace writer, the model runners, the tests). Not exported from the package's main
 * entry: `Link.actor` gives hosts a read-only view typed without XState, so a consumer's compiler
 * never loads XState's declarations through phoenix-link's.
 */
import type { Actor } from 'xstate'
import type { connectionMachine } from '../machines/connection.js'
import type { Link } from './link.js'

/** The XState actor behind `link.actor` (the same object). */
export function chartOf(link: Link): Actor<typeof connectionMachine> {
  return (link as unknown as { chart: Actor<typeof connectionMachine> }).chart
}
