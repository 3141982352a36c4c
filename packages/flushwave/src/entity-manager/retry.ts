import { FlushwaveError } from '../errors.js'
import type { SchemaDefs } from '../schema/define.js'
import type { EntityManager } from './entity-manager.js'
import type { FlushResult } from '../flush/flush.js'

/** How `Flushwave.unitOfWork()` replays a unit of work that lost a race. Retrying is opt-in. */
export interface RetryPolicy {
  /** Runs at most (default 1: no retry). */
  readonly attempts?: number
  /** Which failures to replay after (default: `isRetryable`). */
  readonly retryOn?: (error: unknown) => boolean
  /** Wait before attempt n + 1 (default: 10 ms doubling to 320 ms, with jitter so racers spread out). */
  readonly backoffMs?: (attempt: number) => number
}

export interface UnitOfWorkResult<T> {
  /** What the work function returned on its successful attempt. */
  readonly value: T
  /** The flush that committed it. */
  readonly flush: FlushResult
  /** Attempts made, the successful one included. */
  readonly attempts: number
}

/**
 * Failures after which running the whole unit of work again is safe and may succeed: those whose
 * error says `retryable` (a stale version, a serialization failure, a deadlock, a lock timeout, and
 * a lost connection when nothing was committed). Never a failure whose outcome is unknown:
 * replaying it could not write twice, but the caller should know it happened.
 */
export function isRetryable(error: unknown): boolean {
  return error instanceof FlushwaveError && (error as { retryable?: unknown }).retryable === true
}

/** The policy with its defaults, checked. */
export function retryPolicy(policy: RetryPolicy): { attempts: number; retryOn: (error: unknown) => boolean; backoff: (attempt: number) => number } {
  const attempts = policy.attempts ?? 1
  if (!(Number.isInteger(attempts) && attempts >= 1)) throw new RangeError(`attempts must be a whole number ≥ 1, not ${attempts}`)
  return { attempts, retryOn: policy.retryOn ?? isRetryable, backoff: policy.backoffMs ?? defaultBackoff }
}

const defaultBackoff = (attempt: number): number => Math.min(320, 10 * 2 ** (attempt - 1)) * (0.5 + Math.random())

/**
 * Runs `work` on a fresh EntityManager and flushes it; after a retryable failure, all of it again
 * on another fresh one, so that every attempt reads what the winners committed.
 */
export async function runUnitOfWork<D extends SchemaDefs, T>(
  newEm: () => EntityManager<D>,
  work: (em: EntityManager<D>) => Promise<T>,
  policy: RetryPolicy = {},
): Promise<UnitOfWorkResult<T>> {
  const { attempts, retryOn, backoff } = retryPolicy(policy)
  for (let attempt = 1; ; attempt++) {
    const em = newEm()
    try {
      const value = await work(em)
      return { value, flush: await em.flush(), attempts: attempt }
    } catch (error) {
      if (attempt >= attempts || !retryOn(error)) throw error
      // This attempt's EntityManager is dropped: ids its new entities took that no flush may have
      // committed go back to the pool, so that retries do not burn the sequence.
      em.releaseIds()
      await new Promise((resolve) => setTimeout(resolve, backoff(attempt)))
    }
  }
}
