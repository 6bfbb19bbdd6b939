/**
 * `phoenix-link conform` against three clients, judged from what the simulator alone saw: a
 * phoenix-link host (`phoenix-link connect`) keeps every rule; the official `phoenix` client
 * with its defaults breaks the rules this library exists for (it comes back after a supersede
 * and a 403, so two same-key instances evict each other for ever, and it ignores Retry-After);
 * a small Python client on Debian's python3-websockets (examples/conform/python_agent.py) breaks
 * only Retry-After. Each run prints its table, so the CI log shows every verdict.
 */
import { spawn, spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { until } from '../support/until.js'
import { CONFORMANCE_RULES, formatConformance, runConformance, visible, type ConformanceReport } from '../../src/node/conform/index.js'

const REPO = fileURLToPath(new URL('../..', import.meta.url))
const CLI = fileURLToPath(new URL('../../src/node/cli.ts', import.meta.url))
const ALL = CONFORMANCE_RULES.map((r) => r.id)

function broken(report: ConformanceReport): string[] {
  return report.verdicts.filter((v) => !v.pass).map((v) => v.rule)
}

/** A python3 that can import websockets (Debian's, which a pyenv shim may hide), or null. */
function pythonWithWebsockets(): string | null {
  for (const candidate of ['/usr/bin/python3', 'python3']) {
    const probe = spawnSync(candidate, ['-c', 'import websockets'], { stdio: 'ignore' })
    if (probe.status === 0) return candidate
  }
  return null
}

describe('phoenix-link conform', () => {
  it('a phoenix-link host (phoenix-link connect) keeps every rule', async () => {
    const report = await runConformance({ command: [process.execPath, '--import', 'tsx', CLI, 'connect'], cwd: REPO })
    console.info(`[conform] phoenix-link connect\n${formatConformance(report)}`)
    expect(report.verdicts.map((v) => v.rule)).toEqual(ALL)
    expect(broken(report)).toEqual([])
    expect(report.passed).toBe(true)
  }, 90_000)

  it('the official phoenix client with its defaults, through the command line: exit 1 and the rules it breaks', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', CLI, 'conform', '--json', '--', process.execPath, 'examples/conform/phoenix-js-agent.mjs'], {
      cwd: REPO,
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let out = ''
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve))
    const report = JSON.parse(out) as ConformanceReport
    console.info(`[conform] phoenix ${'1.8.16'} with its defaults (its FAIL lines are expected: the test checks it breaks exactly these rules)\n${formatConformance(report)}`)
    expect(code).toBe(1)
    expect(broken(report)).toEqual(['no-reconnect-after-supersede', 'no-reconnect-after-403', 'honours-retry-after', 'same-key-instances-settle', 'stops-heartbeats-after-stop'])
    // What the server saw of the endless eviction: each instance keeps coming back for the key.
    expect(report.verdicts.find((v) => v.rule === 'same-key-instances-settle')?.detail).toMatch(/^\d+ more socket\(s\)/)
  }, 90_000)

  const python = pythonWithWebsockets()
  if (!python) console.info('[conform] the Python client is skipped: no python3 here can import websockets (apt-get install python3-websockets)')
  it.skipIf(!python)('a small Python client on python3-websockets breaks only Retry-After', async () => {
    const report = await runConformance({ command: [python!, 'examples/conform/python_agent.py'], cwd: REPO })
    console.info(`[conform] examples/conform/python_agent.py (${python}) (its FAIL line is expected: the test checks it breaks only Retry-After)\n${formatConformance(report)}`)
    expect(broken(report)).toEqual(['honours-retry-after'])
    expect(report.verdicts.find((v) => v.rule === 'honours-retry-after')?.detail).toMatch(/^next attempt 2\d{3} ms after a 429 with Retry-After: 3$/)
  }, 90_000)
})

