import { quoteIdent, unquoteIdents } from '../schema/quote.js'
import type { ColumnModel, DbModel, EnumModel, ForeignKeyModel, IndexModel, TableModel } from './model.js'

/**
 * The statements that take a database from one model (model.ts) to another, in an order that
 * never leaves a reference dangling: new schemas, extensions and enum types; foreign keys, indexes
 * and constraints that go or change are dropped; tables and columns renamed; new tables created;
 * columns added, changed and dropped; keys, checks, indexes and foreign keys added; tables, enum
 * types and schemas dropped. A migration's `down` is the diff the other way (renames reversed).
 * Each statement that can lose data, or fail on rows a table already has, says so (`destructive`).
 */
export interface Step {
  readonly sql: string
  /** Why the statement can lose data or fail on existing rows; absent when it cannot. */
  readonly destructive?: string
}

/** Renames the diff must not guess: tables (`"old"` → `"new"`, as SQL names them) and columns, by new table. */
export interface Renames {
  readonly tables?: ReadonlyMap<string, string>
  /** Per table (its new name), old column → new column. */
  readonly columns?: ReadonlyMap<string, ReadonlyMap<string, string>>
}

export const EMPTY_MODEL: DbModel = { schemas: [], extensions: [], enums: [], tables: [] }

export function diffModels(from: DbModel, to: DbModel, renames: Renames = {}): Step[] {
  const steps: Step[] = []
  const add = (sql: string, destructive?: string) => steps.push(destructive === undefined ? { sql } : { sql, destructive })
  const renamedTo = (name: string) => renames.tables?.get(name) ?? name
  const after = new Map(to.tables.map((t) => [t.name, t]))
  // Keys, indexes and checks that only follow a renamed table or column are renamed, not made
  // again (a table's primary key index is not rebuilt because the table got another name).
  const followed: string[] = []
  const before = new Map(
    from.tables.map((t) => {
      const name = renamedTo(t.name)
      const now = after.get(name)
      return [name, now ? followRenames(t, now, renames.columns?.get(name), renamedTo, followed) : t] as const
    }),
  )

  for (const name of to.schemas) if (!from.schemas.includes(name)) add(`create schema if not exists ${quoteIdent(name)}`)
  for (const name of to.extensions) if (!from.extensions.includes(name)) add(`create extension if not exists ${quoteIdent(name)}`)
  const oldEnums = new Map(from.enums.map((e) => [e.name, e]))
  const remade = new Set(to.enums.filter((type) => oldEnums.has(type.name) && (!valuesKept(oldEnums.get(type.name)!, type) || usesNewValue(oldEnums.get(type.name)!, type, to))).map((type) => type.name))
  // Tables whose columns change type: their checks and partial indexes, whose expressions may
  // compare those columns, go before and come back after (PostgreSQL rebuilds them with the column,
  // and an enum's literal of the old type no longer compares).
  const retyped = new Set<string>()
  for (const table of to.tables) {
    const old = before.get(table.name)
    if (!old) continue
    const rename = renames.columns?.get(table.name)
    const types = new Map(old.columns.map((c) => [rename?.get(c.name) ?? c.name, c.type]))
    if (table.columns.some((c) => (types.has(c.name) && types.get(c.name) !== c.type) || remade.has(c.type.replace(/\[\]$/, '')))) retyped.add(table.name)
  }
  const keepsIndex = (table: string, a: IndexModel, b: IndexModel | undefined) => sameIndex(a, b) && !(retyped.has(table) && a.where !== undefined)
  const keepsCheck = (table: string, sql: string, now: string | undefined) => now === sql && !retyped.has(table)
  for (const type of to.enums) {
    const old = oldEnums.get(type.name)
    if (!old) add(createEnum(type))
    else if (!remade.has(type.name)) enumChange(old, type, to, add)
  }

  // What goes or changes is dropped first, so that nothing refers to what changes next.
  for (const [name, old] of before) {
    const now = after.get(name)
    for (const fk of old.foreignKeys) if (!now || !sameForeignKey(fk, find(now.foreignKeys, fk.name), renamedTo)) add(`alter table ${old.name} drop constraint ${quoteIdent(fk.name)}`)
  }
  for (const [name, old] of before) {
    const now = after.get(name)
    const table = old.name
    if (!now) continue
    for (const index of old.indexes) if (!keepsIndex(name, index, find(now.indexes, index.name))) add(`drop index ${qualified(table, index.name)}`)
    for (const unique of old.uniques) if (!sameColumns(unique.columns, find(now.uniques, unique.name)?.columns)) add(`alter table ${table} drop constraint ${quoteIdent(unique.name)}`)
    for (const check of old.checks) if (!keepsCheck(name, check.sql, find(now.checks, check.name)?.sql)) add(`alter table ${table} drop constraint ${quoteIdent(check.name)}`)
    if (!sameColumns(old.primaryKey.columns, now.primaryKey.columns) || old.primaryKey.name !== now.primaryKey.name) add(`alter table ${table} drop constraint ${quoteIdent(old.primaryKey.name)}`)
  }
  for (const old of from.tables) {
    const name = renamedTo(old.name)
    if (name !== old.name && after.has(name)) add(`alter table ${old.name} rename to ${quoteIdent(bareName(name))}`)
  }
  for (const sql of followed) add(sql)

  // Enum types made again, now that nothing compares their columns.
  // The default a column has now (its table and column renamed already): a remade type's columns lose it first.
  const hadDefault = (table: string, column: string): boolean => {
    const old = before.get(table)
    const rename = renames.columns?.get(table)
    return old?.columns.find((c) => (rename?.get(c.name) ?? c.name) === column)?.default !== undefined
  }
  for (const type of to.enums) if (remade.has(type.name)) enumChange(oldEnums.get(type.name)!, type, to, add, hadDefault)
  for (const table of to.tables) {
    const old = before.get(table.name)
    if (!old) {
      add(createTable(table))
      continue
    }
    alterColumns(old, table, renames.columns?.get(table.name), add)
    const { name } = table
    if (!sameColumns(old.primaryKey.columns, table.primaryKey.columns) || old.primaryKey.name !== table.primaryKey.name) {
      add(`alter table ${name} add constraint ${quoteIdent(table.primaryKey.name)} primary key (${table.primaryKey.columns.map(quoteIdent).join(', ')})`, 'a new primary key fails on rows that repeat or lack its values')
    }
    for (const unique of table.uniques) if (!sameColumns(unique.columns, find(old.uniques, unique.name)?.columns)) add(`alter table ${name} add constraint ${quoteIdent(unique.name)} unique (${unique.columns.map(quoteIdent).join(', ')})`, 'fails on rows that repeat its values')
    for (const check of table.checks) if (!keepsCheck(name, find(old.checks, check.name)?.sql ?? '', check.sql)) add(`alter table ${name} add constraint ${quoteIdent(check.name)} check (${check.sql})`, 'fails on rows it does not hold for')
  }
  for (const table of to.tables) {
    const old = before.get(table.name)
    for (const index of table.indexes) if (!old || !keepsIndex(table.name, index, find(old.indexes, index.name))) add(createIndex(table.name, index), index.unique ? 'fails on rows that repeat its values' : undefined)
  }
  for (const table of to.tables) {
    const old = before.get(table.name)
    for (const fk of table.foreignKeys) {
      const was = old && find(old.foreignKeys, fk.name)
      if (sameForeignKey(was, fk, renamedTo)) continue
      // A new table has no rows; a key that only changes its action or deferral held for every row already.
      const held = !old || (was !== undefined && was.column === fk.column && renamedTo(was.target) === fk.target && was.targetColumn === fk.targetColumn)
      add(`alter table ${table.name} add constraint ${quoteIdent(fk.name)} foreign key (${quoteIdent(fk.column)}) ${references(fk)}`, held ? undefined : 'fails on rows that refer to none')
    }
  }

  // Children first: a table's own foreign keys go with it, those to it were dropped above.
  for (const old of [...from.tables].reverse()) if (!after.has(renamedTo(old.name))) add(`drop table ${old.name}`, `drops table ${old.name} and its rows`)
  const newEnums = new Set(to.enums.map((e) => e.name))
  for (const type of from.enums) if (!newEnums.has(type.name)) add(`drop type ${type.name}`)
  for (const name of from.extensions) if (!to.extensions.includes(name)) add(`drop extension if exists ${quoteIdent(name)}`)
  for (const name of from.schemas) if (!to.schemas.includes(name)) add(`drop schema if exists ${quoteIdent(name)}`, `drops schema ${name} (only when nothing else is in it)`)
  return steps
}

