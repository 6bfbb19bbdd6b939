import { defineConfig } from 'vitest/config'

/**
 * The tests a mutation run (npm run mutate) judges mutants by: the pure chart tests, the chart
 * runtime's tests (with its differential runs against XState's own actors), the classification
 * tables, and the generated paths with their rule oracles, replayed on the charts alone (the wire
 * runs of the same paths take too long per mutant; they run in npm test).
 */
export default defineConfig({
  test: {
    include: ['test/machines/**/*.test.ts', 'test/runtime/**/*.test.ts', 'test/unit/reasons*.test.ts', 'test/model/pure-paths.test.ts'],
    setupFiles: ['test/support/no-leaks.ts'],
    testTimeout: 20_000,
    pool: 'forks',
    // Read by the tests too slow to run instrumented (test/machines/control.test.ts: the memory of long control ids).
    env: { PHOENIX_LINK_MUTATION_RUN: '1' },
  },
})
