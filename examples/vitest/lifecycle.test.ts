/**
 * Every generated lifecycle path of the connection chart, run against this project's own host
 * (host.ts) with phoenix-link/testing: a platform simulator on 127.0.0.1, the chart's delays on a
 * simulated clock, and after each step the link where the chart says, every lifecycle rule kept
 * (its app channel, room:lobby, joined at every step that leaves the link connected, among them),
 * and the host's own rule too (it shows itself online exactly when the link is connected, and it
 * has a terminal reason to alert on exactly when the link is terminated).
 *
 * Run: `npx vitest run lifecycle.test.ts` (dependencies: phoenix-link, vitest, and prom-client, which the
 * simulator behind phoenix-link/testing needs).
 */
import { afterAll, beforeAll, describe, it } from 'vitest'
import { LIFECYCLE_ORACLES, lifecyclePaths, reconnectPaths, startPathKit, type LifecycleOracle, type PathKit } from 'phoenix-link/testing'
import { createAgentHost, type AgentHost } from './host.js'

let kit: PathKit

beforeAll(async () => {
  kit = await startPathKit()
})

afterAll(async () => {
  await kit.stop()
})

/** The host's rule, checked after every step beside the library's own. */
const hostShowsTheLink: LifecycleOracle<AgentHost> = {
  name: 'host-shows-the-link',
  rule: 'The host is online exactly when the link is connected, and holds a terminal reason exactly when it is terminated.',
  check: ({ host, after }) => {
    if (host.online !== (after.state === 'connected')) return `host.online is ${host.online} in link state ${after.state}`
    if ((host.terminal !== null) !== (after.state === 'terminated')) return `host.terminal is ${host.terminal?.kind ?? null} in link state ${after.state}`
    return null
  },
}

// The generated paths, and the paths back to connected after each loss (where the channel is judged rejoined).
const paths = [...lifecyclePaths(), ...reconnectPaths()]

describe.concurrent(`${paths.length} lifecycle paths against the host`, () => {
  for (const path of paths) {
    it(path.name, async () => {
      await kit.run(path, (options) => createAgentHost(options), { oracles: [...LIFECYCLE_ORACLES, hostShowsTheLink] })
    })
  }
})
