/**
 * mulberry32: a small seeded random source in [0, 1), the same on every machine, for the tools
 * that must replay a draw (soak/soak.ts --seed, scripts/lib-mutations.ts's mutant sample).
 */
export function seeded(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
