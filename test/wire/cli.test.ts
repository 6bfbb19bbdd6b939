/**
 * The command line as a user runs it: `serve` and `connect` in child processes, stopped with
 * Ctrl-C (SIGINT) or SIGTERM, with the exit codes the README promises.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { next, useWorld } from '../support/wire.js'

const world = useWorld()
const root = fileURLToPath(new URL('../..', import.meta.url))

function cli(args: string[], env: Record<string, string> = {}): ChildProcessWithoutNullStreams {
  return spawn(process.execPath, ['--import', 'tsx', 'src/node/cli.ts', ...args], { cwd: root, env: { ...process.env, ...env } })
}

/** Resolves with the first stdout JSON line matching `check`, bounded. */
function line(child: ChildProcessWithoutNullStreams, check: (event: Record<string, unknown>) => boolean, what: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    let buffer = ''
    const timer = setTimeout(() => {
      child.stdout.off('data', onData)
      reject(new Error(`timed out waiting for ${what}; output so far:\n${buffer}`))
    }, 15_000)
    const onData = (chunk: Buffer) => {
      buffer += chunk.toString()
      for (const text of buffer.split('\n')) {
        if (!text.startsWith('{')) continue
        const event = JSON.parse(text) as Record<string, unknown>
        if (check(event)) {
          clearTimeout(timer)
          child.stdout.off('data', onData)
          resolve(event)
          return
        }
      }
    }
    child.stdout.on('data', onData)
  })
}

/** The `--json` lines of a command's stdout. */
function jsonLines(stdout: string): Array<{ source: string; type: string; error?: string }> {
  return stdout
    .trim()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { source: string; type: string; error?: string })
}

function exit(child: ChildProcessWithoutNullStreams): Promise<number | null> {
  return new Promise((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.once('exit', (code) => resolve(code))))
}

