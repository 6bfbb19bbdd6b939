/**
 * The leak check itself (test/support/no-leaks.ts), run on fixtures that leak on purpose in a
 * vitest of their own: each leaking test fails with what it left, the test that released all it
 * opened passes. Without this, a check that stopped checking would pass the whole suite.
 */
import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'

const root = fileURLToPath(new URL('../..', import.meta.url))
const dir = mkdtempSync(join(tmpdir(), 'no-leaks-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

interface Assertion {
  title: string
  status: 'passed' | 'failed'
  failureMessages: string[]
}

/** Runs the fixtures once; resolves with each test's outcome by title. */
async function runFixtures(): Promise<Map<string, Assertion>> {
  const outputFile = join(dir, 'report.json')
  await new Promise<void>((resolve) => {
    execFile(
      process.execPath,
      [join(root, 'node_modules/vitest/vitest.mjs'), 'run', '--config', 'test/fixtures/leaks/vitest.config.ts', '--reporter=json', `--outputFile=${outputFile}`],
      { cwd: root, timeout: 60_000 },
      () => resolve(), // it exits 1: the fixtures fail on purpose; the report says how
    )
  })
  const report = JSON.parse(readFileSync(outputFile, 'utf8')) as { testResults: Array<{ assertionResults: Assertion[] }> }
  return new Map(report.testResults.flatMap((file) => file.assertionResults).map((a) => [a.title, a]))
}

describe('the leak check', () => {
  let results: Map<string, Assertion>
  const outcome = async (title: string): Promise<Assertion> => {
    results ??= await runFixtures()
    const found = results.get(title)
    expect(found, `fixture "${title}" ran`).toBeDefined()
    return found!
  }

  it('fails a test that leaves a 1 ms timer armed', async () => {
    const r = await outcome('leaks a 1 ms timer')
    expect(r.status).toBe('failed')
    expect(r.failureMessages.join('\n')).toContain('test left timers armed: Timeout(1 ms)')
  }, 60_000)

  it('fails a test that leaves an interval', async () => {
    const r = await outcome('leaks an interval')
    expect(r.status).toBe('failed')
    expect(r.failureMessages.join('\n')).toContain('Timeout(10000 ms)')
  }, 60_000)

  it('fails a test that leaves a server listening or a socket open', async () => {
    const server = await outcome('leaves a server listening')
    expect(server.status).toBe('failed')
    expect(server.failureMessages.join('\n')).toContain('test left open handles')
    expect(server.failureMessages.join('\n')).toContain('TCPSERVERWRAP')
    const socket = await outcome('leaves a client socket open')
    expect(socket.status).toBe('failed')
    expect(socket.failureMessages.join('\n')).toContain('TCPWRAP')
  }, 60_000)

  it('fails a test that leaves a listener on process', async () => {
    const r = await outcome('leaves a listener on process')
    expect(r.status).toBe('failed')
    expect(r.failureMessages.join('\n')).toContain('test left listeners on process: warning (+1)')
  }, 60_000)

  it('passes a test that released all it opened and awaited it', async () => {
    const r = await outcome('releases all it opened and awaits it')
    expect(r.failureMessages).toEqual([])
    expect(r.status).toBe('passed')
  }, 60_000)
})
