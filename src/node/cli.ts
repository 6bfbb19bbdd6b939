/**
 * The `phoenix-link` command: `demo` (the lifecycle on the embedded simulator), `connect` (a
 * link against any platform), `serve` (the simulator standalone), `paths` (the generated
 * lifecycle paths), `export` (the charts for Stately Studio or mermaid), `replay` (a trace in the
 * visualizer), `conform` (the lifecycle rules judged on any agent command) and `--version`.
 */
import { readFileSync, writeSync } from 'node:fs'
import { Command, InvalidArgumentError, Option } from 'commander'
import { SERVER_FLAVORS, type FlavorName } from './server/flavors.js'
import { runConnect } from './cli/connect.js'
import { runPaths } from './cli/paths.js'
import { EXPORT_FORMATS, runExport } from './cli/export.js'
import { runReplay } from './cli/replay.js'
import { CHARTS, type ChartName } from './model/chart-info.js'
import { thrownText } from '../../machines/types.js'
import { visible } from './visible.js'

/** Only decimal digits: `Number()` alone would read `0x1f90` as 8080 and `1e3` as 1000. */
const DECIMAL = /^\s*\d+\s*$/

function port(value: string): number {
  const n = DECIMAL.test(value) ? Number(value) : Number.NaN
  if (!Number.isInteger(n) || n < 0 || n > 65_535) throw new InvalidArgumentError('a port is a whole number in [0, 65535]')
  return n
}

function ms(value: string): number {
  const n = DECIMAL.test(value) ? Number(value) : Number.NaN
  if (!Number.isInteger(n) || n < 1 || n > 2 ** 31 - 1) throw new InvalidArgumentError('milliseconds, a whole number in [1, 2147483647]')
  return n
}

/** A file path argument: an empty one (`--trace ''`, an unset shell variable) is refused, not ignored. */
function filePath(value: string): string {
  if (value.trim() === '') throw new InvalidArgumentError('a file path, not an empty string')
  return value
}

function count(value: string): number {
  const n = DECIMAL.test(value) ? Number(value) : Number.NaN
  if (!Number.isSafeInteger(n)) throw new InvalidArgumentError('a whole number >= 0')
  return n
}

/** This package's version, from its package.json (three levels up in dist/src/node, two in src/node). */
function packageVersion(): string {
  for (const relative of ['../../package.json', '../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(relative, import.meta.url), 'utf8')) as { name?: string; version?: string }
      if (pkg.name === 'phoenix-link' && pkg.version) return pkg.version
    } catch {
      // not here
    }
  }
  return 'unknown'
}

/**
 * Loads a command that runs the simulator (demo, serve, conform): the simulator exports
 * Prometheus metrics, and prom-client is an optional peer of the package (a browser app never
 * needs it). Without it the command prints what to install and exits 1; the other commands
 * (help, connect, paths, export) run without it.
 */
async function simulatorCommand<T>(load: () => Promise<T>): Promise<T | null> {
  try {
    import.meta.resolve('prom-client')
  } catch {
    process.stderr.write('phoenix-link: this command runs the simulator, which needs prom-client, an optional peer dependency: npm install --save-dev prom-client\n')
    process.exitCode = 1
    return null
  }
  return load()
}

/** Resolves on the first SIGINT, SIGTERM or SIGHUP (the terminal closed: Node's default would end the process before its cleanup). */
function untilSignal(): Promise<void> {
  return new Promise((resolve) => {
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, () => resolve())
  })
}

/** Writes help or version text to stdout at once; a reader gone early (EPIPE) is not an error. @throws {Error} when the text cannot be written. */
function writeOutNow(text: string): void {
  try {
    writeSync(1, text)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EPIPE') process.exit(0)
    throw new Error(`cannot write the output: ${thrownText(error)}`)
  }
}

