/**
 * The examples in examples/ work as a user would run them: against the published package, not
 * this checkout. The package is packed once (packed.ts) and its tarball installed, with pino,
 * prom-client, tsx, vitest 4.1.12, esbuild and TypeScript, into a temporary project outside the
 * repository; examples/ is copied in and each example runs there, importing `phoenix-link` by
 * name. This proves:
 *
 * - the examples typecheck (strict; Node ones with @types/node and nodenext, the browser one with
 *   the DOM lib and no Node types);
 * - examples/node-host with `--once` connects to the simulator, receives a server push and a
 *   control signal, sees the simulator's close 1000 as a reconnect (outcome and reason logged),
 *   reconnects, reports it in its Prometheus metrics, shuts down and exits 0 by itself; and,
 *   run without `--once`, shuts down cleanly and exits 0 on SIGTERM;
 * - examples/vitest passes under the project's own vitest: its hand-written suite, and every
 *   generated connection-chart path (phoenix-link/testing) run against the host it writes with
 *   the README's API, with its own oracle beside the library's;
 * - examples/browser bundles with esbuild for the browser with no warning and no error, and
 *   builds with vite (its index.html) with nothing logged as a warning or an error.
 *
 * It needs npm and the registry or a warm npm cache; without them the install fails, and so
 * does the suite (it never skips).
 */
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bin, childEnv, installProject, packPackage, REPO, run, runOk, type Packed } from './packed.js'

let packed: Packed | undefined
let project = ''

beforeAll(async () => {
  packed = await packPackage()
  project = await installProject(packed, 'examples', [
    'pino@10.4.0',
    'prom-client@15.1.3',
    'vitest@4.1.12',
    'tsx@4.23.15',
    'esbuild@0.28.2',
    'typescript@5.9.3',
    '@types/node@20.19.43',
  ])
  cpSync(join(REPO, 'examples'), join(project, 'examples'), { recursive: true })
}, 120_000)

afterAll(() => {
  packed?.cleanup()
})

/** One pino line of the node-host example's stdout. */
interface LogLine {
  level: number
  msg: string
  [field: string]: unknown
}

function logLines(stdout: string): LogLine[] {
  return stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as LogLine)
}

/** A result as one string, for failure messages that show what the child printed. */
function shown(result: { code: number | null; signal: string | null; stdout: string; stderr: string }): string {
  return `exit ${result.code ?? result.signal}\n--- stdout\n${result.stdout.slice(-5000)}\n--- stderr\n${result.stderr.slice(-5000)}`
}

