/**
 * phoenix-link/testing as a user meets it: the paths as data (every stimulus a world action,
 * serializable), the runner's verdicts on a host that breaks a rule, on a failing oracle of the
 * host's own and on a factory that returns no link, each named by path, step and stimulus.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLink } from '../../src/link.js'
import { connectionPaths } from '../../src/node/model/paths.js'
import {
  LIFECYCLE_ORACLES,
  PathFailure,
  lifecyclePathOf,
  lifecyclePaths,
  startPathKit,
  stimulusOf,
  type LifecyclePath,
  type OracleInput,
  type PathKit,
  type StepExpectation,
} from '../../src/node/testing/index.js'

let kit: PathKit
beforeAll(async () => {
  kit = await startPathKit({ agentPrefix: 'kit-unit-' })
})
afterAll(async () => {
  await kit.stop()
})

/** What a run rejected with (undefined when it passed): the runner's verdict, to assert on. */
function failureOf(run: Promise<unknown>): Promise<unknown> {
  return run.then(
    () => undefined,
    (error: unknown) => error,
  )
}

/** The first `length` steps of the first path that starts with `start` (a path's start is a path too). */
function pathFrom(start: string, length: number): LifecyclePath {
  const path = lifecyclePaths().find((p) => p.name.startsWith(start))
  if (!path) throw new Error(`no path starts with ${start}`)
  const steps = path.steps.slice(0, length)
  return { name: steps.map((s) => s.name).join(' > '), steps }
}

describe('the paths as data', () => {
  it('every stimulus of every path, the chart-only ones included, is a world action; the paths survive JSON', () => {
    const pure = connectionPaths('pure').map(lifecyclePathOf)
    const types = new Set(pure.flatMap((p) => p.steps.map((s) => s.stimulus.type)))
    expect([...types].sort()).toEqual(
      [
        'adapter.late', 'await', 'channel.close', 'channel.error', 'clock.advance', 'control.signal', 'host.cancelWait', 'host.connect',
        'host.disconnect', 'join.reply', 'server.close', 'server.drop', 'server.malformed', 'server.stall', 'server.supersede',
        'upgrade.accept', 'upgrade.drop', 'upgrade.refuse',
      ].sort(),
    )
    const wire = lifecyclePaths()
    expect(JSON.parse(JSON.stringify(wire))).toEqual(wire)
    expect(Object.isFrozen(wire) && Object.isFrozen(wire[0]!.steps[0]!.stimulus)).toBe(true)
  })

  it('names the real defaults of fixed delays and leaves drawn ones to the link', () => {
    const steps = lifecyclePaths().flatMap((p) => p.steps)
    expect(steps.find((s) => s.name === 'connect timeout')?.stimulus).toEqual({ type: 'clock.advance', delay: 'connectTimeout', ms: 10_000 })
    expect(steps.find((s) => s.name === 'join timeout')?.stimulus).toEqual({ type: 'clock.advance', delay: 'joinTimeout', ms: 10_000 })
    expect(steps.find((s) => s.name === 'backoff elapsed')?.stimulus).toEqual({ type: 'clock.advance', delay: 'backoff', ms: null })
    expect(steps.find((s) => s.name === 'upgrade 429')?.stimulus).toEqual({ type: 'upgrade.refuse', status: 429, retryAfterS: 1 })
  })

  it('refuses a stimulus it has no action for', () => {
    expect(() => stimulusOf('close the laptop lid', 'server', { type: 'x' }, 'connected')).toThrow(/no world action for stimulus "close the laptop lid"/)
  })
})

