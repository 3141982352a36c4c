/**
 * Soft delete, on every executor: `em.remove` of an entity declared `{ softDelete }` marks its row
 * with a time in the flush's one pipeline, cascades the mark to soft-deleted children (and down a
 * tree), unlinks `set null` children, and refuses what would leave a live row pointing at a
 * soft-deleted one; every read leaves marked rows out unless `withDeleted`: find, findOne, count,
 * exists, aggregate, findPage, stream, load, collections, and the relations conditions reach.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { defineSchema, entity, EntityStateError, ForeignKeyViolationError, InvalidValueError, NotFoundError, SchemaError, t } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { ALL_EXECUTORS } from '../support/executors.js'

const schema = defineSchema({
  Author: entity(
    'author',
    {
      id: t.id(),
      name: t.text(),
      deletedAt: t.timestamptz().nullable(),
      books: t.oneToMany('Book', 'author'),
      notes: t.oneToMany('Note', 'author'),
    },
    { softDelete: 'deletedAt' },
  ),
  Book: entity(
    'book',
    {
      id: t.id(),
      title: t.text(),
      pages: t.integer(),
      deletedAt: t.timestamptz().nullable(),
      author: t.manyToOne('Author').onDelete('cascade'),
      reviews: t.oneToMany('Review', 'book'),
      tags: t.manyToMany('Tag'),
    },
    { softDelete: 'deletedAt' },
  ),
  // A timestamp without time zone marks these.
  Review: entity('review', { id: t.id(), stars: t.integer(), removedAt: t.timestamp().nullable(), book: t.manyToOne('Book').onDelete('cascade') }, { softDelete: 'removedAt' }),
  Tag: entity('tag', { id: t.id(), name: t.text(), deletedAt: t.timestamptz().nullable() }, { softDelete: 'deletedAt' }),
  // Not soft-deleted: a note is unlinked, a prize (no action) must not point at a deleted author.
  Note: entity('note', { id: t.id(), text: t.text(), author: t.manyToOne('Author').nullable().onDelete('set null') }),
  Prize: entity('prize', { id: t.id(), name: t.text(), author: t.manyToOne('Author').nullable() }),
  Folder: entity('folder', { id: t.id(), name: t.text(), deletedAt: t.timestamptz().nullable(), parent: t.manyToOne('Folder').nullable().onDelete('cascade') }, { softDelete: 'deletedAt' }),
  // A soft-deleted shelf whose slots cascade but are not soft-deleted: refused before anything is sent.
  Shelf: entity('shelf', { id: t.id(), deletedAt: t.timestamptz().nullable() }, { softDelete: 'deletedAt' }),
  Slot: entity('slot', { id: t.id(), shelf: t.manyToOne('Shelf').onDelete('cascade') }),
})

describe('softDelete in the schema', () => {
  it('names a nullable time property of the entity', () => {
    expect(() => defineSchema({ A: entity('a', { id: t.id(), at: t.timestamptz() }, { softDelete: 'at' as never }) })).toThrow(SchemaError)
    expect(() => defineSchema({ A: entity('a', { id: t.id(), at: t.text().nullable() }, { softDelete: 'at' as never }) })).toThrow(SchemaError)
    expect(() => defineSchema({ A: entity('a', { id: t.id() }, { softDelete: 'gone' as never }) })).toThrow(SchemaError)
  })
})

describe.each(ALL_EXECUTORS)('soft delete on %s', (executor) => {
  let db: TestDatabase<typeof schema.defs>
  beforeAll(async () => {
    db = await testDatabase(schema, { name: 'softdelete', executor })
  })
  afterAll(() => db?.close())
  beforeEach(async () => {
    for (const table of ['book_tag', 'review', 'book', 'note', 'prize', 'author', 'tag', 'folder', 'slot', 'shelf']) await db.sql.unsafe(`delete from ${table}`)
  })

  /** Ann (live) with a live and a deleted book; Bob (deleted) with a live-marked book; reviews and tags of each state. */
  async function seed() {
    const em = db.orm.em()
    const ann = em.create('Author', { name: 'Ann' })
    const bob = em.create('Author', { name: 'Bob' })
    const live = em.create('Book', { title: 'Live', pages: 100, author: ann })
    const gone = em.create('Book', { title: 'Gone', pages: 900, author: ann })
    const bobs = em.create('Book', { title: "Bob's", pages: 10, author: bob })
    em.create('Review', { stars: 5, book: live })
    em.create('Review', { stars: 1, book: live })
    const red = em.create('Tag', { name: 'red' })
    const old = em.create('Tag', { name: 'old' })
    live.tags.add(red)
    live.tags.add(old)
    await em.flush()
    // Marked by hand, as another process (or an earlier version) would have: reads must leave them out.
    await db.sql.unsafe(`update book set deleted_at = now() where id = ${gone.id}`)
    await db.sql.unsafe(`update author set deleted_at = now() where id = ${bob.id}`)
    await db.sql.unsafe(`update review set removed_at = now() where stars = 1`)
    await db.sql.unsafe(`update tag set deleted_at = now() where id = ${old.id}`)
    return { ann: ann.id, bob: bob.id, live: live.id, gone: gone.id, bobs: bobs.id }
  }

  it('leaves marked rows out of every read, and takes them in with withDeleted', async () => {
    const ids = await seed()
    const em = db.orm.em()
    expect((await em.find('Book', {}, { orderBy: { id: 'asc' } })).map((b) => b.title)).toEqual(['Live', "Bob's"])
    expect((await em.find('Book', {}, { orderBy: { id: 'asc' }, withDeleted: true })).map((b) => b.title)).toEqual(['Live', 'Gone', "Bob's"])
    expect(await em.findOne('Book', { title: 'Gone' })).toBeUndefined()
    expect(await em.count('Book', {})).toBe(2)
    expect(await em.count('Book', {}, { withDeleted: true })).toBe(3)
    expect(await em.exists('Book', { title: 'Gone' })).toBe(false)
    expect(await em.exists('Book', { title: 'Gone' }, { withDeleted: true })).toBe(true)
    expect(await em.aggregate('Book', {}, { max: ['pages'] })).toMatchObject({ count: 2, max: { pages: 100 } })
    expect(await em.aggregate('Book', {}, { max: ['pages'] }, { withDeleted: true })).toMatchObject({ count: 3, max: { pages: 900 } })
    const page = await em.findPage('Book', {}, { first: 5, orderBy: { title: 'asc' } })
    expect(page.items.map((b) => b.title)).toEqual(["Bob's", 'Live'])
    const streamed: string[] = []
    for await (const b of em.stream('Book', {}, { batchSize: 1, withDeleted: true })) streamed.push(b.title)
    expect(streamed.sort()).toEqual(["Bob's", 'Gone', 'Live'])
    await expect(em.load('Book', ids.gone)).rejects.toThrow(NotFoundError)
    expect(await em.tryLoad('Author', ids.bob)).toBeUndefined()
    expect((await em.load('Book', ids.gone, { withDeleted: true })).title).toBe('Gone')
    await expect(em.find('Book', {}, { withDeleted: 'yes' as never })).rejects.toThrow(InvalidValueError)
  })

  it('leaves them out of the relations conditions reach and of collections', async () => {
    const ids = await seed()
    const em = db.orm.em()
    // Bob's book is live, but its author is not: conditions on the author hold of a live one only.
    expect((await em.find('Book', { author: { name: { in: ['Ann', 'Bob'] } } })).map((b) => b.title)).toEqual(['Live'])
    expect((await em.find('Book', { author: { name: 'Bob' } }, { withDeleted: true })).map((b) => b.title)).toEqual(["Bob's"])
    // The removed 1-star review takes no part in some, none or every.
    expect(await em.count('Book', { reviews: { some: { stars: 1 } } })).toBe(0)
    expect(await em.count('Book', { reviews: { none: { stars: 1 } } })).toBe(2)
    expect(await em.count('Book', { reviews: { every: { stars: 5 } } })).toBe(2)
    expect(await em.count('Book', { reviews: { some: { stars: 1 } } }, { withDeleted: true })).toBe(1)
    expect(await em.count('Book', { tags: { some: { name: 'old' } } })).toBe(0)
    expect(await em.count('Author', { books: { some: { title: 'Gone' } } })).toBe(0)
    // Collections hold live rows: through find's populate (one statement) and through em.populate.
    const [ann] = await em.find('Author', { id: ids.ann }, { populate: ['books.reviews', 'books.tags'] })
    expect(ann!.books.items.map((b) => b.title)).toEqual(['Live'])
    expect(ann!.books.items[0]!.reviews.items.map((r) => r.stars)).toEqual([5])
    expect(ann!.books.items[0]!.tags.items.map((t) => t.name)).toEqual(['red'])
    const em2 = db.orm.em()
    const live = await em2.load('Book', ids.live)
    await em2.populate(live, 'reviews', 'tags')
    expect(live.reviews.items.map((r) => r.stars)).toEqual([5])
    expect(live.tags.items.map((t) => t.name)).toEqual(['red'])
  })

  it('remove marks the row, cascades the mark two levels down, unlinks notes, in one round trip', async () => {
    const em = db.orm.em()
    const ann = em.create('Author', { name: 'Ann' })
    const book = em.create('Book', { title: 'B', pages: 1, author: ann })
    em.create('Book', { title: 'C', pages: 2, author: ann })
    em.create('Review', { stars: 4, book })
    const note = em.create('Note', { text: 'n', author: ann })
    book.tags.add(em.create('Tag', { name: 't' }))
    await em.flush()

    const em2 = db.orm.em()
    const [loaded] = await em2.find('Author', { id: ann.id }, { populate: ['books', 'notes'] })
    const before = Date.now()
    em2.remove(loaded!)
    expect(loaded!.deletedAt).toBeInstanceOf(Date)
    expect(loaded!.books.items).toHaveLength(2)
    const result = await em2.flush()
    expect(result.roundTrips).toBe(1)
    expect(result.deleted).toEqual({})
    expect(result.updated).toMatchObject({ author: 1, book: 2, review: 1, note: 1 })
    // The rows are there, marked; the note is unlinked; the link to the tag stays.
    const [rows] = await db.sql.unsafe(
      `select (select count(*)::int from book where deleted_at is not null) as books, (select count(*)::int from review where removed_at is not null) as reviews, ` +
        `(select author_id from note where id = ${note.id}) as note_author, (select count(*)::int from book_tag) as links, (select count(*)::int from author where deleted_at is not null) as authors`,
    )
    expect(rows).toEqual({ books: 2, reviews: 1, note_author: null, links: 1, authors: 1 })
    // In memory: the books the cascade marked are marked here too, and leave their collections.
    const books = [...(await em2.find('Book', { author: ann.id }, { withDeleted: true }))]
    for (const b of books) expect(b.deletedAt!.getTime()).toBeGreaterThanOrEqual(before - 1000)
    expect(loaded!.books.items).toHaveLength(0)
    expect(await db.orm.em().count('Author', {})).toBe(0)
    // Removed again, it keeps its time and writes nothing.
    em2.remove(loaded!)
    expect((await em2.flush()).statements).toBe(0)
  })

  it('marks the whole tree below a soft-deleted folder', async () => {
    const em = db.orm.em()
    const root = em.create('Folder', { name: 'root' })
    const a = em.create('Folder', { name: 'a', parent: root })
    em.create('Folder', { name: 'a1', parent: a })
    em.create('Folder', { name: 'other' })
    await em.flush()
    const em2 = db.orm.em()
    em2.remove(em2.ref('Folder', root.id))
    await em2.flush()
    const rows = await db.sql.unsafe('select name from folder where deleted_at is null order by name')
    expect(rows.map((r) => r.name)).toEqual(['other'])
  })

  it('refuses, before anything is sent, a cascade to children that have no soft delete', async () => {
    const em = db.orm.em()
    const shelf = em.create('Shelf', {})
    em.create('Slot', { shelf })
    await em.flush()
    const em2 = db.orm.em()
    em2.remove(await em2.load('Shelf', shelf.id))
    db.queries.length = 0
    await expect(em2.flush()).rejects.toThrow(EntityStateError)
    expect(db.writes()).toEqual([])
    expect(await db.orm.em().count('Shelf', {})).toBe(1)
  })

  it('fails, with nothing committed, when a live row still points at a row being soft-deleted', async () => {
    const em = db.orm.em()
    const ann = em.create('Author', { name: 'Ann' })
    const prize = em.create('Prize', { name: 'p', author: ann })
    await em.flush()
    const em2 = db.orm.em()
    em2.remove(await em2.load('Author', ann.id))
    const error = await em2.flush().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ForeignKeyViolationError)
    expect((error as Error).message).toMatch(/Prize .* still refers to a Author being soft-deleted, through author/)
    expect(await db.orm.em().count('Author', {})).toBe(1)
    // Unlinked in the same flush, the prize no longer stands in the way.
    const em3 = db.orm.em()
    const author = await em3.load('Author', ann.id)
    ;(await em3.load('Prize', prize.id)).author = null
    em3.remove(author)
    await em3.flush()
    expect(await db.orm.em().count('Author', {})).toBe(0)
  })
})
