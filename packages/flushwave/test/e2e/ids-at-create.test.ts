import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { defineSchema, entity, EntityStateError, flushwave, OptimisticLockError, t, UniqueViolationError } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { ALL_EXECUTORS } from '../support/executors.js'

/**
 * Ids at create: a new sequence-id entity takes its id from the process's id pool when `create`
 * runs (the pool usually holds ids), or from `em.assignIds()`, in one round trip, when it ran
 * short. The id never changes afterwards, and ids that no flush committed go back to the pool when
 * `orm.unitOfWork` drops an attempt.
 */
const schema = defineSchema({
  Order: entity('order', { id: t.id(), number: t.text().unique(), lines: t.oneToMany('Line', 'order') }),
  Line: entity('order_line', { id: t.id(), order: t.manyToOne('Order'), sku: t.text() }),
  Counter: entity('counter', { id: t.id(), n: t.integer(), version: t.version() }),
})
let db: TestDatabase<typeof schema.defs>
const allocations = () => db.queries.filter((q) => q.phase === 'allocate')

describe.each(ALL_EXECUTORS)('ids at create through %s', (executor) => {
  beforeAll(async () => {
    db = await testDatabase(schema, { name: 'ids_at_create', max: 2, executor })
  })
  afterAll(() => db.close())
  beforeEach(async () => {
    await db.sql`truncate order_line, "order", counter`
  })
  const reset = () => void (db.queries.length = 0)
  /** A Flushwave with a pool of its own, empty until something fills it. */
  const fresh = () => flushwave({ schema, executor: db.orm.executor, onQuery: (e) => db.queries.push(e) })

  it('after warmUp, create gives the id at once, and the flush inserts with it and allocates nothing', async () => {
    const orm = fresh()
    await orm.warmUp()
    const em = orm.em()
    const order = em.create('Order', { number: 'A-1' })
    const line = em.create('Line', { order, sku: 'tea' })
    expect(typeof order.id).toBe('number')
    expect(em.idOf(line)).toBe(line.id)
    // The identity map knows it by that id already: a load finds it without a read.
    reset()
    expect(await em.load('Order', order.id)).toBe(order)
    expect(db.queries).toEqual([])
    const result = await em.flush()
    expect(result.roundTrips).toBe(1)
    expect(allocations()).toEqual([])
    expect(await db.sql`select id::int, order_id::int from order_line`).toEqual([{ id: line.id, order_id: order.id }])
  })

  it('on an empty pool, create gives none; assignIds takes every missing one in one round trip', async () => {
    const orm = fresh()
    const em = orm.em()
    const order = em.create('Order', { number: 'B-1' })
    const lines = ['tea', 'jam', 'oil'].map((sku) => em.create('Line', { order, sku }))
    expect(em.idOf(order)).toBeUndefined()
    expect(() => order.id).toThrow(/await em\.assignIds\(\) or flush first/)
    await expect(em.find('Line', { order })).rejects.toThrow(EntityStateError) // new: no row refers to it yet
    reset()
    await em.assignIds()
    expect(allocations()).toHaveLength(1)
    expect(new Set(lines.map((l) => l.id)).size).toBe(3)
    await em.assignIds() // nothing missing: no round trip
    expect(allocations()).toHaveLength(1)
    // Later creates take from the block that fetch brought.
    const more = em.create('Line', { order, sku: 'salt' })
    expect(typeof more.id).toBe('number')
    reset()
    const result = await em.flush()
    expect([result.roundTrips, allocations().length]).toEqual([1, 0])
    expect((await db.sql`select id::int from order_line order by id`).map((r) => r.id)).toEqual([...lines, more].map((l) => l.id).sort((a, b) => a - b))
  })

  it('keeps an id through a failed flush: the retry inserts with the same one', async () => {
    const orm = fresh()
    await orm.warmUp()
    const setup = orm.em()
    setup.create('Order', { number: 'taken' })
    await setup.flush()
    const em = orm.em()
    const order = em.create('Order', { number: 'taken' })
    const id = order.id
    await expect(em.flush()).rejects.toBeInstanceOf(UniqueViolationError)
    expect(order.id).toBe(id)
    order.number = 'free'
    await em.flush()
    expect(await db.sql`select id::int from "order" where number = 'free'`).toEqual([{ id }])
  })

  it('orm.unitOfWork gives a lost attempt\'s ids back: the winning attempt reuses them', async () => {
    const orm = fresh()
    await orm.warmUp()
    const seed = orm.em()
    const counter = seed.create('Counter', { n: 0 })
    await seed.flush()
    const ids: number[] = []
    const { attempts } = await orm.unitOfWork(
      async (em) => {
        const loaded = await em.load('Counter', counter.id)
        loaded.n += 1
        ids.push(em.create('Order', { number: `attempt-${ids.length}` }).id)
        // The first attempt loses a race: another writer moves the version on before it flushes.
        if (ids.length === 1) await db.sql`update counter set version = version + 1`
      },
      { attempts: 3, backoffMs: () => 0 },
    )
    expect(attempts).toBe(2)
    expect(ids[1]).toBe(ids[0]) // given back by the failed attempt, taken first by the next one
    expect(await db.sql`select id::int, number from "order"`).toEqual([{ id: ids[0], number: 'attempt-1' }])
  })

  it('a failure it does not retry keeps the ids with their entities', async () => {
    const orm = fresh()
    await orm.warmUp()
    const seed = orm.em()
    const counter = seed.create('Counter', { n: 0 })
    await seed.flush()
    let order: { id: number } | undefined
    const run = orm.unitOfWork(async (em) => {
      const loaded = await em.load('Counter', counter.id)
      loaded.n += 1
      order = em.create('Order', { number: 'kept' })
      await db.sql`update counter set version = version + 1`
    })
    await expect(run).rejects.toBeInstanceOf(OptimisticLockError)
    const id = order!.id
    // Not given back: the next entity gets another id.
    expect(orm.em().create('Order', { number: 'next' }).id).not.toBe(id)
  })

  it('assignIds refuses to run during a flush, and flush during assignIds', async () => {
    const orm = fresh()
    const em = orm.em()
    em.create('Order', { number: 'C-1' })
    const assigning = em.assignIds()
    await expect(em.flush()).rejects.toThrow(/assignIds\(\) is running/)
    await assigning
    em.create('Order', { number: 'C-2' })
    const flushing = em.flush()
    await expect(em.assignIds()).rejects.toThrow(/while flush\(\) is running/)
    await flushing
  })

  it('em.transaction: ids taken by assignIds inside go back with a rollback', async () => {
    const orm = fresh()
    const em = orm.em()
    const order = em.create('Order', { number: 'D-1' })
    await em
      .transaction(async (tx) => {
        await tx.assignIds()
        expect(typeof order.id).toBe('number')
        throw new Error('roll back')
      })
      .catch(() => undefined)
    expect(em.idOf(order)).toBeUndefined()
    await em.flush()
    expect(typeof order.id).toBe('number')
  })
})
