import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EntityStateError } from '../../src/index.js'
import { bookstore } from '../support/bookstore.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

let db: TestDatabase<typeof bookstore.defs>
beforeAll(async () => {
  db = await testDatabase(bookstore, { name: 'tx', max: 2 })
})
afterAll(() => db.close())

const visible = async (name: string) => (await db.sql`select count(*)::int as n from author where name = ${name}`)[0]!.n as number

describe('em.transaction', () => {
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
    const error = await em
      .transaction(async (tx) => {
        before.name = 'renamed in tx'
        const inside = tx.create('Author', { name: 'created in tx' })
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
    // The EntityManager is as it was: `before` is loaded and still renamed-but-unflushed, the new
    // author is new again (no id), and a plain flush now writes both.
    expect(before.name).toBe('renamed in tx')
    const created = (await em.find('Author', { name: 'renamed in tx' })).length
    expect(created).toBe(0)
    const result = await em.flush()
    expect(result.inserted).toEqual({ author: 1 })
    expect(result.updated).toEqual({ author: 1 })
    expect(await visible('renamed in tx')).toBe(1)
    expect(await visible('created in tx')).toBe(1)
  })

  it('does not nest', async () => {
    const em = db.orm.em()
    await expect(em.transaction(() => em.transaction(async () => 1))).rejects.toBeInstanceOf(EntityStateError)
  })
})
