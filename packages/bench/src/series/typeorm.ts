/**
 * TypeORM 1.1 (node-postgres driver) doing the benchmark's units of work the way its docs recommend:
 * entities declared with `EntitySchema` (no decorators), loading through `dataSource.manager`
 * (untimed), and every unit of work in `dataSource.transaction(async (manager) => ...)` with
 * `manager.save(...)` / `manager.remove(...)`. A new graph is saved through relation cascades
 * (`cascade: ['insert']` on author.books, book.reviews and book.tags), with one `save` of the root
 * entities, as TypeORM's relations/cascades docs show. Everything else is TypeORM's default.
 */
import { DataSource, EntitySchema, In, type DeepPartial, type EntityManager } from 'typeorm'
import { mixedTable, MIXED_TABLES } from '../schema.js'
import { listResult, type Series, type SeriesFactory } from './types.js'

// The tables are created by the harness; the schemas map onto them column for column and TypeORM
// never synchronizes. Ids are int8 identities: node-postgres returns int8 as strings and TypeORM
// keeps them so. Its `parseInt8` option would make them numbers, but only by setting
// `pg.defaults.parseInt8`, i.e. the process-wide pg-types int8 parser every other pg user in the
// process shares; so ids stay strings here and the seeds' numbers are converted where they are used.
// created_at/updated_at default to now() in the database: `default: () => 'now()'` makes TypeORM
// send DEFAULT and read the values back with RETURNING (like the other series, nothing bumps
// updated_at on UPDATE; TypeORM's `updateDate` columns would add `updated_at = CURRENT_TIMESTAMP`).

interface Author {
  id: string
  firstName: string
  lastName: string
  email: string
  createdAt: Date
  updatedAt: Date
  books: Book[]
}
interface Book {
  id: string
  title: string
  author: Author
  published: Date | null
  pages: number
  createdAt: Date
  updatedAt: Date
  reviews: BookReview[]
  tags: Tag[]
}
interface BookReview {
  id: string
  book: Book
  rating: number
  text: string | null
  createdAt: Date
  updatedAt: Date
}
interface Tag {
  id: string
  name: string
  createdAt: Date
  updatedAt: Date
}
interface MixedRow {
  id: string
  name: string
  value: number
  updatedAt: Date
}

const id = { type: 'bigint', primary: true, generated: 'increment' } as const
const timestamp = (name: string) => ({ type: 'timestamptz', name, default: () => 'now()' }) as const

const AuthorSchema = new EntitySchema<Author>({
  name: 'Author',
  tableName: 'author',
  columns: {
    id,
    firstName: { type: 'text', name: 'first_name' },
    lastName: { type: 'text', name: 'last_name' },
    email: { type: 'text', unique: true },
    createdAt: timestamp('created_at'),
    updatedAt: timestamp('updated_at'),
  },
  relations: {
    books: { type: 'one-to-many', target: 'Book', inverseSide: 'author', cascade: ['insert'] },
  },
})

const BookSchema = new EntitySchema<Book>({
  name: 'Book',
  tableName: 'book',
  columns: {
    id,
    title: { type: 'text' },
    published: { type: 'timestamptz', nullable: true },
    pages: { type: 'int4', default: 0 },
    createdAt: timestamp('created_at'),
    updatedAt: timestamp('updated_at'),
  },
  relations: {
    author: { type: 'many-to-one', target: 'Author', inverseSide: 'books', joinColumn: { name: 'author_id' }, nullable: false },
    reviews: { type: 'one-to-many', target: 'BookReview', inverseSide: 'book', cascade: ['insert'] },
    // Only inserts cascade: removing a book must never remove its tags (they stay).
    tags: {
      type: 'many-to-many',
      target: 'Tag',
      joinTable: { name: 'book_tag', joinColumn: { name: 'book_id' }, inverseJoinColumn: { name: 'tag_id' } },
      cascade: ['insert'],
    },
  },
})

