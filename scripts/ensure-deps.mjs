// Runs `npm ci` when node_modules is missing, so `npm run demo` and `npm test` work on a fresh
// clone. Uses only Node built-ins: it runs before any dependency exists.
import { existsSync } from 'node:fs'
import { execSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { dirname, join } from 'node:path'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
if (!existsSync(join(root, 'node_modules', '.package-lock.json'))) {
  process.stderr.write('phoenix-link: node_modules missing, running npm ci\n')
  execSync('npm ci --no-audit --no-fund', { cwd: root, stdio: 'inherit' })
}
