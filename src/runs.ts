/**
 * The run supervisor: agent runs registered per principal, each with an AbortSignal, aborted
 * together when the principal's last connection ends (the simulator) or when a link's session
 * ends for good (the client, `link.runSignal()`), so no one keeps paying for a run whose result
 * nobody will receive. Every abort is reported with its outcome.
 */
import { thrownText } from '../machines/types.js'
import { REASON_KINDS as KINDS, type DisconnectReason } from './reasons.js'
import { settleReported } from './emitter.js'
import { isAbortSignal } from './abort.js'
import { typeName } from './call-checks.js'

/** The kinds of {@link DisconnectReason}. */
const REASON_KINDS: ReadonlySet<string> = new Set(KINDS)

/** How an abort went. */
export type AbortOutcome =
  /** Every run of the principal was aborted and its hook settled in time. */
  | 'aborted'
  /** The principal had no run in flight (a repeat abort is this too). */
  | 'nothing-to-abort'
  /** A run's abort hook threw, rejected, or did not settle within `hookTimeoutMs`. */
  | 'failed'

/** One `agent-aborted` report: per run, or once with `runId: null` when there was nothing to abort. */
export interface AgentAborted {
  type: 'agent-aborted'
  principal: string
  runId: string | null
  outcome: AbortOutcome
  /** Why the runs were aborted: the reason of the close that ended the principal's presence. */
  reason: DisconnectReason | null
  /** What the hook threw, or that it timed out, for `failed`. */
  error: string | null
  /** When the run's hook settled, on the supervisor's `now` clock: milliseconds since the Unix epoch by default; the simulator's supervisor reads its own (milliseconds since it started, as all its records). */
  at: number
}

/** Options of {@link RunSupervisor}. */
export interface RunSupervisorOptions {
  /** Longest wait for a run's abort hook to settle, in milliseconds. @default 5000 */
  hookTimeoutMs?: number | undefined
  /** Clock for reports, in milliseconds; one that throws stamps that report with `Date.now()` instead. @default Date.now */
  now?: (() => number) | undefined
}

/** What a caller gives when it starts a run. */
export interface RunOptions {
  /** Called when the run is aborted; may return a promise (cleanup, cancelling a model call). */
  onAbort?: ((reason: DisconnectReason | null) => void | Promise<void>) | undefined
}

/**
 * What is wrong with a run's arguments (a `principal` or `runId` that is not a non-empty string,
 * options that are not an object, an `onAbort` that is not a function), or null when nothing is.
 */
export function runProblem(principal: unknown, runId: unknown, options: unknown): string | null {
  for (const [name, value] of [['principal', principal], ['runId', runId]] as const) {
    if (typeof value !== 'string' || value === '') return `${name} must be a non-empty string, got ${value === '' ? 'an empty string' : value === null ? 'null' : typeof value}`
  }
  if (options === undefined || options === null) return null
  if (typeof options !== 'object') return `options must be an object, got ${typeof options}`
  const { onAbort } = options as { onAbort?: unknown }
  if (onAbort !== undefined && typeof onAbort !== 'function') return `options.onAbort must be a function, got ${onAbort === null ? 'null' : typeof onAbort}`
  return null
}

interface Run {
  controller: AbortController
  onAbort: RunOptions['onAbort']
}

/**
 * Tracks in-flight runs per principal; reports each abort ({@link AgentAborted}) to the listeners
 * of {@link RunSupervisor.onAborted}.
 *
 * @example
 * const signal = runs.startRun('agent-7', 'run-42', { onAbort: () => model.cancel() })
 * try { await work({ signal }) } finally { runs.endRun('agent-7', 'run-42', signal) }
 */
export class RunSupervisor {
  private readonly runs = new Map<string, Map<string, Run>>()
  private listeners: Set<(report: AgentAborted) => void> | null = null
  /** The longest wait for a run's `onAbort` hook to settle, in milliseconds (RunSupervisorOptions.hookTimeoutMs, 5000 by default). */
  readonly hookTimeoutMs: number
  private readonly now: () => number
  /** Why no run may start any more (set by {@link close}); null while runs may start. */
  private closedBecause: string | null = null

