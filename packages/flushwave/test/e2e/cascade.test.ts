import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { createTablesSql, defineSchema, entity, ForeignKeyViolationError, t } from '../../src/index.js'
import { IdentityMap } from '../../src/entities/identity-map.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

const schema = defineSchema({
  Publisher: entity('publisher', { id: t.id(), name: t.text() }),
  Editor: entity('editor', { id: t.id(), name: t.text() }),
  Author: entity('author', { id: t.id(), name: t.text(), books: t.oneToMany('Book', 'author') }),
  Book: entity('book', {
    id: t.id(),
    title: t.text(),
    author: t.manyToOne('Author').onDelete('cascade'),
    editor: t.manyToOne('Editor').nullable().onDelete('set null'),
    publisher: t.manyToOne('Publisher').nullable().onDelete('restrict'),
    reviews: t.oneToMany('Review', 'book'),
    tags: t.manyToMany('Tag'),
  }),
  Review: entity('review', { id: t.id(), stars: t.integer(), book: t.manyToOne('Book').onDelete('cascade') }),
  Tag: entity('tag', { id: t.id(), name: t.text() }),
})

let db: TestDatabase<typeof schema.defs>
beforeAll(async () => {
  db = await testDatabase(schema, { name: 'cascade' })
  // The unit of work must cascade by itself, also where the database's foreign keys do not.
  for (const fk of ['book_author_id_fkey', 'book_editor_id_fkey', 'review_book_id_fkey']) {
    const [table, column] = fk.startsWith('book') ? ['book', fk.slice(5, -5)] : ['review', 'book_id']
    const target = column.replace('_id', '')
    await db.sql.unsafe(`alter table ${table} drop constraint ${fk}, add constraint ${fk} foreign key (${column}) references ${target} (id)`)
  }
  expect(createTablesSql(schema).join('\n')).toContain('on delete cascade')
})
afterAll(() => db.close())

async function seed() {
  const em = db.orm.em()
  const author = em.create('Author', { name: 'a' })
  const editor = em.create('Editor', { name: 'e' })
  const books = [1, 2, 3].map((i) => em.create('Book', { title: `b${i}`, author, editor }))
  for (const book of books) {
    for (let r = 0; r < 3; r++) em.create('Review', { stars: r, book })
    book.tags.add(em.create('Tag', { name: `t-${book.title}` }))
  }
  await em.flush()
  return { authorId: author.id, editorId: editor.id, bookIds: books.map((b) => b.id) }
}

