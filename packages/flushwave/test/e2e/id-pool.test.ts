import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { flushwave, UniqueViolationError } from '../../src/index.js'
import { bookstore } from '../support/bookstore.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { ALL_EXECUTORS } from '../support/executors.js'

/**
 * The example's checkout under a burst, from a fresh start: many flushes find the id pool empty at
 * once. They must share the fetches (not each fetch and double a block), and sequences must advance
 * by about what was written, not by a block per waiting flush.
 */
const FLUSHES = 100
const BLOCK = 256

let db: TestDatabase<typeof bookstore.defs>
beforeAll(async () => {
  db = await testDatabase(bookstore, { name: 'idpool', max: 4 })
})
afterAll(async () => {
  await db.close()
})

async function sequenceValue(table: string): Promise<number> {
  const [row] = await db.sql.unsafe<{ n: number }[]>(`select coalesce(last_value, 0)::int as n from ${table}_id_seq`)
  return row!.n
}

describe('id pool under a burst of concurrent flushes', () => {
  it('shares fetches, answers every flush, and advances sequences by about what was written', async () => {
    const outcomes = await Promise.allSettled(
      Array.from({ length: FLUSHES }, async (_, i) => {
        const em = db.orm.em()
        // Every tenth flush reuses an email: a unique violation rolls it back and gives its ids back.
        const author = em.create('Author', { name: `a${i}`, email: i % 10 === 9 ? 'taken@example.com' : `a${i}@example.com` })
        for (let b = 0; b < 2; b++) em.create('Review', { stars: 5, book: em.create('Book', { title: `b${i}.${b}`, author }) })
        return em.flush()
      }),
    )
    const failed = outcomes.filter((o) => o.status === 'rejected')
    // The first 'taken' email commits; the other nine collide.
    expect(failed).toHaveLength(9)
    for (const f of failed) expect((f as PromiseRejectedResult).reason).toBeInstanceOf(UniqueViolationError)

    const allocations = db.queries.filter((q) => q.phase === 'allocate')
    // One fetch for the burst's first shortfall, maybe one more for flushes that arrived during it.
    expect(allocations.length).toBeLessThanOrEqual(3)
    const [counts] = await db.sql`select (select count(*) from author)::int as authors, (select count(*) from book)::int as books, (select count(*) from review)::int as reviews`
    expect(counts).toEqual({ authors: 91, books: 182, reviews: 182 })
    // Ids taken = rows written plus the failed flushes' ids given back and reused, plus spare
    // blocks: well under twice the rows plus one block per table per fetch.
    expect(await sequenceValue('author')).toBeLessThan(2 * FLUSHES + allocations.length * BLOCK)
    expect(await sequenceValue('book')).toBeLessThan(2 * 2 * FLUSHES + allocations.length * BLOCK)
    expect(await sequenceValue('review')).toBeLessThan(2 * 2 * FLUSHES + allocations.length * BLOCK)
  })

  it('keeps serving bursts from the pool without growing the blocks past demand', async () => {
    const before = db.queries.filter((q) => q.phase === 'allocate').length
    const start = await sequenceValue('review')
    for (let burst = 0; burst < 5; burst++) {
      await Promise.all(
        Array.from({ length: 50 }, async (_, i) => {
          const em = db.orm.em()
          const author = em.create('Author', { name: `burst ${burst}.${i}` })
          em.create('Review', { stars: 1, book: em.create('Book', { title: 'x', author }) })
          await em.flush()
        }),
      )
    }
    const fetches = db.queries.filter((q) => q.phase === 'allocate').length - before
    expect(fetches).toBeLessThanOrEqual(5)
    // 250 reviews written: spare blocks follow demand, so the sequence moved by a small multiple of that.
    expect((await sequenceValue('review')) - start).toBeLessThan(4 * 250 + BLOCK)
  })
})

