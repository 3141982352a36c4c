import type { PGlite } from '@electric-sql/pglite'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTablesSql, defineSchema, entity, flushwave, ForeignKeyViolationError, t, UniqueViolationError, type Flushwave, type QueryEvent } from '../../src/index.js'
import { openPGlite } from '../support/pglite.js'

/**
 * What is PGlite's own in its executor: one connection in this process, whose flushes run inside
 * PGlite's transaction(). The suites run on every executor (conformance, bad input, the model test
 * and others) cover the rest; those that need a second connection at the same time (em.transaction
 * seen from outside, locking reads, lock order) or a network and server processes (faults, killed
 * connections, PgBouncer, a server crash) do not apply to it.
 */
const schema = defineSchema({
  Shelf: entity('shelf', { id: t.id(), name: t.text().unique() }),
  Item: entity('item', { id: t.id(), label: t.text(), shelf: t.manyToOne('Shelf').deferrable() }),
})

let db: PGlite
let orm: Flushwave<typeof schema.defs>
const sent: QueryEvent[] = []
const rows = async (text: string): Promise<unknown[][]> => (await db.query<unknown[]>(text, [], { rowMode: 'array' })).rows

beforeAll(async () => {
  db = await openPGlite()
  for (const statement of createTablesSql(schema)) await db.exec(statement)
  orm = flushwave({ schema, pglite: db, onQuery: (e) => void sent.push(e) })
})
afterAll(() => db.close())

describe('the PGlite executor', () => {
  it('flushes a unit of work as one transaction, one exchange, ids from the pool once warm', async () => {
    await orm.warmUp()
    const em = orm.em()
    const shelf = em.create('Shelf', { name: 'a' })
    for (let i = 0; i < 3; i++) em.create('Item', { label: `item ${i}`, shelf })
    sent.length = 0
    const result = await em.flush()
    expect(result).toMatchObject({ inserted: { shelf: 1, item: 3 }, roundTrips: 1, statements: 2 })
    expect(sent.map((q) => q.phase)).toEqual(['write', 'write'])
    expect(await rows('select label from item order by id')).toEqual([['item 0'], ['item 1'], ['item 2']])
  })

  it('rolls a failing flush back whole with a typed error, and the next flush goes through', async () => {
    const em = orm.em()
    em.create('Shelf', { name: 'b' })
    const taken = em.create('Shelf', { name: 'a' })
    const error = await em.flush().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(UniqueViolationError)
    expect(error).toMatchObject({ table: 'shelf', constraint: 'shelf_name_key' })
    expect(await rows("select count(*)::int from shelf where name = 'b'")).toEqual([[0]])
    taken.name = 'c'
    await em.flush()
    expect(await rows("select name from shelf where name in ('b', 'c') order by name")).toEqual([['b'], ['c']])
  })

  it('reports a deferred constraint that fails at COMMIT as a typed error, nothing committed', async () => {
    const em = orm.em()
    em.create('Item', { label: 'nowhere', shelf: em.ref('Shelf', 999_999) })
    const error = await em.flush().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ForeignKeyViolationError)
    expect(await rows("select count(*)::int from item where label = 'nowhere'")).toEqual([[0]])
  })

  it('commits em.transaction() at its end and rolls it back when it throws', async () => {
    const em = orm.em()
    await em.transaction(async (tx) => {
      const shelf = tx.create('Shelf', { name: 'in tx' })
      await tx.flush()
      expect(await tx.find('Shelf', { name: 'in tx' })).toEqual([shelf])
      tx.create('Item', { label: 'in tx', shelf })
      await tx.flush()
    })
    expect(await rows("select count(*)::int from item where label = 'in tx'")).toEqual([[1]])
    const failed = await orm
      .em()
      .transaction(async (tx) => {
        tx.create('Shelf', { name: 'rolled back' })
        await tx.flush()
        throw new Error('changed my mind')
      })
      .catch((e: unknown) => e)
    expect((failed as Error).message).toBe('changed my mind')
    expect(await rows("select count(*)::int from shelf where name = 'rolled back'")).toEqual([[0]])
  })

  it('keeps concurrent flushes and reads apart on its one connection', async () => {
    // Each flush inserts a shelf and two items; reads in between must see whole flushes only.
    const flushes = Array.from({ length: 8 }, async (_, i) => {
      const em = orm.em()
      const shelf = em.create('Shelf', { name: `busy ${i}` })
      em.create('Item', { label: `busy ${i}`, shelf })
      em.create('Item', { label: `busy ${i}`, shelf })
      return em.flush()
    })
    const reads = Array.from({ length: 8 }, async () => {
      const [[shelves, items]] = (await rows("select (select count(*) from shelf where name like 'busy %')::int, (select count(*) from item where label like 'busy %')::int")) as [[number, number]]
      expect(items).toBe(2 * shelves)
    })
    const results = await Promise.all(flushes)
    await Promise.all(reads)
    expect(results.every((r) => r.roundTrips === 1)).toBe(true)
    expect(await rows("select count(*)::int from item where label like 'busy %'")).toEqual([[16]])
  })
})
