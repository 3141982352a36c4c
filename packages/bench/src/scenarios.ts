import type postgres from 'postgres'
import { graph, graphRows } from './data.js'
import { emptyTables } from './empty-tables.js'
import { allTables, mixedTable } from './schema.js'
import type { ListResult, ListSeed, Series, UnitOfWork } from './series/types.js'
import { prepareTypesScale } from './types-scale.js'

/**
 * A scenario seeds what it needs through the admin connection (straight to PostgreSQL, untimed),
 * lets the series load and build its unit of work (untimed), and after a run can verify what the
 * unit of work wrote, so a series that silently does less fails loudly.
 */
export interface Scenario {
  readonly name: ScenarioName
  readonly size: number
  /** Untimed: seed rows, then let the series prepare. */
  prepare(admin: postgres.Sql, series: Series, marker: string): Promise<Prepared>
}

export interface Prepared {
  readonly run: UnitOfWork
  /** Throws unless the database holds what `run` had to write. */
  verify(admin: postgres.Sql): Promise<void>
}

/** coldFlush is bulkCreate on a series opened just before (the runner opens one per sample). */
export type ScenarioName = 'bulkCreate' | 'coldFlush' | 'scale' | 'typesScale' | 'bulkUpdate' | 'mixedFlush' | 'deleteGraph' | 'cpuFlush' | 'noopFlush' | 'listEndpoint'

export function scenario(name: ScenarioName, size: number): Scenario {
  // listEndpoint only reads: its rows are seeded once per scenario object, i.e. once per cell.
  let listed: Promise<ListExpected> | undefined
  const prepare = {
    listEndpoint: async (admin: postgres.Sql, series: Series, marker: string) => prepareListEndpoint(series, (listed ??= seedList(admin, marker))),
    bulkCreate: prepareBulkCreate,
    coldFlush: prepareBulkCreate,
    scale: prepareScale,
    typesScale: prepareTypesScale,
    bulkUpdate: prepareBulkUpdate,
    mixedFlush: prepareMixedFlush,
    deleteGraph: prepareDeleteGraph,
    cpuFlush: (admin: postgres.Sql, series: Series, marker: string) => prepareCpu(admin, series, marker, size, true),
    noopFlush: (admin: postgres.Sql, series: Series, marker: string) => prepareCpu(admin, series, marker, size, false),
  }[name]
  return { name, size, prepare: (admin, series, marker) => prepare(admin, series, marker, size) }
}

/** Empties every table (see emptyTables; ids keep counting: pooled sequence values stay valid). */
export async function emptyAll(admin: postgres.Sql): Promise<void> {
  await emptyTables(admin, allTables())
}

async function prepareBulkCreate(admin: postgres.Sql, series: Series, marker: string, size: number): Promise<Prepared> {
  await emptyAll(admin)
  const g = graph(size, marker)
  return {
    run: await series.bulkCreate(g),
    verify: async (admin) => expectCounts(admin, graphRows(g)),
  }
}

async function prepareScale(admin: postgres.Sql, series: Series, marker: string, size: number): Promise<Prepared> {
  if (!series.scale) throw new Error('this series has no scale unit of work')
  await emptyTables(admin, ['scale_item'])
  const names = Array.from({ length: size }, (_, i) => `${marker}-${i}`)
  return {
    run: await series.scale(names),
    verify: async (admin) => expectQuery(admin, `select count(*)::int as n from scale_item where name like $1`, [`${marker}-%`], size),
  }
}

async function prepareBulkUpdate(admin: postgres.Sql, series: Series, marker: string): Promise<Prepared> {
  await emptyAll(admin)
  const ids = await seedGraph(admin, 10, marker)
  const t01Ids = await insertIds(admin, mixedTable(1), 10, marker)
  const seed = {
    authorIds: ids.authorIds,
    bookIds: ids.bookIds.slice(0, 10),
    reviewIds: ids.reviewIds.slice(0, 10),
    tagIds: ids.tagIds.slice(0, 10),
    t01Ids,
    firstName: `F-${marker}`,
    title: `T-${marker}`,
    pages: 999,
    rating: 5,
    tagPrefix: `N-${marker}-`,
    value: 7,
  }
  const run = await series.bulkUpdate(seed)
  return {
    run,
    verify: async (admin) => {
      await expectQuery(admin, `select count(*)::int as n from author where first_name = $1`, [seed.firstName], 10)
      await expectQuery(admin, `select count(*)::int as n from book where title = $1 and pages = 999`, [seed.title], 10)
      await expectQuery(admin, `select count(*)::int as n from book_review where rating = 5`, [], 10)
      await expectQuery(admin, `select count(*)::int as n from tag where name like $1`, [`${seed.tagPrefix}%`], 10)
      await expectQuery(admin, `select count(*)::int as n from t01 where value = 7`, [], 10)
    },
  }
}