describe('pooled sequences', () => {
  it('take a whole block per nextval: O(1) on the server, and other writers get blocks of their own', async () => {
    // The README's migration for a pooled sequence.
    await db.sql.unsafe('alter table tag alter column id set increment by 1000')
    const before = db.queries.filter((q) => q.phase === 'allocate').length
    const em = db.orm.em()
    const tags = Array.from({ length: 4 }, (_, i) => em.create('Tag', { name: `pooled ${i}` }))
    await em.flush()
    const first = tags[0]!.id
    expect(tags.map((t) => t.id)).toEqual([first, first + 1, first + 2, first + 3])
    // A plain INSERT using the column default meanwhile gets the next block, not one of ours.
    const [other] = await db.sql<{ id: number }[]>`insert into tag (name) values ('by hand') returning id::int`
    expect(other!.id).toBeGreaterThanOrEqual(first + 1000)
    // The spare ids of the block serve the next flushes without another fetch before them.
    const em2 = db.orm.em()
    const more = Array.from({ length: 100 }, (_, i) => em2.create('Tag', { name: `pooled more ${i}` }))
    const second = await em2.flush()
    expect(more[0]!.id).toBe(first + 4)
    expect(second.plan.preparation).toEqual([])
    expect(second.roundTrips).toBe(1)
    // The pool may top itself up after it, riding at the end of its pipeline: whether it does depends
    // on the rate ids go at against how long the first fetch took (a slow first fetch on a busy
    // machine makes 104 ids in a few ms look like a lot), so at most one more fetch, never waited on.
    expect(db.queries.filter((q) => q.phase === 'allocate').length - before).toBeLessThanOrEqual(2)
    const [{ n }] = (await db.sql`select count(*)::int as n from tag where id between ${first} and ${first + 103}`) as unknown as [{ n: number }]
    expect(n).toBe(104)
  })
})

describe.each(ALL_EXECUTORS)('a refill carried by a flush on %s', (executor) => {
  it('lands also when the flush fails: its ids are not lost, and nothing fetches them again', async () => {
    const own = await testDatabase(bookstore, { name: 'carried', executor })
    try {
      await own.sql.unsafe('alter table tag alter column id set increment by 100')
      const allocations = () => own.queries.filter((q) => q.phase === 'allocate').length
      const em = own.orm.em()
      em.create('Tag', { name: 'first' })
      await em.flush() // 257 ids asked: 300 fetched (three blocks), 299 spare
      expect(allocations()).toBe(1)
      // 200 tags leave 99 spare: the refill rides after this flush's COMMIT. A name already taken
      // fails the flush; the pipelined COMMIT answers ROLLBACK, and the refill's answer still comes.
      const failing = own.orm.em()
      for (let i = 0; i < 199; i++) failing.create('Tag', { name: `t${i}` })
      failing.create('Tag', { name: 'first' })
      await expect(failing.flush()).rejects.toBeInstanceOf(UniqueViolationError)
      expect(allocations()).toBe(2)
      await new Promise((resolve) => setTimeout(resolve, 50))
      // Not fetched again in the background: the carried blocks joined the pool.
      expect(allocations()).toBe(2)
      const again = own.orm.em()
      for (let i = 0; i < 200; i++) again.create('Tag', { name: `u${i}` })
      // The failed flush's tags keep the ids they took at create (2 to 201), for a retry: these
      // take the 98 left of the first blocks, then the refill's.
      expect((await again.flush()).plan.preparation).toEqual([])
      expect(allocations()).toBe(2)
      const [row] = await own.sql<{ n: number; low: number }[]>`select count(*)::int as n, min(id)::int as low from tag where name like 'u%'`
      expect(row).toEqual({ n: 200, low: 202 })
    } finally {
      await own.close()
    }
  })
})

