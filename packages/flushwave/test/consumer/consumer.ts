// Type-checked with the installed package's declarations: entity types must still be inferred.
import { defineSchema, entity, flushwave, t, type EntityOf, type SchemaDifference } from 'flushwave'
import type { Sql } from 'postgres'

const schema = defineSchema({
  Author: entity('author', { id: t.id(), name: t.text(), email: t.text().nullable(), books: t.oneToMany('Book', 'author') }),
  Book: entity('book', { id: t.id(), title: t.text(), pages: t.integer().nullable(), author: t.manyToOne('Author') }),
})
type Author = EntityOf<typeof schema, 'Author'>

export async function use(sql: Sql): Promise<SchemaDifference[]> {
  const orm = flushwave({ schema, sql })
  const em = orm.em()
  const author: Author = em.create('Author', { name: 'Ann', email: null })
  const book = em.create('Book', { title: 'T', author })
  const pages: number | null = book.pages
  const name: string = book.author.name
  // @ts-expect-error: title is a string
  book.title = 42
  // @ts-expect-error: no such property
  em.create('Book', { title: 'T', author, isbn: 'x' })
  // @ts-expect-error: no such entity
  em.create('Publisher', {})
  void pages
  void name
  await em.flush()
  return orm.checkSchema()
}
