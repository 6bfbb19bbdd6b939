/**
 * The published package as a user gets it, for test/package/*.test.ts: {@link packPackage} runs
 * `npm pack` (and so `prepack`: tsc and the visualizer's vite build) once, on a copy of this
 * checkout's sources in a temporary directory outside the repository, and reads the tarball's
 * real entries; {@link installProject} installs that tarball, with whatever else a consumer
 * needs, into a fresh temporary project through npm (`--prefer-offline`, so the npm cache
 * serves what it holds). Nothing here skips: a pack or an install that fails throws with npm's
 * output, so a machine without the registry or a warm cache fails the suite loudly.
 *
 * Why a copy: each test file packs once, and vitest runs files in parallel; a pack of the
 * checkout itself would have two `prepack`s rewriting dist/ and emptying visualizer/dist
 * (vite's emptyOutDir) under each other, and under whoever else is building in the checkout.
 * The copy holds every source file `npm pack` could see (the whole tree but node_modules, .git
 * and build output; `files` in package.json then picks the same entries it would in the
 * checkout), with node_modules linked to the checkout's.
 *
 * {@link run} spawns a command with a time bound, in its own process group, and resolves once it
 * has exited and its pipes are closed; on the bound it kills the group and rejects.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gunzipSync } from 'node:zlib'

/** The repository root. */
export const REPO = fileURLToPath(new URL('../..', import.meta.url))

/** Top-level entries of the checkout that are no package source: dependencies, history, build output, scratch. */
const NOT_SOURCES = new Set([
  'node_modules',
  '.git',
  'dist',
  '.real-phoenix',
  '.bench-build',
  '.stryker-tmp',
  '.stryker-tmp-unit',
  '.mutation-sandbox',
  '.vitest',
  'coverage',
  'reports',
  'scratch',
])

/** What one command did. */
export interface RunResult {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
  ms: number
}

/**
 * The environment for a child: this process's, without what the runner around the tests set
 * for itself (vitest's markers, NODE_ENV=test, an outer `npm run`'s package and lifecycle
 * variables), so a nested npm, vite or vitest behaves as it does in a user's shell.
 */
export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(VITEST|VITE_|NODE_ENV$|TEST$|INIT_CWD$|npm_lifecycle_|npm_package_|npm_command$|npm_config_user_agent$)/.test(key)) continue
    env[key] = value
  }
  return { ...env, ...extra }
}

/** Options of {@link run}. */
export interface RunOptions {
  cwd: string
  timeoutMs: number
  env?: NodeJS.ProcessEnv
  /** Called with all of stdout so far, each time more arrives (to signal the child once it printed something). */
  onStdout?: (stdout: string, child: ChildProcess) => void
}

/**
 * Runs `command args` in `cwd` and resolves when it has exited and its output is read, whatever
 * its exit code. Kills its whole process group (it runs detached, so npm's and npx's own
 * children go too) and rejects after `timeoutMs`.
 */
export function run(command: string, args: readonly string[], options: RunOptions): Promise<RunResult> {
  const started = performance.now()
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? childEnv(), stdio: ['ignore', 'pipe', 'pipe'], detached: true })
    let stdout = ''
    let stderr = ''
    let timedOut = false
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk
      options.onStdout?.(stdout, child)
    })
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
    const timer = setTimeout(() => {
      timedOut = true
      try {
        process.kill(-child.pid!, 'SIGKILL')
      } catch {
        child.kill('SIGKILL')
      }
    }, options.timeoutMs)
    child.on('error', (error) => {
      clearTimeout(timer)
      reject(new Error(`${command} ${args.join(' ')}: ${error.message}`))
    })
    // 'close' comes after exit and after both pipes closed: nothing of the child is left open.
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      const ms = Math.round(performance.now() - started)
      if (timedOut) {
        reject(new Error(`${command} ${args.join(' ')} (in ${options.cwd}) did not finish within ${options.timeoutMs} ms\n--- stdout\n${stdout.slice(-4000)}\n--- stderr\n${stderr.slice(-4000)}`))
      } else resolve({ code, signal, stdout, stderr, ms })
    })
  })
}

/** Runs a command and throws with its output unless it exits 0. */
export async function runOk(command: string, args: readonly string[], options: RunOptions): Promise<RunResult> {
  const result = await run(command, args, options)
  if (result.code !== 0) {
    throw new Error(
      `${command} ${args.join(' ')} (in ${options.cwd}) exited ${result.code ?? result.signal}\n--- stdout\n${result.stdout.slice(-6000)}\n--- stderr\n${result.stderr.slice(-6000)}`,
    )
  }
  return result
}

/** One file of the tarball: its path inside the package (without tar's `package/`) and size. */
export interface TarEntry {
  path: string
  size: number
  /** The file's bytes. */
  body: Buffer
}

/**
 * The regular files of a gzipped tarball, read from its ustar headers (with pax `path` records
 * and GNU long names), so the test sees what is really in it, not npm's account of it.
 */
