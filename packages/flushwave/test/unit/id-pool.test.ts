import { describe, expect, it, vi } from 'vitest'
import type { IdRequest } from '../../src/sql/render-ids.js'
import { IdPool } from '../../src/ids/id-pool.js'
import { bookstore } from '../support/bookstore.js'

const Review = bookstore.meta('Review')
const Book = bookstore.meta('Book')
const Author = bookstore.meta('Author')

/** A sequence per table, as PostgreSQL would hand them out, answering after `delayMs`. */
function sequences(delayMs = 0) {
  const next = new Map<string, number>()
  const calls: IdRequest[][] = []
  let failNext: Error | undefined
  const fetch = async (requests: readonly IdRequest[]) => {
    calls.push([...requests])
    await new Promise((resolve) => setTimeout(resolve, delayMs))
    if (failNext) {
      const error = failNext
      failNext = undefined
      throw error
    }
    const ids = requests.map((r) => {
      const start = next.get(r.quotedTable) ?? 1
      next.set(r.quotedTable, start + r.count)
      return { first: BigInt(start), count: r.count, step: 1 }
    })
    return { ids, roundTrips: 1 }
  }
  const fetchedTotal = (table: string) => calls.flat().filter((r) => r.quotedTable === table).reduce((n, r) => n + r.count, 0)
  return { fetch, calls, fetchedTotal, failOnce: (error: Error) => void (failNext = error) }
}

/**
 * Runs `test` on a clock of its own (setTimeout and performance.now, which the pool reads for the
 * rate ids go at and how long fetches take). With real timers a loaded machine stalled a loop of
 * flushes now and then, and a stall skews what the pool measures: one flush of 190 waited, once,
 * in CI.
 */
async function onOwnClock(test: () => Promise<void>): Promise<void> {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] })
  try {
    await test()
  } finally {
    vi.useRealTimers()
  }
}

/** What `promise` settles to, on the test's own clock: it advances a millisecond at a time until then. */
async function settled<T>(promise: Promise<T>): Promise<T> {
  let outcome: { value: T } | { error: unknown } | undefined
  promise.then(
    (value) => (outcome = { value }),
    (error: unknown) => (outcome = { error }),
  )
  while (outcome === undefined) await vi.advanceTimersByTimeAsync(1)
  if ('error' in outcome) throw outcome.error
  return outcome.value
}

/** Time between flushes, on the test's own clock: background fetches land meanwhile. */
const pause = (ms: number) => vi.advanceTimersByTimeAsync(ms)

/**
 * A pool on a pooled sequence (blocks of 2 ids per nextval) left with 4 spare review ids, and the
 * refill it hands a flush to carry: `fetch` answers it as the flush's pipeline would.
 */
async function carryingRefill() {
  const { fetch, calls } = sequences(0)
  const pooled = async (requests: readonly IdRequest[]) => {
    const answer = await fetch(requests)
    return { ...answer, ids: answer.ids.map((block) => ({ ...block, step: 2 })) }
  }
  const pool = new IdPool({ blockSize: 16 })
  await pool.take(new Map([[Review, 10]]), pooled) // 26 fetched, 16 left
  await pool.take(new Map([[Review, 12]]), pooled) // 4 left
  return { fetch, calls, pooled, pool, refill: pool.dueRefill()! }
}

