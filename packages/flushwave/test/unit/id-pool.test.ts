import { describe, expect, it } from 'vitest'
import type { IdRequest } from '../../src/sql/render-ids.js'
import { IdPool } from '../../src/unit-of-work/id-pool.js'
import { bookstore } from '../support/bookstore.js'

const Review = bookstore.meta('Review')
const Book = bookstore.meta('Book')

/** A sequence per table, as PostgreSQL would hand them out. */
function sequences() {
  const next = new Map<string, number>()
  const calls: IdRequest[][] = []
  const fetch = async (requests: readonly IdRequest[]) => {
    calls.push([...requests])
    const ids = requests.map((r) => {
      const start = next.get(r.quotedTable) ?? 1
      next.set(r.quotedTable, start + r.count)
      return Array.from({ length: r.count }, (_, i) => String(start + i))
    })
    return { ids, roundTrips: 1 }
  }
  return { fetch, calls }
}

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
    // Blocks double with each shortfall: 50 flushes of 100 ids needed only a few fetches.
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
})
