import { randomBytes } from 'node:crypto'
import postgres from 'postgres'

/** A schema of its own for one test file, so files can run in parallel against one database. */
export interface TestSchema {
  name: string
  /** Drops the schema and everything in it. */
  drop(): Promise<void>
}

/** Creates a uniquely named schema (a quoted identifier: the name is used exactly as returned). */
export async function createTestSchema(url: string, prefix = 'test'): Promise<TestSchema> {
  const suffix = `_${process.pid}_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`
  // PostgreSQL silently truncates identifiers to 63 bytes; keep the unique part.
  const name = Buffer.from(prefix).subarray(0, 63 - suffix.length).toString('utf8').replace(/\uFFFD+$/, '') + suffix
  await once(url, (sql) => sql`create schema ${sql(name)}`)
  return { name, drop: () => once(url, (sql) => sql`drop schema if exists ${sql(name)} cascade`) }
}

/**
 * postgres.js options that make the schema the only one on the search path:
 * `postgres(url, { ...searchPathOptions(schema.name) })`. The name is quoted, as in createTestSchema.
 */
export function searchPathOptions(name: string): { connection: { search_path: string } } {
  return { connection: { search_path: `"${name.replaceAll('"', '""')}"` } }
}

/** One statement on a short-lived connection. */
async function once(url: string, statement: (sql: postgres.Sql) => PromiseLike<unknown>): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    await statement(sql)
  } finally {
    await sql.end()
  }
}
