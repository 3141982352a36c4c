import { describe, expectTypeOf, it } from 'vitest'
import { defineSchema, entity, t, type Collection, type Flushwave, type FlushResult, type CounterName, type CreateInput, type EntityManager, type EntityOf, type Where } from '../../src/index.js'
import type { Author, Book, bookstore } from '../support/bookstore.js'

type D = typeof bookstore.defs

// These tests are checked by `tsc` (the typecheck script): each @ts-expect-error must be an error.
describe('inferred entity types', () => {
  it('types columns, references and collections from the schema', () => {
    expectTypeOf<Author['name']>().toEqualTypeOf<string>()
    expectTypeOf<Author['email']>().toEqualTypeOf<string | null>()
    expectTypeOf<Author['id']>().toEqualTypeOf<number>()
    expectTypeOf<Author['createdAt']>().toEqualTypeOf<Date>()
    expectTypeOf<Book['author']>().toEqualTypeOf<Author>()
    expectTypeOf<Book['status']>().toEqualTypeOf<'draft' | 'published'>()
    expectTypeOf<Book['meta']>().toEqualTypeOf<{ isbn?: string; tags?: string[] } | null>()
    expectTypeOf<Author['books']>().toEqualTypeOf<Collection<Book>>()
    expectTypeOf<CounterName<D, 'Book'>>().toEqualTypeOf<'pages'>()
    expectTypeOf<CounterName<D, 'Author'>>().toEqualTypeOf<'rating'>()
  })

  it('rejects wrong properties and values at compile time', () => {
    const check = (author: Author, book: Book, em: EntityManager<D>) => {
      // @ts-expect-error no such property
      void author.nmae
      // @ts-expect-error a Book is not an Author
      book.author = book
      // @ts-expect-error ids are read-only
      author.id = 3
      // @ts-expect-error title is required
      em.create('Book', { author })
      em.assign(book, { title: 'x', author, pages: null }) // any subset of columns and references
      // @ts-expect-error assign takes no id
      em.assign(book, { id: 3 })
      // @ts-expect-error nor collections
      em.assign(author, { books: [] })
      // @ts-expect-error pages is a number
      em.assign(book, { pages: '12' })
      em.increment(book, 'pages', 2) // integer (nullable too), bigint and numeric columns are counters
      em.increment(author, 'rating', '0.5')
      // @ts-expect-error a text column is no counter, though numeric values are strings too
      em.increment(author, 'name', '1')
      // @ts-expect-error nor a reference
      em.increment(book, 'author', 1)
      // @ts-expect-error pages adds a number
      em.increment(book, 'pages', 2n)
      // @ts-expect-error a numeric adds a decimal string
      em.increment(author, 'rating', 1n)
      // @ts-expect-error wrong type
      em.create('Author', { name: 1 })
      // @ts-expect-error unknown entity
      em.create('Publisher', {})
      // @ts-expect-error pages is a number column
      void em.find('Book', { pages: { gt: 'many' } })
      em.create('Book', { title: 't', author, tags: [] })
      void em.find('Book', { author, pages: { gte: 10 }, title: { like: 'A%' } })
      void em.populate(book, 'reviews', 'tags')
      // @ts-expect-error not a relation
      void em.populate(book, 'title')
    }
    expectTypeOf(check).toBeFunction()
  })

  it('types the reads: where trees, relation conditions, counts, aggregates, pages and populate paths', () => {
    const check = async (em: EntityManager<D>) => {
      void em.find('Book', { or: [{ author: { name: { ilike: 'a%' } } }, { reviews: { some: { stars: 5 } } }], not: { status: 'draft' } })
      void em.find('Author', { books: { every: { tags: { none: { name: 'x' } } } }, email: { notLike: '%@x' } })
      void em.find('Book', { meta: { contains: { tags: ['a'] }, hasKey: 'isbn' }, pages: { nin: [1], between: [1, 9] } })
      // @ts-expect-error like is for text: a uuid, numeric or integer column has no pattern match
      void em.find('Author', { rating: { like: '1%' } })
      // @ts-expect-error a jsonb column takes operators, not a document
      void em.find('Book', { meta: { isbn: 'x' } })
      // @ts-expect-error unknown property of the entity a many-to-one leads to
      void em.find('Book', { author: { nmae: 'x' } })
      // @ts-expect-error some is for collections, not a many-to-one
      void em.find('Book', { author: { some: { name: 'x' } } })
      // @ts-expect-error a collection takes some, none or every
      void em.find('Author', { books: { title: 'x' } })
      void em.find('Book', { status: 'draft', pages: 1, title: 't', meta: null, author: 1, tags: {}, reviews: {}, id: 1, and: [], or: [], not: {} })
      // @ts-expect-error not a property
      void em.find('Book', { x: 1 })
      expectTypeOf(await em.count('Book', { title: 'x' })).toEqualTypeOf<number>()
      expectTypeOf(await em.exists('Book')).toEqualTypeOf<boolean>()
      const sums = await em.aggregate('Book', {}, { sum: ['pages'], max: ['title'] })
      expectTypeOf(sums.count).toEqualTypeOf<number>()
      expectTypeOf(sums.sum.pages).toEqualTypeOf<number | null>()
      expectTypeOf(sums.max.title).toEqualTypeOf<string | null>()
      const rating = await em.aggregate('Author', {}, { avg: ['rating'], sum: ['rating'] })
      expectTypeOf(rating.sum.rating).toEqualTypeOf<string | null>() // numeric stays an exact string
      const groups = await em.aggregate('Book', {}, { groupBy: ['status', 'author'] })
      expectTypeOf(groups).toEqualTypeOf<({ readonly status: 'draft' | 'published'; readonly author: number } & { readonly count: number })[]>()
      // @ts-expect-error the sum of a text column
      void em.aggregate('Book', {}, { sum: ['title'] })
      // @ts-expect-error no minimum of a jsonb column
      void em.aggregate('Book', {}, { min: ['meta'] })
      const page = await em.findPage('Book', { status: 'published' }, { orderBy: { title: 'desc' }, first: 10 })
      expectTypeOf(page.items).toEqualTypeOf<Book[]>()
      expectTypeOf(page.endCursor).toEqualTypeOf<string | undefined>()
      void em.populate(page.items, 'reviews.book.author', 'tags')
      // @ts-expect-error not a path of relations
      void em.populate(page.items, 'reviews.stars')
      void em.find('Author', {}, { populate: ['books.reviews'], offset: 10, limit: 5 })
      expectTypeOf(await em.findBySql('Book', 'select * from book')).toEqualTypeOf<Book[]>()
    }
    expectTypeOf(check).toBeFunction()
  })

  it('makes only non-null columns without defaults required on create', () => {
    expectTypeOf<CreateInput<D, 'Author'>>().toEqualTypeOf<{ name: string } & { email?: string | null; rating?: string; createdAt?: Date }>()
    expectTypeOf<Where<D, 'Tag'>>().toHaveProperty('name')
  })
})

