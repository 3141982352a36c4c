// A node-postgres application: the project installs pg and @types/pg but neither postgres.js nor knex,
// and checks every declaration it imports (skipLibCheck off). Compiled with tsc, then run.
import pg from 'pg'
import { createTablesSql, defineSchema, entity, flushwave, t, type EntityOf, type KnexLike } from 'flushwave'

const schema = defineSchema({
  Author: entity('author', { id: t.id(), name: t.text(), books: t.oneToMany('Book', 'author') }),
  Book: entity('book', { id: t.id(), title: t.text(), author: t.manyToOne('Author') }),
})
type Book = EntityOf<typeof schema, 'Book'>

// @ts-expect-error: a pg.Pool is not a knex instance
const notKnex: KnexLike = new pg.Pool()
void notKnex
// @ts-expect-error: nor is it a postgres.js instance
const notPostgresJs = () => flushwave({ schema, sql: new pg.Pool() })
void notPostgresJs

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 2 })
try {
  for (const statement of createTablesSql(schema)) await pool.query(statement)
  const orm = flushwave({ schema, pg: pool })
  const em = orm.em()
  const ann = em.create('Author', { name: 'Ann' })
  const book: Book = em.create('Book', { title: 'Pipelines', author: ann })
  const result = await em.flush()
  const reader = orm.em()
  const again = await reader.load('Book', book.id)
  await reader.populate(again, 'author')
  const title: string = again.title
  if (title !== 'Pipelines' || again.author.name !== 'Ann') throw new Error(`read back ${title} by ${again.author.name}`)
  console.log(`pg-only consumer: flushed ${JSON.stringify(result.inserted)} and read it back`)
} finally {
  await pool.end()
}
