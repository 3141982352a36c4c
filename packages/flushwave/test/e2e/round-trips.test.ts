import { proxyDatabase, startDatabase, startToxiproxy, type LatencyProxy } from 'devdb'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bookstore } from '../support/bookstore.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

// Big enough that scheduling noise on a shared 2-core machine cannot pass for a round trip.
const LATENCY = 150

let proxy: LatencyProxy
let db: TestDatabase<typeof bookstore.defs>
beforeAll(async () => {
  proxy = await proxyDatabase(await startToxiproxy(), await startDatabase(), { name: 'round-trips' })
  // One connection, so "warm" means this connection has prepared every shape.
  db = await testDatabase(bookstore, { url: proxy.url, max: 1, name: 'rt' })
})
afterAll(async () => {
  await db.close()
  await proxy.remove()
})

function graph(em: ReturnType<typeof db.orm.em>, name: string) {
  const author = em.create('Author', { name })
  for (let b = 0; b < 10; b++) {
    const book = em.create('Book', { title: `${name} ${b}`, author })
    for (let i = 0; i < 5; i++) book.tags.add(em.create('Tag', { name: `${name}-${b}-${i}` }))
    for (let r = 0; r < 10; r++) em.create('Review', { stars: 4, book })
  }
  return author
}

async function timed<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now()
  const value = await fn()
  return [value, performance.now() - started]
}

describe('round trips under real latency (toxiproxy)', () => {
  it('counts the describe round trips of a cold connection, and they match the clock', async () => {
    await proxy.setLatency(LATENCY)
    const em = db.orm.em()
    graph(em, 'cold')
    const [result, ms] = await timed(() => em.flush())
    // Five new shapes (four inserts and the link insert) and a fresh id-allocation statement: postgres.js
    // describes each before binding it, and after the first one the pipeline goes query by query.
    expect(result.coldStatements).toBe(5)
    expect(result.plan.preparation.map((p) => p.roundTrips)).toEqual([2])
    // allocation 2 + pipeline [begin, 5 inserts, commit] with the first cold at index 1: 2 + 5 + 4.
    expect(result.roundTrips).toBe(2 + 11)
    expect(ms).toBeGreaterThan((result.roundTrips - 1) * LATENCY)
    expect(ms).toBeLessThan((result.roundTrips + 1.5) * LATENCY)
    await proxy.setLatency(0)
  })

  it('waits on exactly one round trip for a warm create flush with pooled ids', async () => {
    await proxy.setLatency(LATENCY)
    const [, selectMs] = await timed(() => db.sql`select 1`)
    const em = db.orm.em()
    db.queries.length = 0
    graph(em, 'warm')
    const [result, ms] = await timed(() => em.flush())
    expect(db.queries.filter((q) => q.phase === 'allocate')).toEqual([])
    expect(result).toMatchObject({ waves: 1, statements: 5, coldStatements: 0, roundTrips: 1 })
    expect(result.inserted).toEqual({ author: 1, book: 10, review: 100, tag: 50, book_tag: 50 })
    // About one latency (like `select 1`), not three (BEGIN, batch, COMMIT awaited apart).
    expect(ms).toBeGreaterThan(LATENCY)
    expect(ms).toBeLessThan(2 * LATENCY)
    expect(selectMs).toBeLessThan(2 * LATENCY)
    await proxy.setLatency(0)
  })

  it('waits on exactly one round trip for a warm update-only flush', async () => {
    const em = db.orm.em()
    const books = await em.find('Book', { title: { like: 'warm %' } })
    await em.populate(books, 'reviews')
    // Warm the update shapes on this connection.
    for (const b of books) b.pages = 1
    for (const r of books.flatMap((b) => b.reviews.items)) r.body = 'warm'
    await em.flush()

    await proxy.setLatency(LATENCY)
    for (const b of books) b.pages = 2
    for (const r of books.flatMap((b) => b.reviews.items)) r.stars = 5
    const [result, ms] = await timed(() => em.flush())
    expect(result).toMatchObject({ waves: 1, statements: 2, coldStatements: 0, roundTrips: 1 })
    expect(result.updated).toEqual({ book: 10, review: 100 })
    expect(ms).toBeGreaterThan(LATENCY)
    expect(ms).toBeLessThan(2 * LATENCY)
    await proxy.setLatency(0)
    const [row] = await db.sql`select count(*)::int as n from review where stars = 5 and body = 'warm'`
    expect(row!.n).toBe(100)
  })
})
