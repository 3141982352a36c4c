import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defineSchema, entity, flushwave, InvalidValueError, t, UniqueViolationError } from '../../src/index.js'
import { bookstore } from '../support/bookstore.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

/**
 * A flush diffs only entities that were touched (a setter, a link) plus the Dates and JSON values
 * of the others, which can change in place. These tests change things every way a user can, and
 * check what the flush sent.
 */
let db: TestDatabase<typeof bookstore.defs>
beforeAll(async () => {
  db = await testDatabase(bookstore, { name: 'dirty' })
  const em = db.orm.em()
  const author = em.create('Author', { name: 'ann', email: 'ann@example.com' })
  for (let i = 0; i < 3; i++) em.create('Book', { title: `b${i}`, author, meta: { isbn: `i${i}` } })
  await em.flush()
})
afterAll(async () => {
  await db.close()
})

async function loaded() {
  const em = db.orm.em()
  const [author] = await em.find('Author', { name: 'ann' })
  const books = await em.find('Book', { author: author! }, { orderBy: { title: 'asc' } })
  return { em, author: author!, books }
}

describe('what a flush diffs', () => {
  it('sends nothing when nothing changed, however often it flushes', async () => {
    const { em } = await loaded()
    db.queries.length = 0
    for (let i = 0; i < 3; i++) expect((await em.flush()).statements).toBe(0)
    expect(db.queries).toEqual([])
  })

  it('writes a loaded Date changed in place, without any setter call', async () => {
    const { em, author } = await loaded()
    const moved = new Date('2001-02-03T04:05:06.007Z')
    author.createdAt.setTime(moved.getTime())
    db.queries.length = 0
    const result = await em.flush()
    expect(result.updated).toEqual({ author: 1 })
    // A one-row update sends it as a scalar, in timestamptz's own text (arrays carry epoch milliseconds: see ColumnType.wire).
    expect(db.writes()[0]!.params).toEqual([String(author.id), '2001-02-03T04:05:06.007Z'])
    // And once written, the same Date changed again in place is seen again.
    author.createdAt.setTime(moved.getTime() + 1)
    expect((await em.flush()).updated).toEqual({ author: 1 })
    const [row] = await db.sql`select created_at from author where id = ${author.id}`
    expect((row!.created_at as Date).getTime()).toBe(moved.getTime() + 1)
  })

  it('writes a loaded JSON object changed in place, and only that book', async () => {
    const { em, books } = await loaded()
    books[1]!.meta!.tags = ['x']
    const result = await em.flush()
    expect(result.updated).toEqual({ book: 1 })
    const [row] = await db.sql`select meta from book where id = ${books[1]!.id}`
    expect(row!.meta).toEqual({ isbn: 'i1', tags: ['x'] })
  })

  it('writes Dates changed in place however user code came to hold them: create(), a setter, toJSON()', async () => {
    const em = db.orm.em()
    const given = new Date('2010-01-01T00:00:00.000Z')
    const created = em.create('Author', { name: 'held', createdAt: given })
    const { books, author } = await loaded()
    const assigned = new Date('2011-01-01T00:00:00.000Z')
    const other = (await em.find('Author', { id: author.id }))[0]!
    other.createdAt = assigned
    await em.flush()
    const [book] = await em.find('Book', { id: books[0]!.id })
    const json = (book as unknown as { toJSON(): { meta: { isbn: string } } }).toJSON()
    expect((await em.flush()).statements).toBe(0)
    given.setTime(Date.parse('2012-01-01T00:00:00.000Z'))
    assigned.setTime(Date.parse('2013-01-01T00:00:00.000Z'))
    json.meta.isbn = 'from json'
    expect((await em.flush()).updated).toEqual({ author: 2, book: 1 })
    const createdAt = async (id: number) => ((await db.sql`select created_at from author where id = ${id}`)[0]!.created_at as Date).toISOString()
    expect(await createdAt(created.id)).toBe('2012-01-01T00:00:00.000Z')
    expect(await createdAt(other.id)).toBe('2013-01-01T00:00:00.000Z')
    const [row] = await db.sql`select meta from book where id = ${book!.id}`
    expect(row!.meta).toEqual({ isbn: 'from json' })
  })

  it('writes links changed on an entity whose own columns did not change', async () => {
    const { em, books } = await loaded()
    books[0]!.tags.add(em.create('Tag', { name: 'linked' }))
    const result = await em.flush()
    expect(result.inserted).toEqual({ tag: 1, book_tag: 1 })
  })

  it('keeps a change made while the flush is in flight for the next flush', async () => {
    // Changes the book when the first write statement is handed to the driver: after the change
    // set was taken, before COMMIT.
    let whileSending: (() => void) | undefined
    const orm = flushwave({ schema: bookstore, sql: db.sql, onQuery: (e) => e.phase === 'write' && whileSending?.() })
    const em = orm.em()
    const [book] = await em.find('Book', { title: 'b0' })
    book!.pages = 10
    whileSending = () => {
      whileSending = undefined
      book!.pages = 11
    }
    expect((await em.flush()).updated).toEqual({ book: 1 })
    expect(book!.pages).toBe(11)
    expect((await em.flush()).updated).toEqual({ book: 1 })
    const books = [book]
    const [row] = await db.sql`select pages from book where id = ${books[0]!.id}`
    expect(row!.pages).toBe(11)
  })

  it('writes the changes of a flush that failed when it is retried', async () => {
    const { em, books, author } = await loaded()
    books[2]!.title = 'renamed'
    const dup = em.create('Author', { name: 'dup', email: author.email })
    await expect(em.flush()).rejects.toBeInstanceOf(UniqueViolationError)
    // Remove the cause; the rename must still be written.
    em.remove(dup)
    expect((await em.flush()).updated).toEqual({ book: 1 })
    const [row] = await db.sql`select title from book where id = ${books[2]!.id}`
    expect(row!.title).toBe('renamed')
  })

  it('puts back what a rolled-back transaction had changed and flushed: the next flush writes nothing', async () => {
    const { em, books } = await loaded()
    const [before] = await db.sql`select title from book where id = ${books[0]!.id}`
    await em
      .transaction(async () => {
        books[0]!.title = 'inside'
        await em.flush()
        throw new Error('roll back')
      })
      .catch(() => undefined)
    expect(books[0]!.title).toBe(before!.title)
    expect((await em.flush()).updated).toEqual({})
    // And it is as dirty-tracked as before: a change now is written.
    books[0]!.title = 'after'
    expect((await em.flush()).updated).toEqual({ book: 1 })
    const [row] = await db.sql`select title from book where id = ${books[0]!.id}`
    expect(row!.title).toBe('after')
  })
  it('writes a defaultNow time nobody read as the time it was made, then only what changes in place once read', async () => {
    const em = db.orm.em()
    const before = Date.now()
    const author = em.create('Author', { name: 'unread' })
    const after = Date.now()
    await em.flush()
    const [stored] = await db.sql`select created_at from author where id = ${author.id}`
    const time = (stored!.created_at as Date).getTime()
    expect(time).toBeGreaterThanOrEqual(before)
    expect(time).toBeLessThanOrEqual(after)
    db.queries.length = 0
    expect((await em.flush()).statements).toBe(0)
    expect(author.createdAt.getTime()).toBe(time)
    expect((await em.flush()).statements).toBe(0) // read, not changed
    author.createdAt.setTime(Date.parse('2003-04-05T06:07:08.009Z'))
    expect((await em.flush()).updated).toEqual({ author: 1 })
    const [row] = await db.sql`select created_at from author where id = ${author.id}`
    expect((row!.created_at as Date).toISOString()).toBe('2003-04-05T06:07:08.009Z')
  })

  it('keeps a defaultNow time first read inside a rolled-back transaction, and its change in place pending', async () => {
    const em = db.orm.em()
    const author = em.create('Author', { name: 'rolled' })
    await em.flush()
    let held: Date | undefined
    await em
      .transaction(async () => {
        author.name = 'inside' // saved by the journal before anything reads the time
        held = author.createdAt
        held.setTime(Date.parse('2004-05-06T07:08:09.010Z'))
        throw new Error('roll back')
      })
      .catch(() => undefined)
    expect(author.name).toBe('rolled')
    expect(author.createdAt).toBe(held)
    expect((await em.flush()).updated).toEqual({ author: 1 })
    const [row] = await db.sql`select name, created_at from author where id = ${author.id}`
    expect(row!.name).toBe('rolled')
    expect((row!.created_at as Date).toISOString()).toBe('2004-05-06T07:08:09.010Z')
  })
})

