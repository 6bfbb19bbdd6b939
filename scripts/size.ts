/**
 * `npm run size`: how much phoenix-link adds to a browser app, beside the official `phoenix`
 * client it wraps. Bundles, with esbuild (minified, platform browser, ESM, tree-shaken):
 *
 * - `link`: what `import { createLink } from 'phoenix-link'` pulls in (src/index.ts directly, so no
 *   build is needed; the same code as dist/src/index.js);
 * - `phoenix`: `import { Socket } from 'phoenix'`;
 * - `floor`: only the parts of phoenix, xstate and zod/mini that the link's own modules import (the
 *   names found in the first-party files of the `link` bundle), i.e. the dependencies the link
 *   cannot drop without replacing them;
 *
 * and prints minified and gzipped (node:zlib, level 9) bytes of each, the ratios to phoenix, the
 * issue's target (at most 1.5x phoenix) and whether it is met, and a breakdown of the link bundle by
 * package and folder (from esbuild's metafile: bytes each input contributes to the minified output).
 * It is a report: it exits 0 whether or not the target is met, and 1 only when a bundle fails.
 *
 * `npm run size -- --json` prints the same figures as one JSON object.
 */
import { readFileSync } from 'node:fs'
import { dirname, join, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gzipSync } from 'node:zlib'
import { build, type Metafile } from 'esbuild'

/** The issue's target: the link's bundle at most this many times phoenix's. */
const TARGET_RATIO = 1.5

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')

/** The dependencies the link is built on and keeps; the floor bundles what the link imports of them. */
const KEPT_DEPENDENCIES = ['phoenix', 'xstate', 'zod']

interface Bundle {
  name: string
  minified: number
  gzipped: number
  metafile: Metafile
}

/** Bundles `contents` as if it were a file at the repository root. */
async function bundle(name: string, contents: string): Promise<Bundle> {
  const result = await build({
    stdin: { contents, resolveDir: ROOT, sourcefile: `${name}-entry.ts`, loader: 'ts' },
    absWorkingDir: ROOT,
    bundle: true,
    minify: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    write: false,
    metafile: true,
    logLevel: 'silent',
  })
  if (result.warnings.length > 0) {
    for (const warning of result.warnings) process.stderr.write(`size: ${name}: esbuild warning: ${warning.text}\n`)
  }
  const code = result.outputFiles[0]!.contents
  return { name, minified: code.byteLength, gzipped: gzipSync(code, { level: 9 }).byteLength, metafile: result.metafile }
}

/** The package an input path belongs to (`xstate`, `@scope/name`), or null for first-party code. */
function packageOf(input: string): string | null {
  const parts = input.split(/[\\/]/)
  const at = parts.lastIndexOf('node_modules')
  if (at < 0) return null
  const first = parts[at + 1] ?? '?'
  return first.startsWith('@') ? `${first}/${parts[at + 2] ?? '?'}` : first
}

/** A first-party input's group: `machines/`, `src/`, `src/adapter/`, ... (one folder deep under src). */
function folderOf(input: string): string {
  const parts = relative(ROOT, join(ROOT, input)).split(sep)
  if (parts[0] === 'src' && parts.length > 2) return `src/${parts[1]}/`
  return parts.length > 1 ? `${parts[0]}/` : parts[0]!
}

/** Bytes each package or first-party folder contributes to the (single) output. */
function breakdown(metafile: Metafile): Map<string, number> {
  const output = Object.values(metafile.outputs)[0]!
  const groups = new Map<string, number>()
  for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
    if (bytesInOutput === 0) continue
    const group = packageOf(input) ?? folderOf(input)
    groups.set(group, (groups.get(group) ?? 0) + bytesInOutput)
  }
  return new Map([...groups].sort((a, b) => b[1] - a[1]))
}

/** The `count` first-party inputs that contribute most to the output, largest first. */
function largestFirstParty(metafile: Metafile, count: number): [string, number][] {
  const output = Object.values(metafile.outputs)[0]!
  return Object.entries(output.inputs)
    .filter(([input, { bytesInOutput }]) => packageOf(input) === null && bytesInOutput > 0)
    .map(([input, { bytesInOutput }]): [string, number] => [input, bytesInOutput])
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
}

/**
 * The floor's entry: every name the link's first-party modules import from the kept dependencies
 * (named imports as they are; a namespace import such as `import * as z from 'zod/mini'` as the
 * members the module reads, `z.object` and so on), re-exported so that esbuild keeps exactly them.
 */
async function floorEntry(link: Metafile): Promise<string> {
  const firstParty = Object.keys(link.inputs).filter((input) => packageOf(input) === null && !input.startsWith('<stdin>') && !input.endsWith('-entry.ts'))
  const named = new Map<string, Set<string>>()
  const members = new Map<string, Set<string>>()
  const add = (map: Map<string, Set<string>>, specifier: string, name: string) => {
    if (!map.has(specifier)) map.set(specifier, new Set())
    map.get(specifier)!.add(name)
  }
  const kept = (specifier: string) => KEPT_DEPENDENCIES.some((dep) => specifier === dep || specifier.startsWith(`${dep}/`))
  for (const input of firstParty) {
    const source = readFileSync(join(ROOT, input), 'utf8')
    for (const match of source.matchAll(/import\s+(?!type\s)\{([^}]*)\}\s+from\s+'([^']+)'/g)) {
      const specifier = match[2]!
      if (!kept(specifier)) continue
      for (const part of match[1]!.split(',')) {
        const name = part.trim()
        if (name === '' || name.startsWith('type ')) continue
        add(named, specifier, name.split(/\s+as\s+/)[0]!)
      }
    }
    for (const match of source.matchAll(/import\s+\*\s+as\s+(\w+)\s+from\s+'([^']+)'/g)) {
      const [, local, specifier] = match as unknown as [string, string, string]
      if (!kept(specifier)) continue
      for (const use of source.matchAll(new RegExp(`\\b${local}\\.(\\w+)`, 'g'))) add(members, specifier, use[1]!)
    }
  }
  // Only values: a member read in a type position (`z.infer<...>`) is no export at run time.
  const exported = async (specifier: string, names: Set<string>) => {
    const module = (await import(specifier)) as Record<string, unknown>
    return [...names].filter((name) => name in module).sort()
  }
  const lines: string[] = []
  let n = 0
  for (const [specifier, names] of named) lines.push(`export { ${(await exported(specifier, names)).map((name) => `${name} as n${n++}`).join(', ')} } from '${specifier}'`)
  for (const [specifier, names] of members) {
    const used = await exported(specifier, names)
    const local = `ns${n++}`
    lines.push(`import * as ${local} from '${specifier}'`)
    lines.push(`export const m${n++} = [${used.map((member) => `${local}.${member}`).join(', ')}]`)
  }
  return lines.join('\n')
}

