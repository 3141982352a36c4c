import { declaredType } from '../schema/column-types.js'
import { quoteIdent } from '../schema/quote.js'
import { DEFAULT_IDEMPOTENCY_TABLE, idempotencyTableSql } from '../sql/render-idempotency.js'
import { DEFAULT_LEDGER_TABLE, ledgerTableSql } from '../sql/render-ledger.js'
import type { Schema } from '../schema/define.js'
import type { EntityMeta, FieldMeta, IndexMeta } from '../schema/meta.js'

/**
 * CREATE statements for a schema, in dependency order: PostgreSQL schemas its tables name, extensions its types need, enum types, entity tables (parents first,
 * foreign keys indexed), join tables, then the outcome ledger (unless `outcomeLedger: false`, as
 * given to flushwave()) and, with `idempotencyKeys`, the table of idempotent units of work's keys. For tests and quick starts; apps with migrations can print it once and copy it.
 */
export function createTablesSql(schema: Schema, options: TablesOptions = {}): string[] {
  const out: string[] = []
  // citext is an extension's type (shipped with PostgreSQL's contrib modules).
  if (schema.insertOrder.some((m) => m.fields.some((f) => /^citext\b/.test(f.type.sqlType)))) out.push('create extension if not exists citext')
  const schemas = new Set<string>()
  for (const meta of schema.insertOrder) if (meta.schema !== undefined) schemas.add(meta.schema)
  for (const name of schemas) out.push(`create schema if not exists ${quoteIdent(name)}`)
  const enums = new Map<string, readonly string[]>()
  for (const meta of schema.insertOrder) for (const f of meta.fields) if (f.enumValues) enums.set(enumTypeOf(f), f.enumValues)
  for (const [type, values] of enums) {
    out.push(`create type ${type} as enum (${values.map((v) => `'${v.replace(/'/g, "''")}'`).join(', ')})`)
  }
  // A reference to a table created later (a cycle) is added once both exist.
  const created = new Set<EntityMeta>()
  const later: string[] = []
  for (const meta of schema.insertOrder) {
    created.add(meta)
    const inline = (f: FieldMeta) => !f.ref || created.has(f.ref.target)
    // A column's own .unique() is written with it; every other key (`entity(…, { unique })`, one column or several) here.
    const keys = meta.uniqueKeys.filter((key) => key.length > 1 || !key[0]!.unique).map((key) => `unique (${key.map((f) => f.quoted).join(', ')})`)
    const primary = meta.key ? [`primary key (${meta.key.map((f) => f.quoted).join(', ')})`] : []
    const checks = meta.checks.map((c) => `constraint ${quoteIdent(c.name)} check (${c.sql})`)
    out.push(`create table ${meta.quotedTable} (\n  ${[...(meta.key ? [] : [idColumn(meta)]), ...meta.fields.map((f) => fieldColumn(f, inline(f))), ...primary, ...keys, ...checks].join(',\n  ')}\n)`)
    for (const f of referenceIndexes(meta)) out.push(`create index on ${meta.quotedTable} (${f.quoted})`)
    for (const index of meta.indexes) out.push(indexSql(meta, index))
    for (const f of meta.fields) {
      if (inline(f)) continue
      const name = quoteIdent(`${meta.bareTable}_${f.column}_fkey`)
      later.push(`alter table ${meta.quotedTable} add constraint ${name} foreign key (${f.quoted})${references(f)}`)
    }
  }
  out.push(...later)
  for (const meta of schema.insertOrder) {
    for (const link of meta.manyToMany) {
      const own = quoteIdent(link.ownColumn)
      const target = quoteIdent(link.targetColumn)
      out.push(
        `create table ${link.quotedTable} (\n` +
          `  ${own} ${declaredType(link.owner.id.type)} not null references ${link.owner.quotedTable} (${link.owner.id.quoted}) on delete cascade,\n` +
          `  ${target} ${declaredType(link.target.id.type)} not null references ${link.target.quotedTable} (${link.target.id.quoted}) on delete cascade,\n` +
          `  primary key (${own}, ${target})\n)`,
      )
      out.push(`create index on ${link.quotedTable} (${target})`)
    }
  }
  const ledger = options.outcomeLedger ?? DEFAULT_LEDGER_TABLE
  if (ledger !== false) out.push(...ledgerTableSql(ledger))
  const keys = idempotencyTableOf(options)
  if (keys !== undefined) out.push(...idempotencyTableSql(keys))
  return out
}