  /**
   * @throws {TypeError} when `options` is not an object or `now` is not a function.
   * @throws {RangeError} for a `hookTimeoutMs` that is not a whole number of milliseconds in [0, 2^31-1].
   */
  constructor(options: RunSupervisorOptions = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError(`RunSupervisor options must be an object, got ${options === null ? 'null' : typeof options}`)
    if (options.now !== undefined && typeof options.now !== 'function') throw new TypeError(`RunSupervisor now must be a function returning milliseconds, got ${typeof options.now}`)
    this.hookTimeoutMs = options.hookTimeoutMs ?? 5_000
    if (!Number.isInteger(this.hookTimeoutMs) || this.hookTimeoutMs < 0 || this.hookTimeoutMs > 2 ** 31 - 1) {
      throw new RangeError(`hookTimeoutMs must be a whole number of milliseconds in [0, 2^31-1], got ${String(options.hookTimeoutMs)}`)
    }
    this.now = options.now ?? Date.now
  }

  /**
   * Registers a run and returns the signal that aborts when the principal's runs are aborted.
   *
   * @param options `{ onAbort? }`; `null` is no options.
   * @throws {TypeError} when `principal` or `runId` is not a non-empty string, `options` is not an
   *   object, or `options.onAbort` is given and is not a function (nothing is registered).
   * @throws {Error} when a run with this id is already in flight for the principal, or the
   *   supervisor was closed ({@link close}: a run started then would never be aborted).
   */
  startRun(principal: string, runId: string, options: RunOptions | null = {}): AbortSignal {
    const problem = runProblem(principal, runId, options)
    if (problem !== null) throw new TypeError(`RunSupervisor: startRun(): ${problem}`)
    options ??= {}
    if (this.closedBecause !== null) throw new Error(`RunSupervisor: startRun(${JSON.stringify(principal)}, ${JSON.stringify(runId)}) after close(): ${this.closedBecause}`)
    let runs = this.runs.get(principal)
    if (!runs) this.runs.set(principal, (runs = new Map()))
    if (runs.has(runId)) throw new Error(`run ${JSON.stringify(runId)} of ${JSON.stringify(principal)} is already in flight`)
    const controller = new AbortController()
    runs.set(runId, { controller, onAbort: options.onAbort })
    return controller.signal
  }

  /**
   * No run starts from now on: every later startRun() throws, naming `why`. Runs in flight stay
   * registered (abort them with {@link abortPrincipal}; end them with {@link endRun}). For an
   * owner that stops (the simulator's stop()), after which nothing would abort a new run. Idempotent:
   * the first `why` is kept.
   */
  close(why = 'this supervisor is closed'): void {
    this.closedBecause ??= why
  }

  /** Whether {@link close} was called. */
  get isClosed(): boolean {
    return this.closedBecause !== null
  }

  /**
   * Calls `listener` with every abort report; returns the function that removes it. Listener errors (a throw, an `async` listener's rejection) are swallowed.
   *
   * @throws {TypeError} when `listener` is not a function (nothing is registered).
   */
  onAborted(listener: (report: AgentAborted) => void): () => void {
    if (typeof listener !== 'function') throw new TypeError(`RunSupervisor: onAborted(): the listener must be a function, got ${typeName(listener)}`)
    ;(this.listeners ??= new Set()).add(listener)
    return () => this.listeners!.delete(listener)
  }

  /**
   * A run ended normally: it leaves the registry. Idempotent.
   *
   * @param signal the signal {@link startRun} returned for this run. With it, only that run ends:
   *   a run that was aborted, and whose id a later run of the principal took meanwhile (the agent
   *   reconnected and started it again), ends nothing when its own cleanup calls this late.
   *   Without it, whichever run holds the id now ends.
   * @throws {TypeError} when `principal` or `runId` is not a non-empty string, or `signal` is given
   *   and is not an AbortSignal (nothing ends: a run the host meant to end would otherwise stay in
   *   flight and be reported aborted later).
   */
  endRun(principal: string, runId: string, signal?: AbortSignal): void {
    const problem = runProblem(principal, runId, null)
    if (problem !== null) throw new TypeError(`RunSupervisor: endRun(): ${problem}`)
    if (signal !== undefined && !isAbortSignal(signal)) throw new TypeError(`RunSupervisor: endRun(): signal must be the AbortSignal startRun() returned, got ${typeName(signal)}`)
    const runs = this.runs.get(principal)
    if (runs === undefined) return
    if (signal !== undefined && runs.get(runId)?.controller.signal !== signal) return
    runs.delete(runId)
    if (runs.size === 0) this.runs.delete(principal)
  }

