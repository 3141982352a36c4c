import { createTestSchema, type TestSchema } from 'devdb'
import knexFactory, { type Knex } from 'knex'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { createTablesSql, EntityStateError, flushwave, UniqueViolationError, type QueryEvent } from '../../src/index.js'
import { bookstore } from '../support/bookstore.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { EXECUTORS } from '../support/executors.js'

let db: TestDatabase<typeof bookstore.defs>

const visible = async (name: string) => (await db.sql`select count(*)::int as n from author where name = ${name}`)[0]!.n as number

describe.each(EXECUTORS)('em.transaction through %s', (executor) => {
  beforeAll(async () => {
    db = await testDatabase(bookstore, { name: 'tx', max: 2, executor })
  })
  afterAll(() => db.close())

  it('runs reads and flushes in one transaction that commits at the end', async () => {
    const em = db.orm.em()
    const result = await em.transaction(async (tx) => {
      const author = tx.create('Author', { name: 'in tx' })
      const first = await tx.flush()
      expect(first.inserted).toEqual({ author: 1 })
      expect(await visible('in tx')).toBe(0) // not committed yet: another connection cannot see it
      const [found] = await tx.find('Author', { name: 'in tx' })
      expect(found).toBe(author)
      tx.create('Book', { title: 'also in tx', author })
      await tx.flush()
      return author.id
    })
    expect(await visible('in tx')).toBe(1)
    expect(await db.sql`select title from book where author_id = ${result}`).toEqual([{ title: 'also in tx' }])
    // Flushes inside sent no BEGIN/COMMIT of their own: only the statements.
    expect(db.writes().filter((q) => /^(begin|commit)/i.test(q.text))).toEqual([])
  })

  it('rolls everything back when the function throws, and leaves every entity as it was', async () => {
    const em = db.orm.em()
    const before = em.create('Author', { name: 'before tx' })
    await em.flush()
    let inside: typeof before | undefined
    const error = await em
      .transaction(async (tx) => {
        before.name = 'renamed in tx'
        inside = tx.create('Author', { name: 'created in tx' })
        await tx.flush()
        expect(tx.idOf(inside)).toBeDefined()
        tx.remove(before)
        await tx.flush()
        throw new Error('changed my mind')
      })
      .catch((e: unknown) => e)
    expect((error as Error).message).toBe('changed my mind')
    expect(await visible('created in tx')).toBe(0)
    expect(await visible('before tx')).toBe(1)
    // The EntityManager is as it was: `before` has its committed name and is managed again, the
    // author created inside is gone with the transaction, and a plain flush writes nothing.
    expect(before.name).toBe('before tx')
    expect(em.isLoaded(before)).toBe(true)
    expect(() => (inside!.name = 'again')).toThrow(EntityStateError)
    expect((await em.find('Author', { name: 'before tx' }))[0]).toBe(before)
    const result = await em.flush()
    expect(result).toMatchObject({ inserted: {}, updated: {}, deleted: {} })
    expect(await visible('renamed in tx')).toBe(0)
    expect(await visible('created in tx')).toBe(0)
  })

  it('after a rollback, changes made before the transaction are pending again and entities read inside are detached', async () => {
    const em = db.orm.em()
    const kept = em.create('Author', { name: 'kept' })
    const other = em.create('Author', { name: 'other' })
    await em.flush()
    kept.name = 'kept, renamed before'
    const book = em.create('Book', { title: 'pending before', author: kept })
    const bookId = em.idOf(book) // from the pool at create: after the flush above, it holds spare ids
    expect(bookId).toBeDefined()
    const reader = db.orm.em()
    const otherAgain = await reader.load('Author', other.id)
    await em
      .transaction(async (tx) => {
        kept.name = 'kept, renamed inside'
        book.title = 'retitled inside'
        const read = await tx.load('Author', other.id) // already in this EntityManager: the same object
        expect(read).toBe(other)
        other.email = 'inside@example.com'
        await tx.flush() // writes the pending changes too, inside the transaction
        throw new Error('roll back')
      })
      .catch(() => undefined)
    expect([kept.name, book.title, other.email]).toEqual(['kept, renamed before', 'pending before', null])
    expect(em.idOf(book)).toBe(bookId) // the id it had before the transaction, which it keeps
    // Read inside a transaction of another EntityManager's own: detached there after a rollback.
    const outsider = await reader
      .transaction(async (tx) => {
        const found = await tx.find('Author', { name: 'kept' })
        throw Object.assign(new Error('roll back'), { found })
      })
      .catch((e: { found: unknown[] }) => e.found)
    expect(outsider).toHaveLength(1)
    expect(() => ((outsider[0] as typeof kept).name = 'x')).toThrow(EntityStateError)
    expect(otherAgain.name).toBe('other') // read before the transaction: untouched
    const result = await em.flush()
    expect(result).toMatchObject({ inserted: { book: 1 }, updated: { author: 1 } })
    expect(await db.sql`select name from author where id = ${kept.id}`).toEqual([{ name: 'kept, renamed before' }])
  })

  it('does not nest', async () => {
    const em = db.orm.em()
    await expect(em.transaction(() => em.transaction(async () => 1))).rejects.toBeInstanceOf(EntityStateError)
  })
})

