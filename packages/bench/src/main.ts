/**
 * pnpm bench [--quick] [--latency 0,2,10] [--series flushwave,typeorm] [--scenario bulkCreate,coldFlush] [--pooler]
 *
 * One embedded PostgreSQL (or DATABASE_URL), one real toxiproxy (or TOXIPROXY_URL) adding latency
 * to every server→client chunk, and every series doing the same units of work through it, side by
 * side in one run, sample by sample (runner.ts). Writes results/latest.json, latest.md and
 * latest.svg (latest-pooler.* with --pooler).
 */
import { mkdir, writeFile } from 'node:fs/promises'
import os from 'node:os'
import { parseArgs } from 'node:util'
import { chart } from './chart.js'
import { startEnvironment } from './environment.js'
import { mmss, Progress } from './progress.js'
import { updateReadme } from './readme.js'
import { markdown, type Results } from './report.js'
import { measureCell, type Case, type MeasureOptions, type Run, type Subject } from './runner.js'
import type { ScenarioName } from './scenarios.js'
import { loadSeries, SERIES } from './series/index.js'
import type { OpenOptions, Series, SeriesFactory } from './series/types.js'

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    latency: { type: 'string' },
    series: { type: 'string' },
    scenario: { type: 'string' },
    pooler: { type: 'boolean', default: false },
  },
})

const FULL: Case[] = [
  { scenario: 'bulkCreate', size: 1, zeroLatencyOnly: false },
  { scenario: 'bulkCreate', size: 10, zeroLatencyOnly: false },
  { scenario: 'bulkCreate', size: 100, zeroLatencyOnly: false },
  { scenario: 'coldFlush', size: 1, zeroLatencyOnly: false },
  { scenario: 'bulkUpdate', size: 0, zeroLatencyOnly: false },
  { scenario: 'mixedFlush', size: 1, zeroLatencyOnly: false },
  { scenario: 'mixedFlush', size: 5, zeroLatencyOnly: false },
  { scenario: 'mixedFlush', size: 10, zeroLatencyOnly: false },
  { scenario: 'mixedFlush', size: 20, zeroLatencyOnly: false },
  { scenario: 'deleteGraph', size: 0, zeroLatencyOnly: false },
  { scenario: 'cpuFlush', size: 10_000, zeroLatencyOnly: true },
  { scenario: 'noopFlush', size: 10_000, zeroLatencyOnly: true },
]
const QUICK: Case[] = [
  { scenario: 'bulkCreate', size: 1, zeroLatencyOnly: false },
  { scenario: 'mixedFlush', size: 10, zeroLatencyOnly: false },
]
// coldFlush is not in QUICK's list but may be asked for by name.
const EXTRA: Case[] = [{ scenario: 'coldFlush', size: 1, zeroLatencyOnly: false }]

const list = (s: string | undefined) => s?.split(',').map((x) => x.trim()).filter(Boolean)
const latencies = (list(args.latency) ?? (args.quick ? ['0', '2'] : ['0', '1', '2', '5', '10'])).map(Number)
const scenarios = list(args.scenario) as ScenarioName[] | undefined
const pool = args.quick ? [...QUICK, ...EXTRA] : FULL
const cases = scenarios ? pool.filter((c) => scenarios.includes(c.scenario)) : args.quick ? QUICK : FULL
const seriesNames = list(args.series) ?? [...SERIES]
// Per series and cell: the rounds of one cell take about budgetMs × its series.
const options: MeasureOptions = args.quick ? { budgetMs: 2_000, minSamples: 15, maxSamples: 40 } : { budgetMs: 2_000, minSamples: 7, maxSamples: 30 }
const fullDefault = !args.quick && !args.latency && !args.series && !args.scenario && !args.pooler

const startedAt = new Date()
const log = (line: string) => process.stderr.write(line + '\n')
const env = await startEnvironment({ pooler: args.pooler, poolerSize: 10 })
const openOptions: OpenOptions = { pooler: args.pooler }