async function prepareMixedFlush(admin: postgres.Sql, series: Series, marker: string, size: number): Promise<Prepared> {
  const tables = Array.from({ length: size }, (_, i) => mixedTable(i + 1))
  await emptyTables(admin, tables)
  const updateIds: number[] = []
  const deleteIds: number[] = []
  for (const table of tables) {
    const [a, b] = await insertIds(admin, table, 2, marker)
    updateIds.push(a!)
    deleteIds.push(b!)
  }
  const seed = { tables, updateIds, deleteIds, insertName: `M-${marker}`, updateValue: 42 }
  return {
    run: await series.mixedFlush(seed),
    verify: async (admin) => {
      for (const [i, table] of tables.entries()) {
        await expectQuery(admin, `select count(*)::int as n from ${table} where name = $1 and value = 1`, [seed.insertName], 1)
        await expectQuery(admin, `select count(*)::int as n from ${table} where id = $1 and value = 42`, [updateIds[i]], 1)
        await expectQuery(admin, `select count(*)::int as n from ${table} where id = $1`, [deleteIds[i]], 0)
      }
    },
  }
}

async function prepareDeleteGraph(admin: postgres.Sql, series: Series, marker: string): Promise<Prepared> {
  await emptyAll(admin)
  const ids = await seedGraph(admin, 1, marker)
  const authorId = ids.authorIds[0]!
  return {
    run: await series.deleteGraph({ authorId }),
    verify: async (admin) => {
      await expectCounts(admin, { author: 0, book: 0, book_review: 0, book_tag: 0, tag: ids.tagIds.length })
    },
  }
}

async function prepareCpu(admin: postgres.Sql, series: Series, marker: string, size: number, dirty: boolean): Promise<Prepared> {
  const table = mixedTable(2)
  await emptyTables(admin, [table])
  const ids = await insertIds(admin, table, size, marker)
  const seed = { table, ids }
  return {
    run: await (dirty ? series.cpuFlush(seed) : series.noopFlush(seed)),
    verify: async (admin) => expectQuery(admin, `select count(*)::int as n from ${table} where value = $1`, [dirty ? 1 : 0], size),
  }
}

/** listEndpoint's page: authors named ad…/AD…, reviews of 4 stars or more, 20 books. */
export const LIST_SEED: ListSeed = { lastNamePrefix: 'ad', minRating: 4, first: 20 }
/** The rows listEndpoint reads from: 40 authors, 10 books each, 10 reviews per book. */
export const LIST_AUTHORS = 40
const LIST_BOOKS_PER_AUTHOR = 10
const LIST_REVIEWS_PER_BOOK = 10

type ListExpected = ListResult

/**
 * Seeds listEndpoint's rows (untimed) and works out, from the seed itself rather than through SQL,
 * what the read must return. Half the authors match the prefix (Adams…, ADLER…: ILIKE must ignore
 * case), and a third of the books have only reviews of 1 to 3 stars; titles are a permutation of
 * the books' order, so that title order is not id order.
 */
async function seedList(admin: postgres.Sql, marker: string): Promise<ListExpected> {
  await emptyAll(admin)
  const names = ['Adams', 'ADLER', 'Baker', 'Carter']
  const authors = Array.from({ length: LIST_AUTHORS }, (_, a) => ({ firstName: `first${a}`, lastName: `${names[a % names.length]}${a}`, email: `list${a}-${marker}@example.com` }))
  const nBooks = LIST_AUTHORS * LIST_BOOKS_PER_AUTHOR
  const books = Array.from({ length: nBooks }, (_, k) => ({
    title: `Title ${String((k * 7919) % nBooks).padStart(4, '0')}`,
    author: Math.floor(k / LIST_BOOKS_PER_AUTHOR),
    pages: 100 + (k % 300),
    // A third of the books have only low ratings: the `some review >= 4` condition drops them.
    ratings: Array.from({ length: LIST_REVIEWS_PER_BOOK }, (_, r) => (k % 3 === 0 ? 1 + (r % 3) : 1 + (r % 5))),
  }))
  const authorIds = (
    await admin.unsafe('insert into author (first_name, last_name, email) select * from unnest($1::text[], $2::text[], $3::text[]) returning id', [
      authors.map((a) => a.firstName),
      authors.map((a) => a.lastName),
      authors.map((a) => a.email),
    ] as never[])
  ).map((r) => Number(r.id))
  const bookIds = (
    await admin.unsafe('insert into book (title, pages, author_id) select * from unnest($1::text[], $2::int4[], $3::int8[]) returning id', [
      books.map((b) => b.title),
      books.map((b) => b.pages),
      books.map((b) => authorIds[b.author]!),
    ] as never[])
  ).map((r) => Number(r.id))
  const reviews = books.flatMap((b, k) => b.ratings.map((rating, r) => ({ rating, text: `review ${k}.${r}`, book: bookIds[k]! })))
  await admin.unsafe('insert into book_review (rating, text, book_id) select * from unnest($1::int4[], $2::text[], $3::int8[])', [
    reviews.map((r) => r.rating),
    reviews.map((r) => r.text),
    reviews.map((r) => r.book),
  ] as never[])
  await admin.unsafe('analyze author, book, book_review')
  const seed = LIST_SEED
  const matching = books
    .map((b, k) => ({ ...b, id: bookIds[k]! }))
    .filter((b) => authors[b.author]!.lastName.toLowerCase().startsWith(seed.lastNamePrefix.toLowerCase()) && b.ratings.some((r) => r >= seed.minRating))
    .sort((x, y) => (x.title < y.title ? -1 : x.title > y.title ? 1 : x.id - y.id))
  const page = matching.slice(0, seed.first)
  const pageAuthors = new Set(page.map((b) => b.author))
  return {
    count: matching.length,
    ids: page.map((b) => b.id),
    hasNextPage: matching.length > seed.first,
    reviews: page.length * LIST_REVIEWS_PER_BOOK,
    authors: pageAuthors.size,
    authorBooks: pageAuthors.size * LIST_BOOKS_PER_AUTHOR,
    firstAuthorLastName: page[0] && authors[page[0].author]!.lastName,
  }
}

