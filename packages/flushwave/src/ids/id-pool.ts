import { FlushwaveError } from '../errors.js'
import type { EntityMeta } from '../schema/meta.js'
import type { IdBlocks, IdRequest } from '../sql/render-ids.js'
import { countsOf, idRequest, Refill, type Fetch } from './refill.js'
import { TableIds } from './table-ids.js'

export { Refill, type Fetch }

export interface IdPoolOptions {
  /** Spare ids fetched with a table's first shortfall (default 256); later fetches size it from demand. */
  readonly blockSize?: number
}

/** Runs the id-allocation statement (see render-ids.ts) on some connection. */
export type FetchIds = (requests: readonly IdRequest[]) => Promise<IdBlocks>

/**
 * The fetch of one executor, closing over nothing else. The pool keeps the last shared fetch for
 * its background refills, and outlives every EntityManager: an arrow written inside a flush shares
 * that flush's scope, and kept its whole unit of work alive until the next fetch.
 */
export function fetchOn(executor: { nextIds: FetchIds }): FetchIds {
  return (requests) => executor.nextIds(requests)
}

export interface Taken {
  readonly ids: Map<EntityMeta, string[]>
  /** The fetches this take waited on (none in steady state). */
  readonly fetched: Fetch[]
}

interface Waiter {
  readonly counts: ReadonlyMap<EntityMeta, number>
  readonly fetched: Fetch[]
  resolve(taken: Taken): void
  reject(error: unknown): void
}

/**
 * Sequence values fetched ahead, shared by every EntityManager of one Flushwave instance, like
 * Hibernate's pooled optimizer: a flush takes ids from the pool and only a pool that runs short costs
 * a round trip (before the transaction).
 *
 * Under concurrency, flushes that find the pool short queue up behind ONE fetch sized for all of
 * them plus a spare block, and are served in arrival order when it lands: fifty concurrent
 * shortfalls cost one fetch, not fifty. The spare block follows demand: twice the ids taken since
 * the table's last fetch, or twice what two fetches' latency would use at the rate they go (at
 * least `blockSize`; at most 2,048 for a plain sequence, see MAX_PLAIN_SPARE), so a steady workload
 * fetches seldom.
 *
 * And a table whose spare ids fall below a low-water mark is refilled in the background after the
 * flush that took them, on one of the pool's connections, while flushes go on taking what is left.
 * The mark knows how long a fetch takes: it is at least twice what the table uses while one is in
 * flight, so in steady state no flush waits on a fetch, however slow fetches are (a take that runs
 * short during a refill waits for it and reports it). With a pooled sequence (an increment of,
 * say, 1000) a fetch of any size costs the server one nextval per block.
 */
export class IdPool {
  private readonly tables = new Map<EntityMeta, TableIds>()
  private queue: Waiter[] = []
  private fetching = false
  /** The pool's fetch, from the last shared take: background refills use it. */
  private refillWith: FetchIds | undefined
  private readonly blockSize: number
  /**
   * How long a fetch takes, in ms: a running mean in which each new fetch weighs half and older ones
   * fade by half per fetch. A refill must start while the spare ids last that long at the rate they go.
   */
  private fetchMs = 0

  constructor(options: IdPoolOptions = {}) {
    this.blockSize = options.blockSize ?? 256
  }

  /**
   * Takes `counts` ids per entity. `fetch` runs on the pool's connections and is shared with other
   * waiting flushes. A flush inside a transaction passes `{ private: true }`: its fetch runs on its
   * own connection, which no other flush may wait on (the pool's may all be busy).
   */
  take(counts: ReadonlyMap<EntityMeta, number>, fetch: FetchIds, options: { readonly private?: boolean } = {}): Promise<Taken> {
    if (!options.private) this.refillWith = fetch
    if (this.queue.length === 0 && this.covers(counts)) return Promise.resolve({ ids: this.drain(counts), fetched: [] })
    if (options.private) return this.takePrivately(counts, fetch)
    return new Promise<Taken>((resolve, reject) => {
      this.queue.push({ counts, fetched: [], resolve, reject })
      void this.pump(fetch)
    })
  }

