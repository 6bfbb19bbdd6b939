/** Writes docs/lifecycle.md, docs/reasons.md, docs/simulator-http.md and docs/simulator-openapi.json from the source (see scripts/docs-lib.ts). */
import { writeFileSync } from 'node:fs'
import { renderLifecycle, renderReasons, renderSimulatorHttp, renderSimulatorOpenApi } from './docs-lib.js'

writeFileSync(new URL('../docs/lifecycle.md', import.meta.url), renderLifecycle())
writeFileSync(new URL('../docs/reasons.md', import.meta.url), renderReasons())
writeFileSync(new URL('../docs/simulator-http.md', import.meta.url), renderSimulatorHttp())
writeFileSync(new URL('../docs/simulator-openapi.json', import.meta.url), renderSimulatorOpenApi())
process.stdout.write('wrote docs/lifecycle.md, docs/reasons.md, docs/simulator-http.md and docs/simulator-openapi.json\n')
