#!/usr/bin/env node
// The installed command: runs the compiled CLI (dist/, built by `npm run build`, and by `prepack` for a published package).
import { existsSync, readdirSync, statSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const compiled = fileURLToPath(new URL('../dist/src/node/cli.js', import.meta.url))
if (!existsSync(compiled)) {
  process.stderr.write('phoenix-link: dist/ is missing; run `npm run build` first\n')
  process.exit(1)
}

/** The newest modification time (ms) of the .ts sources under `dir`, 0 when there are none. */
function newestSource(dir) {
  let newest = 0
  let entries = []
  try {
    entries = readdirSync(dir, { withFileTypes: true, recursive: true })
  } catch {
    return 0
  }
  for (const entry of entries) {
    if (!entry.isFile() || !entry.name.endsWith('.ts') || entry.name.endsWith('.d.ts')) continue
    newest = Math.max(newest, statSync(`${entry.parentPath ?? entry.path}/${entry.name}`).mtimeMs)
  }
  return newest
}

// In a git checkout, sources edited after the last build would run as their old compiled
// selves. (An installed package has no .git, and its extraction sets file times in any order.)
const checkout = existsSync(fileURLToPath(new URL('../.git', import.meta.url)))
const sources = checkout ? ['../src', '../machines'].map((dir) => newestSource(fileURLToPath(new URL(dir, import.meta.url)))) : []
if (checkout && Math.max(...sources) > statSync(compiled).mtimeMs) {
  process.stderr.write('phoenix-link: src/ or machines/ changed after dist/ was built; this runs the old build (`npm run build` to refresh)\n')
}
const { main } = await import(compiled)
await main()
