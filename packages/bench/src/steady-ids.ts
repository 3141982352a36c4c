/**
 * Id allocation in steady state: bulkCreate×1 (311 rows with links) flushed 200 times in a row at
 * 0 ms, after 20 warm-up flushes, on one connection. Prints the latency quantiles and how many
 * flushes waited on an id allocation (none should: the pool refills in the background).
 *
 *   pnpm --filter bench exec tsx src/steady-ids.ts [pooled]
 *
 * `pooled` first migrates the tables' identity columns to `increment by 1000` (pooled sequences).
 */
import { startDatabase } from 'devdb'
import { flushwave, tcpNoDelay } from 'flushwave'
import postgres from 'postgres'
import { benchDatabase } from './database.js'
import { graph } from './data.js'
import { benchSchema } from './series/flushwave.js'

const WARM_UP = 20
const FLUSHES = 200
const db = await startDatabase()
const bench = await benchDatabase(db.url)
const sql = postgres(bench.url, { ...tcpNoDelay, max: 1, onnotice: () => {} })
try {
  if (process.argv[2] === 'pooled') {
    for (const table of ['author', 'book', 'book_review', 'tag']) await bench.admin.unsafe(`alter table ${table} alter column id set increment by 1000`)
  }
  const orm = flushwave({ schema: benchSchema, sql })
  const times: number[] = []
  let waited = 0
  for (let i = 0; i < WARM_UP + FLUSHES; i++) {
    const g = graph(1, `s${i}`)
    const em = orm.em()
    const started = performance.now()
    const authors = g.authors.map((a) => em.create('Author', a))
    const books = g.books.map((b) => em.create('Book', { title: b.title, pages: b.pages, author: authors[b.author]! }))
    for (const r of g.reviews) em.create('BookReview', { rating: r.rating, text: r.text, book: books[r.book]! })
    const tags = g.tags.map((x) => em.create('Tag', x))
    for (const l of g.bookTags) books[l.book]!.tags.add(tags[l.tag]!)
    const result = await em.flush()
    if (i < WARM_UP) continue
    times.push(performance.now() - started)
    if (result.plan.preparation.length > 0) waited++
  }
  times.sort((a, b) => a - b)
  const q = (p: number) => times[Math.min(times.length - 1, Math.floor(p * times.length))]!.toFixed(2)
  console.log(`bulkCreate×1 ×${FLUSHES}: median ${q(0.5)} ms, p95 ${q(0.95)} ms, p99 ${q(0.99)} ms; flushes that waited on id allocation: ${waited}`)
} finally {
  await sql.end()
  await bench.drop()
  await db.stop()
}
