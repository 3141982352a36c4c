/**
 * throughput: C clients at once, each doing mixedFlush units of work one after another for a fixed
 * time, against one series instance with a pool of 10 connections, at 5 ms latency (through the latency
 * proxy alone: the wire counter, which relays in the bench's own process, is left out). A client's
 * iteration is a request: load the rows (the series' own queries, through its pool) and flush. The
 * rows each iteration updates and deletes are seeded before the clock starts, so nothing but the
 * series touches the database while it runs. The series take turns in rounds (combineRounds): a
 * ratio compares two series' slices of the same round, not two stretches minutes apart.
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
  /** flushes/s of each round, in round order (one when measured alone). */
  readonly perRound?: readonly number[]
  /** flushwave's flushes/s ÷ this series', per round: the median and the lowest and highest (above 1 is slower). */
  readonly ratio?: { readonly median: number; readonly low: number; readonly high: number }
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

/**
 * One row per series from its rounds (each series' rows in round order): flushes/s the median of
 * its rounds, p50 and p99 the median of the rounds', flushes and errors summed, and the ratio to
 * `baseline` from the rounds both ran.
 */
export function combineRounds(rounds: ReadonlyMap<string, readonly ThroughputRow[]>, baseline: string): ThroughputRow[] {
  const base = rounds.get(baseline)
  return [...rounds].map(([series, rows]) => {
    const perRound = rows.map((r) => r.flushesPerSecond)
    const ratios = base && series !== baseline ? rows.flatMap((r, i) => (base[i] && r.flushesPerSecond > 0 ? [base[i]!.flushesPerSecond / r.flushesPerSecond] : [])) : []
    const sortedRatios = sortedCopy(ratios)
    const firstError = rows.find((r) => r.firstError)?.firstError
    return {
      ...rows[0]!,
      seconds: rows.reduce((a, r) => a + r.seconds, 0),
      flushes: rows.reduce((a, r) => a + r.flushes, 0),
      flushesPerSecond: quantile(sortedCopy(perRound), 0.5),
      p50Ms: quantile(sortedCopy(rows.map((r) => r.p50Ms)), 0.5),
      p99Ms: quantile(sortedCopy(rows.map((r) => r.p99Ms)), 0.5),
      errors: rows.reduce((a, r) => a + r.errors, 0),
      perRound,
      ...(sortedRatios.length > 0 ? { ratio: { median: quantile(sortedRatios, 0.5), low: sortedRatios[0]!, high: sortedRatios.at(-1)! } } : {}),
      ...(firstError ? { firstError } : {}),
    }
  })
}

export function throughputTable(rows: readonly ThroughputRow[]): string {
  const lines = ['| series | flushes/s | ÷ flushwave | each round | p50 ms | p99 ms | flushes | errors |', '|---|---:|---:|---:|---:|---:|---:|---:|']
  for (const r of rows) {
    const ratio = r.ratio ? `${r.ratio.median.toFixed(2)}× (${r.ratio.low.toFixed(2)}–${r.ratio.high.toFixed(2)})` : '–'
    const rounds = (r.perRound ?? [r.flushesPerSecond]).map((x) => x.toFixed(0)).join(', ')
    lines.push(`| ${r.series} | ${r.flushesPerSecond.toFixed(0)} | ${ratio} | ${rounds} | ${r.p50Ms.toFixed(1)} | ${r.p99Ms.toFixed(1)} | ${r.flushes} | ${r.errors} |`)
  }
  return lines.join('\n')
}
