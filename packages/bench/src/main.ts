/**
 * pnpm bench [--quick] [--latency 0,2,10] [--series flushwave,typeorm] [--scenario bulkCreate,listEndpoint,scale,typesScale,throughput,stream,replicas]
 *            [--pooler] [--profile] [--clients 32] [--rounds 3] [--duration 6] [--warm-up 300]
 *
 * Without flags: every cell scenario at 0, 1, 2, 5 and 10 ms (listEndpoint at 0, 2 and 10 only),
 * then scale and typesScale, throughput, the phase profile and em.stream's memory over a million rows
 * (stream-memory.ts) (about 40 minutes on a 2-core machine; the estimate is printed first). `--profile` alone
 * runs only the phase profile; `--scenario` picks cells and sections by name. `--warm-up n` sets
 * the untimed units of work each series runs before a case's first cell (300, at most 3 s a series;
 * 0 times a cold process, as the bench did before). `--scenario replicas` needs a cluster
 * (`scripts/patroni-cluster.sh pnpm bench --scenario replicas`, replica-reads.ts).
 *
 * One embedded PostgreSQL (or DATABASE_URL), one real toxiproxy (or TOXIPROXY_URL) adding latency
 * to every server→client chunk, and every series doing the same units of work through it, side by
 * side in one run, sample by sample (runner.ts). Writes results/latest.json, latest.md and
 * latest.svg (latest-pooler.* with --pooler).
 */
import { mkdir, writeFile } from 'node:fs/promises'
import os from 'node:os'
import { parseArgs } from 'node:util'
import { barChart } from './bar-chart.js'
import { writeBenchmarksPage } from './benchmarks-page.js'
import { chart } from './chart.js'
import { startEnvironment } from './environment.js'
import { mmss, Progress } from './progress.js'
import { markdown, type Results } from './report.js'
import { measureCell, type Case, type MeasureOptions, type Run, type Subject } from './runner.js'
import { pgbouncerBinary } from './pooler.js'
import { measurePhases, phaseTable, type PhaseRow } from './phases.js'
import { isScale, scaleChart, TYPES_SCALE_TITLE } from './scale-report.js'
import { combineRounds, measureThroughput, throughputTable, type ThroughputRow } from './throughput.js'
import { measureStreamMemory, streamLine, type StreamMemoryRow } from './stream-memory.js'
import { measureReplicaReads, replicaReadsMarkdown } from './replica-reads.js'
import { loadSeries, SERIES } from './series/index.js'
import type { OpenOptions, Series, SeriesFactory } from './series/types.js'

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    latency: { type: 'string' },
    series: { type: 'string' },
    scenario: { type: 'string' },
    pooler: { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    clients: { type: 'string', default: '32' },
    rounds: { type: 'string', default: '3' },
    'warm-up': { type: 'string' },
    duration: { type: 'string', default: '6' },
  },
})

// A read: at 0, 2 and 10 ms unless --latency says otherwise (its slope needs no more points).
const LIST_ENDPOINT: Case = { scenario: 'listEndpoint', size: 0, zeroLatencyOnly: false, latencies: [0, 2, 10] }
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
  LIST_ENDPOINT,
]
// Not listEndpoint: it would add about 1:40 (9 series × 2 cells) to a quick run of about 4 minutes;
// `pnpm bench --scenario listEndpoint` runs it alone at 0, 2 and 10 ms in about 2.
const QUICK: Case[] = [
  { scenario: 'bulkCreate', size: 1, zeroLatencyOnly: false },
  { scenario: 'mixedFlush', size: 10, zeroLatencyOnly: false },
]
const SCALE_SIZES = [1_000, 10_000, 100_000]
const SCALE: Case[] = [
  ...SCALE_SIZES.map((size): Case => ({ scenario: 'scale', size, zeroLatencyOnly: true })),
  // The same with one column of each newer column type (types-scale.ts): Flushwave and hand-written SQL only.
  ...SCALE_SIZES.map((size): Case => ({ scenario: 'typesScale', size, zeroLatencyOnly: true })),
]
// A scale run projected (from the size before) to take longer than this is skipped.
const SCALE_CAP_MS = 20_000
// A series whose single run of a cell took longer than this is not run for that case at higher
// latencies (Prisma's bulkCreate ×100: 12,400 round trips, two minutes at 10 ms).
const SLOW_CAP_MS = 15_000
// flushwave-begin's executor is sql.begin on a shared pool, which postgres.js refuses with max > 1.
const NOT_IN_THROUGHPUT = new Set(['flushwave-begin'])

