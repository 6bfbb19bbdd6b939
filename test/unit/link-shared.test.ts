/**
 * Links share one provided connection chart: a per-link provide() copied the whole chart
 * definition (about 75 KiB of heap per link, bench/ idle memory). Each link's actors still
 * reach their own adapter, through the link's actor system.
 */
import { describe, expect, it } from 'vitest'
import { createLink } from '../../src/link.js'

describe('links share one chart definition', () => {
  it('two links run the same machine logic, in separate actor systems', async () => {
    const a = createLink({ url: 'ws://127.0.0.1:9/socket', agentId: 'a', apiKey: 'key-a' })
    const b = createLink({ url: 'ws://127.0.0.1:9/socket', agentId: 'b', apiKey: 'key-b' })
    try {
      expect(a.actor.logic).toBe(b.actor.logic)
      expect(a.actor.system).not.toBe(b.actor.system)
    } finally {
      await a.disconnect()
      await b.disconnect()
    }
  })
})