describe('the runner', () => {
  it('fails a host that stops on a close 1000, naming the path, the step and the rule', async () => {
    const path = pathFrom('host connect > open > join ok > close 1000 > backoff chosen', 5)
    const failure = await failureOf(
      kit.run(path, (options) => {
        const link = createLink(options)
        // The bug this library exists for: a close 1000 read as "stop".
        link.on('disconnected', (e) => e.reason.kind === 'closed' && void link.disconnect())
        return link
      })
    )
    expect(failure).toBeInstanceOf(PathFailure)
    expect(failure).toMatchObject({ path: path.name, step: 4, stimulus: 'backoff chosen' })
    expect((failure as Error).message).toMatch(/link\.state (stopping|stopped), the chart says reconnecting/)
  })

  it('checks the host’s own oracle beside the library’s, with the host the factory returned', async () => {
    const path = pathFrom('host connect > open > join ok > supersede', 4)
    const seen: string[] = []
    const failure = await failureOf(
      kit.run(path, (options) => ({ link: createLink(options), label: 'mine' }), {
        oracles: [
          ...LIFECYCLE_ORACLES,
          {
            name: 'host-rule',
            rule: 'never superseded',
            check: ({ host, after, step }) => {
              seen.push(`${host.label}:${step.name}`)
              return after.reason === 'superseded' ? 'superseded' : null
            },
          },
        ],
      })
    )
    expect(seen).toEqual(['mine:host connect', 'mine:open', 'mine:join ok', 'mine:supersede'])
    expect(failure).toMatchObject({ name: 'PathFailure', step: 3, stimulus: 'supersede', detail: 'host-rule: superseded' })
  })

  it('a timeoutMs no timer can take is refused before anything runs; a kit stopped before or during a run rejects saying so', async () => {
    const path = pathFrom('host connect > open > join ok > close 1000 > backoff chosen', 5)
    let built = 0
    for (const timeoutMs of [-5, Number.NaN, 1.5, 0]) {
      await expect(kit.run(path, (options) => (built++, createLink(options)), { timeoutMs })).rejects.toThrow(
        new RangeError(`timeoutMs must be a whole number of milliseconds in [1, 2^31-1], got ${String(timeoutMs)}`),
      )
    }
    expect(built).toBe(0)
    const own = await startPathKit({ agentPrefix: 'kit-stop-' })
    // Stopped as the path's first upgrade arrives: the run is cut short, neither passed nor failed at a step.
    const run = own.run(path, (options) => createLink(options))
    await own.simulator.waitFor(() => own.simulator.heldUpgrades === 1)
    await own.stop()
    await expect(run).rejects.toThrow(/^the path kit was stopped during path ".+": the run was cut short and is not judged$/)
    await expect(own.run(path, (options) => (built++, createLink(options)))).rejects.toThrow(/^the path kit has stopped: path ".+" cannot run; start another with startPathKit\(\)$/)
    expect(built).toBe(0)
  })

  it('rejects a factory that returns no link, and passes a correct host with a report of what the server saw', async () => {
    const path = pathFrom('host connect > open > join ok > close 1000 > backoff chosen', 5)
    await expect(kit.run(path, () => ({}) as never)).rejects.toThrow(/returned no link/)
    // A link of another agent id would pass paths the server never saw it walk: refused, and stopped.
    let stopped = 0
    await expect(
      kit.run(path, (options) => ({ link: createLink({ ...options, agentId: 'elsewhere' }), stop: () => void stopped++ })),
    ).rejects.toThrow(/the path host's link connects as "elsewhere", not as the kit's "kit-unit-\d+"/)
    expect(stopped).toBe(1)
    const report = await kit.run(path, (options) => createLink(options))
    expect(report).toMatchObject({ path: path.name, sockets: 1 })
    expect(report.agentId).toMatch(/^kit-unit-\d+$/)
    expect(report.states.has('connection.session.online.attached.live.connected')).toBe(true)
  })
})

