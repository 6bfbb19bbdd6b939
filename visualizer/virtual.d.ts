/** The chart data bundled at build time by vite.config.ts (src/node/model/visual.ts). */
declare module 'virtual:charts' {
  const charts: import('../src/node/model/visual.js').VisualChart[]
  export default charts
}
