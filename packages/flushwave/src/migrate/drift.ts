import { randomBytes } from 'node:crypto'
import { diffModels, EMPTY_MODEL, type Step } from '../catalog/diff.js'
import type { ColumnModel, DbModel, TableModel } from '../catalog/model.js'
import { readModel, type Namespaces } from '../catalog/read-model.js'
import type { Executor } from '../drivers/executor.js'
import { MigrationError } from '../errors.js'
import { quoteIdent } from '../schema/quote.js'
import { arrayLiteral } from '../sql/array-literal.js'
import type { Migration } from './files.js'
import { migrationStatus } from './runner.js'

/**
 * Refuses a database that is not at the last migration (one pending, edited or missing; knex's
 * history for knex migration files) or that differs from what the migrations make (`drift`): the
 * typed error says what differs and how to go on.
 */
export async function refuseUnlike(executor: Executor, migrations: readonly Migration[], expected: DbModel, next: DbModel, options: { readonly table?: string } = {}): Promise<void> {
  const behind = await notApplied(executor, migrations, options.table)
  if (behind.length > 0) {
    throw new MigrationError('generate', undefined, `the database is not at the last migration (${behind.join(', ')}): apply the migrations first (flushwave migrate up), or generate from the last migration's snapshot alone (--offline)`)
  }
  const steps = await drift(executor, expected, next)
  if (steps.length === 0) return
  const list = steps.map((s) => `  ${s.sql};`).join('\n')
  if (migrations.length === 0) {
    throw new MigrationError('generate', steps[0]!.sql, `the database has tables of the schema already, made otherwise; \`flushwave migrate baseline <name>\` records them as its first migration (a new database gets them from it). Or generate from an empty database with --offline. What would make it empty of them:\n${list}`)
  }
  throw new MigrationError('generate', steps[0]!.sql, `the database differs from what the migrations make (changed by hand?), and a migration generated over it would not fit the other databases; put it back as the migrations left it (these statements would), or generate from the last migration's snapshot alone (--offline):\n${list}`)
}

/** The migrations the database has not applied as they are (or has applied and are gone), by id. */
async function notApplied(executor: Executor, migrations: readonly Migration[], table: string | undefined): Promise<string[]> {
  if (!migrations.some((m) => m.kind === 'knex')) {
    return (await migrationStatus(executor, migrations, table === undefined ? {} : { table })).filter((m) => m.state !== 'applied').map((m) => `${m.id}: ${m.state}`)
  }
  // knex keeps its history by file name, with or without the extension (as its migration source names them).
  const history = quoteIdent(table ?? 'knex_migrations')
  const [exists] = await executor.read({ text: 'select to_regclass($1) is not null', params: [history] })
  const rows = exists?.[0] === true || exists?.[0] === 't' ? await executor.read({ text: `select name from ${history}`, params: [] }) : []
  const applied = new Set(rows.map((r) => String(r[0]).replace(/\.[cm]?[jt]s$/, '')))
  return migrations.filter((m) => !applied.has(m.id)).map((m) => `${m.id}: pending`)
}

/**
 * Whether a database is what its migrations make: `migrate generate` with a database diffs from it
 * only when it is, since a migration generated over a change made by hand would not fit the other
 * databases the migrations run on.
 *
 * The server prints a type or an expression its own way (`bigint`, `(pages >= 0)`), not as the
 * model holds it (`int8`, `pages >= 0`). So the model the migrations make is built for real in
 * shadow namespaces, inside a transaction that is rolled back, and read back the way the database
 * is read: where the two print the same, they are the same. Only the tables, enum types, schemas
 * and extensions the migrations or the schema name are looked at; anything else in the database is
 * its own business.
 */
export async function drift(executor: Executor, expected: DbModel, next: DbModel): Promise<Step[]> {
  const [settings] = await executor.read({ text: "select current_schema()::text, current_setting('search_path')", params: [] })
  const [current, path] = [settings?.[0], settings?.[1]]
  if (typeof current !== 'string') throw new MigrationError('generate', undefined, 'the database has no schema on its search_path to hold the tables')
  const spaces = [...new Set([...expected.schemas, ...next.schemas])]
  const printed = await quoteAll(executor, [current, ...spaces])

  const live = await readPrinted(executor, new Map<string, string | undefined>([[current, undefined], ...spaces.map((s) => [s, s] as const)]))
  const shadow = await readShadow(executor, expected, spaces, printed, String(path))
  const scope = (list: readonly { readonly name: string }[], more: readonly { readonly name: string }[]) => new Set([...list, ...more].map((x) => x.name))
  const tables = scope(expected.tables, next.tables)
  const enums = scope(expected.enums, next.enums)
  const extensions = new Set([...expected.extensions, ...next.extensions])
  const order = new Map(expected.tables.map((t, i) => [t.name, i]))
  const inScope: DbModel = {
    schemas: live.schemas,
    extensions: live.extensions.filter((e) => extensions.has(e)),
    enums: live.enums.filter((e) => enums.has(e.name)),
    // Parents before children as the migrations made them, for the order of the statements.
    tables: live.tables.filter((t) => tables.has(t.name)).sort((a, b) => (order.get(a.name) ?? Infinity) - (order.get(b.name) ?? Infinity)),
  }
  return diffModels(asModel(inScope, shadow, expected), expected)
}

/** Each name as the server quotes it in what it prints (quote_ident). */
async function quoteAll(executor: Executor, names: readonly string[]): Promise<string[]> {
  const rows = await executor.read({ text: 'select quote_ident(x) from unnest($1::text[]) with ordinality as n(x, i) order by i', params: [arrayLiteral(names)] })
  return rows.map((r) => String(r[0]))
}