const list = (s: string | undefined) => s?.split(',').map((x) => x.trim()).filter(Boolean)
const latencies = (list(args.latency) ?? (args.quick ? ['0', '2'] : ['0', '1', '2', '5', '10'])).map(Number)
const scenarios = list(args.scenario)
const onlyProfile = args.profile && !scenarios && !args.quick
const fullDefault = !args.quick && !args.latency && !args.series && !args.scenario && !args.pooler && !args.profile
const cases = onlyProfile ? [] : scenarios ? [...FULL, ...SCALE].filter((c) => scenarios.includes(c.scenario)) : args.quick ? QUICK : [...FULL, ...SCALE]
const wantThroughput = fullDefault || !!scenarios?.includes('throughput')
const wantProfile = fullDefault || args.profile
// em.stream's memory over a million rows, each driver in a child process (about 30 s), after everything else.
const wantStream = fullDefault || !!scenarios?.includes('stream')
const STREAM_ROWS = 1_000_000
const seriesNames = list(args.series) ?? [...SERIES]
// Untimed units of work per series before a case's first cell, at most WARM_UP_MS (later latencies
// find the code warm). V8 compiles a library's once-per-flush functions over hundreds of flushes:
// without a warm-up, `pnpm bench --quick --latency 0 --series raw-pipelined,flushwave` timed
// Flushwave's first 50 bulkCreate ×1 flushes (4.45 ms; 4.01 after 300; raw-pipelined ÷ flushwave
// 0.77–0.81 against 0.90–0.91). `--warm-up 0` measures the process cold, as before.
const WARM_UP_ROUNDS = 300
const WARM_UP_MS = 3_000
// Per series and cell: the rounds of one cell take about budgetMs × its series.
const options: MeasureOptions = args.quick ? { budgetMs: 2_000, minSamples: 20, maxSamples: 50 } : { budgetMs: 1_500, minSamples: 7, maxSamples: 25 }
const warmUpRounds = Number(args['warm-up'] ?? WARM_UP_ROUNDS)
if (!Number.isInteger(warmUpRounds) || warmUpRounds < 0) throw new Error(`--warm-up is a number of rounds, not ${args['warm-up']}`)
const scaleOptions: MeasureOptions = { budgetMs: 3_000, minSamples: 3, maxSamples: 10 }
// Seeded rows per round: twice what the fastest series did per second so far (about 1,000 flushes/s).
const throughputOptions = { clients: Number(args.clients), durationMs: Number(args.duration) * 1000, tables: 5, maxIterations: 2_000 * Number(args.duration) }
const throughputRounds = Number(args.rounds)
if (!Number.isInteger(throughputRounds) || throughputRounds < 1) throw new Error(`--rounds is a whole number of rounds, not ${args.rounds}`)
const THROUGHPUT_LATENCY = 5
const THROUGHPUT_POOL = 10

