import { tcpNoDelay } from 'flushwave'
import postgres from 'postgres'
import type { Graph } from '../data.js'
import { typesInserts } from '../types-scale.js'
import { listResult, type ListSeed, type Series, type SeriesFactory, type UnitOfWork } from './types.js'

/**
 * Hand-written postgres.js SQL for the same rows: one statement per table and kind, ids allocated
 * before the timed part. `pipelined` sends BEGIN, the statements and COMMIT on a reserved
 * connection before awaiting anything (the floor: one round trip); `sequential` awaits each
 * statement inside `sql.begin`, as most hand-written code does.
 */
export function rawSeries(name: string, mode: 'pipelined' | 'sequential'): SeriesFactory {
  return {
    name,
    pooler: true,
    async open(url, options = {}) {
      // As Flushwave recommends: TCP_NODELAY, so a pipeline's later pieces never wait for an ACK.
      const sql = postgres(url, { ...tcpNoDelay, max: options.poolSize ?? 1, prepare: !options.pooler, onnotice: () => {} })
      await sql`select 1` // connect now, not in the first timed unit of work
      const commit = mode === 'pipelined' ? pipelined(sql) : sequential(sql)
      // scale's hand-written insert is the same for both: measured once, as raw-pipelined. (typesScale
      // differs: see rawUnitsOfWork.)
      const { scale, ...units } = rawUnitsOfWork(sql, commit, mode)
      return mode === 'pipelined' && scale ? { ...units, scale } : units
    },
  }
}

/** Runs the statements built by `statements` in one transaction. */
type Commit = (statements: (tx: postgres.Sql) => postgres.PendingQuery<postgres.Row[]>[]) => Promise<void>

function pipelined(sql: postgres.Sql): Commit {
  return async (statements) => {
    const tx = await sql.reserve()
    try {
      const results = await Promise.allSettled([tx`begin`, ...statements(tx), tx`commit`])
      const failed = results.find((r) => r.status === 'rejected')
      if (failed) throw (failed as PromiseRejectedResult).reason
    } finally {
      tx.release()
    }
  }
}

function sequential(sql: postgres.Sql): Commit {
  return async (statements) => {
    await sql.begin(async (tx) => {
      // Statements are lazy: each runs when awaited, one after another.
      for (const statement of statements(tx as unknown as postgres.Sql)) await statement
    })
  }
}

