/**
 * postgres.js prepares each statement shape once per connection. The first time it meets a
 * parameterized shape it sends Parse/Describe and waits for the reply before it binds (it needs the
 * parameter types), and a reserved connection then stops pipelining: each later query of the
 * pipeline waits until every earlier one has answered. Measured through a 150 ms latency proxy: a
 * five-statement flush on a fresh connection took 11 round trips instead of 1. Hence few, stable
 * shapes, and warm-up; these helpers only count what happened.
 */

/** Whether postgres.js had to describe this query before running it (read after it settled). */
export function wasDescribed(query: object): boolean {
  const q = query as { prepared?: boolean; parameters?: unknown[] }
  return q.prepared === false && (q.parameters?.length ?? 0) > 0
}

/**
 * Round trips one pipeline waited on. All warm: 1. Otherwise, with the first cold query at index i
 * of n + 1 queries: one trip up to its Describe, one for its Bind/Execute, then each later query
 * alone, a cold one twice: 2 + (n - i) + (cold queries after i).
 */
export function pipelineRoundTrips(queries: readonly object[]): number {
  const first = queries.findIndex(wasDescribed)
  if (first < 0) return 1
  const after = queries.slice(first + 1)
  return 2 + after.length + after.filter(wasDescribed).length
}

/** Round trips of one awaited read: 1, or 2 when postgres.js described it first. */
export function readRoundTrips(query: object): number {
  return wasDescribed(query) ? 2 : 1
}
