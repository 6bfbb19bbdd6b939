/** The run supervisor: abort outcomes, repeats, normal ends, hooks that throw or hang. */
import { describe, expect, it } from 'vitest'
import { RunSupervisor, runProblem, type AgentAborted } from '../../src/runs.js'
import { classifyClose } from '../../src/reasons.js'

const reason = classifyClose({ code: 1006, reason: '' }, 1, 0)

describe('run supervisor', () => {
  it('aborts every run of the principal, reports each aborted, and a repeat is nothing-to-abort', async () => {
    const runs = new RunSupervisor({ now: () => 5 })
    const reports: AgentAborted[] = []
    runs.onAborted((r) => reports.push(r))
    const a = runs.startRun('p', 'a')
    const b = runs.startRun('p', 'b', { onAbort: async () => {} })
    const other = runs.startRun('q', 'c')
    await runs.abortPrincipal('p', reason)
    expect(a.aborted && b.aborted).toBe(true)
    expect(a.reason).toBe(reason)
    expect(other.aborted).toBe(false)
    expect(reports.map((r) => [r.runId, r.outcome])).toEqual([
      ['a', 'aborted'],
      ['b', 'aborted'],
    ])
    expect(await runs.abortPrincipal('p', reason)).toEqual([
      { type: 'agent-aborted', principal: 'p', runId: null, outcome: 'nothing-to-abort', reason, error: null, at: 5 },
    ])
    expect(runs.inFlight('q')).toEqual(['c'])
  })

  it('after close() no run starts (naming why); the runs in flight stay until aborted or ended', async () => {
    const runs = new RunSupervisor()
    const before = runs.startRun('p', 'a')
    expect(runs.isClosed).toBe(false)
    runs.close('the owner stopped')
    runs.close('a second reason is not kept')
    expect(runs.isClosed).toBe(true)
    expect(() => runs.startRun('p', 'b')).toThrow(new Error('RunSupervisor: startRun("p", "b") after close(): the owner stopped'))
    expect(runs.inFlight('p')).toEqual(['a'])
    await runs.abortPrincipal('p', null)
    expect(before.aborted).toBe(true)
    expect(() => new RunSupervisor().startRun('p', 'b')).not.toThrow()
  })

  it('a run that ended normally leaves the registry', async () => {
    const runs = new RunSupervisor()
    const signal = runs.startRun('p', 'a')
    runs.endRun('p', 'a')
    runs.endRun('p', 'a')
    expect(runs.inFlight('p')).toEqual([])
    expect((await runs.abortPrincipal('p', null))[0]!.outcome).toBe('nothing-to-abort')
    expect(signal.aborted).toBe(false)
  })

  it("an aborted run's late cleanup, given its signal, does not end the run that took its id after a reconnect", async () => {
    const runs = new RunSupervisor()
    const first = runs.startRun('p', 'run-1')
    await runs.abortPrincipal('p', reason)
    // The agent reconnected and started run-1 again before the first run's finally ran.
    const second = runs.startRun('p', 'run-1')
    runs.endRun('p', 'run-1', first)
    expect(runs.inFlight('p')).toEqual(['run-1'])
    // The next abort reaches the second run.
    const reports = await runs.abortPrincipal('p', reason)
    expect(reports.map((r) => [r.runId, r.outcome])).toEqual([['run-1', 'aborted']])
    expect(second.aborted).toBe(true)
    // With its own signal a run ends; endRunOf finds it by signal alone.
    const third = runs.startRun('p', 'run-1')
    runs.endRun('p', 'run-1', third)
    expect(runs.inFlight('p')).toEqual([])
    const fourth = runs.startRun('p', 'x')
    const fifth = runs.startRun('p', 'y')
    runs.endRunOf('p', first)
    runs.endRunOf('nobody', fourth)
    expect(runs.inFlight('p')).toEqual(['x', 'y'])
    runs.endRunOf('p', fourth)
    expect(runs.inFlight('p')).toEqual(['y'])
    runs.endRunOf('p', fifth)
    expect(runs.principals()).toEqual([])
  })

  it('a hook that throws, rejects or hangs past the bound is failed, with why', async () => {
    const runs = new RunSupervisor({ hookTimeoutMs: 30 })
    runs.startRun('p', 'throws', {
      onAbort: () => {
        throw new Error('cleanup bug')
      },
    })
    runs.startRun('p', 'rejects', { onAbort: () => Promise.reject(new Error('async bug')) })
    let release!: () => void
    runs.startRun('p', 'hangs', { onAbort: () => new Promise<void>((resolve) => (release = resolve)) })
    runs.startRun('p', 'fine', { onAbort: () => {} })
    const reports = await runs.abortPrincipal('p', reason)
    release()
    expect(Object.fromEntries(reports.map((r) => [r.runId, [r.outcome, r.error]]))).toEqual({
      throws: ['failed', 'cleanup bug'],
      rejects: ['failed', 'async bug'],
      hangs: ['failed', 'the abort hook did not settle within 30 ms'],
      fine: ['aborted', null],
    })
  })

  it('a hook that rejects with a value no String() can print, or a clock that throws, still ends in a report: abortPrincipal never rejects', async () => {
    const runs = new RunSupervisor({
      now: () => {
        throw new Error('clock bug')
      },
    })
    const unprintable = Object.create(null) as object
    const badMessage = Object.defineProperty(new Error('x'), 'message', {
      get() {
        throw new Error('message getter bug')
      },
    })
    runs.startRun('p', 'null-prototype', { onAbort: () => Promise.reject(unprintable) })
    runs.startRun('p', 'message-getter', { onAbort: () => Promise.reject(badMessage) })
    const before = Date.now()
    const reports = await runs.abortPrincipal('p', reason)
    expect(Object.fromEntries(reports.map((r) => [r.runId, [r.outcome, r.error]]))).toEqual({
      'null-prototype': ['failed', 'an unprintable object'],
      'message-getter': ['failed', 'an unprintable object'],
    })
    for (const r of reports) expect(r.at).toBeGreaterThanOrEqual(before)
    const [none] = await runs.abortPrincipal('q', null)
    expect(none).toMatchObject({ outcome: 'nothing-to-abort' })
    expect(none!.at).toBeGreaterThanOrEqual(before)
  })

  it('an async onAborted listener that rejects raises no unhandled rejection; the others still hear the report', async () => {
    const runs = new RunSupervisor()
    const heard: string[] = []
    runs.onAborted(async () => {
      await Promise.resolve()
      throw new Error('listener bug')
    })
    runs.onAborted((r) => void heard.push(r.outcome))
    runs.startRun('p', 'r')
    await runs.abortPrincipal('p', reason)
    expect(heard).toEqual(['aborted'])
    await new Promise((resolve) => setImmediate(resolve))
  })

  it('principals() lists each principal from when it came to have a run in flight, not from its earliest run still running', () => {
    const runs = new RunSupervisor()
    const r1 = runs.startRun('p', 'r1')
    runs.startRun('q', 's1')
    runs.startRun('p', 'r2')
    runs.endRun('p', 'r1', r1)
    expect(runs.principals()).toEqual(['p', 'q'])
    runs.endRun('p', 'r2')
    runs.startRun('p', 'r3')
    expect(runs.principals()).toEqual(['q', 'p'])
  })

  it('refuses bad arguments to endRun, endRunOf, onAborted and abortPrincipal, naming them, and changes nothing', async () => {
    const runs = new RunSupervisor()
    const signal = runs.startRun('agent-7', 'run-42')
    const reports: AgentAborted[] = []
    runs.onAborted((r) => reports.push(r))
    expect(() => runs.endRun('agent-7', 'run-42', null as never)).toThrow(new TypeError('RunSupervisor: endRun(): signal must be the AbortSignal startRun() returned, got null'))
    expect(() => runs.endRun('run-42' as never, signal as never)).toThrow(new TypeError('RunSupervisor: endRun(): runId must be a non-empty string, got object'))
    expect(() => runs.endRun('', 'run-42')).toThrow(new TypeError('RunSupervisor: endRun(): principal must be a non-empty string, got an empty string'))
    expect(() => runs.endRunOf('agent-7', 'run-42' as never)).toThrow(new TypeError('RunSupervisor: endRunOf(): signal must be the AbortSignal startRun() returned, got string'))
    expect(() => runs.endRunOf(undefined as never, signal)).toThrow(new TypeError('RunSupervisor: endRunOf(): principal must be a non-empty string, got undefined'))
    expect(() => runs.onAborted(42 as never)).toThrow(new TypeError('RunSupervisor: onAborted(): the listener must be a function, got number'))
    await expect(runs.abortPrincipal(undefined as never, null)).rejects.toThrow(new TypeError('RunSupervisor: abortPrincipal(): principal must be a non-empty string, got undefined'))
    await expect(runs.abortPrincipal('agent-7', 'nope' as never)).rejects.toThrow(/^RunSupervisor: abortPrincipal\(\): reason must be null or a DisconnectReason \(src\/reasons.ts\), whose kind is one of graceful, .*; got string$/)
    await expect(runs.abortPrincipal('agent-7', { kind: 'nope' } as never)).rejects.toThrow(/; got kind "nope"$/)
    await expect(runs.abortPrincipal('agent-7', {} as never)).rejects.toThrow(/; got kind undefined$/)
    // Nothing ended, nothing aborted, nothing reported.
    expect(runs.inFlight('agent-7')).toEqual(['run-42'])
    expect(signal.aborted).toBe(false)
    expect(reports).toEqual([])
    runs.endRun('agent-7', 'run-42', signal)
    expect(runs.inFlight('agent-7')).toEqual([])
  })

  it('refuses a run id already in flight and a bad hook bound', () => {
    const runs = new RunSupervisor()
    runs.startRun('p', 'a')
    expect(() => runs.startRun('p', 'a')).toThrow(/already in flight/)
    expect(() => new RunSupervisor({ hookTimeoutMs: -1 })).toThrow(/hookTimeoutMs/)
  })

  it('refuses options that are not an object and a now that is not a function, naming what arrived', () => {
    expect(() => new RunSupervisor(null as never)).toThrow(new TypeError('RunSupervisor options must be an object, got null'))
    expect(() => new RunSupervisor(5 as never)).toThrow(new TypeError('RunSupervisor options must be an object, got number'))
    expect(() => new RunSupervisor('fast' as never)).toThrow(new TypeError('RunSupervisor options must be an object, got string'))
    expect(() => new RunSupervisor({ now: 5 as never })).toThrow(new TypeError('RunSupervisor now must be a function returning milliseconds, got number'))
    expect(() => new RunSupervisor(undefined)).not.toThrow()
    expect(() => new RunSupervisor({ now: undefined })).not.toThrow()
  })

  it('startRun() refuses a principal or run id that is not a non-empty string, options that are not an object and a hook that is not a function, registering nothing', () => {
    const runs = new RunSupervisor()
    expect(() => runs.startRun('', 'a')).toThrow(new TypeError('RunSupervisor: startRun(): principal must be a non-empty string, got an empty string'))
    expect(() => runs.startRun('p', 7 as never)).toThrow(new TypeError('RunSupervisor: startRun(): runId must be a non-empty string, got number'))
    expect(() => runs.startRun('p', 'a', 'x' as never)).toThrow(new TypeError('RunSupervisor: startRun(): options must be an object, got string'))
    expect(() => runs.startRun('p', 'a', { onAbort: null as never })).toThrow(new TypeError('RunSupervisor: startRun(): options.onAbort must be a function, got null'))
    expect(runs.principals()).toEqual([])
    // null options are no options.
    const signal = runs.startRun('p', 'a', null)
    expect(runs.inFlight('p')).toEqual(['a'])
    runs.endRun('p', 'a', signal)
  })

  it('runProblem() names what is wrong with a run\'s arguments, and nothing for what is right', () => {
    expect([runProblem('p', 'r', undefined), runProblem('p', 'r', null), runProblem('p', 'r', {}), runProblem('p', 'r', { onAbort: undefined }), runProblem('p', 'r', { onAbort: () => {} })]).toEqual([null, null, null, null, null])
    expect(runProblem('p', null, {})).toBe('runId must be a non-empty string, got null')
    expect(runProblem(undefined, 'r', {})).toBe('principal must be a non-empty string, got undefined')
    expect(runProblem('p', 'r', { onAbort: 1 })).toBe('options.onAbort must be a function, got number')
    expect(runProblem('p', 'r', true)).toBe('options must be an object, got boolean')
  })

  it('close() without a why says the supervisor is closed', () => {
    const runs = new RunSupervisor()
    runs.close()
    expect(() => runs.startRun('p', 'a')).toThrow(new Error('RunSupervisor: startRun("p", "a") after close(): this supervisor is closed'))
  })

  it('endRun() with a signal, for an id not in flight, ends nothing (the principal keeps its other runs)', () => {
    const runs = new RunSupervisor()
    const signal = runs.startRun('p', 'a')
    runs.endRun('p', 'gone', signal)
    expect(runs.inFlight('p')).toEqual(['a'])
    runs.endRun('p', 'a', signal)
    expect(runs.principals()).toEqual([])
  })
})
