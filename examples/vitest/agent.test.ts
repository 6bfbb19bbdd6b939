/**
 * Testing an agent's connection with vitest against the platform simulator that ships with
 * phoenix-link (`phoenix-link/server`: a Phoenix Channels server on 127.0.0.1, no platform
 * needed). One simulator for the file; a fresh link, and a fresh agent id, per test; every test
 * awaits what it started.
 *
 * It shows the two rules a host most often gets wrong with other clients: a close with code
 * 1000 is a normal close (the link reconnects and rejoins its channels), and a supersede (a newer
 * instance of the agent took its key) ends the session for good.
 *
 * Run: `npx vitest run` (dependencies: phoenix-link, vitest, and prom-client for phoenix-link/server).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createLink, isAgentDisconnectedError, type Link } from 'phoenix-link'
import { startSimulator, type PlatformSimulator } from 'phoenix-link/server'

let sim: PlatformSimulator
const links: Link[] = []
let agents = 0

beforeAll(async () => {
  // 'any': any agent id with a non-empty key may connect; pass { id: key } to check keys.
  sim = await startSimulator({ agents: 'any' })
})

afterEach(async () => {
  // disconnect() resolves once the socket is closed, from any state, and never rejects.
  await Promise.all(links.splice(0).map((link) => link.disconnect()))
})

afterAll(async () => {
  await sim.stop()
})

/** A link for a new agent id (so no test sees another's sockets), with quick retries for tests. */
function newLink(): Link {
  const link = createLink({
    url: sim.url,
    agentId: `agent-${++agents}`,
    apiKey: 'test-key',
    policy: { reconnect: { initialDelayMs: 20 } }, // the first retry within 20 ms instead of 500
  })
  links.push(link)
  return link
}

describe('the agent link against the simulator', () => {
  it('reconnects after the platform closes the socket with 1000, and rejoins its channel', async () => {
    const link = newLink()
    const room = link.channel('room:lobby')
    await link.connect()

    const disconnected = link.once('disconnected')
    const reconnected = link.once('reconnected')
    sim.close({ agent: link.agentId }, 1000)

    expect(await disconnected).toMatchObject({ outcome: 'reconnect', reason: { kind: 'closed', closeCode: 1000 } })
    await reconnected
    expect(link.state).toBe('connected')
    expect(sim.accepted(link.agentId)).toHaveLength(2) // the platform saw a second connection

    // The channel is joined again on the new socket: a push from the platform arrives.
    await room.joined() // at once when joined, else at its next join
    const message = new Promise((resolve) => room.on('new_msg', resolve))
    expect(sim.push({ agent: link.agentId }, 'room:lobby', 'new_msg', { body: 'hi' })).toBe(1)
    expect(await message).toEqual({ body: 'hi' })
  })

  it('a supersede ends the session for good: runForever() rejects, and no reconnect follows', async () => {
    const link = newLink()
    await link.connect()
    const running = link.runForever()

    sim.supersede(link.agentId)

    const error: unknown = await running.catch((e: unknown) => e)
    expect(isAgentDisconnectedError(error) && error.reason.kind).toBe('superseded')
    expect(link.state).toBe('terminated')
    expect(sim.live(link.agentId)).toHaveLength(0)
    expect(sim.accepted(link.agentId)).toHaveLength(1)
  })
})
