/** How long a flush may take unless `flushTimeoutMs` says otherwise. */
export const DEFAULT_FLUSH_TIMEOUT_MS = 30_000

/** Node fires a timer of more than 2^31 - 1 ms at once; longer waits are effectively forever. */
const LONGEST_TIMER = 2 ** 31 - 1

/** Milliseconds until a performance.now() deadline, as a safe setTimeout delay. */
export function until(deadline: number): number {
  return Math.min(LONGEST_TIMER, Math.max(0, deadline - performance.now()))
}

/**
 * Rejects with `onTimeout()` if `promise` has not settled by `deadline`. The work itself goes on;
 * `onTimeout` is where the caller stops it (cancels the query, cuts the connection).
 */
export function withDeadline<T>(promise: Promise<T>, deadline: number, onTimeout: () => Error): Promise<T> {
  if (deadline === Infinity) return promise
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), until(deadline))
  })
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer))
}
