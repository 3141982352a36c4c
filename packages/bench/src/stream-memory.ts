/**
 * em.stream's memory: seeds N rows (1,000,000 by default) into one table with one `insert … select
 * generate_series` (untimed), then, in a fresh child process per driver, iterates
 * `em.stream('T01', {}, { batchSize: 1000 })` over all of them, sampling RSS and heapUsed once per
 * batch, and prints the start RSS (after connecting and a full GC), the peak, the difference, the
 * rows seen and the time. The project's goal: the peak stays within 64 MB of the start.
 *
 *   pnpm --filter bench exec tsx src/stream-memory.ts [rows] [drivers: postgres,pg,raw]
 *
 * `raw` streams the same rows through postgres.js's own cursor (`.cursor(1000)`), no ORM: what the
 * driver and V8's heap sizing cost alone. STREAM_TRACE=1 prints RSS and heapUsed every tenth of
 * the rows; STREAM_NODE_FLAGS passes node flags to the children (e.g. `--max-semi-space-size=4`).
 *
 * Straight to the embedded database (no latency proxy). `measureStreamMemory` is what `pnpm bench`
 * runs for its "em.stream memory" section.
 */
import { spawn } from 'node:child_process'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { startDatabase } from 'devdb'
import { flushwave, tcpNoDelay } from 'flushwave'
import pg from 'pg'
import postgres from 'postgres'
import { benchDatabase } from './database.js'
import { fullGc } from './gc.js'
import { benchSchema } from './series/flushwave.js'

/** The goal: the peak RSS of a whole stream within this much of the RSS before it. */
export const STREAM_BUDGET_MB = 64
/** Flushwave on postgres.js and on node-postgres; `raw`: postgres.js's own cursor, no ORM (the floor). */
export const STREAM_DRIVERS = ['postgres', 'pg', 'raw'] as const
export type StreamDriver = (typeof STREAM_DRIVERS)[number]
const TABLE = 't01'
const BATCH = 1_000

export interface StreamMemoryRow {
  readonly driver: StreamDriver
  /** Node flags the child ran with ('' for none; absent in results written before they were recorded). */
  readonly nodeFlags?: string
  readonly rows: number
  readonly batchSize: number
  readonly seconds: number
  readonly startRssMb: number
  readonly peakRssMb: number
  readonly startHeapMb: number
  readonly peakHeapMb: number
  /** heapUsed after the loop and a full GC: what the stream left behind. */
  readonly endHeapMb: number
  /** peakRssMb − startRssMb <= STREAM_BUDGET_MB */
  readonly holds: boolean
  /** [rows seen, RSS MB, heapUsed MB] every tenth of the rows. */
  readonly trace: readonly (readonly [number, number, number])[]
}

const mb = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10

/**
 * Seeds `rows` rows into t01 through `admin` (truncated first: a million rows deleted would leave a
 * million dead ones), untimed. Run it after the timed cells (see emptyTables on TRUNCATE).
 */
export async function seedStreamRows(admin: postgres.Sql, rows: number): Promise<void> {
  await admin.unsafe(`truncate ${TABLE}`)
  await admin.unsafe(`insert into ${TABLE} (name, value) select 'row-' || i, i % 1000 from generate_series(1, $1::int) i`, [rows])
  await admin.unsafe(`analyze ${TABLE}`)
}

/**
 * V8's young generation grows to two 16 MB semi-spaces on 64-bit Node, and garbage promoted out of it waits for
 * the next major GC: a fast loop's RSS rises by that much whatever allocates. The bench streams once
 * more with the young generation capped, to show how much of the peak is that sizing.
 */
export const SMALL_YOUNG_GENERATION = '--max-semi-space-size=4'

/** One stream to measure: a driver and the node flags of its child process. */
export interface StreamRun {
  readonly driver: StreamDriver
  readonly nodeFlags: string
}

