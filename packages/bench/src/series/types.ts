import type { Graph } from '../data.js'
import type { TypesRow } from '../types-scale.js'

/**
 * One way of writing the same unit of work (Flushwave, a peer ORM, hand-written SQL). For every
 * scenario, a series gets plain data or the ids of rows the harness seeded, does whatever loading
 * it needs (untimed), and returns the unit of work itself: the function that is timed. It creates
 * its entities, changes or removes them, and commits, all inside that function.
 */
export interface Series {
  bulkCreate(graph: Graph): Promise<UnitOfWork>
  bulkUpdate(seed: UpdateSeed): Promise<UnitOfWork>
  mixedFlush(seed: MixedSeed): Promise<UnitOfWork>
  deleteGraph(seed: DeleteSeed): Promise<UnitOfWork>
  cpuFlush(seed: CpuSeed): Promise<UnitOfWork>
  noopFlush(seed: CpuSeed): Promise<UnitOfWork>
  /**
   * scale (optional: only where writing N new entities in one unit of work is natural): insert one
   * scale_item row per name, ids from the table's sequence, in one transaction.
   */
  scale?(names: readonly string[]): Promise<UnitOfWork>
  /**
   * typesScale (optional, as scale): insert one types_item row per TypesRow (one column of each
   * newer column type), ids from the table's sequence, in one transaction.
   */
  typesScale?(rows: readonly TypesRow[]): Promise<UnitOfWork>
  /**
   * listEndpoint (optional: the series that read with their own API; Flushwave's write-only
   * variants leave it out): what a list endpoint reads, as one timed function. See ListSeed.
   */
  listEndpoint?(seed: ListSeed): Promise<ReadWork<ListResult>>
  close(): Promise<void>
}

export type UnitOfWork = () => Promise<void>
/** A timed read: returns what it read, summed up, so that the scenario can check it. */
export type ReadWork<T> = () => Promise<T>

export interface SeriesFactory {
  readonly name: string
  /**
   * Whether it runs behind PgBouncer in transaction mode (`--pooler`): nothing may outlive a
   * transaction on a server connection, named prepared statements included.
   */
  readonly pooler: boolean
  /** The scenarios it runs, when not every one (a hand-written baseline of one scenario). */
  readonly only?: readonly string[]
  /**
   * Connects to `url` (through the latency proxy) with a pool of `options.poolSize` connections (1
   * unless given), connects now (a `select 1`, so that no timed unit of work opens a connection),
   * and with `options.pooler` configures itself for a transaction pooler.
   */
  open(url: string, options?: OpenOptions): Promise<Series>
}

export interface OpenOptions {
  /** Connections in the series' pool; 1 by default. */
  readonly poolSize?: number
  /** Behind PgBouncer in transaction mode: no named prepared statements. */
  readonly pooler?: boolean
}

/**
 * bulkUpdate: load these rows, then in one unit of work set
 * author.first_name = firstName; book.title = title and book.pages = pages;
 * book_review.rating = rating; tag.name = `${tagPrefix}${i}` (i = index in tagIds); t01.value = value.
 */
export interface UpdateSeed {
  readonly authorIds: readonly number[]
  readonly bookIds: readonly number[]
  readonly reviewIds: readonly number[]
  readonly tagIds: readonly number[]
  readonly t01Ids: readonly number[]
  readonly firstName: string
  readonly title: string
  readonly pages: number
  readonly rating: number
  readonly tagPrefix: string
  readonly value: number
}

/**
 * mixedFlush: for each table (t01…tNN, in order), one unit of work that inserts a row
 * (name = insertName, value = 1), sets value = updateValue on the row updateIds[i], and deletes
 * the row deleteIds[i]. Load the rows to update and delete first (untimed).
 */
export interface MixedSeed {
  readonly tables: readonly string[]
  readonly updateIds: readonly number[]
  readonly deleteIds: readonly number[]
  readonly insertName: string
  readonly updateValue: number
}

/**
 * deleteGraph: load the author with its books, their reviews and their book_tag links (untimed),
 * then in one unit of work delete the links, reviews, books and the author. Tags stay.
 */
export interface DeleteSeed {
  readonly authorId: number
}

/**
 * cpuFlush: load every row of `table` with these ids (untimed), then set value = value + 1 on all
 * and commit. noopFlush: load them, then commit with nothing changed.
 */
export interface CpuSeed {
  readonly table: string
  readonly ids: readonly number[]
}

/**
 * listEndpoint: with a new EntityManager (or none), read
 * - the page: books whose author's last_name ILIKE `${lastNamePrefix}%` AND that have some review with
 *   rating >= minRating, ordered by title then id, the first `first` of them;
 * - how many books meet the same conditions;
 * - for the page's books, level one: their reviews and their author; level two: the author's books.
 * Nothing is loaded untimed: the whole read is the unit of work.
 */
export interface ListSeed {
  readonly lastNamePrefix: string
  readonly minRating: number
  readonly first: number
}

/** What a listEndpoint read returns, summed up (listResult builds it from the loaded objects). */
export interface ListResult {
  readonly count: number
  /** The page's book ids, in page order. */
  readonly ids: readonly number[]
  readonly hasNextPage: boolean
  /** Reviews loaded, summed over the page's books. */
  readonly reviews: number
  /** The page's distinct authors, loaded (their last names read). */
  readonly authors: number
  /** The books loaded into those authors' collections, each author counted once. */
  readonly authorBooks: number
  /** The last name of the first book's author (read from the loaded author, not from the page query's filter). */
  readonly firstAuthorLastName: string | undefined
}

/** One book of a page as a series loaded it. */
export interface ListItem {
  readonly id: number | string | bigint
  readonly reviews: number
  readonly author: { readonly id: number | string | bigint; readonly lastName: string; readonly books: number }
}

/** Sums up a page as every series reports it. */
export function listResult(count: number | string | bigint, hasNextPage: boolean, items: readonly ListItem[]): ListResult {
  const authors = new Map<string, number>()
  for (const item of items) authors.set(String(item.author.id), item.author.books)
  return {
    count: Number(count),
    ids: items.map((i) => Number(i.id)),
    hasNextPage,
    reviews: items.reduce((n, i) => n + i.reviews, 0),
    authors: authors.size,
    authorBooks: [...authors.values()].reduce((n, b) => n + b, 0),
    firstAuthorLastName: items[0]?.author.lastName,
  }
}
