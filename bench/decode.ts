/**
 * Frame decoding, the one step phoenix-link adds to every inbound frame: its validating
 * decodeTextFrame (src/protocol.ts: arity, element types, reply shape, size limit) against
 * phoenix.js's own Serializer.decode (assets/js/phoenix/serializer.js, JSON.parse and
 * destructure, no checks), on the same small push frame. Measured with tinybench.
 *
 * Run alone: `npm run bench -- decode`.
 */
import { Bench } from 'tinybench'
import { Serializer } from 'phoenix'
import { decodeTextFrame } from '../src/protocol.js'
import { row, printIfMain, type Row } from './common.js'

export async function run(): Promise<Row[]> {
  const text = JSON.stringify(['3', null, 'room:bench', 'tick', { n: 1, text: 'a small push' }])
  let sink: unknown = null
  const bench = new Bench({ time: 1_000, warmupTime: 200 })
  bench
    .add('phoenix-link decodeTextFrame', () => {
      sink = decodeTextFrame(text, 8 * 1024 * 1024)
    })
    .add('phoenix Serializer.decode', () => {
      Serializer.decode(text, (decoded: unknown) => {
        sink = decoded
      })
    })
  await bench.run()
  if (sink === null) throw new Error('nothing decoded')
  const opsPerSecond = (name: string) => {
    const result = bench.tasks.find((task) => task.name === name)?.result
    if (!result || result.state !== 'completed') throw new Error(`${name} did not complete: ${result?.state ?? 'missing'}`)
    return result.throughput.mean
  }
  return [
    row('frame decode', 'small push frame, decodes/s (tinybench)', 'ops/s', opsPerSecond('phoenix-link decodeTextFrame'), opsPerSecond('phoenix Serializer.decode'), null),
  ]
}

await printIfMain(import.meta.url, run)
