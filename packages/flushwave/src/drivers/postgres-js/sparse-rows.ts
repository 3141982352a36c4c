/**
 * postgres.js 3.4.9 keeps a connection's row counter when a query fails while its rows stream in
 * (its server process is terminated, a statement timeout, an error in a later row): the next query
 * on that connection resolves with its own rows placed after that many leading holes
 * (porsager/postgres#1119 and #1181, open). Seen in the killed-connections test as a read that
 * crashed in hydrate on `undefined`. The rows after the holes are the query's and complete, so
 * they are moved to the front. Costs one `in` check when there is no hole.
 */
export function withoutLeadingHoles<T>(rows: T[]): T[] {
  if (rows.length === 0 || 0 in rows) return rows
  let first = 1
  while (first < rows.length && !(first in rows)) first++
  return rows.slice(first)
}
