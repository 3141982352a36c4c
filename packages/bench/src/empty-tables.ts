import type postgres from 'postgres'

/** Rows deleted from a table since it was last truncated, past which emptying it truncates instead. */
const TRUNCATE_AFTER_ROWS = 100_000
const deletedSince = new Map<string, number>()

/**
 * Empties `tables` (children before parents) between samples, untimed.
 *
 * DELETE, not TRUNCATE. TRUNCATE gives a table a new file, which invalidates every connection's
 * cached catalog entries for it, and each connection rebuilds them in its next statements. That
 * rebuild landed in the timed run of whichever series had not touched the tables in its untimed
 * preparation. Measured with log_min_duration_statement = 0, bulkCreate ×1 after a TRUNCATE:
 * Flushwave's BEGIN took the server 151 µs and its inserts' binds 59–183 µs, while raw-pipelined,
 * whose preparation's nextval calls had done most of the rebuild, had 19 µs and 57–232 µs; after a
 * DELETE, 6–23 µs for every one of them, in both. Tables in production are not truncated between
 * requests. (In mixedFlush it was the other way round: Flushwave's find() did the rebuild, the
 * hand-written series paid it.)
 *
 * Dead rows pile up for autovacuum; once a table has lost TRUNCATE_AFTER_ROWS rows that way, the
 * next emptying truncates it, so that a large scenario does not grow the heap without bound. A
 * sample that follows pays the rebuild then: 1 in 320 for bulkCreate ×1, where it matters.
 */
export async function emptyTables(admin: postgres.Sql, tables: readonly string[]): Promise<void> {
  if (tables.some((table) => (deletedSince.get(table) ?? 0) >= TRUNCATE_AFTER_ROWS)) {
    await admin.unsafe(`truncate ${tables.join(', ')}`)
    for (const table of tables) deletedSince.set(table, 0)
    return
  }
  // One transaction, pipelined: the deletes in the order given, so foreign keys hold after each.
  const results = await admin.begin((tx) => tables.map((table) => tx.unsafe(`delete from ${table}`)))
  tables.forEach((table, i) => deletedSince.set(table, (deletedSince.get(table) ?? 0) + results[i]!.count))
}