describe('phoenix-link conform catches each classic mistake (test/fixtures/conform-agent.mjs)', () => {
  const agent = [process.execPath, 'test/fixtures/conform-agent.mjs']
  // The fixture retries 100 ms (RETRY_AT_ONCE) or 500 ms after a loss: a 2.5 s quiet window sees
  // every attempt that must not come, in less time than the default 6 s a slower client needs.
  const fixture = { command: agent, cwd: REPO, quietMs: 2500 }
  it('join_refs reused, Retry-After ignored, a SIGTERM that kills without a close frame, or one that does not stop the agent (it reconnects, or opens a new socket and leaves the server to supersede the old one): exactly those rules break', async () => {
    const [report, reconnects, restarts] = await Promise.all([
      runConformance({ ...fixture, env: { REUSE_JOIN_REF: '1', RETRY_AT_ONCE: '1', DIE_ON_SIGTERM: '1' }, concurrency: 2 }),
      runConformance({ ...fixture, env: { RECONNECT_ON_SIGTERM: '1' }, concurrency: 2 }),
      runConformance({ ...fixture, env: { RESTART_ON_SIGTERM: '1' }, concurrency: 2 }),
    ])
    const why = (r: ConformanceReport) => r.verdicts.filter((v) => !v.pass).map((v) => `${v.rule}: ${v.detail}`).join('\n')
    const detail = (report: ConformanceReport) => report.verdicts.find((v) => v.rule === 'stops-heartbeats-after-stop')?.detail
    expect(broken(report), why(report)).toEqual(['rejoins-with-fresh-join-ref', 'honours-retry-after', 'stops-heartbeats-after-stop'])
    expect(detail(report)).toMatch(/no close frame \(1006\)/)
    expect(broken(reconnects), why(reconnects)).toEqual(['stops-heartbeats-after-stop'])
    expect(detail(reconnects)).toMatch(/^1 upgrade\(s\) after SIGTERM, the first \d+ ms after it: the agent closed its socket \(close 1000\) and came back$/)
    expect(broken(restarts), why(restarts)).toEqual(['one-live-socket', 'stops-heartbeats-after-stop'])
    expect(detail(restarts)).toMatch(/^after SIGTERM its socket was closed by the server \(close \d+: a newer socket of the agent superseded it\), not by the agent$/)
  }, 90_000)

  it('heartbeats on a superseded socket before closing it, two sockets at once after a 429, and join_refs reused by an agent whose pushes outrun the frame record: each rule breaks (each passed before)', async () => {
    const chatty = await runConformance({ ...fixture, env: { BEATS_AFTER_SUPERSEDE: '1', DOUBLE_AFTER_429: '1', REUSE_JOIN_REF: '1', CHATTY: '1' }, concurrency: 3 })
    const why = (r: ConformanceReport) => r.verdicts.filter((v) => !v.pass).map((v) => `${v.rule}: ${v.detail}`).join('\n')
    const chattyDetail = (rule: string) => chatty.verdicts.find((v) => v.rule === rule)?.detail
    expect(broken(chatty), why(chatty)).toEqual(['rejoins-with-fresh-join-ref', 'one-live-socket', 'stops-heartbeats-after-stop'])
    expect(chattyDetail('rejoins-with-fresh-join-ref')).toMatch(/^after close 1000, agent_control:\S+ was rejoined with join_ref 1, used on the closed socket/)
    expect(chattyDetail('one-live-socket')).toMatch(/^in the retry-after scenario: at \d+ ms a socket opened while sock-\d+ was open$/)
    expect(chattyDetail('stops-heartbeats-after-stop')).toMatch(/^\d+ heartbeat\(s\) on the superseded socket more than 1 s after the push, before the agent closed it \d+ ms after the push$/)
  }, 90_000)

  it("an agent that comes back after a supersede push's retry_after, and one that closes its socket on SIGTERM but never exits, are caught (each passed before: the push said 30 s, the window was 6 s; SIGKILL ended the second silently)", async () => {
    const [back, hangs] = await Promise.all([
      runConformance({ ...fixture, env: { BACK_AFTER_SUPERSEDE: '1' }, concurrency: 2 }),
      runConformance({ ...fixture, env: { HANG_ON_SIGTERM: '1' }, concurrency: 2 }),
    ])
    const why = (r: ConformanceReport) => r.verdicts.filter((v) => !v.pass).map((v) => `${v.rule}: ${v.detail}`).join('\n')
    const detail = (r: ConformanceReport, rule: string) => r.verdicts.find((v) => v.rule === rule)?.detail
    expect(broken(back), why(back)).toEqual(['no-reconnect-after-supersede', 'same-key-instances-settle'])
    expect(detail(back, 'no-reconnect-after-supersede')).toMatch(/^1 upgrade\(s\) after the supersede, the first \d+ ms after it/)
    expect(broken(hangs), why(hangs)).toEqual(['stops-heartbeats-after-stop'])
    expect(detail(hangs, 'stops-heartbeats-after-stop')).toMatch(/^after SIGTERM it closed its socket \(close 1000\) but was still running \d+ ms later, until conform stopped it \(a second SIGTERM, then SIGKILL\): an agent that stops exits$/)
  }, 90_000)

  it("an agent speaking Phoenix's V1 serializer (vsn=1.0.0, object frames) is served and judged as a V2 one: with a fresh join_ref on every join it keeps every rule; with none, it breaks rejoins-with-fresh-join-ref, saying so", async () => {
    const [withRefs, without] = await Promise.all([
      runConformance({ ...fixture, env: { V1: '1' }, concurrency: 2 }),
      runConformance({ ...fixture, env: { V1: 'nojoinref' }, concurrency: 2 }),
    ])
    const why = (r: ConformanceReport) => r.verdicts.filter((v) => !v.pass).map((v) => `${v.rule}: ${v.detail}`).join('\n')
    expect(broken(withRefs), why(withRefs)).toEqual([])
    expect(broken(without), why(without)).toEqual(['rejoins-with-fresh-join-ref'])
    expect(without.verdicts.find((v) => v.rule === 'rejoins-with-fresh-join-ref')?.detail).toMatch(/after close 1000, agent_control:\S+ was rejoined with no join_ref/)
  }, 90_000)

  it("a host's onScenario that throws ends the run: it rejects with that error once every agent is stopped, and no agent starts after it", async () => {
    const failure = new Error('onScenario bug')
    let calls = 0
    const error = await runConformance({
      ...fixture,
      concurrency: 2,
      onScenario: () => {
        calls++
        throw failure
      },
    }).catch((e: unknown) => e)
    expect(error).toBe(failure)
    expect(calls).toBe(1)
    // This process's own agent children: none left once the run has rejected.
    expect(spawnSync('pgrep', ['-P', String(process.pid), '-f', 'test/fixtures/conform-agent.mjs'], { encoding: 'utf8' }).stdout.trim()).toBe('')
  }, 90_000)

  it('runConformance refuses an unknown option before it starts anything (a misspelt one would be judged by its default)', async () => {
    await expect(runConformance({ command: ['true'], quietMS: 100 } as never)).rejects.toThrow(/^runConformance: unknown option "quietMS" \(known: command, cwd, env, /)
  })

  it("an agent whose socket is accepted but that never joins its control channel fails connects saying so, not only that no socket joined", async () => {
    const report = await runConformance({ ...fixture, env: { NO_JOIN: '1' }, connectTimeoutMs: 1500, concurrency: 5 })
    expect(report.verdicts.find((v) => v.rule === 'connects')?.detail).toMatch(/^no socket joined agent_control:\S+ within 1500 ms \(1 socket\(s\) accepted, no phx_join of agent_control:\S+ on any\)$/)
  }, 60_000)

  it('an agent whose frames no Phoenix server can read (4-element arrays) fails connects saying the simulator closed its sockets 1011 and why, not that it sent no join', async () => {
    const report = await runConformance({ ...fixture, env: { SHORT_FRAMES: '1' }, connectTimeoutMs: 1500, concurrency: 5 })
    expect(report.verdicts.find((v) => v.rule === 'connects')?.detail).toMatch(
      /^no socket joined agent_control:\S+ within 1500 ms \(\d+ socket\(s\) accepted; the simulator closed \d+ of them 1011 on a frame it could not read: wrong-arity: a V2 frame has 5 elements, this one has 4/,
    )
  }, 60_000)

  it('an agent whose join_refs and refs are JSON numbers (as Phoenix serves them, echoed as numbers) keeps every rule', async () => {
    const report = await runConformance({ ...fixture, env: { NUMERIC_REFS: '1' }, concurrency: 2 })
    expect(broken(report)).toEqual([])
  }, 90_000)

  it('a process that exits on a supersede push without closing its socket breaks stops-heartbeats-after-stop: no close frame (1006)', async () => {
    const report = await runConformance({ ...fixture, env: { EXIT_ON_SUPERSEDE: '1' }, concurrency: 2 })
    expect(broken(report)).toEqual(['stops-heartbeats-after-stop'])
    expect(report.verdicts.find((v) => v.rule === 'stops-heartbeats-after-stop')?.detail).toMatch(/^after the supersede its socket ended with no close frame \(1006\), \d+ ms after the push/)
  }, 60_000)

  it('a double connect at start (both at once, or the second once the first has joined) breaks only one-live-socket; the same agent without its bugs keeps every rule, an app channel it joins 400 ms after each socket opens included', async () => {
    const [double, late, clean] = await Promise.all([
      runConformance({ ...fixture, env: { DOUBLE_CONNECT: '1' }, concurrency: 2 }),
      runConformance({ ...fixture, env: { DOUBLE_CONNECT: 'late' }, concurrency: 2 }),
      runConformance({ ...fixture, env: { LATE_LOBBY: '400' }, concurrency: 2 }),
    ])
    for (const report of [double, late]) {
      expect(broken(report)).toEqual(['one-live-socket'])
      expect(report.verdicts.find((v) => v.rule === 'one-live-socket')?.detail).toMatch(/a socket opened while sock-\d+ was open/)
    }
    expect(broken(clean)).toEqual([])
  }, 90_000)

  it('an agent started by a launcher that exits at once (`sh -c \'agent & exit 0\'`, a wrapper without exec) is judged as the agent: every rule held, and its stop reaches the agent in the background', async () => {
    const launched = await runConformance({ ...fixture, command: ['sh', '-c', `'${process.execPath}' test/fixtures/conform-agent.mjs & exit 0`], concurrency: 2 })
    const why = (r: ConformanceReport) => r.verdicts.filter((v) => !v.pass).map((v) => `${v.rule}: ${v.detail}`).join('\n')
    expect(broken(launched), why(launched)).toEqual([])
    // SIGTERM went to the launcher's group: the agent in the background closed its own socket.
    expect(launched.verdicts.find((v) => v.rule === 'stops-heartbeats-after-stop')?.detail).toMatch(/after SIGTERM its socket closed in \d+ ms \(close 1000\), no upgrade followed, and it exited/)
    expect(launched.neverConnected).toEqual({})
  }, 90_000)

  it('Ctrl-C stops every agent it started and exits 130 at once (a long quiet window cut short), judging nothing after the stop', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', CLI, 'conform', '--quiet', '30000', '--', process.execPath, 'test/fixtures/conform-agent.mjs'], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] })
    let err = ''
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()))
    // This conform's own agents (its children), not another run's on the machine.
    const agents = () => spawnSync('pgrep', ['-P', String(child.pid), '-f', 'test/fixtures/conform-agent.mjs'], { encoding: 'utf8' }).stdout.trim().split('\n').filter((p) => p !== '')
    const alive = (pid: string) => {
      try {
        process.kill(Number(pid), 0)
        return true
      } catch {
        return false
      }
    }
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
    let started: string[] = []
    try {
      // pgrep is the only view of another process's children: poll it, bounded.
      await until(() => (started = agents()).length >= 3, 20_000, 'three agents to run')
      const stoppedAt = performance.now()
      child.kill('SIGINT')
      expect(await exited).toBe(130)
      // Bounded by the agents' stop (3 s) and the process's own start, not by the 30 s quiet window.
      expect(performance.now() - stoppedAt).toBeLessThan(10_000)
      expect(err).toMatch(/stopped by SIGINT; every agent stopped\n$/)
      // Once conform exits its agents would belong to init: each one seen running is gone.
      expect(started.filter(alive)).toEqual([])
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL')
      for (const pid of started.filter(alive)) process.kill(Number(pid), 'SIGKILL')
    }
  }, 60_000)
})

