import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { flushwave, UniqueViolationError } from '../../src/index.js'
import { bookstore } from '../support/bookstore.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { EXECUTORS } from '../support/executors.js'

let db: TestDatabase<typeof bookstore.defs>

describe.each(EXECUTORS)('sequence ids at create through %s', (executor) => {
  beforeAll(async () => {
    db = await testDatabase(bookstore, { name: 'idsatcreate', max: 2, executor })
  })
  afterAll(() => db.close())
  /** A Flushwave of its own on the same executor: its id pool starts empty. */
  const fresh = () => flushwave({ schema: bookstore, executor: db.orm.executor })

  it('gives a new entity its id at create when the pool holds one, and the flush inserts with it', async () => {
    const orm = fresh()
    await orm.warmUp() // fills the id pool
    const em = orm.em()
    const ann = em.create('Author', { name: 'Ann at create' })
    const book = em.create('Book', { title: 'T', author: ann })
    expect(typeof ann.id).toBe('number')
    expect(em.idOf(book)).toBe(book.id)
    expect(await em.load('Author', ann.id)).toBe(ann) // known by id before its flush
    db.queries.length = 0
    const result = await em.flush()
    expect(result.plan.preparation).toEqual([])
    expect(db.queries.filter((q) => q.phase === 'allocate')).toEqual([])
    expect(await db.sql`select a.id::int as author, b.id::int as book from book b join author a on a.id = b.author_id where a.name = 'Ann at create'`).toEqual([
      { author: ann.id, book: book.id },
    ])
  })

  it('assigns the rest with em.assignIds() in one round trip when the pool is empty', async () => {
    const em = fresh().em()
    const authors = [em.create('Author', { name: 'later 1' }), em.create('Author', { name: 'later 2' })]
    const tag = em.create('Tag', { name: `later ${Math.random()}` })
    expect(authors.map((a) => em.idOf(a))).toEqual([undefined, undefined])
    db.queries.length = 0
    expect(await em.assignIds()).toBe(3)
    expect(db.queries.map((q) => q.phase)).toEqual(['allocate'])
    const ids = authors.map((a) => a.id)
    expect(new Set(ids).size).toBe(2)
    expect(typeof tag.id).toBe('number')
    expect(await em.assignIds()).toBe(0) // nothing left to assign, nothing sent
    expect(db.queries).toHaveLength(1)
    await em.flush()
    expect((await db.sql`select id::int from author where name like 'later %' order by name`).map((r) => r.id)).toEqual(ids)
  })

  it('keeps ids through a failed flush, and gives back the id of a new entity removed before its flush', async () => {
    const orm = fresh()
    await orm.warmUp()
    const em = orm.em()
    const taken = em.create('Tag', { name: 'held' })
    await em.flush()
    const clash = em.create('Tag', { name: 'held' })
    const id = clash.id
    await expect(em.flush()).rejects.toBeInstanceOf(UniqueViolationError)
    expect(clash.id).toBe(id)
    clash.name = 'held, renamed'
    await em.flush()
    expect(await db.sql`select name from tag where id = ${id}`).toEqual([{ name: 'held, renamed' }])

    const dropped = em.create('Tag', { name: 'dropped' })
    const freed = dropped.id
    em.remove(dropped)
    expect(em.create('Tag', { name: 'reuses it' }).id).toBe(freed)
    void taken
  })

  it('drops an entity created inside a rolled-back transaction and gives its id back', async () => {
    const orm = fresh()
    await orm.warmUp()
    const em = orm.em()
    let inside: number | undefined
    await em
      .transaction(async (tx) => {
        inside = tx.create('Author', { name: 'rolled back' }).id
        await tx.flush()
        throw new Error('roll back')
      })
      .catch(() => undefined)
    expect(em.create('Author', { name: 'after' }).id).toBe(inside)
    await em.flush()
    expect(await db.sql`select name from author where id = ${inside!}`).toEqual([{ name: 'after' }])
  })
})
