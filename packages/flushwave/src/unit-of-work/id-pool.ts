import type { EntityMeta } from '../schema/meta.js'
import type { IdBlocks } from '../drivers/executor.js'
import type { IdRequest } from '../sql/render-ids.js'

export interface IdPoolOptions {
  /** Ids fetched beyond the need of the flush that runs short (default 256). */
  readonly blockSize?: number
}

/**
 * Sequence values fetched ahead, shared by every EntityManager of one Flushwave instance, like
 * Hibernate's pooled optimizer: a flush takes ids from the pool and only a pool that runs short costs
 * a round trip (before the transaction). A fetch asks for the shortfall plus a block that grows with
 * the largest demand seen, so a steady workload stops fetching.
 */
/** One fetch of ids: how many per table, and the round trips it cost. */
export interface Fetch {
  readonly counts: ReadonlyMap<string, number>
  readonly roundTrips: number
}

export class IdPool {
  private readonly pools = new Map<EntityMeta, string[]>()
  private readonly largestDemand = new Map<EntityMeta, number>()
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
        const demand = Math.max(count, this.largestDemand.get(meta) ?? 0)
        this.largestDemand.set(meta, demand)
        requests.push({ meta, count: count - have + Math.max(this.blockSize, 2 * demand) })
      }
      if (requests.length === 0) return { ids: this.drain(counts), fetched }
      const blocks = await this.fetch(requests.map((r) => ({ quotedTable: r.meta.quotedTable, column: r.meta.id.column, count: r.count })))
      requests.forEach((r, i) => this.give(r.meta, blocks.ids[i]!))
      fetched.push({ counts: new Map(requests.map((r) => [r.meta.table, r.count])), roundTrips: blocks.roundTrips })
    }
    throw new Error('id pool: concurrent flushes kept draining the pool; raise blockSize')
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
