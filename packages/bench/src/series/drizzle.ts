import { and, asc, eq, exists, gte, ilike, inArray, relations, sql as drizzleSql } from 'drizzle-orm'
import { drizzle, type PostgresJsDatabase } from 'drizzle-orm/postgres-js'
import { bigint, index, integer, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core'
import postgres from 'postgres'
import { mixedTable, MIXED_TABLES } from '../schema.js'
import { listResult, type Series, type SeriesFactory } from './types.js'

/**
 * Drizzle 0.45 on postgres.js, used as its docs show: `pgTable` definitions mapped onto the harness's
 * tables (never pushed or migrated from here), and for every unit of work one
 * `db.transaction(async (tx) => …)` of awaited set-based statements. Drizzle has no unit of work or
 * change tracking: the code says which statements run. Its postgres.js session sends every
 * statement with `prepare: false` (unnamed statements), as configured by Drizzle; left as is.
 */

const id = () => bigint('id', { mode: 'number' }).primaryKey().generatedByDefaultAsIdentity()
const createdAt = () => timestamp('created_at', { withTimezone: true }).notNull().defaultNow()
const updatedAt = () => timestamp('updated_at', { withTimezone: true }).notNull().defaultNow()

export const author = pgTable('author', {
  id: id(),
  firstName: text('first_name').notNull(),
  lastName: text('last_name').notNull(),
  email: text('email').notNull().unique(),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
})

export const book = pgTable(
  'book',
  {
    id: id(),
    title: text('title').notNull(),
    authorId: bigint('author_id', { mode: 'number' })
      .notNull()
      .references(() => author.id),
    published: timestamp('published', { withTimezone: true }),
    pages: integer('pages').notNull().default(0),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index().on(t.authorId)],
)

export const bookReview = pgTable(
  'book_review',
  {
    id: id(),
    bookId: bigint('book_id', { mode: 'number' })
      .notNull()
      .references(() => book.id),
    rating: integer('rating').notNull(),
    text: text('text'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index().on(t.bookId)],
)

export const tag = pgTable('tag', {
  id: id(),
  name: text('name').notNull().unique(),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
})

export const bookTag = pgTable(
  'book_tag',
  {
    bookId: bigint('book_id', { mode: 'number' })
      .notNull()
      .references(() => book.id),
    tagId: bigint('tag_id', { mode: 'number' })
      .notNull()
      .references(() => tag.id),
  },
  (t) => [primaryKey({ columns: [t.bookId, t.tagId] }), index().on(t.tagId)],
)

// Relations, for the relational query API (`db.query.book.findMany({ with })`) of listEndpoint.
export const authorRelations = relations(author, ({ many }) => ({ books: many(book) }))
export const bookRelations = relations(book, ({ one, many }) => ({
  author: one(author, { fields: [book.authorId], references: [author.id] }),
  reviews: many(bookReview),
}))
export const bookReviewRelations = relations(bookReview, ({ one }) => ({ book: one(book, { fields: [bookReview.bookId], references: [book.id] }) }))
const relational = { author, book, bookReview, authorRelations, bookRelations, bookReviewRelations }

export const scaleItem = pgTable('scale_item', { id: id(), name: text('name').notNull() })

function mixed(name: string) {
  return pgTable(name, { id: id(), name: text('name').notNull(), value: integer('value').notNull(), updatedAt: updatedAt() })
}
type Mixed = ReturnType<typeof mixed>

/** t01…t20 by table name. */
export const mixedTables: ReadonlyMap<string, Mixed> = new Map(
  Array.from({ length: MIXED_TABLES }, (_, i) => {
    const name = mixedTable(i + 1)
    return [name, mixed(name)] as const
  }),
)

function table(name: string): Mixed {
  const t = mixedTables.get(name)
  if (!t) throw new Error(`drizzle series: no table ${name}`)
  return t
}

type Db = PostgresJsDatabase<typeof relational>

export const series: SeriesFactory = {
  name: 'drizzle',
  // Its postgres.js session already sends unnamed statements.
  pooler: true,
  async open(url, options = {}) {
    const client = postgres(url, { max: options.poolSize ?? 1, onnotice: () => {} })
    const db = drizzle({ client, schema: relational })
    // postgres.js connects lazily: connect now (and fetch its array types), not in the first timed unit of work.
    await db.execute(drizzleSql`select 1`)
    return drizzleUnitsOfWork(db, () => client.end())
  },
}

function byId<T extends { id: number }>(rows: readonly T[], ids: readonly number[]): T[] {
  const map = new Map(rows.map((r) => [r.id, r]))
  return ids.map((i) => {
    const row = map.get(i)
    if (!row) throw new Error(`drizzle series: row ${i} was not loaded`)
    return row
  })
}

function drizzleUnitsOfWork(db: Db, close: () => Promise<void>): Series {
  return {
    async bulkCreate(g) {
      return async () => {
        await db.transaction(async (tx) => {
          // One multi-row INSERT per table; ids come back in VALUES order (RETURNING keeps it).
          const authorIds = await tx.insert(author).values(g.authors.map((a) => ({ ...a }))).returning({ id: author.id })
          const bookIds = await tx
            .insert(book)
            .values(g.books.map((b) => ({ title: b.title, pages: b.pages, authorId: authorIds[b.author]!.id })))
            .returning({ id: book.id })
          await tx.insert(bookReview).values(g.reviews.map((r) => ({ rating: r.rating, text: r.text, bookId: bookIds[r.book]!.id })))
          const tagIds = await tx.insert(tag).values(g.tags.map((x) => ({ name: x.name }))).returning({ id: tag.id })
          await tx.insert(bookTag).values(g.bookTags.map((l) => ({ bookId: bookIds[l.book]!.id, tagId: tagIds[l.tag]!.id })))
        })
      }
    },
    async bulkUpdate(seed) {
      const [authors, books, reviews, tags, rows] = await Promise.all([
        db.select().from(author).where(inArray(author.id, [...seed.authorIds])),
        db.select().from(book).where(inArray(book.id, [...seed.bookIds])),
        db.select().from(bookReview).where(inArray(bookReview.id, [...seed.reviewIds])),
        db.select().from(tag).where(inArray(tag.id, [...seed.tagIds])),
        db.select().from(table('t01')).where(inArray(table('t01').id, [...seed.t01Ids])),
      ])
      const namedTags = byId(tags, seed.tagIds)
      const t01 = table('t01')
      return async () => {
        await db.transaction(async (tx) => {
          // Same value on every loaded row: one UPDATE … WHERE id IN (…) per table, as a Drizzle user
          // writes it. Tag names differ per row and Drizzle has no multi-row update: one UPDATE each.
          await tx.update(author).set({ firstName: seed.firstName }).where(inArray(author.id, authors.map((a) => a.id)))
          await tx.update(book).set({ title: seed.title, pages: seed.pages }).where(inArray(book.id, books.map((b) => b.id)))
          await tx.update(bookReview).set({ rating: seed.rating }).where(inArray(bookReview.id, reviews.map((r) => r.id)))
          for (const [i, x] of namedTags.entries()) await tx.update(tag).set({ name: `${seed.tagPrefix}${i}` }).where(eq(tag.id, x.id))
          await tx.update(t01).set({ value: seed.value }).where(inArray(t01.id, rows.map((r) => r.id)))
        })
      }
    },
    async mixedFlush(seed) {
      const loaded = await Promise.all(
        seed.tables.map(async (name, i) => {
          const t = table(name)
          const [updated, deleted] = byId(await db.select().from(t).where(inArray(t.id, [seed.updateIds[i]!, seed.deleteIds[i]!])), [
            seed.updateIds[i]!,
            seed.deleteIds[i]!,
          ])
          return { t, updated: updated!, deleted: deleted! }
        }),
      )
      return async () => {
        await db.transaction(async (tx) => {
          for (const { t, updated, deleted } of loaded) {
            await tx.insert(t).values({ name: seed.insertName, value: 1 })
            await tx.update(t).set({ value: seed.updateValue }).where(eq(t.id, updated.id))
            await tx.delete(t).where(eq(t.id, deleted.id))
          }
        })
      }
    },
    async deleteGraph(seed) {
      const [a] = await db.select().from(author).where(eq(author.id, seed.authorId))
      if (!a) throw new Error(`drizzle series: author ${seed.authorId} not found`)
      const bookIds = (await db.select().from(book).where(eq(book.authorId, a.id))).map((b) => b.id)
      const [reviews, links] = await Promise.all([
        db.select().from(bookReview).where(inArray(bookReview.bookId, bookIds)),
        db.select().from(bookTag).where(inArray(bookTag.bookId, bookIds)),
      ])
      if (links.length === 0) throw new Error('drizzle series: the author has no book_tag links')
      return async () => {
        await db.transaction(async (tx) => {
          // No ON DELETE CASCADE: children first. The links have no id; delete them by book.
          await tx.delete(bookTag).where(inArray(bookTag.bookId, bookIds))
          await tx.delete(bookReview).where(inArray(bookReview.id, reviews.map((r) => r.id)))
          await tx.delete(book).where(inArray(book.id, bookIds))
          await tx.delete(author).where(eq(author.id, a.id))
        })
      }
    },
    async cpuFlush(seed) {
      const t = table(seed.table)
      const rows = await db.select().from(t).where(inArray(t.id, [...seed.ids]))
      return async () => {
        // value = value + 1 on every loaded row: one set-based UPDATE (no change tracking to run).
        await db.transaction(async (tx) => {
          await tx
            .update(t)
            .set({ value: drizzleSql`${t.value} + 1` })
            .where(inArray(t.id, rows.map((r) => r.id)))
        })
      }
    },
    async noopFlush(seed) {
      const t = table(seed.table)
      await db.select().from(t).where(inArray(t.id, [...seed.ids]))
      return async () => {
        // Nothing changed: the same transaction with no statements (BEGIN, COMMIT).
        await db.transaction(async () => {})
      }
    },
    async scale(names) {
      return async () => {
        await db.transaction(async (tx) => {
          // One multi-row INSERT per 10,000 rows: PostgreSQL takes at most 65,535 bind parameters.
          for (let i = 0; i < names.length; i += 10_000) await tx.insert(scaleItem).values(names.slice(i, i + 10_000).map((name) => ({ name })))
        })
      }
    },
    async listEndpoint(seed) {
      const pattern = `${seed.lastNamePrefix}%`
      // The conditions on a book's columns (the relational query's alias of book, or book itself for
      // the count): its author's name, and an EXISTS on its reviews (relational queries filter by
      // the root table's columns only).
      const matching = (b: { id: typeof book.id; authorId: typeof book.authorId }) =>
        and(
          inArray(b.authorId, db.select({ id: author.id }).from(author).where(ilike(author.lastName, pattern))),
          exists(db.select({ one: drizzleSql`1` }).from(bookReview).where(and(eq(bookReview.bookId, b.id), gte(bookReview.rating, seed.minRating)))),
        )
      return async () => {
        // The page with both levels in one relational query (`with`), and the count, started together.
        const [books, count] = await Promise.all([
          db.query.book.findMany({
            where: (b) => matching(b),
            orderBy: (b) => [asc(b.title), asc(b.id)],
            limit: seed.first,
            with: { reviews: true, author: { with: { books: true } } },
          }),
          db.$count(book, matching(book)),
        ])
        return listResult(
          count,
          count > seed.first,
          books.map((b) => ({ id: b.id, reviews: b.reviews.length, author: { id: b.author.id, lastName: b.author.lastName, books: b.author.books.length } })),
        )
      }
    },
    close,
  }
}
