import type { Executor, WarmUp } from '../drivers/executor.js'
import type { Schema } from '../schema/define.js'
import type { IdRequest } from '../sql/render-ids.js'
import { allShapes } from '../sql/shapes.js'
import type { IdPool } from '../ids/id-pool.js'
import { tableCounts } from './table-counts.js'

/** What `orm.warmUp()` did. */
export interface WarmUpResult {
  /** Connections of the pool that were opened and warmed. */
  readonly connections: number
  /** Statements that were new to a connection, summed over connections. */
  readonly prepared: number
  /**
   * False when the driver keeps no prepared statements (postgres.js with `prepare: false`, for
   * transaction-mode poolers; knex): nothing was prepared ahead, `prepared` is 0 for that reason.
   */
  readonly prepares: boolean
  /** Round trips waited on (connections are warmed in parallel), as the executor counted them. */
  readonly roundTrips: number
  /**
   * Sequence ids fetched into the pool, per table (a record without a prototype, as
   * FlushResult.inserted): the first flushes that insert take these.
   */
  readonly idsFetched: Readonly<Record<string, number>>
  readonly durationMs: number
}

/**
 * Warms every connection and fills the id pool in the same wave: the pool asks for one id per
 * sequence-id table (and fetches a spare block with it), the executor answers that request on its
 * warm-up pipeline, and the single id is given back. So the pool is filled through its public
 * `take`/`give` alone, and a warm-up costs about one round trip however many tables there are.
 */
export async function warmUp(schema: Schema, executor: Executor, ids: IdPool): Promise<WarmUpResult> {
  const started = performance.now()
  const shapes = allShapes(schema)
  const sequenced = schema.insertOrder.filter((meta) => meta.id.strategy === 'sequence')
  let warm: WarmUp | undefined
  let idTrips = 0
  const fetch = async (requests: readonly IdRequest[]) => {
    warm = await executor.warmUp(shapes, requests)
    if (warm.ids) return warm.ids
    const blocks = await executor.nextIds(requests) // an executor that cannot fetch them on the way
    idTrips += blocks.roundTrips
    return blocks
  }
  const idsFetched = tableCounts()
  if (sequenced.length > 0) {
    // Private: this fetch warms connections on the way, so the pool must never reuse it for its refills.
    const taken = await ids.take(new Map(sequenced.map((meta) => [meta, 1])), fetch, { private: true })
    for (const [meta, list] of taken.ids) ids.give(meta, list)
    for (const f of taken.fetched) for (const [table, count] of f.counts) idsFetched[table] = (idsFetched[table] ?? 0) + count
  }
  // The pool had ids enough for every table (a second warm-up): warm the connections alone.
  warm ??= await executor.warmUp(shapes)
  return {
    connections: warm.connections,
    prepared: warm.prepared,
    prepares: warm.prepares ?? true,
    roundTrips: (warm.roundTrips ?? 0) + idTrips,
    idsFetched,
    durationMs: performance.now() - started,
  }
}