/**
 * The old table as its renames leave it: each key, index and check that the new table has under
 * another name, with the same definition once its columns are renamed, takes that name, and
 * `followed` gets the statement that renames it (run once the table has its new name).
 */
function followRenames(old: TableModel, now: TableModel, columns: ReadonlyMap<string, string> | undefined, renamedTo: (name: string) => string, followed: string[]): TableModel {
  const col = (c: string) => columns?.get(c) ?? c
  const cols = (list: readonly string[]) => list.map(col)
  const table = now.name
  const renameTo = <T extends { readonly name: string }>(item: T, list: readonly T[], oldNames: readonly string[], same: (candidate: T) => boolean, sql: (to: string) => string): T => {
    if (list.some((x) => x.name === item.name)) return item
    const match = list.find((x) => !oldNames.includes(x.name) && same(x))
    if (match === undefined) return item
    followed.push(sql(match.name))
    return { ...item, name: match.name }
  }
  const constraint = (from: string) => (to: string) => `alter table ${table} rename constraint ${quoteIdent(from)} to ${quoteIdent(to)}`
  const pkNames = now.primaryKey.name === old.primaryKey.name ? [] : [old.primaryKey.name]
  // Their columns as renamed too: PostgreSQL's keys and indexes follow a column's rename by themselves.
  const pk = { name: old.primaryKey.name, columns: cols(old.primaryKey.columns) }
  const primaryKey = pkNames.length > 0 && sameColumns(pk.columns, now.primaryKey.columns) ? (followed.push(constraint(pk.name)(now.primaryKey.name)), { ...pk, name: now.primaryKey.name }) : pk
  const names = (list: readonly { readonly name: string }[]) => list.map((x) => x.name)
  const uniques = old.uniques.map((u) => ({ ...u, columns: cols(u.columns) }))
  const foreignKeys = old.foreignKeys.map((fk) => ({ ...fk, column: col(fk.column) }))
  const indexes = old.indexes.map((i) => ({ ...i, columns: cols(i.columns) }))
  return {
    ...old,
    primaryKey,
    uniques: uniques.map((u) => renameTo(u, now.uniques, names(old.uniques), (x) => sameColumns(u.columns, x.columns), constraint(u.name))),
    checks: old.checks.map((c) => renameTo(c, now.checks, names(old.checks), (x) => x.sql === c.sql, constraint(c.name))),
    foreignKeys: foreignKeys.map((fk) => renameTo(fk, now.foreignKeys, names(old.foreignKeys), (x) => sameForeignKey(fk, x, renamedTo), constraint(fk.name))),
    indexes: indexes.map((i) => renameTo(i, now.indexes, names(old.indexes), (x) => sameIndex(i, x), (to) => `alter index ${qualified(table, i.name)} rename to ${quoteIdent(to)}`)),
  }
}

