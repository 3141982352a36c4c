import type { EntityMeta } from '../schema/meta.js'
import type { IdBlocks, IdRequest } from '../sql/render-ids.js'

/** One fetch of ids: how many per table, and the round trips it cost. */
export interface Fetch {
  readonly counts: ReadonlyMap<string, number>
  readonly roundTrips: number
  /** A background refill that a take ran short during, and waited for (see refillIfLow). */
  readonly refill?: true
}

/**
 * A refill under way, for a flush to carry (see IdPool.dueRefill): the executor sends `requests`
 * after the flush's COMMIT and hands the answer to `landed` (the executor's CarriedIds).
 */
export class Refill {
  /** Set once its blocks joined the pool, or it went to the background. */
  settled = false

  constructor(
    private readonly pool: { landed(refill: Refill, blocks: IdBlocks | undefined): void },
    readonly asked: readonly { readonly meta: EntityMeta; readonly count: number }[],
    /** When it was asked for (performance.now()): how long fetches take counts from here. */
    readonly started: number,
  ) {}

  /** For the executor's id statement. */
  get requests(): IdRequest[] {
    return this.asked.map(idRequest)
  }

  /** The id statement's answer: the blocks join the pool (see IdPool.landed). */
  landed(blocks: IdBlocks): void {
    this.pool.landed(this, blocks)
  }
}

/** What the executor's id statement needs of a request (see render-ids.ts). */
export function idRequest(r: { meta: EntityMeta; count: number }): IdRequest {
  return { quotedTable: r.meta.quotedTable, column: r.meta.id.column, count: r.count }
}

export function countsOf(requests: readonly { meta: EntityMeta; count: number }[]): Map<string, number> {
  return new Map(requests.map((r) => [r.meta.table, r.count]))
}
