/**
 * bin/phoenix-link.js runs the compiled CLI; in a checkout whose sources changed after the
 * build, it says so before running the old build. Run on a copy of the bin in a scratch tree
 * with a stand-in dist/src/node/cli.js, so the test needs no build.
 */
import { spawnSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'

const roots: string[] = []
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true })
})

/** A scratch package: bin/, a stand-in compiled CLI, one source file, a .git when `checkout`; returns the root. */
function scratchPackage(sourceMtime: Date, builtMtime: Date, checkout = true): string {
  const root = mkdtempSync(join(tmpdir(), 'phoenix-link-bin-'))
  roots.push(root)
  for (const dir of ['bin', 'dist/src/node', 'src/adapter', 'machines', ...(checkout ? ['.git'] : [])]) mkdirSync(join(root, dir), { recursive: true })
  copyFileSync(new URL('../../bin/phoenix-link.js', import.meta.url), join(root, 'bin/phoenix-link.js'))
  writeFileSync(join(root, 'package.json'), '{"type":"module"}')
  const cli = join(root, 'dist/src/node/cli.js')
  writeFileSync(cli, "export async function main() { process.stdout.write('ran main\\n') }\n")
  const source = join(root, 'src/adapter/x.ts')
  writeFileSync(source, 'export {}\n')
  utimesSync(source, sourceMtime, sourceMtime)
  utimesSync(cli, builtMtime, builtMtime)
  return root
}

/** Runs the scratch package's bin; its exit status, stdout and stderr. */
function run(root: string): { status: number | null; stdout: string; stderr: string } {
  const { status, stdout, stderr } = spawnSync(process.execPath, [join(root, 'bin/phoenix-link.js')], { encoding: 'utf8' })
  return { status, stdout, stderr }
}

describe('bin/phoenix-link.js', () => {
  it('in a git checkout, warns when a source is newer than the build, and still runs the build', () => {
    expect(run(scratchPackage(new Date('2026-01-02'), new Date('2026-01-01')))).toEqual({
      status: 0,
      stdout: 'ran main\n',
      stderr: expect.stringMatching(/changed after dist\/ was built/),
    })
    expect(run(scratchPackage(new Date('2026-01-01'), new Date('2026-01-02')))).toEqual({ status: 0, stdout: 'ran main\n', stderr: '' })
  })

  it('says nothing in an installed package (no .git), whatever order its files were unpacked in', () => {
    expect(run(scratchPackage(new Date('2026-01-02'), new Date('2026-01-01'), false))).toEqual({ status: 0, stdout: 'ran main\n', stderr: '' })
  })

  it('exits 1 with a message when dist/ is missing', () => {
    const root = scratchPackage(new Date('2026-01-01'), new Date('2026-01-02'))
    rmSync(join(root, 'dist'), { recursive: true })
    expect(run(root)).toEqual({ status: 1, stdout: '', stderr: expect.stringMatching(/dist\/ is missing/) })
  })
})
