/**
 * Builds the visualizer page (visualizer/dist): a static page, no network at run time. The chart
 * data is read off the shipped machines at build time (src/node/model/visual.ts) and bundled in as
 * the module `virtual:charts`, so the page cannot drift from the charts.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vite'
import { chartsData } from '../src/node/model/visual.js'

const VIRTUAL = 'virtual:charts'

/**
 * mermaid loads each diagram type, layout and its math renderer (katex) by dynamic import, so a
 * bundle of it carries every type as a lazy chunk (gantt, sankey, c4, mindmap with cytoscape, the
 * langium grammars of @mermaid-js/parser, ...): about 2.5 MB the page never loads. The page draws
 * only `stateDiagram-v2` (src/node/model/export.ts), laid out by ELK (`@mermaid-js/layout-elk`,
 * whose renderer chunk carries its own copy of mermaid's diagram modules), and no label holds
 * `$$`, so every other lazily loaded module of mermaid, its parser and the ELK layout is replaced
 * by one that rejects with a clear message, and the published package ships only what the page runs.
 */
const MERMAID_DIR = /[\\/]node_modules[\\/](?:mermaid|@mermaid-js[\\/](?:parser|layout-elk))[\\/]dist[\\/]/
/** The lazily loaded modules the page does load: the state diagram, the ELK layout's renderer, mermaid's text measurer. */
const DRAWN = /^(?:stateDiagram-v2|render|sizeCapture)-[A-Z0-9]+\.mjs$/
const UNUSED = '\0phoenix-link-unused-mermaid-module'

/** The licences of the bundled code, as `build.license` writes them (below). */
const LICENSES = fileURLToPath(new URL('./dist/THIRD-PARTY-LICENSES.md', import.meta.url))

/**
 * Fills in an entry of LICENSES that Vite left with no text: a package that keeps its licence in
 * its README's License section only (fastdom 1.0.12), whose copyright notice the MIT licence
 * requires with every copy. Throws when such a package's README has no License section either, so
 * the build fails rather than ship a copy without its notice.
 */
function completeLicenses(): void {
  if (!existsSync(LICENSES)) return
  const text = readFileSync(LICENSES, 'utf8').replace(/^## (\S+) - (\S+)( \([^)]*\))?\n\n(?=## |(?![\s\S]))/gm, (entry, name: string) => {
    const readme = fileURLToPath(new URL(`../node_modules/${name}/README.md`, import.meta.url))
    const section = existsSync(readme) ? /^#+ Licen[cs]e\s*\n([\s\S]*?)(?=\n#+ |(?![\s\S]))/im.exec(readFileSync(readme, 'utf8')) : null
    if (section === null) throw new Error(`${name}: Vite found no licence text, and its README has no License section: add its notice to visualizer/vite.config.ts`)
    return `${entry.trimEnd()}\n\n(from its README)\n\n${section[1]!.trim()}\n\n`
  })
  writeFileSync(LICENSES, text)
}

function unusedMermaidModule(source: string, importer: string | undefined): string | null {
  if (importer === undefined || !MERMAID_DIR.test(importer)) return null
  if (source === 'katex') return UNUSED
  if (!source.startsWith('./')) return null
  const base = source.slice(source.lastIndexOf('/') + 1)
  // Shared chunks are imported statically by what the page runs; only the named modules are lazy.
  if (base.startsWith('chunk-') || DRAWN.test(base)) return null
  return UNUSED
}

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  logLevel: 'warn',
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    chunkSizeWarningLimit: 4096,
    // The page bundles others' code (mermaid, d3, elkjs, ...): their licences and notices ship beside it.
    license: { fileName: 'THIRD-PARTY-LICENSES.md' },
    // The charts plugin lays out every chart at build time (about half a second): Rolldown's
    // [PLUGIN_TIMINGS] warning about it, printed on every `npm test`, says nothing to act on.
    rolldownOptions: { checks: { bundlerTimings: false } },
  },
  plugins: [
    {
      name: 'phoenix-link-charts',
      resolveId: (id) => (id === VIRTUAL ? `\0${VIRTUAL}` : null),
      load: (id) => {
        if (id !== `\0${VIRTUAL}`) return null
        const charts = chartsData()
        // mermaid would hand a `$$…$$` label to katex, which this bundle leaves out (below): fail the build, not the page.
        const math = charts.find((chart) => chart.mermaid.includes('$$'))
        if (math) throw new Error(`the ${math.name} chart's diagram holds "$$", which mermaid renders with katex; the visualizer bundles no katex (visualizer/vite.config.ts)`)
        return `export default ${JSON.stringify(charts)}`
      },
    },
    {
      name: 'phoenix-link-license-texts',
      apply: 'build',
      closeBundle: completeLicenses,
    },
    {
      name: 'phoenix-link-state-diagrams-only',
      enforce: 'pre',
      resolveId: (source, importer) => unusedMermaidModule(source, importer),
      load: (id) =>
        id === UNUSED
          ? `throw new Error("phoenix-link's visualizer bundles mermaid's state diagrams only (visualizer/vite.config.ts)")`
          : null,
    },
  ],
})