describe('IdPool.takeNow (an id at create)', () => {
  it('never waits: none from an empty pool, none while a flush waits for ids', async () => {
    const { fetch } = sequences(5)
    const pool = new IdPool({ blockSize: 10 })
    expect(pool.takeNow(Book)).toBeUndefined()
    const waiting = pool.take(new Map([[Book, 5]]), fetch)
    expect(pool.takeNow(Book)).toBeUndefined() // the waiting flush is served first
    expect((await waiting).ids.get(Book)).toEqual(['1', '2', '3', '4', '5'])
    expect([pool.takeNow(Book), pool.takeNow(Book)]).toEqual(['6', '7'])
    expect(pool.takeNow(Author)).toBeUndefined() // another table's ids were never fetched
  })

  it('hands out given-back ids first, and leaves refills to the flushes', async () => {
    const { fetch, calls } = sequences()
    const pool = new IdPool({ blockSize: 10 })
    await pool.take(new Map([[Book, 1]]), fetch) // 1, and a spare block of 10: 2..11
    pool.give(Book, ['1'])
    expect(pool.takeNow(Book)).toBe('1')
    const taken = Array.from({ length: 9 }, () => pool.takeNow(Book))
    expect(taken).toEqual(['2', '3', '4', '5', '6', '7', '8', '9', '10'])
    expect(calls).toHaveLength(1) // below half a block, yet no fetch midway through a loop of creates
    pool.refillIfLow() // what a flush does once it is over
    expect(calls).toHaveLength(2)
    await new Promise((resolve) => setTimeout(resolve, 10))
    expect(pool.spareOf(Book)).toBeGreaterThan(10)
  })
})

