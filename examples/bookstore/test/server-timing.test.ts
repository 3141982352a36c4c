import { proxyDatabase, startDatabase, startToxiproxy, type LatencyProxy } from 'devdb'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestBookstore, type TestBookstore } from './support/bookstore.js'

// Large enough that scheduling noise on a busy 2-core machine cannot pass for a round trip.
const LATENCY = 100

let proxy: LatencyProxy
let t: TestBookstore
beforeAll(async () => {
  proxy = await proxyDatabase(await startToxiproxy(), await startDatabase(), { name: 'bookstore-timing' })
  // One connection in the app's pool, so that "warm" means this connection has prepared every shape.
  t = await startTestBookstore({ name: 'bookstore_timing', poolMax: 1, seed: true, appDatabaseUrl: proxy.url })
})
afterAll(async () => {
  await t?.close()
  await proxy?.remove()
})

describe('Server-Timing through a real network delay (toxiproxy)', () => {
  it('says 1 round trip for a warm flush, and its duration matches one latency', async () => {
    const { bookIds, customerId } = t.bookstore.seeded!
    const review = () => t.call('POST', `/books/${bookIds[0]}/reviews`, { stars: 4 })
    const checkout = () => t.call('POST', '/checkout', { customerId, lines: [{ bookId: bookIds[0], quantity: 1 }, { bookId: bookIds[1], quantity: 1 }] })

    await proxy.setLatency(LATENCY)
    const cold = await review()
    expect(cold.status).toBe(201)
    // The seed warmed the inserts; the versioned update of book is a new shape for this connection,
    // sent without a describe wait: counted as cold, yet no extra round trip (id allocation aside).
    expect(cold.timing!.cold).toBeGreaterThan(0)
    expect(cold.timing!.roundTrips).toBe(cold.timing!.idAllocation ? 2 : 1)

    const warm = await review()
    expect(warm.headers.get('server-timing')).toMatch(/^flush;dur=\d+\.\d;desc="2 statements, 1 round trip"$/)
    expect(warm.timing!.durationMs).toBeGreaterThan(LATENCY)
    expect(warm.timing!.durationMs).toBeLessThan(2 * LATENCY)

    await checkout() // prepares the checkout's shapes
    const warmCheckout = await checkout()
    expect(warmCheckout.status).toBe(201)
    expect(warmCheckout.headers.get('server-timing')).toMatch(/^flush;dur=\d+\.\d;desc="5 statements, 1 round trip"$/)
    expect(warmCheckout.timing!.durationMs).toBeGreaterThan(LATENCY)
    expect(warmCheckout.timing!.durationMs).toBeLessThan(2 * LATENCY)
    await proxy.setLatency(0)
  })
})

describe('after orm.warmUp() at start (as `pnpm example` does)', () => {
  it('the first flush of each handler on any pooled connection is already one round trip', async () => {
    const warm = await startTestBookstore({ name: 'bookstore_warm', poolMax: 4, seed: true, warmUp: true })
    try {
      expect(warm.bookstore.warmedUp).toMatchObject({ connections: 4 })
      const { customerId } = warm.bookstore.seeded!
      const bookIds = ((await warm.call('GET', '/books?limit=500')).body as { id: number }[]).map((b) => b.id)
      expect(bookIds.length).toBeGreaterThanOrEqual(10)
      // Concurrent, so that several pooled connections serve them.
      const responses = await Promise.all([
        ...bookIds.slice(0, 4).map((id) => warm.call('POST', `/books/${id}/reviews`, { stars: 5 })),
        ...bookIds.slice(4, 8).map((id) => warm.call('POST', '/checkout', { customerId, lines: [{ bookId: id, quantity: 1 }] })),
        warm.call('PATCH', `/books/${bookIds[9]}`, { version: 1, title: 'Renamed' }),
      ])
      for (const res of responses) {
        expect(res.status, res.text).toBeLessThan(300)
        // One round trip, plus one when the id pool had to fetch a block first (said in the header).
        expect(res.timing).toMatchObject({ cold: 0, roundTrips: res.timing!.idAllocation ? 2 : 1 })
      }
    } finally {
      await warm.close()
    }
  })
})

describe.each(['knex', 'pg'] as const)('EXECUTOR=%s', (executor) => {
  it('runs the same handlers in one round trip per flush, and Server-Timing says so', async () => {
    const app = await startTestBookstore({ name: `bookstore_${executor}`, seed: true, executor })
    try {
      const { bookIds, customerId } = app.bookstore.seeded!
      const review = await app.call('POST', `/books/${bookIds[0]}/reviews`, { stars: 3 })
      expect(review.status).toBe(201)
      // BEGIN, the review insert, the book update and COMMIT pipelined on one pooled connection (its
      // statements named there: cold the first time that connection sends their shapes).
      expect(review.timing).toMatchObject({ statements: 2, roundTrips: 1 })
      const checkout = await app.call('POST', '/checkout', { customerId, lines: [{ bookId: bookIds[0], quantity: 1 }] })
      expect(checkout.status).toBe(201)
      const [row] = await app.db`select count(*)::int as n from review where book_id = ${bookIds[0]!}`
      expect(row!.n).toBeGreaterThan(0)
    } finally {
      await app.close()
    }
  })
})
