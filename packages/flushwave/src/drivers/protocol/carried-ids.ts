import { readNextIds } from '../../sql/render-ids.js'
import type { CarriedIds } from '../executor.js'

/**
 * Hands the id pool the blocks of the id statement a flush carried after its COMMIT (see
 * Executor.write), from its settled answer and the driver's way to its rows. A failed or missing
 * answer is left alone: that costs the pool a fetch of its own, never the flush.
 */
export function landCarriedIds<T>(ids: CarriedIds, answer: PromiseSettledResult<T> | undefined, rowsOf: (value: T) => readonly (readonly unknown[])[]): void {
  if (answer?.status !== 'fulfilled') return
  let blocks
  try {
    blocks = readNextIds(ids.requests, rowsOf(answer.value))
  } catch {
    return
  }
  ids.landed({ ids: blocks, roundTrips: 0 })
}
