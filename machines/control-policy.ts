/**
 * Control delivery policy of the control chart (machines/control.ts).
 * Plain data and pure functions with no XState import, so the package's public types
 * (src/policy.ts, the main entry) reach them without pulling in a chart; the chart imports them
 * from here and re-exports them. Frozen: a default cannot be changed for later links.
 */

/** Control delivery policy. */
export const DEFAULT_CONTROL_POLICY = {
  /**
   * Correlation ids remembered for deduplication, the most recent ones received; a signal whose
   * id is among them, or is that of the signal in the handler or one waiting (whatever the window),
   * is reported as a duplicate and not delivered. 0 turns deduplication off. A count.
   * @default 1024 — bounded memory for a days-long session.
   */
  dedupeWindow: 1024,
  /**
   * Signals that may wait behind the one in the host's handler; one more arriving is dropped and
   * reported (`control.dropped`, cause `overflow`), so a handler that never settles cannot grow the
   * queue without bound over a days-long session. A count; 0 drops every signal that arrives while
   * the handler runs. @default 1000
   */
  maxQueued: 1000,
  /**
   * Size of the signals that may wait behind the one in the host's handler, counted as their
   * frames were read (a text frame's characters, a binary frame's bytes); a signal that would take
   * the waiting ones past it is dropped and reported like one past `maxQueued` (`control.dropped`,
   * cause `overflow`), so a server that sends large signals (each under the transport's
   * `maxFrameBytes`) cannot grow the queue without bound either. The platform's signals are
   * under 1 KB. 0 drops every signal that arrives while the handler runs.
   * @default 16777216 — 16 MiB, two frames of the transport's default `maxFrameBytes`.
   */
  maxQueuedBytes: 16 * 1024 * 1024,
}

/** Control delivery policy; see {@link DEFAULT_CONTROL_POLICY}. */
export type ControlPolicy = typeof DEFAULT_CONTROL_POLICY

Object.freeze(DEFAULT_CONTROL_POLICY)
