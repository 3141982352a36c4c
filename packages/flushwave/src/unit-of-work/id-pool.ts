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

  constructor(
    private readonly fetch: (requests: readonly IdRequest[]) => Promise<IdBlocks>,
    options: IdPoolOptions = {},
  ) {
    this.blockSize = options.blockSize ?? 256
  }

  /**
   * Takes `count` ids per entity. Resolves with the ids and the number of fetches it waited on
   * (0 in steady state). Concurrent flushes may drain what a fetch brought, hence the bounded loop.
   */
  async take(counts: ReadonlyMap<EntityMeta, number>): Promise<{ ids: Map<EntityMeta, string[]>; fetched: Fetch[] }> {
    const fetched: Fetch[] = []
    for (let attempt = 0; attempt < 5; attempt++) {
      const requests: { meta: EntityMeta; count: number }[] = []
      for (const [meta, count] of counts) {
        const have = this.pools.get(meta)?.length ?? 0
        if (have >= count) continue
        const block = this.blocks.get(meta) ?? this.blockSize
        this.blocks.set(meta, Math.min(block * 2, MAX_BLOCK))
        requests.push({ meta, count: count - have + block })
      }
      if (requests.length === 0) return { ids: this.drain(counts), fetched }
      const blocks = await this.fetch(requests.map((r) => ({ quotedTable: r.meta.quotedTable, column: r.meta.id.column, count: r.count })))
      requests.forEach((r, i) => this.give(r.meta, blocks.ids[i]!))
      fetched.push({ counts: new Map(requests.map((r) => [r.meta.table, r.count])), roundTrips: blocks.roundTrips })
    }
    throw new FlushwaveError('id pool: concurrent flushes kept draining the pool; raise idBlockSize')
  }

  /** Returns ids of a flush that rolled back, so they are used next (they were never committed). */
  give(meta: EntityMeta, ids: readonly string[]): void {
    const pool = this.pools.get(meta)
    if (pool) pool.unshift(...ids)
    else this.pools.set(meta, [...ids])
  }

  private drain(counts: ReadonlyMap<EntityMeta, number>): Map<EntityMeta, string[]> {
    const out = new Map<EntityMeta, string[]>()
    for (const [meta, count] of counts) out.set(meta, this.pools.get(meta)!.splice(0, count))
    return out
  }
}