function alterColumns(old: TableModel, table: TableModel, renamed: ReadonlyMap<string, string> | undefined, add: (sql: string, destructive?: string) => void): void {
  const name = table.name
  const newName = (column: string) => renamed?.get(column) ?? column
  const before = new Map(old.columns.map((c) => [newName(c.name), c]))
  for (const column of old.columns) if (newName(column.name) !== column.name) add(`alter table ${name} rename column ${quoteIdent(column.name)} to ${quoteIdent(newName(column.name))}`)
  const after = new Set(table.columns.map((c) => c.name))
  for (const column of old.columns) if (!after.has(newName(column.name))) add(`alter table ${name} drop column ${quoteIdent(newName(column.name))}`, `drops column ${column.name} of ${name} and its values`)
  for (const column of table.columns) {
    const was = before.get(column.name)
    const at = `alter table ${name} alter column ${quoteIdent(column.name)}`
    if (!was) {
      add(`alter table ${name} add column ${columnSql(column)}`, column.notNull && column.default === undefined && !column.identity && !column.generated ? 'a NOT NULL column without a default fails on a table with rows' : undefined)
      continue
    }
    if (was.generated !== column.generated) {
      // A stored generated column cannot be made plain or given another expression in place (before PostgreSQL 17).
      add(`alter table ${name} drop column ${quoteIdent(column.name)}`, `drops column ${column.name} of ${name} to make it again`)
      add(`alter table ${name} add column ${columnSql(column)}`, column.notNull && column.default === undefined && !column.generated ? 'a NOT NULL column without a default fails on a table with rows' : undefined)
      continue
    }
    if (was.type !== column.type) add(`${at} type ${column.type} using ${quoteIdent(column.name)}::${column.type}`, widens(was.type, column.type) ? undefined : `changes the type of ${column.name} from ${was.type} to ${column.type}: values may not convert`)
    if (was.identity && !column.identity) add(`${at} drop identity`)
    if (was.default !== column.default) add(column.default === undefined ? `${at} drop default` : `${at} set default ${column.default}`)
    if (!was.identity && column.identity) add(`${at} add generated by default as identity`)
    if (was.notNull !== column.notNull) add(`${at} ${column.notNull ? 'set' : 'drop'} not null`, column.notNull ? `fails on rows whose ${column.name} is null` : undefined)
  }
}

