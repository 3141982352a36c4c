import { createTestSchema, searchPathOptions } from 'devdb'
import type {} from 'devdb/vitest' // types inject('databaseUrl')
import postgres from 'postgres'
import { inject } from 'vitest'
import { createTablesSql, flushwave, tcpNoDelay, type Flushwave, type QueryEvent, type Schema, type SchemaDefs } from '../../src/index.js'
import { openExecutor, type AnyExecutorName } from './executors.js'
import { openPGlite, pgliteSql } from './pglite.js'

export interface TestDatabase<D extends SchemaDefs> {
  /** postgres.js on the test schema, for the assertions' own SQL (whatever executor `orm` uses). */
  readonly sql: postgres.Sql
  readonly orm: Flushwave<D>
  /** Every statement Flushwave sent, in order. */
  readonly queries: QueryEvent[]
  /** The write statements only, since the last `queries.length = 0`. */
  writes(): QueryEvent[]
  close(): Promise<void>
}

/**
 * A fresh PostgreSQL schema with the tables of `schema`, and a Flushwave on a pool of `max` (1)
 * connections through `executor` (postgres.js unless told); for PGlite, a fresh PGlite database.
 */
export async function testDatabase<D extends SchemaDefs>(
  schema: Schema<D>,
  options: { url?: string; max?: number; name?: string; prepare?: boolean; executor?: AnyExecutorName; before?: readonly string[] } = {},
): Promise<TestDatabase<D>> {
  if (options.executor === 'pglite') return pgliteDatabase(schema, options.before)
  const url = options.url ?? inject('databaseUrl')
  const ns = await createTestSchema(inject('databaseUrl'), options.name ?? 'fw')
  const sql = postgres(url, { ...tcpNoDelay, max: options.max ?? 1, ...(options.prepare === undefined ? {} : { prepare: options.prepare }), onnotice: () => {}, ...searchPathOptions(ns.name) })
  for (const statement of [...(options.before ?? []), ...createTablesSql(schema)]) await sql.unsafe(statement)
  const queries: QueryEvent[] = []
  const onQuery = (e: QueryEvent) => void queries.push(e)
  const other =
    options.executor && options.executor !== 'postgres.js'
      ? openExecutor(options.executor, url, schema, { searchPath: ns.name, max: options.max ?? 1, orm: { onQuery } })
      : undefined
  const orm = other?.orm ?? flushwave({ schema, sql, onQuery })
  return {
    sql,
    orm,
    queries,
    writes: () => queries.filter((q) => q.phase === 'write'),
    close: async () => {
      await other?.close()
      await sql.end()
      await ns.drop()
    },
  }
}

/** The same on a fresh in-memory PGlite: the test's own SQL and the flushes share its one connection. */
async function pgliteDatabase<D extends SchemaDefs>(schema: Schema<D>, before: readonly string[] = []): Promise<TestDatabase<D>> {
  const db = await openPGlite()
  const sql = pgliteSql(db)
  for (const statement of [...before, ...createTablesSql(schema)]) await sql.unsafe(statement)
  const queries: QueryEvent[] = []
  const orm = flushwave({ schema, pglite: db, onQuery: (e) => void queries.push(e) })
  return { sql, orm, queries, writes: () => queries.filter((q) => q.phase === 'write'), close: () => db.close() }
}
