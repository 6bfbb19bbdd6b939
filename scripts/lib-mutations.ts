/**
 * Sampled mutation testing of the library parts only a socket exercises (`npm run mutate:lib`):
 * the adapter, the ws transport, the link, the channel handle and the simulator. Stryker's own
 * mutators (@stryker-mutator/instrumenter) list every mutant of each file; a seeded random sample
 * of them is applied one at a time to a copy of the repository (.mutation-sandbox, refreshed from
 * the working tree at start), and the file's tests (the wire tests, each file's list below) run
 * against each mutant with --bail. A full Stryker run of these files would take a day on two
 * cores: every mutant there runs most of the wire suite.
 *
 * Results accumulate in reports/mutation/sampled.json (committed, unlike the rest of reports/, so
 * a later checkout can rerun one file and keep the others' results), keyed by the file's source: a rerun tests
 * only mutants without a result (after a change to the source, its sample is drawn again);
 * `--survivors` retests the survivors (after new tests); `--file src/link.ts` limits the run to
 * one file. scripts/mutation-report.ts then writes the score per file into docs/mutation.md.
 *
 * Usage: npm run mutate:lib -- [--file <path>]... [--survivors] [--scale <factor>] [--report-only]
 */
import { execFileSync, spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Instrumenter } from '@stryker-mutator/instrumenter'
import { sameCode } from './same-code.js'
import { seeded } from './seeded.js'

const root = fileURLToPath(new URL('..', import.meta.url))
const sandbox = join(root, '.mutation-sandbox')
const resultsPath = join(root, 'reports/mutation/sampled.json')

/** The tests a socket-level part is judged by: the wire tests, less those that start processes or run for long. */
const WIRE = ['test/wire', 'test/interop', 'test/model/paths.test.ts', 'test/model/properties.test.ts', 'test/unit']
const EXCLUDE = [
  'test/wire/demo.test.ts',
  'test/wire/cli.test.ts',
  'test/unit/bin.test.ts',
  'test/unit/export.test.ts',
  'test/unit/no-leaks.test.ts',
  'test/unit/docs.test.ts',
]
/**
 * The ws transport, the adapter and the link have browser branches (the transport's close bound,
 * the adapter's Socket made without page listeners, the link's default key place), which only
 * the link's tests in headless Chromium run (they skip without it).
 */
const BROWSER_AND_WIRE = [...WIRE, 'test/browser/link.test.ts']
/** The simulator is judged by the wire tests too (they read what it saw) and by its conformance scenarios. */
const SERVER = [...WIRE, 'test/conformance/simulator.test.ts']
/**
 * The simulator's HTTP routes are judged by the tests that call them over HTTP (the whole wire
 * suite reaches them only through these) and by the generated-docs check (their OpenAPI
 * document), so a mutant there costs a minute, not five.
 */
const HTTP = ['test/wire/simulator-http.test.ts', 'test/wire/presence.test.ts', 'test/wire/secrets.test.ts', 'test/unit', 'test/unit/docs.test.ts']

interface Target {
  file: string
  /** How many mutants to draw; the whole population when it is smaller. */
  sample: number
  tests: string[]
}

/**
 * The files and their samples. A surviving mutant runs the whole wire suite (about 2 minutes on
 * two cores), so the samples are sized for a run of about an hour and a half: the 95% interval
 * is about ±15 points per file at 25 draws and about ±7 points over all of them. `--scale 2`
 * doubles every sample (the first draws stay the same, so results already in hand are kept).
 */
export const TARGETS: Target[] = [
  { file: 'src/adapter/phoenix-adapter.ts', sample: 25, tests: BROWSER_AND_WIRE },
  { file: 'src/adapter/ws-transport.ts', sample: 15, tests: BROWSER_AND_WIRE },
  { file: 'src/link.ts', sample: 25, tests: BROWSER_AND_WIRE },
  { file: 'src/link-channel.ts', sample: 15, tests: WIRE },
  { file: 'src/node/server/simulator.ts', sample: 25, tests: SERVER },
  { file: 'src/node/server/connection.ts', sample: 12, tests: SERVER },
  { file: 'src/node/server/admin.ts', sample: 10, tests: HTTP },
  { file: 'src/node/server/control-api.ts', sample: 25, tests: HTTP },
]

/** Seed of the draw, so a rerun on the same source draws the same mutants. */
const SEED = 14

export type SampledStatus = 'Killed' | 'Survived' | 'Timeout' | 'RuntimeError'

export interface SampledMutant {
  /** `mutator@line:column-line:column` (1-based lines, 0-based columns) and the replacement. */
  key: string
  mutatorName: string
  replacement: string
  /** 1-based lines and columns, as in Stryker's JSON report. */
  location: { start: { line: number; column: number }; end: { line: number; column: number } }
  status: SampledStatus
  /** The first failing test, for a killed mutant. */
  killedBy?: string
  durationMs: number
}