describe('phoenix-link conform killed outright', () => {
  it('SIGKILL of conform (no cleanup of its own can run) still ends every agent it started: its reaper sees the pipe close', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', CLI, 'conform', '--quiet', '30000', '--stop-timeout', '1000', '--', process.execPath, 'test/fixtures/conform-agent.mjs'], { cwd: REPO, stdio: ['ignore', 'ignore', 'ignore'] })
    const agents = () => spawnSync('pgrep', ['-P', String(child.pid), '-f', 'test/fixtures/conform-agent.mjs'], { encoding: 'utf8' }).stdout.trim().split('\n').filter((p) => p !== '')
    // Running: present and not a zombie (an orphan's exit may never be reaped in a container).
    const running = (pid: string) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
        return !/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2))
      } catch {
        return false
      }
    }
    const exited = new Promise<unknown>((resolve) => child.once('exit', resolve))
    let started: string[] = []
    try {
      // pgrep is the only view of another process's children: poll it, bounded.
      await until(() => (started = agents()).length >= 3, 20_000, 'three agents to run')
      // The reaper: conform's child whose program reads the grace (REAPER_PROGRAM).
      const reaper = spawnSync('pgrep', ['-P', String(child.pid), '-f', 'const graceMs'], { encoding: 'utf8' }).stdout.trim()
      expect(reaper).toMatch(/^\d+$/)
      child.kill('SIGKILL')
      await exited
      // The reaper's SIGTERM, and its SIGKILL after the stop timeout (1 s), within a bound. A
      // timeout says what each process was doing (proc(5) stat), the reaper's among them.
      const stat = (pid: string) => {
        try {
          const text = readFileSync(`/proc/${pid}/stat`, 'utf8')
          const [state, ppid, pgid] = text.slice(text.lastIndexOf(')') + 2).split(' ')
          return `${pid} state ${state} parent ${ppid} group ${pgid}`
        } catch {
          return `${pid} gone`
        }
      }
      await until(() => started.filter(running).length === 0, 10_000, 'every agent of the killed conform to end').catch((error: Error) => {
        throw new Error(`${error.message}; still running: ${started.filter(running).map(stat).join(' | ')}; the reaper: ${stat(reaper)}`)
      })
      expect(started.length).toBeGreaterThanOrEqual(3)
      expect(started.filter(running)).toEqual([])
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      for (const pid of started.filter(running)) process.kill(Number(pid), 'SIGKILL')
    }
  }, 60_000)
})