/** Type changes no value can fail: integers to wider ones, text of a length to a longer one or none. */
function widens(from: string, to: string): boolean {
  const ints = ['int2', 'int4', 'int8']
  if (ints.includes(from) && ints.includes(to)) return ints.indexOf(to) > ints.indexOf(from)
  const length = (t: string) => /^varchar\((\d+)\)$/.exec(t)?.[1]
  if (length(from) !== undefined) return to === 'text' || to === 'varchar' || (length(to) !== undefined && Number(length(to)) >= Number(length(from)))
  return from === 'varchar' && to === 'text'
}

/** New values go in with `add value` (PostgreSQL keeps each one's place); a value gone makes the type again. */
function enumChange(old: EnumModel, type: EnumModel, to: DbModel, add: (sql: string, destructive?: string) => void, remake?: (table: string, column: string) => boolean): void {
  if (remake === undefined) {
    type.values.forEach((value, i) => {
      if (old.values.includes(value)) return
      const next = type.values.slice(i + 1).find((v) => old.values.includes(v))
      add(`alter type ${type.name} add value ${literal(value)}${next === undefined ? '' : ` before ${literal(next)}`}`)
    })
    return
  }
  // Values removed or reordered, or one added and used at once: a new type, each column cast to it by its text, the old one dropped.
  const parts = unquoteIdents(type.name)
  const oldName = `${parts.pop()!}__old`
  const renamed = [...parts, oldName].map(quoteIdent).join('.')
  add(`alter type ${type.name} rename to ${quoteIdent(oldName)}`)
  add(createEnum(type))
  for (const table of to.tables) {
    for (const column of table.columns) {
      if (column.type !== type.name && column.type !== `${type.name}[]`) continue
      const at = `alter table ${table.name} alter column ${quoteIdent(column.name)}`
      if (column.default !== undefined || remake(table.name, column.name)) add(`${at} drop default`)
      add(`${at} type ${column.type} using ${quoteIdent(column.name)}::text${column.type.endsWith('[]') ? '[]' : ''}::${column.type}`, `values of ${type.name} no longer listed (${old.values.filter((v) => !type.values.includes(v)).join(', ')}) fail`)
      if (column.default !== undefined) add(`${at} set default ${column.default}`)
    }
  }
  add(`drop type ${renamed}`)
}