  /**
   * One id for a new entity of `meta` when the pool holds one and no flush is waiting for ids (it
   * would be served first), else undefined: `em.create` never waits. It starts no refill: a loop
   * of creates would start one midway, and the flush would then wait for it and fetch again; the
   * flush that inserts these entities tops the pool up once it is over.
   */
  takeNow(meta: EntityMeta): string | undefined {
    const table = this.tables.get(meta)
    if (table === undefined || table.ranges.size === 0 || this.queue.length > 0) return undefined
    const id = table.ranges.takeOne()
    table.took(1)
    return id
  }

  /** Returns ids of a flush that rolled back, so they are used next (they were never committed). */
  give(meta: EntityMeta, ids: readonly string[]): void {
    this.table(meta).ranges.giveBack(ids)
    this.serve()
  }

  /** Spare ids held for a table. */
  spareOf(meta: EntityMeta): number {
    return this.tables.get(meta)?.ranges.size ?? 0
  }

  /** One fetch at a time for all waiting flushes; loops while flushes that arrived meanwhile wait. */
  private async pump(fetch: FetchIds): Promise<void> {
    if (this.fetching) return
    this.fetching = true
    try {
      for (;;) {
        // One turn of the microtask queue first, so that flushes reaching the pool together share the fetch.
        await Promise.resolve()
        this.serve()
        if (this.queue.length === 0) return
        const waiting = [...this.queue]
        const requests = this.requestsFor(waiting)
        try {
          const done = await this.fetchInto(requests, fetch)
          for (const waiter of waiting) waiter.fetched.push(done)
        } catch (error) {
          // The flushes this fetch was for fail with it (the same connection problem would meet
          // each of them); flushes that queued meanwhile get a fetch of their own.
          const failed = new Set(waiting)
          this.queue = this.queue.filter((waiter) => !failed.has(waiter))
          for (const waiter of waiting) waiter.reject(error)
        }
      }
    } finally {
      this.fetching = false
    }
  }

  /** A transaction's shortfall: fetched on its own connection; the spare block joins the pool. */
  private async takePrivately(counts: ReadonlyMap<EntityMeta, number>, fetch: FetchIds): Promise<Taken> {
    const requests = [...counts].map(([meta, count]) => ({ meta, spare: this.spareFor(meta), count: count + this.spareFor(meta) }))
    const blocks = await this.fetchBlocks(requests, fetch)
    for (const r of requests) this.table(r.meta).asked(r.spare, performance.now())
    // Taken at once, before any other flush runs: these ids were fetched for this one.
    const ids = this.drain(counts)
    this.serve()
    return { ids, fetched: [{ counts: countsOf(requests), roundTrips: blocks.roundTrips }] }
  }

  /**
   * What one fetch asks for: for every table the waiting flushes need, what is missing plus a spare
   * block; a table that would keep half its spare block anyway is left out. So a flush short of one
   * table tops up its other tables in the same statement, not in a later round trip.
   */
  private requestsFor(waiting: readonly Waiter[]): { meta: EntityMeta; count: number }[] {
    const demand = new Map<EntityMeta, number>()
    for (const waiter of waiting) for (const [meta, count] of waiter.counts) demand.set(meta, (demand.get(meta) ?? 0) + count)
    const requests: { meta: EntityMeta; count: number }[] = []
    const now = performance.now()
    for (const [meta, need] of demand) {
      const table = this.table(meta)
      const have = table.ranges.size
      const spare = this.spareFor(meta)
      if (have - need >= Math.max(spare / 2, table.inFlightNeed(this.fetchMs, now))) continue
      requests.push({ meta, count: Math.max(0, need - have) + spare })
      table.asked(spare, performance.now())
    }
    return requests
  }

  private async fetchInto(requests: readonly { meta: EntityMeta; count: number }[], fetch: FetchIds): Promise<Fetch> {
    const blocks = await this.fetchBlocks(requests, fetch)
    return { counts: countsOf(requests), roundTrips: blocks.roundTrips }
  }

