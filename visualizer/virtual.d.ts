/** The chart data bundled at build time by vite.config.ts (src/model/visual.ts). */
declare module 'virtual:charts' {
  const charts: import('../src/model/visual.js').VisualChart[]
  export default charts
}
