/**
 * Event names as the docs print them, with no dependency: the docs (docs/lifecycle.md), the
 * mermaid diagrams and the visualizer page (which bundles this alone) name a step the same way.
 */

/** An event type as the docs print it (`delay`: the delay's name when known, else read from the event type): `after <delay>`, `done <actor>`, `error <actor>`, `(always)`, `start`, `stop`, or the type. */
export function stepLabel(eventType: string, delay = ''): string {
  if (eventType.startsWith('xstate.after.')) return `after ${delay !== '' ? delay : eventType.split('.')[2]}`
  if (eventType.startsWith('xstate.done.actor.')) return `done ${eventType.slice('xstate.done.actor.'.length)}`
  if (eventType.startsWith('xstate.error.actor.')) return `error ${eventType.slice('xstate.error.actor.'.length)}`
  if (eventType === '') return '(always)'
  if (eventType === 'xstate.init') return 'start'
  // The actor was stopped by its parent (the reconnect chart when a session ends, a channel left).
  if (eventType === 'xstate.stop') return 'stop'
  return eventType
}
