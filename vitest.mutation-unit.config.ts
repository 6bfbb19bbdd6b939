import { defineConfig } from 'vitest/config'

/**
 * The tests `npm run mutate:unit` judges the library's pure parts by: the unit tests, without the
 * ones that start processes (the CLI, the package export, the leak check's own fixtures).
 */
export default defineConfig({
  test: {
    include: ['test/unit/**/*.test.ts'],
    exclude: ['test/unit/bin.test.ts', 'test/unit/export.test.ts', 'test/unit/no-leaks.test.ts', 'test/unit/docs.test.ts'],
    setupFiles: ['test/support/no-leaks.ts'],
    testTimeout: 20_000,
    pool: 'forks',
  },
})
