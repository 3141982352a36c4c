import type { Executor } from '../drivers/executor.js'
import { KeyUsed } from '../drivers/protocol/pg-error.js'
import { FlushwaveError } from '../errors.js'
import type { FlushResult } from '../flush/flush.js'
import type { SchemaDefs } from '../schema/define.js'
import { renderRecord, renderRecorded, type IdempotencyStore } from '../sql/render-idempotency.js'
import { recordOnFlush, startIdempotentWork, type EntityManager } from './entity-manager.js'
import { retryPolicy, type RetryPolicy } from './retry.js'

/** What an idempotent unit of work may return: it is recorded as JSON with the key. */
export type JsonValue = string | number | boolean | null | undefined | readonly JsonValue[] | { readonly [key: string]: JsonValue }

export interface IdempotentResult<T> {
  /** What the work returned; when `replayed`, what the run that committed the key returned, read back from JSON. */
  readonly value: T
  /** The flush that committed the key; undefined when `replayed`. */
  readonly flush: FlushResult | undefined
  /** Attempts made by this call. */
  readonly attempts: number
  /**
   * `value` is the result recorded with the key, read back: by an earlier run (this call wrote
   * nothing), or by this call's own flush whose answer was lost.
   */
  readonly replayed: boolean
}

/** Where the keys live, and the executor that reads them back and prunes them. */
export interface KeyStore {
  readonly store: IdempotencyStore
  readonly executor: Executor
  /** Prunes expired keys in the background now and then (never on a flush's round trip). */
  prune(): void
}

/**
 * `orm.unitOfWork(work, { idempotencyKey })`. The work runs on a fresh EntityManager and may only
 * read and change entities: its one flush, made here, carries the key and the JSON of the work's
 * result, right after the outcome capture in the same transaction. When the key is live already,
 * that statement fails before any write, the transaction rolls back, and the recorded result is
 * read and returned (`replayed`). A concurrent run of the same key waits on the row's lock, then
 * does the same. Retries after retryable failures as `orm.unitOfWork` does. When the work or the
 * flush fails for good, the key's record is read once: a key recorded meanwhile (by another run, or
 * by this run's flush whose answer was lost) answers with its result. Otherwise the error is
 * thrown, and calling again with the key is safe.
 */
export async function runIdempotent<D extends SchemaDefs, T extends JsonValue>(
  newEm: () => EntityManager<D>,
  work: (em: EntityManager<D>) => Promise<T>,
  key: string,
  keys: KeyStore,
  policy: RetryPolicy,
): Promise<IdempotentResult<T>> {
  const { attempts, retryOn, backoff } = retryPolicy(policy)
  for (let attempt = 1; ; attempt++) {
    const em = newEm()
    try {
      startIdempotentWork(em)
      const value = await work(em)
      recordOnFlush(em, renderRecord(keys.store, key, recordable(value)))
      const flush = await em.flush()
      keys.prune()
      return { value, flush, attempts: attempt, replayed: false }
    } catch (error) {
      em.releaseIds()
      if (error instanceof KeyUsed) {
        const recorded = await recordedValue<T>(keys, key)
        if (recorded !== undefined) return { value: recorded.value, flush: undefined, attempts: attempt, replayed: true }
        // It expired between the two statements: the key is free again, so run as new (once more).
        if (attempt > attempts) throw error
        continue
      }
      if (attempt < attempts && retryOn(error)) {
        await new Promise((resolve) => setTimeout(resolve, backoff(attempt)))
        continue
      }
      // The work may have failed on what the run that recorded the key did (bought the last copies,
      // say), or this run's own flush may have committed with its answer lost: either way the key's
      // record answers. A read on the failure path only; unreachable, the error stands.
      const recorded = await recordedValue<T>(keys, key).catch(() => undefined)
      if (recorded !== undefined) return { value: recorded.value, flush: undefined, attempts: attempt, replayed: true }
      throw error
    }
  }
}

/** The result recorded with a live key, or undefined when there is none. */
async function recordedValue<T>(keys: KeyStore, key: string): Promise<{ value: T } | undefined> {
  const text = (await keys.executor.read(renderRecorded(keys.store, key)))[0]?.[0]
  return typeof text === 'string' ? (JSON.parse(text) as { value: T }) : undefined
}

/** Throws unless `key` can be an idempotency key. */
export function checkKey(key: unknown): void {
  if (typeof key !== 'string' || key.length === 0 || key.length > 500) throw new FlushwaveError('idempotencyKey must be a non-empty string of at most 500 characters')
}

/** The result as the JSON recorded with the key (wrapped, so that undefined comes back undefined). */
function recordable(value: unknown): string {
  try {
    return JSON.stringify({ value })
  } catch (error) {
    throw new FlushwaveError(`an idempotent unit of work must return a JSON value, recorded with its key: ${(error as Error).message}`, { cause: error })
  }
}

/** Runs `prune` at most once per `everyMs`, in the background. */
export function pruneEvery(everyMs: number, prune: () => Promise<unknown>): () => void {
  let last = 0
  return () => {
    const now = Date.now()
    if (now - last < everyMs) return
    last = now
    prune().catch(() => undefined) // the next one tries again
  }
}
