/** The simulator's Prometheus metrics: names, help, labels, the zeroed abort outcomes, the prefix check. */
import { describe, expect, it } from 'vitest'
import { Counter, Gauge, Registry } from 'prom-client'
import { ServerMetrics } from '../../src/node/server/metrics.js'

describe('ServerMetrics', () => {
  it('registers its three series under the default prefix, with help and the abort outcomes at 0', async () => {
    const metrics = new ServerMetrics()
    const text = await metrics.registry.metrics()
    expect(text).toContain('# HELP phoenix_link_active_connections Open agent sockets.\n# TYPE phoenix_link_active_connections gauge\nphoenix_link_active_connections 0')
    expect(text).toContain("# HELP phoenix_link_agent_aborts_total Aborts of a principal's in-flight runs after its last connection ended, by outcome.")
    expect(text).toContain('# TYPE phoenix_link_agent_aborts_total counter')
    for (const outcome of ['aborted', 'nothing-to-abort', 'failed']) expect(text).toContain(`phoenix_link_agent_aborts_total{outcome="${outcome}"} 0`)
    expect(text).toContain('# HELP phoenix_link_principal_disconnects_total Principals whose last connection ended, by the reason kind of that close.')
    expect(text).toContain('# TYPE phoenix_link_principal_disconnects_total counter')
    metrics.principalDisconnects.inc({ reason: 'closed' })
    metrics.activeConnections.set(2)
    const after = await metrics.registry.metrics()
    expect(after).toContain('phoenix_link_principal_disconnects_total{reason="closed"} 1')
    expect(after).toContain('phoenix_link_active_connections 2')
  })

  it('uses the registry and prefix it is given, and refuses a prefix Prometheus would refuse', async () => {
    const registry = new Registry()
    const metrics = new ServerMetrics({ registry, prefix: 'sim_' })
    expect(metrics.registry).toBe(registry)
    expect(registry.getMetricsAsArray().map((m) => m.name).sort()).toEqual(['sim_active_connections', 'sim_agent_aborts_total', 'sim_principal_disconnects_total'])
    expect(() => new ServerMetrics({ prefix: '9bad' })).toThrow(RangeError)
  })

  it("a registry holding one of the names in another kind is refused before any metric is registered: the host's registry is left as it was", () => {
    const registry = new Registry()
    new Gauge({ name: 'phoenix_link_principal_disconnects_total', help: 'not ours', registers: [registry] })
    expect(() => new ServerMetrics({ registry })).toThrow(/already holds phoenix_link_principal_disconnects_total, not as the simulator's counter with the label reason/)
    expect(registry.getMetricsAsArray().map((m) => m.name)).toEqual(['phoenix_link_principal_disconnects_total'])
  })

  it('a second simulator given the same registry and prefix shares the metrics: its counters go on counting, the gauge is one', async () => {
    const registry = new Registry()
    const first = new ServerMetrics({ registry })
    first.agentAborts.inc({ outcome: 'aborted' })
    first.principalDisconnects.inc({ reason: 'closed' })
    const second = new ServerMetrics({ registry })
    expect(second.activeConnections).toBe(first.activeConnections)
    expect(second.agentAborts).toBe(first.agentAborts)
    expect(second.principalDisconnects).toBe(first.principalDisconnects)
    second.agentAborts.inc({ outcome: 'aborted' })
    second.activeConnections.set(3)
    const text = await registry.metrics()
    expect(text).toContain('phoenix_link_agent_aborts_total{outcome="aborted"} 2')
    expect(text).toContain('phoenix_link_principal_disconnects_total{reason="closed"} 1')
    expect(text).toContain('phoenix_link_active_connections 3')
    // A host's own gauge of that name, with no labels, is shared too.
    const hosts = new Registry()
    const gauge = new Gauge({ name: 'phoenix_link_active_connections', help: "the host's", registers: [hosts] })
    expect(new ServerMetrics({ registry: hosts }).activeConnections).toBe(gauge)
  })

  it('a metric of the right kind with other labels, or of the other kind with the same labels, is refused, the message naming what the simulator needs', () => {
    const relabelled = new Registry()
    new Counter({ name: 'phoenix_link_agent_aborts_total', help: 'not ours', labelNames: ['reason'], registers: [relabelled] })
    expect(() => new ServerMetrics({ registry: relabelled })).toThrow(
      new Error("the metrics registry already holds phoenix_link_agent_aborts_total, not as the simulator's counter with the label outcome: give the simulator another registry or prefix"),
    )
    const counted = new Registry()
    new Counter({ name: 'phoenix_link_active_connections', help: 'not ours', registers: [counted] })
    expect(() => new ServerMetrics({ registry: counted })).toThrow(
      new Error("the metrics registry already holds phoenix_link_active_connections, not as the simulator's gauge: give the simulator another registry or prefix"),
    )
    expect(counted.getMetricsAsArray().map((m) => m.name)).toEqual(['phoenix_link_active_connections'])
  })

  it("a registry cleared while a simulator using it runs gets that simulator's metrics back, with their counts; once none runs, the next starts at zero", async () => {
    const registry = new Registry()
    const running = new ServerMetrics({ registry })
    running.running(true)
    running.agentAborts.inc({ outcome: 'aborted' })
    registry.clear()
    // A simulator made on the cleared registry while the first runs shares its metrics, registered again.
    const during = new ServerMetrics({ registry })
    expect(during.agentAborts).toBe(running.agentAborts)
    expect(during.activeConnections).toBe(running.activeConnections)
    expect(await registry.metrics()).toContain('phoenix_link_agent_aborts_total{outcome="aborted"} 1')
    // One that never ran saying it stopped changes nothing for the one that runs.
    during.running(false)
    registry.clear()
    expect(new ServerMetrics({ registry }).agentAborts).toBe(running.agentAborts)
    // The last running one stops: a registry cleared after that starts the next simulator from zero.
    running.running(false)
    registry.clear()
    const next = new ServerMetrics({ registry })
    expect(next.agentAborts).not.toBe(running.agentAborts)
    expect(await registry.metrics()).toContain('phoenix_link_agent_aborts_total{outcome="aborted"} 0')
  })

  it('keeps nothing for a simulator that never ran (one that failed to start): a registry cleared then starts the next at zero', () => {
    const registry = new Registry()
    const never = new ServerMetrics({ registry })
    never.agentAborts.inc({ outcome: 'failed' })
    registry.clear()
    expect(new ServerMetrics({ registry }).agentAborts).not.toBe(never.agentAborts)
  })

  it('keeps the metrics while any of several simulators on the registry runs, and forgets them when the last stops', () => {
    const registry = new Registry()
    const a = new ServerMetrics({ registry })
    const b = new ServerMetrics({ registry })
    a.running(true)
    b.running(true)
    a.running(false)
    registry.clear()
    expect(new ServerMetrics({ registry }).principalDisconnects).toBe(a.principalDisconnects)
    b.running(false)
    registry.clear()
    expect(new ServerMetrics({ registry }).principalDisconnects).not.toBe(a.principalDisconnects)
  })

  it('reattach() registers again, with their counts, the metrics a registry.clear() removed, and leaves a name the host took meanwhile as it is', async () => {
    const registry = new Registry()
    const metrics = new ServerMetrics({ registry })
    metrics.running(true)
    metrics.activeConnections.set(4)
    registry.clear()
    expect(registry.getMetricsAsArray()).toEqual([])
    metrics.reattach()
    expect(registry.getSingleMetric('phoenix_link_active_connections')).toBe(metrics.activeConnections)
    expect(registry.getSingleMetric('phoenix_link_agent_aborts_total')).toBe(metrics.agentAborts)
    expect(registry.getSingleMetric('phoenix_link_principal_disconnects_total')).toBe(metrics.principalDisconnects)
    expect(await registry.metrics()).toContain('phoenix_link_active_connections 4')
    // Attached already: a second reattach() registers nothing twice (prom-client would throw).
    expect(() => metrics.reattach()).not.toThrow()
    registry.clear()
    const hosts = new Gauge({ name: 'phoenix_link_active_connections', help: "the host's own", registers: [registry] })
    metrics.reattach()
    expect(registry.getSingleMetric('phoenix_link_active_connections')).toBe(hosts)
    expect(registry.getSingleMetric('phoenix_link_agent_aborts_total')).toBe(metrics.agentAborts)
    metrics.running(false)
  })
})
