import { FlushwaveError } from '../errors.js'
import type { EntityMeta } from '../schema/meta.js'
import type { IdBlocks } from '../drivers/executor.js'
import type { IdRequest } from '../sql/render-ids.js'

/** A fetch never asks for more spare ids than this per table. */
const MAX_BLOCK = 65_536

export interface IdPoolOptions {
  /** Spare ids fetched with the first shortfall of a table (default 256); doubles with each later one. */
  readonly blockSize?: number
}

/**
 * Sequence values fetched ahead, shared by every EntityManager of one Flushwave instance, like
 * Hibernate's pooled optimizer: a flush takes ids from the pool and only a pool that runs short costs
 * a round trip (before the transaction). Each shortfall fetches what is missing plus a block, and
 * doubles that table's block, so a steady workload soon stops fetching at all.
 */
/** One fetch of ids: how many per table, and the round trips it cost. */
export interface Fetch {
  readonly counts: ReadonlyMap<string, number>
  readonly roundTrips: number
}

export class IdPool {
  private readonly pools = new Map<EntityMeta, string[]>()
  private readonly blocks = new Map<EntityMeta, number>()
  private readonly blockSize: number

  constructor(options: IdPoolOptions = {}) {
    this.blockSize = options.blockSize ?? 256
  }

  /**
   * Takes `count` ids per entity. Resolves with the ids and the number of fetches it waited on
   * (0 in steady state). Concurrent flushes may drain what a fetch brought, hence the bounded loop.
   */
  async take(
    counts: ReadonlyMap<EntityMeta, number>,
    /** The flush's executor: inside a transaction, its connection (the pool's may all be busy). */
    fetch: (requests: readonly IdRequest[]) => Promise<IdBlocks>,
  ): Promise<{ ids: Map<EntityMeta, string[]>; fetched: Fetch[] }> {
    const fetched: Fetch[] = []
    for (let attempt = 0; attempt < 5; attempt++) {
      const requests: { meta: EntityMeta; count: number }[] = []
      if (![...counts].some(([meta, count]) => this.have(meta) < count)) return { ids: this.drain(counts), fetched }
      // One table is short: top up, in the same statement, every table of this flush that would
      // drop below half its block, so tables do not each cost a round trip at different times.
      for (const [meta, count] of counts) {
        const block = this.blocks.get(meta) ?? this.blockSize
        const have = this.have(meta)
        if (have - count >= block / 2) continue
        this.blocks.set(meta, Math.min(block * 2, MAX_BLOCK))
        requests.push({ meta, count: Math.max(0, count - have) + block })
      }
      const blocks = await fetch(requests.map((r) => ({ quotedTable: r.meta.quotedTable, column: r.meta.id.column, count: r.count })))
      requests.forEach((r, i) => this.pools.set(r.meta, this.pools.get(r.meta)?.concat(blocks.ids[i]!) ?? [...blocks.ids[i]!]))
      fetched.push({ counts: new Map(requests.map((r) => [r.meta.table, r.count])), roundTrips: blocks.roundTrips })
    }
    throw new FlushwaveError('id pool: concurrent flushes kept draining the pool; raise idBlockSize')
  }

  /** Returns ids of a flush that rolled back, so they are used next (they were never committed). */
  give(meta: EntityMeta, ids: readonly string[]): void {
    this.pools.set(meta, ids.concat(this.pools.get(meta) ?? []))
  }

  private have(meta: EntityMeta): number {
    return this.pools.get(meta)?.length ?? 0
  }

  private drain(counts: ReadonlyMap<EntityMeta, number>): Map<EntityMeta, string[]> {
    const out = new Map<EntityMeta, string[]>()
    for (const [meta, count] of counts) out.set(meta, this.pools.get(meta)!.splice(0, count))
    return out
  }
}
