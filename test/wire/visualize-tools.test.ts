/**
 * The Node-side tools around the charts, given what a host or a shell may hand them: the replay's
 * trace file (a pipe, a device, a file changed after it was checked), the visualizer's options and
 * a page that stops reading its feed, trace labels, and a prom-client registry that already holds
 * one of the link metrics' names. Each is refused with an error naming it, or served as checked;
 * none hangs, crashes or half-registers.
 */
import { spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Counter, Registry } from 'prom-client'
import { afterEach, describe, expect, it } from 'vitest'
import { createLink } from '../../src/index.js'
import { linkMetrics } from '../../src/node/metrics.js'
import { openTraceFile, startVisualizer, traceLink, traceToFile, type TraceRecord } from '../../src/node/visualize/index.js'
import { startSimulator } from '../../src/node/server/index.js'
import { pageSources, readTraceFile } from '../../src/node/visualize/server.js'
import { until } from '../support/until.js'
import { createOutput } from '../../src/node/cli/output.js'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})
const scratch = () => {
  const dir = mkdtempSync(join(tmpdir(), 'phoenix-link-tools-'))
  dirs.push(dir)
  return dir
}
/** A link that never connects (nothing goes on the wire): what the tools follow. */
const idleLink = (agentId = 'agent-1') => createLink({ url: 'ws://127.0.0.1:9/socket', agentId, apiKey: 'key-1' })

describe('the replay reads a trace file once, as a regular file', () => {
  it('a named pipe, a device and a directory are refused at once; a file over the limit is refused while read', () => {
    const dir = scratch()
    const fifo = join(dir, 'trace.fifo')
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0)
    const started = performance.now()
    // No writer ever opens the pipe: a blocking open would wait for ever.
    expect(() => readTraceFile(fifo)).toThrow(/not a regular file \(a pipe, a device or a directory\)/)
    expect(() => readTraceFile('/dev/zero')).toThrow(/not a regular file/)
    expect(() => readTraceFile(dir)).toThrow(/not a regular file/)
    expect(performance.now() - started).toBeLessThan(1_000)
    expect(() => readTraceFile(join(dir, 'missing.jsonl'))).toThrow(/ENOENT/)
    const small = join(dir, 'small.jsonl')
    writeFileSync(small, 'héllo\n')
    expect(readTraceFile(small)).toBe('héllo\n')
  })

  it('the page gets the text read at start, whatever happens to the file after', async () => {
    const dir = scratch()
    const file = join(dir, 'trace.jsonl')
    writeFileSync(file, '{"first":true}\n')
    const viz = await startVisualizer({ trace: file })
    const given = await startVisualizer({ traceText: '{"given":true}\n' })
    try {
      writeFileSync(file, '{"changed":true}\n')
      expect(await (await fetch(`${viz.url}trace.jsonl`)).text()).toBe('{"first":true}\n')
      rmSync(file)
      expect(await (await fetch(`${viz.url}trace.jsonl`)).text()).toBe('{"first":true}\n')
      expect(await (await fetch(`${given.url}trace.jsonl`)).text()).toBe('{"given":true}\n')
    } finally {
      await viz.close()
      await given.close()
    }
    await expect(startVisualizer({ trace: join(dir, 'gone.jsonl') })).rejects.toThrow(/ENOENT/)
  })
})

