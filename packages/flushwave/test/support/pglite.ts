import { PGlite } from '@electric-sql/pglite'
import type postgres from 'postgres'

/**
 * A test's own SQL on a PGlite database, in the call forms the suites use on postgres.js: the tagged
 * template, `unsafe` and `end`. Rows come back as postgres.js gives them (objects, int8 as text), so
 * that a suite's expectations hold on either. Anything else postgres.js offers is missing: a suite
 * that needs it does not run on PGlite.
 */
export function pgliteSql(db: PGlite): postgres.Sql {
  // postgres.js leaves int8 as text; PGlite makes a number of it.
  const options = { parsers: { 20: (text: string) => text } }
  const rows = async (text: string, params: unknown[]) => {
    const result = await db.query<Record<string, unknown>>(text, params, options)
    return withCount(result.rows, result.rowCount ?? result.affectedRows ?? 0)
  }
  const sql = (strings: TemplateStringsArray, ...values: unknown[]) => rows(strings.reduce((text, s, i) => `${text}$${i}${s}`), values)
  const unsafe = async (text: string, params: unknown[] = []) => {
    if (params.length > 0) return rows(text, params)
    // Without parameters a text may hold several statements, as postgres.js's simple query allows.
    const results = await db.exec(text, options)
    const last = results.at(-1)
    return withCount(last?.rows ?? [], last?.affectedRows ?? 0)
  }
  return Object.assign(sql, { unsafe, end: async () => undefined }) as unknown as postgres.Sql
}

/** Rows with postgres.js's `count`, kept out of equality checks as postgres.js keeps its own. */
function withCount<T extends object>(rows: T[], count: number): T[] {
  return Object.defineProperty(rows, 'count', { value: count, enumerable: false })
}

/** A fresh in-memory PGlite database. */
export function openPGlite(): Promise<PGlite> {
  return PGlite.create()
}
