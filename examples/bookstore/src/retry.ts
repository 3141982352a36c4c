import { DeadlockError, LockTimeoutError, OptimisticLockError, SerializationError, UniqueViolationError } from 'flushwave'

export const MAX_ATTEMPTS = 8

/**
 * Runs a whole unit of work again (a new EntityManager each time: `work` calls `orm.em()`) when it
 * failed with an error worth retrying, with a short random pause. Nothing of a failed flush was
 * committed, so this is safe. For handlers whose changes the server computes from what it read (a
 * counter, a stock level); not for PATCH, where the client sent the version it based its edit on.
 */
export async function retrying<T>(shouldRetry: (error: unknown) => boolean, work: (attempt: number) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work(attempt)
    } catch (error) {
      if (attempt >= MAX_ATTEMPTS || !shouldRetry(error)) throw error
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * attempt))
    }
  }
}

/** Another request changed a row this one read (version check), or the database asked to retry. */
export function isConcurrencyConflict(error: unknown): boolean {
  return error instanceof OptimisticLockError || error instanceof SerializationError || error instanceof DeadlockError || error instanceof LockTimeoutError
}

/** Two requests created the same new tag at once: the second sees it on its next attempt. */
export function isTagRace(error: unknown): boolean {
  return error instanceof UniqueViolationError && error.entity === 'Tag'
}