describe('column and key types', () => {
  const typed = defineSchema({
    Country: entity('country', { code: t.providedId(t.varchar(2)), name: t.text() }),
    City: entity('city', {
      id: t.id(t.integer()),
      country: t.manyToOne('Country'),
      tags: t.array(t.text()),
      scores: t.array(t.integer().nullable()).nullable(),
      photo: t.bytea().nullable(),
      day: t.date(),
      at: t.timestamp(),
      ratio: t.double(),
      // T and the operators inferred together (an explicit <T> leaves the operators at equality).
      path: t.custom({ sqlType: 'ltree', toText: (v: string[]) => v.join('.'), fromDb: (s) => s.split('.'), operators: 'ordered' }),
    }),
  })
  type TD = typeof typed.defs
  type City = EntityOf<typeof typed, 'City'>

  it('infers each type, arrays by their element, keys by their column type', () => {
    expectTypeOf<City['id']>().toEqualTypeOf<number>()
    expectTypeOf<EntityOf<typeof typed, 'Country'>['code']>().toEqualTypeOf<string>()
    expectTypeOf<City['tags']>().toEqualTypeOf<string[]>()
    expectTypeOf<City['scores']>().toEqualTypeOf<(number | null)[] | null>()
    expectTypeOf<City['photo']>().toEqualTypeOf<Uint8Array | null>()
    expectTypeOf<City['day']>().toEqualTypeOf<string>()
    expectTypeOf<City['at']>().toEqualTypeOf<Date>()
    expectTypeOf<City['path']>().toEqualTypeOf<string[]>()
  })

  it('rejects misuse at compile time', () => {
    const check = (em: EntityManager<TD>, city: City) => {
      void em.load('Country', 'FR')
      // @ts-expect-error a varchar key is a string
      void em.load('Country', 42)
      // @ts-expect-error an int4 key is a number
      em.ref('City', 'one')
      // @ts-expect-error elements of text[] are not nullable
      city.tags = ['a', null]
      city.scores = [1, null]
      void em.find('City', { tags: { contains: ['a'] }, scores: { overlaps: [1] }, photo: { eq: new Uint8Array(1) }, day: { gte: '2020-01-01' }, path: { gt: ['a'] } })
      // @ts-expect-error arrays have no order
      void em.find('City', { tags: { gt: ['a'] } })
      // @ts-expect-error bytea has no order
      void em.find('City', { photo: { gt: new Uint8Array(1) } })
      // @ts-expect-error no minimum of an array
      void em.aggregate('City', {}, { min: ['tags'] })
      void em.aggregate('City', {}, { min: ['day', 'ratio', 'at'] })
    }
    expectTypeOf(check).toBeFunction()
  })
})

