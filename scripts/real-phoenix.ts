/**
 * `npm run real:build`: builds the reference peer (real Phoenix 1.7.14 on Bandit and Cowboy,
 * ../shared/real-phoenix) into `.real-phoenix/` (or `REAL_PHOENIX_OUT`) with its own build.sh,
 * which installs Debian's Elixir toolchain with apt-get when it is missing. Without the sources
 * it says so and exits 0: the conformance suite then skips, and says why.
 */
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { locateRealPhoenix } from '../test/support/real-phoenix.js'

const where = locateRealPhoenix()
if (!where.ok) {
  process.stdout.write(`real:build: nothing to build: ${where.why}\n`)
  process.exit(0)
}
const run = spawnSync('bash', [join(where.src, 'build.sh'), where.out], { stdio: 'inherit' })
process.exit(run.status ?? 1)
