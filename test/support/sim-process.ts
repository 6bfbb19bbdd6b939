/**
 * A simulator in its own process, for tests that kill it (SIGKILL: no close frames, the kernel
 * ends its sockets) and start it again on the same port. Prints `listening <port>` on stdout;
 * answers IPC `{ cmd: 'live' }` with the open sockets and distinct agents.
 *
 * Usage: `node --import tsx test/support/sim-process.ts [port]`.
 */
import { startSimulator } from '../../src/node/server/index.js'

const sim = await startSimulator({ agents: 'any', port: Number(process.argv[2] ?? 0), recordLimit: 0 })
process.on('message', (message: { cmd: string; id: number }) => {
  if (message.cmd === 'live') {
    const live = sim.live()
    process.send!({ id: message.id, live: live.length, agents: new Set(live.map((c) => c.agentId)).size })
  }
})
process.stdout.write(`listening ${sim.port}\n`)
