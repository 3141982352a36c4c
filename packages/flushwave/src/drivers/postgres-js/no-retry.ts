/**
 * postgres.js 3.4.9 sends a query again by itself when the server no longer has its prepared
 * statement (26000, after `DISCARD ALL` or `DEALLOCATE`) or its cached plan no longer fits (a column
 * changed type under it): it drops the statement from its cache and executes the query anew, after
 * whatever the connection had sent meanwhile. In a flush's pipeline that is after COMMIT: the
 * transaction rolled back on the first failure, and the statement then ran on its own, outside
 * it, and committed. A flush reported as rolled back had written part of its rows.
 *
 * So a flush's queries never go again: `retried`, which postgres.js sets just before it executes
 * the query again (src/connection.js, `retry`), is a setter here that marks the query cancelled
 * (postgres.js then does not send it) and rejects it with the server's error. The flush protocol
 * sees a failed statement and the pipelined COMMIT answered ROLLBACK, as for any other failure, and
 * runs the flush again on a new connection (protocol/write.ts).
 *
 * `retried` is internal to postgres.js. If a later version renamed it, this would do nothing and
 * the retry would happen as before; named-statements.test.ts shows which.
 */
const once: PropertyDescriptor = {
  configurable: true,
  enumerable: true,
  get: () => undefined,
  set(this: { cancelled: unknown; reject(error: unknown): void }, error: unknown) {
    this.cancelled = true
    this.reject(error)
  },
}

/** Makes postgres.js fail `query` rather than send it again; call it before the query executes. */
export function neverRetried<Q extends object>(query: Q): Q {
  return Object.defineProperty(query, 'retried', once)
}