const factories: SeriesFactory[] = []
const opened = new Map<string, Series>()
const unavailable: { series: string; error: string }[] = []
for (const name of seriesNames) {
  try {
    const factory = await loadSeries(name)
    if (args.pooler && !factory.pooler) throw new Error('does not run behind a transaction pooler')
    opened.set(name, await factory.open(env.url, openOptions))
    factories.push(factory)
  } catch (error) {
    unavailable.push({ series: name, error: message(error) })
    log(`skip ${name}: ${message(error).split('\n')[0]}`)
  }
}

const runs: Run[] = []
const failed = new Set<string>()
const cells = latencies.flatMap((l) => cases.filter((c) => l === 0 || !c.zeroLatencyOnly).map((c) => [l, c] as const))
const progress = new Progress(cells.length)
log(`${cells.length} cells × ${factories.length} series; about ${mmss((cells.length * factories.length * (options.budgetMs + 1_500)) / 1000)} by the budget`)
try {
  for (const [latency, c] of cells) {
    await env.proxy.setLatency(latency)
    const label = `${c.scenario}${c.size ? `×${c.size}` : ''} @${latency}ms`
    log(progress.line(label))
    const subjects = factories.filter((f) => !failed.has(f.name)).map((f) => subject(f, c.scenario === 'coldFlush'))
    const cell = await measureCell(c, subjects, env.admin, env.wire, latency, options)
    for (const run of cell.runs) {
      runs.push(run)
      const r = run.ratio ? ` (${run.ratio.median.toFixed(2)}× [${run.ratio.q1.toFixed(2)}–${run.ratio.q3.toFixed(2)}])` : ''
      log(`  ${run.series}: median ${run.medianMs} ms${r}, p95 ${run.p95Ms}, p99 ${run.p99Ms}, n=${run.samples}, ${run.statements} statements, ${run.roundTrips} round trips`)
    }
    for (const f of cell.failures) {
      // A series that writes the wrong rows must not be timed at all.
      failed.add(f.series)
      unavailable.push({ series: f.series, error: `${label}: ${message(f.error)}` })
      log(`  FAIL ${f.series}: ${message(f.error)}`)
    }
    progress.finished()
  }
} finally {
  for (const series of opened.values()) await series.close().catch(() => undefined)
  await env.close()
}

const results: Results = {
  startedAt: startedAt.toISOString(),
  machine: {
    cpu: os.cpus()[0]?.model.trim() ?? 'unknown',
    cores: os.cpus().length,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    postgres: env.postgres,
    latency: 'toxiproxy 2.12, downstream',
    ...(env.pooler ? { pooler: env.pooler } : {}),
  },
  runs,
  unavailable,
  durationS: (Date.now() - startedAt.getTime()) / 1000,
}
const dir = new URL('../results/', import.meta.url)
const stem = args.pooler ? 'latest-pooler' : 'latest'
await mkdir(dir, { recursive: true })
await writeFile(new URL(`${stem}.json`, dir), JSON.stringify(results, null, 2) + '\n')
await writeFile(new URL(`${stem}.md`, dir), markdown(results))
const create1 = runs.filter((r) => r.scenario === 'bulkCreate' && r.size === 1)
await writeFile(new URL(`${stem}.svg`, dir), chart(create1, 'bulkCreate ×1: 1 author, 10 books, 100 reviews, 50 tags, 50 links'))
log(`\nwrote packages/bench/results/${stem}.{json,md,svg} in ${results.durationS.toFixed(0)} s`)
// A full default run also refreshes the benchmark section of the repository's README.
if (fullDefault) await updateReadme(results)
process.stdout.write(markdown(results))
process.exitCode = failed.size > 0 ? 1 : 0

/** The open series, or (coldFlush) a new instance per sample, opened and closed untimed. */
function subject(factory: SeriesFactory, fresh: boolean): Subject {
  const shared = opened.get(factory.name)!
  return {
    name: factory.name,
    acquire: async () => {
      if (!fresh) return { series: shared, release: async () => {} }
      const series = await factory.open(env.url, openOptions)
      return { series, release: () => series.close() }
    },
  }
}

function message(error: unknown): string {
  return error instanceof Error ? (error.stack ?? error.message) : String(error)
}