describe('pooled sequences under concurrency', () => {
  it('serve bursts of concurrent flushes whose refills ride with some of them: every flush answered, every id used once', async () => {
    const own = await testDatabase(bookstore, { name: 'pooledburst', max: 4 })
    try {
      for (const table of ['author', 'book', 'review']) await own.sql.unsafe(`alter table ${table} alter column id set increment by 50`)
      for (let burst = 0; burst < 6; burst++) {
        await Promise.all(
          Array.from({ length: 40 }, async (_, i) => {
            const em = own.orm.em()
            const author = em.create('Author', { name: `pooled ${burst}.${i}` })
            for (let b = 0; b < 3; b++) em.create('Review', { stars: 3, book: em.create('Book', { title: `p${b}`, author }) })
            await em.flush()
          }),
        )
      }
      const [counts] = await own.sql`select (select count(*) from author)::int as authors, (select count(*) from book)::int as books, (select count(*) from review)::int as reviews`
      expect(counts).toEqual({ authors: 240, books: 720, reviews: 720 })
      // Fetches, carried or not, stay few: the spare blocks follow demand.
      const allocations = own.queries.filter((q) => q.phase === 'allocate').length
      expect(allocations).toBeGreaterThan(1)
      expect(allocations).toBeLessThanOrEqual(12)
      // 720 reviews written: the sequence moved by a small multiple of that (blocks of 50 ids per nextval).
      const [{ n }] = (await own.sql`select last_value::int as n from review_id_seq`) as unknown as [{ n: number }]
      expect(n).toBeLessThan(4 * 720 + 2 * 256)
    } finally {
      await own.close()
    }
  })
})

describe('what the id pool keeps', () => {
  it('holds nothing of a unit of work once its flush is over: the pool outlives every EntityManager', async () => {
    setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    // A flush or assignIds() that fetches leaves the pool its fetch, for background refills: that
    // must not carry the EntityManager along. Fresh instances, empty pools: both fetch.
    const orms = [flushwave({ schema: bookstore, sql: db.sql }), flushwave({ schema: bookstore, sql: db.sql })] as const
    const flushed = async () => {
      const em = orms[0].em()
      const author = em.create('Author', { name: 'kept?' })
      for (let b = 0; b < 300; b++) em.create('Book', { title: `k${b}`, author })
      expect((await em.flush()).plan.preparation.map((p) => p.kind)).toEqual(['allocate-ids'])
      const assigning = orms[1].em()
      assigning.create('Author', { name: 'kept too?' })
      await assigning.assignIds()
      return [new WeakRef(em), new WeakRef(assigning)]
    }
    const refs = await flushed()
    for (let i = 0; i < 3; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10))
      gc()
    }
    expect(refs.map((ref) => ref.deref() === undefined)).toEqual([true, true])
    expect(orms).toHaveLength(2) // alive to the end, as an application's are
  })
})

describe('ids that are not consecutive', () => {
  it('come back listed and go one to a row: a cycling sequence that wraps inside one fetch', async () => {
    // From 990 to 1,000, then from 1: one fetch's ids have a gap, so the statement lists them.
    await db.sql.unsafe('truncate tag cascade')
    await db.sql.unsafe('alter table tag alter column id set increment by 1 set maxvalue 1000 set cycle restart with 990')
    const orm = flushwave({ schema: bookstore, sql: db.sql, onQuery: (e) => db.queries.push(e) })
    const em = orm.em()
    const tags = Array.from({ length: 40 }, (_, i) => em.create('Tag', { name: `wrap ${i}` }))
    db.queries.length = 0
    await em.flush()
    expect(db.queries.filter((q) => q.phase === 'allocate')).toHaveLength(1)
    const ids = tags.map((tag) => Number(tag.id))
    expect(new Set(ids).size).toBe(40)
    // Read as a range from the lowest id instead, none would be 990 or above.
    expect(ids.filter((id) => id >= 990)).toEqual([990, 991, 992, 993, 994, 995, 996, 997, 998, 999, 1000])
    const rows = await db.sql<{ id: string; name: string }[]>`select id::text, name from tag where name like 'wrap %'`
    expect(new Map(rows.map((r) => [r.name, Number(r.id)]))).toEqual(new Map(tags.map((tag) => [tag.name, Number(tag.id)])))
  })
})
