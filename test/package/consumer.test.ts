/**
 * The published package works for the people who install it. The package is packed once
 * (`npm pack`, which runs prepack: tsc and the visualizer build; see packed.ts), and its tarball
 * is installed from npm into temporary projects outside the repository, where this proves:
 *
 * - the tarball holds only what a user needs (compiled JavaScript, declarations, the bin, the
 *   built visualizer page, README and docs text; no .ts sources, source maps, PNGs, tests or
 *   scripts), and prints its packed and unpacked size;
 * - publint (strict) and `attw --profile esm-only` find nothing wrong with it;
 * - a DOM-only TypeScript consumer (lib dom + es2022, `types: []`, no @types/node installed,
 *   strict, skipLibCheck false, moduleResolution bundler) compiles against the main entry: its
 *   declarations need nothing from Node or from the dependencies' own declarations that a
 *   browser project lacks;
 * - a strict Node consumer (exactOptionalPropertyTypes, noUncheckedIndexedAccess, no
 *   skipLibCheck, nodenext) compiles against `.`, `./server`, `./metrics` and `./visualizer`;
 * - esbuild bundles `import { createLink } from 'phoenix-link'` for the browser (minified) with
 *   no warning and no error, and vite builds a page importing it with no warning and no error
 *   (every message its logger gets is recorded);
 * - `require('phoenix-link')` works in Node (require(esm): the package has no top-level await;
 *   Node 20.19+ and 22.12+, as `engines` says); without the optional peer prom-client the client
 *   still loads and `/server` and `/metrics` fail naming prom-client;
 * - the `phoenix-link` command runs from the installed package (`npx phoenix-link paths --json`,
 *   with the optional peer prom-client installed), and `phoenix-link/visualizer` serves its page
 *   from the installed layout (visualizer/dist found beside dist/).
 *
 * It needs npm and the registry or a warm npm cache; without them the installs fail, and so does
 * the suite (it never skips).
 */
import { readFileSync, writeFileSync, mkdirSync, existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bin, bytes, installProject, packPackage, REPO, run, runOk, type Packed } from './packed.js'

const TYPESCRIPT = 'typescript@5.9.3'

let packed: Packed | undefined
/** A browser app's project: bundlers and TypeScript, and no @types/node. */
let web = ''
/** A Node service's project: TypeScript, @types/node, the optional peer prom-client, and the optional peer @types/ws (the simulator's types use ws's). */
let node = ''

beforeAll(async () => {
  const started = performance.now()
  // A file an earlier build left in dist/ (a module since moved): the pack must not ship it.
  packed = await packPackage({
    mutate: (stage) => {
      mkdirSync(join(stage, 'dist', 'src', 'server'), { recursive: true })
      writeFileSync(join(stage, 'dist', 'src', 'server', 'simulator.js'), 'export {}\n')
    },
  })
  const [webDir, nodeDir] = await Promise.all([
    installProject(packed, 'web', [TYPESCRIPT, 'esbuild@0.28.2', 'vite@8.3.8']),
    installProject(packed, 'node', [TYPESCRIPT, '@types/node@20.19.43', '@types/ws@8.18.2', 'prom-client@15.1.3']),
  ])
  web = webDir
  node = nodeDir
  process.stdout.write(`package: packed in ${packed.packMs} ms, installed into two projects in ${Math.round(performance.now() - started - packed.packMs)} ms\n`)
}, 120_000)

afterAll(() => {
  packed?.cleanup()
})

/** Writes `files` (path relative to `dir` -> contents) and returns `dir`. */
function write(dir: string, files: Record<string, string>): string {
  for (const [path, contents] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true })
    writeFileSync(join(dir, path), contents)
  }
  return dir
}

/** tsc's verdict on a project, with its diagnostics in the failure message. */
async function typecheck(project: string, tsconfig: string): Promise<void> {
  const result = await run(bin(project, 'tsc'), ['-p', tsconfig], { cwd: project, timeoutMs: 60_000 })
  expect(`exit ${result.code}\n${result.stdout}${result.stderr}`).toBe('exit 0\n')
}

