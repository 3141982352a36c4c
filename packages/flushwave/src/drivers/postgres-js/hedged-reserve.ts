import type { ReservedSql } from 'postgres'
import { ReserveTimeout } from '../port.js'
import { until } from '../protocol/timeout.js'

/** How long a reservation waits before it asks the pool again beside its first request. */
export const RESERVE_HEDGE_MS = 1_000

/**
 * `reserve()` (a pool's, asked as often as needed) that survives postgres.js forgetting the request (postgres 3.4.9).
 *
 * When a connection closes, the pool reopens it for the request at the head of its queue. If that
 * request is a reservation, the reopened connection first fetches the server's array types and
 * then drops the reservation it was opened for: its promise never settles, and a flush would wait
 * for its whole timeout. Seen under a storm of terminated backends (`kill-under-load.sh`).
 *
 * So a reservation still unanswered after RESERVE_HEDGE_MS asks again, and again every
 * RESERVE_HEDGE_MS, while the first request keeps its place in the queue. The first answer wins
 * (a connection, or an error); a connection that arrives after it, or after `deadline`, is released
 * at once, so none is left reserved. Rejects with ReserveTimeout at `deadline`.
 *
 * Each extra request is made only once `reachable()` (a plain query through the pool) answered: a
 * reservation that fails to connect stays queued in postgres.js 3.4.9 and later swallows a
 * connection for good, so none is asked for while the server cannot be reached.
 */
export function hedgedReserve(reserve: () => Promise<ReservedSql>, deadline: number, reachable: () => Promise<boolean>): Promise<ReservedSql> {
  return new Promise<ReservedSql>((resolve, reject) => {
    let done = false
    const finish = (): boolean => {
      if (done) return false
      done = true
      clearInterval(hedge)
      clearTimeout(expiry)
      return true
    }
    const ask = (): void => {
      reserve().then(
        (sql) => (finish() ? resolve(sql) : sql.release()),
        (error: unknown) => finish() && reject(error),
      )
    }
    let probing = false
    const hedge = setInterval(() => {
      if (probing) return // one plain query at a time: a server that cannot be reached is not asked more
      probing = true
      void reachable().then((yes) => {
        probing = false
        if (yes && !done) ask()
      })
    }, RESERVE_HEDGE_MS)
    const expiry = deadline === Infinity ? undefined : setTimeout(() => finish() && reject(new ReserveTimeout()), until(deadline))
    ask()
  })
}