/** Builds the command-line program. */
export function program(): Command {
  const cli = new Command('phoenix-link')
    // Help and version text written at once: commander exits right after writing it, so a write
    // that fails (a full disk) must throw here, to be said and exit 1, not be lost with exit 0.
    .configureOutput({ writeOut: writeOutNow })
    .description('Keeps an AI agent connected to a Phoenix Channels platform and makes every lifecycle decision visible.')
    .version(packageVersion())
  cli
    .command('demo')
    .description('run a link through the lifecycle a platform puts agents through, on the embedded simulator')
    .option('--json', 'one JSON object per line', false)
    .option('--visualize', 'serve the visualizer on loopback and stream the links to it; waits for the page, then keeps it up until Ctrl-C', false)
    .addOption(new Option('--visualize-port <port>', 'port of the visualizer (0 picks one); implies --visualize').argParser(port).default(0).implies({ visualize: true }))
    .option('--trace <file>', 'write both links\' transitions to <file> as JSON lines, for the visualizer\'s #replay (the API key is never written)', filePath)
    .action(async (opts: { json: boolean; visualize: boolean; visualizePort: number; trace?: string }) => {
      const loaded = await simulatorCommand(() => import('./cli/demo.js'))
      if (loaded === null) return
      process.exitCode = await loaded.runDemo({
        json: opts.json,
        ...(opts.trace !== undefined ? { trace: opts.trace } : {}),
        ...(opts.visualize ? { visualize: { port: opts.visualizePort, holdUntil: untilSignal() } } : {}),
      })
    })
  cli
    .command('connect')
    .description('connect to a platform and log every transition until Ctrl-C')
    .addOption(new Option('--url <url>', '(required) socket endpoint, e.g. wss://platform.example/socket').env('PHOENIX_LINK_URL').makeOptionMandatory())
    .addOption(new Option('--agent-id <id>', '(required) the agent id').env('PHOENIX_LINK_AGENT_ID').makeOptionMandatory())
    .addOption(new Option('--api-key <key>', '(required) the API key').env('PHOENIX_LINK_API_KEY').makeOptionMandatory())
    .addOption(
      new Option('--on-conflict <mode>', 'when another socket holds this key: supersede it (default), or be refused with HTTP 409 (reject)').choices([
        'supersede',
        'reject',
      ]),
    )
    .option('--allow-insecure', 'allow ws:// to a host that is not loopback', false)
    .option('--json', 'one JSON object per line', false)
    .option('--visualize', 'serve the visualizer on loopback and stream the link to it', false)
    .addOption(new Option('--visualize-port <port>', 'port of the visualizer (0 picks one); implies --visualize').argParser(port).default(0).implies({ visualize: true }))
    .option('--trace <file>', 'write every transition to <file> as JSON lines (the API key is never written)', filePath)
    .action(
      async (opts: { url: string; agentId: string; apiKey: string; onConflict?: 'supersede' | 'reject'; allowInsecure: boolean; json: boolean; visualize: boolean; visualizePort: number; trace?: string }) => {
        const { visualize, visualizePort, ...rest } = opts
        outlivesOutput = true
        process.exitCode = await runConnect({ ...rest, ...(visualize ? { visualizePort } : {}) })
      },
    )
  cli
    .command('serve')
    .description('run the platform simulator until Ctrl-C')
    .option('--port <port>', 'port to listen on (0 picks one)', port, 4000)
    .option('--host <host>', 'interface to listen on (one that is not loopback needs --admin-token)', '127.0.0.1')
    .addOption(new Option('--flavor <name>', 'close codes of which web server').choices(Object.keys(SERVER_FLAVORS)).default('phoenix'))
    .option('--agent <id:key>', 'an agent allowed to connect (repeatable; an agent given twice keeps both keys, as during a rotation); none means any agent with a key', (v: string, all: string[]) => [...all, v], [] as string[])
    .option('--idle-timeout <ms>', 'close sockets silent this long', ms, 60_000)
    .option(
      '--channel <pattern>',
      "a channel route, as a Phoenix socket's `channel` line: an exact topic, or a prefix ending in * such as room:* (repeatable); a join of a topic none matches is answered \"unmatched topic\"; none means every topic is routed (the control channel always is)",
      (v: string, all: string[]) => {
        // Phoenix compiles `channel ""`, but an empty value here is an unset shell variable far more often.
        if (v === '') throw new InvalidArgumentError('a topic or a prefix ending in *, such as room:*; not an empty string')
        return [...all, v]
      },
      [] as string[],
    )
    .option('--history <n>', 'records kept of each kind, the most recent (closed sockets, upgrades, presence crossings, abort reports, agents with unanswered-upgrade counts, and the /admin/events feed as a whole), so a server left running keeps its memory bounded', count, 10_000)
    .option('--history-frames <n>', 'frames kept over the records of every closed socket together; past it the oldest closed sockets lose their frame records (each socket keeps at most 5000, each frame cut past 2000 characters)', count, 100_000)
    .option('--allow-origin <origin>', "a page origin whose browser upgrades are accepted besides loopback pages (repeatable; '*' accepts any, as Phoenix's check_origin: false)", (v: string, all: string[]) => [...all, v], [] as string[])
    .option('--json', 'one JSON object per line', false)
    .option('--dashboard', 'also serve the visualizer page at / on the same port; its #dashboard view lists who is attached, live', false)
    .addOption(
      new Option('--admin-token <token>', 'require Authorization: Bearer <token> on the /admin routes (then any address may call them); without one they serve loopback callers only').env(
        'PHOENIX_LINK_ADMIN_TOKEN',
      ),
    )
    .action(async (opts: { port: number; host: string; flavor: FlavorName; agent: string[]; channel: string[]; idleTimeout: number; history: number; historyFrames: number; allowOrigin: string[]; json: boolean; dashboard: boolean; adminToken?: string }) => {
      const loaded = await simulatorCommand(() => import('./cli/serve.js'))
      if (loaded === null) return
      outlivesOutput = true
      process.exitCode = await loaded.runServe({
        port: opts.port,
        host: opts.host,
        flavor: opts.flavor,
        agents: opts.agent,
        channels: opts.channel,
        idleTimeoutMs: opts.idleTimeout,
        historyLimit: opts.history,
        historyFrameLimit: opts.historyFrames,
        allowOrigins: opts.allowOrigin,
        json: opts.json,
        dashboard: opts.dashboard,
        ...(opts.adminToken !== undefined ? { adminToken: opts.adminToken } : {}),
      })
    })
  cli
    .command('paths')
    .description('print the paths generated from the charts (stimuli and the state each must reach), as the model tests run them')
    .addOption(new Option('--chart <name>', 'one chart').choices(['connection', 'channel', 'reconnect']))
    .addOption(new Option('--mode <mode>', 'wire: the paths run on the real link; pure: every stimulus, chart only').choices(['wire', 'pure']).default('wire'))
    .option('--json', 'one JSON object per path', false)
    .option('--reconnects', 'the connection paths that lose a connected socket and connect again on the next, twice (reconnectPaths() of phoenix-link/testing), instead of the generated ones', false)
    .action((opts: { chart?: 'connection' | 'channel' | 'reconnect'; mode: 'wire' | 'pure'; json: boolean; reconnects: boolean }) => {
      process.exitCode = runPaths({ ...(opts.chart ? { chart: opts.chart } : {}), mode: opts.mode, json: opts.json, reconnects: opts.reconnects })
    })
  cli
    .command('export')
    .description(
      'write the charts (all, or one with --chart) as XState config (json), a module Stately Studio imports (ts), or mermaid (one stateDiagram; for all charts, a Markdown page of them)',
    )
    .addOption(new Option('--chart <name>', 'one chart').choices(Object.keys(CHARTS)))
    .addOption(new Option('--format <format>', 'output form').choices([...EXPORT_FORMATS]).default('json'))
    .action((opts: { chart?: ChartName; format: (typeof EXPORT_FORMATS)[number] }) => {
      process.exitCode = runExport({ ...(opts.chart ? { chart: opts.chart } : {}), format: opts.format })
    })
  cli
    .command('replay')
    .description('serve a recorded trace (connect --trace, demo --trace) in the visualizer\'s #replay on loopback until Ctrl-C; the file is checked first, every state against the shipped charts')
    .argument('<file>', 'the trace file (JSON lines)')
    .option('--port <port>', 'port of the page (0 picks one)', port, 0)
    .option('--json', 'one JSON object per line', false)
    .action(async (file: string, opts: { port: number; json: boolean }) => {
      outlivesOutput = true
      process.exitCode = await runReplay({ file, port: opts.port, json: opts.json, holdUntil: untilSignal() })
    })
  cli
    .command('conform')
    .description(
      'start the simulator, run <command> once per scenario with PHOENIX_LINK_URL, PHOENIX_LINK_AGENT_ID, PHOENIX_LINK_API_KEY and PHOENIX_LINK_CONTROL_TOPIC in its environment, and judge the lifecycle rules from what the server saw; exit 1 when one breaks',
    )
    .argument('<command...>', 'the agent command and its arguments (after --)')
    .option('--json', 'the report as one JSON object', false)
    .option('--connect-timeout <ms>', 'first connect and control join', ms, 15_000)
    .option('--reconnect-cap <ms>', 'a reconnect after a normal close, at most', (v: string) => {
      // The 429 scenario waits up to its Retry-After (3 s) plus the cap: one timer, at most 2^31-1 ms.
      const n = ms(v)
      if (n > 2 ** 31 - 1 - 3000) throw new InvalidArgumentError(`milliseconds, a whole number in [1, ${2 ** 31 - 1 - 3000}]`)
      return n
    }, 10_000)
    .option('--quiet <ms>', 'how long the server watches for an attempt that must not come (an agent whose first retry comes later is not caught)', ms, 6_000)
    .option('--retry-after <s>', "the 429 scenario's Retry-After, seconds (an agent whose own delay is longer honours any shorter one by chance: raise it past that delay)", (v: string) => {
      const n = DECIMAL.test(v) ? Number(v) : Number.NaN
      if (!Number.isInteger(n) || n < 1 || n > 86_400) throw new InvalidArgumentError('whole seconds in [1, 86400]')
      return n
    }, 3)
    .option('--stop-timeout <ms>', 'how long a SIGTERMed or superseded agent has to close its socket (and, after SIGTERM, to exit) before SIGKILL', ms, 3_000)
    .option('--concurrency <n>', 'scenarios at once', (v: string) => {
      const n = DECIMAL.test(v) ? Number(v) : Number.NaN
      if (!Number.isInteger(n) || n < 1 || n > 16) throw new InvalidArgumentError('a whole number in [1, 16]')
      return n
    }, 3)
    .action(async (command: string[], opts: { json: boolean; connectTimeout: number; reconnectCap: number; quiet: number; retryAfter: number; stopTimeout: number; concurrency: number }) => {
      const loaded = await simulatorCommand(() => import('./cli/conform.js'))
      if (loaded === null) return
      process.exitCode = await loaded.runConform({
        command,
        json: opts.json,
        connectTimeoutMs: opts.connectTimeout,
        reconnectCapMs: opts.reconnectCap,
        quietMs: opts.quiet,
        retryAfterS: opts.retryAfter,
        stopTimeoutMs: opts.stopTimeout,
        concurrency: opts.concurrency,
      })
    })
  return cli
}

