// Mutation testing (npm run mutate): Stryker mutates the charts, the runtime that runs them and
// the classification tables, and runs the pure chart tests, the runtime's tests, the reason tables
// and the generated paths with their rule oracles against each mutant. docs/mutation.md holds the latest score and the survivors.
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation.config.ts' },
  mutate: ['machines/**/*.ts', 'src/runtime/**/*.ts', 'src/reasons.ts', '!machines/index.ts'],
  coverageAnalysis: 'perTest',
  reporters: ['clear-text', 'progress', 'json'],
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  concurrency: 2,
  timeoutMS: 15000,
  ignoreStatic: true,
  // Built or generated trees Stryker need not copy (the real Phoenix build holds symlinked folders it cannot copy).
  ignorePatterns: ['.real-phoenix', '.mutation-sandbox', 'scratch', 'dist', 'docs/api'],
  tempDirName: '.stryker-tmp',
}