/** An application on knex passes its own transaction: the flush joins it, as one pipeline. */
describe("flushwave({ knex: trx }) inside the application's knex transaction", () => {
  let ns: TestSchema
  let knex: Knex
  beforeAll(async () => {
    ns = await createTestSchema(inject('databaseUrl'), 'knextx')
    knex = knexFactory({ client: 'pg', connection: inject('databaseUrl'), pool: { min: 0, max: 2 }, searchPath: [ns.name] })
    for (const statement of createTablesSql(bookstore)) await knex.raw(statement)
  })
  afterAll(async () => {
    await knex?.destroy()
    await ns?.drop()
  })
  const names = async () => (await knex('author').select('name').orderBy('name')).map((r: { name: string }) => r.name)

  it("commits with the application's own writes, and sends no BEGIN or COMMIT of its own", async () => {
    const queries: QueryEvent[] = []
    await knex.transaction(async (trx) => {
      await trx('author').insert({ name: 'by knex' })
      const em = flushwave({ schema: bookstore, knex: trx, onQuery: (e) => void queries.push(e) }).em()
      const author = em.create('Author', { name: 'by flushwave' })
      em.create('Book', { title: 'in the same transaction', author })
      const result = await em.flush()
      // A fresh instance's id pool is empty: one round trip for the ids, one for the pipeline.
      expect(result).toMatchObject({ statements: 2, roundTrips: 2 })
      // Visible inside the transaction, to the application's next query on it.
      expect((await trx('book').count<{ count: string }[]>('* as count'))[0]!.count).toBe('1')
      expect(await names()).toEqual([]) // and to nobody else yet
    })
    expect(queries.filter((q) => q.phase === 'write').map((q) => q.text.split(' ')[0]!.toLowerCase())).toEqual(['insert', 'insert'])
    expect(await names()).toEqual(['by flushwave', 'by knex'])
  })

  it("rolls back with the application's transaction", async () => {
    await knex.raw('truncate author cascade')
    const error = await knex
      .transaction(async (trx) => {
        await trx('author').insert({ name: 'knex, rolled back' })
        const em = flushwave({ schema: bookstore, knex: trx }).em()
        em.create('Author', { name: 'flushwave, rolled back' })
        await em.flush()
        throw new Error('the handler failed after the flush')
      })
      .catch((e: unknown) => e)
    expect((error as Error).message).toBe('the handler failed after the flush')
    expect(await names()).toEqual([])
  })

  it("a failing flush is a typed error, and the application's transaction rolls back", async () => {
    await knex.raw('truncate author cascade')
    await knex('author').insert({ name: 'taken', email: 'taken@example.com' })
    const error = await knex
      .transaction(async (trx) => {
        await trx('author').insert({ name: 'knex, before the failure' })
        const em = flushwave({ schema: bookstore, knex: trx }).em()
        em.create('Author', { name: 'duplicate', email: 'taken@example.com' })
        await em.flush()
      })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(UniqueViolationError)
    expect(await names()).toEqual(['taken'])
  })
})