const BookReviewSchema = new EntitySchema<BookReview>({
  name: 'BookReview',
  tableName: 'book_review',
  columns: {
    id,
    rating: { type: 'int4' },
    text: { type: 'text', nullable: true },
    createdAt: timestamp('created_at'),
    updatedAt: timestamp('updated_at'),
  },
  relations: {
    book: { type: 'many-to-one', target: 'Book', inverseSide: 'reviews', joinColumn: { name: 'book_id' }, nullable: false },
  },
})

const TagSchema = new EntitySchema<Tag>({
  name: 'Tag',
  tableName: 'tag',
  columns: {
    id,
    name: { type: 'text', unique: true },
    createdAt: timestamp('created_at'),
    updatedAt: timestamp('updated_at'),
  },
})

interface ScaleItem {
  id: string
  name: string
}
const ScaleItemSchema = new EntitySchema<ScaleItem>({ name: 'ScaleItem', tableName: 'scale_item', columns: { id, name: { type: 'text' } } })

/** t01…t20 share one shape; each is its own entity (T01…T20) on its own table. */
function mixedSchema(table: string): EntitySchema<MixedRow> {
  return new EntitySchema<MixedRow>({
    name: table.toUpperCase(),
    tableName: table,
    columns: { id, name: { type: 'text' }, value: { type: 'int4' }, updatedAt: timestamp('updated_at') },
  })
}
const MIXED = new Map(Array.from({ length: MIXED_TABLES }, (_, i) => [mixedTable(i + 1), mixedSchema(mixedTable(i + 1))]))
function mixed(table: string): EntitySchema<MixedRow> {
  const schema = MIXED.get(table)
  if (!schema) throw new Error(`no TypeORM entity for table ${table}`)
  return schema
}

const ids = (values: readonly number[]) => In(values.map(String))

export const series: SeriesFactory = {
  name: 'typeorm',
  pooler: true,
  async open(url, options = {}) {
    const dataSource = new DataSource({
      type: 'postgres',
      url,
      entities: [AuthorSchema, BookSchema, BookReviewSchema, TagSchema, ScaleItemSchema, ...MIXED.values()],
      synchronize: false,
      migrationsRun: false,
      logging: false,
      extra: { max: options.poolSize ?? 1 },
    })
    await dataSource.initialize()
    await dataSource.query('select 1') // connect now, not in the first timed unit of work
    return typeormUnitsOfWork(dataSource)
  },
}

