/**
 * A week in the life, on the real wire: what only shows after days of one agent's connection.
 * Finished channels retain nothing (measured in a process of its own, with --expose-gc).
 */
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = fileURLToPath(new URL('../..', import.meta.url))

/** Runs test/support/channel-cycles.ts for `mode` and resolves with the data heap it kept per cycle, in bytes. */
function heapPerCycle(mode: 'left' | 'refused' | 'reconnect', cycles: number): Promise<number> {
  const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', 'test/support/channel-cycles.ts', mode, String(cycles)], { cwd: root })
  let out = ''
  let err = ''
  child.stdout.on('data', (c: Buffer) => (out += c.toString()))
  child.stderr.on('data', (c: Buffer) => (err += c.toString()))
  return new Promise((resolve, reject) => {
    child.once('close', (code) => {
      if (code !== 0) return reject(new Error(`channel-cycles ${mode} exited ${code}: ${err.slice(-800)}`))
      resolve((JSON.parse(out.trim().split('\n').at(-1)!) as { bytesPerCycle: number }).bytesPerCycle)
    })
  })
}

describe('finished channels retain nothing', () => {
  // Before the fix a joined-and-left channel kept ~850 bytes and a refused one ~700, for ever
  // (XState's per-event-type transition cache met a fresh actor id per channel). Measurement
  // noise at 4,000 cycles is about +-100 bytes per cycle.
  it('4,000 channels joined and left, 4,000 refused, and 4,000 joined and left across 16 reconnects keep under 200 bytes each', async () => {
    const [left, refused, reconnect] = await Promise.all([heapPerCycle('left', 4000), heapPerCycle('refused', 4000), heapPerCycle('reconnect', 4000)])
    expect({ left, refused, reconnect }).toEqual({ left: expect.any(Number), refused: expect.any(Number), reconnect: expect.any(Number) })
    expect(Math.abs(left)).toBeLessThan(200)
    expect(Math.abs(refused)).toBeLessThan(200)
    expect(Math.abs(reconnect)).toBeLessThan(200)
  }, 60_000)
})
