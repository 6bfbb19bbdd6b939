/**
 * prom-client is an optional peer: without it the commands that run the simulator (demo, serve,
 * conform) exit 1 naming what to install, and every other command (help, paths, export) runs.
 * The CLI runs in a child process whose resolver cannot find prom-client (a node:module hook).
 */
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const hook = fileURLToPath(new URL('../fixtures/no-prom-client/register.mjs', import.meta.url))
const cli = fileURLToPath(new URL('../../src/node/cli.ts', import.meta.url))

/** Runs the CLI from source without prom-client; its exit status, stdout and stderr. */
function withoutPromClient(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const { status, stdout, stderr } = spawnSync(process.execPath, ['--import', hook, '--import', 'tsx', cli, ...args], { encoding: 'utf8', timeout: 60_000 })
  return { status, stdout, stderr }
}

describe('the command without prom-client', () => {
  it('the simulator commands exit 1 naming the optional peer to install', () => {
    for (const command of [['demo'], ['serve', '--port', '0'], ['conform', '--', 'true']]) {
      expect(withoutPromClient(...command)).toEqual({ status: 1, stdout: '', stderr: expect.stringMatching(/needs prom-client.*npm install --save-dev prom-client/) })
    }
  })

  it('help, paths and export run', () => {
    expect(withoutPromClient('--help')).toMatchObject({ status: 0, stdout: expect.stringContaining('Usage: phoenix-link'), stderr: '' })
    expect(withoutPromClient('paths', '--chart', 'reconnect')).toMatchObject({ status: 0, stdout: expect.stringContaining('reconnect chart:'), stderr: '' })
    expect(withoutPromClient('export', '--chart', 'reconnect', '--format', 'mermaid')).toMatchObject({ status: 0, stdout: expect.stringContaining('stateDiagram'), stderr: '' })
  })

  it('the hook does hide it (a module that imports prom-client fails to load)', () => {
    const { status, stderr } = spawnSync(process.execPath, ['--import', hook, '--input-type=module', '-e', "await import('prom-client')"], { encoding: 'utf8' })
    expect(status).toBe(1)
    expect(stderr).toContain("Cannot find package 'prom-client'")
  })
})