describe('cascades in the unit of work', () => {
  it('deletes children never loaded, grandchildren and links first, in the same pipeline', async () => {
    // Once to prepare the statement shapes on the connection, then measured.
    const warm = db.orm.em()
    warm.remove(await warm.load('Author', (await seed()).authorId))
    await warm.flush()
    const { authorId, bookIds } = await seed()
    const em = db.orm.em()
    const author = await em.load('Author', authorId)
    const loadedBook = await em.load('Book', bookIds[0]!)
    em.remove(author)
    db.queries.length = 0
    const result = await em.flush()
    expect(result).toMatchObject({ waves: 1, roundTrips: 1 })
    expect(db.writes().map((q) => q.text)).toEqual([
      // Cascades lock the rows they find in id order, as every multi-row write does, and return
      // the ids they deleted: the identity map follows them exactly.
      'with d as (select t."id" as k from "review" as t where t."book_id" in (select c1."id" from "book" as c1 where c1."author_id" = any($1::int8[])) order by t."id" for update of t) ' +
        'delete from "review" as t using d where t."id" = d.k returning t."id"::text',
      // Links too, in key order.
      'with d as (select j."book_id" as o, j."tag_id" as t from "book_tag" as j where j."book_id" in (select c1."id" from "book" as c1 where c1."author_id" = any($1::int8[])) order by 1, 2 for update of j) ' +
        'delete from "book_tag" as j using d where j."book_id" = d.o and j."tag_id" = d.t',
      'with d as (select t."id" as k from "book" as t where t."author_id" = any($1::int8[]) order by t."id" for update of t) delete from "book" as t using d where t."id" = d.k returning t."id"::text',
      // One row: a scalar bind, no array.
      'delete from "author" where "id" = $1::int8',
    ])
    expect(result.deleted).toEqual({ review: 9, book_tag: 3, book: 3, author: 1 })
    expect(await db.sql`select id from book where id in ${db.sql(bookIds)}`).toEqual([])
    expect(() => (loadedBook.title = 'x')).toThrow(/detached/)
  })

  it('sets references to null, in the database and in memory', async () => {
    const { editorId, bookIds } = await seed()
    const em = db.orm.em()
    const book = await em.load('Book', bookIds[0]!)
    em.remove(await em.load('Editor', editorId))
    const result = await em.flush()
    expect(result.deleted).toEqual({ editor: 1 })
    expect(result.updated).toEqual({ book: 3 }) // the unlinked children count as updated
    expect(book.editor).toBeNull()
    expect(await db.sql`select count(*)::int as n from book where id in ${db.sql(bookIds)} and editor_id is null`).toEqual([{ n: 3 }])
    book.title = 'still writable'
    expect((await em.flush()).updated).toEqual({ book: 1 })
  })

  it('walks only the loaded entities of the types a cascade reaches, not the identity map', async () => {
    const walkedBy = async (remove: 'Author' | 'Editor' | 'Tag'): Promise<string[]> => {
      const { authorId, editorId, bookIds } = await seed()
      const em = db.orm.em()
      const author = await em.load('Author', authorId)
      const editor = await em.load('Editor', editorId)
      const books = await em.find('Book', { id: { in: bookIds } })
      await em.populate(books, 'reviews', 'tags')
      const tag = books[0]!.tags.items[0]!
      em.remove(remove === 'Author' ? author : remove === 'Editor' ? editor : tag)
      const walked: string[] = []
      const real = IdentityMap.prototype.of
      const all = IdentityMap.prototype.byType
      const spies = [
        vi.spyOn(IdentityMap.prototype, 'of').mockImplementation(function (this: IdentityMap, meta) {
          walked.push(meta.name)
          return real.call(this, meta)
        }),
        vi.spyOn(IdentityMap.prototype, 'byType').mockImplementation(function (this: IdentityMap) {
          walked.push('every type')
          return all.call(this)
        }),
      ]
      try {
        await em.flush()
      } finally {
        for (const spy of spies) spy.mockRestore()
      }
      return [...new Set(walked)].sort()
    }
    // A book's author cascades to it, and a book to its reviews; an editor's books are set null.
    expect(await walkedBy('Author')).toEqual(['Book', 'Review'])
    expect(await walkedBy('Editor')).toEqual(['Book'])
    // Nothing cascades to a tag (its links go by SQL): no loaded entity is looked at.
    expect(await walkedBy('Tag')).toEqual([])
  })

  it('refuses a restricted delete and commits nothing', async () => {
    const em = db.orm.em()
    const publisher = em.create('Publisher', { name: 'p' })
    const author = em.create('Author', { name: 'restricted' })
    em.create('Book', { title: 'published', author, publisher })
    await em.flush()

    const em2 = db.orm.em()
    const a = await em2.load('Author', author.id)
    a.name = 'renamed'
    em2.remove(await em2.load('Publisher', publisher.id))
    const error = await em2.flush().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ForeignKeyViolationError)
    expect(error).toMatchObject({ entity: 'Publisher', table: 'publisher', constraint: 'book_publisher_id_fkey' })
    expect(await db.sql`select name from author where id = ${author.id}`).toEqual([{ name: 'restricted' }])
    expect(await db.sql`select 1 from publisher where id = ${publisher.id}`).toHaveLength(1)
  })
})