describe('startVisualizer', () => {
  it('refuses a host that is not loopback, a port out of range and a wait of no whole timeout, naming each', async () => {
    for (const host of ['0.0.0.0', '::', '192.0.2.1', 'example.com', '127.256.0.1', '127.0.0.1.example.com', '::ffff:192.0.2.1']) {
      await expect(startVisualizer({ host }), host).rejects.toThrow(new RangeError(`startVisualizer host must be a loopback address (127.0.0.1, ::1, localhost): the feed is for this machine only; got ${JSON.stringify(host)}`))
    }
    for (const port of ['abc', -1, 65_536, 1.5]) {
      await expect(startVisualizer({ port: port as number }), String(port)).rejects.toThrow(/startVisualizer port must be a whole number in \[0, 65535\]/)
    }
    await expect(startVisualizer({ trace: 7 as unknown as string })).rejects.toThrow(new TypeError('startVisualizer trace must be a string, got number'))
    await expect(startVisualizer({ port: '0' as unknown as number })).rejects.toThrow(new RangeError('startVisualizer port must be a whole number in [0, 65535], got "0"'))
    await expect(startVisualizer({ hots: 'x' } as never)).rejects.toThrow(new TypeError('startVisualizer: unknown option "hots" (known: port, host, trace, traceText)'))
    const viz = await startVisualizer({ host: '::1' })
    try {
      expect(viz.url).toMatch(/^http:\/\/\[::1\]:\d+\/$/)
      for (const timeoutMs of [Number.NaN, 3e9, -1, 'x']) {
        await expect(viz.waitForViewer(timeoutMs as number), String(timeoutMs)).rejects.toThrow(/waitForViewer timeoutMs must be a whole number of milliseconds/)
      }
    } finally {
      await viz.close()
    }
  })

  it('an IPv4-mapped loopback host is loopback: listened on, and its page served under that Host', async () => {
    const viz = await startVisualizer({ host: '::ffff:127.0.0.1' })
    try {
      expect(viz.url).toMatch(/^http:\/\/\[::ffff:127\.0\.0\.1\]:\d+\/$/)
      const res = await fetch(viz.url)
      expect(res.status).toBe(200)
      await res.arrayBuffer()
    } finally {
      await viz.close()
    }
  })

  it('a page reconnecting with Last-Event-ID is sent only the records after it; [::1] is listened on as ::1', async () => {
    const viz = await startVisualizer({ host: '[::1]' })
    try {
      expect(viz.url).toMatch(/^http:\/\/\[::1\]:\d+\/$/)
      for (let seq = 1; seq <= 3; seq++) viz.publish({ link: 'A', seq, at: 0, event: 'e', actor: 'connection', state: 'idle', charts: { connection: 'idle', reconnect: null, control: null, channels: {} }, lastReason: null })
      const read = (lastEventId: string | null) =>
        new Promise<string>((resolve, reject) => {
          let text = ''
          const req = request(`${viz.url}events`, { headers: lastEventId === null ? {} : { 'last-event-id': lastEventId } }, (res) => {
            res.setEncoding('utf8')
            res.on('data', (chunk: string) => {
              text += chunk
              // The kept records come in one write each; the last one ends the read.
              if (text.includes('"seq":3')) {
                req.destroy()
                resolve(text)
              }
            })
          })
          req.on('error', (error) => (text === '' ? reject(error) : undefined))
          req.end()
        })
      const first = await read(null)
      // Every connection starts with the run's token; each id is `<run>.<n>`.
      const run = /^retry: 1000\nevent: run\ndata: ([0-9a-f]{8})\n\n/.exec(first)?.[1]
      expect(run).toBeDefined()
      const ids = (text: string) => [...text.matchAll(/^id: ([0-9a-f]{8})\.(\d+)$/gm)].map((m) => (m[1] === run ? Number(m[2]) : `other run ${m[1]}`))
      expect(ids(first)).toEqual([1, 2, 3])
      expect(ids(await read(`${run}.2`))).toEqual([3])
      expect(ids(await read('not a number'))).toEqual([1, 2, 3])
      // An id of another run (the page of a command started before on this port) is not ours: everything kept.
      expect(ids(await read('00000000.2'))).toEqual([1, 2, 3])
      expect(ids(await read('2'))).toEqual([1, 2, 3])
    } finally {
      await viz.close()
    }
  })

  it("a page's Last-Event-ID from the previous server on the same port gets the new run's records, each server its own run", async () => {
    const first = await startVisualizer()
    const port = Number(new URL(first.url).port)
    const record = (seq: number) => ({ link: 'A', seq, at: 0, event: 'e', actor: 'connection', state: 'idle', charts: { connection: 'idle', reconnect: null, control: null, channels: {} }, lastReason: null }) as TraceRecord
    const read = (url: string, lastEventId: string | null, records: number) =>
      new Promise<string>((resolve, reject) => {
        let text = ''
        const req = request(`${url}events`, { headers: lastEventId === null ? {} : { 'last-event-id': lastEventId } }, (res) => {
          res.setEncoding('utf8')
          res.on('data', (chunk: string) => {
            text += chunk
            if ((text.match(/^id: /gm) ?? []).length === records) {
              req.destroy()
              resolve(text)
            }
          })
        })
        req.on('error', (error) => (text === '' ? reject(error) : undefined))
        req.end()
      })
    let lastId: string
    let firstRun: string
    try {
      for (let seq = 1; seq <= 6; seq++) first.publish(record(seq))
      const text = await read(first.url, null, 6)
      lastId = [...text.matchAll(/^id: (\S+)$/gm)].at(-1)![1]!
      firstRun = /^data: (\S+)$/m.exec(text)![1]!
    } finally {
      await first.close()
    }
    const second = await startVisualizer({ port })
    try {
      for (let seq = 1; seq <= 2; seq++) second.publish(record(seq))
      const text = await read(second.url, lastId, 2)
      const secondRun = /^data: (\S+)$/m.exec(text)![1]!
      expect(secondRun).not.toBe(firstRun)
      expect([...text.matchAll(/^id: (\S+)$/gm)].map((m) => m[1])).toEqual([`${secondRun}.1`, `${secondRun}.2`])
    } finally {
      await second.close()
    }
  })

  it('a page that stops reading its live feed is cut off past the buffer limit, not buffered without bound', async () => {
    const viz = await startVisualizer()
    const socket = connect(Number(new URL(viz.url).port), '127.0.0.1')
    try {
      await once(socket, 'connect')
      socket.pause() // the page reads nothing, ever
      socket.write(`GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`)
      await until(() => viz.viewers() === 1, 5_000, 'the page to follow the feed')
      const record = (seq: number) => ({ link: 'A', seq, at: 0, event: 'x'.repeat(1 << 20), actor: 'connection', state: 'idle', charts: { connection: 'idle', reconnect: null, control: null, channels: {} }, lastReason: null }) as TraceRecord
      let published = 0
      // 64 MiB at most: the kernel's socket buffers take a few, the limit 8 more.
      while (viz.viewers() > 0 && published < 64) viz.publish(record(++published))
      expect(viz.viewers()).toBe(0)
      expect(published).toBeLessThan(64)
    } finally {
      socket.destroy()
      await viz.close()
    }
  })
})

