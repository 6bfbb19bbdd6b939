// Empties dist/ before a build or a pack, so files of an earlier build (a module since moved or
// removed) never ship beside the current ones.
import { rmSync } from 'node:fs'

rmSync(new URL('../dist', import.meta.url), { recursive: true, force: true })
