/**
 * conform's gated start of an agent's command: the command runs only once conform says so, and
 * never if conform dies first. conform must give the agent's process group to its reaper (the
 * process that ends every group when conform itself is killed) before the agent runs; a spawn is
 * not atomic with that, so a conform killed between the two left an agent its reaper never knew,
 * reconnecting for ever to a port no one listened on (a CI flake of one run in nine, reproduced
 * every time with a delay put between the two; docs/field-notes.md).
 *
 * The gate is a POSIX shell in the agent's new process group (`detached`) that reads one line on
 * its stdin and then `exec`s the command in its place: the command keeps the shell's pid and group,
 * and gets `/dev/null` as stdin as an ungated agent did. {@link openGate} writes that line; if the
 * stdin closes first (conform's end, a SIGKILL included, closes its pipes), `read` fails and the
 * shell exits 0 without running anything.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { accessSync, constants, statSync } from 'node:fs'
import { resolve as resolvePath } from 'node:path'

/** The shell gate: waits for a line (or end of input: then exits 0), then runs `"$0" "$@"` in its place. */
const GATE = 'IFS= read -r go || exit 0; exec "$0" "$@" </dev/null'

/**
 * The search path when `env` has no PATH: glibc's execvp(3) default, which Node's spawn meets on
 * Linux (libuv calls execvp in the child). A shell given no PATH searches a list of its own (dash
 * starts with /usr/local/bin), so a name found here is handed to the shell as this path.
 */
const DEFAULT_PATH = '/bin:/usr/bin'

/**
 * Where execvp(3) would find `command`, or null: a name with a slash is a path (from `cwd`), any
 * other is looked up in the directories of `env.PATH` in order (an empty entry is the current
 * directory; no PATH at all, {@link DEFAULT_PATH}). Only a regular file (after symlinks) that may
 * be executed counts, so a directory is not found.
 */
export function findCommand(command: string, cwd: string, env: NodeJS.ProcessEnv): string | null {
  const dirs = command.includes('/') ? [''] : (env.PATH ?? DEFAULT_PATH).split(':').map((dir) => dir || '.')
  for (const dir of dirs) {
    const path = resolvePath(cwd, dir, command)
    try {
      if (!statSync(path).isFile()) continue
      accessSync(path, constants.X_OK)
      return path
    } catch {
      // not in this directory
    }
  }
  return null
}

/**
 * Spawns `command` (program and arguments) in a process group of its own, held until
 * {@link openGate}. Its stdout and stderr are pipes; its stdin, once it runs, `/dev/null`; its
 * `PWD`, `cwd` (the shell sets it). A command that is not an executable file conform can find is
 * spawned as itself, ungated, so the child's `error` event carries the system's ENOENT or EACCES
 * as an ungated spawn's would (there is nothing to run, so nothing to hold). An executable file the
 * system still cannot run (a script whose interpreter is missing, a binary for another machine)
 * ends the shell with status 127 or 126, its message (`exec: …`) on stderr. Needs `/bin/sh`
 * (conform runs on POSIX systems only).
 * @throws TypeError when `command` is empty; what `child_process.spawn` throws for arguments it
 * refuses (e.g. a NUL byte)
 */
export function spawnGated(command: readonly string[], cwd: string, env: NodeJS.ProcessEnv): ChildProcess {
  const [program, ...args] = command
  if (program === undefined) throw new TypeError('spawnGated: the command is empty')
  const found = findCommand(program, cwd, env)
  if (found === null) return spawn(program, args, { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  // With no PATH the shell would search its own list: hand it the file execvp would have run.
  const run = env.PATH === undefined && !program.includes('/') ? found : program
  const child = spawn('/bin/sh', ['-c', GATE, run, ...args], { cwd, env, detached: true, stdio: ['pipe', 'pipe', 'pipe'] })
  // A shell that ended (its stdin closed, or it was signalled) makes a later write fail: nothing to report.
  child.stdin!.on('error', () => {})
  return child
}

/** Lets a child of {@link spawnGated} run its command; does nothing when it was spawned ungated or opened already. */
export function openGate(child: ChildProcess): void {
  if (child.stdin && !child.stdin.destroyed && !child.stdin.writableEnded) child.stdin.end('go\n')
}
