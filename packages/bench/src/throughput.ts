/**
 * throughput: C clients at once, each doing mixedFlush units of work one after another for a fixed
 * time, against one series instance with a pool of 10 connections, at 5 ms latency. A client's
 * iteration is a request: load the rows (the series' own queries, through its pool) and flush. The
 * rows each iteration updates and deletes are seeded before the clock starts, so nothing but the
 * series touches the database while it runs.
 */
import type postgres from 'postgres'
import { insertIds } from './scenarios.js'
import { mixedTable } from './schema.js'
import type { Series } from './series/types.js'
import { quantile, sortedCopy } from './stats.js'

export interface ThroughputOptions {
  readonly clients: number
  readonly durationMs: number
  /** Tables per unit of work (mixedFlush ×N). */
  readonly tables: number
  /** Most iterations seeded for; a client stops when the seeded rows run out. */
  readonly maxIterations: number
}

export interface ThroughputRow {
  readonly series: string
  readonly clients: number
  readonly poolSize: number
  readonly latencyMs: number
  readonly seconds: number
  readonly flushes: number
  readonly flushesPerSecond: number
  /** Of the timed flush (not the load before it). */
  readonly p50Ms: number
  readonly p99Ms: number
  readonly errors: number
  readonly firstError?: string
}

export async function measureThroughput(name: string, series: Series, admin: postgres.Sql, latencyMs: number, poolSize: number, o: ThroughputOptions): Promise<ThroughputRow> {
  const tables = Array.from({ length: o.tables }, (_, i) => mixedTable(i + 1))
  await admin.unsafe(`truncate ${tables.join(', ')}`)
  // Row pairs (update, delete) per table, handed out in order.
  const seeded = await Promise.all(tables.map((table) => insertIds(admin, table, 2 * o.maxIterations, `tp-seed`)))
  let next = 0
  const take = () => {
    if (next >= o.maxIterations) return undefined
    const i = next++
    return { updateIds: seeded.map((ids) => ids[2 * i]!), deleteIds: seeded.map((ids) => ids[2 * i + 1]!) }
  }
  const latencies: number[] = []
  let errors = 0
  let firstError: string | undefined
  const started = performance.now()
  const deadline = started + o.durationMs
  const client = async (c: number) => {
    for (let k = 0; performance.now() < deadline; k++) {
      const rows = take()
      if (!rows) return
      try {
        const run = await series.mixedFlush({ tables, ...rows, insertName: `tp-${c}-${k}`, updateValue: 42 })
        const t0 = performance.now()
        await run()
        latencies.push(performance.now() - t0)
      } catch (error) {
        errors++
        firstError ??= error instanceof Error ? error.message : String(error)
      }
    }
  }
  await Promise.all(Array.from({ length: o.clients }, (_, c) => client(c)))
  const seconds = (performance.now() - started) / 1000
  const sorted = sortedCopy(latencies)
  return {
    series: name,
    clients: o.clients,
    poolSize,
    latencyMs,
    seconds,
    flushes: latencies.length,
    flushesPerSecond: latencies.length / seconds,
    p50Ms: sorted.length ? quantile(sorted, 0.5) : NaN,
    p99Ms: sorted.length ? quantile(sorted, 0.99) : NaN,
    errors,
    ...(firstError ? { firstError } : {}),
  }
}

export function throughputTable(rows: readonly ThroughputRow[]): string {
  const lines = ['| series | flushes/s | p50 ms | p99 ms | flushes | errors |', '|---|---:|---:|---:|---:|---:|']
  for (const r of rows) lines.push(`| ${r.series} | ${r.flushesPerSecond.toFixed(0)} | ${r.p50Ms.toFixed(1)} | ${r.p99Ms.toFixed(1)} | ${r.flushes} | ${r.errors} |`)
  return lines.join('\n')
}
