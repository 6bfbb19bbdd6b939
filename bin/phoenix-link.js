#!/usr/bin/env node
// The installed command: runs the compiled CLI (npm run build, or `prepare` on install).
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const compiled = fileURLToPath(new URL('../dist/src/cli.js', import.meta.url))
if (!existsSync(compiled)) {
  process.stderr.write('phoenix-link: dist/ is missing; run `npm run build` first\n')
  process.exit(1)
}
const { main } = await import(compiled)
await main()
