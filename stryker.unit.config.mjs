// Mutation testing of the library's pure parts (npm run mutate:unit): Stryker mutates the frame
// codec, the emitter, the logger, the run supervisor and the simulator's presence tracker,
// metrics and request-size limits (the parser models of Bandit and Cowboy), and judges every
// mutant by the unit tests alone (vitest.mutation-unit.config.ts).
// The parts that need a socket are sampled instead: scripts/lib-mutations.ts.
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation-unit.config.ts' },
  mutate: ['src/protocol.ts', 'src/emitter.ts', 'src/logger.ts', 'src/runs.ts', 'src/node/server/presence.ts', 'src/node/server/metrics.ts', 'src/node/server/request-limits.ts'],
  coverageAnalysis: 'perTest',
  reporters: ['clear-text', 'progress', 'json'],
  jsonReporter: { fileName: 'reports/mutation/unit.json' },
  concurrency: 2,
  // The unit tests take under a second together: a mutant still running after 5 s is looping.
  timeoutMS: 5000,
  ignoreStatic: true,
  // Built or generated trees Stryker need not copy (the real Phoenix build holds symlinked folders it cannot copy).
  ignorePatterns: ['.real-phoenix', '.mutation-sandbox', 'scratch', 'dist', 'docs/api'],
  tempDirName: '.stryker-tmp-unit',
}
