/**
 * conform's gated start (src/node/conform/gate.ts): an agent's command runs only once conform opens
 * the gate (after its reaper knows the agent's group), and never when conform's end closes the
 * gate's stdin first.
 */
import { readFileSync, writeFileSync, mkdtempSync, mkdirSync, rmSync, chmodSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { ChildProcess } from 'node:child_process'
import { afterEach, describe, expect, it } from 'vitest'
import { findCommand, openGate, spawnGated } from '../../src/node/conform/gate.js'

/** Prints what the command saw of itself: pid, process group (proc(5) stat), stdin, arguments. */
const REPORT = `const fs = require('fs'); const stat = fs.readFileSync('/proc/self/stat', 'utf8'); const s = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
process.stdout.write(JSON.stringify({ pid: process.pid, pgid: Number(s[2]), stdin: fs.readlinkSync('/proc/self/fd/0'), argv: process.argv.slice(1) }))`

const children: ChildProcess[] = []
const dirs: string[] = []
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** The child's whole stdout and how it ended, once its stdio closed. */
function ended(child: ChildProcess): Promise<{ out: string; code: number | null; signal: NodeJS.Signals | null }> {
  let out = ''
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()))
  return new Promise((resolve) => child.once('close', (code, signal) => resolve({ out, code, signal })))
}

function gated(command: string[], cwd = process.cwd(), env: NodeJS.ProcessEnv = process.env): ChildProcess {
  const child = spawnGated(command, cwd, env)
  children.push(child)
  return child
}

/** A fresh directory, removed after the test. */
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'gate-'))
  dirs.push(dir)
  return dir
}

describe('conform: the gated start of an agent', () => {
  it('holds the command (the process is the shell) until the gate opens; then the command runs in its place: the same pid and group, stdin /dev/null, its arguments verbatim', async () => {
    const args = ['a b', '"quoted"', '$HOME', '']
    const child = gated([process.execPath, '-e', REPORT, ...args])
    const done = ended(child)
    // spawn() returns once the child has exec'd: the shell, waiting on its stdin.
    expect(readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0')[0]).toBe('/bin/sh')
    openGate(child)
    const { out, code } = await done
    expect(code).toBe(0)
    expect(JSON.parse(out)).toEqual({ pid: child.pid, pgid: child.pid, stdin: '/dev/null', argv: args })
  })

  it('never runs the command when the gate\'s stdin closes unopened (conform died, by SIGKILL too): the shell exits 0 and the command printed nothing', async () => {
    const child = gated([process.execPath, '-e', "process.stdout.write('ran')"])
    const done = ended(child)
    child.stdin!.destroy()
    expect(await done).toEqual({ out: '', code: 0, signal: null })
  })

  it('opening twice, or after the shell ended, does nothing and throws nothing', async () => {
    const child = gated([process.execPath, '-e', "process.stdout.write('ran')"])
    const done = ended(child)
    openGate(child)
    openGate(child)
    expect(await done).toMatchObject({ out: 'ran', code: 0 })
    expect(() => openGate(child)).not.toThrow()
  })

  it('a command that cannot be found is spawned as itself, so its error is the system\'s ENOENT', async () => {
    const child = gated(['phoenix-link-no-such-command', '--flag'])
    const error = await new Promise<NodeJS.ErrnoException>((resolve) => child.once('error', resolve))
    expect(error.code).toBe('ENOENT')
    expect(child.spawnfile).toBe('phoenix-link-no-such-command')
    expect(() => spawnGated([], process.cwd(), process.env)).toThrow(/the command is empty/)
  })

  it('findCommand looks a command up as execvp does: a path from cwd, a name on PATH in order (glibc\'s /bin:/usr/bin when there is none), an executable regular file only', () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'tool'), '#!/bin/sh\n')
    chmodSync(join(dir, 'tool'), 0o755)
    writeFileSync(join(dir, 'data'), '')
    chmodSync(join(dir, 'data'), 0o644)
    mkdirSync(join(dir, 'folder'))
    expect(findCommand('./tool', dir, {})).toBe(join(dir, 'tool'))
    expect(findCommand(join(dir, 'tool'), '/', {})).toBe(join(dir, 'tool'))
    expect(findCommand('tool', '/', { PATH: `/nonexistent:${dir}` })).toBe(join(dir, 'tool'))
    expect(findCommand('tool', dir, { PATH: '' })).toBe(join(dir, 'tool'))
    expect(findCommand('tool', '/', { PATH: '/nonexistent' })).toBeNull()
    expect(findCommand('./data', dir, {})).toBeNull()
    expect(findCommand('./folder', dir, {})).toBeNull()
    expect(findCommand('folder', '/', { PATH: dir })).toBeNull()
    expect(findCommand('tool', '/', {})).toBeNull()
    expect(findCommand('sh', '/', {})).toBe('/bin/sh')
  })

  it('a directory is spawned ungated, so its error is the system\'s (EACCES), as before the gate', async () => {
    const dir = tempDir()
    const child = gated([dir], '/')
    const error = await new Promise<NodeJS.ErrnoException>((resolve) => child.once('error', resolve))
    expect(error.code).toBe('EACCES')
  })

  it('with no PATH in the environment, the gated command is the file execvp would run, not the shell\'s own search', async () => {
    const child = gated(['sh', '-c', 'printf %s "$0"'], '/', {})
    const done = ended(child)
    openGate(child)
    expect(await done).toMatchObject({ out: '/bin/sh', code: 0 })
  })
})
