/**
 * One flush of 100,000 new rows over four tables, straight to the database: time, statements,
 * round trips and memory. `pnpm --filter bench exec tsx src/big-flush.ts [rows]`
 */
import { startDatabase } from 'devdb'
import { flushwave, tcpNoDelay } from 'flushwave'
import postgres from 'postgres'
import { benchDatabase } from './database.js'
import { benchSchema } from './series/flushwave.js'

const total = Number(process.argv[2] ?? 100_000)
const db = await startDatabase()
const bench = await benchDatabase(db.url)
const sql = postgres(bench.url, { ...tcpNoDelay, max: 1, onnotice: () => {} })
const orm = flushwave({ schema: benchSchema, sql })
try {
  global.gc?.()
  const heapBefore = process.memoryUsage().heapUsed
  // Per author: 10 books, 10 reviews per book, 5 tags per book with links: 161 rows with links.
  const authors = Math.round(total / 161)
  const em = orm.em()
  const started = performance.now()
  for (let a = 0; a < authors; a++) {
    const author = em.create('Author', { firstName: 'f', lastName: 'l', email: `big${a}@example.com` })
    for (let b = 0; b < 10; b++) {
      const book = em.create('Book', { title: `b${b}`, author })
      for (let r = 0; r < 10; r++) em.create('BookReview', { rating: 1 + (r % 5), book })
      for (let t = 0; t < 5; t++) book.tags.add(em.create('Tag', { name: `t${a}.${b}.${t}` }))
    }
  }
  const created = performance.now()
  const heapCreated = process.memoryUsage().heapUsed
  const result = await em.flush()
  const flushed = performance.now()
  const peak = process.memoryUsage()
  const rows = Object.values(result.inserted).reduce((a, b) => a + b, 0)
  console.log(JSON.stringify({
    rows,
    inserted: result.inserted,
    createMs: Math.round(created - started),
    flushMs: Math.round(flushed - created),
    statements: result.statements,
    roundTrips: result.roundTrips,
    coldStatements: result.coldStatements,
    heapForEntitiesMiB: Math.round((heapCreated - heapBefore) / 2 ** 20),
    heapAfterFlushMiB: Math.round(peak.heapUsed / 2 ** 20),
    rssMiB: Math.round(peak.rss / 2 ** 20),
  }, null, 2))
} finally {
  await sql.end()
  await bench.drop()
  await db.stop()
}
