import { spawn } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { createTestSchema, searchPathOptions, type TestSchema } from 'devdb'
import type {} from 'devdb/vitest'
import { createTablesSql } from 'flushwave'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { inject } from 'vitest'
import { connect, migrateLatest, MigrationDirectory } from '../src/migrate.js'
import { schema } from '../src/schema.js'

/** Tables, columns, constraints, indexes and enum types of one schema, as comparable lines. */
async function catalog(url: string, ns: string): Promise<string[]> {
  const sql = postgres(url, { max: 1, onnotice: () => {}, ...searchPathOptions(ns) })
  try {
    const columns = await sql`
      select c.relname as table, a.attname as column, format_type(a.atttypid, a.atttypmod) as type,
             a.attnotnull as not_null, a.attidentity as identity, pg_get_expr(d.adbin, d.adrelid) as default
      from pg_attribute a
      join pg_class c on c.oid = a.attrelid
      join pg_namespace n on n.oid = c.relnamespace
      left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
      where n.nspname = ${ns} and c.relkind = 'r' and a.attnum > 0 and not a.attisdropped and c.relname not like 'knex_%'`
    const constraints = await sql`
      select c.relname as table, k.conname as name, pg_get_constraintdef(k.oid) as def
      from pg_constraint k join pg_class c on c.oid = k.conrelid join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = ${ns} and c.relname not like 'knex_%'`
    const indexes = await sql`
      select tablename as table, indexname as name, indexdef as def from pg_indexes
      where schemaname = ${ns} and tablename not like 'knex_%'`
    const enums = await sql`
      select t.typname as name, array_agg(e.enumlabel order by e.enumsortorder)::text as labels
      from pg_type t join pg_enum e on e.enumtypid = t.oid join pg_namespace n on n.oid = t.typnamespace
      where n.nspname = ${ns} group by t.typname`
    const unqualified = (def: string) => def.replaceAll(`"${ns}".`, '').replaceAll(`${ns}.`, '')
    return [
      ...columns.map((c) => `column ${c.table}.${c.column} ${c.type}${c.not_null ? ' not null' : ''}${c.identity ? ` identity(${c.identity})` : ''}${c.default ? ` default ${c.default}` : ''}`),
      ...constraints.map((k) => `constraint ${k.table}.${k.name} ${unqualified(k.def)}`),
      ...indexes.map((i) => `index ${i.table}.${i.name} ${unqualified(i.def)}`),
      ...enums.map((e) => `enum ${e.name} ${e.labels}`),
    ].sort()
  } finally {
    await sql.end()
  }
}

/** The migrations directory's files, by knex's names. */
const migrationNames = readdirSync(fileURLToPath(new URL('../migrations/', import.meta.url)))
  .filter((file) => /^\d{14}_[\w-]+\.ts$/.test(file))
  .map((file) => file.replace(/\.ts$/, ''))
  .sort()

/** `flushwave <args>` from this example's directory, as `pnpm flushwave` runs it. */
function run(args: readonly string[]): Promise<{ code: number | null; out: string }> {
  const cli = fileURLToPath(new URL('../../../packages/flushwave/src/cli.ts', import.meta.url))
  return new Promise((done) => {
    const child = spawn(process.execPath, ['--import', 'tsx', cli, ...args], { cwd: fileURLToPath(new URL('..', import.meta.url)), stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()))
    child.on('close', (code) => done({ code, out }))
  })
}

let url: string
/** The database URL with its search path set to one schema (postgres.js passes it on at connect). */
const inSchema = (ns: string): string => {
  const where = new URL(url)
  where.searchParams.set('search_path', ns)
  return where.toString()
}
let fromFlushwave: TestSchema
let fromKnex: TestSchema
beforeAll(async () => {
  url = inject('databaseUrl')
  fromFlushwave = await createTestSchema(url, 'bookstore_ddl')
  fromKnex = await createTestSchema(url, 'bookstore_knex')
  const sql = postgres(url, { max: 1, onnotice: () => {}, ...searchPathOptions(fromFlushwave.name) })
  // The app records idempotency keys (POST /checkout): the migrations make their table too.
  for (const statement of createTablesSql(schema, { idempotencyKeys: true })) await sql.unsafe(statement)
  await sql.end()
})
afterAll(async () => {
  await fromFlushwave?.drop()
  await fromKnex?.drop()
})

describe('knex migrations', () => {
  it('create exactly what createTablesSql(schema, { idempotencyKeys: true }) creates, checks and unique keys included', async () => {
    const applied = await migrateLatest({ url, searchPath: fromKnex.name })
    expect(applied).toEqual(migrationNames)
    const expected = await catalog(url, fromFlushwave.name)
    const actual = await catalog(url, fromKnex.name)
    expect(expected.length).toBeGreaterThan(80)
    expect(expected).toContain('constraint stock.stock_quantity_check CHECK ((quantity >= 0))')
    expect(expected).toContain('constraint stock.stock_book_id_key UNIQUE (book_id)')
    expect(expected).toContain('index flushwave_idempotency.flushwave_idempotency_at_idx CREATE INDEX flushwave_idempotency_at_idx ON flushwave_idempotency USING btree (at)')
    expect(actual).toEqual(expected)
  })

  it('were generated from src/schema.ts: `flushwave migrate check` finds nothing to add', async () => {
    const { code, out } = await run(['migrate', 'check', '--module', 'src/schema.ts', '--idempotency-keys', '--dir', 'migrations'])
    expect(out).toBe('')
    expect(code).toBe(0)
  })

  it('are up to date once applied, and roll back to nothing', async () => {
    expect(await migrateLatest({ url, searchPath: fromKnex.name })).toEqual([])
    const knex = connect({ url, searchPath: fromKnex.name })
    try {
      await knex.migrate.rollback({ migrationSource: new MigrationDirectory() }, true)
      expect(await catalog(url, fromKnex.name)).toEqual([])
      // generate with this database refuses it while knex has migrations to apply.
      const behind = await run(['migrate', 'generate', 'probe', '--knex', '--module', 'src/schema.ts', '--idempotency-keys', '--dir', 'migrations', '--url', inSchema(fromKnex.name)])
      expect(behind.out).toContain(`not at the last migration (${migrationNames.map((name) => `${name}: pending`).join(', ')})`)
      expect(behind.code).toBe(1)
      const [, pending] = (await knex.migrate.list({ migrationSource: new MigrationDirectory() })) as [unknown[], string[]]
      expect(pending).toHaveLength(migrationNames.length)
    } finally {
      await knex.destroy()
    }
    expect(await migrateLatest({ url, searchPath: fromKnex.name })).toHaveLength(migrationNames.length)
    // Applied by knex, the tables are what the migrations make: nothing to generate, nothing written.
    const applied = await run(['migrate', 'generate', 'probe', '--knex', '--module', 'src/schema.ts', '--idempotency-keys', '--dir', 'migrations', '--url', inSchema(fromKnex.name)])
    expect(applied.out).toBe('nothing to do: the migrations already make the schema\n')
    expect(applied.code).toBe(0)
  })
})