export interface SampledFile {
  /** sha256 of the source the sample was drawn from. */
  sourceHash: string
  source: string
  /** How many mutants Stryker lists for the file. */
  population: number
  sampleSize: number
  tests: string[]
  mutants: SampledMutant[]
}

export type SampledResults = Record<string, SampledFile>

interface ListedMutant {
  mutatorName: string
  replacement: string
  location: { start: { line: number; column: number }; end: { line: number; column: number } }
}

const quietLogger = {
  isTraceEnabled: () => false,
  isDebugEnabled: () => false,
  isInfoEnabled: () => false,
  isWarnEnabled: () => true,
  isErrorEnabled: () => true,
  isFatalEnabled: () => true,
  trace: () => {},
  debug: () => {},
  info: () => {},
  warn: (message: string) => process.stderr.write(`${message}\n`),
  error: (message: string) => process.stderr.write(`${message}\n`),
  fatal: (message: string) => process.stderr.write(`${message}\n`),
}

/** Every mutant Stryker makes of `source` (locations 0-based, as the instrumenter gives them). */
async function listMutants(file: string, source: string): Promise<ListedMutant[]> {
  const instrumenter = new Instrumenter(quietLogger as never)
  const result = await instrumenter.instrument([{ name: file, content: source, mutate: true }], { plugins: null, excludedMutations: [], ignorers: [] })
  return result.mutants.map((m) => ({ mutatorName: m.mutatorName, replacement: m.replacement, location: m.location }))
}

function draw<T>(items: T[], n: number, seed: number): T[] {
  const random = seeded(seed)
  const pool = [...items]
  for (let i = pool.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[pool[i], pool[j]] = [pool[j]!, pool[i]!]
  }
  return pool.slice(0, Math.min(n, pool.length))
}

function keyOf(m: ListedMutant): string {
  const { start, end } = m.location
  return `${m.mutatorName}@${start.line + 1}:${start.column}-${end.line + 1}:${end.column}=${m.replacement}`
}

/** `source` with the mutant's range replaced. */
function apply(source: string, m: ListedMutant): string {
  const lines = source.split('\n')
  const offset = (line: number, column: number) => lines.slice(0, line).reduce((n, l) => n + l.length + 1, 0) + column
  const from = offset(m.location.start.line, m.location.start.column)
  const to = offset(m.location.end.line, m.location.end.column)
  return source.slice(0, from) + m.replacement + source.slice(to)
}

/** A fresh copy of the working tree (tracked and untracked files, not ignored ones), sharing node_modules. */
function refreshSandbox(): void {
  rmSync(sandbox, { recursive: true, force: true })
  const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard'], { cwd: root, encoding: 'utf8' }).split('\n').filter(Boolean)
  for (const file of files) {
    if (!existsSync(join(root, file))) continue
    mkdirSync(dirname(join(sandbox, file)), { recursive: true })
    copyFileSync(join(root, file), join(sandbox, file))
  }
  symlinkSync(join(root, 'node_modules'), join(sandbox, 'node_modules'), 'dir')
}

interface Outcome {
  status: SampledStatus
  killedBy?: string
  durationMs: number
}

/** Runs `tests` in the sandbox with --bail; a run past `timeoutMs` is killed with its process group. */
function runTests(tests: string[], timeoutMs: number): Promise<Outcome> {
  const outputFile = join(sandbox, 'reports/mutation-run.json')
  rmSync(outputFile, { force: true })
  const args = [
    join(sandbox, 'node_modules/vitest/vitest.mjs'),
    'run',
    '--bail=1',
    '--reporter=json',
    `--outputFile=${outputFile}`,
    ...tests,
    // A file a target names itself is run, though the wire lists leave it out.
    ...EXCLUDE.filter((e) => !tests.includes(e)).flatMap((e) => ['--exclude', e]),
  ]
  const started = performance.now()
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: sandbox, stdio: ['ignore', 'ignore', 'pipe'], detached: true })
    let stderr = ''
    child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)))
    let timedOut = false
    // The whole process group: vitest, its workers, and what tests spawned (simulator children,
    // the leak checks' processes). A --bail ends vitest with tests still in flight, whose children
    // would otherwise outlive it (found after a run: six such processes, an hour old).
    const killGroup = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL')
      } catch {
        // already gone
      }
    }
    const timer = setTimeout(() => {
      timedOut = true
      killGroup()
    }, timeoutMs)
    child.on('exit', (code) => {
      clearTimeout(timer)
      killGroup()
      const durationMs = Math.round(performance.now() - started)
      if (timedOut) return resolve({ status: 'Timeout', durationMs })
      if (!existsSync(outputFile)) {
        return resolve({ status: 'RuntimeError', killedBy: `no report (exit ${code}): ${stderr.trim().split('\n').slice(-3).join(' ')}`, durationMs })
      }
      const report = JSON.parse(readFileSync(outputFile, 'utf8')) as {
        numFailedTests: number
        testResults: Array<{ name: string; status: string; message?: string; assertionResults: Array<{ status: string; fullName: string }> }>
      }
      const failedTest = report.testResults.flatMap((f) => f.assertionResults.filter((a) => a.status === 'failed').map((a) => `${f.name.replace(`${sandbox}/`, '')}: ${a.fullName}`))[0]
      const failedFile = report.testResults.find((f) => f.status === 'failed')
      if (failedTest) return resolve({ status: 'Killed', killedBy: failedTest, durationMs })
      if (failedFile) return resolve({ status: 'Killed', killedBy: `${failedFile.name.replace(`${sandbox}/`, '')}: ${(failedFile.message ?? 'failed to run').split('\n')[0]}`, durationMs })
      if (code !== 0) return resolve({ status: 'Killed', killedBy: `exit ${code}: ${stderr.trim().split('\n').slice(-2).join(' ')}`, durationMs })
      resolve({ status: 'Survived', durationMs })
    })
  })
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