function rawUnitsOfWork(sql: postgres.Sql, commit: Commit, mode: 'pipelined' | 'sequential'): Series {
  const nextIds = async (table: string, n: number): Promise<number[]> => {
    const rows = await sql`select nextval(pg_get_serial_sequence(${table}, 'id'))::int8 as id from generate_series(1, ${n}::int)`
    return rows.map((r) => Number(r.id))
  }
  const work = (u: UnitOfWork) => u
  return {
    async bulkCreate(g: Graph) {
      const [a, b, r, t] = await Promise.all([
        nextIds('author', g.authors.length),
        nextIds('book', g.books.length),
        nextIds('book_review', g.reviews.length),
        nextIds('tag', g.tags.length),
      ])
      return work(() =>
        commit((tx) => [
          tx`insert into author (id, first_name, last_name, email) select * from unnest(${a}::int8[], ${g.authors.map((x) => x.firstName)}::text[], ${g.authors.map((x) => x.lastName)}::text[], ${g.authors.map((x) => x.email)}::text[])`,
          tx`insert into book (id, title, pages, author_id) select * from unnest(${b}::int8[], ${g.books.map((x) => x.title)}::text[], ${g.books.map((x) => x.pages)}::int4[], ${g.books.map((x) => a[x.author]!)}::int8[])`,
          tx`insert into book_review (id, rating, text, book_id) select * from unnest(${r}::int8[], ${g.reviews.map((x) => x.rating)}::int4[], ${g.reviews.map((x) => x.text)}::text[], ${g.reviews.map((x) => b[x.book]!)}::int8[])`,
          tx`insert into tag (id, name) select * from unnest(${t}::int8[], ${g.tags.map((x) => x.name)}::text[])`,
          tx`insert into book_tag (book_id, tag_id) select * from unnest(${g.bookTags.map((x) => b[x.book]!)}::int8[], ${g.bookTags.map((x) => t[x.tag]!)}::int8[])`,
        ]),
      )
    },
    async bulkUpdate(s) {
      const tagNames = s.tagIds.map((_, i) => `${s.tagPrefix}${i}`)
      return work(() =>
        commit((tx) => [
          tx`update author set first_name = ${s.firstName} where id = any(${s.authorIds}::int8[])`,
          tx`update book set title = ${s.title}, pages = ${s.pages} where id = any(${s.bookIds}::int8[])`,
          tx`update book_review set rating = ${s.rating} where id = any(${s.reviewIds}::int8[])`,
          tx`update tag set name = d.name from unnest(${s.tagIds}::int8[], ${tagNames}::text[]) as d(id, name) where tag.id = d.id`,
          tx`update t01 set value = ${s.value} where id = any(${s.t01Ids}::int8[])`,
        ]),
      )
    },
    async mixedFlush(s) {
      // The rows a handler reads before changing them, as the ORM series load them (one query per
      // table, sent together): the throughput scenario then times equal work.
      await Promise.all(s.tables.map((table, i) => sql`select id, name, value from ${sql(table)} where id = any(${[s.updateIds[i]!, s.deleteIds[i]!]}::int8[])`))
      return work(() =>
        commit((tx) =>
          s.tables.flatMap((table, i) => [
            tx`insert into ${tx(table)} (name, value) values (${s.insertName}, 1)`,
            tx`update ${tx(table)} set value = ${s.updateValue} where id = ${s.updateIds[i]!}`,
            tx`delete from ${tx(table)} where id = ${s.deleteIds[i]!}`,
          ]),
        ),
      )
    },
    async deleteGraph(s) {
      const books = (await sql`select id from book where author_id = ${s.authorId}`).map((r) => Number(r.id))
      return work(() =>
        commit((tx) => [
          tx`delete from book_tag where book_id = any(${books}::int8[])`,
          tx`delete from book_review where book_id = any(${books}::int8[])`,
          tx`delete from book where id = any(${books}::int8[])`,
          tx`delete from author where id = ${s.authorId}`,
        ]),
      )
    },
    async cpuFlush(s) {
      const rows = await sql`select id, value from ${sql(s.table)} where id = any(${s.ids}::int8[])`
      return work(() => {
        const ids = rows.map((r) => Number(r.id))
        const values = rows.map((r) => Number(r.value) + 1)
        return commit((tx) => [tx`update ${tx(s.table)} as t set value = d.v from unnest(${ids}::int8[], ${values}::int4[]) as d(id, v) where t.id = d.id`])
      })
    },
    async noopFlush() {
      return work(async () => {})
    },
    async scale(names) {
      // As src/scale.ts writes it by hand: ids from nextval, one unnest insert, in a transaction.
      return work(() =>
        sql.begin(async (tx) => {
          const ids = (await tx`select nextval('scale_item_id_seq')::text as id from generate_series(1, ${names.length}::int4)`).map((r) => r.id as string)
          await tx`insert into scale_item (id, name) select * from unnest(${ids}::int8[], ${names as string[]}::text[])`
        }).then(() => undefined),
      )
    },
    async typesScale(rows) {
      // pipelined, the floor: ids from nextval untimed (as in bulkCreate), then BEGIN, the unnest
      // insert and COMMIT in one pipeline. sequential, as scale writes it: ids from nextval, then the
      // insert, each awaited inside sql.begin. Both split above 10,000 rows (typesInserts).
      if (mode === 'sequential') {
        return work(() =>
          sql.begin(async (tx) => {
            const ids = (await tx`select nextval('types_item_id_seq')::text as id from generate_series(1, ${rows.length}::int4)`).map((r) => r.id as string)
            for (const insert of typesInserts(tx, ids, rows)) await insert
          }).then(() => undefined),
        )
      }
      const ids = await nextIds('types_item', rows.length)
      return work(() => commit((tx) => typesInserts(tx, ids, rows)))
    },
    async listEndpoint(seed) {
      return () => listEndpoint(sql, seed, mode)
    },
    close: () => sql.end(),
  }
}

