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
import { accessSync, constants } from 'node:fs'
import { resolve as resolvePath } from 'node:path'

/** The shell gate: waits for a line (or end of input: then exits 0), then runs `"$0" "$@"` in its place. */
const GATE = 'IFS= read -r go || exit 0; exec "$0" "$@" </dev/null'

/** The search path when `env` has no PATH (libuv, src/unix/process.c: `_PATH_DEFPATH`). */
const DEFAULT_PATH = '/usr/bin:/bin'

/**
 * Whether `command` names an executable file as execvp(3) would find it: a name with a slash is a
 * path (from `cwd`), any other is looked up in the directories of `env.PATH` (an empty entry is
 * the current directory; no PATH at all, `/usr/bin:/bin`, as libuv's spawn searches then).
 */
export function findsCommand(command: string, cwd: string, env: NodeJS.ProcessEnv): boolean {
  const dirs = command.includes('/') ? [''] : (env.PATH ?? DEFAULT_PATH).split(':').map((dir) => dir || '.')
  for (const dir of dirs) {
    try {
      accessSync(resolvePath(cwd, dir, command), constants.X_OK)
      return true
    } catch {
      // not in this directory
    }
  }
  return false
}

/**
 * Spawns `command` (program and arguments) in a process group of its own, held until
 * {@link openGate}. Its stdout and stderr are pipes; its stdin, once it runs, `/dev/null`. A
 * command that cannot be found is spawned as itself, ungated, so the child's `error` event carries
 * the system's ENOENT as an ungated spawn's would (there is nothing to run, so nothing to hold).
 * Needs `/bin/sh` (conform runs on POSIX systems only). A command found but refused by the system
 * at exec (EACCES on a file that passed the access check) ends the shell with status 126.
 * @throws what `child_process.spawn` throws for arguments it refuses (e.g. a NUL byte)
 */
export function spawnGated(command: readonly string[], cwd: string, env: NodeJS.ProcessEnv): ChildProcess {
  const [program, ...args] = command
  if (program === undefined) throw new TypeError('spawnGated: the command is empty')
  if (!findsCommand(program, cwd, env)) return spawn(program, args, { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  const child = spawn('/bin/sh', ['-c', GATE, program, ...args], { cwd, env, detached: true, stdio: ['pipe', 'pipe', 'pipe'] })
  // A shell that ended (its stdin closed, or it was signalled) makes a later write fail: nothing to report.
  child.stdin!.on('error', () => {})
  return child
}

/** Lets a child of {@link spawnGated} run its command; does nothing when it was spawned ungated or opened already. */
export function openGate(child: ChildProcess): void {
  if (child.stdin && !child.stdin.destroyed && !child.stdin.writableEnded) child.stdin.end('go\n')
}
