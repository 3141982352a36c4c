/**
 * pnpm bench [--quick] [--latency 0,2,10] [--series flushwave,typeorm] [--scenario bulkCreate]
 *
 * One embedded PostgreSQL (or DATABASE_URL), one real toxiproxy (or TOXIPROXY_URL) adding latency
 * to every server→client chunk, and every series doing the same units of work through it, side by
 * side in one run. Writes results/latest.json, latest.md and latest.svg.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import os from 'node:os'
import { parseArgs } from 'node:util'
import { proxyDatabase, startDatabase, startToxiproxy } from 'devdb'
import { chart } from './chart.js'
import { benchDatabase, via } from './database.js'
import { updateReadme } from './readme.js'
import { markdown, type Results } from './report.js'
import { measureCell, type Case, type MeasureOptions, type Run } from './runner.js'
import type { ScenarioName } from './scenarios.js'
import { loadSeries, SERIES } from './series/index.js'
import type { Series } from './series/types.js'
import { WireCounter } from './wire.js'

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    latency: { type: 'string' },
    series: { type: 'string' },
    scenario: { type: 'string' },
  },
})

const FULL: Case[] = [
  { scenario: 'bulkCreate', size: 1, zeroLatencyOnly: false },
  { scenario: 'bulkCreate', size: 10, zeroLatencyOnly: false },
  { scenario: 'bulkCreate', size: 100, zeroLatencyOnly: false },
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

const list = (s: string | undefined) => s?.split(',').map((x) => x.trim()).filter(Boolean)
const latencies = (list(args.latency) ?? (args.quick ? ['0', '2'] : ['0', '1', '2', '5', '10'])).map(Number)
const scenarios = list(args.scenario) as ScenarioName[] | undefined
const cases = (args.quick ? QUICK : FULL).filter((c) => !scenarios || scenarios.includes(c.scenario))
const seriesNames = list(args.series) ?? [...SERIES]
const options: MeasureOptions = args.quick ? { budgetMs: 1_500, minSamples: 5, maxSamples: 20 } : { budgetMs: 3_000, minSamples: 5, maxSamples: 30 }

const startedAt = new Date()
const log = (line: string) => process.stderr.write(line + '\n')
const db = await startDatabase()
const toxi = await startToxiproxy()
const bench = await benchDatabase(db.url)
const proxy = await proxyDatabase(toxi, db, { name: 'bench' })
const wire = await WireCounter.start({ host: proxy.host, port: proxy.port })
const url = via(bench.url, '127.0.0.1', wire.port)
const [{ version }] = (await bench.admin`select current_setting('server_version') as version`) as unknown as [{ version: string }]

const opened: [string, Series][] = []
const unavailable: { series: string; error: string }[] = []
for (const name of seriesNames) {
  try {
    opened.push([name, await (await loadSeries(name)).open(url)])
  } catch (error) {
    unavailable.push({ series: name, error: message(error) })
    log(`skip ${name}: ${message(error).split('\n')[0]}`)
  }
}

const runs: Run[] = []
const failed = new Set<string>()
const cells = latencies.flatMap((l) => cases.filter((c) => l === 0 || !c.zeroLatencyOnly).map((c) => [l, c] as const))
const total = cells.length * opened.length
let done = 0
try {
  for (const latency of latencies) {
    await proxy.setLatency(latency)
    for (const c of cases) {
      if (c.zeroLatencyOnly && latency !== 0) continue
      for (const [name, series] of opened) {
        done++
        const label = `[${done}/${total}] ${c.scenario}${c.size ? `×${c.size}` : ''} @${latency}ms ${name}`
        if (failed.has(name)) continue
        log(`${label} …`)
        try {
          const run = await measureCell(c, name, series, bench.admin, wire, latency, options)
          runs.push(run)
          log(`${label}: median ${run.medianMs} ms, p95 ${run.p95Ms} ms, n=${run.samples}, ${run.statements} statements, ${run.roundTrips} round trips`)
        } catch (error) {
          // A series that writes the wrong rows must not be timed at all.
          failed.add(name)
          unavailable.push({ series: name, error: `${c.scenario}${c.size ? `×${c.size}` : ''}: ${message(error)}` })
          log(`FAIL ${label}: ${message(error)}`)
        }
      }
    }
  }
} finally {
  await proxy.setLatency(0)
  for (const [, series] of opened) await series.close().catch(() => undefined)
  await wire.close()
  await proxy.remove()
  await bench.drop()
  await toxi.stop()
  await db.stop()
}

const results: Results = {
  startedAt: startedAt.toISOString(),
  machine: {
    cpu: os.cpus()[0]?.model.trim() ?? 'unknown',
    cores: os.cpus().length,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    postgres: `${version}${db.external ? '' : ' (embedded)'}`,
    latency: 'toxiproxy 2.12, downstream',
  },
  runs,
  unavailable,
  durationS: (Date.now() - startedAt.getTime()) / 1000,
}
const dir = new URL('../results/', import.meta.url)
await mkdir(dir, { recursive: true })
await writeFile(new URL('latest.json', dir), JSON.stringify(results, null, 2) + '\n')
await writeFile(new URL('latest.md', dir), markdown(results))
const create1 = runs.filter((r) => r.scenario === 'bulkCreate' && r.size === 1)
await writeFile(new URL('latest.svg', dir), chart(create1, 'bulkCreate ×1: 1 author, 10 books, 100 reviews, 50 tags, 50 links'))
log(`\nwrote packages/bench/results/latest.{json,md,svg} in ${results.durationS.toFixed(0)} s`)
// A full default run also refreshes the benchmark section of the repository's README.
if (!args.quick && !args.latency && !args.series && !args.scenario) await updateReadme(results)
process.stdout.write(markdown(results))
process.exitCode = failed.size > 0 ? 1 : 0

function message(error: unknown): string {
  return error instanceof Error ? (error.stack ?? error.message) : String(error)
}