describe('the runner sees what a host does on its own', () => {
  it('fails a host that connects again after a supersede, though the kit holds that upgrade', async () => {
    const path = pathFrom('host connect > open > join ok > supersede', 4)
    const failure = await failureOf(
      kit.run(path, (options) => {
        const link = createLink(options)
        link.on('disconnected', (e) => e.terminal && setTimeout(() => void link.connect().catch(() => {}), 0))
        return link
      })
    )
    expect(failure, `${String(failure)} ${JSON.stringify(failure)}`).toBeInstanceOf(PathFailure)
    expect((failure as Error).message).toMatch(/moved the link from terminated to connecting|attempted \d+ upgrade/)
  })

  it('reports the path failure, not the host stop() that throws after it, and still cleans up', async () => {
    const path = pathFrom('host connect > open > join ok > close 1000 > backoff chosen', 5)
    const failure = await failureOf(
      kit.run(path, (options) => {
        const link = createLink(options)
        link.on('disconnected', (e) => e.reason.kind === 'closed' && void link.disconnect())
        return {
          link,
          stop: () => {
            throw new Error('stop failed')
          },
        }
      })
    )
    expect(failure).toBeInstanceOf(PathFailure)
    expect((failure as PathFailure).hostStopError).toMatchObject({ message: 'stop failed' })
  })

  it('an oracle that throws, or returns an empty sentence, breaks its rule by name', async () => {
    const path = pathFrom('host connect > open', 2)
    const throws = await failureOf(
      kit.run(path, (options) => createLink(options), {
        oracles: [
          {
            name: 'throws',
            rule: 'x',
            check: () => {
              throw 'not an Error'
            },
          },
        ],
      })
    )
    expect((throws as Error).message).toMatch(/throws: the oracle threw: not an Error/)
    const empty = await failureOf(kit.run(path, (options) => createLink(options), { oracles: [{ name: 'empty', rule: 'x', check: () => '' }] }))
    expect((empty as Error).message).toMatch(/empty: \(broken, no message\)/)
    // A JavaScript caller's async check, or one that answers true/false: named as the oracle's defect.
    const later = await failureOf(
      kit.run(path, (options) => createLink(options), { oracles: [{ name: 'async', rule: 'x', check: (async () => Promise.reject(new Error('late'))) as never }] }),
    )
    expect((later as Error).message).toMatch(/async: the oracle returned a Promise: oracles are synchronous/)
    const thenThrows = await failureOf(
      kit.run(path, (options) => createLink(options), {
        oracles: [{ name: 'thenable', rule: 'x', check: (() => ({ then: () => { throw new Error('then exploded') } })) as never }],
      }),
    )
    expect(thenThrows).toBeInstanceOf(PathFailure)
    expect((thenThrows as Error).message).toMatch(/thenable: the oracle threw: then exploded/)
    const yes = await failureOf(kit.run(path, (options) => createLink(options), { oracles: [{ name: 'bool', rule: 'x', check: (() => true) as never }] }))
    expect((yes as Error).message).toMatch(/bool: the oracle returned boolean true: return a string for a broken rule, null when it holds/)
  })

  it('waits as long as the host\'s own heartbeat needs to see a stalled server', async () => {
    const path = pathFrom('host connect > open > join ok > heartbeat timeout > backoff chosen', 5)
    const report = await kit.run(path, (options) => createLink({ ...options, policy: { ...options.policy, transport: { heartbeatIntervalMs: 1200, closeTimeoutMs: 150 } } }))
    expect(report.sockets).toBe(1)
  }, 15_000)
})

describe('every lifecycle oracle breaks on the step it guards', () => {
  // One violating (before, after) pair per oracle: an oracle that never fires fails here.
  const at = (state: string, extra: Partial<StepExpectation> = {}): StepExpectation => ({ state: state as StepExpectation['state'], chartState: state, reason: null, code: null, generation: 1, epoch: 1, ...extra })
  const cases: Record<string, [step: string, before: StepExpectation, after: StepExpectation, wasAccepted?: boolean]> = {
    'late-and-bad-input-change-nothing': ['stale close', at('connected'), at('reconnecting')],
    'control-crash-rejoins': ['control phx_error', at('connected'), at('reconnecting', { generation: 2 })],
    'suspended-retries': ['backoff elapsed', at('suspended'), at('suspended')],
    'supersede-is-terminal': ['supersede', at('connected'), at('reconnecting')],
    'own-conflict-retries': ['upgrade 409', at('connecting'), at('terminated', { reason: 'rejected' }), true],
    'refusal-is-terminal': ['upgrade 403', at('connecting'), at('reconnecting', { reason: 'rejected' })],
    'normal-close-reconnects': ['close 1000', at('connected'), at('stopped')],
    'disconnect-stops': ['host disconnect', at('connected'), at('reconnecting')],
    'stop-is-graceful': ['leave settles', at('stopping'), at('terminated')],
    'connect-starts-a-session': ['host connect', at('idle'), at('connecting', { epoch: 1 })],
    'only-connect-leaves-offline': ['supersede', at('stopped'), at('connecting')],
  }
  it('covers every oracle', () => {
    expect(Object.keys(cases).sort()).toEqual(LIFECYCLE_ORACLES.map((o) => o.name).sort())
  })
  for (const oracle of LIFECYCLE_ORACLES) {
    it(oracle.name, () => {
      const [name, before, after, wasAccepted] = cases[oracle.name]!
      const step = { name, stimulus: { type: 'await', what: name } as const, expect: after }
      const input = { path: { name, steps: [step] }, index: 0, step, before, after, wasConnected: false, wasAccepted: wasAccepted ?? false } as OracleInput
      expect(oracle.check(input)).toEqual(expect.any(String))
      // And holds on the same step when the link does what the rule says (no oracle fires on everything).
      expect(LIFECYCLE_ORACLES.some((o) => o.check({ ...input, after: before, before } as OracleInput) === null)).toBe(true)
    })
  }
})
