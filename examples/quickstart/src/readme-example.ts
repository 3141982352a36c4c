// The README's example, kept here so that it is type-checked (pnpm test) and can be run:
// DATABASE_URL=postgres://… pnpm --filter quickstart exec tsx src/readme-example.ts
import postgres from 'postgres'
import { createTablesSql, defineSchema, entity, flushwave, t, tcpNoDelay, type EntityOf } from 'flushwave'

export const schema = defineSchema({
  Author: entity('author', {
    id: t.id(),                          // int8 identity; ids come from the sequence, in blocks
    name: t.text(),
    email: t.text().nullable().unique(),
    createdAt: t.timestamptz().defaultNow(),
    books: t.oneToMany('Book', 'author'),
  }),
  Book: entity('book', {
    id: t.id(),
    title: t.text(),
    status: t.enum('book_status', ['draft', 'published']).default('draft'),
    author: t.manyToOne('Author'),       // column author_id
    tags: t.manyToMany('Tag'),           // join table book_tag (book_id, tag_id)
  }),
  Tag: entity('tag', { id: t.uuidId(), name: t.text() }),   // UUID v7 made on the client
})
export type Author = EntityOf<typeof schema, 'Author'>      // { name: string; books: Collection<Book>; … }

const sql = postgres(process.env.DATABASE_URL!, { ...tcpNoDelay }) // your pool; Flushwave opens none
for (const statement of createTablesSql(schema)) await sql.unsafe(statement)  // or your migrations
const orm = flushwave({ schema, sql })

// One EntityManager per request.
const em = orm.em()
const ann = em.create('Author', { name: 'Ann' })
const book = em.create('Book', { title: 'Pipelines', author: ann })
book.tags.add(em.create('Tag', { name: 'databases' }))
const result = await em.flush()        // BEGIN; 4 inserts; COMMIT — one round trip once warm
console.log(result.inserted, result.roundTrips)   // [Object: null prototype] { author: 1, book: 1, tag: 1, book_tag: 1 } 2: the id allocation, then the pipeline; 1 once the pool has ids

// Later: load (calls in one tick share one query), change, flush only the changed columns.
const em2 = orm.em()
const author = await em2.load('Author', ann.id)
await em2.populate(author, 'books')
for (const b of author.books) b.status = 'published'
author.email = 'ann@example.com'
await em2.flush()                      // one UPDATE per table, whatever the number of rows

const [first] = await em2.find('Book', { status: 'published', title: { like: 'P%' } }, { orderBy: { title: 'asc' }, limit: 10 })
if (first) em2.remove(first)
await em2.flush()
await sql.end()
