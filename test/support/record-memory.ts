/**
 * Heap a simulator's frame record keeps of long frames, for test/wire/simulator-http.test.ts: run
 * in its own process with --expose-gc (`node --expose-gc --import tsx test/support/record-memory.ts`).
 * A raw client sends 60 frames of about 1 MB each on an unjoined topic: 20 with a long payload
 * field, 20 with a long topic, 20 with 100,000 short payload fields. Prints one JSON line
 * `{ sentMB, keptMB, recorded }`: the heap kept once the record holds them all, after GC.
 */
import WebSocket from 'ws'
import { startSimulator } from '../../src/node/server/index.js'

const gc = (globalThis as { gc?: () => void }).gc!
const sim = await startSimulator({ agents: 'any', idleTimeoutMs: null })
const ws = new WebSocket(`${sim.url}/websocket?agent_id=mem&vsn=2.0.0`, { headers: { 'x-api-key': 'k' } })
try {
  await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject))
  const many = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`k${i}`, i]))
  gc()
  const before = process.memoryUsage().heapUsed
  let sent = 0
  for (let i = 0; i < 60; i++) {
    const long = `${'x'.repeat(1_000_000)}${i}`
    const frame = i < 20 ? ['1', String(i), 'room:none', 'note', { body: long }] : i < 40 ? ['1', String(i), `room:${long}`, 'note', {}] : ['1', String(i), 'room:none', 'note', many]
    const text = JSON.stringify(frame)
    sent += text.length
    ws.send(text)
  }
  const socket = () => sim.accepted('mem')[0]!
  await sim.waitFor(() => socket().frames.filter((f) => f.dir === 'in').length >= 60, { timeoutMs: 30_000, what: 'the 60 frames recorded' })
  gc()
  gc()
  const kept = process.memoryUsage().heapUsed - before
  console.log(JSON.stringify({ sentMB: sent / 1e6, keptMB: kept / 1e6, recorded: socket().frames.length }))
} finally {
  ws.terminate()
  await sim.stop()
}
