/**
 * How deeply arrays and objects nest in a parsed JSON value, counted up to just past `limit`
 * (`limit + 1` means deeper than `limit`). Iterative, so any depth is measured without a stack
 * overflow: `JSON.parse` reads nesting deeper than `JSON.stringify` (and recursive code) can walk.
 * Pure: the simulator checks its HTTP bodies with it, the trace reader (in Node and the browser)
 * its records.
 */
export function jsonDepth(value: unknown, limit: number): number {
  let deepest = 0
  const stack: Array<[unknown, number]> = [[value, 0]]
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!
    if (item === null || typeof item !== 'object') continue
    deepest = Math.max(deepest, depth + 1)
    if (deepest > limit) return deepest
    for (const inner of Object.values(item)) stack.push([inner, depth + 1])
  }
  return deepest
}
