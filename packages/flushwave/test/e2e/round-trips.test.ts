import { proxyDatabase, startDatabase, startToxiproxy, type LatencyProxy } from 'devdb'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bookstore } from '../support/bookstore.js'
import { bookstoreUuid } from '../support/bookstore-uuid.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

// Big enough that scheduling noise on a shared 2-core machine cannot pass for a round trip.
const LATENCY = 150

let proxy: LatencyProxy
let db: TestDatabase<typeof bookstore.defs>
let uuidDb: TestDatabase<typeof bookstoreUuid.defs>
let pooled: TestDatabase<typeof bookstore.defs>
beforeAll(async () => {
  proxy = await proxyDatabase(await startToxiproxy(), await startDatabase(), { name: 'round-trips' })
  // One connection each, so "warm" means this connection has prepared every shape.
  db = await testDatabase(bookstore, { url: proxy.url, max: 1, name: 'rt' })
  uuidDb = await testDatabase(bookstoreUuid, { url: proxy.url, max: 1, name: 'rt_uuid' })
  pooled = await testDatabase(bookstore, { url: proxy.url, max: 2, name: 'rt_pool' })
})
afterAll(async () => {
  await db?.close()
  await uuidDb?.close()
  await pooled?.close()
  await proxy?.remove()
})

/** The bookstore graph: 1 author, 10 books, 100 reviews, 50 tags, 50 links; 5 statements. */
type Creates = { create(name: string, data: Record<string, unknown>): { tags: { add(tag: unknown): void } } }
function graph(on: { em(): unknown }, name: string) {
  const em = on.em() as Creates & { flush(): Promise<import('../../src/index.js').FlushResult> }
  const author = em.create('Author', { name })
  for (let b = 0; b < 10; b++) {
    const book = em.create('Book', { title: `${name} ${b}`, author })
    for (let i = 0; i < 5; i++) book.tags.add(em.create('Tag', { name: `${name}-${b}-${i}` }))
    for (let r = 0; r < 10; r++) em.create('Review', { stars: 4, book })
  }
  return em
}

async function timed<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now()
  const value = await fn()
  return [value, performance.now() - started]
}

describe('round trips under real latency (toxiproxy)', () => {
  it('a cold connection: the first flush sends its five new shapes in one pipeline, no describe wait', async () => {
    // The connection has run `select 1` and the DDL, none of the flush's shapes.
    await uuidDb.sql`select 1`
    await proxy.setLatency(LATENCY)
    const [cold, coldMs] = await timed(() => graph(uuidDb.orm, 'cold').flush())
    // Five statement shapes new to the connection, and the ledger insert that follows BEGIN.
    expect(cold).toMatchObject({ waves: 1, statements: 5, coldStatements: 6 })
    expect(cold.plan.preparation).toEqual([])
    expect(cold.roundTrips).toBeLessThanOrEqual(2)
    expect(cold.roundTrips).toBe(1)
    expect(cold.inserted).toEqual({ author: 1, book: 10, review: 100, tag: 50, book_tag: 50 })
    // Before: 11 round trips (the pipeline stalled behind each describe).
    expect(coldMs).toBeGreaterThan(LATENCY)
    expect(coldMs).toBeLessThan(3 * LATENCY)

    // The shapes are now in postgres.js's statement cache: the same flush again binds them at once.
    const [warm, warmMs] = await timed(() => graph(uuidDb.orm, 'again').flush())
    expect(warm).toMatchObject({ waves: 1, statements: 5, coldStatements: 0, roundTrips: 1 })
    expect(warmMs).toBeGreaterThan(LATENCY)
    expect(warmMs).toBeLessThan(2 * LATENCY)
    await proxy.setLatency(0)
    console.log(`cold connection at ${LATENCY} ms: first flush ${coldMs.toFixed(0)} ms (${cold.roundTrips} RTT), again ${warmMs.toFixed(0)} ms (${warm.roundTrips} RTT)`)
  })

  it('counts the id allocation of a cold connection, and the count matches the clock', async () => {
    await proxy.setLatency(LATENCY)
    const [result, ms] = await timed(() => graph(db.orm, 'cold').flush())
    // Five new shapes in the pipeline, and a new id-allocation statement before it: none waits on a describe.
    expect(result.coldStatements).toBe(6) // five shapes and the ledger insert
    expect(result.plan.preparation.map((p) => p.roundTrips)).toEqual([1])
    // allocation 1 + pipeline [begin, xid, 5 inserts, commit] 1 (before: 2 + 11).
    expect(result.roundTrips).toBe(2)
    expect(ms).toBeGreaterThan((result.roundTrips - 1) * LATENCY)
    expect(ms).toBeLessThan((result.roundTrips + 1.5) * LATENCY)
    await proxy.setLatency(0)
  })

  it('waits on exactly one round trip for a warm create flush with pooled ids', async () => {
    await proxy.setLatency(LATENCY)
    const [, selectMs] = await timed(() => db.sql`select 1`)
    db.queries.length = 0
    const em = graph(db.orm, 'warm')
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

  it('warmUp of the whole schema on a pool of 2 waits on about one round trip; the first flush then waits on one', async () => {
    // Both connections of the pool open first: opening one through the proxy costs latencies of its own.
    await Promise.all([0, 1].map(() => pooled.sql`select pg_sleep(0.1)`))
    await proxy.setLatency(LATENCY)
    const [warm, ms] = await timed(() => pooled.orm.warmUp())
    expect(warm).toMatchObject({ connections: 2, prepares: true, roundTrips: 1 })
    expect(warm.idsFetched).toEqual({ author: 257, book: 257, review: 257, tag: 257 })
    // Both connections at once, each one pipeline (before: a round trip or two per shape per connection).
    expect(ms).toBeGreaterThan(LATENCY)
    expect(ms).toBeLessThan(3 * LATENCY)

    pooled.queries.length = 0
    const [first, firstMs] = await timed(() => graph(pooled.orm, 'after warm-up').flush())
    expect(pooled.queries.filter((q) => q.phase === 'allocate')).toEqual([])
    expect(first).toMatchObject({ waves: 1, statements: 5, coldStatements: 0, roundTrips: 1 })
    expect(first.plan.preparation).toEqual([])
    expect(firstMs).toBeGreaterThan(LATENCY)
    expect(firstMs).toBeLessThan(2 * LATENCY)
    await proxy.setLatency(0)
    console.log(`warmUp at ${LATENCY} ms, pool of 2: ${ms.toFixed(0)} ms (${warm.roundTrips} RTT, ${warm.prepared} statements prepared); first flush after it ${firstMs.toFixed(0)} ms`)
  })
})