function typeormUnitsOfWork(dataSource: DataSource): Series {
  const loader: EntityManager = dataSource.manager
  return {
    async bulkCreate(g) {
      return async () => {
        // The whole graph as plain objects hung off the authors; one cascading save inserts it.
        const tags = g.tags.map((x): DeepPartial<Tag> => ({ name: x.name }))
        const authors = g.authors.map((a): DeepPartial<Author> & { books: DeepPartial<Book>[] } => ({ ...a, books: [] }))
        const books = g.books.map((b) => {
          const book: DeepPartial<Book> & { reviews: DeepPartial<BookReview>[]; tags: DeepPartial<Tag>[] } = { title: b.title, pages: b.pages, reviews: [], tags: [] }
          authors[b.author]!.books.push(book)
          return book
        })
        for (const r of g.reviews) books[r.book]!.reviews.push({ rating: r.rating, text: r.text })
        for (const l of g.bookTags) books[l.book]!.tags.push(tags[l.tag]!)
        await dataSource.transaction(async (manager) => {
          await manager.save(AuthorSchema, authors)
        })
      }
    },
    async bulkUpdate(seed) {
      const authors = await loader.findBy(AuthorSchema, { id: ids(seed.authorIds) })
      const books = await loader.findBy(BookSchema, { id: ids(seed.bookIds) })
      const reviews = await loader.findBy(BookReviewSchema, { id: ids(seed.reviewIds) })
      const tags = await loader.find(TagSchema, { where: { id: ids(seed.tagIds) }, order: { id: 'ASC' } })
      const rows = await loader.findBy(mixed('t01'), { id: ids(seed.t01Ids) })
      return async () => {
        for (const a of authors) a.firstName = seed.firstName
        for (const b of books) {
          b.title = seed.title
          b.pages = seed.pages
        }
        for (const r of reviews) r.rating = seed.rating
        tags.forEach((x, i) => (x.name = `${seed.tagPrefix}${i}`))
        for (const r of rows) r.value = seed.value
        await dataSource.transaction(async (manager) => {
          await manager.save(AuthorSchema, authors)
          await manager.save(BookSchema, books)
          await manager.save(BookReviewSchema, reviews)
          await manager.save(TagSchema, tags)
          await manager.save(mixed('t01'), rows)
        })
      }
    },
    async mixedFlush(seed) {
      const loaded: MixedRow[][] = []
      for (const [i, table] of seed.tables.entries()) {
        loaded.push(await loader.findBy(mixed(table), { id: ids([seed.updateIds[i]!, seed.deleteIds[i]!]) }))
      }
      return async () => {
        await dataSource.transaction(async (manager) => {
          for (const [i, table] of seed.tables.entries()) {
            const schema = mixed(table)
            const rows = loaded[i]!
            const updated = rows.filter((row) => row.id === String(seed.updateIds[i]))
            for (const row of updated) row.value = seed.updateValue
            await manager.save(schema, [{ name: seed.insertName, value: 1 }, ...updated])
            await manager.remove(schema, rows.filter((row) => row.id === String(seed.deleteIds[i])))
          }
        })
      }
    },
    async deleteGraph(seed) {
      const author = await loader.findOneOrFail(AuthorSchema, {
        where: { id: String(seed.authorId) },
        relations: { books: { reviews: true, tags: true } },
      })
      return async () => {
        await dataSource.transaction(async (manager) => {
          await manager.remove(BookReviewSchema, author.books.flatMap((book) => book.reviews))
          // Removing a book deletes its book_tag rows first (TypeORM does that for every owned
          // many-to-many relation of a removed entity); the tags themselves stay.
          await manager.remove(BookSchema, author.books)
          await manager.remove(AuthorSchema, author)
        })
      }
    },
    async cpuFlush(seed) {
      const rows = await loader.findBy(mixed(seed.table), { id: ids(seed.ids) })
      return async () => {
        for (const row of rows) row.value = row.value + 1
        await dataSource.transaction(async (manager) => {
          await manager.save(mixed(seed.table), rows)
        })
      }
    },
    async noopFlush(seed) {
      // TypeORM has no unit of work to flush: the equivalent is saving the loaded entities
      // unchanged, which makes it diff them against the database and write nothing.
      const rows = await loader.findBy(mixed(seed.table), { id: ids(seed.ids) })
      return async () => {
        await dataSource.transaction(async (manager) => {
          await manager.save(mixed(seed.table), rows)
        })
      }
    },
    async scale(names) {
      return async () => {
        await dataSource.transaction(async (manager) => {
          // insert() of an array: one multi-row INSERT (with RETURNING id) per 10,000 rows, under
          // PostgreSQL's 65,535 bind parameters; save() would first look every entity up.
          for (let i = 0; i < names.length; i += 10_000) await manager.insert(ScaleItemSchema, names.slice(i, i + 10_000).map((name) => ({ name })))
        })
      }
    },
    async listEndpoint(seed) {
      return async () => {
        // A QueryBuilder: the author joined for the filter and selected, the levels joined and
        // selected, an EXISTS on the reviews; `take` with joins makes TypeORM select the page's ids
        // first; getManyAndCount adds the count.
        const [books, count] = await dataSource
          .getRepository(BookSchema)
          .createQueryBuilder('b')
          .innerJoinAndSelect('b.author', 'a')
          .leftJoinAndSelect('a.books', 'ab')
          .leftJoinAndSelect('b.reviews', 'r')
          .where('a.lastName ILIKE :pattern', { pattern: `${seed.lastNamePrefix}%` })
          .andWhere('exists (select 1 from book_review x where x.book_id = b.id and x.rating >= :minRating)', { minRating: seed.minRating })
          .orderBy('b.title', 'ASC')
          .addOrderBy('b.id', 'ASC')
          .take(seed.first)
          .getManyAndCount()
        return listResult(
          count,
          count > seed.first,
          books.map((b) => ({ id: b.id, reviews: b.reviews.length, author: { id: b.author.id, lastName: b.author.lastName, books: b.author.books.length } })),
        )
      }
    },
    close: () => dataSource.destroy(),
  }
}