describe('the page build', () => {
  it("a checkout's page is stale when any module it is built from changed: the trace checker and what it imports too, not only the page's folders", () => {
    const root = join(fileURLToPath(new URL('../..', import.meta.url)))
    const sources = pageSources(root).map((file) => relative(root, file).split(sep).join('/'))
    for (const file of ['visualizer/main.ts', 'visualizer/index.html', 'visualizer/style.css', 'src/node/visualize/parse-trace.ts', 'src/json-depth.ts', 'src/node/model/visual.ts', 'src/node/model/labels.ts', 'machines/status.ts', 'machines/connection.ts', 'src/reasons.ts']) {
      expect(sources, file).toContain(file)
    }
    // Only sources that exist, and nothing of the server side the page never bundles.
    for (const file of sources) expect(existsSync(join(root, file)), file).toBe(true)
    expect(sources.filter((file) => file.startsWith('src/node/server/') || file.startsWith('src/node/cli'))).toEqual([])
  })
})

describe('trace files', () => {
  it("the records of every link of one trace file count their time from the file's opening, not each from its own follow", async () => {
    const dir = scratch()
    const sim = await startSimulator({ agents: { 'agent-1': 'key-1' } })
    const a = createLink({ url: sim.url, agentId: 'agent-1', apiKey: 'key-1' })
    const b = idleLink('agent-2')
    const path = join(dir, 'two.jsonl')
    try {
      const file = openTraceFile(path)
      // Read after the file opened (its own origin, read inside openTraceFile, is earlier still):
      // an opening that takes milliseconds, as under load, must not make B's first record look early.
      const opened = performance.now()
      file.follow(a, 'A')
      // A connect takes some milliseconds: B is followed that much later than the file opened.
      await a.connect()
      const followedB = performance.now()
      file.follow(b, 'B')
      await a.disconnect()
      await file.close()
      const records = readFileSync(path, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as TraceRecord)
      const firstOfB = records.find((r) => r.link === 'B')!
      expect(firstOfB.seq).toBe(1)
      expect(Math.round(followedB - opened)).toBeGreaterThan(0)
      expect(firstOfB.at).toBeGreaterThanOrEqual(Math.floor(followedB - opened) - 1)
      // In the file's order, time never goes back.
      const times = records.map((r) => r.at)
      expect(times).toEqual([...times].sort((x, y) => x - y))
    } finally {
      await a.disconnect()
      await sim.stop()
    }
    expect(() => traceLink(b, 'B', () => {}, Number.NaN)).toThrow(new TypeError('a trace origin must be a finite performance.now() reading in milliseconds, got NaN'))
    expect(() => traceLink(b, 'B', () => {}, '1' as unknown as number)).toThrow(/got string/)
  })

  it('a label must be a non-empty string; two links under one label are refused; follow after close says so; close twice is once', async () => {
    const dir = scratch()
    const a = idleLink('agent-1')
    const b = idleLink('agent-2')
    expect(() => traceToFile(a, '', join(dir, 'x.jsonl'))).toThrow(new TypeError('a trace label must be a non-empty string (it names the link in every record), got an empty string'))
    expect(() => traceToFile(a, 42 as unknown as string, join(dir, 'y.jsonl'))).toThrow(/got number/)
    // Checked before the file is opened: an earlier trace at that path is left as it was.
    const earlier = join(dir, 'earlier.jsonl')
    writeFileSync(earlier, '{"kept":true}\n')
    expect(() => traceToFile(a, '', earlier)).toThrow(TypeError)
    expect(readFileSync(earlier, 'utf8')).toBe('{"kept":true}\n')
    const path = join(dir, 'trace.jsonl')
    const file = openTraceFile(path)
    const stopA = file.follow(a, 'A')
    expect(() => file.follow(b, 'A')).toThrow(new RangeError(`a link labelled "A" is already followed into ${path}: give each link its own label`))
    file.follow(b, 'B')
    // A label whose link stopped being followed may be used again.
    stopA()
    file.follow(a, 'A')
    await Promise.all([file.close(), file.close()])
    expect(() => file.follow(a, 'C')).toThrow(`the trace file ${path} is closed: open another to follow more links`)
    const links = readFileSync(path, 'utf8').trim().split('\n').map((l) => (JSON.parse(l) as TraceRecord).link)
    expect(links).toEqual(['A', 'B', 'A'])
    await a.disconnect()
    await b.disconnect()
  })

  it.skipIf(!existsSync('/dev/full'))('close() of a trace whose writes fail (a full disk) resolves only once onError was told, so no caller reports it written', async () => {
    const errors: string[] = []
    const file = openTraceFile('/dev/full', (error) => errors.push(error.message))
    const link = createLink({ url: 'ws://127.0.0.1:9/socket', agentId: 'agent-1', apiKey: 'key-1' })
    // Following writes the link's first record; close() ends the file while that write is in flight.
    file.follow(link, 'A')
    await file.close()
    expect(errors).toEqual([expect.stringContaining('ENOSPC')])
    await link.disconnect()
  })
})