export function tarEntries(tarball: string): TarEntry[] {
  const data = gunzipSync(readFileSync(tarball))
  const entries: TarEntry[] = []
  const text = (from: number, to: number) => data.subarray(from, to).toString('utf8').replace(/\0.*$/s, '')
  let longName: string | null = null
  for (let at = 0; at + 512 <= data.length; ) {
    const header = data.subarray(at, at + 512)
    if (header.every((byte) => byte === 0)) break
    const size = Number.parseInt(text(at + 124, at + 136).trim() || '0', 8)
    const type = String.fromCharCode(header[156] ?? 0)
    const body = data.subarray(at + 512, at + 512 + size)
    const prefix = text(at + 257, at + 263).startsWith('ustar') ? text(at + 345, at + 500) : ''
    let name = longName ?? (prefix ? `${prefix}/${text(at, at + 100)}` : text(at, at + 100))
    if (type === 'x') {
      const path = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(body.toString('utf8'))
      longName = path ? path[1]! : null
    } else if (type === 'L') {
      longName = body.toString('utf8').replace(/\0.*$/s, '')
    } else {
      longName = null
      if (type === '0' || type === '\0') {
        name = name.replace(/^package\//, '')
        entries.push({ path: name, size, body: Buffer.from(body) })
      }
    }
    at += 512 + Math.ceil(size / 512) * 512
  }
  return entries
}

/** A packed package and where it lives. */
export interface Packed {
  /** The temporary directory holding the staged sources, the tarball and the projects; {@link Packed.cleanup} removes it. */
  root: string
  tarball: string
  /** Compressed bytes of the tarball. */
  size: number
  /** Bytes of its files, unpacked. */
  unpackedSize: number
  files: TarEntry[]
  /** How long the pack (with prepack's build) took. */
  packMs: number
  /** Removes everything under `root`. */
  cleanup(): void
}

/**
 * Packs the package once: copies the checkout's sources to a temporary directory outside the
 * repository, runs `npm pack --pack-destination` there (prepack builds dist/ and
 * visualizer/dist), and reads the tarball.
 *
 * @param mutate changes the staged copy before the pack (a test of the test: drop `dist` from
 *   `files`, say); the checkout is never touched.
 * @throws {Error} (rejects) when the build or the pack fails, with npm's output.
 */
export async function packPackage(options: { mutate?: (stage: string) => void; timeoutMs?: number } = {}): Promise<Packed> {
  const root = mkdtempSync(join(tmpdir(), 'phoenix-link-package-'))
  const cleanup = () => rmSync(root, { recursive: true, force: true })
  try {
    const stage = join(root, 'stage')
    cpSync(REPO, stage, {
      recursive: true,
      filter: (source) => {
        const rel = relative(REPO, source)
        if (rel === '') return true
        const top = rel.split(sep)[0]!
        return !NOT_SOURCES.has(top) && rel !== join('visualizer', 'dist') && !rel.split(sep).includes('node_modules')
      },
    })
    symlinkSync(join(REPO, 'node_modules'), join(stage, 'node_modules'), 'dir')
    options.mutate?.(stage)
    const out = join(root, 'tarball')
    mkdirSync(out)
    const result = await runOk('npm', ['pack', '--pack-destination', out, '--json'], { cwd: stage, timeoutMs: options.timeoutMs ?? 75_000 })
    const report = JSON.parse(result.stdout.slice(result.stdout.indexOf('['))) as [{ filename: string }]
    const tarball = join(out, report[0].filename)
    if (!existsSync(tarball)) throw new Error(`npm pack reported ${report[0].filename} but wrote no such file in ${out}`)
    const files = tarEntries(tarball)
    return {
      root,
      tarball,
      size: readFileSync(tarball).byteLength,
      unpackedSize: files.reduce((sum, file) => sum + file.size, 0),
      files,
      packMs: result.ms,
      cleanup,
    }
  } catch (error) {
    cleanup()
    throw error
  }
}

/**
 * A fresh consumer project under `packed.root` (outside the repository) with the tarball and
 * `dependencies` (exact `name@version` specs) installed by npm, an ESM package.json, nothing
 * else. Returns its directory.
 *
 * @throws {Error} (rejects) when npm cannot install them (no registry and no cached copy):
 *   loudly, never a skip.
 */
export async function installProject(packed: Packed, name: string, dependencies: readonly string[], options: { timeoutMs?: number } = {}): Promise<string> {
  const dir = join(packed.root, name)
  mkdirSync(dir)
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ name: `consumer-${name}`, version: '0.0.0', private: true, type: 'module' }, null, 2)}\n`)
  await runOk('npm', ['install', packed.tarball, ...dependencies, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: dir,
    timeoutMs: options.timeoutMs ?? 60_000,
  })
  return dir
}

/** The path of a command a project installed (node_modules/.bin). */
export function bin(project: string, name: string): string {
  return join(project, 'node_modules', '.bin', name)
}

/** Bytes as `1234567 B (1205.6 KiB)`. */
export function bytes(n: number): string {
  return `${n} B (${(n / 1024).toFixed(1)} KiB)`
}
