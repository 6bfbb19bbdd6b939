/**
 * Every chart's context stays an object with fast properties in V8. XState copies the whole
 * context on every assign (`Object.assign({}, context, update)`), and past `MAX_CONTEXT_FIELDS`
 * fields every copy is a dictionary: the connection chart's snapshot grew from 1.1 to 2.5 KiB per
 * link that way (23 fields, 2026-12-05, bench/ breakdown). V8's own check is read with its
 * natives syntax, switched on for this worker (it only lets code compiled afterwards use `%`
 * calls).
 */
import { setFlagsFromString } from 'node:v8'
import { describe, expect, it } from 'vitest'
import { initialTransition, transition, type AnyStateMachine, type EventObject } from 'xstate'
import { channelMachine, DEFAULT_CHANNEL_POLICY } from '../../machines/channel.js'
import { connectionMachine } from '../../machines/connection.js'
import { controlMachine, DEFAULT_CONTROL_POLICY } from '../../machines/control.js'
import { presenceMachine } from '../../machines/presence.js'
import { reconnectMachine, DEFAULT_RECONNECT_POLICY } from '../../machines/reconnect.js'
import { MAX_CONTEXT_FIELDS, type Env } from '../../machines/types.js'

setFlagsFromString('--allow-natives-syntax')
const hasFastProperties = new Function('o', 'return %HasFastProperties(o)') as (o: object) => boolean

const env: Env = { now: () => 0, monotonic: () => 0, random: () => 0.5 }
const TOPIC = 'room:1'

/** Each chart with its input and events that assign most of its context on the way. */
const CHARTS: Array<[string, AnyStateMachine, unknown, EventObject[]]> = [
  [
    'connection',
    connectionMachine as unknown as AnyStateMachine,
    { env },
    [
      { type: 'host.connect' },
      { type: 'socket.upgradeSent', generation: 1, epoch: 1 },
      { type: 'socket.open', generation: 1, epoch: 1 },
      { type: 'control.joinOk', generation: 1, epoch: 1 },
      { type: 'host.channel', topic: TOPIC },
      { type: 'socket.close', generation: 1, epoch: 1, code: 1001, reason: '', wasClean: true },
    ] as unknown as EventObject[],
  ],
  [
    'reconnect',
    reconnectMachine as unknown as AnyStateMachine,
    { policy: DEFAULT_RECONNECT_POLICY, env },
    [{ type: 'reconnect.opened' }, { type: 'reconnect.lost', reason: { kind: 'normal-close', retryable: true, generation: 1, at: 0 } }] as unknown as EventObject[],
  ],
  ['control', controlMachine as unknown as AnyStateMachine, { policy: DEFAULT_CONTROL_POLICY }, []],
  [
    'channel',
    channelMachine as unknown as AnyStateMachine,
    { topic: TOPIC, policy: DEFAULT_CHANNEL_POLICY, env },
    [{ type: 'transport.up', generation: 1 }, { type: 'channel.joinOk', topic: TOPIC, generation: 1, attachId: 1 }] as unknown as EventObject[],
  ],
  [
    'presence',
    presenceMachine as unknown as AnyStateMachine,
    { principal: 'agent-1' },
    [{ type: 'presence.opened', connectionId: 'a', at: 1 }] as unknown as EventObject[],
  ],
]

/** `fields` fields copied as XState copies a context on each assign, `copies` times. */
function copiedContext(fields: number, copies = 4): object {
  let context: Record<string, number> = {}
  for (let i = 0; i < fields; i++) context[`field${fields}_${i}`] = i
  for (let i = 0; i < copies; i++) context = Object.assign({}, context, { [`field${fields}_0`]: i })
  return context
}

describe('chart contexts', () => {
  it(`MAX_CONTEXT_FIELDS (${MAX_CONTEXT_FIELDS}) is this V8's limit: that many fields stay fast when copied with Object.assign, one more does not`, () => {
    expect(hasFastProperties(copiedContext(MAX_CONTEXT_FIELDS))).toBe(true)
    expect(hasFastProperties(copiedContext(MAX_CONTEXT_FIELDS + 1))).toBe(false)
  })

  it.each(CHARTS)('the %s chart keeps its context within the limit and fast after its assigns', (_name, machine, input, events) => {
    let [snapshot] = initialTransition(machine, input as never)
    expect(Object.keys(snapshot.context as object).length).toBeLessThanOrEqual(MAX_CONTEXT_FIELDS)
    expect(hasFastProperties(snapshot.context as object)).toBe(true)
    for (const event of events) {
      const before = snapshot.context
      ;[snapshot] = transition(machine, snapshot, event)
      expect(Object.keys(snapshot.context as object).length).toBeLessThanOrEqual(MAX_CONTEXT_FIELDS)
      expect(hasFastProperties(snapshot.context as object)).toBe(true)
      if (events.length > 0 && event === events.at(-1)) expect(snapshot.context).not.toBe(before)
    }
  })
})