/**
 * The references that get an index of their own, so that deleting a parent finds its children
 * without a scan: each many-to-one, unless an index already leads with its column (a composite
 * primary key's, or one the schema declares).
 */
export function referenceIndexes(meta: EntityMeta): FieldMeta[] {
  return meta.fields.filter((f) => f.ref && meta.key?.[0] !== f && !meta.indexes.some((index) => index.fields[0] === f))
}

/** `create [unique] index "name" on table (columns) [where …]`. */
export function indexSql(meta: EntityMeta, index: IndexMeta): string {
  const where = index.where === undefined ? '' : ` where ${index.where}`
  return `create ${index.unique ? 'unique ' : ''}index ${quoteIdent(index.name)} on ${meta.quotedTable} (${index.fields.map((f) => f.quoted).join(', ')})${where}`
}

/** DROP statements in the reverse order, for tests. */
export function dropTablesSql(schema: Schema): string[] {
  const links = schema.insertOrder.flatMap((m) => m.manyToMany.map((l) => `drop table if exists ${l.quotedTable}`))
  const tables = [...schema.insertOrder].reverse().map((m) => `drop table if exists ${m.quotedTable}`)
  const enums = new Set(schema.insertOrder.flatMap((m) => m.fields.filter((f) => f.enumValues).map(enumTypeOf)))
  return [...links, ...tables, ...[...enums].map((t) => `drop type if exists ${t}`)]
}

/** The enum type of an enum column, or of an array of enums (`"mood"[]` is an array of `"mood"`). */
const enumTypeOf = (f: FieldMeta): string => f.type.sqlType.replace(/\[\]$/, '')

function idColumn(meta: EntityMeta): string {
  const generated = meta.id.strategy === 'sequence' ? ' generated by default as identity' : ''
  return `${meta.id.quoted} ${declaredType(meta.id.type)}${generated} primary key`
}

function fieldColumn(f: FieldMeta, withReference: boolean): string {
  let sql = `${f.quoted} ${declaredType(f.type)}${f.nullable ? '' : ' not null'}`
  if (f.default?.sql) sql += ` default ${f.default.sql}`
  if (f.serverDefault?.sql) sql += ` default ${f.serverDefault.sql}`
  if (f.generated) sql += ` generated always as (${f.generated.sql}) stored`
  if (f.unique) sql += ' unique'
  if (withReference) sql += references(f)
  return sql
}

function references(f: FieldMeta): string {
  if (!f.ref) return ''
  let sql = ` references ${f.ref.target.quotedTable} (${f.ref.target.id.quoted})`
  if (f.ref.onDelete) sql += ` on delete ${f.ref.onDelete}`
  if (f.ref.deferrable) sql += ' deferrable initially deferred'
  return sql
}

/** What besides the schema's tables createTablesSql and the migration model hold. */
export interface TablesOptions {
  /** The outcome ledger's table, as given to flushwave() (default `flushwave_outcome`); false: none. */
  readonly outcomeLedger?: string | false
  /** The idempotency keys' table: true for `flushwave_idempotency`, or its name as given to flushwave(); default none. */
  readonly idempotencyKeys?: string | boolean
}

/** The idempotency keys' table name, or undefined when the options want none. */
export function idempotencyTableOf(options: TablesOptions): string | undefined {
  const keys = options.idempotencyKeys
  return keys === undefined || keys === false ? undefined : keys === true ? DEFAULT_IDEMPOTENCY_TABLE : keys
}
