import { createTestSchema, type TestSchema } from 'devdb'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { createTablesSql, defineSchema, entity, ForeignKeyViolationError, t, UniqueViolationError, type QueryEvent } from '../../src/index.js'
import { PIECE_ROWS } from '../../src/sql/render-copy.js'
import { bookstoreUuid } from '../support/bookstore-uuid.js'
import { EXECUTORS, openExecutor, type OpenedExecutor } from '../support/executors.js'

/**
 * Large inserts by COPY (`copyRows`): in the flush's one pipeline on node-postgres and knex (one
 * round trip, counted), one round trip more on postgres.js (which waits for CopyInResponse); only
 * from the threshold up, all or nothing with the other tables, a constraint broken inside the rows
 * a typed error naming the table, inside `em.transaction()` too.
 * Ids are made by the client (uuid): no id allocation adds a round trip. Every column type through
 * COPY: types-round-trip.test.ts; a connection cut in the middle of COPY data: faults.test.ts.
 */
const schema = bookstoreUuid
/** The same tables and one whose timestamps travel as epoch milliseconds (ColumnType.wire), not as text. */
const stamped = defineSchema({ ...bookstoreUuid.defs, Stamp: entity('stamp', { id: t.uuidId(), at: t.timestamptz(), note: t.text() }) })