/** The model of `namespaces`, with every type printed with its namespace (search_path is pg_catalog alone for the read). */
async function readPrinted(executor: Executor, namespaces: Namespaces): Promise<DbModel> {
  return executor.transaction(async (tx) => {
    await tx.read({ text: "select set_config('search_path', 'pg_catalog', true)", params: [] })
    return readModel((statement) => tx.read(statement), namespaces)
  })
}

class RolledBack {
  constructor(readonly model: DbModel) {}
}

/**
 * `expected` built in new namespaces (one for the default one, one for each PostgreSQL schema) and
 * read back, in a transaction rolled back after: what the server prints for it.
 */
async function readShadow(executor: Executor, expected: DbModel, spaces: readonly string[], printed: readonly string[], path: string): Promise<DbModel> {
  const tag = `flushwave_shadow_${randomBytes(4).toString('hex')}`
  const shadows = [tag, ...spaces.map((_, i) => `${tag}_${i + 1}`)]
  // The model's texts name a schema's objects `"billing"."invoice"`: in the shadow, its shadow's.
  let json = JSON.stringify({ ...expected, schemas: [] })
  spaces.forEach((space, i) => (json = json.split(JSON.stringify(`${quoteIdent(space)}.`).slice(1, -1)).join(JSON.stringify(`${quoteIdent(shadows[i + 1]!)}.`).slice(1, -1))))
  const model = JSON.parse(json) as DbModel
  const back = (text: string) => shadows.reduce((out, shadow, i) => out.split(`${shadow}.`).join(`${printed[i]!}.`), text)
  try {
    await executor.transaction(async (tx) => {
      for (const shadow of shadows) await tx.read({ text: `create schema ${quoteIdent(shadow)}`, params: [] })
      // Unqualified names land in the default namespace's shadow; functions and types still resolve as in the database.
      await tx.read({ text: "select set_config('search_path', $1, true)", params: [`${quoteIdent(tag)}, ${path}`] })
      for (const step of diffModels(EMPTY_MODEL, model)) {
        try {
          await tx.read({ text: step.sql, params: [] })
        } catch (error) {
          throw new MigrationError('generate', step.sql, `could not build what the migrations make to compare the database with (--offline skips the comparison): ${(error as Error).message}\n  in: ${step.sql}`, { cause: error })
        }
      }
      await tx.read({ text: "select set_config('search_path', 'pg_catalog', true)", params: [] })
      const namespaces = new Map<string, string | undefined>([[tag, undefined], ...spaces.map((s, i) => [shadows[i + 1]!, s] as const)])
      throw new RolledBack(await readModel((statement) => tx.read(statement), namespaces, back))
    })
  } catch (outcome) {
    if (outcome instanceof RolledBack) return outcome.model
    throw outcome
  }
  throw new Error('unreachable: the shadow transaction always rolls back')
}

/**
 * The database's model in the migrations' own words: each type, default, generation expression,
 * check and index condition the server prints as it prints the migrations' one is the migrations'
 * text; one that differs stays the database's (a drift the diff then shows).
 */
function asModel(live: DbModel, shadow: DbModel, expected: DbModel): DbModel {
  const shadows = new Map(shadow.tables.map((t) => [t.name, t]))
  const expectedTables = new Map(expected.tables.map((t) => [t.name, t]))
  return {
    ...live,
    tables: live.tables.map((table): TableModel => {
      const printedAs = shadows.get(table.name)
      const wanted = expectedTables.get(table.name)
      if (!printedAs || !wanted) return { ...table, columns: table.columns.map(shortTypes) }
      const same = <T extends { readonly name: string }>(list: readonly T[], name: string) => list.find((x) => x.name === name)
      return {
        ...table,
        columns: table.columns.map((column): ColumnModel => {
          const was = same(printedAs.columns, column.name)
          const want = same(wanted.columns, column.name)
          if (!was || !want) return shortTypes(column)
          const { default: fallback, generated, ...rest } = column
          const def = fallback === was.default ? want.default : fallback
          const gen = generated === was.generated ? want.generated : generated
          return { ...rest, type: column.type === was.type ? want.type : shortType(column.type), ...(def !== undefined && { default: def }), ...(gen !== undefined && { generated: gen }) }
        }),
        checks: table.checks.map((check) => {
          const want = same(wanted.checks, check.name)
          return want && same(printedAs.checks, check.name)?.sql === check.sql ? want : check
        }),
        indexes: table.indexes.map((index) => {
          const want = same(wanted.indexes, index.name)
          return want && same(printedAs.indexes, index.name)?.where === index.where ? { ...index, ...(want.where !== undefined && { where: want.where }) } : index
        }),
      }
    }),
  }
}

/** The model's names of the types a database commonly has that the migrations do not know (for what the diff says of them). */
const SHORT: Readonly<Record<string, string>> = { smallint: 'int2', integer: 'int4', bigint: 'int8', boolean: 'bool', 'timestamp with time zone': 'timestamptz', 'timestamp without time zone': 'timestamp', 'double precision': 'float8', real: 'float4' }

function shortType(type: string): string {
  const varchar = /^character varying(\(\d+\))?(\[\])?$/.exec(type)
  if (varchar) return `varchar${varchar[1] ?? ''}${varchar[2] ?? ''}`
  const array = type.endsWith('[]') ? '[]' : ''
  const base = array ? type.slice(0, -2) : type
  return SHORT[base] !== undefined ? SHORT[base] + array : type
}

const shortTypes = (column: ColumnModel): ColumnModel => ({ ...column, type: shortType(column.type) })