describe('server-filled columns', () => {
  const served = defineSchema({
    Order: entity('order_row', {
      id: t.id(),
      label: t.text(),
      createdAt: t.timestamptz().serverDefault('now()'),
      code: t.integer().serverDefault(),
      price: t.numeric(),
      total: t.numeric().generated('price * 2'),
      note: t.text().generated("'x'").nullable(),
    }),
  })
  type S = typeof served.defs
  type Order = EntityOf<typeof served, 'Order'>

  it('lets create leave a server default out, and keeps generated columns out of create and assignments', () => {
    expectTypeOf<Order['createdAt']>().toEqualTypeOf<Date>()
    expectTypeOf<Order['total']>().toEqualTypeOf<string>()
    expectTypeOf<Order['note']>().toEqualTypeOf<string | null>()
    expectTypeOf<keyof CreateInput<S, 'Order'>>().toEqualTypeOf<'label' | 'createdAt' | 'code' | 'price'>()
    expectTypeOf<CounterName<S, 'Order'>>().toEqualTypeOf<'code' | 'price'>()
    const check = (em: EntityManager<S>, order: Order) => {
      em.create('Order', { label: 'a', price: '1' })
      em.create('Order', { label: 'a', price: '1', createdAt: new Date(), code: 3 })
      // @ts-expect-error a generated column is not written
      em.create('Order', { label: 'a', price: '1', total: '2' })
      // @ts-expect-error nor assigned
      order.total = '2'
      // @ts-expect-error nor in assign
      em.assign(order, { total: '2' })
      // @ts-expect-error nor a counter
      em.increment(order, 'total', 1)
      order.createdAt = new Date() // a server default is an ordinary column once set
    }
    expectTypeOf(check).toBeFunction()
  })

  it('an idempotent unit of work returns JSON, and says whether it was replayed', () => {
    const check = async (orm: Flushwave<typeof bookstore.defs>) => {
      const done = await orm.unitOfWork(async (em) => ({ id: em.create('Author', { name: 'a' }).name, n: 1, tags: ['x'] }), { idempotencyKey: 'k' })
      expectTypeOf(done.value).toEqualTypeOf<{ id: string; n: number; tags: string[] }>()
      expectTypeOf(done.replayed).toEqualTypeOf<boolean>()
      expectTypeOf(done.flush).toEqualTypeOf<FlushResult | undefined>()
      const nothing = await orm.unitOfWork(async () => {}, { idempotencyKey: 'k' })
      expectTypeOf(nothing.value).toEqualTypeOf<void>()
      // @ts-expect-error a Date is not JSON: it would come back as a string
      void orm.unitOfWork(async () => ({ at: new Date() }), { idempotencyKey: 'k' })
      // @ts-expect-error nor is a bigint
      void orm.unitOfWork(async () => 1n, { idempotencyKey: 'k' })
      // Without a key, anything goes, and the flush is always there.
      expectTypeOf((await orm.unitOfWork(async () => new Date())).flush).toEqualTypeOf<FlushResult>()
    }
    void check
  })
})

