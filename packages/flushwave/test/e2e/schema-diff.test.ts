/**
 * diffModels walks a schema through fourteen versions on a real database: tables and columns
 * added, dropped and renamed, types changed, indexes (partial, unique, over several columns),
 * unique keys, checks, enum values added and removed, foreign-key actions, nullability, defaults, a
 * PostgreSQL schema of its own, a many-to-many and a composite key, an enum value added and used at once. At every step the `up`
 * statements leave checkSchema() with nothing to report, and the `down` statements (the diff the
 * other way) bring back the previous step's catalog exactly, as the system catalogs describe it
 * (columns compared by name: PostgreSQL appends a column added again at the end).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defineSchema, flushwave } from '../../src/index.js'
import { diffModels, type Renames } from '../../src/catalog/diff.js'
import { billing, versions } from '../support/schema-versions.js'
import { modelOf } from '../../src/catalog/model.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

/** The renames the other way, for a down migration. */
function reversed(renames: Renames | undefined): Renames {
  const tables = new Map([...(renames?.tables ?? [])].map(([from, to]) => [to, from]))
  const columns = new Map(
    [...(renames?.columns ?? [])].map(([table, map]) => {
      const oldTable = [...(renames?.tables ?? [])].find(([, to]) => to === table)?.[0] ?? table
      return [oldTable, new Map([...map].map(([from, to]) => [to, from]))]
    }),
  )
  return { tables, columns }
}

describe('diffModels through fourteen versions of a schema', () => {
  let db: TestDatabase<Record<string, never>>
  beforeAll(async () => {
    db = await testDatabase(defineSchema({}), { name: 'schema_diff' })
    await db.sql.unsafe(`drop schema if exists "${billing}" cascade`)
    await db.sql.unsafe('drop table if exists flushwave_outcome')
  })
  afterAll(async () => {
    await db?.sql.unsafe(`drop schema if exists "${billing}" cascade`)
    await db?.close()
  })

  /** The catalog of the test's schemas, through pg_catalog: tables, columns, constraints, indexes and enum types. */
  async function catalog(): Promise<unknown> {
    const [{ ns }] = (await db.sql`select current_schema() as ns`) as unknown as [{ ns: string }]
    const spaces = [ns, billing]
    const tables = await db.sql`select n.nspname || '.' || c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = any(${spaces}) and c.relkind = 'r' order by 1`
    const columns = await db.sql`
      select c.relname || '.' || a.attname as name, format_type(a.atttypid, a.atttypmod) as type, a.attnotnull as not_null,
             pg_get_expr(d.adbin, d.adrelid) as def, a.attidentity as identity, a.attgenerated as generated
      from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
      left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
      where n.nspname = any(${spaces}) and c.relkind = 'r' and a.attnum > 0 and not a.attisdropped order by 1`
    const constraints = await db.sql`
      select c.relname || '.' || con.conname as name, pg_get_constraintdef(con.oid) as def, con.condeferrable as deferrable
      from pg_constraint con join pg_class c on c.oid = con.conrelid join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = any(${spaces}) order by 1`
    const indexes = await db.sql`select schemaname || '.' || indexname as name, regexp_replace(indexdef, ' ON [^ ]+ ', ' ON ') as def from pg_indexes where schemaname = any(${spaces}) order by 1`
    const enums = await db.sql`
      select t.typname as name, array_agg(e.enumlabel::text order by e.enumsortorder) as labels
      from pg_type t join pg_namespace n on n.oid = t.typnamespace join pg_enum e on e.enumtypid = t.oid
      where n.nspname = any(${spaces}) group by t.typname order by 1`
    const schemas = await db.sql`select nspname from pg_namespace where nspname = ${billing}`
    return { tables, columns, constraints, indexes, enums, schemas }
  }

  const run = async (statements: readonly { sql: string }[]) => {
    await db.sql.begin(async (tx) => {
      for (const { sql } of statements) await tx.unsafe(sql)
    })
  }

  it('applies each version, and undoes it exactly', async () => {
    let previous = modelOf(defineSchema({}), { outcomeLedger: false })
    let before = await catalog()
    for (const [i, version] of versions.entries()) {
      const next = modelOf(version.schema, { outcomeLedger: false })
      const up = diffModels(previous, next, version.renames)
      expect(up.length, `v${i + 1} (${version.what}) changes something`).toBeGreaterThan(0)
      await run(up)
      expect(await flushwave({ schema: version.schema, sql: db.sql, outcomeLedger: false }).checkSchema(), `v${i + 1} (${version.what}): ${up.map((s) => s.sql).join('; ')}`).toEqual([])
      expect(diffModels(next, next), `v${i + 1} against itself`).toEqual([])
      const after = await catalog()
      const down = diffModels(next, previous, reversed(version.renames))
      await run(down)
      expect(await catalog(), `v${i + 1} (${version.what}) undone: ${down.map((s) => s.sql).join('; ')}`).toEqual(before)
      await run(up)
      expect(await catalog(), `v${i + 1} again`).toEqual(after)
      previous = next
      before = after
    }
  })

  it('says which statements can lose data or fail on rows', () => {
    const steps = (from: number, to: number, renames?: Renames) => diffModels(modelOf(versions[from]!.schema, { outcomeLedger: false }), modelOf(versions[to]!.schema, { outcomeLedger: false }), renames)
    const destructive = (list: ReturnType<typeof steps>) => list.filter((s) => s.destructive).map((s) => s.destructive)
    expect(destructive(steps(0, 1))).toEqual(['fails on rows that repeat its values'])
    expect(destructive(steps(2, 3))).toEqual(['changes the type of name from text to varchar(100): values may not convert'])
    expect(destructive(steps(8, 9))).toEqual(['drops column email of "author" and its values', 'fails on rows it does not hold for'])
    expect(destructive(steps(9, 10))).toContain('drops table "' + billing + '"."invoice" and its rows')
    // A value added and used at once: the type is made again (add value's value is unusable until commit).
    expect(steps(12, 13).map((s) => s.sql)).toContain(`alter type "book_status" rename to "book_status__old"`)
    expect(steps(4, 5).map((s) => s.sql)).toContain(`alter type "book_status" add value 'review' before 'published'`)
    // A table renamed with its join table: its keys, foreign keys and indexes are renamed, none rebuilt.
    const renamed = steps(7, 8, versions[8]!.renames).map((s) => s.sql)
    expect(renamed.filter((sql) => !/ rename /.test(sql))).toEqual([])
    expect(renamed).toContain('alter table "label" rename constraint "tag_pkey" to "label_pkey"')
    expect(renamed).toContain('alter index "book_tag_tag_id_idx" rename to "book_label_label_id_idx"')
    // Renamed, not dropped and made again: no data lost.
    expect(destructive(steps(1, 2, versions[2]!.renames))).toEqual([])
    expect(steps(1, 2, versions[2]!.renames).map((s) => s.sql)).toContain('alter table "book" rename column "title" to "heading"')
  })
})
