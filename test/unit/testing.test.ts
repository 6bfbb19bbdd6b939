/**
 * phoenix-link/testing as a user meets it: the paths as data (every stimulus a world action,
 * serializable), the runner's verdicts on a host that breaks a rule, on a failing oracle of the
 * host's own and on a factory that returns no link, each named by path, step and stimulus.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { createLink, Link, type LinkOptions } from '../../src/link.js'
import { connectionPaths } from '../../src/node/model/paths.js'
import { classifyJoinError, describeReason } from '../../src/reasons.js'
import {
  LIFECYCLE_ORACLES,
  PathFailure,
  lifecyclePathOf,
  lifecyclePaths,
  reconnectPaths,
  startPathKit,
  stimulusOf,
  type LifecycleOracle,
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
        'host.disconnect', 'join.reply', 'server.close', 'server.drop', 'server.malformed', 'server.reset', 'server.stall', 'server.supersede',
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
    const path = pathFrom('host connect > upgrade sent > open > join ok > close 1000 > backoff chosen', 6)
    const failure = await failureOf(
      kit.run(path, (options) => {
        const link = createLink(options)
        // The bug this library exists for: a close 1000 read as "stop".
        link.on('disconnected', (e) => e.reason.kind === 'closed' && void link.disconnect())
        return link
      })
    )
    expect(failure).toBeInstanceOf(PathFailure)
    expect(failure).toMatchObject({ path: path.name, step: 5, stimulus: 'backoff chosen' })
    expect((failure as Error).message).toMatch(/link\.state (stopping|stopped), the chart says reconnecting/)
  })

  it('checks the host’s own oracle beside the library’s, with the host the factory returned', async () => {
    const path = pathFrom('host connect > upgrade sent > open > join ok > supersede', 5)
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
    expect(failure).toMatchObject({ name: 'PathFailure', step: 4, stimulus: 'supersede', detail: 'host-rule: superseded' })
  })

  it('a timeoutMs no timer can take is refused before anything runs; a kit stopped before or during a run rejects saying so', async () => {
    const path = pathFrom('host connect > upgrade sent > open > join ok > close 1000 > backoff chosen', 6)
    let built = 0
    for (const timeoutMs of [-5, Number.NaN, 1.5, 0]) {
      await expect(kit.run(path, (options) => (built++, createLink(options)), { timeoutMs })).rejects.toThrow(
        new RangeError(`timeoutMs must be a whole number of milliseconds in [1, 2^31-1], got ${String(timeoutMs)}`),
      )
    }
    expect(built).toBe(0)
    // A misspelt option is refused, not ignored: `oracle` would have run the default checks in place of the host's.
    const alwaysFails = { name: 'always-fails', check: () => 'this oracle always fails' }
    await expect(kit.run(path, (options) => (built++, createLink(options)), { oracle: [alwaysFails] } as never)).rejects.toThrow(
      new TypeError('unknown run option "oracle" (known: oracles, timeoutMs, channelWaitMs)'),
    )
    await expect(kit.run(path, (options) => (built++, createLink(options)), { timeoutMS: 5 } as never)).rejects.toThrow(TypeError)
    await expect(startPathKit({ settleMS: 0 } as never)).rejects.toThrow(new TypeError('startPathKit: unknown option "settleMS" (known: simulator, agentPrefix, settleMs)'))
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
    const path = pathFrom('host connect > upgrade sent > open > join ok > close 1000 > backoff chosen', 6)
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

  it("gives the host a monotonic clock that is the path's clock: a backoff the path waits out is time the link measures", async () => {
    const path = pathFrom('host connect > upgrade sent > open > join ok > close 1000 > backoff chosen > backoff elapsed > upgrade sent', 8)
    let given: { env: { monotonic: () => number }; clock: { now(): number } } | undefined
    await kit.run(path, (options) => {
      given = options
      return createLink(options)
    })
    // The backoff was advanced on the path's clock (its real time is a few ms): the link's monotonic reads it.
    expect(given!.clock.now()).toBeGreaterThanOrEqual(100)
    expect(given!.env.monotonic()).toBe(given!.clock.now())
  })
})

describe("the runner judges the host's app channels at every connected step", () => {
  // Connected, then a close 1000 and the reconnect, connected again on the second socket.
  const reconnected = (): LifecyclePath => reconnectPaths().find((p) => p.name.includes('> close 1000 >'))!
  const connected = () => pathFrom('host connect > upgrade sent > open > join ok', 4)
  /** A host with one app channel whose join params work `works` times and then throw `why`; `joins()` counts the asks. */
  const paramsThatWork = (topic: string, works: number, why: string) => {
    let joins = 0
    const host = (options: Parameters<typeof createLink>[0]) => {
      const link = createLink(options)
      link.channel(topic, () => {
        if (++joins > works) throw new Error(why)
        return {}
      })
      return link
    }
    return { host, joins: () => joins }
  }

  it('fails a host that joins a mistyped topic, naming the topic and why, at the first connected step', async () => {
    const own = await startPathKit({ agentPrefix: 'kit-typo-', simulator: { channels: ['room:*'] } })
    try {
      const path = pathFrom('host connect > upgrade sent > open > join ok', 4)
      const failure = await failureOf(
        own.run(path, (options) => {
          const link = createLink(options)
          link.channel('room:42')
          link.channel('rom:42')
          return link
        }),
      )
      expect(failure).toBeInstanceOf(PathFailure)
      expect(failure).toMatchObject({ step: 3, stimulus: 'join ok' })
      expect((failure as PathFailure).detail).toMatch(/^app-channels-joined: rom:42 is dropped, not rejoined until the host asks for it again \(rejected\b.*unmatched topic/)
      // The same host with the topic spelt right passes.
      await own.run(path, (options) => {
        const link = createLink(options)
        link.channel('room:42')
        return link
      })
    } finally {
      await own.stop()
    }
  })

  it('waits for the joins in flight: the channels a host asks for before connect() and on `connected` are joined at each connected step, on the first socket and the next two', async () => {
    const seen: string[] = []
    const record: LifecycleOracle = {
      name: 'record-channels',
      rule: 'records what the kit hands the oracles',
      check: ({ step, after, channels }) => {
        if (after.state === 'connected') seen.push(`${step.name}@${after.generation}: ${channels!.map((c) => `${c.topic}=${c.status}`).join(' ')}`)
        return null
      },
    }
    await kit.run(
      reconnected(),
      (options) => {
        const link = createLink(options)
        link.channel('room:early')
        link.on('state', ({ state }) => void (state === 'connected' && link.channel('room:late')))
        return link
      },
      { oracles: [...LIFECYCLE_ORACLES, record] },
    )
    expect(seen).toEqual(['join ok@1: room:early=joined room:late=joined', 'join ok@2: room:early=joined room:late=joined', 'join ok@3: room:early=joined room:late=joined'])
  })

  it('gives every loss a connected link reconnects after a path back to connected, and judges the channels again there: params that fail from the second socket on fail there', async () => {
    const losses = reconnectPaths().map((p) => p.steps[4]!.name)
    expect(losses).toEqual(['close 1000', 'close 1001', 'close 1011', 'close 1012', 'close 1013', 'close 4001', 'drop', 'reset', 'heartbeat timeout', 'control phx_close'])
    for (const path of reconnectPaths()) {
      // The same loss again on the second socket, and back to connected on the third.
      expect(path.steps[10]!.name).toBe(path.steps[4]!.name)
      expect(path.steps[9]!.expect).toMatchObject({ state: 'connected', generation: 2, epoch: 1 })
      expect(path.steps.at(-1)!.expect).toMatchObject({ state: 'connected', generation: 3, epoch: 1 })
    }
    // No generated path connects twice: these are the only ones that judge a rejoin.
    const connectedOn = (p: LifecyclePath) => new Set(p.steps.filter((s) => s.expect.state === 'connected').map((s) => s.expect.generation)).size
    expect(lifecyclePaths().filter((p) => connectedOn(p) > 1)).toEqual([])
    expect(reconnectPaths().every((p) => connectedOn(p) === 3)).toBe(true)
    const failure = await failureOf(kit.run(reconnected(), paramsThatWork('room:once', 1, 'token already used').host))
    expect(failure).toMatchObject({ step: 9, stimulus: 'join ok' })
    expect((failure as PathFailure).detail).toMatch(/^app-channels-joined: room:once is errored, to be rejoined on this socket after its backoff \(other\b.*token already used/)
  })

  it('judges the channels after a second loss too: params that work for the first rejoin and fail on the third socket fail at its join', async () => {
    const twice = paramsThatWork('room:twice', 2, 'token refreshed only once')
    const failure = await failureOf(kit.run(reconnected(), twice.host))
    expect(twice.joins()).toBeGreaterThan(2)
    expect(failure).toMatchObject({ step: 15, stimulus: 'join ok' })
    expect((failure as PathFailure).detail).toMatch(/^app-channels-joined: room:twice is errored, to be rejoined on this socket after its backoff \(other\b.*token refreshed only once/)
  })

  it('waits for a channel the host asks for once another has joined, and for one asked for in its control handler after an await', async () => {
    await kit.run(connected(), (options) => {
      const link = createLink(options)
      const lobby = link.channel('room:lobby')
      void lobby.joined().then(() => link.channel('room:next'))
      return link
    })
    // A channel asked for by the control handler after a heartbeat round trip (longer than the kit's
    // macrotask re-look, with no join in flight to wait on), whose params fail: judged once the handler returned.
    const signalled = pathFrom('host connect > upgrade sent > open > join ok > control signal', 5)
    const failure = await failureOf(
      kit.run(signalled, (options) => {
        const link: Link = createLink({
          ...options,
          onControl: async () => {
            await link.ping()
            link.channel('room:signalled', () => {
              throw new Error('bad params')
            })
          },
        })
        return link
      }),
    )
    expect(failure).toMatchObject({ step: 4, stimulus: 'control signal' })
    expect((failure as PathFailure).detail).toMatch(/^app-channels-joined: room:signalled is errored, to be rejoined on this socket after its backoff \(other\b.*bad params[^)]*\)$/)
    expect((failure as PathFailure).detail).not.toMatch(/judged again/)
  })

  it("a control handler slower than channelWaitMs is no failure, nor is one set later on a sealed link (the kit cannot wrap it); a host that asks again after every refusal is told how often it was dropped", async () => {
    const signalled = pathFrom('host connect > upgrade sent > open > join ok > control signal', 5)
    // A handler that has not returned when the run ends (released after it).
    let release!: () => void
    const held = new Promise<void>((resolve) => (release = resolve))
    const started = performance.now()
    try {
      await kit.run(signalled, (options) => createLink({ ...options, onControl: () => held }), { timeoutMs: 300 })
    } finally {
      release()
    }
    // The step went on after channelWaitMs (the run's timeout, 300 ms) without failing.
    expect(performance.now() - started).toBeLessThan(3000)
    await kit.run(signalled, (options) => {
      const link = Object.seal(createLink(options))
      link.on('state', ({ state }) => void (state === 'connected' && link.onControl(async () => {})))
      return link
    })
    const own = await startPathKit({ agentPrefix: 'kit-again-', simulator: { channels: ['room:*'] } })
    try {
      const failure = await failureOf(
        own.run(
          pathFrom('host connect > upgrade sent > open > join ok', 4),
          (options) => {
            const link = createLink(options)
            link.channel('rom:again')
            link.on('channel', ({ topic, status }) => void (topic === 'rom:again' && status === 'dropped' && link.channel('rom:again')))
            return link
          },
          { channelWaitMs: 200 },
        ),
      )
      expect((failure as PathFailure).detail).toMatch(
        /^app-channels-joined: rom:again is still joining when the kit stopped waiting: the server received \d+ joins? of it on this socket, and none is joined yet; dropped \d+ times during the run, the last rejected \(protocol-error\).*unmatched topic/,
      )
    } finally {
      await own.stop()
    }
  })

  it("a host that falls back from a refused topic on purpose passes with the README's filtered check, which still judges its other channels", async () => {
    const own = await startPathKit({ agentPrefix: 'kit-fallback-', simulator: { channels: ['room:*'] } })
    try {
      const path = pathFrom('host connect > upgrade sent > open > join ok', 4)
      const host = (extra: string | null) => (options: LinkOptions) => {
        const link = createLink(options)
        const v2 = link.channel('rooms:v2')
        v2.onStatus((status) => {
          if (status === 'dropped') {
            void v2.leave()
            link.channel('room:v1')
          }
        })
        if (extra !== null) link.channel(extra)
        return link
      }
      // The README's check: app-channels-joined with the fallback's topic left out.
      const joined = LIFECYCLE_ORACLES.find((o) => o.name === 'app-channels-joined')!
      const mine = LIFECYCLE_ORACLES.map((o) =>
        o !== joined ? o : { ...o, check: (input: OracleInput) => o.check({ ...input, channels: input.channels?.filter((c) => c.topic !== 'rooms:v2') }) },
      )
      await own.run(path, host(null), { oracles: mine })
      expect((await failureOf(own.run(path, host(null)))) as PathFailure).toMatchObject({ detail: expect.stringMatching(/^app-channels-joined: rooms:v2 is dropped/) })
      expect((await failureOf(own.run(path, host('rom:typo'), { oracles: mine }))) as PathFailure).toMatchObject({ detail: expect.stringMatching(/^app-channels-joined: rom:typo is dropped/) })
    } finally {
      await own.stop()
    }
  })

  it('judges a channel asked for after the last step once more, settleMs later', async () => {
    const failure = await failureOf(
      kit.run(connected(), (options) => {
        const link = createLink(options)
        link.on('state', ({ state }) => {
          if (state === 'connected') {
            setTimeout(
              () =>
                link.channel('room:later', () => {
                  throw new Error('bad params')
                }),
              20,
            )
          }
        })
        return link
      }),
    )
    expect(failure).toMatchObject({ step: 3, stimulus: 'join ok' })
    expect((failure as PathFailure).detail).toMatch(/^app-channels-joined: room:later is errored, .*bad params.* \(judged again 100 ms after the path\)$/)
  })

  it('does not judge a channel the host left; judges one whose params fail, and one whose join the server never answers once the run\'s timeout passes', async () => {
    const path = pathFrom('host connect > upgrade sent > open > join ok', 4)
    await kit.run(path, (options) => {
      const link = createLink(options)
      void link.channel('room:gone').leave()
      return link
    })
    const failing = await failureOf(
      kit.run(path, (options) => {
        const link = createLink(options)
        link.channel('room:params', () => {
          throw new Error('no token')
        })
        return link
      }),
    )
    expect((failing as PathFailure).detail).toMatch(/^app-channels-joined: room:params is errored, to be rejoined on this socket after its backoff \(other\b.*no token/)
    // Params that never settle: no join left, and the message says so.
    const silent = await failureOf(
      kit.run(path, (options) => {
        const link = createLink(options)
        link.channel('room:silent', () => new Promise<object>(() => {}))
        return link
      }, { timeoutMs: 300 }),
    )
    expect((silent as PathFailure).detail).toBe('app-channels-joined: room:silent is still joining when the kit stopped waiting: the server received no join of it on this socket (its join never left: params that never settle?)')
    // A join the server holds: the kit waits the run's timeout, then says the channel is still joining.
    const own = await startPathKit({ agentPrefix: 'kit-held-join-' })
    try {
      own.simulator.onJoin(/^room:held$/, { reply: 'hold' })
      const started = performance.now()
      const held = await failureOf(
        own.run(
          path,
          (options) => {
            const link = createLink(options)
            link.channel('room:held')
            return link
          },
          { timeoutMs: 300 },
        ),
      )
      expect((held as PathFailure).detail).toBe('app-channels-joined: room:held is still joining when the kit stopped waiting: the server received 1 join of it on this socket, and none is joined yet')
      expect(performance.now() - started).toBeGreaterThanOrEqual(300)
      // A host that holds joins on purpose: channelWaitMs 0 and the oracle left out, no wait.
      const quick = performance.now()
      await own.run(
        path,
        (options) => {
          const link = createLink(options)
          link.channel('room:held')
          return link
        },
        { timeoutMs: 1000, channelWaitMs: 0, oracles: LIFECYCLE_ORACLES.filter((o) => o.name !== 'app-channels-joined') },
      )
      expect(performance.now() - quick).toBeLessThan(1000)
      await expect(own.run(path, (options) => createLink(options), { channelWaitMs: -1 })).rejects.toThrow(new RangeError('channelWaitMs must be a whole number of milliseconds in [0, 2^31-1], got -1'))
    } finally {
      await own.stop()
    }
  })
})

describe('the runner sees what a host does on its own', () => {
  it('fails a host that connects again after a supersede, though the kit holds that upgrade', async () => {
    const path = pathFrom('host connect > upgrade sent > open > join ok > supersede', 5)
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

  it('a host that restarts after a supersede or a 403 within settleMs fails its path; one that restarts later makes kit.stop() reject naming the path, its link disconnected', async () => {
    const restarting = (delayMs: number) => (options: Parameters<Parameters<PathKit['run']>[1]>[0]) => {
      const link = createLink(options)
      link.on('disconnected', (e) => e.terminal && setTimeout(() => void link.connect().catch(() => {}), delayMs))
      return link
    }
    const refused = pathFrom('host connect > upgrade sent > upgrade 403', 3)
    expect(refused.steps.at(-1)!.expect.state).toBe('terminated')
    // A restart 20 ms after the 403: inside the run's watch.
    const soon = await failureOf(kit.run(refused, restarting(20)))
    expect(soon, String(soon)).toBeInstanceOf(PathFailure)
    expect((soon as Error).message).toMatch(/moved the link from terminated to connecting|attempted \d+ upgrade/)
    // A restart 300 ms after it, past a 50 ms watch: the run passes, the kit's stop() does not.
    const own = await startPathKit({ agentPrefix: 'kit-late-', settleMs: 50 })
    const links: Link[] = []
    try {
      await own.run(refused, (options) => {
        const link = restarting(300)(options)
        links.push(link)
        return link
      })
      await own.simulator.waitFor(() => own.simulator.heldUpgradesOf(links[0]!.agentId) > 0, { timeoutMs: 5_000, what: 'the late restart to reach the server' })
    } finally {
      const stopped = await failureOf(own.stop())
      expect(String(stopped)).toMatch(/^Error: after their runs ended, the hosts of 1 path\(s\) connected again on their own .*"host connect > upgrade sent > upgrade 403": 1 upgrade\(s\) of kit-late-\d+ after its run ended \(the run's link is connecting; a link the host made after it is not the kit's to see\)$/)
    }
    expect(links[0]!.state).toBe('stopped')
    await expect(startPathKit({ settleMs: -1 })).rejects.toThrow('startPathKit: settleMs must be a whole number of milliseconds in [0, 2^31-1], got -1')
  })

  it('runs go concurrently: every path, 50 at a time, passes a correct host (an upgrade abandoned by disconnect() that reaches the server late is never the one a later step answers), and stop() finds no late upgrade', async () => {
    const own = await startPathKit({ agentPrefix: 'kit-par-' })
    const paths = lifecyclePaths()
    const failures: string[] = []
    let next = 0
    try {
      await Promise.all(
        Array.from({ length: 50 }, async () => {
          while (next < paths.length) {
            const path = paths[next++]!
            await own.run(path, (options) => createLink(options)).catch((error: Error) => failures.push(error.message))
          }
        }),
      )
    } finally {
      await own.stop()
    }
    expect(failures, failures.join('\n\n')).toEqual([])
    expect(next).toBe(paths.length)
  })

  it('a host whose own control handler rejects (its work failed) still passes the queued-signals path: each signal was handed over once, in order', async () => {
    const path = lifecyclePaths().find((p) => p.name === 'host connect > upgrade sent > open > join ok > queued signals')!
    const seen: string[] = []
    await kit.run(path, (options) =>
      createLink({
        ...options,
        onControl: async (signal) => {
          seen.push(signal.correlationId ?? '')
          throw new Error('the agent could not act on it')
        },
      }),
    )
    expect(seen).toEqual([expect.stringMatching(/^path-slow-\d+$/), expect.stringMatching(/^path-queued-\d+-a$/), expect.stringMatching(/^path-queued-\d+-b$/)])
  })

  it("a host that sets its control handler later with link.onControl() (once connected) still gets every signal, and the kit's faults still reach the link: the queued-signals path waits for the host's handler, the failing-signal path sees the kit's throw", async () => {
    const queued = lifecyclePaths().find((p) => p.name === 'host connect > upgrade sent > open > join ok > queued signals')!
    const failing = lifecyclePaths().find((p) => p.name.endsWith('> failing signal'))!
    const seen: string[] = []
    const failures: string[] = []
    const build = (options: Parameters<Parameters<PathKit['run']>[1]>[0]) => {
      // The link logs a control handler's failure (`error`, "control handler failed").
      const logger = { error: (fields: Record<string, unknown>, message: string) => void (message === 'control handler failed' && failures.push(String(fields.error))) }
      const link = createLink({ ...options, logger })
      link.on('connected', () => link.onControl(async (signal) => void seen.push(signal.correlationId ?? '')))
      return link
    }
    await kit.run(queued, build)
    expect(seen).toEqual([expect.stringMatching(/^path-slow-\d+$/), expect.stringMatching(/^path-queued-\d+-a$/), expect.stringMatching(/^path-queued-\d+-b$/)])
    seen.length = 0
    await kit.run(failing, build)
    // The kit's fault is thrown before the host's handler: the link saw a handler fail, the host's handler nothing.
    expect(seen).toEqual([])
    expect(failures).toEqual([expect.stringContaining('handler failure (path kit)')])
  })

  it('refuses a link the factory already started, and a link built without the kit\'s inspect option, each saying what to do', async () => {
    const path = pathFrom('host connect > upgrade sent > open > join ok > close 1000 > backoff chosen', 6)
    let started: Link | null = null
    await expect(
      kit.run(path, (options) => {
        started = createLink(options)
        started.connect().catch(() => {})
        return started
      }),
    ).rejects.toThrow(/the path host's link is connecting, not idle: return the link before connecting it/)
    expect(started!.state).toBe('stopped')
    await expect(kit.run(path, ({ inspect: _left, ...options }) => createLink(options))).rejects.toThrow(/step 6 \(backoff chosen\): the link was built without the kit's inspect option/)
    // An observer of the host's own that passes every event on is the kit's option still.
    const mine: string[] = []
    await kit.run(path, (options) => createLink({ ...options, inspect: (event) => (mine.push(event.type), options.inspect(event)) }))
    expect(mine.length).toBeGreaterThan(0)
  })

  it("gives the link's disconnect() at the end of a run the run's timeout plus the link's runs.hookTimeoutMs: an abort hook within the link's own bound is no failure", async () => {
    const path = pathFrom('host connect > upgrade sent > open > join ok > close 1000 > backoff chosen', 6)
    let hookDone = false
    await kit.run(
      path,
      (options) => {
        const link = createLink({ ...options, runs: { hookTimeoutMs: 2000 } })
        link.on('connected', () => void link.runSignal('task-1', { onAbort: () => new Promise<void>((resolve) => setTimeout(() => resolve(void (hookDone = true)), 600)) }))
        return link
      },
      { timeoutMs: 300 },
    )
    expect(hookDone).toBe(true)
  })

  it("the kit's control handler goes through the link's own onControl (a host's patch of the instance runs, and is put back after the run); a sealed link still runs its paths; a frozen one is refused and released", async () => {
    const queued = lifecyclePaths().find((p) => p.name === 'host connect > upgrade sent > open > join ok > queued signals')!
    let patched = 0
    let patch: unknown = null
    const patchedLink = await (async () => {
      let made!: Link
      await kit.run(queued, (options) => {
        made = createLink(options)
        patch = function (this: Link, handler: Parameters<Link['onControl']>[0]) {
          patched++
          Link.prototype.onControl.call(this, handler)
        }
        Object.assign(made, { onControl: patch })
        return made
      })
      return made
    })()
    expect(patched).toBeGreaterThan(0)
    expect(patchedLink.onControl).toBe(patch)
    await kit.run(queued, (options) => Object.seal(createLink(options)))
    let stopped = 0
    await expect(kit.run(queued, (options) => ({ link: Object.freeze(createLink(options)) as Link, stop: () => void stopped++ }))).rejects.toThrow(
      /the path host's link does not take the kit's control handler \(link\.onControl\(\) threw: .*\); return a link that is not frozen/,
    )
    expect(stopped).toBe(1)
  })

  it("a host's observer that passes the kit's inspect events on later (batched) is the kit's option still; a run's timeout at its largest does not overflow the end-of-run bound", async () => {
    const disconnectOnly = lifecyclePaths().find((p) => p.name === 'host disconnect')!
    await kit.run(disconnectOnly, (options) => createLink({ ...options, inspect: (event) => void setImmediate(() => options.inspect(event)) }))
    const path = pathFrom('host connect > upgrade sent > open > join ok > close 1000 > backoff chosen', 6)
    const report = await kit.run(path, (options) => createLink({ ...options, runs: { hookTimeoutMs: 2 ** 31 - 1 } }), { timeoutMs: 2 ** 31 - 1 })
    expect(report.sockets).toBe(1)
  })

  it('an oracle written for a richer host than the factory returns does not compile (check is a property, checked strictly)', () => {
    const needsLines: LifecycleOracle<{ link: Link; lines: string[] }> = { name: 'host-logs', rule: 'the host logs', check: ({ host }) => (host.lines.length > 0 ? null : 'no lines') }
    // A host the oracle's host extends: the method form of check (bivariant) let it through.
    const plain = (options: Parameters<Parameters<PathKit['run']>[1]>[0]) => ({ link: createLink(options) })
    // Never called: the line is for the compiler (tsc --noEmit fails if the error below is not one).
    const run = () =>
      // @ts-expect-error the factory's host ({ link }) has no `lines` for the oracle to read
      kit.run(lifecyclePaths()[0]!, plain, { oracles: [needsLines] })
    expect(typeof run).toBe('function')
  })

  it('counts an attempt the link gave up on (its connect timeout) as one the server saw: another connection the host makes on its own is caught', async () => {
    const path = pathFrom('host connect > upgrade sent > open > join crashed > backoff chosen > backoff elapsed > upgrade sent > stale supersede > connect timeout > backoff chosen', 10)
    expect(path.name.endsWith('stale supersede > connect timeout > backoff chosen')).toBe(true)
    const rogues: Link[] = []
    const failure = await failureOf(
      kit.run(path, (options) => {
        const link = createLink(options)
        // Another instance of the agent, started by the host once the timed-out attempt is reported.
        link.on('disconnected', (e) => {
          if (e.reason.kind !== 'timed-out' || rogues.length > 0) return
          const rogue = createLink({ ...options, inspect: undefined })
          rogues.push(rogue)
          void rogue.connect().catch(() => {})
        })
        return {
          link,
          stop: () => kit.simulator.waitFor(() => kit.simulator.heldUpgradesOf(link.agentId) > 0, { timeoutMs: 5_000, what: "the other instance's upgrade held" }),
        }
      }),
    )
    await Promise.all(rogues.map((r) => r.disconnect()))
    expect(rogues).toHaveLength(1)
    expect(failure, String(failure)).toBeInstanceOf(PathFailure)
    // Caught after the last step (the other instance's upgrade already held) or at cleanup (held later).
    expect((failure as Error).message).toMatch(/attempted 3 upgrades, the path allows 2|attempted 1 upgrade\(s\) the path did not answer/)
  })

  it('reports the path failure, not the host stop() that throws after it, and still cleans up', async () => {
    const path = pathFrom('host connect > upgrade sent > open > join ok > close 1000 > backoff chosen', 6)
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
    // A path that held and whose host's stop() throws: a PathFailure naming the path, at its end.
    const held = pathFrom('host connect > upgrade sent > upgrade 403', 3)
    const ending = await failureOf(kit.run(held, (options) => ({ link: createLink(options), stop: () => Promise.reject(new Error('stop boom')) })))
    expect(ending).toBeInstanceOf(PathFailure)
    expect((ending as Error).message).toBe(`path "${held.name}", step 3 ((end)): every step held, but ending the run failed: stop boom`)
    expect((ending as PathFailure).hostStopError).toMatchObject({ message: 'stop boom' })
  })

  it("bounds every wait on the host's disconnect(): one that never settles fails the step by name within the run's timeout, one that rejects after the path is reported, and the run cleans up either way", async () => {
    const path = lifecyclePaths().find((p) => p.name === 'host connect > upgrade sent > host disconnect > host connect > upgrade sent > upgrade 409 > backoff chosen')!
    expect(path).toBeDefined()
    const hangsOnce = await failureOf(
      kit.run(
        path,
        (options) => {
          const link = createLink(options)
          const real = link.disconnect.bind(link)
          let calls = 0
          link.disconnect = async () => {
            await real()
            if (calls++ === 0) await new Promise(() => {})
          }
          return link
        },
        { timeoutMs: 1_000 },
      ),
    )
    expect(hangsOnce).toBeInstanceOf(PathFailure)
    expect((hangsOnce as PathFailure).message).toContain('step 3 (host disconnect): timed out after 1000 ms waiting for disconnect() to settle')
    const cleanup = pathFrom('host connect > upgrade sent > open', 3)
    let agent = ''
    const rejects = await failureOf(
      kit.run(cleanup, (options) => {
        agent = options.agentId
        const link = createLink(options)
        const real = link.disconnect.bind(link)
        link.disconnect = async () => {
          await real()
          throw new Error('host cleanup failed')
        }
        return link
      }),
    )
    expect(rejects).toBeInstanceOf(PathFailure)
    expect(rejects).toMatchObject({ stimulus: '(end)', hostStopError: { message: 'host cleanup failed' } })
    // The cleanup after it still ran: the agent holds nothing on the server.
    expect(kit.simulator.live(agent)).toEqual([])
    expect(kit.simulator.heldUpgradesOf(agent)).toBe(0)
  })

  it('an oracle that throws, or returns an empty sentence, breaks its rule by name', async () => {
    const path = pathFrom('host connect > upgrade sent > open', 3)
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
    const path = pathFrom('host connect > upgrade sent > open > join ok > heartbeat timeout > backoff chosen', 6)
    const report = await kit.run(path, (options) => createLink({ ...options, policy: { ...options.policy, transport: { heartbeatIntervalMs: 1200, closeTimeoutMs: 150 } } }))
    expect(report.sockets).toBe(1)
  }, 15_000)
})

describe('the runner refuses what it cannot carry out, and leaves nothing behind', () => {
  /** A copy of a path the test may edit (the shipped paths are frozen). */
  const editable = (start: string, length: number): LifecyclePath => structuredClone(pathFrom(start, length)) as LifecyclePath
  it('an edited path, a host or options it cannot use are refused before anything runs, naming the step and the field', async () => {
    const base = 'host connect > upgrade sent > open > join ok > close 1000 > backoff chosen'
    const upgradesBefore = kit.simulator.upgrades.length
    let built = 0
    const host = (options: Parameters<Parameters<PathKit['run']>[1]>[0]) => (built++, createLink(options))
    const cases: Array<[what: string, edit: (p: LifecyclePath & { steps: Array<Record<string, unknown>> }) => void, message: RegExp]> = [
      ['an unknown stimulus type', (p) => ((p.steps[2]!.stimulus as object) = { type: 'server.explode' }), /step 3 \(open\): stimulus\.type: expected one of "upgrade\.accept" \| .*"await"$/],
      ['an unknown delivery', (p) => ((p.steps[4]!.stimulus as object) = { type: 'control.signal', delivery: 'bogus' }), /step 5 \(close 1000\): stimulus\.delivery: expected one of "once" \| "duplicate" \| "handler-throws" \| "queued"$/],
      ['an unknown delay', (p) => ((p.steps[5]!.stimulus as object) = { type: 'clock.advance', delay: 'typo', ms: null }), /step 6 \(backoff chosen\): stimulus\.delay: expected one of "backoff"/],
      ['a field the runner would not read', (p) => ((p.steps[3]!.stimulus as object) = { type: 'join.reply', topic: 'room:1', status: 'ok' }), /step 4 \(join ok\): stimulus\.topic: expected "control"/],
      ['a close code no server may send', (p) => ((p.steps[4]!.stimulus as object) = { type: 'server.close', code: 1006 }), /step 5 \(close 1000\): stimulus\.code: expected a close code a server may send/],
      ['a step with no expectation', (p) => ((p.steps[5]!.expect as unknown) = null), /step 6 \(backoff chosen\): expect: expected object, received null$/],
      ['a state that is not a link state', (p) => ((p.steps[2]!.expect as { state: string }).state = 'online'), /step 3 \(open\): expect\.state: expected one of "idle"/],
      ['no steps', (p) => (p.steps = []), /^path ".+": steps: expected at least one step$/],
    ]
    for (const [what, edit, message] of cases) {
      const path = editable(base, 6)
      edit(path as never)
      await expect(kit.run(path, host), what).rejects.toThrow(new RegExp(message.source.startsWith('^') ? message.source : `^path "${base.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}", ${message.source}`))
      await expect(kit.run(path, host), what).rejects.toBeInstanceOf(TypeError)
    }
    const path = pathFrom(base, 6)
    await expect(kit.run(null as never, host)).rejects.toThrow(new TypeError('the path must be a lifecycle path object ({ name, steps }, from lifecyclePaths()), got null'))
    await expect(kit.run(path, 'createLink' as never)).rejects.toThrow(/^the path host must be a function that builds the link .*, got string$/)
    await expect(kit.run(path, host, 5 as never)).rejects.toThrow(new TypeError('the run options must be an object, got number'))
    await expect(kit.run(path, host, { oracles: 5 as never })).rejects.toThrow(/^oracles must be an array of \{ name, check \}.*, got number$/)
    await expect(kit.run(path, host, { oracles: [...LIFECYCLE_ORACLES, null as never] })).rejects.toThrow(`oracles[${LIFECYCLE_ORACLES.length}] must be an object with a string name and a check function, got null`)
    // Nothing ran: no host built, no upgrade seen.
    expect(built).toBe(0)
    expect(kit.simulator.upgrades.length).toBe(upgradesBefore)
    // null options are no options, as the link's calls read them.
    await expect(kit.run(path, host, null)).resolves.toMatchObject({ sockets: 1 })
    expect(built).toBe(1)
  })

  it('a wait whose stimulus throws (the kit stopped under it) ends with the run: no timer left behind, no unhandled rejection', async () => {
    // The run's waits are the timers of its timeoutMs (59,999 ms here): each must be cleared or
    // have fired when the run settles.
    const WAIT_MS = 59_999
    const live = new Set<unknown>()
    let made = 0
    const realSet = globalThis.setTimeout
    const realClear = globalThis.clearTimeout
    const setSpy = vi.spyOn(globalThis, 'setTimeout').mockImplementation(((fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) => {
      const timer = realSet(() => {
        live.delete(timer)
        fn(...args)
      }, ms)
      if (ms === WAIT_MS) (made++, live.add(timer))
      return timer
    }) as typeof setTimeout)
    const clearSpy = vi.spyOn(globalThis, 'clearTimeout').mockImplementation(((timer?: ReturnType<typeof setTimeout>) => {
      live.delete(timer)
      realClear(timer)
    }) as typeof clearTimeout)
    let unhandled: unknown = null
    const onUnhandled = (reason: unknown) => (unhandled = reason)
    process.on('unhandledRejection', onUnhandled)
    const own = await startPathKit({ agentPrefix: 'kit-orphan-' })
    try {
      const path = pathFrom('host connect > upgrade sent > open > join ok > control signal', 5)
      // The kit stops as the join is judged; the next step's signal then has no simulator to go to.
      const stopper = { name: 'stops-the-kit', rule: 'The kit stops under the run.', check: ({ step }: OracleInput) => (step.name === 'join ok' && void own.stop(), null) }
      await expect(own.run(path, (options) => createLink(options), { oracles: [stopper], timeoutMs: WAIT_MS })).rejects.toThrow(/^the path kit was stopped during path ".+"/)
      // The signal's wait was made (then its stimulus threw), and it ended with the run.
      expect(made).toBeGreaterThan(0)
      expect(live.size).toBe(0)
    } finally {
      setSpy.mockRestore()
      clearSpy.mockRestore()
      for (const timer of live) realClear(timer as ReturnType<typeof setTimeout>)
      process.off('unhandledRejection', onUnhandled)
      await own.stop()
    }
    expect(unhandled).toBe(null)
  })

  it('a host factory that never settles is bounded by timeoutMs and by the kit\'s stop; one that settles late is released', async () => {
    const path = pathFrom('host connect > upgrade sent > open > join ok > close 1000 > backoff chosen', 6)
    await expect(kit.run(path, () => new Promise<never>(() => {}), { timeoutMs: 200 })).rejects.toThrow(`the path host did not return a link within 200 ms (path "${path.name}")`)
    // Settling after the bound: its link is disconnected and its stop() called.
    let settle!: () => void
    let stopped!: () => void
    const hostStopped = new Promise<void>((resolve) => (stopped = resolve))
    let late: ReturnType<typeof createLink> | null = null
    const run = kit.run(
      path,
      (options) =>
        new Promise<{ link: ReturnType<typeof createLink>; stop: () => void }>((resolve) => {
          settle = () => {
            late = createLink(options)
            void late.connect().catch(() => {})
            resolve({ link: late, stop: () => stopped() })
          }
        }),
      { timeoutMs: 200 },
    )
    await expect(run).rejects.toThrow(/did not return a link within 200 ms/)
    settle()
    await hostStopped
    await late!.whenState(['stopped', 'idle'])
    const own = await startPathKit({ agentPrefix: 'kit-build-' })
    const building = own.run(path, () => new Promise<never>(() => {}))
    await own.stop()
    await expect(building).rejects.toThrow(`the path kit was stopped while the host of path "${path.name}" was being built`)
  })

  it('a host result that holds no Link of this copy is refused with what it returned released', async () => {
    const path = pathFrom('host connect > upgrade sent > open > join ok > close 1000 > backoff chosen', 6)
    let stops = 0
    await expect(kit.run(path, () => ({ link: 3, stop: () => void stops++ }) as never)).rejects.toThrow('the path host returned no link: return the Link, or { link, stop? }')
    expect(stops).toBe(1)
    // A Link of another copy of phoenix-link (the source beside a build): it has the shape, not the class.
    let disconnects = 0
    const foreign = { agentId: 'x', connect: async () => {}, disconnect: async () => void disconnects++ }
    await expect(kit.run(path, () => foreign as never)).rejects.toThrow(/^the path host returned a Link of another copy of phoenix-link/)
    await expect(kit.run(path, () => ({ link: foreign, stop: () => void stops++ }) as never)).rejects.toThrow(/another copy of phoenix-link/)
    expect(disconnects).toBe(2)
    expect(stops).toBe(2)
  })

  it("a host of the user's own that has a link's shape (connect, disconnect, agentId) still has its stop() called", async () => {
    const path = pathFrom('host connect > upgrade sent > open > join ok > close 1000 > backoff chosen', 6)
    class AgentHost {
      stopped = 0
      constructor(readonly link: ReturnType<typeof createLink>) {}
      get agentId(): string {
        return this.link.agentId
      }
      connect(): Promise<void> {
        return this.link.connect()
      }
      disconnect(): Promise<void> {
        return this.link.disconnect()
      }
      stop(): void {
        this.stopped++
      }
    }
    let host: AgentHost | null = null
    await kit.run(path, (options) => (host = new AgentHost(createLink(options))))
    expect(host!.stopped).toBe(1)
  })

  it('a line of `phoenix-link paths --json` (the path with its chart, mode and index beside it) is a path the kit runs; a bad step or status is named', async () => {
    const path = pathFrom('host connect > upgrade sent > open > join ok > close 1000 > backoff chosen', 6)
    const line = JSON.parse(JSON.stringify({ chart: 'connection', mode: 'wire', index: 7, ...path })) as LifecyclePath
    await expect(kit.run(line, (options) => createLink(options))).resolves.toMatchObject({ path: path.name, sockets: 1 })
    const nullStep = structuredClone(path) as LifecyclePath
    ;(nullStep.steps as unknown[])[0] = null
    await expect(kit.run(nullStep, (options) => createLink(options))).rejects.toThrow(new TypeError(`path "${path.name}", step 1: expected object, received null`))
    const status = structuredClone(path) as LifecyclePath
    ;(status.steps[3]!.stimulus as unknown) = { type: 'join.reply', topic: 'control', status: 'maybe' }
    await expect(kit.run(status, (options) => createLink(options))).rejects.toThrow(new TypeError(`path "${path.name}", step 4 (join ok): stimulus.status: expected status "ok", or "error" with a reason`))
  })

  it('startPathKit refuses options it cannot use', async () => {
    await expect(startPathKit(5 as never)).rejects.toThrow(new TypeError('startPathKit: options must be an object, got number'))
    await expect(startPathKit({ agentPrefix: 5 as never })).rejects.toThrow(new TypeError('startPathKit: agentPrefix must be a non-empty string, got number'))
    await expect(startPathKit({ agentPrefix: '' })).rejects.toThrow(new TypeError('startPathKit: agentPrefix must be a non-empty string, got an empty string'))
    await expect(startPathKit({ simulator: { agents: { x: 'y' } } })).rejects.toThrow(/^startPathKit: simulator\.agents must be 'any'/)
    await expect(startPathKit({ simulator: { host: '0.0.0.0' } })).rejects.toThrow(/^host "0\.0\.0\.0" is not a loopback interface/)
  })
})

describe('every lifecycle oracle breaks on the step it guards', () => {
  // One violating (before, after) pair per oracle: an oracle that never fires fails here.
  const at = (state: string, extra: Partial<StepExpectation> = {}): StepExpectation => ({ state: state as StepExpectation['state'], chartState: state, reason: null, code: null, generation: 1, epoch: 1, ...extra })
  // A supersede held on upgrade 2, that upgrade dropped unanswered, then upgrade 3 answered: what the server saw of it decides.
  const unknownCause = (answer: string, onConflict: string | null, extra: { between?: string; answeredGeneration?: number } = {}) => {
    const at3 = (state: string, generation: number, epoch = 1): StepExpectation => ({ state: state as StepExpectation['state'], chartState: state, reason: null, code: null, generation, epoch })
    const g = extra.answeredGeneration ?? 3
    const named = (name: string, expect: StepExpectation) => ({ name, stimulus: { type: 'await', what: name } as const, expect })
    const steps = [
      named('upgrade sent', at3('connecting', 2)),
      named('stale supersede', at3('connecting', 2)),
      named('drop', at3('reconnecting', 2)),
      ...(extra.between === undefined ? [] : [named(extra.between, at3('connecting', g))]),
      named('backoff elapsed', at3('connecting', g)),
      named(answer, at3(answer === 'open' ? 'joining' : 'reconnecting', g)),
    ]
    const step = steps.at(-1)!
    const upgrades = [{ at: 1, agentId: 'agent-a', status: answer === 'open' ? 101 : Number(answer.slice(-3)), outcome: 'x', onConflict }]
    return { path: { name: answer, steps }, index: steps.length - 1, step, before: steps.at(-2)!.expect, after: step.expect, wasConnected: true, wasAccepted: true, simulator: { upgrades }, agentId: 'agent-a' } as unknown as OracleInput
  }
  const appStep = { name: 'join ok', stimulus: { type: 'await', what: 'join ok' } as const, expect: at('connected') }
  const appInput = { path: { name: 'join ok', steps: [appStep] }, index: 0, step: appStep, before: at('joining'), after: at('connected'), wasConnected: false, wasAccepted: true }
  it('judges the app channels only on a connected link with a record of them, each one not joined named with its reason', () => {
    const check = (input: object) => LIFECYCLE_ORACLES.find((o) => o.name === 'app-channels-joined')!.check({ ...appInput, ...input } as OracleInput)
    const refused = classifyJoinError({ reason: 'unmatched topic' }, 1, 0)
    expect(check({ channels: [] })).toBeNull()
    expect(check({ channels: [{ topic: 'room:1', status: 'joined', reason: null, joinsReceived: 1, drops: 0, lastDrop: null }] })).toBeNull()
    expect(check({ channels: undefined })).toBeNull()
    expect(check({ after: at('reconnecting'), channels: [{ topic: 'room:1', status: 'detached', reason: null, joinsReceived: 1, drops: 0, lastDrop: null }] })).toBeNull()
    expect(
      check({
        channels: [
          { topic: 'room:1', status: 'joined', reason: null, joinsReceived: 1, drops: 0, lastDrop: null },
          { topic: 'rom:1', status: 'dropped', reason: refused, joinsReceived: 1, drops: 1, lastDrop: refused },
          { topic: 'room:2', status: 'detached', reason: null, joinsReceived: 2, drops: 0, lastDrop: null },
          { topic: 'rom:3', status: 'joining', reason: null, joinsReceived: 1, drops: 5, lastDrop: refused },
          { topic: 'room:4', status: 'joining', reason: null, joinsReceived: 0, drops: 1, lastDrop: refused },
        ],
      }),
    ).toBe(
      `rom:1 is dropped, not rejoined until the host asks for it again (${describeReason(refused).replace(/, terminal$/, '')}); ` +
        'room:2 is still detached when the kit stopped waiting: the server received 2 joins of it on this socket, and none is joined yet; ' +
        `rom:3 is still joining when the kit stopped waiting: the server received 1 join of it on this socket, and none is joined yet; dropped 5 times during the run, the last ${describeReason(refused).replace(/, terminal$/, '')}; ` +
        `room:4 is still joining when the kit stopped waiting: the server received no join of it on this socket (its join never left: params that never settle?); dropped once during the run, the last ${describeReason(refused).replace(/, terminal$/, '')}`,
    )
    expect(describeReason(refused)).toMatch(/unmatched topic.*, terminal$/)
  })
  const cases: Record<string, [step: string, before: StepExpectation, after: StepExpectation, wasAccepted?: boolean, input?: OracleInput]> = {
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
    'app-channels-joined': ['join ok', at('joining'), at('connected'), false, { ...appInput, channels: [{ topic: 'rom:1', status: 'dropped', reason: null }] } as unknown as OracleInput],
    'unknown-supersede-probes': ['open', at('connecting'), at('joining'), true, unknownCause('open', null)],
  }
  it('judges every upgrade that leaves after a supersede whose cause is unknown by the on_conflict the server saw, until one is accepted', () => {
    const broken = (input: OracleInput) => LIFECYCLE_ORACLES.find((o) => o.name === 'unknown-supersede-probes')!.check(input)
    expect(broken(unknownCause('open', 'reject'))).toBeNull()
    const since = ", though a supersede's cause was unknown since step 3 (drop)"
    expect(broken(unknownCause('open', null))).toBe(`the upgrade answered 101 at open asked on_conflict=(absent), not reject${since}`)
    expect(broken(unknownCause('upgrade 409', 'supersede'))).toBe(`the upgrade answered 409 at upgrade 409 asked on_conflict=supersede, not reject${since}`)
    expect(broken(unknownCause('upgrade 403', null))).toEqual(expect.any(String))
    expect(broken(unknownCause('upgrade 503', null))).toBe(`the upgrade answered 503 at upgrade 503 asked on_conflict=(absent), not reject${since}`)
    // A second ambiguity read while this probe was out does not hide the first.
    const twice = unknownCause('upgrade 409', null)
    const again = { name: 'ambiguous supersede', stimulus: { type: 'await', what: 'ambiguous supersede' } as const, expect: twice.before }
    const twiceSteps = [...twice.path.steps.slice(0, -1), again, twice.step]
    expect(broken({ ...twice, path: { ...twice.path, steps: twiceSteps }, index: twiceSteps.length - 1 })).toBe(`the upgrade answered 409 at upgrade 409 asked on_conflict=(absent), not reject${since}`)
    // The record gone (historyLimit) is said so.
    expect(broken({ ...unknownCause('open', 'reject'), simulator: { upgrades: [] } } as unknown as OracleInput)).toBe('no upgrade of agent-a is recorded as answered at open (a simulator keeps only historyLimit upgrades)')
    // Not judged: an accepted upgrade in between ends the probing; so does a session that ended
    // superseded; the attempt whose upgrade was out when the cause became unknown left before it; a
    // replay with no server. A new session after one the host stopped (or that ended otherwise) is judged.
    expect(broken(unknownCause('upgrade 409', null, { between: 'open' }))).toBeNull()
    const restarted = unknownCause('open', null)
    const restartSteps = [
      ...restarted.path.steps.slice(0, 3),
      { name: 'host disconnect', stimulus: { type: 'await', what: 'host disconnect' } as const, expect: { ...restarted.before, state: 'stopped' as const, generation: 2 } },
      { name: 'host connect', stimulus: { type: 'await', what: 'host connect' } as const, expect: { ...restarted.before, epoch: 2 } },
      restarted.step,
    ]
    const restartInput = { ...restarted, path: { ...restarted.path, steps: restartSteps }, index: restartSteps.length - 1, before: { ...restarted.before, epoch: 2 } }
    expect(broken(restartInput)).toBe(`the upgrade answered 101 at open asked on_conflict=(absent), not reject${since}`)
    const endedSteps = restartSteps.map((s) => (s.name === 'host disconnect' ? { ...s, name: 'late supersede', expect: { ...s.expect, state: 'terminated' as const, reason: 'superseded' } } : s))
    expect(broken({ ...restartInput, path: { ...restartInput.path, steps: endedSteps } })).toBeNull()
    expect(broken(unknownCause('open', null, { answeredGeneration: 2 }))).toBeNull()
    expect(broken({ ...unknownCause('open', null), simulator: undefined } as unknown as OracleInput)).toBeNull()
    // A 503 of the upgrade the supersede was held on leaves its cause unknown too (the platform's 503 comes after it superseded); a 429 does not.
    const viaStatus = (name: string) => {
      const input = unknownCause('open', null)
      return broken({ ...input, path: { ...input.path, steps: input.path.steps.map((s) => (s.name === 'drop' ? { ...s, name } : s)) } })
    }
    expect(viaStatus('upgrade 503')).toBe("the upgrade answered 101 at open asked on_conflict=(absent), not reject, though a supersede's cause was unknown since step 3 (upgrade 503)")
    expect(viaStatus('upgrade 429')).toBeNull()
    // So does the host's disconnect() abandoning it unanswered.
    expect(viaStatus('host disconnect')).toBe("the upgrade answered 101 at open asked on_conflict=(absent), not reject, though a supersede's cause was unknown since step 3 (host disconnect)")
    // And a drop after a supersede that was not held is no unknown cause.
    const plain = unknownCause('open', null)
    const steps = plain.path.steps.map((s) => (s.name === 'stale supersede' ? { ...s, name: 'control signal' } : s))
    expect(broken({ ...plain, path: { ...plain.path, steps } })).toBeNull()
  })
  it('judges a supersede held while the next upgrade is out by that upgrade\'s answer: a 4xx ends the session, a drop or a 503 reconnects', () => {
    const at2 = (state: string, reason: string | null = null) => ({ state: state as StepExpectation['state'], chartState: state, reason, code: null, generation: 2, epoch: 1 })
    const held = { name: 'stale supersede', stimulus: { type: 'await', what: 'stale supersede' } as const, expect: at2('connecting') }
    const check = (name: string, after: StepExpectation) => {
      const step = { name, stimulus: { type: 'await', what: name } as const, expect: after }
      const input = { path: { name, steps: [held, step] }, index: 1, step, before: at2('connecting'), after, wasConnected: true, wasAccepted: true } as OracleInput
      return LIFECYCLE_ORACLES.map((o) => [o.name, o.check(input)] as const).filter(([, broken]) => broken !== null)
    }
    expect(check('upgrade 429', at2('terminated', 'superseded'))).toEqual([])
    expect(check('upgrade 429', at2('reconnecting', 'rejected'))).toEqual([['supersede-is-terminal', 'upgrade 429 after a supersede held on the upgrade led to reconnecting (rejected)']])
    // The platform's 503 comes after it superseded: the supersede's cause is unknown, the link reconnects.
    expect(check('upgrade 503', at2('reconnecting', 'rejected'))).toEqual([])
    expect(check('upgrade 503', at2('terminated', 'superseded'))).toEqual([['normal-close-reconnects', 'upgrade 503 from connecting led to terminated (superseded)']])
    expect(check('upgrade 409', at2('reconnecting', 'rejected'))).toEqual([['supersede-is-terminal', 'upgrade 409 after a supersede held on the upgrade led to reconnecting (rejected)']])
    expect(check('drop', at2('reconnecting', 'dropped'))).toEqual([])
    expect(check('drop', at2('terminated', 'superseded'))).toEqual([['normal-close-reconnects', 'drop from connecting led to terminated (superseded)']])
    expect(check('connect timeout', at2('terminated', 'superseded'))).toEqual([['normal-close-reconnects', 'connect timeout from connecting led to terminated (superseded)']])
    expect(check('open', at2('terminated', 'superseded'))).toEqual([['supersede-is-terminal', 'the upgrade a supersede was held on was accepted, and it led to terminated (superseded)']])
  })

  it('covers every oracle', () => {
    expect(Object.keys(cases).sort()).toEqual(LIFECYCLE_ORACLES.map((o) => o.name).sort())
  })
  for (const oracle of LIFECYCLE_ORACLES) {
    it(oracle.name, () => {
      const [name, before, after, wasAccepted, given] = cases[oracle.name]!
      const step = { name, stimulus: { type: 'await', what: name } as const, expect: after }
      const input = given ?? ({ path: { name, steps: [step] }, index: 0, step, before, after, wasConnected: false, wasAccepted: wasAccepted ?? false } as OracleInput)
      expect(oracle.check(input)).toEqual(expect.any(String))
      // And holds on the same step when the link does what the rule says (no oracle fires on everything).
      expect(LIFECYCLE_ORACLES.some((o) => o.check({ ...input, after: before, before } as OracleInput) === null)).toBe(true)
    })
  }
})
