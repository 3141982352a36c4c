/**
 * MikroORM 7 (`@mikro-orm/postgresql`, i.e. Kysely over node-postgres) doing the benchmark's units of
 * work the way its docs recommend: entities declared with `defineEntity` (no decorators), one forked
 * EntityManager per unit of work, load what is needed (untimed), then change the entities and call
 * `em.flush()`, which wraps all the statements it computes in one transaction. Everything else
 * (batch size 300, batched inserts/updates, identity map, change sets) is MikroORM's default.
 */
import { defineEntity, p, type EntityManager, type InferEntity } from '@mikro-orm/core'
import { MikroORM } from '@mikro-orm/postgresql'
import { mixedTable, MIXED_TABLES } from '../schema.js'
import { listResult, type Series, type SeriesFactory } from './types.js'

// The tables are created by the harness: the entities map onto them column for column. Ids are
// int8 identities, mapped to JS numbers (`p.bigint('number')`); created_at/updated_at default to
// now() in the database, so they are `defaultRaw('now()')` and MikroORM leaves them out of INSERTs.
// Relations are thunks (`() => p.manyToOne(Author)`), as the docs show for entities that refer to
// each other.

const Author = defineEntity({
  name: 'Author',
  tableName: 'author',
  properties: {
    id: p.bigint('number').primary(),
    firstName: p.text(),
    lastName: p.text(),
    email: p.text().unique(),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
    books: () => p.oneToMany(Book).mappedBy('author'),
  },
})

const Book = defineEntity({
  name: 'Book',
  tableName: 'book',
  properties: {
    id: p.bigint('number').primary(),
    title: p.text(),
    author: () => p.manyToOne(Author),
    published: p.datetime().nullable(),
    pages: p.integer().default(0),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
    reviews: () => p.oneToMany(BookReview).mappedBy('book'),
    tags: () => p.manyToMany(Tag).pivotTable('book_tag').joinColumn('book_id').inverseJoinColumn('tag_id'),
  },
})

