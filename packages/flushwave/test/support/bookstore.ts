import { defineSchema, entity, t, type EntityOf } from '../../src/index.js'

/** The schema most tests use: the joist-benchmarks bookstore plus a few column types. */
export const bookstore = defineSchema({
  Author: entity('author', {
    id: t.id(),
    name: t.text(),
    email: t.text().nullable().unique(),
    rating: t.numeric().default('0'),
    createdAt: t.timestamptz().defaultNow(),
    books: t.oneToMany('Book', 'author'),
  }),
  Book: entity('book', {
    id: t.id(),
    title: t.text(),
    pages: t.integer().nullable(),
    status: t.enum('book_status', ['draft', 'published']).default('draft'),
    meta: t.jsonb<{ isbn?: string; tags?: string[] }>().nullable(),
    author: t.manyToOne('Author'),
    reviews: t.oneToMany('Review', 'book'),
    tags: t.manyToMany('Tag'),
  }),
  Review: entity('review', {
    id: t.id(),
    stars: t.integer(),
    body: t.text().nullable(),
    book: t.manyToOne('Book'),
  }),
  Tag: entity('tag', {
    id: t.id(),
    name: t.text().unique(),
  }),
})

export type Author = EntityOf<typeof bookstore, 'Author'>
export type Book = EntityOf<typeof bookstore, 'Book'>
