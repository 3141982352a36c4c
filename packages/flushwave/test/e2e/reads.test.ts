import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { InvalidCursorError, InvalidValueError, raw, type Entity } from '../../src/index.js'
import { bookstore } from '../support/bookstore.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { ALL_EXECUTORS } from '../support/executors.js'

type D = typeof bookstore.defs
let db: TestDatabase<D>
const ids = { ann: 0, bob: 0, cid: 0 }

/**
 * The reads a list endpoint makes, on every executor: relation conditions, counts and aggregates,
 * offset and keyset pages, populate paths, hand-written SQL. Each is checked against what the seeded
 * rows say, and each sends one statement (populate: one per level).
 */
describe.each(ALL_EXECUTORS)('reads through %s', (executor) => {
  beforeAll(async () => {
    db = await testDatabase(bookstore, { name: 'reads', max: 2, executor })
    const em = db.orm.em()
    const ann = em.create('Author', { name: 'Ann', email: 'ann@example.com', rating: '4.5' })
    const bob = em.create('Author', { name: 'Bob', rating: '3' })
    const cid = em.create('Author', { name: 'Cid' })
    const tags = ['sql', 'ts', 'go'].map((name) => em.create('Tag', { name }))
    for (let i = 0; i < 12; i++) {
      const author = [ann, ann, bob][i % 3]!
      const book = em.create('Book', { title: `Book ${String(i).padStart(2, '0')}`, pages: i % 4 === 0 ? null : 100 + (i % 5) * 10, author, status: i % 2 ? 'published' : 'draft' })
      for (let r = 0; r < i % 3; r++) em.create('Review', { stars: 1 + ((i + r) % 5), book })
      book.tags.add(tags[i % 3]!)
    }
    await em.flush()
    Object.assign(ids, { ann: ann.id, bob: bob.id, cid: cid.id })
  })
  afterAll(() => db.close())

  it('finds across a many-to-one and through a collection, with or and not, in one statement', async () => {
    const em = db.orm.em()
    db.queries.length = 0
    const found = await em.find('Book', { or: [{ author: { name: { ilike: 'b%' } } }, { reviews: { some: { stars: 5 } } }], not: { status: 'draft' } }, { orderBy: { title: 'asc' } })
    expect(db.queries).toHaveLength(1)
    const rows = await db.sql`
      select b.title from book b join author a on a.id = b.author_id
      where (a.name ilike 'b%' or exists (select from review r where r.book_id = b.id and r.stars = 5)) and b.status <> 'draft' order by b.title`
    expect(found.map((b) => b.title)).toEqual(rows.map((r) => r.title))
    expect(found.length).toBeGreaterThan(0)
    const authors = await em.find('Author', { books: { every: { status: 'published' } } }, { orderBy: { name: 'asc' } })
    expect(authors.map((a) => a.name)).toEqual(['Cid']) // no book at all: every holds
    const withTags = await em.find('Author', { books: { some: { tags: { some: { name: 'go' } } } } })
    expect(withTags.map((a) => a.name)).toEqual(['Bob'])
  })

  it('counts, tests for existence and aggregates, typed', async () => {
    const em = db.orm.em()
    db.queries.length = 0
    const [count, any, none] = await Promise.all([em.count('Book', { author: { name: 'Ann' } }), em.exists('Review', { stars: 5 }), em.exists('Book', { author: ids.cid })])
    expect(db.queries).toHaveLength(3)
    expect([count, any, none]).toEqual([8, true, false])
    const all = await em.aggregate('Book', {}, { sum: ['pages'], avg: ['pages'], min: ['title'], max: ['pages'] })
    const [expected] = await db.sql.unsafe('select sum(pages)::int as sum, avg(pages)::text as avg, min(title) as min, max(pages) as max from book')
    expect(all).toEqual({ count: 12, sum: { pages: expected!.sum }, avg: { pages: expected!.avg }, min: { title: expected!.min }, max: { pages: expected!.max } })
    const byStatus = await em.aggregate('Book', { pages: { isNull: false } }, { groupBy: ['status', 'author'], sum: ['pages'] })
    expect(byStatus.map((g) => [g.status, g.author, g.count])).toEqual(
      (await db.sql`select status::text, author_id::int, count(*)::int from book where pages is not null group by 1, 2 order by 1, 2`).map((r) => [r.status, r.author_id, r.count]),
    )
    const rating = await em.aggregate('Author', {}, { sum: ['rating'], avg: ['rating'] })
    expect(rating.sum.rating).toBe('7.5') // numeric stays exact
    expect(Number(rating.avg.rating)).toBeCloseTo(2.5) // Cid's rating is the default, 0
  })

  it('pages by offset and by cursor, stable under ties and under inserts before the cursor', async () => {
    const em = db.orm.em()
    const byOffset = await em.find('Book', {}, { orderBy: { title: 'asc' }, limit: 3, offset: 3 })
    expect(byOffset.map((b) => b.title)).toEqual(['Book 03', 'Book 04', 'Book 05'])
    // Ordered by a column with ties and NULLs (pages): the id breaks the ties.
    const seen: number[] = []
    let page = await em.findPage('Book', {}, { orderBy: { pages: 'desc' }, first: 5 })
    const first = page
    for (;;) {
      seen.push(...page.items.map((b) => b.id))
      if (!page.hasNextPage) break
      page = await em.findPage('Book', {}, { orderBy: { pages: 'desc' }, first: 5, after: page.endCursor })
    }
    const expected = (await db.sql`select id::int from book order by pages desc, id asc`).map((r) => r.id)
    expect(seen).toEqual(expected)
    // A row inserted before the end of page one does not shift page two.
    const writer = db.orm.em()
    writer.create('Book', { title: 'Late', pages: 999, author: writer.ref('Author', ids.bob) })
    await writer.flush()
    const second = await em.findPage('Book', {}, { orderBy: { pages: 'desc' }, first: 5, after: first.endCursor })
    expect(second.items.map((b) => b.id)).toEqual(expected.slice(5, 10))
    await expect(em.findPage('Book', { status: 'draft' }, { orderBy: { pages: 'desc' }, first: 5, after: first.endCursor })).rejects.toBeInstanceOf(InvalidCursorError)
    await expect(em.findPage('Book', {}, { orderBy: { pages: 'desc' }, first: 5, after: first.endCursor!.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A')) })).rejects.toBeInstanceOf(InvalidCursorError)
    await expect(em.findPage('Book', {}, { first: 0 })).rejects.toBeInstanceOf(InvalidValueError)
    writer.remove(await writer.load('Book', (await writer.findOne('Book', { title: 'Late' }))!.id))
    await writer.flush()
  })

  it('populates paths level by level, one statement per relation and level, nothing loaded twice', async () => {
    const em = db.orm.em()
    const authors = await em.find('Author', { name: { in: ['Ann', 'Bob'] } }, { orderBy: { name: 'asc' } })
    db.queries.length = 0
    await em.populate(authors, 'books.reviews.book', 'books.tags')
    // books; then reviews and tags together; then the reviews' books are all loaded already.
    expect(db.queries.map((q) => q.phase)).toEqual(['read', 'read', 'read'])
    const reviews = authors.flatMap((a) => a.books.items.flatMap((b) => b.reviews.items))
    expect(reviews).toHaveLength((await db.sql`select count(*)::int as n from review`)[0]!.n as number)
    expect(authors[0]!.books.items.every((b) => b.tags.isLoaded)).toBe(true)
    db.queries.length = 0
    await em.populate(authors, 'books.reviews')
    expect(db.queries).toHaveLength(0)
    const found = await db.orm.em().find('Book', { title: 'Book 01' }, { populate: ['author', 'reviews'] })
    expect(found[0]!.author.name).toBe('Ann')
    expect(found[0]!.reviews.length).toBe(1)
  })

  it('reads a find or a page and its populate, every level, in one statement', async () => {
    const em = db.orm.em()
    db.queries.length = 0
    const books = await em.find('Book', { author: { name: 'Ann' } }, { orderBy: { title: 'desc' }, limit: 3, populate: ['reviews', 'author.books', 'tags'] })
    expect(db.queries).toHaveLength(1)
    const rows = await db.sql`
      select b.title, (select count(*)::int from review r where r.book_id = b.id) as reviews, (select count(*)::int from book_tag t where t.book_id = b.id) as tags
      from book b join author a on a.id = b.author_id where a.name = 'Ann' order by b.title desc limit 3`
    expect(books.map((b) => [b.title, b.reviews.length, b.tags.length, b.author.name, b.author.books.length])).toEqual(rows.map((r) => [r.title, r.reviews, r.tags, 'Ann', 8]))
    db.queries.length = 0
    const page = await em.findPage('Book', { pages: { gte: 120 } }, { orderBy: { pages: 'asc' }, first: 2, populate: ['author', 'reviews.book'] })
    expect(db.queries).toHaveLength(1)
    const expected = await db.sql`
      select b.title, a.name, (select count(*)::int from review r where r.book_id = b.id) as reviews
      from book b join author a on a.id = b.author_id where b.pages >= 120 order by b.pages, b.id limit 2`
    expect(page.items.map((b) => [b.title, b.author.name, b.reviews.length])).toEqual(expected.map((r) => [r.title, r.name, r.reviews]))
    expect(page.items.flatMap((b) => b.reviews.items.map((r) => r.book))).toEqual(page.items.flatMap((b) => b.reviews.items.map(() => b)))
    // No rows: nothing to populate, and no error.
    expect(await em.find('Book', { title: 'no such book' }, { populate: ['reviews.book'] })).toEqual([])
  })

  it('keeps what is loaded and unflushed, and reads after the statement what differs here', async () => {
    const em = db.orm.em()
    // A loaded collection with an unflushed book stays as it is.
    const [ann] = await em.find('Author', { name: 'Ann' }, { populate: ['books'] })
    const extra = em.create('Book', { title: 'Unflushed', author: ann! })
    // A reference changed before the read is the one populated, and its collection too: the
    // statement read the row's author (Ann), so Bob and his books are read after it, by id.
    const [book] = await em.find('Book', { title: 'Book 00' })
    book!.author = em.ref('Author', ids.bob)
    db.queries.length = 0
    await em.find('Book', { title: 'Book 00' }, { populate: ['author.books'] })
    expect(db.queries).toHaveLength(3) // the statement, then Bob, then Bob's books
    expect(ann!.books.items).toContain(extra)
    expect(book!.author.name).toBe('Bob')
    expect(book!.author.books.length).toBe(5) // his 4, and Book 00 is his here
  })

  it('turns hand-written SQL into entities, binding values, and refuses rows of another shape', async () => {
    const em = db.orm.em()
    const books = await em.findBySql('Book', raw`select * from book where author_id = ${ids.bob} and title like ${'Book%'} order by title`)
    expect(books.map((b) => b.title)).toEqual(['Book 02', 'Book 05', 'Book 08', 'Book 11'])
    expect(books[0]).toBe(await em.load('Book', books[0]!.id)) // in the identity map
    const same = await em.findBySql('Book', 'select * from book where id = $1', [books[0]!.id])
    expect(same).toEqual([books[0]])
    await expect(em.findBySql('Book', 'select id, title from book')).rejects.toBeInstanceOf(InvalidValueError)
    await expect(em.findBySql('Book', 'select *, 1 as extra from book')).rejects.toBeInstanceOf(InvalidValueError)
    await expect(em.findBySql('Book', raw`select * from book where title = ${"x' or '1'='1"}`)).resolves.toEqual([])
    const rows = await em.query<{ name: string; books: number }>(raw`select a.name, count(b.id)::int as books from author a left join book b on b.author_id = a.id group by a.name order by a.name`)
    expect(rows).toEqual([
      { name: 'Ann', books: 8 },
      { name: 'Bob', books: 4 },
      { name: 'Cid', books: 0 },
    ])
  })

  it('streams any number of rows in batches through a cursor, letting go of each batch', async () => {
    const em = db.orm.em()
    const titles: string[] = []
    let first: Entity<D, 'Book'> | undefined
    for await (const book of em.stream('Book', { pages: { isNull: false } }, { batchSize: 3, orderBy: { title: 'asc' } })) {
      first ??= book
      titles.push(book.title)
    }
    expect(titles).toEqual((await db.sql`select title from book where pages is not null order by title`).map((r) => r.title))
    // The first batch's entities left the EntityManager: reading the row again makes a new object.
    expect(await em.load('Book', first!.id)).not.toBe(first)
    const kept: Entity<D, 'Book'>[] = []
    for await (const book of em.stream('Book', {}, { batchSize: 4, keep: true })) kept.push(book)
    expect(await em.load('Book', kept[0]!.id)).toBe(kept[0])
    // Leaving the loop early closes the cursor; the connection is free again.
    for await (const book of db.orm.em().stream('Book', {}, { batchSize: 2 })) if (book) break
    expect(await db.orm.em().count('Book')).toBe(12)
    // Inside a transaction the cursor is the transaction's and sees its writes.
    await db.orm.em().transaction(async (tx) => {
      tx.create('Book', { title: 'Streamed in tx', author: tx.ref('Author', ids.cid) })
      await tx.flush()
      const seen: string[] = []
      for await (const book of tx.stream('Book', { author: ids.cid })) seen.push(book.title)
      expect(seen).toEqual(['Streamed in tx'])
      throw new Error('roll back')
    }).catch(() => undefined)
  })

  it('refuses bad conditions with a typed error and sends nothing', async () => {
    const em = db.orm.em()
    db.queries.length = 0
    const bad = [
      () => em.find('Book', { author: { nosuch: 1 } } as never),
      () => em.count('Book', { reviews: { many: {} } } as never),
      () => em.aggregate('Book', {}, { sum: ['title'] } as never),
      () => em.aggregate('Book', {}, { max: ['meta'] } as never),
      () => em.find('Book', {}, { offset: -1 }),
      () => em.populate([] as Entity<D, 'Book'>[], 'nosuch' as never),
    ]
    for (const call of bad.slice(0, 5)) await expect(call()).rejects.toBeInstanceOf(InvalidValueError)
    expect(db.queries).toHaveLength(0)
  })
})