/** What `pnpm bench` measures: every driver as Node starts by default, then postgres.js and the floor with a small young generation. */
export const STREAM_RUNS: readonly StreamRun[] = [
  ...STREAM_DRIVERS.map((driver) => ({ driver, nodeFlags: '' })),
  { driver: 'postgres', nodeFlags: SMALL_YOUNG_GENERATION },
  { driver: 'raw', nodeFlags: SMALL_YOUNG_GENERATION },
]

/** Runs the stream in a fresh child process (this file, `--child`) and returns what it measured. */
export async function streamInChild(url: string, run: StreamRun, rows: number): Promise<StreamMemoryRow> {
  const file = fileURLToPath(import.meta.url)
  const { driver, nodeFlags } = run
  const flags = nodeFlags.split(' ').filter(Boolean)
  const child = spawn(process.execPath, [...flags, '--import', 'tsx', file, '--child', url, driver, String(rows)], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  if (code !== 0) throw new Error(`stream-memory child (${driver}) exited with ${code}: ${out}`)
  return { ...(JSON.parse(out.trim().split('\n').at(-1)!) as StreamMemoryRow), nodeFlags }
}

/** The child: connect, full GC, then stream every row of t01 and sample memory once per batch. */
async function child(url: string, driver: StreamDriver, expected: number): Promise<StreamMemoryRow> {
  let close: () => Promise<void>
  let rowsOf: () => AsyncIterable<{ value: number }>
  if (driver === 'pg') {
    const pool = new pg.Pool({ connectionString: url, max: 1 })
    await pool.query('select 1')
    const orm = flushwave({ schema: benchSchema, pg: pool })
    rowsOf = () => orm.em().stream('T01', {}, { batchSize: BATCH })
    close = () => pool.end()
  } else {
    const sql = postgres(url, { ...tcpNoDelay, max: 1, onnotice: () => {} })
    await sql`select 1`
    const orm = flushwave({ schema: benchSchema, sql })
    rowsOf =
      driver === 'raw'
        ? async function* () {
            for await (const rows of sql`select id, name, value, updated_at from t01`.cursor(BATCH)) for (const row of rows) yield row as unknown as { value: number }
          }
        : () => orm.em().stream('T01', {}, { batchSize: BATCH })
    close = () => sql.end()
  }
  // Warm the code path on a short stream, so that the start RSS includes the code the loop runs.
  let warm = 0
  for await (const _ of rowsOf()) if (++warm >= 2 * BATCH) break
  await fullGc()
  await fullGc()
  const start = process.memoryUsage()
  let peakRss = start.rss
  let peakHeap = start.heapUsed
  const trace: [number, number, number][] = [[0, mb(start.rss), mb(start.heapUsed)]]
  const every = Math.max(BATCH, Math.floor(expected / 10 / BATCH) * BATCH)
  let seen = 0
  let sum = 0
  const t0 = performance.now()
  for await (const row of rowsOf()) {
    seen++
    sum += row.value
    if (seen % BATCH === 0) {
      const m = process.memoryUsage()
      if (m.rss > peakRss) peakRss = m.rss
      if (m.heapUsed > peakHeap) peakHeap = m.heapUsed
      if (seen % every === 0) trace.push([seen, mb(m.rss), mb(m.heapUsed)])
    }
  }
  const seconds = (performance.now() - t0) / 1000
  const end = process.memoryUsage()
  peakRss = Math.max(peakRss, end.rss)
  peakHeap = Math.max(peakHeap, end.heapUsed)
  await fullGc()
  const endHeap = process.memoryUsage().heapUsed
  await close()
  // Every row read, and read whole: a stream that stops early or skips rows fails here.
  let expectedSum = 0
  for (let i = 1; i <= expected; i++) expectedSum += i % 1000
  if (seen !== expected || sum !== expectedSum) throw new Error(`stream read ${seen} rows (sum ${sum}), expected ${expected} (sum ${expectedSum})`)
  return {
    driver,
    rows: seen,
    batchSize: BATCH,
    seconds: Math.round(seconds * 100) / 100,
    startRssMb: mb(start.rss),
    peakRssMb: mb(peakRss),
    startHeapMb: mb(start.heapUsed),
    peakHeapMb: mb(peakHeap),
    endHeapMb: mb(endHeap),
    holds: peakRss - start.rss <= STREAM_BUDGET_MB * 2 ** 20,
    trace,
  }
}

/** The driver as the tables name it. */
export const streamDriverName = (d: StreamDriver) => ({ postgres: 'Flushwave on postgres.js', pg: 'Flushwave on node-postgres', raw: 'postgres.js cursor, no ORM' })[d]

/** The driver and, when the child had any, its node flags. */
export const streamRunName = (r: StreamMemoryRow) => streamDriverName(r.driver) + (r.nodeFlags ? `, node ${r.nodeFlags}` : '')

export function streamLine(r: StreamMemoryRow): string {
  const rate = Math.round(r.rows / r.seconds).toLocaleString('en')
  return (
    `${streamRunName(r)}: ${r.rows.toLocaleString('en')} rows in ${r.seconds.toFixed(1)} s (${rate} rows/s), ` +
    `RSS ${r.startRssMb} MB at the start, peak ${r.peakRssMb} MB (+${(r.peakRssMb - r.startRssMb).toFixed(1)} MB), ` +
    `heapUsed ${r.startHeapMb} → peak ${r.peakHeapMb} MB (${r.endHeapMb} MB after a full GC at the end): ${r.holds ? 'within' : 'NOT within'} ${STREAM_BUDGET_MB} MB`
  )
}

/** Seeds through `admin`, streams in a child per run from `url`, then empties the table again. */
export async function measureStreamMemory(url: string, admin: postgres.Sql, rows: number, runs: readonly StreamRun[] = STREAM_RUNS): Promise<StreamMemoryRow[]> {
  await seedStreamRows(admin, rows)
  const out: StreamMemoryRow[] = []
  try {
    for (const run of runs) out.push(await streamInChild(url, run, rows))
  } finally {
    await admin.unsafe(`truncate ${TABLE}`)
  }
  return out
}

const entry = import.meta.url === pathToFileURL(process.argv[1] ?? '').href
if (entry && process.argv[2] === '--child') {
  const [, , , url, driver, rows] = process.argv
  const row = await child(url!, driver as StreamDriver, Number(rows))
  process.stdout.write(JSON.stringify(row) + '\n')
} else if (entry) {
  const rows = Number(process.argv[2] ?? 1_000_000)
  const drivers = (process.argv[3]?.split(',') ?? [...STREAM_DRIVERS]) as StreamDriver[]
  if (!Number.isSafeInteger(rows) || rows <= 0) throw new Error(`rows must be a positive integer, not ${process.argv[2]}`)
  for (const d of drivers) if (!STREAM_DRIVERS.includes(d)) throw new Error(`driver must be one of ${STREAM_DRIVERS.join(', ')}, not ${d}`)
  const db = await startDatabase()
  const bench = await benchDatabase(db.url)
  try {
    const t0 = performance.now()
    await seedStreamRows(bench.admin, rows)
    console.log(`seeded ${rows.toLocaleString('en')} rows into ${TABLE} in ${((performance.now() - t0) / 1000).toFixed(1)} s (untimed)`)
    let failed = false
    for (const driver of drivers) {
      const r = await streamInChild(bench.url, { driver, nodeFlags: process.env.STREAM_NODE_FLAGS ?? '' }, rows)
      console.log(streamLine(r))
      if (process.env.STREAM_TRACE) console.log(`  rows, RSS MB, heapUsed MB: ${r.trace.map((t) => `[${t.join(', ')}]`).join(' ')}`)
      if (r.driver !== 'raw') failed ||= !r.holds
    }
    process.exitCode = failed ? 1 : 0
  } finally {
    await bench.drop()
    await db.stop()
  }
}