  /** Runs a fetch and adds its blocks (see addBlocks). */
  private async fetchBlocks(requests: readonly { meta: EntityMeta; count: number }[], fetch: FetchIds): Promise<IdBlocks> {
    const started = performance.now()
    const blocks = await fetch(requests.map(idRequest))
    this.addBlocks(requests, blocks, started)
    return blocks
  }

  /**
   * Checks a fetch brought what was asked (a short answer would leave flushes waiting forever),
   * adds the blocks, and notes how long the fetch took, from `started` until now.
   */
  private addBlocks(requests: readonly { meta: EntityMeta; count: number }[], blocks: IdBlocks, started: number): void {
    requests.forEach((r, i) => {
      // A pooled sequence may bring more (whole blocks).
      const got = blocks.ids[i]?.count ?? 0
      if (got < r.count) throw new FlushwaveError(`id allocation for ${r.meta.quotedTable} returned ${got} ids, not ${r.count}`)
    })
    const landed = performance.now()
    this.fetchMs = this.fetchMs === 0 ? landed - started : (this.fetchMs + landed - started) / 2
    requests.forEach((r, i) => {
      const table = this.table(r.meta)
      table.ranges.add(blocks.ids[i]!)
      table.pooled = blocks.ids[i]!.step > 1
    })
  }

  /**
   * A refill for a flush to carry, held as under way; or undefined: none is due, a fetch is under
   * way already, or a table due has a plain sequence. When every table due has a pooled sequence
   * (a block costs the server one nextval), the flush that asked, once it has taken its ids, sends
   * it at the end of its own pipeline, after COMMIT (see flush.ts); its answer goes to `landed`,
   * also when the flush failed (the COMMIT then answers ROLLBACK, and the ids still come).
   * A plain sequence's refill costs the server one nextval per id, which a flush that carried it
   * would wait for (docs/design-notes.md, "Plain-sequence spare blocks"): the flush starts it in
   * the background once it is over (`refillIfLow`). Flushes that run short meanwhile queue behind
   * either, as behind any fetch, and report it as a fetch they waited on.
   *
   * `inserted` is how many new rows per table the flush writes (see refillIfLow).
   */
  dueRefill(inserted?: ReadonlyMap<EntityMeta, number>): Refill | undefined {
    const due = this.due(inserted)
    if (due.length === 0 || due.some((meta) => !this.table(meta).pooled)) return undefined
    return this.ask(due)
  }

  /**
   * The answer to a refill from `dueRefill`: its blocks join the pool, and flushes waiting on it
   * are served. Called again once the refill landed, it does nothing. Without blocks (the executor
   * carries no ids, or the connection failed before their answer came), the same refill runs in
   * the background on one of the pool's connections.
   */
  landed(refill: Refill, blocks: IdBlocks | undefined): void {
    if (refill.settled) return
    if (blocks === undefined) {
      this.refillInBackground(refill)
      return
    }
    refill.settled = true
    try {
      this.addBlocks(refill.asked, blocks, refill.started)
      for (const waiter of this.queue) waiter.fetched.push({ counts: countsOf(refill.asked), roundTrips: 1, refill: true })
    } catch {
      // A short answer: the next shortfall fetches (and reports) as usual.
    }
    this.fetching = false
    this.serve()
    if (this.queue.length > 0 && this.refillWith) void this.pump(this.refillWith)
  }

  /**
   * Tops the pool up once a flush is over, committed or not: the refill it carried, when its answer
   * did not come (the connection failed, or the executor carries no ids), runs in the background;
   * without one, tables the flush left low refill in the background (see refillIfLow).
   */
  afterFlush(refill: Refill | undefined, inserted: ReadonlyMap<EntityMeta, number> | undefined): void {
    if (refill) this.landed(refill, undefined)
    else if (inserted) this.refillIfLow(inserted)
  }