function loadResults(): SampledResults {
  return existsSync(resultsPath) ? (JSON.parse(readFileSync(resultsPath, 'utf8')) as SampledResults) : {}
}

function saveResults(results: SampledResults): void {
  mkdirSync(dirname(resultsPath), { recursive: true })
  writeFileSync(resultsPath, `${JSON.stringify(results, null, 1)}\n`)
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2)
  const only = argv.flatMap((a, i) => (a === '--file' ? [argv[i + 1]!] : []))
  const survivors = argv.includes('--survivors')
  const scaleAt = argv.indexOf('--scale')
  const scale = scaleAt >= 0 ? Number(argv[scaleAt + 1]) : 1
  if (!(scale > 0)) throw new Error(`--scale must be a positive number, got ${argv[scaleAt + 1]}`)
  if (argv.includes('--report-only')) return
  const targets = TARGETS.filter((t) => only.length === 0 || only.includes(t.file))
  if (targets.length === 0) throw new Error(`no target matches ${only.join(', ')}; targets: ${TARGETS.map((t) => t.file).join(', ')}`)
  const results = loadResults()
  refreshSandbox()

  // The unmutated run must pass: it also gives the time a mutant may take (twice it, and 30 s).
  const baselines = new Map<string, number>()
  for (const tests of new Set(targets.map((t) => t.tests))) {
    const base = await runTests(tests, 900_000)
    if (base.status !== 'Survived') throw new Error(`the unmutated tests fail (${base.status}): ${base.killedBy}`)
    baselines.set(tests.join(' '), base.durationMs)
    process.stdout.write(`baseline ${tests === SERVER ? 'server' : tests === HTTP ? 'http' : tests === BROWSER_AND_WIRE ? 'browser and wire' : 'wire'} tests: ${(base.durationMs / 1000).toFixed(1)} s\n`)
  }

  for (const target of targets) {
    const path = join(sandbox, target.file)
    const source = readFileSync(path, 'utf8')
    const listed = await listMutants(target.file, source)
    const sample = draw(listed, Math.round(target.sample * scale), SEED)
    const previous = results[target.file]
    // The draw is a prefix of one seeded shuffle: a bigger sample keeps every result of a smaller one.
    // A source whose comments alone changed (every token at its line and column) has the same mutants.
    const sameSource = previous !== undefined && (previous.sourceHash === sha256(source) || sameCode(target.file, source, previous.source))
    const done = new Map((sameSource ? previous.mutants : []).map((m) => [m.key, m]))
    const entry: SampledFile = { sourceHash: sha256(source), source, population: listed.length, sampleSize: sample.length, tests: target.tests, mutants: [] }
    const timeoutMs = baselines.get(target.tests.join(' '))! * 2 + 30_000
    for (const [i, m] of sample.entries()) {
      const key = keyOf(m)
      const known = done.get(key)
      if (known && !(survivors && known.status === 'Survived')) {
        entry.mutants.push(known)
        continue
      }
      writeFileSync(path, apply(source, m))
      let outcome: Outcome
      try {
        outcome = await runTests(target.tests, timeoutMs)
      } finally {
        writeFileSync(path, source)
      }
      const { start, end } = m.location
      entry.mutants.push({
        key,
        mutatorName: m.mutatorName,
        replacement: m.replacement,
        location: { start: { line: start.line + 1, column: start.column + 1 }, end: { line: end.line + 1, column: end.column + 1 } },
        ...outcome,
      })
      results[target.file] = entry
      saveResults(results)
      process.stdout.write(`${target.file} ${i + 1}/${sample.length} ${key.slice(0, 90)}: ${outcome.status} in ${(outcome.durationMs / 1000).toFixed(1)} s\n`)
    }
    results[target.file] = entry
    saveResults(results)
  }
}

await main()
execFileSync(process.execPath, ['--import', 'tsx', join(root, 'scripts/mutation-report.ts')], { cwd: root, stdio: 'inherit' })
