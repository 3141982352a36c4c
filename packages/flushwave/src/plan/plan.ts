import type { Op } from './ops.js'

/**
 * A frozen, inspectable flush: waves of ops. Every op of a wave is sent in one pipeline; a later wave
 * exists only when one of its statements needs a result of an earlier one, and `reason` says which.
 */
export interface Plan {
  readonly waves: readonly Wave[]
  /** Round trips spent before the transaction (id allocation); 0 when the id pools had enough. */
  readonly preparation: readonly Preparation[]
}

export interface Wave {
  readonly ops: readonly Op[]
  readonly reason: string
}

export interface Preparation {
  readonly kind: 'allocate-ids'
  /** Sequence values fetched per table, in one statement. */
  readonly counts: ReadonlyMap<string, number>
  /** 1, or 2 when the connection had not prepared the allocation statement yet. */
  readonly roundTrips: number
  readonly reason: string
}
