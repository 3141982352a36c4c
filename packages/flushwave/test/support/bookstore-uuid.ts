import { defineSchema, entity, t } from '../../src/index.js'

/**
 * The bookstore graph with client-generated (UUID v7) ids: a flush of new rows needs no id
 * allocation, so round-trip counts show the flush's own pipeline alone.
 */
export const bookstoreUuid = defineSchema({
  Author: entity('author', { id: t.uuidId(), name: t.text(), books: t.oneToMany('Book', 'author') }),
  Book: entity('book', {
    id: t.uuidId(),
    title: t.text(),
    pages: t.integer().nullable(),
    author: t.manyToOne('Author'),
    reviews: t.oneToMany('Review', 'book'),
    tags: t.manyToMany('Tag'),
  }),
  Review: entity('review', { id: t.uuidId(), stars: t.integer(), body: t.text().nullable(), book: t.manyToOne('Book') }),
  Tag: entity('tag', { id: t.uuidId(), name: t.text().unique() }),
})
