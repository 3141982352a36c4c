/**
 * The quick start: a unit of work flushed through a real network delay (toxiproxy), printing what
 * each flush sent and how many round trips it waited on. `pnpm demo` from the repository root.
 */
import { proxyDatabase, startDatabase, startToxiproxy } from 'devdb'
import { createTablesSql, flushwave, tableOf, tcpNoDelay, type EntityManager, type FlushResult } from 'flushwave'
import postgres from 'postgres'
import { schema } from './schema.js'

const latencyMs = Number(process.env.LATENCY_MS ?? 10)

const db = await startDatabase()
const toxi = await startToxiproxy()
const proxy = await proxyDatabase(toxi, db, { name: 'quickstart' })
const sql = postgres(proxy.url, { ...tcpNoDelay, max: 1, onnotice: () => {} })

try {
  await sql.unsafe('drop table if exists book_tag, review, book, tag, author')
  for (const statement of createTablesSql(schema)) await sql.unsafe(statement)
  await proxy.setLatency(latencyMs)
  console.log(`PostgreSQL ${db.external ? 'from DATABASE_URL' : '(embedded)'} behind toxiproxy, ${latencyMs} ms latency\n`)

  const orm = flushwave({ schema, sql })
  const [, selectMs] = await timed(() => sql`select 1`)
  console.log(`select 1: ${selectMs.toFixed(1)} ms — one round trip\n`)

  const create = (em: EntityManager<typeof schema.defs>, name: string) => {
    const author = em.create('Author', { name })
    for (let b = 1; b <= 10; b++) {
      const book = em.create('Book', { title: `${name}'s book ${b}`, author })
      for (let r = 0; r < 10; r++) em.create('Review', { stars: 1 + (r % 5), book })
      for (let i = 0; i < 5; i++) book.tags.add(em.create('Tag', { name: `tag ${b}.${i}` }))
    }
    return author
  }

  report('create, first flush on this connection', await flushOf(orm.em(), (em) => create(em, 'Ann')))
  report('create, warm connection, pooled ids', await flushOf(orm.em(), (em) => create(em, 'Bob')))

  const em = orm.em()
  const [bob] = await em.find('Author', { name: 'Bob' })
  await em.populate(bob!, 'books')
  await em.populate(bob!.books.items, 'reviews')
  report('update 2 tables (first time)', await flushOf(em, () => {
    for (const book of bob!.books) book.published = true
    for (const review of bob!.books.items.flatMap((b) => b.reviews.items)) review.stars = 5
  }))
  report('update 2 tables (warm)', await flushOf(em, () => {
    for (const book of bob!.books) book.title += '!'
    for (const review of bob!.books.items.flatMap((b) => b.reviews.items)) review.stars = 4
  }))
  report('nothing changed', await em.flush())
} finally {
  await sql.end()
  await proxy.remove()
  await toxi.stop()
  await db.stop()
}

async function flushOf(em: EntityManager<typeof schema.defs>, work: (em: EntityManager<typeof schema.defs>) => unknown): Promise<FlushResult> {
  work(em)
  return em.flush()
}

function report(what: string, r: FlushResult): void {
  const rows = (o: Readonly<Record<string, number>>) => Object.entries(o).map(([t, n]) => `${t} ${n}`).join(', ') || '-'
  console.log(`${what}: ${r.durationMs.toFixed(1)} ms, ${r.roundTrips} round trip(s), ${r.statements} statements, ${r.coldStatements} cold`)
  console.log(`  inserted: ${rows(r.inserted)}; updated: ${rows(r.updated)}; deleted: ${rows(r.deleted)}`)
  r.plan.preparation.forEach((p) => console.log(`  before BEGIN: ${p.reason} (${[...p.counts].map(([t, n]) => `${t} ${n}`).join(', ')})`))
  r.plan.waves.forEach((w, i) => console.log(`  wave ${i + 1}: ${w.ops.map((op) => `${op.kind} ${tableOf(op)}`).join(' → ')}`))
  console.log()
}

async function timed<T>(fn: () => PromiseLike<T>): Promise<[T, number]> {
  const started = performance.now()
  const value = await fn()
  return [value, performance.now() - started]
}