function kib(bytes: number): string {
  return `${(bytes / 1024).toFixed(1)} KiB`
}

function pad(text: string, width: number, right = false): string {
  return right ? text.padStart(width) : text.padEnd(width)
}

async function main(): Promise<void> {
  const json = process.argv.includes('--json')
  const link = await bundle('link', "export { createLink } from './src/index.ts'")
  const phoenix = await bundle('phoenix', "export { Socket } from 'phoenix'")
  const floorSource = await floorEntry(link.metafile)
  const floor = await bundle('floor', floorSource)
  const groups = breakdown(link.metafile)
  const ratio = { minified: link.minified / phoenix.minified, gzipped: link.gzipped / phoenix.gzipped }
  const floorRatio = { minified: floor.minified / phoenix.minified, gzipped: floor.gzipped / phoenix.gzipped }
  const met = ratio.gzipped <= TARGET_RATIO && ratio.minified <= TARGET_RATIO
  const floorMet = floorRatio.gzipped <= TARGET_RATIO && floorRatio.minified <= TARGET_RATIO

  if (json) {
    const row = (b: Bundle) => ({ minified: b.minified, gzipped: b.gzipped })
    process.stdout.write(
      `${JSON.stringify({
        link: row(link),
        phoenix: row(phoenix),
        floor: row(floor),
        ratio,
        floorRatio,
        target: { ratio: TARGET_RATIO, met, reachableWithKeptDependencies: floorMet },
        breakdown: Object.fromEntries(groups),
        largestFirstParty: Object.fromEntries(largestFirstParty(link.metafile, 8)),
      })}\n`,
    )
    return
  }

  const out: string[] = []
  out.push('Browser bundles (esbuild, minified, platform browser, ESM; gzip level 9)')
  out.push('')
  out.push(`${pad('bundle', 52)}${pad('minified', 14, true)}${pad('gzipped', 14, true)}${pad('x phoenix (min / gz)', 24, true)}`)
  const row = (label: string, b: Bundle) => {
    const r = `${(b.minified / phoenix.minified).toFixed(2)} / ${(b.gzipped / phoenix.gzipped).toFixed(2)}`
    out.push(`${pad(label, 52)}${pad(String(b.minified), 14, true)}${pad(String(b.gzipped), 14, true)}${pad(r, 24, true)}`)
  }
  row("phoenix: import { Socket } from 'phoenix'", phoenix)
  row("link: import { createLink } from 'phoenix-link'", link)
  row('floor: phoenix + xstate + zod/mini as used', floor)
  out.push('')
  out.push(`target: link <= ${TARGET_RATIO}x phoenix (${phoenix.minified * TARGET_RATIO | 0} B minified, ${(phoenix.gzipped * TARGET_RATIO) | 0} B gzipped)`)
  out.push(
    `  ${met ? 'MET' : 'NOT MET'}: the link is ${ratio.minified.toFixed(2)}x minified, ${ratio.gzipped.toFixed(2)}x gzipped` +
      (met ? '' : ` (${link.gzipped - Math.floor(phoenix.gzipped * TARGET_RATIO)} B gzipped over)`),
  )
  out.push(
    `  floor: phoenix, xstate and zod/mini alone (what the link imports of them) are ${floorRatio.minified.toFixed(2)}x minified, ${floorRatio.gzipped.toFixed(2)}x gzipped: ` +
      (floorMet ? 'the target is reachable with these dependencies' : 'the target cannot be met while the link keeps these dependencies'),
  )
  out.push(`  the link's own code on top of the floor: ${link.minified - floor.minified} B minified, ${link.gzipped - floor.gzipped} B gzipped`)
  out.push('')
  out.push('The link bundle by package and folder (bytes in the minified output, before gzip)')
  for (const [group, bytes] of groups) {
    out.push(`  ${pad(group, 28)}${pad(String(bytes), 10, true)}${pad(kib(bytes), 12, true)}${pad(`${((100 * bytes) / link.minified).toFixed(1)}%`, 8, true)}`)
  }
  out.push('')
  out.push('Its largest first-party modules')
  for (const [input, bytes] of largestFirstParty(link.metafile, 8)) out.push(`  ${pad(input, 34)}${pad(String(bytes), 10, true)}${pad(kib(bytes), 12, true)}`)
  process.stdout.write(`${out.join('\n')}\n`)
}

main().catch((error: unknown) => {
  process.stderr.write(`size: ${error instanceof Error ? error.message : String(error)}\n`)
  process.exit(1)
})
