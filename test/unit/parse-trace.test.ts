/**
 * Reading a trace back (phoenix-link/visualizer `parseTrace`, which the replay page runs): every
 * field checked, every state checked against the shipped charts, each bad file refused naming its
 * line, so a damaged trace or one from another version is never replayed wrong.
 */
import { describe, expect, it } from 'vitest'
import { parseTrace, shippedChartStates } from '../../src/node/visualize/index.js'

// What a host passes in Node: the shipped charts' states, from the public subpath.
const charts = shippedChartStates()
const good = {
  link: 'A',
  seq: 1,
  at: 0,
  event: 'socket.open',
  actor: 'connection',
  state: 'joining',
  charts: { connection: { session: { online: { attached: 'joining' } } }, reconnect: { up: { rapidness: 'young', stability: 'settling' } }, control: null, channels: { 'room:1': 'detached' } },
  lastReason: null,
}
const line = (patch: Record<string, unknown>) => JSON.stringify({ ...good, ...patch })

describe('parseTrace', () => {
  it('reads records as written, blank lines skipped; absent channels and lastReason read as none', () => {
    const { channels: _, ...noChannels } = good.charts
    const { lastReason: __, ...noReason } = good
    const records = parseTrace(`${line({})}\n\n${JSON.stringify({ ...noReason, seq: 2, charts: noChannels })}\n`, charts)
    expect(records.map((r) => r.seq)).toEqual([1, 2])
    expect(records[1]).toMatchObject({ lastReason: null, charts: { channels: {} } })
  })

  it('refuses each missing or mistyped field, naming the line and the field', () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ link: undefined }, 'line 2 is not a trace record: link must be a non-empty string, got nothing'],
      [{ link: 7 }, 'line 2 is not a trace record: link must be a non-empty string, got 7'],
      [{ seq: '1' }, 'line 2 is not a trace record: seq must be a whole number from 1, got "1"'],
      [{ seq: 1.5 }, 'line 2 is not a trace record: seq must be a whole number from 1, got 1.5'],
      [{ seq: 0 }, 'line 2 is not a trace record: seq must be a whole number from 1, got 0'],
      [{ at: null }, 'line 2 is not a trace record: at must be a number of milliseconds, got null'],
      [{ event: undefined }, 'line 2 is not a trace record: event must be a string, got nothing'],
      [{ actor: 1 }, 'line 2 is not a trace record: actor must be connection, reconnect, control or channel:<topic>, got 1'],
      [{ actor: 'nosuch' }, 'line 2 is not a trace record: actor must be connection, reconnect, control or channel:<topic>, got "nosuch"'],
      [{ state: 'online' }, 'line 2 is not a trace record: state must be one of idle, connecting, joining, connected, reconnecting, suspended, stopping, stopped, terminated, got "online"'],
      [{ charts: [] }, 'line 2 is not a trace record: charts must be an object, got []'],
      [{ charts: { connection: 'idle' } }, 'line 2 is not a trace record: charts.reconnect must be a state value or null, got nothing'],
      [{ charts: { ...good.charts, connection: { session: {} } } }, 'line 2 is not a trace record: charts.connection must be a state value, got {"session":{}}'],
      [{ charts: { ...good.charts, channels: { 'room:1': 3 } } }, 'line 2 is not a trace record: charts.channels must be an object of state values by topic, got {"room:1":3}'],
      [{ lastReason: 'closed' }, 'line 2 is not a trace record: lastReason must be a reason (an object whose kind is graceful, superseded, rejected, closed, dropped, timed-out, suppressed, other) or null, got "closed"'],
      [{ lastReason: { kind: 'bogus' } }, 'line 2 is not a trace record: lastReason must be a reason (an object whose kind is graceful, superseded, rejected, closed, dropped, timed-out, suppressed, other) or null, got {"kind":"bogus"}'],
    ]
    for (const [patch, message] of cases) expect(() => parseTrace(`${line({})}\n${line({ seq: 2, ...patch })}`, charts)).toThrow(new Error(message))
    // A number JSON cannot write back (1e400 reads as Infinity) is named as it is, not as null.
    expect(() => parseTrace(`${line({})}\n${line({ seq: 2 }).replace('"at":0', '"at":1e400')}`, charts)).toThrow(new Error('line 2 is not a trace record: at must be a number of milliseconds, got Infinity'))
    // A link's records count up; 1 again starts the label anew (a link followed again under it).
    expect(() => parseTrace([line({}), line({ seq: 3 }), line({ seq: 2 })].join('\n'), charts)).toThrow(
      new Error('line 3 is out of order: seq 2 of link "A" comes after its seq 3 (line 2); a link\'s records count up from 1 (lines moved or repeated)'),
    )
    expect(() => parseTrace([line({}), line({ seq: 2 }), line({ seq: 2 })].join('\n'), charts)).toThrow(/^line 3 is out of order/)
    expect(parseTrace([line({}), line({ seq: 2 }), line({ seq: 1, at: -5 }), line({ seq: 2 })].join('\n'), charts)).toHaveLength(4)
    // Two links interleave, each counting up on its own; a channel's step names its chart.
    expect(parseTrace([line({}), line({ link: 'B' }), line({ seq: 2, actor: 'channel:room:1' }), line({ link: 'B', seq: 3 })].join('\n'), charts)).toHaveLength(4)
    expect(() => parseTrace('{"seq": 1', charts)).toThrow(/^line 1 is not JSON/)
    expect(() => parseTrace('[1,2]', charts)).toThrow(/^line 1 is not a trace record \(expected an object/)
    expect(() => parseTrace('\n \n', charts)).toThrow(new Error('the trace has no records'))
  })

  it('refuses a state the shipped charts do not have (a trace of another version), naming chart and state', () => {
    // attached.connected: the connection chart's leaf before attached.live.connected.
    const old = line({ charts: { ...good.charts, connection: { session: { online: { attached: 'connected' } } } } })
    expect(() => parseTrace(old, charts)).toThrow(
      new Error('line 1: the connection chart has no state "session.online.attached.connected": a trace recorded by another version of phoenix-link cannot be replayed on these charts'),
    )
    expect(() => parseTrace(line({ charts: { ...good.charts, channels: { 'room:1': 'joinedd' } } }), charts)).toThrow(/the channel chart has no state "joinedd"/)
    // Without the charts, shapes only.
    expect(parseTrace(old)).toHaveLength(1)
    // The drawn chart's root node is no state a link is in.
    expect(() => parseTrace(line({ charts: { ...good.charts, connection: '(root)' } }), charts)).toThrow(/the connection chart has no state "\(root\)"/)
  })

  it('a record of another format (a later phoenix-link) is refused naming it; format 1 or none reads', () => {
    expect(parseTrace(`${line({ format: 1 })}\n${line({ seq: 2 })}`, charts)).toHaveLength(2)
    expect(() => parseTrace(`${line({ format: 1 })}\n${line({ format: 2 })}`, charts)).toThrow(
      new Error('line 2 is a trace record of format 2, written by another version of phoenix-link; this one reads format 1'),
    )
  })

  it('a record nested deeper than a written one can be (which the page could not show) is refused naming its line, not with a stack overflow', () => {
    const deep = `${'['.repeat(20_000)}1${']'.repeat(20_000)}`
    const text = `${line({})}\n${line({ link: '__DEEP__' }).replace('"__DEEP__"', deep)}`
    expect(() => parseTrace(text, charts)).toThrow(new Error('line 2 is not a trace record: it nests deeper than 64 levels'))
    // A reason is only checked for its kind: its depth is what the page stringifies.
    const reason = line({ lastReason: '__DEEP__' }).replace('"__DEEP__"', `${'{"kind":"closed","x":'.repeat(100)}1${'}'.repeat(100)}`)
    expect(() => parseTrace(reason, charts)).toThrow(new Error('line 1 is not a trace record: it nests deeper than 64 levels'))
    expect(parseTrace(line({ lastReason: { kind: 'closed', closeCode: 1000, nested: { a: [1, { b: 2 }] } } }), charts)).toHaveLength(1)
  })
})