  /**
   * Starts a refill of every table below its low-water mark (see due) in the background, on one
   * of the pool's connections. A flush that carried none calls it once it is over, so that the
   * refill overlaps the time between flushes rather than the flush (with a pool of one connection
   * it would wait behind it).
   *
   * `inserted` is how many new rows per table the flush wrote, whether their ids came at create
   * (one `takeNow` each) or with the flush: that many is one take. Without it a unit of work whose
   * creates took most ids one by one looked like a run of takes of one, and large flushes often
   * found too few ids and waited on a fetch (docs/design-notes.md, "A flush's new rows count as one
   * take").
   */
  refillIfLow(inserted?: ReadonlyMap<EntityMeta, number>): void {
    const due = this.due(inserted)
    // Without a shared fetch (every take so far was a transaction's), asking would restart the
    // tables' demand counts with nothing fetched.
    if (due.length > 0 && this.refillWith !== undefined) this.refillInBackground(this.ask(due))
  }

  /**
   * The tables below their low-water mark (TableIds.low), none while a fetch is under way.
   * `inserted` counts as a take of its tables.
   */
  private due(inserted: ReadonlyMap<EntityMeta, number> | undefined): EntityMeta[] {
    for (const [meta, count] of inserted ?? []) {
      const table = this.tables.get(meta)
      if (table !== undefined && count > table.largestTake) table.largestTake = count
    }
    if (this.fetching) return []
    const due: EntityMeta[] = []
    const now = performance.now()
    for (const [meta, table] of this.tables) if (table.low(this.fetchMs, now)) due.push(meta)
    return due
  }

  /** A refill of a spare block for each table, asked for now: under way until it lands. */
  private ask(tables: readonly EntityMeta[]): Refill {
    const requests = tables.map((meta) => {
      const spare = this.spareFor(meta)
      this.table(meta).asked(spare, performance.now())
      return { meta, count: spare }
    })
    this.fetching = true
    return new Refill(this, requests, performance.now())
  }

  /** A failed refill costs nothing but the refill: the next shortfall fetches (and reports) as usual. */
  private refillInBackground(refill: Refill): void {
    refill.settled = true
    const fetch = this.refillWith
    if (fetch === undefined) {
      this.fetching = false
      return
    }
    this.fetchInto(refill.asked, fetch)
      // Flushes that ran short meanwhile waited on this refill: they report it.
      .then((done) => {
        for (const waiter of this.queue) waiter.fetched.push({ ...done, refill: true })
      })
      .catch(() => undefined)
      .finally(() => {
        this.fetching = false
        if (this.queue.length > 0) void this.pump(fetch)
      })
  }

  /**
   * Hands ids to waiting flushes in arrival order, as long as the first one can be served. The rate
   * ids go at counts afresh after them (see TableIds.flowTaken).
   */
  private serve(): void {
    const served = new Set<EntityMeta>()
    while (this.queue.length > 0 && this.covers(this.queue[0]!.counts)) {
      const waiter = this.queue.shift()!
      waiter.resolve({ ids: this.drain(waiter.counts), fetched: waiter.fetched })
      for (const meta of waiter.counts.keys()) served.add(meta)
    }
    const now = performance.now()
    for (const meta of served) this.table(meta).restartFlow(now)
  }

  /** The spare block a fetch for `meta` asks for (see TableIds.spare); blockSize for a table never fetched. */
  private spareFor(meta: EntityMeta): number {
    const table = this.tables.get(meta)
    return table === undefined ? this.blockSize : table.spare(this.blockSize, this.fetchMs, performance.now())
  }

  private covers(counts: ReadonlyMap<EntityMeta, number>): boolean {
    for (const [meta, count] of counts) if (this.spareOf(meta) < count) return false
    return true
  }

  private drain(counts: ReadonlyMap<EntityMeta, number>): Map<EntityMeta, string[]> {
    const out = new Map<EntityMeta, string[]>()
    for (const [meta, count] of counts) {
      const table = this.table(meta)
      out.set(meta, table.ranges.take(count))
      table.took(count)
    }
    return out
  }

  private table(meta: EntityMeta): TableIds {
    let table = this.tables.get(meta)
    if (table === undefined) this.tables.set(meta, (table = new TableIds()))
    return table
  }
}