describe('phoenix-link conform on an agent that is not there', () => {
  it('a concurrency that is not a whole number >= 1 is refused before anything starts', async () => {
    for (const concurrency of [Number.NaN, 0, 1.5]) {
      await expect(runConformance({ command: [process.execPath, 'test/fixtures/conform-agent.mjs'], cwd: REPO, concurrency })).rejects.toThrow(/conform concurrency must be a whole number >= 1/)
    }
    // A signal that is not one: refused before the simulator starts or an agent is spawned (the leak check would see either).
    for (const signal of [{}, 'stop', { aborted: false }]) {
      await expect(runConformance({ command: [process.execPath, 'test/fixtures/conform-agent.mjs'], cwd: REPO, signal: signal as unknown as AbortSignal })).rejects.toMatchObject({
        name: 'ConfigurationError',
        message: expect.stringMatching(/^runConformance: options.signal must be an AbortSignal/),
      })
    }
  })

  it('timings that are not whole milliseconds in [1, 2^31-1] (a timer Node would run at once), or a Retry-After wait past it, are refused before anything starts', async () => {
    const command = [process.execPath, 'test/fixtures/conform-agent.mjs']
    for (const [name, bad] of [['quietMs', 0], ['quietMs', 2 ** 32], ['connectTimeoutMs', -1], ['reconnectCapMs', 1.5], ['stopTimeoutMs', Number.NaN]] as const) {
      await expect(runConformance({ command, cwd: REPO, [name]: bad })).rejects.toThrow(new RangeError(`conform ${name} must be a whole number of milliseconds in [1, 2147483647], got ${bad}`))
    }
    for (const retryAfterS of [0, -3, 2.5]) {
      await expect(runConformance({ command, cwd: REPO, retryAfterS })).rejects.toThrow(new RangeError(`conform retryAfterS must be a whole number of seconds >= 1, got ${retryAfterS}`))
    }
    await expect(runConformance({ command, cwd: REPO, reconnectCapMs: 2147483000 })).rejects.toThrow(
      "conform reconnectCapMs plus the 429 scenario's Retry-After (retryAfterS * 1000) must be at most 2147483647 ms, got 2147483000 + 3000",
    )
  })

  it("the agent's output is printed with its control characters shown, so terminal escapes cannot hide the verdicts", () => {
    expect(visible('ok\x1b[2J\x1b[H\tdone\r\nnext\x07')).toBe('ok\\x1b[2J\\x1b[H\tdone\\x0d\nnext\\x07')
    // A verdict quotes what the agent sent (a topic it joined): the table shows its escapes too.
    const table = formatConformance({ passed: false, ms: 1, output: {}, neverConnected: {}, verdicts: [{ rule: 'rejoins-with-fresh-join-ref', pass: false, detail: 'room:\x1b[2K\x1b[1APASS' } as never] })
    expect(table).toContain('room:\\x1b[2K\\x1b[1APASS')
    expect(table).not.toContain('\x1b')
  })

  it('a command that cannot start fails every rule at once, saying why; an empty command is refused', async () => {
    const started = performance.now()
    const report = await runConformance({ command: ['/nonexistent/agent'], cwd: REPO })
    expect(report.passed).toBe(false)
    expect(report.verdicts.every((v) => !v.pass)).toBe(true)
    // The first line says why: the agent could not start, not a timeout it never waited out.
    expect(report.verdicts.find((v) => v.rule === 'connects')?.detail).toMatch(/^no socket joined \S+ before the agent could not start \/nonexistent\/agent: .*ENOENT.* \(no upgrade arrived\)$/)
    expect(report.output.closes).toContain('could not start /nonexistent/agent')
    // The table says first that the agent never connected, in every scenario, and how it ended.
    expect(Object.keys(report.neverConnected).sort()).toEqual(Object.keys(report.output).sort())
    expect(Object.values(report.neverConnected).every((how) => how.startsWith('could not start /nonexistent/agent'))).toBe(true)
    expect(formatConformance(report).split('\n')[0]).toMatch(/^the agent never connected: in every scenario \(\d+\) it ended before any upgrade \(could not start \/nonexistent\/agent: .*\); the rules below fail for that alone: read its output below$/)
    // The scenarios give up as soon as the agent has exited, not after their timeouts.
    expect(performance.now() - started).toBeLessThan(10_000)
    // An agent that starts and exits at once (a missing module): the same first line, with its exit code.
    const [exits, sleeps] = await Promise.all([
      runConformance({ command: [process.execPath, '-e', "console.error(\"No module named 'websockets'\"); process.exit(1)"], cwd: REPO }),
      runConformance({ command: [process.execPath, '-e', 'setInterval(() => {}, 1000)'], cwd: REPO, connectTimeoutMs: 1500, concurrency: 5 }),
    ])
    // The same agent behind a launcher that exits first: it ended when the agent did, and says so.
    const launched = await runConformance({ command: ['sh', '-c', `'${process.execPath}' -e 'setTimeout(() => process.exit(1), 1000)' & exit 0`], cwd: REPO, concurrency: 5 })
    // (Under load the agent may be gone before its launcher's exit is read: where PID 1 reaps it at
    // once, nothing of the group is left to show it ran, and that scenario reads `exited with code 0`.)
    const ends = '(?:exited: its command with code 0, then the last process of its group|exited with code 0)'
    expect(formatConformance(launched).split('\n')[0]).toMatch(new RegExp(`^the agent never connected: in every scenario \\(\\d+\\) it ended before any upgrade \\(${ends}(?:, ${ends})*\\); the rules below`))
    expect(Object.values(launched.neverConnected)).toContain('exited: its command with code 0, then the last process of its group')
    // An agent that crashed beside a helper it started (a sidecar) runs on as its group; the detail says its command ended.
    const sidecar = await runConformance({ command: ['sh', '-c', `sleep 30 & '${process.execPath}' -e 'process.exit(1)'`], cwd: REPO, connectTimeoutMs: 1500, concurrency: 5 })
    expect(sidecar.verdicts.find((v) => v.rule === 'connects')?.detail).toMatch(/within 1500 ms \(no upgrade arrived\); its command exited with code 1 and processes it left in its group ran on/)
    expect(formatConformance(exits).split('\n')[0]).toMatch(/^the agent never connected: in every scenario \(\d+\) it ended before any upgrade \(exited with code 1\)/)
    // An agent that connects has no such line; nor has one that runs but never connects, stopped by conform after the connect timeout.
    expect(formatConformance({ ...exits, neverConnected: {} }).split('\n')[0]).toMatch(/^(PASS|FAIL) /)
    expect(sleeps.neverConnected).toEqual({})
    expect(sleeps.verdicts.find((v) => v.rule === 'connects')?.detail).toMatch(/within 1500 ms \(no upgrade arrived\)$/)
    await expect(runConformance({ command: [] })).rejects.toThrow(/conform needs the agent command/)
    await expect(runConformance(null as never)).rejects.toThrow(new TypeError('runConformance needs an options object with the agent command, got null'))
    await expect(runConformance('python3 agent.py' as never)).rejects.toThrow(new TypeError('runConformance needs an options object with the agent command, got string'))
  })
})
