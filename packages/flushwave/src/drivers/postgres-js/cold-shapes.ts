import { sentInline } from './inline-prepare.js'

/**
 * postgres.js prepares each statement shape once per connection. Left to itself, the first time it
 * meets a parameterized shape it sends Parse/Describe and waits for the reply before it binds (it
 * wants the parameter types), and a reserved connection then stops pipelining: each later query of
 * the pipeline waits until every earlier one has answered: a flush on a fresh connection then waits
 * many round trips instead of one (docs/design-notes.md, "New statement shapes sent without a
 * describe wait"). The executor therefore sends new shapes without that wait (inline-prepare.ts);
 * these helpers count what happened.
 */

/** Whether this query's shape was new to its connection (postgres.js had not prepared it; read after it settled). */
export function wasDescribed(query: object): boolean {
  const q = query as { prepared?: boolean; parameters?: unknown[] }
  return q.prepared === false && (q.parameters?.length ?? 0) > 0
}

/**
 * Shapes new to the connection among one pipeline's queries. Sent without a describe wait, two
 * queries of one new shape (chunks of a big table) are both parsed, as the cache fills only on the
 * reply: the shape counts once.
 */
export function newShapes(queries: readonly object[]): number {
  return new Set(queries.filter(wasDescribed).map((q) => (q as { string?: string }).string)).size
}

/** Whether postgres.js waited for this query's describe before binding it (a new shape not sent inline). */
export function stalled(query: object): boolean {
  return wasDescribed(query) && !sentInline(query)
}

/**
 * Round trips one pipeline waited on. No stall: 1. Otherwise, with the first stalled query at
 * index i of n + 1 queries: one trip up to its Describe, one for its Bind/Execute, then each later
 * query alone, a stalled one twice: 2 + (n - i) + (stalled queries after i).
 */
export function pipelineRoundTrips(queries: readonly object[]): number {
  const first = queries.findIndex(stalled)
  if (first < 0) return 1
  const after = queries.slice(first + 1)
  return 2 + after.length + after.filter(stalled).length
}

/** Round trips of one awaited read: 1, or 2 when postgres.js waited for its describe. */
export function readRoundTrips(query: object): number {
  return stalled(query) ? 2 : 1
}