describe('linkMetrics', () => {
  it('a registry that already holds one of its names gets none of them (the error names it and the fix); bad options are refused', async () => {
    const link = idleLink()
    const registry = new Registry()
    new Counter({ name: 'phoenix_link_link_reconnects_total', help: 'the host’s own', registers: [registry] })
    expect(() => linkMetrics(link, { registry })).toThrow(
      new Error('the metrics registry already holds phoenix_link_link_reconnects_total, not as a link\'s metrics: give linkMetrics another registry or prefix'),
    )
    expect(registry.getSingleMetric('phoenix_link_link_state')).toBeUndefined()
    // Another prefix works in the same registry, and the first failure left nothing to trip on.
    linkMetrics(link, { registry, prefix: 'agent_' }).stop()
    expect(registry.getSingleMetric('agent_link_state')).toBeDefined()
    for (const [options, message] of [
      [{ label: '' }, /label must be a non-empty string/],
      [{ label: {} }, /label must be a non-empty string .*got object/],
      [{ prefix: true }, /prefix must be a string, got boolean/],
      [{ now: 'x' }, /now must be a function/],
      [{ registry: {} }, /registry must be a prom-client Registry/],
    ] as const) {
      expect(() => linkMetrics(link, options as never), JSON.stringify(options)).toThrow(message)
    }
    await link.disconnect()
  })
})

describe('the command line prints what comes from outside without terminal escapes', () => {
  it('a human line shows control characters as \\xNN; JSON lines escape them already', () => {
    const lines: string[] = []
    createOutput(false, (l) => lines.push(l)).event('visualizer', 'replay', {}, 'links \u001b]0;pwned\u0007\u001b[2J A\tB\n     7 ms  visualizer forged')
    createOutput(true, (l) => lines.push(l)).event('visualizer', 'replay', { links: ['\u001b[2J'] }, '')
    // No line of its own either: a line break from outside is shown, not printed.
    expect(lines[0]).toMatch(/links \\x1b\]0;pwned\\x07\\x1b\[2J A\tB\\x0a     7 ms  visualizer forged$/)
    expect(lines[1]).toContain('"links":["\\u001b[2J"]')
    expect(lines.join('')).not.toContain('\u001b')
  })
})