describe('phoenix-link command line', () => {
  it('connect logs the transitions and exits 0 on Ctrl-C after a graceful stop', async () => {
    const sim = await world().sim()
    const child = cli(['connect', '--url', sim.url, '--agent-id', 'agent-1', '--json'], { PHOENIX_LINK_API_KEY: 'key-1' })
    await line(child, (e) => e.type === 'connected', 'connected')
    const closed = sim.waitFor(() => sim.accepted('agent-1')[0]?.state === 'closed', { timeoutMs: 10_000 })
    child.kill('SIGINT')
    expect(await exit(child)).toBe(0)
    await closed
    expect(sim.accepted('agent-1')[0]!.closeSeen?.code).toBe(1000)
  })

  it('connect exits 2 on a terminal reason and prints it', async () => {
    const sim = await world().sim()
    const child = cli(['connect', '--url', sim.url, '--agent-id', 'agent-1', '--api-key', 'wrong', '--json'])
    const ended = await line(child, (e) => e.type === 'ended', 'the terminal reason')
    expect(ended).toMatchObject({ reason: { kind: 'rejected', cause: 'unauthenticated', status: 403 } })
    expect(await exit(child)).toBe(2)
  })

  it("connect --json prints a supersede's megabyte payload as its length, not as a megabyte line; exit 2", async () => {
    const sim = await world().sim()
    const child = cli(['connect', '--url', sim.url, '--agent-id', 'agent-1', '--json'], { PHOENIX_LINK_API_KEY: 'key-1' })
    let stdout = ''
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()))
    await line(child, (e) => e.type === 'connected', 'connected')
    sim.supersede('agent-1', { payload: { reason: 'session.already_connected', message: 'newer', padding: 'p'.repeat(1_000_000) } })
    expect(await exit(child)).toBe(2)
    const lines = stdout.trim().split('\n')
    for (const text of lines) expect(text.length).toBeLessThan(4000)
    const events = lines.map((text) => JSON.parse(text) as { type: string; reason?: { kind: string; cause?: string; raw?: unknown } })
    for (const type of ['disconnected', 'ended']) {
      expect(events.find((e) => e.type === type)?.reason, type).toMatchObject({
        kind: 'superseded',
        cause: 'session.already_connected',
        raw: { omitted: expect.stringMatching(/^10000\d\d characters of JSON, over the 1000 a line prints$/) },
      })
    }
  })

  it('connect prints no key, as text or --json, when a server echoes it back', async () => {
    const key = 'sk-live-0123456789abcdef'
    const sim = await world().sim({ agents: { 'agent-1': key } })
    const refusal = { status: 401, body: { text: `{"error":{"code":"invalid_api_key","message":"key ${key} was revoked"}}` } }
    sim.refuseUpgrades(refusal, refusal)
    for (const mode of [['--json'], []]) {
      const child = cli(['connect', '--url', sim.url, '--agent-id', 'agent-1', ...mode], { PHOENIX_LINK_API_KEY: key })
      let stdout = ''
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()))
      expect(await exit(child)).toBe(2)
      expect(stdout).toContain('was revoked')
      expect(stdout).toContain('[redacted]')
      expect(stdout).not.toContain('0123456789abcdef')
    }
  })

  it('connect refuses a bad URL with exit 1 and a message naming the fix', async () => {
    const child = cli(['connect', '--url', 'ws://platform.example/socket', '--agent-id', 'a', '--api-key', 'k'])
    let stderr = ''
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
    expect(await exit(child)).toBe(1)
    expect(stderr).toMatch(/not loopback.*wss:\/\//s)
  })

  it('a port or a duration that is not written in decimal digits is refused with exit 1, not read as hex or an exponent; so is a --channel pattern Phoenix would not compile', async () => {
    const expected: Record<string, RegExp> = {
      '--port': /a port is a whole number in \[0, 65535\]/,
      '--quiet': /milliseconds, a whole number/,
      '--history': /--history <n>' argument '-1' is invalid\. a whole number >= 0/,
      // The 429 scenario's wait is the cap plus its Retry-After (3 s): one timer, at most 2^31-1 ms.
      '--reconnect-cap': /argument '2147483000' is invalid\. milliseconds, a whole number in \[1, 2147480647\]/,
      '--retry-after': /--retry-after <s>' argument '0' is invalid\. whole seconds in \[1, 86400\]/,
      '--stop-timeout': /--stop-timeout <ms>' argument '3s' is invalid\. milliseconds, a whole number/,
      '--channel': /^phoenix-link: --channel: "ro\*om" holds a \* before its end; a pattern is an exact topic or a prefix ending in \*/,
    }
    for (const args of [['serve', '--channel', 'ro*om', '--port', '0'], ['serve', '--port', '0x1f90'], ['serve', '--port', '1e3'], ['conform', '--quiet', '1e3', '--', 'true'], ['serve', '--history', '-1'], ['conform', '--reconnect-cap', '2147483000', '--', 'true'], ['conform', '--retry-after', '0', '--', 'true'], ['conform', '--stop-timeout', '3s', '--', 'true']]) {
      const child = cli(args)
      let stderr = ''
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
      expect(await exit(child)).toBe(1)
      expect(stderr).toMatch(expected[args[1]!]!)
    }
  })

  it('--version prints the package version', async () => {
    const child = cli(['--version'])
    let stdout = ''
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()))
    expect(await exit(child)).toBe(0)
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
    expect(stdout.trim()).toBe(version)
  })

  it('connect --trace to a path it cannot write fails at once with exit 1, naming the path, before connecting', async () => {
    const sim = await world().sim()
    const child = cli(['connect', '--url', sim.url, '--agent-id', 'agent-1', '--api-key', 'key-1', '--trace', '/nonexistent-dir/t.jsonl'])
    let stderr = ''
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
    expect(await exit(child)).toBe(1)
    expect(stderr).toMatch(/cannot write the trace to \/nonexistent-dir\/t\.jsonl: ENOENT/)
    expect(sim.accepted()).toHaveLength(0)
  })

  it.skipIf(!existsSync('/dev/full'))('output that cannot be written (a full disk) ends a command with one line and exit 1, not a stack trace', async () => {
    const full = openSync('/dev/full', 'w')
    try {
      // A command's own output, and the help text commander writes before it exits.
      for (const args of [['paths', '--json'], ['--help']]) {
        const child = spawn(process.execPath, ['--import', 'tsx', 'src/node/cli.ts', ...args], { cwd: root, stdio: ['ignore', full, 'pipe'] })
        let stderr = ''
        child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
        const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
        expect(code, args.join(' ')).toBe(1)
        expect(stderr, args.join(' ')).toBe('phoenix-link: cannot write the output: ENOSPC: no space left on device, write\n')
      }
    } finally {
      closeSync(full)
    }
  })

  it.skipIf(!existsSync('/dev/full'))('demo --trace to a file that fails as it is written: the failure reported once, the trace never said written, exit 1', async () => {
    const child = cli(['demo', '--json', '--trace', '/dev/full'])
    let stdout = ''
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()))
    expect(await exit(child)).toBe(1)
    const events = jsonLines(stdout)
    expect(events.filter((e) => e.source === 'trace').map((e) => e.type)).toEqual(['failed'])
    // The demo's own steps held; its last line says the trace is what failed.
    expect(events.filter((e) => e.source === 'demo' && e.type === 'failed').map((e) => e.error)).toEqual([expect.stringMatching(/^the trace was not written: .*ENOSPC/)])
  })

  it.skipIf(!existsSync('/dev/full'))('connect --trace to a file that fails as it is written: the failure reported, exit 1 after Ctrl-C, not 0', async () => {
    const sim = await world().sim()
    const child = cli(['connect', '--url', sim.url, '--agent-id', 'agent-1', '--json', '--trace', '/dev/full'], { PHOENIX_LINK_API_KEY: 'key-1' })
    let stdout = ''
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()))
    await line(child, (e) => e.type === 'connected', 'connected')
    child.kill('SIGINT')
    expect(await exit(child)).toBe(1)
    const events = jsonLines(stdout)
    expect(events.filter((e) => e.source === 'trace').map((e) => e.type)).toEqual(['failed', 'not-written'])
    expect(events.at(-1)?.error).toMatch(/ENOSPC/)
  })

  it('a visualizer port in use fails the start with exit 1 and leaves an earlier trace at the --trace path as it was', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'phoenix-link-cli-'))
    const taken = createServer()
    try {
      await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
      const port = String((taken.address() as AddressInfo).port)
      const earlier = join(dir, 'earlier.jsonl')
      writeFileSync(earlier, '{"kept":true}\n')
      for (const command of [['demo'], ['connect', '--url', 'ws://127.0.0.1:9/socket', '--agent-id', 'a', '--api-key', 'k']]) {
        const child = cli([...command, '--visualize-port', port, '--trace', earlier])
        let stderr = ''
        child.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
        expect(await exit(child), command[0]).toBe(1)
        // --visualize-port alone asks for the visualizer (it implies --visualize): its port is taken.
        expect(stderr, command[0]).toMatch(/EADDRINUSE/)
        expect(readFileSync(earlier, 'utf8'), command[0]).toBe('{"kept":true}\n')
      }
    } finally {
      await new Promise((resolve) => taken.close(resolve))
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('an empty --trace or --channel is refused with exit 1 before anything runs, not ignored', async () => {
    for (const command of [['demo'], ['connect', '--url', 'ws://127.0.0.1:9/socket', '--agent-id', 'a', '--api-key', 'k']]) {
      const child = cli([...command, '--trace', ''])
      let stderr = ''
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
      expect(await exit(child), command[0]).toBe(1)
      expect(stderr).toMatch(/option '--trace <file>' argument '' is invalid\. a file path, not an empty string/)
    }
    // An unset shell variable, not a route of the empty topic.
    const serve = cli(['serve', '--port', '0', '--channel', ''])
    let stderr = ''
    serve.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
    expect(await exit(serve)).toBe(1)
    expect(stderr).toMatch(/option '--channel <pattern>' argument '' is invalid\. a topic or a prefix ending in \*, such as room:\*; not an empty string/)
  })

  it('serve runs the simulator until Ctrl-C; --channel routes topics as a Phoenix socket does, "unmatched topic" for the rest', async () => {
    const child = cli(['serve', '--port', '0', '--agent', 'agent-1:key-1', '--channel', 'room:*', '--channel', 'lobby', '--json'])
    const listening = await line(child, (e) => e.type === 'listening', 'listening')
    const url = String(listening.url)
    expect(url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/socket$/)
    expect(listening.channels).toEqual(['room:*', 'lobby'])
    const sim = await world().sim()
    const link = world().link(sim, { url })
    await link.connect()
    const room = link.channel('room:1')
    const lobby = link.channel('lobby')
    const task = link.channel('task:1')
    await Promise.all([room.joined(), lobby.joined()])
    await expect(task.joined()).rejects.toMatchObject({ reason: { kind: 'rejected', cause: 'protocol-error', phase: 'join' } })
    expect(link.state).toBe('connected')
    await link.disconnect()
    child.kill('SIGINT')
    expect(await exit(child)).toBe(0)
  })

  for (const signal of ['SIGTERM', 'SIGHUP'] as const) {
    it(`serve drains on ${signal} as a Phoenix endpoint does on SIGTERM: every socket closed 1012, no reason text; exit 0${signal === 'SIGHUP' ? ' (a closed terminal ended it at once, with no drain)' : ''}`, async () => {
      const child = cli(['serve', '--port', '0', '--agent', 'agent-1:key-1', '--json'])
      const listening = await line(child, (e) => e.type === 'listening', 'listening')
      const sim = await world().sim()
      const link = world().link(sim, { url: String(listening.url) })
      await link.connect()
      const lost = next(link, 'disconnected')
      child.kill(signal)
      const { reason, outcome } = await lost
      expect(reason).toMatchObject({ kind: 'closed', closeCode: 1012, closeReason: '' })
      expect(outcome).toBe('reconnect')
      expect(await exit(child)).toBe(0)
      await link.disconnect()
    })
  }

  it('paths prints the generated paths as JSON lines, the same the model tests run', async () => {
    const child = cli(['paths', '--chart', 'reconnect', '--json'])
    let out = ''
    child.stdout.on('data', (c: Buffer) => (out += c.toString()))
    expect(await exit(child)).toBe(0)
    const lines = out.trim().split('\n').map((l) => JSON.parse(l) as { chart: string; steps: Array<{ stimulus: string }> })
    const { allPaths } = await import('../../src/node/model/paths.js')
    expect(lines).toHaveLength(allPaths('wire').reconnect.length)
    expect(lines.every((l) => l.chart === 'reconnect' && (l as { set?: string }).set === 'generated' && l.steps.length > 0)).toBe(true)
    // The small policy the reconnect paths run under is said, not left for a reader to mistake for the defaults.
    expect(new Set(lines.map((l) => JSON.stringify((l as { policy?: unknown }).policy)))).toEqual(new Set([JSON.stringify({ stableAfterMs: 5000, rapidWindowMs: 1000, rapidLimit: 2, maxAttempts: 3 })]))
    const text = cli(['paths', '--chart', 'reconnect'])
    let header = ''
    text.stdout.on('data', (c: Buffer) => (header += c.toString()))
    expect(await exit(text)).toBe(0)
    expect(header.split('\n')[0]).toBe(
      `reconnect chart: ${lines.length} wire paths, generated with xstate/graph from machines/reconnect.ts, under a small policy so that its slow-down and give-up paths are short: stableAfterMs 5000 (default 60000), rapidWindowMs 1000 (default 5000), rapidLimit 2 (default 10), maxAttempts 3 (default none)`,
    )
  })

  it('paths --json prints the connection paths in the test kit’s stimulus vocabulary, equal to lifecyclePaths()', async () => {
    const child = cli(['paths', '--chart', 'connection', '--json'])
    let out = ''
    child.stdout.on('data', (c: Buffer) => (out += c.toString()))
    expect(await exit(child)).toBe(0)
    const lines = out.trim().split('\n').map((l) => JSON.parse(l) as { name: string; steps: unknown[] })
    const { lifecyclePaths } = await import('../../src/node/testing/index.js')
    expect(lines.map(({ name, steps }) => ({ name, steps }))).toEqual(JSON.parse(JSON.stringify(lifecyclePaths())))
    expect(out).toContain('{"name":"close 1000","stimulus":{"type":"server.close","code":1000}')
  })

  it('paths --reconnects prints the paths that reconnect, equal to reconnectPaths(), and refuses a chart or mode they do not exist for', async () => {
    const child = cli(['paths', '--reconnects', '--json'])
    let out = ''
    child.stdout.on('data', (c: Buffer) => (out += c.toString()))
    expect(await exit(child)).toBe(0)
    const lines = out.trim().split('\n').map((l) => JSON.parse(l) as { chart: string; set: string; index: number; name: string; steps: unknown[] })
    const { reconnectPaths } = await import('../../src/node/testing/index.js')
    expect(lines.map(({ name, steps }) => ({ name, steps }))).toEqual(JSON.parse(JSON.stringify(reconnectPaths())))
    expect(lines.map((l) => [l.chart, l.set, l.index])).toEqual(reconnectPaths().map((_, i) => ['connection', 'reconnect', i + 1]))
    const text = cli(['paths', '--reconnects'])
    let printed = ''
    text.stdout.on('data', (c: Buffer) => (printed += c.toString()))
    expect(await exit(text)).toBe(0)
    expect(printed.split('\n')[0]).toBe(`connection chart: ${lines.length} wire paths on which a connected link loses its socket and connects again on the next, twice (reconnectPaths())`)
    expect(printed.trim().split('\n')).toHaveLength(lines.length + 1)
    for (const args of [['--chart', 'channel'], ['--mode', 'pure']]) {
      const refused = cli(['paths', '--reconnects', ...args])
      let err = ''
      refused.stderr.on('data', (c: Buffer) => (err += c.toString()))
      expect(await exit(refused)).toBe(1)
      expect(err).toBe(`error: --reconnects prints wire paths of the connection chart, not with ${args.join(' ')}\n`)
    }
  })
})
