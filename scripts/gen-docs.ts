/** Writes docs/lifecycle.md and docs/reasons.md from the source (see scripts/docs-lib.ts). */
import { writeFileSync } from 'node:fs'
import { renderLifecycle, renderReasons } from './docs-lib.js'

writeFileSync(new URL('../docs/lifecycle.md', import.meta.url), renderLifecycle())
writeFileSync(new URL('../docs/reasons.md', import.meta.url), renderReasons())
process.stdout.write('wrote docs/lifecycle.md and docs/reasons.md\n')