describe('the packed package', () => {
  it('holds only what a user needs: compiled JavaScript and declarations, the bin, the visualizer page, README and docs text', () => {
    const files = packed!.files.map((f) => f.path)
    const dirs = new Map<string, number>()
    for (const f of packed!.files) {
      const top = f.path.split('/').slice(0, f.path.startsWith('dist/') || f.path.startsWith('visualizer/') ? 2 : 1).join('/')
      dirs.set(top, (dirs.get(top) ?? 0) + f.size)
    }
    process.stdout.write(
      `package tarball: ${files.length} files, packed ${bytes(packed!.size)}, unpacked ${bytes(packed!.unpackedSize)}\n` +
        [...dirs].map(([dir, size]) => `  ${dir.padEnd(24)} ${bytes(size)}`).join('\n') +
        '\n',
    )
    expect(files.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && !f.startsWith('examples/'))).toEqual([])
    expect(files.filter((f) => /\.(map|png|jpe?g|tsbuildinfo)$/.test(f))).toEqual([])
    expect(files.filter((f) => /^(test|scripts|src|machines|bench|soak|scratch|reports)\//.test(f))).toEqual([])
    // The examples the README points to ship as their sources (a user copies them), nothing built or installed.
    expect(files.filter((f) => f.startsWith('examples/') && !/\.(md|ts|mjs|py|html|json)$/.test(f))).toEqual([])
    expect(files.filter((f) => /^examples\/.*\/(node_modules|dist)\//.test(f))).toEqual([])
    // What only the repository's own tests and benchmarks import.
    expect(files.filter((f) => /^dist\/src\/(node\/model\/coverage|adapter\/index)\./.test(f))).toEqual([])
    expect(files.filter((f) => /^dist\/(test|scripts|bench|soak|visualizer)\//.test(f))).toEqual([])
    // The visualizer page bundles others' code (mermaid, d3, elkjs under EPL-2.0): their licences ship
    // with it, each with its text (fastdom's only in its README: Vite found none; the build adds it).
    expect(files).toContain('visualizer/dist/THIRD-PARTY-LICENSES.md')
    const licences = readFileSync(join(REPO, 'visualizer', 'dist', 'THIRD-PARTY-LICENSES.md'), 'utf8')
    expect([...licences.matchAll(/^## (\S+) - \S+[^\n]*\n\n(?=## |(?![\s\S]))/gm)].map((m) => m[1])).toEqual([])
    expect(licences).toMatch(/^## elkjs - 0\.9\.3 \(EPL-2\.0\)\n\n# Eclipse Public License - v 2\.0/m)
    expect(licences).toContain('Copyright (c) 2016 Wilson Page')
    // Nothing of an earlier build (dist/ is emptied first), no pointer to a source map that does not ship.
    expect(files.filter((f) => f.startsWith('dist/src/server/'))).toEqual([])
    expect(packed!.files.filter((f) => f.path.endsWith('.js') && f.body.toString('utf8').includes('sourceMappingURL')).map((f) => f.path)).toEqual([])

    // Everything package.json points at is in it.
    const manifest = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
      exports: Record<string, string | { types: string; default: string }>
      bin: Record<string, string>
    }
    const targets = [
      ...Object.values(manifest.exports).flatMap((target) => (typeof target === 'string' ? [target] : [target.types, target.default])),
      ...Object.values(manifest.bin),
      './dist/src/node/cli.js',
      './visualizer/dist/index.html',
      './README.md',
      './docs/simulator-http.md',
      './docs/simulator-openapi.json',
    ].map((target) => target.replace(/^\.\//, ''))
    expect(targets.filter((target) => !files.includes(target))).toEqual([])
    // Every relative link of the packaged Markdown resolves in the package; the screenshots of
    // docs/visualize.md stay in the repository (images do not ship).
    const broken: string[] = []
    for (const f of packed!.files.filter((file) => file.path.endsWith('.md'))) {
      for (const [, target] of f.body.toString('utf8').matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
        if (/^[a-z]+:/i.test(target!) || target!.endsWith('.png')) continue
        const resolved = join(dirname(f.path), target!).replace(/\/$/, '')
        if (!files.includes(resolved) && !files.some((other) => other.startsWith(`${resolved}/`))) broken.push(`${f.path} -> ${target}`)
      }
    }
    expect(broken).toEqual([])
    expect(files.some((f) => f.startsWith('visualizer/dist/assets/') && f.endsWith('.js'))).toBe(true)
    // The page draws mermaid's state diagrams only: no other diagram type, layout, grammar or katex ships (visualizer/vite.config.ts).
    const assets = files.filter((f) => f.startsWith('visualizer/dist/assets/'))
    expect(assets.filter((f) => /(katex|cytoscape|Diagram|-definition|cose-bilkent|swimlanes)/.test(f) && !/stateDiagram-v2/.test(f))).toEqual([])
    expect(assets.some((f) => /stateDiagram-v2/.test(f))).toBe(true)
  })

  it('passes publint (strict) and attw --profile esm-only', async () => {
    const publint = await run(join(REPO, 'node_modules', '.bin', 'publint'), ['--strict', packed!.tarball], { cwd: packed!.root, timeoutMs: 30_000 })
    expect(`exit ${publint.code}\n${publint.stdout}${publint.stderr}`).toMatch(/^exit 0\n[\s\S]*All good!/)
    const attw = await run(join(REPO, 'node_modules', '.bin', 'attw'), [packed!.tarball, '--profile', 'esm-only', '--format', 'table-flipped'], {
      cwd: packed!.root,
      timeoutMs: 30_000,
    })
    expect(`exit ${attw.code}\n${attw.stdout}${attw.stderr}`).toMatch(/^exit 0\n/)
  })
})

describe('a TypeScript consumer compiles', () => {
  it('DOM-only: lib dom + es2022, types [], strict, skipLibCheck false, moduleResolution bundler', async () => {
    // The project has no Node types at all, so a declaration that needs them fails here.
    expect(existsSync(join(web, 'node_modules', '@types', 'node'))).toBe(false)
    write(join(web, 'dom'), {
      'tsconfig.json': JSON.stringify({
        compilerOptions: {
          target: 'es2022',
          lib: ['dom', 'es2022'],
          types: [],
          strict: true,
          skipLibCheck: false,
          module: 'esnext',
          moduleResolution: 'bundler',
          noEmit: true,
        },
        files: ['main.ts'],
      }),
      'main.ts': `import { createLink, isAgentDisconnectedError, type DisconnectReason, type LinkState, type PingResult } from 'phoenix-link'

const link = createLink({ url: 'wss://platform.example/socket', agentId: 'agent-7', apiKey: async () => 'key', apiKeyIn: 'param' })
const seen: DisconnectReason[] = []
link.on('disconnected', ({ reason, outcome, nextDelayMs }) => {
  seen.push(reason)
  const next: number | null = nextDelayMs
  if (outcome === 'terminated') document.title = reason.kind + String(next)
})
link.on('state', ({ state }: { state: LinkState }) => console.log(state))
const room = link.channel('room:42', () => ({ token: 'fresh' }))
room.on('new_msg', (payload) => console.log(payload instanceof ArrayBuffer ? payload.byteLength : payload))
room.onStatus((status, reason) => console.log(status, reason?.kind))
addEventListener('online', () => link.reconnect() || void link.ping().then((result: PingResult) => {
  if (result.outcome === 'alive') console.log(result.rttMs)
  else if (result.outcome === 'lost') console.log(result.reason.kind, result.disconnected)
  else console.log(result.state)
}))
try {
  await link.connect({ signal: AbortSignal.timeout(5000) })
  await room.push('typing', { on: true }, { timeoutMs: 1000 })
} catch (error) {
  if (isAgentDisconnectedError(error)) console.log(error.reason.kind)
} finally {
  await link.disconnect()
}
const last: DisconnectReason | null = link.lastDisconnectReason
console.log(seen.length, last?.kind)
`,
    })
    await typecheck(web, 'dom/tsconfig.json')
  }, 60_000)

  it('strict Node: exactOptionalPropertyTypes, noUncheckedIndexedAccess, no skipLibCheck, nodenext; . + ./server + ./metrics + ./visualizer', async () => {
    write(join(node, 'strict'), {
      'package.json': '{"type":"module"}\n',
      'tsconfig.json': JSON.stringify({
        compilerOptions: {
          target: 'es2022',
          lib: ['es2023'],
          types: ['node'],
          strict: true,
          exactOptionalPropertyTypes: true,
          noUncheckedIndexedAccess: true,
          skipLibCheck: false,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          noEmit: true,
        },
        files: ['main.ts'],
      }),
      'main.ts': `import { createLink, type DisconnectReason } from 'phoenix-link'
import { startSimulator, type PlatformSimulator } from 'phoenix-link/server'
import { linkMetrics } from 'phoenix-link/metrics'
import { parseTrace, traceLink, type TraceRecord } from 'phoenix-link/visualizer'
import { Registry } from 'prom-client'

const sim: PlatformSimulator = await startSimulator({ agents: { 'agent-7': 'key' }, flavor: 'bandit' })
// Optional values passed through as they are (undefined when the host has none): accepted as left out.
const given: { logger?: Console | undefined; signal?: AbortSignal | undefined } = {}
const link = createLink({ url: sim.url, agentId: 'agent-7', apiKey: 'key', logger: given.logger ?? console, tracer: undefined, runs: { hookTimeoutMs: undefined } })
await link.connect({ signal: given.signal })
await link.whenState('connected', { signal: given.signal })
await link.ping({ timeoutMs: undefined })
await link.channel('room:1').push('x', {}, { signal: given.signal, timeoutMs: undefined }).catch(() => {})
const registry = new Registry()
const metrics = linkMetrics(link, { registry, prefix: 'app_' })
const records: TraceRecord[] = []
const stopTrace = traceLink(link, 'A', (record) => void records.push(record))
link.on('disconnected', ({ reason }) => {
  const r: DisconnectReason = reason
  if (r.kind === 'closed') console.log(r.closeCode, r.closeName)
})
await link.connect()
sim.close({ agent: 'agent-7' }, 1000)
await link.disconnect()
metrics.stop()
stopTrace()
console.log(await registry.metrics(), parseTrace(records.map((r) => JSON.stringify(r)).join('\\n')).length)
await sim.stop()
`,
    })
    await typecheck(node, 'strict/tsconfig.json')
  }, 60_000)
})

describe('bundlers', () => {
  it("esbuild bundles import { createLink } from 'phoenix-link' for the browser (minified) with no warning and no error", async () => {
    write(join(web, 'esbuild'), {
      'entry.js': "import { createLink } from 'phoenix-link'\nexport const link = createLink({ url: 'wss://platform.example/socket', agentId: 'a', apiKey: 'k' })\n",
      'build.mjs': `import * as esbuild from 'esbuild'
const result = await esbuild.build({
  entryPoints: ['esbuild/entry.js'], bundle: true, platform: 'browser', format: 'esm', minify: true,
  outfile: 'esbuild/out.js', logLevel: 'silent', metafile: true,
}).catch((failure) => ({ errors: failure.errors ?? [String(failure)], warnings: failure.warnings ?? [] }))
const node = result.metafile ? Object.keys(result.metafile.inputs).filter((input) => /(^|\\/)node:|\\/(ws|commander|prom-client)\\//.test(input)) : []
process.stdout.write(JSON.stringify({ errors: result.errors.map((m) => m.text ?? m), warnings: result.warnings.map((m) => m.text), node, bytes: result.metafile ? Object.values(result.metafile.outputs)[0].bytes : 0 }))
`,
    })
    const result = await runOk(process.execPath, ['esbuild/build.mjs'], { cwd: web, timeoutMs: 30_000 })
    const report = JSON.parse(result.stdout) as { errors: string[]; warnings: string[]; node: string[]; bytes: number }
    process.stdout.write(`esbuild browser bundle of createLink: ${bytes(report.bytes)} minified\n`)
    expect({ errors: report.errors, warnings: report.warnings, node: report.node }).toEqual({ errors: [], warnings: [], node: [] })
    expect(report.bytes).toBeGreaterThan(10_000)
  }, 30_000)

  it('a browser bundle of a Node-only entry (/server, /metrics, /visualizer, /testing) fails at build time, saying it runs only in Node', async () => {
    const entries = ['server', 'metrics', 'visualizer', 'testing']
    write(join(web, 'node-only'), {
      ...Object.fromEntries(entries.map((entry) => [`${entry}.js`, `import * as m from 'phoenix-link/${entry}'\nconsole.log(m)\n`])),
      'build.mjs': `import * as esbuild from 'esbuild'
const out = {}
for (const entry of ${JSON.stringify(entries)}) {
  out[entry] = await esbuild.build({ entryPoints: ['node-only/' + entry + '.js'], bundle: true, platform: 'browser', format: 'esm', write: false, logLevel: 'silent' })
    .then(() => null, (failure) => (failure.errors ?? []).map((m) => m.text).join('; '))
}
process.stdout.write(JSON.stringify(out))
`,
    })
    const result = await runOk(process.execPath, ['node-only/build.mjs'], { cwd: web, timeoutMs: 30_000 })
    const errors = JSON.parse(result.stdout) as Record<string, string | null>
    for (const entry of entries) expect(errors[entry], entry).toMatch(/^Could not resolve ".*run-only-in-Node--in-a-browser-import-createLink-from-phoenix-link\.js"$/)
  }, 30_000)

  it('vite builds a page importing it, its logger hearing no warning and no error', async () => {
    write(join(web, 'page'), {
      'index.html': '<!doctype html>\n<html><head><meta charset="utf-8"><title>link</title></head><body><p id="state">idle</p><script type="module" src="./main.js"></script></body></html>\n',
      'main.js': "import { createLink } from 'phoenix-link'\nconst link = createLink({ url: 'wss://platform.example/socket', agentId: 'a', apiKey: 'k' })\nlink.on('state', ({ state }) => { document.getElementById('state').textContent = state })\n",
      'build.mjs': `import { build } from 'vite'
const heard = []
const record = (level) => (message) => heard.push({ level, message: String(message) })
const customLogger = {
  info() {}, clearScreen() {}, hasErrorLogged: () => heard.some((m) => m.level === 'error'), hasWarned: false,
  warn: record('warn'), warnOnce: record('warn'), error: record('error'),
}
let failed = null
try {
  await build({ root: new URL('.', import.meta.url).pathname, configFile: false, logLevel: 'info', customLogger, build: { outDir: 'dist', emptyOutDir: true } })
} catch (error) {
  failed = String(error && error.message || error)
}
process.stdout.write('\\n@@' + JSON.stringify({ heard, failed }))
`,
    })
    const result = await runOk(process.execPath, ['page/build.mjs'], { cwd: web, timeoutMs: 60_000 })
    const report = JSON.parse(result.stdout.slice(result.stdout.lastIndexOf('@@') + 2)) as { heard: unknown[]; failed: string | null }
    expect(report).toEqual({ heard: [], failed: null })
    expect(readFileSync(join(web, 'page', 'dist', 'index.html'), 'utf8')).toMatch(/<script type="module"[^>]*src="\/assets\/index-[\w-]+\.js"/)
  }, 60_000)
})

describe('Node', () => {
  it("require('phoenix-link') works (require(esm), Node ^20.19 || >=22.12 as engines says)", async () => {
    const manifest = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { engines: { node: string } }
    expect(manifest.engines.node).toBe('^20.19.0 || >=22.12.0')
    const script = "const m = require('phoenix-link'); const s = require('phoenix-link/server'); console.log(typeof m.createLink, typeof s.startSimulator, m.LINK_STATES.length)"
    const result = await run(process.execPath, ['-e', script], { cwd: node, timeoutMs: 30_000 })
    process.stdout.write(`require('phoenix-link') in Node ${process.version}: ${result.stdout.trim()}${result.stderr ? ` (stderr: ${result.stderr.trim()})` : ''}\n`)
    expect({ code: result.code, stdout: result.stdout.trim().split(' ').slice(0, 2) }).toEqual({ code: 0, stdout: ['function', 'function'] })
    expect(result.stderr).not.toMatch(/Error/)
  }, 30_000)

  it('without the optional peer prom-client: the client loads, /server and /metrics fail naming prom-client', async () => {
    // The browser app's project has no prom-client (npm installs no optional peer).
    expect(existsSync(join(web, 'node_modules', 'prom-client'))).toBe(false)
    const script = [
      "import('phoenix-link').then((m) => console.log('client', typeof m.createLink))",
      ".then(() => import('phoenix-link/server')).catch((e) => console.log('server', e.code, e.message))",
      ".then(() => import('phoenix-link/metrics')).catch((e) => console.log('metrics', e.code, e.message))",
    ].join('')
    const result = await run(process.execPath, ['-e', script], { cwd: web, timeoutMs: 30_000 })
    expect({ code: result.code, lines: result.stdout.trim().split('\n'), stderr: result.stderr }).toEqual({
      code: 0,
      lines: [
        'client function',
        expect.stringMatching(/^server ERR_MODULE_NOT_FOUND Cannot find package 'prom-client' imported from \S+\/phoenix-link\/dist\/src\/node\/server\/metrics\.js/),
        expect.stringMatching(/^metrics ERR_MODULE_NOT_FOUND Cannot find package 'prom-client' imported from \S+\/phoenix-link\/dist\/src\/node\/metrics\.js/),
      ],
      stderr: '',
    })
  }, 30_000)

  it('the phoenix-link command runs from the installed package: npx phoenix-link paths --json and --version', async () => {
    const paths = await runOk('npx', ['--no', '--', 'phoenix-link', 'paths', '--json'], { cwd: node, timeoutMs: 60_000 })
    const lines = paths.stdout.split('\n').filter((line) => line.trim() !== '')
    process.stdout.write(`npx phoenix-link paths --json: ${lines.length} paths; first: ${lines[0]!.slice(0, 120)}...\n`)
    const first = JSON.parse(lines[0]!) as { chart: string; steps: unknown[] }
    expect(first.chart).toBe('connection')
    expect(first.steps.length).toBeGreaterThan(0)
    expect(lines.length).toBeGreaterThan(50)
    const version = await runOk('npx', ['--no', '--', 'phoenix-link', '--version'], { cwd: node, timeoutMs: 30_000 })
    expect(version.stdout.trim()).toBe((JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version)
  }, 90_000)

  it('phoenix-link/visualizer serves its page from the installed layout (visualizer/dist beside dist/)', async () => {
    write(join(node, 'visualizer'), {
      'serve.mjs': `import { startVisualizer } from 'phoenix-link/visualizer'
const server = await startVisualizer({ port: 0 })
try {
  const page = await fetch(server.url)
  const html = await page.text()
  const asset = /src="\\.?\\/?(assets\\/[^"]+\\.js)"/.exec(html)
  const script = asset ? await fetch(new URL(asset[1], server.url)) : null
  const body = script ? await script.arrayBuffer() : new ArrayBuffer(0)
  process.stdout.write(JSON.stringify({ page: page.status, title: /<title>([^<]*)</.exec(html)?.[1] ?? null, asset: asset?.[1] ?? null, script: script?.status ?? null, scriptBytes: body.byteLength }))
} finally {
  await server.close()
}
`,
    })
    const result = await runOk(process.execPath, ['visualizer/serve.mjs'], { cwd: node, timeoutMs: 30_000 })
    const report = JSON.parse(result.stdout) as { page: number; title: string | null; asset: string | null; script: number | null; scriptBytes: number }
    expect(report).toMatchObject({ page: 200, title: 'phoenix-link visualizer', script: 200 })
    expect(report.scriptBytes).toBeGreaterThan(1000)
    // Served from the installed copy, which no build step ever touched.
    expect(existsSync(join(node, 'node_modules', 'phoenix-link', 'visualizer', 'dist', report.asset!))).toBe(true)
  }, 30_000)
})
