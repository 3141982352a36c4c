import type { Graph } from '../data.js'

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
  close(): Promise<void>
}

export type UnitOfWork = () => Promise<void>

export interface SeriesFactory {
  readonly name: string
  /**
   * Whether it runs behind PgBouncer in transaction mode (`--pooler`): nothing may outlive a
   * transaction on a server connection, named prepared statements included.
   */
  readonly pooler: boolean
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
