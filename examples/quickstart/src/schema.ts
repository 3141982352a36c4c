import { defineSchema, entity, t, type EntityOf } from 'flushwave'

export const schema = defineSchema({
  Author: entity('author', {
    id: t.id(),
    name: t.text(),
    email: t.text().nullable().unique(),
    books: t.oneToMany('Book', 'author'),
  }),
  Book: entity('book', {
    id: t.id(),
    title: t.text(),
    published: t.boolean().default(false),
    author: t.manyToOne('Author'),
    reviews: t.oneToMany('Review', 'book'),
    tags: t.manyToMany('Tag'),
  }),
  Review: entity('review', {
    id: t.id(),
    stars: t.integer(),
    book: t.manyToOne('Book'),
  }),
  Tag: entity('tag', {
    id: t.id(),
    name: t.text(),
  }),
})

export type Author = EntityOf<typeof schema, 'Author'>