describe('the examples, against the installed package', () => {
  it('typecheck: node-host and vitest (strict, nodenext, @types/node), browser (strict, DOM lib, no Node types)', async () => {
    writeFileSync(
      join(project, 'tsconfig.node.json'),
      JSON.stringify({
        compilerOptions: { target: 'es2022', lib: ['es2023'], types: ['node'], strict: true, noUncheckedIndexedAccess: true, module: 'nodenext', moduleResolution: 'nodenext', skipLibCheck: true, noEmit: true },
        files: ['examples/node-host/main.ts', 'examples/vitest/agent.test.ts', 'examples/vitest/lifecycle.test.ts'],
      }),
    )
    writeFileSync(
      join(project, 'tsconfig.browser.json'),
      JSON.stringify({
        compilerOptions: { target: 'es2022', lib: ['dom', 'es2022'], types: [], strict: true, noUncheckedIndexedAccess: true, module: 'esnext', moduleResolution: 'bundler', skipLibCheck: true, noEmit: true },
        files: ['examples/browser/main.ts'],
      }),
    )
    const [nodeCheck, browserCheck] = await Promise.all([
      run(bin(project, 'tsc'), ['-p', 'tsconfig.node.json'], { cwd: project, timeoutMs: 60_000 }),
      run(bin(project, 'tsc'), ['-p', 'tsconfig.browser.json'], { cwd: project, timeoutMs: 60_000 }),
    ])
    expect({ node: shown(nodeCheck), browser: shown(browserCheck) }).toEqual({ node: expect.stringMatching(/^exit 0\n/), browser: expect.stringMatching(/^exit 0\n/) })
  }, 60_000)

  it('node-host --once: connects, gets a push and a control signal, reconnects after close 1000, shows it in its metrics, exits 0', async () => {
    const result = await run(process.execPath, ['--import', 'tsx', 'examples/node-host/main.ts', '--once'], { cwd: project, timeoutMs: 30_000 })
    expect(shown(result)).toMatch(/^exit 0\n/)
    const lines = logLines(result.stdout)
    const messages = lines.filter((line) => line.component === undefined).map((line) => line.msg)
    // The host's own lines, in order (the link's own log lines, component phoenix-link, come between).
    const expected = ['connected', 'message on room:lobby', 'control signal', 'disconnected; reconnecting', 'reconnected', 'metric', 'shutting down', 'disconnected (stopped)', 'stopped']
    expect(messages.filter((msg) => expected.includes(msg)).filter((msg, i, all) => msg !== 'metric' || all[i - 1] !== 'metric')).toEqual(expected)
    expect(lines.find((line) => line.msg === 'message on room:lobby')?.payload).toEqual({ body: 'hello from the platform' })
    expect(lines.find((line) => line.msg === 'control signal')).toMatchObject({ mode: 'interrupt', executionId: 'exec-1' })
    expect(lines.find((line) => line.msg === 'disconnected; reconnecting')).toMatchObject({ kind: 'closed', outcome: 'reconnect' })
    const samples = lines.filter((line) => line.msg === 'metric').map((line) => line.sample)
    expect(samples).toContain('phoenix_link_link_reconnects_total{link="agent-7",reason="closed"} 1')
    expect(samples).toContain('phoenix_link_link_state{link="agent-7",state="connected"} 1')
    expect(lines.filter((line) => line.level >= 50)).toEqual([])
  }, 30_000)

  it('node-host without --once: runs until SIGTERM, then shuts down cleanly and exits 0', async () => {
    let signalled = false
    const result = await run(process.execPath, ['--import', 'tsx', 'examples/node-host/main.ts'], {
      cwd: project,
      timeoutMs: 30_000,
      env: childEnv({ AGENT_URL: '', LOG_LEVEL: 'debug' }),
      onStdout: (stdout, child) => {
        // Once connected and its channel joined, the host is in runForever(): stop it as a supervisor would.
        const joined = logLines(stdout.slice(0, stdout.lastIndexOf('\n') + 1)).some((line) => line.msg === 'room:lobby status' && line.status === 'joined')
        if (!signalled && joined) {
          signalled = true
          child.kill('SIGTERM')
        }
      },
    })
    expect(signalled).toBe(true)
    expect(shown(result)).toMatch(/^exit 0\n/)
    const host = logLines(result.stdout).filter((line) => line.component === undefined)
    const ends = ['shutting down', 'disconnected (stopped)', 'stopped']
    expect(host.filter((line) => ends.includes(line.msg)).map((line) => line.msg)).toEqual(ends)
    expect(host.at(-1)?.msg).toBe('stopped')
    expect(host.find((line) => line.msg === 'shutting down')).toMatchObject({ why: 'SIGTERM' })
    expect(host.filter((line) => line.level >= 50)).toEqual([])
  }, 30_000)

  /** Runs one example test file under the project's vitest; resolves with the result and its report, colours stripped. */
  async function vitest(file: string, timeoutMs: number) {
    const result = await run(bin(project, 'vitest'), ['run', file, '--reporter', 'verbose', '--color=false'], { cwd: project, timeoutMs })
    return { result, report: result.stdout.replace(/\x1b\[[0-9;]*m/g, '') } // FORCE_COLOR may reach it from the outer runner
  }

  it('vitest: the example suite passes under the project’s vitest 4.1.12', async () => {
    const { result, report } = await vitest('examples/vitest/agent.test.ts', 60_000)
    expect(shown(result)).toMatch(/^exit 0\n/)
    expect(report).toMatch(/✓ .*reconnects after the platform closes the socket with 1000/)
    expect(report).toMatch(/✓ .*a supersede ends the session for good/)
    expect(report).toMatch(/Tests\s+2 passed \(2\)/)
  }, 60_000)

  it('vitest: every generated connection path, and every path back to connected after a loss, passes against the example host, through phoenix-link/testing', async () => {
    const { result, report } = await vitest('examples/vitest/lifecycle.test.ts', 120_000)
    expect(shown(result)).toMatch(/^exit 0\n/)
    // The count the kit generates in this process, the same as the repository's own model tests run.
    const { lifecyclePaths, reconnectPaths } = await import('../../src/node/testing/index.js')
    const count = lifecyclePaths().length + reconnectPaths().length
    expect(reconnectPaths().length).toBe(10)
    expect(count).toBeGreaterThan(150)
    expect(report).toContain(`${count} lifecycle paths against the host`)
    expect(report).toMatch(new RegExp(`Tests\\s+${count} passed \\(${count}\\)`))
  }, 150_000)

  it('browser: esbuild bundles main.ts for the browser with no warning and no error; vite builds index.html with nothing logged', async () => {
    mkdirSync(join(project, 'build'), { recursive: true })
    writeFileSync(
      join(project, 'build', 'esbuild.mjs'),
      `import * as esbuild from 'esbuild'
const result = await esbuild.build({
  entryPoints: ['examples/browser/main.ts'], bundle: true, platform: 'browser', format: 'esm', minify: true,
  outfile: 'build/out/main.js', logLevel: 'silent', metafile: true,
}).catch((failure) => ({ errors: failure.errors ?? [String(failure)], warnings: failure.warnings ?? [] }))
process.stdout.write(JSON.stringify({ errors: result.errors.map((m) => m.text ?? m), warnings: result.warnings.map((m) => m.text), bytes: result.metafile ? Object.values(result.metafile.outputs)[0].bytes : 0 }))
`,
    )
    writeFileSync(
      join(project, 'build', 'vite.mjs'),
      `import { build } from 'vite'
const heard = []
const record = (level) => (message) => heard.push({ level, message: String(message) })
const customLogger = { info() {}, clearScreen() {}, hasErrorLogged: () => heard.some((m) => m.level === 'error'), hasWarned: false, warn: record('warn'), warnOnce: record('warn'), error: record('error') }
let failed = null
try {
  await build({ root: 'examples/browser', configFile: false, logLevel: 'info', customLogger, build: { outDir: '../../build/vite', emptyOutDir: true } })
} catch (error) {
  failed = String((error && error.message) || error)
}
process.stdout.write('\\n@@' + JSON.stringify({ heard, failed }))
`,
    )
    const esbuild = await runOk(process.execPath, ['build/esbuild.mjs'], { cwd: project, timeoutMs: 30_000 })
    const bundled = JSON.parse(esbuild.stdout) as { errors: string[]; warnings: string[]; bytes: number }
    expect({ errors: bundled.errors, warnings: bundled.warnings }).toEqual({ errors: [], warnings: [] })
    expect(bundled.bytes).toBeGreaterThan(10_000)
    const vite = await runOk(process.execPath, ['build/vite.mjs'], { cwd: project, timeoutMs: 60_000 })
    expect(JSON.parse(vite.stdout.slice(vite.stdout.lastIndexOf('@@') + 2))).toEqual({ heard: [], failed: null })
    expect(readFileSync(join(project, 'build', 'vite', 'index.html'), 'utf8')).toMatch(/<script type="module"[^>]*src="\/assets\/index-[\w-]+\.js"/)
  }, 60_000)
})