const startedAt = new Date()
const log = (line: string) => process.stderr.write(line + '\n')
// On a cluster, not the embedded database: run before (and, alone, instead of) everything else.
if (scenarios?.includes('replicas')) {
  const replicas = await measureReplicaReads(log)
  if (replicas) {
    await mkdir(new URL('../results/', import.meta.url), { recursive: true })
    await writeFile(new URL('../results/latest-replicas.json', import.meta.url), JSON.stringify({ startedAt: startedAt.toISOString(), ...replicas }, null, 2) + '\n')
    await writeFile(new URL('../results/latest-replicas.md', import.meta.url), replicaReadsMarkdown(replicas))
    process.stdout.write(replicaReadsMarkdown(replicas))
    log('wrote packages/bench/results/latest-replicas.*')
  }
  if (scenarios.every((s) => s === 'replicas')) process.exit(0)
}
if (args.pooler && !pgbouncerBinary()) {
  log('--pooler: skipped, pgbouncer is not on PATH (Debian/Ubuntu: apt-get install pgbouncer).')
  process.exit(0)
}
const env = await startEnvironment({ pooler: args.pooler, poolerSize: THROUGHPUT_POOL })
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
const scaleNotes: string[] = []
const typesScaleNotes: string[] = []
const slowNotes: string[] = []
const scaleSkipped = new Set<string>()
const slowSkipped = new Set<string>()
const caseKey = (c: Case, series: string) => `${c.scenario}×${c.size} ${series}`
const throughput: ThroughputRow[] = []
let phases: PhaseRow[] | undefined
let streamMemory: StreamMemoryRow[] | undefined
const atLatency = (c: Case, l: number) => (l === 0 || !c.zeroLatencyOnly) && (!!args.latency || !c.latencies || c.latencies.includes(l))
const cells = latencies.flatMap((l) => cases.filter((c) => atLatency(c, l)).map((c) => [l, c] as const))
const warmed = new Set<Case>()
const progress = new Progress(cells.length + (wantThroughput ? 1 : 0) + (wantStream ? 1 : 0) + (wantProfile ? 1 : 0))
log(`${cells.length} cells × ${factories.length} series${wantThroughput ? ', throughput' : ''}${wantStream ? ', stream memory' : ''}${wantProfile ? ', profile' : ''}: about ${mmss(estimateS())} by the budget`)
try {
  for (const [latency, c] of cells) {
    await env.proxy.setLatency(latency)
    const label = `${c.scenario}${c.size ? `×${c.size}` : ''} @${latency}ms`
    log(progress.line(label))
    const subjects = factories
      .filter((f) => !failed.has(f.name) && !slowSkipped.has(caseKey(c, f.name)) && (!f.only || f.only.includes(c.scenario)))
      .filter((f) => c.scenario !== 'scale' || (opened.get(f.name)?.scale && !scaleSkipped.has(caseKey(c, f.name))))
      .filter((f) => c.scenario !== 'typesScale' || (opened.get(f.name)?.typesScale && !scaleSkipped.has(caseKey(c, f.name))))
      .filter((f) => c.scenario !== 'listEndpoint' || opened.get(f.name)?.listEndpoint)
      .map((f) => subject(f, c.scenario === 'coldFlush'))
    const first = !warmed.has(c)
    warmed.add(c)
    const cellOptions = isScale(c.scenario) ? scaleOptions : first && warmUpRounds > 0 ? { ...options, warmUp: { rounds: warmUpRounds, ms: WARM_UP_MS } } : options
    const cell = await measureCell(c, subjects, env.admin, env.wire, latency, cellOptions)
    if (isScale(c.scenario)) capScale(cell.runs, c)
    for (const run of cell.runs.filter((r) => r.samples === 1 && r.medianMs > SLOW_CAP_MS && !isScale(c.scenario))) {
      slowSkipped.add(caseKey(c, run.series))
      slowNotes.push(`${run.series}: ${label} took ${(run.medianMs / 1000).toFixed(0)} s in one run; not run for this case at higher latencies`)
    }
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
  if (wantThroughput) {
    await env.proxy.setLatency(THROUGHPUT_LATENCY)
    log(progress.line(`throughput: ${throughputOptions.clients} clients, pool ${THROUGHPUT_POOL}, ${throughputRounds} rounds of ${throughputOptions.durationMs / 1000} s each`))
    const taking = factories.filter((f) => !failed.has(f.name) && !NOT_IN_THROUGHPUT.has(f.name) && (!f.only || f.only.includes('throughput')))
    const rounds = new Map<string, ThroughputRow[]>(taking.map((f) => [f.name, []]))
    for (let round = 0; round < throughputRounds; round++) {
      // Each round in another order, so that no series always follows the same one.
      for (const factory of [...taking.slice(round % taking.length), ...taking.slice(0, round % taking.length)]) {
        const series = await factory.open(env.latencyUrl, { ...openOptions, poolSize: THROUGHPUT_POOL })
        try {
          const row = await measureThroughput(factory.name, series, env.admin, THROUGHPUT_LATENCY, THROUGHPUT_POOL, throughputOptions)
          rounds.get(factory.name)!.push(row)
          log(`  round ${round + 1}, ${row.series}: ${row.flushesPerSecond.toFixed(0)} flushes/s, p50 ${row.p50Ms.toFixed(1)} ms, p99 ${row.p99Ms.toFixed(1)} ms, ${row.errors} errors${row.firstError ? ` (${row.firstError.split('\n')[0]})` : ''}`)
        } finally {
          await series.close().catch(() => undefined)
        }
      }
    }
    throughput.push(...combineRounds(rounds, 'flushwave'))
    log(throughputTable(throughput))
    progress.finished()
  }
  if (wantProfile) {
    await env.proxy.setLatency(0)
    log(progress.line('profile: the phases of a Flushwave flush at 0 ms'))
    phases = await measurePhases(env.url, env.admin, (size) => (size <= 10 ? 40 : 10))
    log(phaseTable(phases))
    progress.finished()
  }
  // Last: it truncates t01 (a million rows), and nothing timed should follow a TRUNCATE (empty-tables.ts).
  if (wantStream) {
    log(progress.line(`stream memory: em.stream over ${STREAM_ROWS.toLocaleString('en')} rows, straight to the database, a child process per driver`))
    streamMemory = await measureStreamMemory(env.directUrl, env.admin, STREAM_ROWS)
    for (const row of streamMemory) log(`  ${streamLine(row)}`)
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
  scaleNotes,
  typesScaleNotes,
  slowNotes,
  throughput,
  ...(phases ? { phases } : {}),
  ...(streamMemory ? { streamMemory } : {}),
  warmUp: { rounds: warmUpRounds, ms: WARM_UP_MS },
}
const dir = new URL('../results/', import.meta.url)
const stem = args.pooler ? 'latest-pooler' : 'latest'
await mkdir(dir, { recursive: true })
await writeFile(new URL(`${stem}.json`, dir), JSON.stringify(results, null, 2) + '\n')
await writeFile(new URL(`${stem}.md`, dir), markdown(results))
const create1 = runs.filter((r) => r.scenario === 'bulkCreate' && r.size === 1)
if (create1.length > 0) await writeFile(new URL(`${stem}.svg`, dir), chart(create1, 'bulkCreate ×1: 1 author, 10 books, 100 reviews, 50 tags, 50 links'))
const scaled = runs.filter((r) => r.scenario === 'scale')
if (scaled.length > 0) await writeFile(new URL(`${stem}-scale.svg`, dir), scaleChart(scaled))
const typesScaled = runs.filter((r) => r.scenario === 'typesScale')
if (typesScaled.length > 0) await writeFile(new URL(`${stem}-typesScale.svg`, dir), scaleChart(typesScaled, TYPES_SCALE_TITLE))
if (throughput.length > 0) {
  const title = `throughput: ${throughputOptions.clients} clients, mixedFlush ×5, pool of ${THROUGHPUT_POOL}, ${THROUGHPUT_LATENCY} ms latency`
  await writeFile(new URL(`${stem}-throughput.svg`, dir), barChart(title, 'flushes per second (load + flush)', throughput.map((t) => ({ name: t.series, value: t.flushesPerSecond }))))
}
log(`\nwrote packages/bench/results/${stem}.* in ${results.durationS.toFixed(0)} s`)
// A full default run also rewrites the repository's docs/benchmarks.md (and its charts).
if (fullDefault) await writeBenchmarksPage(results)
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

/** After a scale (typesScale) size, skip at the larger sizes the series projected to take over the cap at the next (10×). */
function capScale(cellRuns: readonly Run[], c: Case): void {
  const { size } = c
  const larger = SCALE.filter((x) => x.scenario === c.scenario && x.size > size)
  for (const r of cellRuns) {
    const projected = r.medianMs * 10
    if (larger.length > 0 && projected > SCALE_CAP_MS && !scaleSkipped.has(caseKey(larger[0]!, r.series))) {
      for (const x of larger) scaleSkipped.add(caseKey(x, r.series))
      ;(c.scenario === 'scale' ? scaleNotes : typesScaleNotes).push(`${r.series}: skipped above ${size.toLocaleString('en')} rows (${(r.medianMs / 1000).toFixed(1)} s there, about ${(projected / 1000).toFixed(0)} s projected at 10×)`)
    }
  }
}

/**
 * A rough total by the budgets: per cell and series, the sampling budget plus about 2.5 s of
 * verification, warm run and untimed preparation, and the warm-up of each case's first cell at
 * most; scale, throughput and profile on top.
 */
function estimateS(): number {
  const n = factories.length
  const regular = cells.filter(([, c]) => !isScale(c.scenario)).length
  const scale = cells.length - regular
  const warming = warmUpRounds > 0 ? new Set(cells.filter(([, c]) => !isScale(c.scenario)).map(([, c]) => c)).size * n * WARM_UP_MS : 0
  return (regular * n * (options.budgetMs + 2_500) + scale * n * (scaleOptions.budgetMs + 6_000) + warming) / 1000 +
    (wantThroughput ? n * throughputRounds * (throughputOptions.durationMs / 1000 + 5) : 0) + (wantStream ? 40 : 0) + (wantProfile ? 60 : 0)
}

function message(error: unknown): string {
  return error instanceof Error ? (error.stack ?? error.message) : String(error)
}