describe.each(EXECUTORS)('COPY on %s', (name) => {
  let ns: TestSchema
  let direct: postgres.Sql
  let opened: OpenedExecutor<typeof schema.defs>
  const sent: QueryEvent[] = []
  beforeAll(async () => {
    ns = await createTestSchema(inject('databaseUrl'), `copy_${name.replace(/[^a-z]/g, '')}`)
    direct = postgres(inject('databaseUrl'), { max: 1, onnotice: () => {}, connection: { search_path: `"${ns.name}"` } })
    for (const statement of createTablesSql(stamped)) await direct.unsafe(statement)
    opened = openExecutor(name, inject('databaseUrl'), schema, { max: 2, searchPath: ns.name, orm: { copyRows: 50, onQuery: (e) => sent.push(e) } })
  })
  afterAll(async () => {
    await opened?.close()
    await direct?.end()
    await ns?.drop()
  })

  /** An author with `books` books, each with two reviews. */
  function graph(tag: string, books: number) {
    const em = opened.orm.em()
    const author = em.create('Author', { name: tag })
    for (let b = 0; b < books; b++) {
      const book = em.create('Book', { title: `${tag} ${b}`, author })
      for (const stars of [4, 5]) em.create('Review', { stars, body: `${tag}\t"${b}"\\\n${stars}`, book })
    }
    return em
  }

  it('sends inserts of copyRows rows or more as COPY in the one pipeline, the others as before', async () => {
    sent.length = 0
    const result = await graph('big', 40).flush()
    expect(result.inserted).toEqual({ author: 1, book: 40, review: 80 })
    expect(result.copied).toEqual({ review: 80 })
    expect(result.roundTrips).toBe(name === 'postgres.js' ? 2 : 1)
    const writes = sent.filter((e) => e.phase === 'write').map((e) => e.text.split(' (')[0])
    expect(writes).toEqual(expect.arrayContaining(['copy "review"', 'insert into "author"', 'insert into "book"']))
    const [row] = await direct`select count(*)::int as n, count(distinct body)::int as bodies from review r join book b on b.id = r.book_id where b.title like 'big %'`
    expect(row).toEqual({ n: 80, bodies: 80 })
    const [one] = await direct`select r.body from review r join book b on b.id = r.book_id where b.title = 'big 7' and r.stars = 5`
    expect(one!.body).toBe('big\t"7"\\\n5')
  })

  it('sends rows of several pieces whole and in order: NULLs and escapes at every piece boundary', async () => {
    const em = opened.orm.em()
    const book = em.create('Book', { title: 'pieces', author: em.create('Author', { name: 'pieces' }) })
    const rows = PIECE_ROWS * 2 + 3
    const body = (r: number) => (r % PIECE_ROWS === 0 || r % PIECE_ROWS === PIECE_ROWS - 1 ? null : `p${r}\t\\\n\r é`)
    for (let r = 0; r < rows; r++) em.create('Review', { stars: 1 + (r % 5), body: body(r), book })
    const result = await em.flush()
    expect(result.copied).toEqual({ review: rows })
    const got = await direct`select stars, body from review where book_id = ${book.id} order by stars, body nulls first`
    const expected = Array.from({ length: rows }, (_, r) => ({ stars: 1 + (r % 5), body: body(r) }))
    expected.sort((a, b) => a.stars - b.stars || (a.body === null ? (b.body === null ? 0 : -1) : b.body === null ? 1 : a.body < b.body ? -1 : a.body > b.body ? 1 : 0))
    expect(got.map((r) => ({ stars: r.stars as number, body: r.body as string | null }))).toEqual(expected)
  })

  it('rolls the whole flush back when a row inside the COPY breaks a constraint, typed and naming the table', async () => {
    const em = graph('dup', 30)
    // 60 tags, two with the same name: the unique key fails inside the COPY of tag.
    const tags = Array.from({ length: 60 }, (_, i) => em.create('Tag', { name: i === 59 ? 'dup-tag-0' : `dup-tag-${i}` }))
    expect(tags).toHaveLength(60)
    const error = await em.flush().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(UniqueViolationError)
    expect((error as UniqueViolationError).table).toBe('tag')
    expect((error as UniqueViolationError).constraint).toBe('tag_name_key')
    const [row] = await direct`select (select count(*)::int from author where name = 'dup') as authors, (select count(*)::int from tag where name like 'dup-tag-%') as tags`
    expect(row).toEqual({ authors: 0, tags: 0 })
    // The same EntityManager, the duplicate renamed: everything goes in.
    tags[59]!.name = 'dup-tag-59'
    expect((await em.flush()).copied).toEqual({ review: 60, tag: 60 })
  })

  it('rolls back a COPY of several pieces broken in its first piece, while later pieces are still being sent, and goes on', async () => {
    const em = opened.orm.em()
    const rows = PIECE_ROWS * 2 + 3
    // Rows 1 and 2 share a name: the server fails the COPY in the first piece.
    const tags = Array.from({ length: rows }, (_, i) => em.create('Tag', { name: i === 2 ? 'early-dup-1' : `early-dup-${i}` }))
    const error = await em.flush().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(UniqueViolationError)
    expect((error as UniqueViolationError).table).toBe('tag')
    const [before] = await direct`select count(*)::int as n from tag where name like 'early-dup-%'`
    expect(before!.n).toBe(0)
    tags[2]!.name = 'early-dup-2'
    expect((await em.flush()).copied).toEqual({ tag: rows })
    const [after] = await direct`select count(*)::int as n from tag where name like 'early-dup-%'`
    expect(after!.n).toBe(rows)
  })

  it('inside em.transaction(), a COPY is part of the transaction: rolled back with it', async () => {
    const orm = opened.orm
    const failed = await orm
      .em()
      .transaction(async (em) => {
        const author = em.create('Author', { name: 'tx-copy' })
        for (let b = 0; b < 60; b++) em.create('Book', { title: `tx-copy ${b}`, author })
        expect((await em.flush()).copied).toEqual({ book: 60 })
        // A book of an author that is not there: the next flush fails, and the transaction with it.
        em.create('Book', { title: 'orphan', author: em.ref('Author', '0190a6f0-0000-7000-8000-000000000000') })
        await em.flush()
      })
      .catch((e: unknown) => e)
    expect(failed).toBeInstanceOf(ForeignKeyViolationError)
    const [row] = await direct`select count(*)::int as n from book where title like 'tx-copy %'`
    expect(row!.n).toBe(0)
  })

  it('below copyRows, without it and with copyRows: false, inserts go through unnest', async () => {
    expect((await graph('small', 10).flush()).copied).toEqual({})
    const unset = openExecutor(name, inject('databaseUrl'), schema, { max: 1, searchPath: ns.name })
    try {
      const em = unset.orm.em()
      const author = em.create('Author', { name: 'unset' })
      for (let b = 0; b < 200; b++) em.create('Book', { title: `unset ${b}`, author })
      expect((await em.flush()).copied).toEqual({})
    } finally {
      await unset.close()
    }
    const never = openExecutor(name, inject('databaseUrl'), schema, { max: 1, searchPath: ns.name, orm: { copyRows: false } })
    try {
      const em = never.orm.em()
      const author = em.create('Author', { name: 'never' })
      for (let b = 0; b < 200; b++) em.create('Book', { title: `never ${b}`, author })
      const result = await em.flush()
      expect(result).toMatchObject({ inserted: { author: 1, book: 200 }, copied: {} })
      expect(result.roundTrips).toBe(1)
    } finally {
      await never.close()
    }
  })

  it('without copyRows, the cost model picks: a large insert into a table whose columns go as text by COPY, one with timestamps and a smaller one by unnest', async () => {
    const auto = openExecutor(name, inject('databaseUrl'), stamped, { max: 1, searchPath: ns.name, orm: { onQuery: (e) => sent.push(e) } })
    try {
      const em = auto.orm.em()
      const book = em.create('Book', { title: 'auto', author: em.create('Author', { name: 'auto' }) })
      // 12,000 rows save more than the round trip postgres.js's COPY costs, even the 5 ms assumed before any is timed.
      for (let r = 0; r < 12_000; r++) em.create('Review', { stars: 1 + (r % 5), body: `auto\t${r}`, book })
      for (let s = 0; s < 12_000; s++) em.create('Stamp', { at: new Date(1_700_000_000_000 + s), note: `s${s}` })
      sent.length = 0
      const result = await em.flush()
      expect(result.inserted).toEqual({ author: 1, book: 1, review: 12_000, stamp: 12_000 })
      expect(result.copied).toEqual({ review: 12_000 })
      expect(result.roundTrips).toBe(name === 'postgres.js' ? 2 : 1)
      expect(sent.filter((e) => e.phase === 'write').map((e) => e.text.split(' (')[0])).toEqual(expect.arrayContaining(['copy "review"', 'insert into "stamp"']))
      const [row] = await direct`select count(*)::int as n, count(distinct r.body)::int as bodies, min(r.body) as first from review r join book b on b.id = r.book_id where b.title = 'auto'`
      expect(row).toEqual({ n: 12_000, bodies: 12_000, first: 'auto\t0' })

      const fewer = auto.orm.em()
      const other = fewer.create('Book', { title: 'auto fewer', author: fewer.create('Author', { name: 'auto fewer' }) })
      for (let r = 0; r < 9_999; r++) fewer.create('Review', { stars: 3, body: `fewer ${r}`, book: other })
      expect(await fewer.flush()).toMatchObject({ inserted: { review: 9_999 }, copied: {}, roundTrips: 1 })
    } finally {
      await auto.close()
    }
  })
})