async function prepareListEndpoint(series: Series, seeded: Promise<ListExpected>): Promise<Prepared> {
  if (!series.listEndpoint) throw new Error('this series has no listEndpoint read')
  const expected = await seeded
  const read = await series.listEndpoint(LIST_SEED)
  let got: ListResult | undefined
  return {
    run: async () => {
      got = await read()
    },
    verify: async () => {
      if (!got) throw new Error('verification failed: listEndpoint returned nothing')
      // Every field must match: a series that skips the count, a level of populate or the filter fails here.
      const show = (r: ListResult) => JSON.stringify(r)
      if (show(got) !== show(expected)) throw new Error(`verification failed: listEndpoint read ${show(got)}, expected ${show(expected)}`)
    },
  }
}

/** Inserts n rows (value 0) and returns their ids in order. */
export async function insertIds(admin: postgres.Sql, table: string, n: number, marker: string): Promise<number[]> {
  const rows = await admin.unsafe(
    `insert into ${table} (name, value) select $1 || '-' || i, 0 from generate_series(1, $2::int) i returning id`,
    [marker, n],
  )
  return rows.map((r) => Number(r.id))
}

/** Seeds n author graphs with plain SQL; ids in insertion order. */
export async function seedGraph(admin: postgres.Sql, n: number, marker: string) {
  const g = graph(n, `seed-${marker}`)
  const authorIds = (
    await admin.unsafe('insert into author (first_name, last_name, email) select * from unnest($1::text[], $2::text[], $3::text[]) returning id', [
      g.authors.map((a) => a.firstName),
      g.authors.map((a) => a.lastName),
      g.authors.map((a) => a.email),
    ] as never[])
  ).map((r) => Number(r.id))
  const bookIds = (
    await admin.unsafe('insert into book (title, pages, author_id) select * from unnest($1::text[], $2::int4[], $3::int8[]) returning id', [
      g.books.map((b) => b.title),
      g.books.map((b) => b.pages),
      g.books.map((b) => authorIds[b.author]!),
    ] as never[])
  ).map((r) => Number(r.id))
  const reviewIds = (
    await admin.unsafe('insert into book_review (rating, text, book_id) select * from unnest($1::int4[], $2::text[], $3::int8[]) returning id', [
      g.reviews.map(() => 1),
      g.reviews.map((r) => r.text),
      g.reviews.map((r) => bookIds[r.book]!),
    ] as never[])
  ).map((r) => Number(r.id))
  const tagIds = (await admin.unsafe('insert into tag (name) select * from unnest($1::text[]) returning id', [g.tags.map((t) => t.name)] as never[])).map((r) =>
    Number(r.id),
  )
  await admin.unsafe('insert into book_tag (book_id, tag_id) select * from unnest($1::int8[], $2::int8[])', [
    g.bookTags.map((l) => bookIds[l.book]!),
    g.bookTags.map((l) => tagIds[l.tag]!),
  ] as never[])
  return { authorIds, bookIds, reviewIds, tagIds }
}

async function expectCounts(admin: postgres.Sql, expected: Record<string, number>): Promise<void> {
  for (const [table, n] of Object.entries(expected)) await expectQuery(admin, `select count(*)::int as n from ${table}`, [], n)
}

async function expectQuery(admin: postgres.Sql, text: string, params: unknown[], expected: number): Promise<void> {
  const [row] = await admin.unsafe(text, params as never[])
  const n = Number(row?.n)
  if (n !== expected) throw new Error(`verification failed: ${text} [${params.join(', ')}] = ${n}, expected ${expected}`)
}
