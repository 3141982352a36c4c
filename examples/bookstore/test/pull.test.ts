import { createTestSchema, searchPathOptions, type TestSchema } from 'devdb'
import type {} from 'devdb/vitest'
import { flushwave, generateSchemaModule, readCatalog, type Schema } from 'flushwave'
import { mkdir, rm, writeFile } from 'node:fs/promises'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { migrateLatest } from '../src/migrate.js'
import { schema } from '../src/schema.js'

/**
 * `flushwave pull` against the example's migrated database: the module it writes loads, passes
 * checkSchema() there, and holds the same tables, columns, references, links and versions as the
 * hand-written src/schema.ts. Property names are compared through their columns: a pull cannot
 * know them (`author_id` becomes `author` either way, but a collection's name is made up).
 */
describe('flushwave pull on the migrated bookstore', () => {
  let ns: TestSchema
  let sql: postgres.Sql
  const dir = new URL('.generated/', import.meta.url)
  beforeAll(async () => {
    const url = inject('databaseUrl')
    ns = await createTestSchema(url, 'bookstore_pull')
    await migrateLatest({ url, searchPath: ns.name })
    sql = postgres(url, { max: 1, onnotice: () => {}, ...searchPathOptions(ns.name) })
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
    await sql?.end()
    await ns?.drop()
  })

  it('writes a module that passes checkSchema() and equals src/schema.ts column for column', async () => {
    const tables = await readCatalog(async (text, params) => (await sql.unsafe(text, [...params]).values()) as unknown[][], ns.name)
    const excluded = new Set(['flushwave_outcome', 'flushwave_idempotency', 'knex_migrations', 'knex_migrations_lock'])
    const module = generateSchemaModule(tables.filter((t) => !excluded.has(t.name)), { source: 'the example', versionColumn: 'version' })
    // Everything in the example's tables is expressible: nothing listed as left out.
    expect(module).not.toContain('// Not in this schema:')
    await mkdir(dir, { recursive: true })
    const file = new URL(`pulled-${process.pid}.ts`, dir)
    await writeFile(file, module)
    const pulled = ((await import(file.href)) as { schema: Schema }).schema
    expect(await flushwave({ schema: pulled, sql }).checkSchema()).toEqual([])

    const describe = (s: Schema) =>
      [...s.entities.values()]
        .flatMap((m) => [
          `${m.table} id ${m.id.column} ${m.id.type.sqlType} ${m.id.strategy}`,
          ...m.fields.map(
            (f) =>
              `${m.table}.${f.column} ${f.type.sqlType}${f.nullable ? ' null' : ''}${f.unique ? ' unique' : ''}${f.version ? ' version' : ''}` +
              (f.ref ? ` → ${f.ref.target.table}${f.ref.onDelete ? ` on delete ${f.ref.onDelete}` : ''}${f.ref.deferrable ? ' deferrable' : ''}` : '') +
              (f.enumValues ? ` [${f.enumValues.join(', ')}]` : ''),
          ),
          ...m.manyToMany.map((l) => `${l.table} (${l.ownColumn} → ${l.owner.table}, ${l.targetColumn} → ${l.target.table})`),
          ...m.oneToMany.map((o) => `${m.table} ← ${o.target.table}.${o.inverse.column}`),
        ])
        .sort()
    // A pull gives every reference its one-to-many inverse; src/schema.ts declares only those it uses.
    const inversesNotDeclared = ['book ← order_line.book_id', 'order ← audit_log.order_id']
    expect(describe(pulled).filter((line) => !inversesNotDeclared.includes(line))).toEqual(describe(schema as unknown as Schema))
    expect(describe(pulled)).toEqual(expect.arrayContaining(inversesNotDeclared))
  })
})
