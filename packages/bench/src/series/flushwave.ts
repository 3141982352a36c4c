import * as library from 'flushwave'
import type { Executor, EntityManager, Schema } from 'flushwave'
import postgres from 'postgres'
import type { Graph } from '../data.js'
import { mixedTable, MIXED_TABLES } from '../schema.js'
import { listResult, type Series, type SeriesFactory } from './types.js'

/** Flushwave's public module: this repository's sources, or another commit's (ab.ts). */
export type Library = typeof library

// prettier-ignore
const MIXED = ['T01', 'T02', 'T03', 'T04', 'T05', 'T06', 'T07', 'T08', 'T09', 'T10', 'T11', 'T12', 'T13', 'T14', 'T15', 'T16', 'T17', 'T18', 'T19', 'T20'] as const
type Mixed = (typeof MIXED)[number]

/** Flushwave's schema for the benchmark tables, made with `lib`'s own functions. */
export function schemaOf(lib: Library) {
  const { defineSchema, entity, t } = lib
  const mixedEntity = (table: string) => entity(table, { id: t.id(), name: t.text(), value: t.integer(), updatedAt: t.timestamptz().defaultNow() })
  const mixed = {} as Record<Mixed, ReturnType<typeof mixedEntity>>
  MIXED.slice(0, MIXED_TABLES).forEach((name, i) => (mixed[name] = mixedEntity(mixedTable(i + 1))))
  return defineSchema({
    Author: entity('author', {
      id: t.id(),
      firstName: t.text(),
      lastName: t.text(),
      email: t.text().unique(),
      createdAt: t.timestamptz().defaultNow(),
      updatedAt: t.timestamptz().defaultNow(),
      books: t.oneToMany('Book', 'author'),
    }),
    Book: entity('book', {
      id: t.id(),
      title: t.text(),
      author: t.manyToOne('Author'),
      published: t.timestamptz().nullable(),
      pages: t.integer().default(0),
      createdAt: t.timestamptz().defaultNow(),
      updatedAt: t.timestamptz().defaultNow(),
      reviews: t.oneToMany('BookReview', 'book'),
      tags: t.manyToMany('Tag', { table: 'book_tag' }),
    }),
    BookReview: entity('book_review', {
      id: t.id(),
      book: t.manyToOne('Book'),
      rating: t.integer(),
      text: t.text().nullable(),
      createdAt: t.timestamptz().defaultNow(),
      updatedAt: t.timestamptz().defaultNow(),
    }),
    Tag: entity('tag', {
      id: t.id(),
      name: t.text().unique(),
      createdAt: t.timestamptz().defaultNow(),
      updatedAt: t.timestamptz().defaultNow(),
    }),
    ScaleItem: entity('scale_item', { id: t.id(), name: t.text() }),
    ...typesEntity(lib),
    ...mixed,
  })
}

/**
 * typesScale's table (types-scale.ts), on a library that has the column types of 69aed6b: another
 * commit's (ab.ts) may not, and then the schema leaves it out (only typesScale needs it).
 */
function typesEntity(lib: Library) {
  const { entity, t } = lib
  const make = () => ({
    TypesItem: entity('types_item', {
      id: t.id(),
      rank: t.smallint(),
      score: t.double(),
      ratio: t.real(),
      day: t.date(),
      clock: t.time(),
      seenAt: t.timestamp(),
      span: t.interval(),
      digest: t.bytea(),
      code: t.varchar(20),
      currency: t.char(3),
      email: t.citext(),
      host: t.inet(),
      network: t.cidr(),
      tags: t.array(t.text()),
      counts: t.array(t.integer()),
    }),
  })
  return typeof (t as Partial<typeof t>).smallint === 'function' ? make() : ({} as ReturnType<typeof make>)
}

export const benchSchema = schemaOf(library)

type Defs = typeof benchSchema.defs
export type Em = EntityManager<Defs>
export const mixedName = (table: string) => table.toUpperCase() as Mixed

/** Flushwave as designed: one pipeline from BEGIN to COMMIT. */
export const series: SeriesFactory = flushwaveSeries('flushwave')

/**
 * The unit of work on Flushwave; `executor` swaps how the plan is sent (flushwave-begin),
 * `outcomeLedger: false` turns the outcome ledger off (flushwave-noledger), `telemetry: false`
 * OpenTelemetry (flushwave-nootel).
 */
export function flushwaveSeries(name: string, executor?: (sql: postgres.Sql) => Executor, settings: { outcomeLedger?: false; telemetry?: false } = {}, lib: Library = library): SeriesFactory {
  const schema: Schema<Defs> = lib === library ? benchSchema : schemaOf(lib)
  return {
    name,
    // Behind a pooler postgres.js must not name statements: `prepare: false` (Flushwave follows it).
    pooler: true,
    async open(url, options = {}) {
      // As Flushwave recommends: TCP_NODELAY, so a pipeline's later pieces never wait for an ACK.
      const sql = postgres(url, { ...lib.tcpNoDelay, max: options.poolSize ?? 1, prepare: !options.pooler, onnotice: () => {} })
      await sql`select 1` // connect now, not in the first timed unit of work
      const orm = lib.flushwave(executor ? { schema, executor: executor(sql), ...settings } : { schema, sql, ...settings })
      return flushwaveUnitsOfWork(() => orm.em(), () => sql.end())
    },
  }
}

