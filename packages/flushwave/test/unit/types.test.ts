import { describe, expectTypeOf, it } from 'vitest'
import type { Collection, CounterName, CreateInput, EntityManager, Where } from '../../src/index.js'
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

  it('makes only non-null columns without defaults required on create', () => {
    expectTypeOf<CreateInput<D, 'Author'>>().toEqualTypeOf<{ name: string } & { email?: string | null; rating?: string; createdAt?: Date }>()
    expectTypeOf<Where<D, 'Tag'>>().toHaveProperty('name')
  })
})