const BookReview = defineEntity({
  name: 'BookReview',
  tableName: 'book_review',
  properties: {
    id: p.bigint('number').primary(),
    book: () => p.manyToOne(Book),
    rating: p.integer(),
    text: p.text().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
})

const Tag = defineEntity({
  name: 'Tag',
  tableName: 'tag',
  properties: {
    id: p.bigint('number').primary(),
    name: p.text().unique(),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
})

const ScaleItem = defineEntity({
  name: 'ScaleItem',
  tableName: 'scale_item',
  properties: { id: p.bigint('number').primary(), name: p.text() },
})

/** t01…t20 share one shape; each is its own entity (T01…T20) on its own table. */
function mixedEntity(table: string) {
  return defineEntity({
    name: table.toUpperCase(),
    tableName: table,
    properties: {
      id: p.bigint('number').primary(),
      name: p.text(),
      value: p.integer(),
      updatedAt: p.datetime().defaultRaw('now()'),
    },
  })
}
type MixedSchema = ReturnType<typeof mixedEntity>
type MixedRow = InferEntity<MixedSchema>

const MIXED = new Map<string, MixedSchema>(Array.from({ length: MIXED_TABLES }, (_, i) => [mixedTable(i + 1), mixedEntity(mixedTable(i + 1))]))
function mixed(table: string): MixedSchema {
  const schema = MIXED.get(table)
  if (!schema) throw new Error(`no MikroORM entity for table ${table}`)
  return schema
}

export const series: SeriesFactory = {
  name: 'mikro-orm',
  // node-postgres sends unnamed statements unless a query is given a name.
  pooler: true,
  async open(url, options = {}) {
    const orm = await MikroORM.init({
      clientUrl: url,
      entities: [Author, Book, BookReview, Tag, ScaleItem, ...MIXED.values()],
      pool: { min: 0, max: options.poolSize ?? 1 },
      debug: false,
      // The harness owns the schema: no database creation, no schema generator, no metadata cache
      // files (defineEntity needs no reflection, so nothing is discovered from the file system).
      ensureDatabase: false,
      metadataCache: { enabled: false },
    })
    await orm.em.getConnection().execute('select 1') // connect now, not in the first timed unit of work
    return mikroOrmUnitsOfWork(orm)
  },
}

function mikroOrmUnitsOfWork(orm: MikroORM): Series {
  const fork = (): EntityManager => orm.em.fork()
  return {
    async bulkCreate(g) {
      return async () => {
        const em = fork()
        const authors = g.authors.map((a) => em.create(Author, a))
        const books = g.books.map((b) => em.create(Book, { title: b.title, pages: b.pages, author: authors[b.author]! }))
        for (const r of g.reviews) em.create(BookReview, { rating: r.rating, text: r.text, book: books[r.book]! })
        const tags = g.tags.map((x) => em.create(Tag, x))
        for (const l of g.bookTags) books[l.book]!.tags.add(tags[l.tag]!)
        await em.flush()
      }
    },
    async bulkUpdate(seed) {
      const em = fork()
      // One connection: the loads run one after another whatever we do, so keep them sequential.
      const authors = await em.find(Author, { id: { $in: [...seed.authorIds] } })
      const books = await em.find(Book, { id: { $in: [...seed.bookIds] } })
      const reviews = await em.find(BookReview, { id: { $in: [...seed.reviewIds] } })
      const tags = await em.find(Tag, { id: { $in: [...seed.tagIds] } }, { orderBy: { id: 'asc' } })
      const rows = await em.find(mixed('t01'), { id: { $in: [...seed.t01Ids] } })
      return async () => {
        for (const a of authors) a.firstName = seed.firstName
        for (const b of books) {
          b.title = seed.title
          b.pages = seed.pages
        }
        for (const r of reviews) r.rating = seed.rating
        tags.forEach((x, i) => (x.name = `${seed.tagPrefix}${i}`))
        for (const r of rows) r.value = seed.value
        await em.flush()
      }
    },
    async mixedFlush(seed) {
      const em = fork()
      const loaded: MixedRow[][] = []
      for (const [i, table] of seed.tables.entries()) {
        loaded.push(await em.find(mixed(table), { id: { $in: [seed.updateIds[i]!, seed.deleteIds[i]!] } }))
      }
      return async () => {
        seed.tables.forEach((table, i) => {
          em.create(mixed(table), { name: seed.insertName, value: 1 })
          for (const row of loaded[i]!) {
            if (row.id === seed.updateIds[i]) row.value = seed.updateValue
            else em.remove(row)
          }
        })
        await em.flush()
      }
    },
    async deleteGraph(seed) {
      const em = fork()
      const author = await em.findOneOrFail(Author, { id: seed.authorId }, { populate: ['books.reviews', 'books.tags'] })
      return async () => {
        // MikroORM does not sync the collections of entities it deletes: it leaves pivot rows to the
        // FK's ON DELETE CASCADE, which its own schema generator always puts on pivot tables. This
        // schema has none, so the links are cleared by a first flush, and both flushes run in one
        // transaction with `em.transactional` (MikroORM's documented explicit demarcation; it
        // flushes again and commits when the callback returns).
        await em.transactional(async (tx) => {
          for (const book of author.books) book.tags.removeAll()
          await tx.flush()
          for (const book of author.books) {
            for (const review of book.reviews) tx.remove(review)
            tx.remove(book)
          }
          tx.remove(author)
        })
      }
    },
    async cpuFlush(seed) {
      const em = fork()
      const rows = await em.find(mixed(seed.table), { id: { $in: [...seed.ids] } })
      return async () => {
        for (const row of rows) row.value = row.value + 1
        await em.flush()
      }
    },
    async noopFlush(seed) {
      const em = fork()
      await em.find(mixed(seed.table), { id: { $in: [...seed.ids] } })
      return async () => {
        await em.flush()
      }
    },
    async scale(names) {
      return async () => {
        const em = fork()
        for (const name of names) em.create(ScaleItem, { name })
        await em.flush()
      }
    },
    async listEndpoint(seed) {
      return async () => {
        const em = fork()
        // findByCursor: the page (`first`, one more row for hasNextPage) and, with the same
        // conditions, the count (its `includeCount`, on by default); `populate` loads the levels.
        const cursor = await em.findByCursor(Book, {
          where: { author: { lastName: { $ilike: `${seed.lastNamePrefix}%` } }, reviews: { $some: { rating: { $gte: seed.minRating } } } },
          orderBy: { title: 'asc', id: 'asc' },
          first: seed.first,
          populate: ['reviews', 'author.books'],
        })
        return listResult(
          cursor.totalCount,
          cursor.hasNextPage,
          cursor.items.map((b) => ({ id: b.id, reviews: b.reviews.length, author: { id: b.author.id, lastName: b.author.lastName, books: b.author.books.length } })),
        )
      }
    },
    close: () => orm.close(true),
  }
}
