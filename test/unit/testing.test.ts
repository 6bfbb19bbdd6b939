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
  type PathKit,
} from '../../src/node/testing/index.js'

let kit: PathKit
beforeAll(async () => {
  kit = await startPathKit({ agentPrefix: 'kit-unit-' })
})
afterAll(async () => {
  await kit.stop()
})

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
    const failure = await kit
      .run(path, (options) => {
        const link = createLink(options)
        // The bug this library exists for: a close 1000 read as "stop".
        link.on('disconnected', (e) => e.reason.kind === 'closed' && void link.disconnect())
        return link
      })
      .catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(PathFailure)
    expect(failure).toMatchObject({ path: path.name, step: 4, stimulus: 'backoff chosen' })
    expect((failure as Error).message).toMatch(/link\.state (stopping|stopped), the chart says reconnecting/)
  })

  it('checks the host’s own oracle beside the library’s, with the host the factory returned', async () => {
    const path = pathFrom('host connect > open > join ok > supersede', 4)
    const seen: string[] = []
    const failure = await kit
      .run(path, (options) => ({ link: createLink(options), label: 'mine' }), {
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
      .catch((error: unknown) => error)
    expect(seen).toEqual(['mine:host connect', 'mine:open', 'mine:join ok', 'mine:supersede'])
    expect(failure).toMatchObject({ name: 'PathFailure', step: 3, stimulus: 'supersede', detail: 'host-rule: superseded' })
  })

  it('rejects a factory that returns no link, and passes a correct host with a report of what the server saw', async () => {
    const path = pathFrom('host connect > open > join ok > close 1000 > backoff chosen', 5)
    await expect(kit.run(path, () => ({}) as never)).rejects.toThrow(/returned no link/)
    const report = await kit.run(path, (options) => createLink(options))
    expect(report).toMatchObject({ path: path.name, sockets: 1 })
    expect(report.agentId).toMatch(/^kit-unit-\d+$/)
    expect(report.states.has('connection.session.online.attached.live.connected')).toBe(true)
  })
})
