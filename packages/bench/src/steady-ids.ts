/**
 * Id allocation in steady state: bulkCreate×1 (311 rows with links) flushed 200 times at 0 ms on one
 * connection, after 20 warm-up flushes. Prints the latency quantiles and how many flushes waited on
 * an id allocation (none should: the pool refills in the background, between flushes).
 *
 * The same unit of work by hand (raw-pipelined: ids from nextval before the timed part, one unnest
 * insert per table, BEGIN…COMMIT pipelined) runs in alternating blocks of 20 on a connection of its
 * own, so that both see the same server: its tail is the floor (every COMMIT waits on a WAL fsync,
 * and this machine's disk is shared), and Flushwave's tail is judged against it.
 *
 *   [POOL=n] pnpm --filter bench exec tsx src/steady-ids.ts [pooled]   (POOL: connections, default 1)
 *
 * `pooled` first migrates the tables' identity columns to `increment by 1000` (pooled sequences).
 */
import { startDatabase } from 'devdb'
import { flushwave, tcpNoDelay } from 'flushwave'
import postgres from 'postgres'
import { benchDatabase } from './database.js'
import { graph } from './data.js'
import { createGraph, benchSchema } from './series/flushwave.js'
import { series as rawPipelined } from './series/raw-pipelined.js'

const WARM_UP = 20
const FLUSHES = 200
const BLOCK = 20
const db = await startDatabase()
const bench = await benchDatabase(db.url)
const sql = postgres(bench.url, { ...tcpNoDelay, max: Number(process.env.POOL ?? 1), onnotice: () => {} })
const raw = await rawPipelined.open(bench.url)
try {
  if (process.argv[2] === 'pooled') {
    for (const table of ['author', 'book', 'book_review', 'tag']) await bench.admin.unsafe(`alter table ${table} alter column id set increment by 1000`)
  }
  const orm = flushwave({ schema: benchSchema, sql })
  const flushwaveMs: number[] = []
  const rawMs: number[] = []
  let waited = 0
  let marker = 0
  const flushwaveOnce = async (): Promise<{ ms: number; waited: boolean }> => {
    const g = graph(1, `s${++marker}`)
    const em = orm.em()
    const started = performance.now()
    createGraph(em, g)
    const result = await em.flush()
    return { ms: performance.now() - started, waited: result.plan.preparation.length > 0 }
  }
  const rawOnce = async (): Promise<number> => {
    const run = await raw.bulkCreate(graph(1, `r${++marker}`))
    const started = performance.now()
    await run()
    return performance.now() - started
  }
  for (let i = 0; i < WARM_UP; i++) await flushwaveOnce(), await rawOnce()
  for (let block = 0; block < FLUSHES / BLOCK; block++) {
    for (let i = 0; i < BLOCK; i++) {
      const { ms, waited: w } = await flushwaveOnce()
      flushwaveMs.push(ms)
      if (w) waited++
    }
    for (let i = 0; i < BLOCK; i++) rawMs.push(await rawOnce())
  }
  const describe = (times: number[]) => {
    const sorted = [...times].sort((a, b) => a - b)
    const q = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!
    return `median ${q(0.5).toFixed(2)} ms, p95 ${q(0.95).toFixed(2)} ms, p99 ${q(0.99).toFixed(2)} ms (p99 ${(q(0.99) / q(0.5)).toFixed(1)}× the median)`
  }
  console.log(`bulkCreate×1 ×${FLUSHES}, flushwave:     ${describe(flushwaveMs)}; flushes that waited on id allocation: ${waited}`)
  console.log(`bulkCreate×1 ×${FLUSHES}, raw-pipelined: ${describe(rawMs)}`)
} finally {
  await sql.end()
  await raw.close()
  await bench.drop()
  await db.stop()
}