/**
 * Whether the new model uses a value the type gains (a default, a check or a partial index names
 * it): PostgreSQL refuses a value added by `add value` until its transaction commits, so such a type
 * is made again instead, in the migration's one transaction.
 */
function usesNewValue(old: EnumModel, type: EnumModel, to: DbModel): boolean {
  const added = type.values.filter((v) => !old.values.includes(v)).map(literal)
  if (added.length === 0) return false
  const texts = to.tables.flatMap((t) => [...t.columns.map((c) => c.default ?? ''), ...t.checks.map((c) => c.sql), ...t.indexes.map((i) => i.where ?? '')])
  return texts.some((text) => added.some((value) => text.includes(value)))
}

/** Whether every old value is still there, in the same order: then new ones are added in place. */
const valuesKept = (old: EnumModel, type: EnumModel): boolean =>
  old.values.every((v) => type.values.includes(v)) && type.values.filter((v) => old.values.includes(v)).every((v, i) => v === old.values[i])

function createEnum(type: EnumModel): string {
  return `create type ${type.name} as enum (${type.values.map(literal).join(', ')})`
}

function createTable(table: TableModel): string {
  const lines = table.columns.map(columnSql)
  lines.push(`constraint ${quoteIdent(table.primaryKey.name)} primary key (${table.primaryKey.columns.map(quoteIdent).join(', ')})`)
  for (const unique of table.uniques) lines.push(`constraint ${quoteIdent(unique.name)} unique (${unique.columns.map(quoteIdent).join(', ')})`)
  for (const check of table.checks) lines.push(`constraint ${quoteIdent(check.name)} check (${check.sql})`)
  return `create table ${table.name} (\n  ${lines.join(',\n  ')}\n)`
}

function columnSql(column: ColumnModel): string {
  let sql = `${quoteIdent(column.name)} ${column.type}`
  if (column.notNull) sql += ' not null'
  if (column.default !== undefined) sql += ` default ${column.default}`
  if (column.identity) sql += ' generated by default as identity'
  if (column.generated !== undefined) sql += ` generated always as (${column.generated}) stored`
  return sql
}

function createIndex(table: string, index: IndexModel): string {
  return `create ${index.unique ? 'unique ' : ''}index ${quoteIdent(index.name)} on ${table} (${index.columns.map(quoteIdent).join(', ')})${index.where === undefined ? '' : ` where ${index.where}`}`
}

function references(fk: ForeignKeyModel): string {
  let sql = `references ${fk.target} (${quoteIdent(fk.targetColumn)})`
  if (fk.onDelete) sql += ` on delete ${fk.onDelete}`
  if (fk.deferrable) sql += ' deferrable initially deferred'
  return sql
}

const find = <T extends { readonly name: string }>(list: readonly T[], name: string): T | undefined => list.find((x) => x.name === name)
const sameColumns = (a: readonly string[], b: readonly string[] | undefined): boolean => b !== undefined && a.length === b.length && a.every((c, i) => c === b[i])
const sameIndex = (a: IndexModel, b: IndexModel | undefined): boolean => b !== undefined && sameColumns(a.columns, b.columns) && !a.unique === !b.unique && a.where === b.where
function sameForeignKey(a: ForeignKeyModel | undefined, b: ForeignKeyModel | undefined, renamedTo: (name: string) => string): boolean {
  return a !== undefined && b !== undefined && a.column === b.column && renamedTo(a.target) === b.target && a.targetColumn === b.targetColumn && a.onDelete === b.onDelete && !a.deferrable === !b.deferrable
}

/** An index is dropped by its name in its table's schema. */
function qualified(table: string, name: string): string {
  const parts = unquoteIdents(table)
  return [...parts.slice(0, -1), name].map(quoteIdent).join('.')
}

/** `"billing"."invoice"` → `invoice`, for `rename to` (which keeps the schema). */
const bareName = (table: string): string => unquoteIdents(table).pop()!

const literal = (value: string): string => `'${value.replace(/'/g, "''")}'`