  /**
   * Ends the run of `principal` that `signal` belongs to (the signal {@link startRun} returned),
   * whatever its id; nothing when that run already ended or was aborted. For callers that let the
   * id be chosen for them (`link.runSignal()`).
   *
   * @throws {TypeError} when `principal` is not a non-empty string or `signal` is not an
   *   AbortSignal (nothing ends).
   */
  endRunOf(principal: string, signal: AbortSignal): void {
    const problem = runProblem(principal, 'run', null)
    if (problem !== null) throw new TypeError(`RunSupervisor: endRunOf(): ${problem}`)
    if (!isAbortSignal(signal)) throw new TypeError(`RunSupervisor: endRunOf(): signal must be the AbortSignal startRun() returned, got ${typeName(signal)}`)
    const runs = this.runs.get(principal)
    if (runs === undefined) return
    for (const [runId, run] of runs) {
      if (run.controller.signal !== signal) continue
      runs.delete(runId)
      if (runs.size === 0) this.runs.delete(principal)
      return
    }
  }

  /**
   * The principals with at least one run in flight, in the order each came to have one: a
   * principal keeps its place while any of its runs is in flight (its first run may have ended
   * since), and goes to the end when it starts a run again after a time with none. A principal
   * whose last run ended or was aborted is not among them: the supervisor keeps nothing for it
   * (a host with a principal per task stays flat over days).
   */
  principals(): string[] {
    return [...this.runs.keys()]
  }

  /** The ids of the principal's runs in flight. */
  inFlight(principal: string): string[] {
    return [...(this.runs.get(principal)?.keys() ?? [])]
  }

  /**
   * Aborts every run of the principal, waits for their hooks (bounded), reports each, and
   * resolves with the reports. A hook's fault (a throw, a rejection, no answer in time) is its
   * report, never a rejection.
   *
   * @throws {TypeError} (rejects) when `principal` is not a non-empty string or `reason` is
   *   neither null nor a reason object (an object whose `kind` is one of {@link DisconnectReason}'s,
   *   src/reasons.ts; its other fields are the caller's, not checked): nothing is aborted or reported.
   */
  async abortPrincipal(principal: string, reason: DisconnectReason | null): Promise<AgentAborted[]> {
    const problem = runProblem(principal, 'run', null)
    if (problem !== null) throw new TypeError(`RunSupervisor: abortPrincipal(): ${problem}`)
    // Only the kind is checked: a reason the library made carries what the server sent (a
    // supersede's payload in `raw`, which may be any object), and a round must not reject on it.
    const kind: unknown = reason !== null && typeof reason === 'object' ? (reason as { kind?: unknown }).kind : undefined
    if (reason !== null && !(typeof kind === 'string' && REASON_KINDS.has(kind))) {
      throw new TypeError(
        `RunSupervisor: abortPrincipal(): reason must be null or a DisconnectReason (src/reasons.ts), whose kind is one of ${[...REASON_KINDS].join(', ')}; got ${reason === null || typeof reason !== 'object' ? typeName(reason) : `kind ${JSON.stringify(kind) ?? 'undefined'}`}`,
      )
    }
    const runs = this.runs.get(principal)
    this.runs.delete(principal)
    if (!runs || runs.size === 0) {
      const report: AgentAborted = { type: 'agent-aborted', principal, runId: null, outcome: 'nothing-to-abort', reason, error: null, at: this.stamp() }
      this.report(report)
      return [report]
    }
    const reports = await Promise.all(
      [...runs.entries()].map(async ([runId, run]) => {
        run.controller.abort(reason ?? new Error('the principal has no connection left'))
        const error = await this.settleHook(run, reason)
        const report: AgentAborted = {
          type: 'agent-aborted',
          principal,
          runId,
          outcome: error === null ? 'aborted' : 'failed',
          reason,
          error,
          at: this.stamp(),
        }
        this.report(report)
        return report
      }),
    )
    return reports
  }

  /** The report's time: the supervisor's clock, or the wall clock when a host's `now` throws (an abort round never rejects). */
  private stamp(): number {
    try {
      return this.now()
    } catch {
      return Date.now()
    }
  }

  private report(report: AgentAborted): void {
    for (const listener of [...(this.listeners ?? [])]) {
      try {
        // An async listener's rejection is its own too: never an unhandled rejection.
        settleReported(listener(report), () => {})
      } catch {
        // a listener's failure is its own
      }
    }
  }

  private async settleHook(run: Run, reason: DisconnectReason | null): Promise<string | null> {
    if (!run.onAbort) return null
    let timer: ReturnType<typeof setTimeout> | undefined
    try {
      await Promise.race([
        Promise.resolve().then(() => run.onAbort!(reason)),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`the abort hook did not settle within ${this.hookTimeoutMs} ms`)), this.hookTimeoutMs)
        }),
      ])
      return null
    } catch (error) {
      return thrownText(error)
    } finally {
      clearTimeout(timer)
    }
  }
}