describe('IdPool', () => {
  it('fetches every short table in one request and stops fetching under a steady load', async () => {
    const { fetch, calls } = sequences()
    const pool = new IdPool({ blockSize: 10 })
    const first = await pool.take(new Map([[Review, 100], [Book, 10]]), fetch)
    expect(calls).toHaveLength(1)
    expect(first.ids.get(Review)).toHaveLength(100)
    expect(first.ids.get(Book)![0]).toBe('1')
    expect(first.fetched[0]!.counts).toEqual(new Map([['review', 110], ['book', 20]]))
    for (let flush = 0; flush < 50; flush++) await pool.take(new Map([[Review, 100]]), fetch)
    // Spare blocks follow demand (twice what was taken since the last fetch): few fetches.
    expect(calls.length).toBeLessThanOrEqual(10)
    const before = calls.length
    for (let flush = 0; flush < 20; flush++) await pool.take(new Map([[Review, 100]]), fetch)
    expect(calls.length - before).toBeLessThanOrEqual(1)
  })

  it('hands out each id once, and ids given back first', async () => {
    const { fetch } = sequences()
    const pool = new IdPool({ blockSize: 4 })
    const a = (await pool.take(new Map([[Book, 3]]), fetch)).ids.get(Book)!
    const b = (await pool.take(new Map([[Book, 3]]), fetch)).ids.get(Book)!
    expect(new Set([...a, ...b]).size).toBe(6)
    pool.give(Book, b)
    const c = (await pool.take(new Map([[Book, 2]]), fetch)).ids.get(Book)!
    expect(c).toEqual(b.slice(0, 2))
  })

  it('serves 100 concurrent shortfalls from an empty pool with one shared fetch', async () => {
    const { fetch, calls, fetchedTotal } = sequences(5)
    const pool = new IdPool({ blockSize: 256 })
    // The example's checkout: an order, its lines, an audit row.
    const demand = () => new Map([[Author, 1], [Book, 1 + Math.floor(Math.random() * 3)], [Review, 1]])
    const wanted = Array.from({ length: 100 }, demand)
    const taken = await Promise.all(wanted.map((counts) => pool.take(counts, fetch)))
    expect(calls).toHaveLength(1)
    for (const meta of [Author, Book, Review]) {
      const ids = taken.flatMap((t) => t.ids.get(meta)!)
      const used = wanted.reduce((n, w) => n + w.get(meta)!, 0)
      expect(ids).toHaveLength(used)
      expect(new Set(ids).size).toBe(used)
      // What was used plus one spare block, not a block per waiter.
      expect(fetchedTotal(meta.quotedTable)).toBe(used + 256)
    }
    // Every waiter says it waited on that fetch.
    for (const t of taken) expect(t.fetched).toHaveLength(1)
  })

  it('keeps fetches and ids fetched within a small factor of use over waves of concurrent flushes', async () => {
    const { fetch, calls, fetchedTotal } = sequences(2)
    const pool = new IdPool({ blockSize: 16 })
    let used = 0
    for (let wave = 0; wave < 20; wave++) {
      const counts = Array.from({ length: 50 }, (_, i) => new Map([[Review, 1 + ((i + wave) % 7)]]))
      used += counts.reduce((n, c) => n + c.get(Review)!, 0)
      const taken = await Promise.all(counts.map((c) => pool.take(c, fetch)))
      expect(new Set(taken.flatMap((t) => t.ids.get(Review)!)).size).toBe(counts.reduce((n, c) => n + c.get(Review)!, 0))
    }
    // 20 waves of 50 concurrent flushes: at most one fetch per wave, fewer as blocks follow demand.
    expect(calls.length).toBeLessThanOrEqual(12)
    // Spare blocks are twice the recent demand: never more than about 3x what was used in all.
    expect(fetchedTotal('"review"')).toBeLessThan(3 * used + 16)
    expect(fetchedTotal('"review"')).toBeGreaterThanOrEqual(used)
  })

  it('fails the flushes a failed fetch was for, and the next shortfall fetches again', async () => {
    const { fetch, calls, failOnce } = sequences(2)
    const pool = new IdPool({ blockSize: 8 })
    failOnce(new Error('connection lost'))
    const results = await Promise.allSettled(Array.from({ length: 5 }, () => pool.take(new Map([[Book, 2]]), fetch)))
    expect(results.map((r) => r.status)).toEqual(Array(5).fill('rejected'))
    const after = await pool.take(new Map([[Book, 2]]), fetch)
    expect(after.ids.get(Book)).toHaveLength(2)
    expect(calls).toHaveLength(2)
  })

  it('fetches a transaction’s shortfall on its own connection and pools the spare block', async () => {
    const shared = sequences(50)
    const own = sequences(0)
    const pool = new IdPool({ blockSize: 8 })
    // A shared fetch is under way; the private take must not wait for it.
    const waiting = pool.take(new Map([[Book, 3]]), shared.fetch)
    const mine = await pool.take(new Map([[Book, 2]]), own.fetch, { private: true })
    expect(mine.ids.get(Book)).toEqual(['1', '2'])
    expect(own.calls).toEqual([[{ quotedTable: '"book"', column: 'id', count: 10 }]])
    // Its spare block was pooled, and served the waiting flush before its own fetch landed.
    expect((await waiting).ids.get(Book)).toEqual(['3', '4', '5'])
  })

  it('refills in the background below half a spare block, so a steady load never waits on a fetch', () =>
    onOwnClock(async () => {
      const { fetch, calls } = sequences(5)
      const pool = new IdPool({ blockSize: 64 })
      const waited: number[] = []
      for (let flush = 0; flush < 200; flush++) {
        const taken = await settled(pool.take(new Map([[Review, 10], [Book, 1]]), fetch))
        waited.push(taken.fetched.length)
        expect(new Set(taken.ids.get(Review)).size).toBe(10)
        pool.refillIfLow() // as a flush does once its transaction is over
        // Some time between flushes, as between requests: a background fetch lands meanwhile.
        await pause(1)
      }
      // Only the very first take waited; every later shortfall was foreseen and fetched in the background.
      expect(waited[0]).toBe(1)
      expect(waited.slice(1).every((n) => n === 0)).toBe(true)
      expect(calls.length).toBeGreaterThan(1)
      // Blocks follow demand: 2,000 review and 200 book ids over 200 flushes took about ten fetches.
      expect(calls.length).toBeLessThanOrEqual(12)
    }))

  it('reports a background refill as a fetch to a take that ran short while it was in flight', async () => {
    const { fetch, calls } = sequences(20)
    const pool = new IdPool({ blockSize: 64 })
    await pool.take(new Map([[Review, 60]]), fetch) // 124 fetched, 64 left
    await pool.take(new Map([[Review, 40]]), fetch) // 24 left: below the low-water mark
    pool.refillIfLow()
    expect(calls).toHaveLength(2)
    // Short while the refill is in flight: served when it lands, and told it waited on it.
    const taken = await pool.take(new Map([[Review, 30]]), fetch)
    expect(calls).toHaveLength(2)
    expect(taken.fetched).toEqual([{ counts: new Map([['review', calls[1]![0]!.count]]), roundTrips: 1, refill: true }])
  })

  it('starts refills early enough for slow fetches: after the first refill, no flush waits', () =>
    onOwnClock(async () => {
      for (const fetchMs of [20, 50]) {
        const { fetch, fetchedTotal } = sequences(fetchMs)
        const pool = new IdPool({ blockSize: 64 })
        const waitedAt: number[] = []
        for (let flush = 0; flush < 200; flush++) {
          const taken = await settled(pool.take(new Map([[Review, 10], [Book, 1]]), fetch))
          if (taken.fetched.length > 0) waitedAt.push(flush)
          pool.refillIfLow()
          await pause(1)
        }
        // The first take, and one during the first refill (the pool knew the fetch's latency but not
        // yet the rate ids go at); from then on refills start while what is left outlasts them.
        expect(waitedAt.filter((flush) => flush >= 10), `fetches of ${fetchMs} ms`).toEqual([])
        // The spare held at the end is about what two fetches' latency uses: fetched stays within 3× of used.
        expect(fetchedTotal('"review"')).toBeLessThanOrEqual(3 * 2_000)
      }
    }))

  it('keeps flushes larger than half a block from waiting: refills below one and a half of the largest take', () =>
    onOwnClock(async () => {
      const { fetch, calls, fetchedTotal } = sequences(5)
      const pool = new IdPool({ blockSize: 256 })
      const waited: number[] = []
      for (let flush = 0; flush < 30; flush++) {
        const taken = await settled(pool.take(new Map([[Review, 10_000]]), fetch))
        waited.push(taken.fetched.length)
        pool.refillIfLow()
        await pause(10)
      }
      expect(waited[0]).toBe(1)
      expect(waited.slice(1)).toEqual(waited.slice(1).map(() => 0))
      // Blocks grow to the cap at most: 300,000 ids used, at most one capped block more fetched.
      expect(fetchedTotal('"review"')).toBeLessThanOrEqual(300_000 + 2 * 65_536)
      // A plain sequence's block stops at twice the largest take, so that a refill costs the server
      // no more than about such a flush does: a fetch every flush and a half, each at most 20,000 ids.
      expect(calls.length).toBeLessThanOrEqual(20)
      expect(Math.max(...calls.slice(1).flat().map((r) => r.count))).toBeLessThanOrEqual(20_000)
    }))

  it('sizes refills by the rows a flush inserted, also when their ids came one by one at create', () =>
    onOwnClock(async () => {
      const { fetch, calls } = sequences(5)
      const pool = new IdPool({ blockSize: 256 })
      const short: number[] = []
      for (let flush = 0; flush < 20; flush++) {
        // A unit of work of 10,000 creates: each takes its id at create while the pool has one; the
        // flush takes the rest.
        let missing = 0
        for (let i = 0; i < 10_000; i++) if (pool.takeNow(Review) === undefined) missing++
        if (missing > 0) await settled(pool.take(new Map([[Review, missing]]), fetch))
        short.push(missing)
        pool.refillIfLow(new Map([[Review, 10_000]])) // as the flush does, with the rows it inserted
        await pause(10)
      }
      // The first flush found nothing and the second too little; from then on every create found its id.
      expect(short[0]).toBe(10_000)
      expect(short.slice(2)).toEqual(short.slice(2).map(() => 0))
      // Blocks stay at twice the unit of work: about 200,000 ids used, fetched within a block or two more.
      expect(calls.flat().reduce((n, r) => n + r.count, 0)).toBeLessThanOrEqual(200_000 + 2 * 20_000)
    }))

  it('keeps a plain sequence’s blocks small enough to refill in about 2 ms, and lets a pooled sequence’s grow', async () => {
    for (const step of [1, 1000]) {
      const calls: IdRequest[][] = []
      let next = 1
      const fetch = async (requests: readonly IdRequest[]) => {
        calls.push([...requests])
        // A pooled sequence hands out whole blocks of `step` ids.
        const ids = requests.map((r) => {
          const count = Math.ceil(r.count / step) * step
          const block = { first: BigInt(next), count, step }
          next += count
          return block
        })
        return { ids, roundTrips: 1 }
      }
      const pool = new IdPool({ blockSize: 256 })
      for (let flush = 0; flush < 300; flush++) {
        await pool.take(new Map([[Review, 300]]), fetch)
        pool.refillIfLow()
        await new Promise((resolve) => setImmediate(resolve))
      }
      const largest = Math.max(...calls.flat().map((r) => r.count))
      // 90,000 ids in all: blocks that doubled at each refill reached 65,536 (a 70 ms refill).
      if (step === 1) expect(largest).toBeLessThanOrEqual(2_048 + 300)
      else expect(largest).toBeGreaterThan(8_192)
    }
  })

  it('hands a pooled sequence’s refill to the flush (to carry after its COMMIT), and leaves a plain one’s to the background', async () => {
    for (const step of [1000, 1]) {
      const calls: IdRequest[][] = []
      let next = 1
      const answer = (requests: readonly IdRequest[]) => ({
        ids: requests.map((r) => {
          const count = Math.ceil(r.count / step) * step
          const block = { first: BigInt(next), count, step }
          next += count
          return block
        }),
        roundTrips: 1,
      })
      const fetch = async (requests: readonly IdRequest[]) => (calls.push([...requests]), answer(requests))
      const pool = new IdPool({ blockSize: 256 })
      await pool.take(new Map([[Review, 300]]), fetch) // 556 asked
      const left = pool.spareOf(Review)
      await pool.take(new Map([[Review, left - 100]]), fetch) // 100 left: below the low-water mark
      expect(calls).toHaveLength(1)
      const refill = pool.dueRefill(new Map([[Review, left - 100]]))
      if (step === 1) {
        // A nextval per id: never carried by a flush, which starts it in the background once over.
        expect(refill).toBeUndefined()
        expect(calls).toHaveLength(1)
        pool.refillIfLow()
        expect(calls).toHaveLength(2)
        continue
      }
      expect(refill?.requests).toEqual([{ quotedTable: '"review"', column: 'id', count: expect.any(Number) }])
      expect(calls).toHaveLength(1) // the flush carries it: no fetch of its own
      expect(pool.dueRefill()).toBeUndefined() // one refill at a time
      // A take that runs short while the carrying flush is in flight waits for its answer.
      const waiting = pool.take(new Map([[Review, 150]]), fetch)
      pool.landed(refill!, answer(refill!.requests))
      const taken = await waiting
      expect(taken.ids.get(Review)).toHaveLength(150)
      expect(taken.fetched).toEqual([{ counts: new Map([['review', refill!.requests[0]!.count]]), roundTrips: 1, refill: true }])
      expect(calls).toHaveLength(1)
    }
  })

  it('fetches for a take that the carried refill, once landed, does not cover', async () => {
    const { fetch, calls, pooled, pool, refill } = await carryingRefill()
    // Queued behind the carrying flush: more than the refill will bring.
    const big = pool.take(new Map([[Review, 500]]), pooled)
    expect(calls).toHaveLength(1)
    pool.landed(refill, await fetch(refill.requests)) // the carrying flush's answer
    expect((await big).ids.get(Review)).toHaveLength(500)
    expect(calls).toHaveLength(3) // the refill, then a fetch for the rest
  })

  it('refills in the background when the flush that carried a refill brought no blocks back', async () => {
    const { calls, pool, refill } = await carryingRefill()
    expect(calls).toHaveLength(1)
    pool.landed(refill, undefined) // the flush failed, or its executor carries no ids
    expect(calls).toHaveLength(2)
    expect(calls[1]).toEqual(refill.requests)
    await new Promise((resolve) => setTimeout(resolve, 10))
    expect(pool.spareOf(Review)).toBe(4 + refill.requests[0]!.count)
  })

  it('does not refill in the background from a transaction’s connection', async () => {
    const { fetch, calls } = sequences(0)
    const pool = new IdPool({ blockSize: 8 })
    await pool.take(new Map([[Book, 1]]), fetch, { private: true })
    for (let i = 0; i < 6; i++) {
      await pool.take(new Map([[Book, 1]]), fetch, { private: true })
      pool.refillIfLow()
    }
    // Below half its spare block, but no shared fetch was ever given: no background fetch.
    expect(calls).toHaveLength(1)
  })
})