/**
 * Set by the commands that run until Ctrl-C (`serve`, `connect`, `replay`): they outlive their
 * output. A reader that goes away (`serve --json | head -n 1`, to learn the port) or a full disk
 * stops their log lines, said once on stderr, and they go on serving (a simulator with agents
 * attached is not stopped by its log's reader; it still drains on SIGTERM or Ctrl-C).
 */
let outlivesOutput = false
let outputLost = false

/** Runs the program on `argv`; errors print one line and set exit code 1. */
export async function main(argv: string[] = process.argv): Promise<void> {
  // A diagnostic that cannot be written (stderr's reader gone too: `serve 2>&1 | head -n 1`) is
  // lost, not a crash that would end a server without its drain.
  process.stderr.on('error', () => {})
  // `phoenix-link paths | head`: a reader that stops early is not an error. Any other failure to
  // write the output (a full disk, ENOSPC) ends the command with one line, not a stack trace.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (outlivesOutput) {
      if (!outputLost) process.stderr.write(`phoenix-link: no more log lines (${error.code === 'EPIPE' ? 'the reader of the output went away' : `cannot write the output: ${visible(thrownText(error))}`}); running on until Ctrl-C or SIGTERM\n`)
      outputLost = true
      return
    }
    if (error.code === 'EPIPE') process.exit(0)
    process.stderr.write(`phoenix-link: cannot write the output: ${visible(thrownText(error))}\n`)
    process.exit(1)
  })
  try {
    await program().parseAsync(argv)
  } catch (error) {
    // An error may quote a file or a server (a trace's line, a refusal's body): no terminal escapes get through.
    process.stderr.write(`phoenix-link: ${visible(thrownText(error))}\n`)
    process.exitCode = 1
  }
}

const invokedDirectly = process.argv[1] !== undefined && /(?:^|[\\/])cli\.(?:ts|js)$/.test(process.argv[1])
if (invokedDirectly) void main()
