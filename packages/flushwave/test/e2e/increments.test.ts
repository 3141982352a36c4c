import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { CheckViolationError, defineSchema, entity, flushwave, OptimisticLockError, t } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { ALL_EXECUTORS } from '../support/executors.js'

/**
 * Atomic counters: `em.increment` sends `col = col + delta` inside the row's one UPDATE, in the
 * flush's one pipeline, and reads the new value back. Each case asserts the statements and the rows.
 */
const schema = defineSchema({
  Product: entity('product', {
    id: t.id(),
    name: t.text(),
    stock: t.integer(),
    sold: t.bigint().default(0n),
    revenue: t.numeric().default('0'),
    rating: t.integer().nullable(),
    version: t.version(),
  }),
  Tally: entity('tally', { id: t.id(), label: t.text(), hits: t.integer().default(0) }),
})
let db: TestDatabase<typeof schema.defs>

const updates = () => db.writes().filter((q) => q.text.includes('update '))

describe.each(ALL_EXECUTORS)('atomic counters through %s', (executor) => {
  beforeAll(async () => {
    db = await testDatabase(schema, { name: 'counters', max: 4, executor })
    await db.sql`alter table product add constraint product_stock_check check (stock >= 0)`
  })
  afterAll(() => db.close())
  beforeEach(async () => {
    await db.sql`truncate product, tally`
  })
  const reset = () => void (db.queries.length = 0)

  async function product(stock = 10) {
    const em = db.orm.em()
    const p = em.create('Product', { name: 'tea', stock })
    await em.flush()
    return p.id
  }

  it('adds on the server in one UPDATE, one round trip, and reads the new value and version back', async () => {
    const id = await product(10)
    const em = db.orm.em()
    const p = await em.load('Product', id)
    em.increment(p, 'stock', -3)
    em.increment(p, 'stock', -1) // increments of one property add up: one delta is sent
    expect(p.stock).toBe(10) // unchanged until the flush
    reset()
    const result = await em.flush()
    expect(result).toMatchObject({ statements: 1, roundTrips: 1, updated: { product: 1 } })
    const [sent] = updates()
    expect(sent!.text).toContain('"stock" = (case when d.s2 then d.v2 else t."stock" end) + coalesce(d.i1, 0)')
    expect(sent!.text).toContain('(d.ver is null or t."version" = d.ver)') // an increment alone checks no version
    expect(sent!.params).toContain('{"-4"}')
    expect(p.stock).toBe(6)
    expect(p.version).toBe(2)
    expect(await db.sql`select stock, version from product`).toEqual([{ stock: 6, version: 2 }])
    // Nothing pending any more: the next flush sends nothing.
    expect((await em.flush()).statements).toBe(0)
  })

  it('merges with the row\'s other changes, which keep their version check', async () => {
    const id = await product(10)
    const em = db.orm.em()
    const p = await em.load('Product', id)
    p.name = 'green tea'
    em.increment(p, 'stock', -2)
    reset()
    await em.flush()
    expect(updates()).toHaveLength(1)
    expect(await db.sql`select name, stock, version from product`).toEqual([{ name: 'green tea', stock: 8, version: 2 }])
    expect([p.name, p.stock, p.version]).toEqual(['green tea', 8, 2])

    // A concurrent writer moved the version on: the renamed row is stale, so nothing commits.
    await db.sql`update product set version = version + 1`
    p.name = 'black tea'
    em.increment(p, 'stock', -1)
    await expect(em.flush()).rejects.toBeInstanceOf(OptimisticLockError)
    expect(await db.sql`select name, stock from product`).toEqual([{ name: 'green tea', stock: 8 }])
  })

  it('never conflicts: concurrent increments of one versioned row all commit', async () => {
    const id = await product(100)
    const stale = db.orm.em()
    const loaded = await stale.load('Product', id)
    const runs = Array.from({ length: 12 }, async () => {
      const em = db.orm.em()
      em.increment(await em.load('Product', id), 'stock', -1)
      return em.flush()
    })
    await Promise.all(runs)
    // Loaded before all of them, its version is long gone: an increment still commits.
    stale.increment(loaded, 'stock', -1)
    await stale.flush()
    expect(loaded.stock).toBe(87)
    expect(await db.sql`select stock, version from product`).toEqual([{ stock: 87, version: 14 }])
  })

  it('works on a reference without reading the row, and the value is readable after the flush', async () => {
    const id = await product(5)
    const em = db.orm.em()
    const ref = em.ref('Product', id)
    em.increment(ref, 'stock', 2)
    em.increment(ref, 'sold', 3n)
    reset()
    await em.flush()
    expect(db.queries.filter((q) => q.phase === 'read')).toEqual([])
    expect([ref.stock, ref.sold, ref.version]).toEqual([7, 3n, 2])
    expect(em.isLoaded(ref)).toBe(false)
    expect(() => ref.name).toThrow(/not loaded/)
    // Loading it later fills the rest.
    const loaded = await em.load('Product', id)
    expect([loaded.name, loaded.stock]).toEqual(['tea', 7])
  })

  it('adds bigint and numeric exactly', async () => {
    const id = await product(1)
    const em = db.orm.em()
    const p = await em.load('Product', id)
    em.increment(p, 'sold', 2n ** 62n)
    em.increment(p, 'sold', 1n)
    em.increment(p, 'revenue', '0.10')
    em.increment(p, 'revenue', '0.2')
    em.increment(p, 'revenue', '1e-3')
    reset()
    await em.flush()
    expect(updates()[0]!.params).toContain('{"0.301"}')
    expect(p.sold).toBe(2n ** 62n + 1n)
    expect(p.revenue).toBe('0.301')
    expect(await db.sql`select sold::text, revenue::text from product`).toEqual([{ sold: String(2n ** 62n + 1n), revenue: '0.301' }])
  })

  it('fails a CHECK as CheckViolationError naming the constraint, commits nothing, and keeps the increment pending', async () => {
    const id = await product(2)
    const em = db.orm.em()
    const p = await em.load('Product', id)
    const other = em.create('Tally', { label: 'checkout' })
    em.increment(p, 'stock', -3)
    const error = await em.flush().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(CheckViolationError)
    expect(error).toMatchObject({ constraint: 'product_stock_check', entity: 'Product', table: 'product' })
    expect(await db.sql`select stock from product`).toEqual([{ stock: 2 }])
    expect(await db.sql`select count(*)::int as n from tally`).toEqual([{ n: 0 }])
    expect(p.stock).toBe(2)
    // Still pending: a flush sends it again (and fails again); assigning replaces it.
    await expect(em.flush()).rejects.toBeInstanceOf(CheckViolationError)
    p.stock = 0
    reset()
    await em.flush()
    expect(updates()[0]!.text).not.toContain('coalesce(d.i') // a plain update: nothing left to add
    expect(await db.sql`select stock from product`).toEqual([{ stock: 0 }])
    expect(em.idOf(other)).toBeGreaterThan(0)
  })

  it('fails whole when the row is gone (OptimisticLockError naming it)', async () => {
    const id = await product(2)
    const em = db.orm.em()
    const tally = em.create('Tally', { label: 'x' })
    const tallyId = em.idOf(tally)
    em.increment(em.ref('Product', id + 1000), 'stock', 1)
    em.increment(em.ref('Product', id), 'stock', 1)
    const error = await em.flush().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OptimisticLockError)
    expect((error as OptimisticLockError).ids).toEqual([String(id + 1000)])
    expect(await db.sql`select stock from product`).toEqual([{ stock: 2 }])
    expect(em.idOf(tally)).toBe(tallyId) // as before the flush: nothing of it was committed
  })

  it('on a new entity, adds to the value its INSERT writes; a NULL counter stays NULL', async () => {
    const em = db.orm.em()
    const p = em.create('Product', { name: 'jam', stock: 4 })
    em.increment(p, 'stock', 3)
    await em.flush()
    expect(await db.sql`select stock, rating from product`).toEqual([{ stock: 7, rating: null }])
    em.increment(p, 'rating', 1)
    await em.flush()
    expect(p.rating).toBeNull()
    expect(await db.sql`select rating from product`).toEqual([{ rating: null }])
  })

  it('an increment made while a flush is in flight goes with the next flush, once', async () => {
    const id = await product(0)
    const em = db.orm.em()
    const p = await em.load('Product', id)
    em.increment(p, 'stock', 1)
    reset()
    const first = em.flush()
    // Once the UPDATE is on its way, the flush has taken the pending increment.
    for (let i = 0; i < 10_000 && db.writes().length === 0; i++) await new Promise((resolve) => setImmediate(resolve))
    expect(db.writes()).toHaveLength(1)
    em.increment(p, 'stock', 10)
    await first
    expect(p.stock).toBe(1)
    await em.flush()
    expect(p.stock).toBe(11)
    expect(await db.sql`select stock from product`).toEqual([{ stock: 11 }])
  })

  it('a rolled-back em.transaction() puts pending increments back as they were, and sends none of its own', async () => {
    const id = await product(10)
    const em = db.orm.em()
    const p = await em.load('Product', id)
    em.increment(p, 'stock', -1)
    await expect(
      em.transaction(async () => {
        em.increment(p, 'stock', -5)
        await em.flush()
        expect(p.stock).toBe(4)
        throw new Error('no')
      }),
    ).rejects.toThrow('no')
    expect([p.stock, p.version]).toEqual([10, 1])
    expect(await db.sql`select stock from product`).toEqual([{ stock: 10 }])
    await em.flush() // the -1 made before the transaction, alone
    expect(await db.sql`select stock from product`).toEqual([{ stock: 9 }])
    expect(p.stock).toBe(9)
  })

  it('rows of a table split into several statements each get their value', async () => {
    const setup = db.orm.em()
    const tallies = Array.from({ length: 25 }, (_, i) => setup.create('Tally', { label: `t${i}`, hits: i }))
    await setup.flush()
    const orm = flushwave({ schema, executor: db.orm.executor, maxRowsPerStatement: 10 })
    const em = orm.em()
    const refs = tallies.map((tally) => em.ref('Tally', tally.id))
    refs.forEach((ref, i) => em.increment(ref, 'hits', i))
    refs[3]!.label = 'renamed'
    const result = await em.flush()
    expect(result.statements).toBe(3)
    expect(refs.map((r) => r.hits)).toEqual(tallies.map((_, i) => 2 * i))
    expect(await db.sql`select sum(hits)::int as s from tally`).toEqual([{ s: 2 * 300 }])
  })
})