/**
 * A variant that differs from `flushwave` only in how it writes (flushwave-begin, flushwave-noledger)
 * reads exactly as `flushwave` does: it leaves the read scenarios out.
 */
export function writesOnly(factory: SeriesFactory): SeriesFactory {
  return {
    ...factory,
    async open(url, options) {
      const { listEndpoint: _, ...series } = await factory.open(url, options)
      return series
    },
  }
}

/** bulkCreate's entities on `m`, not flushed (shared with the phase profile). */
export function createGraph(m: Em, g: Graph): void {
  const authors = g.authors.map((a) => m.create('Author', a))
  const books = g.books.map((b) => m.create('Book', { title: b.title, pages: b.pages, author: authors[b.author]! }))
  for (const r of g.reviews) m.create('BookReview', { rating: r.rating, text: r.text, book: books[r.book]! })
  const tags = g.tags.map((x) => m.create('Tag', x))
  for (const l of g.bookTags) books[l.book]!.tags.add(tags[l.tag]!)
}

export function flushwaveUnitsOfWork(em: () => Em, close: () => Promise<void>): Series {
  return {
    async bulkCreate(g) {
      return async () => {
        const m = em()
        createGraph(m, g)
        await m.flush()
      }
    },
    async bulkUpdate(seed) {
      const m = em()
      const [authors, books, reviews, tags, rows] = await Promise.all([
        m.find('Author', { id: { in: seed.authorIds } }),
        m.find('Book', { id: { in: seed.bookIds } }),
        m.find('BookReview', { id: { in: seed.reviewIds } }),
        m.find('Tag', { id: { in: seed.tagIds } }),
        m.find('T01', { id: { in: seed.t01Ids } }),
      ])
      return async () => {
        for (const a of authors) a.firstName = seed.firstName
        for (const b of books) {
          b.title = seed.title
          b.pages = seed.pages
        }
        for (const r of reviews) r.rating = seed.rating
        tags.forEach((x, i) => (x.name = `${seed.tagPrefix}${i}`))
        for (const r of rows) r.value = seed.value
        await m.flush()
      }
    },
    async mixedFlush(seed) {
      const m = em()
      const loaded = await Promise.all(seed.tables.map((table, i) => m.find(mixedName(table), { id: { in: [seed.updateIds[i]!, seed.deleteIds[i]!] } })))
      return async () => {
        seed.tables.forEach((table, i) => {
          m.create(mixedName(table), { name: seed.insertName, value: 1 })
          for (const row of loaded[i]!) {
            if (row.id === seed.updateIds[i]) row.value = seed.updateValue
            else m.remove(row)
          }
        })
        await m.flush()
      }
    },
    async deleteGraph(seed) {
      const m = em()
      const author = await m.load('Author', seed.authorId)
      await m.populate(author, 'books')
      await m.populate(author.books.items, 'reviews', 'tags')
      return async () => {
        for (const book of author.books.items) {
          for (const review of book.reviews.items) m.remove(review)
          for (const tag of book.tags.items) book.tags.remove(tag)
          m.remove(book)
        }
        m.remove(author)
        await m.flush()
      }
    },
    async cpuFlush(seed) {
      const m = em()
      const rows = await m.find(mixedName(seed.table), { id: { in: seed.ids } })
      return async () => {
        for (const row of rows) row.value = row.value + 1
        await m.flush()
      }
    },
    async noopFlush(seed) {
      const m = em()
      await m.find(mixedName(seed.table), { id: { in: seed.ids } })
      return async () => {
        await m.flush()
      }
    },
    async scale(names) {
      return async () => {
        const m = em()
        for (const name of names) m.create('ScaleItem', { name })
        await m.flush()
      }
    },
    async typesScale(rows) {
      return async () => {
        const m = em()
        for (const row of rows) m.create('TypesItem', row)
        await m.flush()
      }
    },
    async listEndpoint(seed) {
      return async () => {
        const m = em()
        const where = { author: { lastName: { ilike: `${seed.lastNamePrefix}%` } }, reviews: { some: { rating: { gte: seed.minRating } } } }
        // The page, its populate and its count, started together: one round trip.
        const populate = ['reviews', 'author.books'] as const
        const [page, count] = await Promise.all([m.findPage('Book', where, { orderBy: { title: 'asc' }, first: seed.first, populate }), m.count('Book', where)])
        return listResult(
          count,
          page.hasNextPage,
          page.items.map((b) => ({ id: b.id, reviews: b.reviews.length, author: { id: b.author.id, lastName: b.author.lastName, books: b.author.books.length } })),
        )
      }
    },
    close,
  }
}
