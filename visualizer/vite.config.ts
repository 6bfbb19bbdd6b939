/**
 * Builds the visualizer page (visualizer/dist): a static page, no network at run time. The chart
 * data is read off the shipped machines at build time (src/node/model/visual.ts) and bundled in as
 * the module `virtual:charts`, so the page cannot drift from the charts.
 */
import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vite'
import { chartsData } from '../src/node/model/visual.js'

const VIRTUAL = 'virtual:charts'

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  logLevel: 'warn',
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    chunkSizeWarningLimit: 4096,
  },
  plugins: [
    {
      name: 'phoenix-link-charts',
      resolveId: (id) => (id === VIRTUAL ? `\0${VIRTUAL}` : null),
      load: (id) => (id === `\0${VIRTUAL}` ? `export default ${JSON.stringify(chartsData())}` : null),
    },
  ],
})
