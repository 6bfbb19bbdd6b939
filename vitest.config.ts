import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    setupFiles: ['test/support/no-leaks.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: 'forks',
    // Two test files at once (vitest's default on 2 cores is one): much of the suite waits on
    // servers and timers (real Phoenix's idle timeouts, conform's quiet windows, browsers), so a
    // second file fills that time. Measured on 2 cores, 2026-12-06: 11m47s one at a time, 6m10s two.
    maxWorkers: 2,
    reporters: ['default'],
  },
})