/**
 * listEndpoint by hand: the page (with its author's columns, from the join the filter needs anyway,
 * and one row more than the page, for hasNextPage, as findPage reads it), the count, and the page's
 * reviews (the page's conditions again, as a subquery); then the authors' books. `pipelined` sends
 * the first three together and waits once (postgres.js pipelines queries made together on one
 * connection), `sequential` awaits each.
 */
async function listEndpoint(sql: postgres.Sql, seed: ListSeed, mode: 'pipelined' | 'sequential') {
  const pattern = `${seed.lastNamePrefix}%`
  const matching = (s: postgres.Sql) =>
    s`from book b join author a on a.id = b.author_id
      where a.last_name ilike ${pattern} and exists (select 1 from book_review r where r.book_id = b.id and r.rating >= ${seed.minRating})`
  const pageQuery = () =>
    sql`select b.*, a.first_name as a_first_name, a.last_name as a_last_name, a.email as a_email, a.created_at as a_created_at, a.updated_at as a_updated_at
      ${matching(sql)} order by b.title, b.id limit ${seed.first + 1}`
  const countQuery = () => sql`select count(*)::int8 as n ${matching(sql)}`
  const reviewsQuery = () => sql`select * from book_review where book_id in (select b.id ${matching(sql)} order by b.title, b.id limit ${seed.first})`
  const [found, [counted], reviews] =
    mode === 'pipelined' ? await Promise.all([pageQuery(), countQuery(), reviewsQuery()]) : [await pageQuery(), await countQuery(), await reviewsQuery()]
  const page = found.slice(0, seed.first)
  const authorIds = [...new Set(page.map((b) => b.author_id as string))]
  const books = await sql`select * from book where author_id = any(${authorIds}::int8[])`
  const reviewsOf = count(reviews, 'book_id')
  const booksOf = count(books, 'author_id')
  return listResult(
    counted!.n as string,
    found.length > seed.first,
    page.map((b) => ({ id: b.id as string, reviews: reviewsOf.get(String(b.id)) ?? 0, author: { id: b.author_id as string, lastName: b.a_last_name as string, books: booksOf.get(String(b.author_id)) ?? 0 } })),
  )
}

function count(rows: readonly postgres.Row[], key: string): Map<string, number> {
  const out = new Map<string, number>()
  for (const row of rows) out.set(String(row[key]), (out.get(String(row[key])) ?? 0) + 1)
  return out
}

/**
 * scale written by hand with COPY: ids from nextval, the rows through postgres.js's COPY stream
 * (`.writable()`), in one transaction. Only scale: the baseline of Flushwave's COPY.
 */
export const rawCopySeries: SeriesFactory = {
  name: 'raw-copy',
  pooler: true,
  only: ['scale'],
  async open(url, options = {}) {
    const sql = postgres(url, { ...tcpNoDelay, max: options.poolSize ?? 1, prepare: !options.pooler, onnotice: () => {} })
    await sql`select 1`
    const units = rawUnitsOfWork(sql, pipelined(sql), 'pipelined')
    return {
      ...units,
      async scale(names) {
        return async () => {
          await sql.begin(async (tx) => {
            const ids = (await tx`select nextval('scale_item_id_seq')::text as id from generate_series(1, ${names.length}::int4)`).map((r) => r.id as string)
            const lines: string[] = []
            for (let i = 0; i < names.length; i++) lines.push(`${ids[i]}\t${copyText(names[i]!)}`)
            const stream = await tx.unsafe('copy scale_item (id, name) from stdin').writable()
            await new Promise<void>((resolve, reject) => {
              stream.on('error', reject)
              stream.on('finish', resolve)
              stream.end(`${lines.join('\n')}\n`)
            })
          })
        }
      },
    }
  },
}

/** A text as COPY's text format has it (the bench's names need no more than this). */
const copyText = (value: string): string => value.replace(/[\\\n\r\t]/g, (c) => ({ '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' })[c]!)

