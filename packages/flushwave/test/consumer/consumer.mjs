// A plain Node ESM application using the installed package: define, create tables, flush, read back.
import postgres from 'postgres'
import { createTablesSql, defineSchema, entity, flushwave, t } from 'flushwave'

const schema = defineSchema({
  Author: entity('author', { id: t.id(), name: t.text(), books: t.oneToMany('Book', 'author') }),
  Book: entity('book', { id: t.id(), title: t.text(), author: t.manyToOne('Author') }),
})
const sql = postgres(process.env.DATABASE_URL, { max: 2, onnotice: () => {} })
try {
  for (const statement of createTablesSql(schema)) await sql.unsafe(statement)
  const orm = flushwave({ schema, sql })
  const em = orm.em()
  const ann = em.create('Author', { name: 'Ann' })
  em.create('Book', { title: 'Pipelines', author: ann })
  const result = await em.flush()
  const again = orm.em()
  const author = await again.load('Author', em.idOf(ann))
  await again.populate(author, 'books')
  const titles = [...author.books].map((b) => b.title)
  if (author.name !== 'Ann' || titles.join() !== 'Pipelines') throw new Error(`read back ${author.name} ${titles}`)
  if ((await orm.checkSchema()).length !== 0) throw new Error('checkSchema reported differences')
  console.log(`consumer.mjs: flushed ${JSON.stringify(result.inserted)} and read it back`)
} finally {
  await sql.end()
}