describe('Dates a validation rule was handed', () => {
  // A field rule gets the value itself: a default Date the application never read is handed out
  // there, and whatever the rule kept can change in place afterwards.
  const kept: Date[] = []
  const schema = defineSchema({
    Event: entity('event', {
      id: t.id(),
      at: t
        .timestamptz()
        .defaultNow()
        .check((at) => {
          kept.push(at)
          return undefined
        }),
    }),
  })
  let events: TestDatabase<typeof schema.defs>
  beforeAll(async () => {
    events = await testDatabase(schema, { name: 'dirty_rules' })
  })
  afterAll(async () => {
    await events.close()
  })

  it('writes a default Date that a rule kept and changed in place, and rejects one made invalid', async () => {
    const em = events.orm.em()
    const event = em.create('Event', {})
    await em.flush()
    expect(kept).toHaveLength(1)
    kept[0]!.setTime(Date.parse('2020-02-02T00:00:00.000Z'))
    expect((await em.flush()).updated).toEqual({ event: 1 })
    const [row] = await events.sql`select at from event where id = ${event.id}`
    expect((row!.at as Date).toISOString()).toBe('2020-02-02T00:00:00.000Z')
    kept[0]!.setTime(NaN)
    await expect(em.flush()).rejects.toThrow(InvalidValueError)
  })
})
