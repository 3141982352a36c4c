import { renderCheckCatalog, renderColumnCatalog, renderForeignKeyCatalog, renderIndexCatalog, type ExpectedCheck, type ExpectedColumn, type ExpectedForeignKey, type ExpectedIndex } from './check-queries.js'
import type { Statement } from '../sql/statement.js'
import type { SchemaDifference } from '../errors.js'
import { declaredType, type ColumnType } from '../schema/column-types.js'
import type { Schema } from '../schema/define.js'
import { bool } from './rows.js'

/** Everything `orm.checkSchema()` asks the catalog about, derived from the schema alone. */
export interface Expected {
  readonly columns: readonly ExpectedColumn[]
  readonly foreignKeys: readonly ExpectedForeignKey[]
  readonly indexes: readonly ExpectedIndex[]
  readonly checks: readonly ExpectedCheck[]
}

/** pg_constraint.confdeltype of each ON DELETE action; none declared is NO ACTION. */
const DELETE_ACTION: Readonly<Record<string, string>> = { restrict: 'r', cascade: 'c', 'set null': 'n' }
const ACTION_NAME: Readonly<Record<string, string>> = { a: 'no action', r: 'restrict', c: 'cascade', n: 'set null', d: 'set default' }

/**
 * The columns and foreign keys the schema's flushes and reads rely on: every entity table's id and
 * fields, every join table's two columns, and the outcome ledger when there is one. Columns the
 * database has beyond these are the database's own business and are not reported.
 */
export function expectedTables(schema: Schema, ledgerTable: string | undefined): Expected {
  const columns: ExpectedColumn[] = []
  const foreignKeys: ExpectedForeignKey[] = []
  const indexes: ExpectedIndex[] = []
  const checks: ExpectedCheck[] = []
  const joinTables = new Set<string>()
  for (const meta of schema.insertOrder) {
    // A composite key's columns are fields.
    if (!meta.key) columns.push({ table: meta.quotedTable, column: meta.id.column, sqlType: declaredType(meta.id.type), notNull: true, sequence: meta.id.strategy === 'sequence', length: lengthOf(meta.id.type) })
    for (const f of meta.fields) {
      const server = f.generated ? 'generated' : f.serverDefault ? 'default' : undefined
      columns.push({ table: meta.quotedTable, column: f.column, sqlType: declaredType(f.type), notNull: !f.nullable, sequence: false, length: lengthOf(f.type), server })
      if (f.ref) foreignKeys.push({ table: meta.quotedTable, column: f.column, target: f.ref.target.quotedTable, deferred: f.ref.deferrable, onDelete: DELETE_ACTION[f.ref.onDelete ?? ''] ?? 'a' })
    }
    for (const index of meta.indexes) indexes.push({ table: meta.quotedTable, name: index.name, columns: index.fields.map((f) => f.column), unique: index.unique, partial: index.where !== undefined })
    for (const check of meta.checks) checks.push({ table: meta.quotedTable, name: check.name })
    for (const link of meta.manyToMany) {
      // Declared on both sides, a join table is still checked once.
      if (link.owner !== meta || joinTables.has(link.quotedTable)) continue
      joinTables.add(link.quotedTable)
      for (const [column, end] of [[link.ownColumn, link.owner], [link.targetColumn, link.target]] as const) {
        columns.push({ table: link.quotedTable, column, sqlType: declaredType(end.id.type), notNull: true, sequence: false, length: lengthOf(end.id.type) })
        foreignKeys.push({ table: link.quotedTable, column, target: end.quotedTable, deferred: false, onDelete: 'c' })
      }
    }
  }
  if (ledgerTable !== undefined) {
    for (const [column, sqlType] of [['token', 'uuid'], ['probe', 'bool'], ['at', 'timestamptz']] as const) {
      columns.push({ table: ledgerTable, column, sqlType, notNull: true, sequence: false })
    }
  }
  return { columns, foreignKeys, indexes, checks }
}

/** The n of a varchar(n) or char(n) column (or array of them): the catalog keeps it as atttypmod n + 4. */
function lengthOf(type: ColumnType<unknown>): number | undefined {
  const n = type.columnType && /^(?:varchar|char)\((\d+)\)/.exec(type.columnType)?.[1]
  return n ? Number(n) : undefined
}

/** A row of renderColumnCatalog: table exists, column exists, its type, the expected type, NOT NULL, has a sequence, atttypmod, has a default, attgenerated. */
type ColumnRow = readonly [boolean, boolean, string | null, string | null, boolean | null, boolean | null, number | string | null, boolean | string | null, string | null]
/** A row of renderForeignKeyCatalog: index, exists, deferrable initially deferred. */
type ForeignKeyRow = readonly [unknown, boolean, boolean | null, string | null]

/** Every difference the catalog's answers show, in schema order; a missing table is reported once. */
export function compareCatalog(
  expected: Expected,
  columnRows: readonly (readonly unknown[])[],
  keyRows: readonly (readonly unknown[])[],
  indexRows: readonly (readonly unknown[])[] = [],
  checkRows: readonly (readonly unknown[])[] = [],
): SchemaDifference[] {
  const out: SchemaDifference[] = []
  const missingTables = new Set<string>()
  expected.columns.forEach((want, i) => {
    const [tableExists, columnExists, type, wantedType, notNull, sequence, typmod, hasDefault, generated] = columnRows[i] as unknown as ColumnRow
    const table = unquote(want.table)
    if (!bool(tableExists)) {
      if (!missingTables.has(want.table)) out.push({ table, problem: 'table is missing' })
      missingTables.add(want.table)
      return
    }
    const at = { table, column: want.column }
    if (!bool(columnExists)) return void out.push({ ...at, problem: 'column is missing' })
    if (wantedType === null) out.push({ ...at, problem: `the schema's type ${want.sqlType} does not exist in the database (an enum not created?)` })
    else if (type !== wantedType && !(wantedType === 'text' && type === 'character varying')) {
      // A varchar column takes Flushwave's text values (an assignment cast; its length is the server's check).
      out.push({ ...at, problem: `has type ${type}; the schema says ${wantedType}` })
    } else if (want.length !== undefined && Number(typmod) - 4 !== want.length) {
      // Longer in the database: values the schema refuses could be there; shorter: the server refuses what the schema allows.
      out.push({ ...at, problem: `has ${Number(typmod) < 0 ? 'no length limit' : `length ${Number(typmod) - 4}`}; the schema says ${want.length}` })
    }
    if (want.notNull && !bool(notNull)) out.push({ ...at, problem: 'is nullable; the schema says not null' })
    if (!want.notNull && bool(notNull)) out.push({ ...at, problem: 'is NOT NULL; the schema says nullable' })
    // A generated column has a generation expression, which the catalog counts as a default.
    const stored = generated === 's'
    if (want.server === 'generated' && !stored) out.push({ ...at, problem: 'is not a stored generated column; the schema says .generated()' })
    if (want.server !== 'generated' && stored) out.push({ ...at, problem: 'is a generated column, which flushes cannot write: declare it .generated()' })
    if (want.server === 'default' && !stored && !bool(hasDefault)) out.push({ ...at, problem: 'has no default; the schema says .serverDefault()' })
    if (want.sequence && !bool(sequence)) out.push({ ...at, problem: 'has no sequence for its ids: declare it GENERATED BY DEFAULT AS IDENTITY (or serial)' })
  })
  expected.foreignKeys.forEach((want, i) => {
    if (missingTables.has(want.table)) return
    const [, exists, deferred, actions] = keyRows[i] as unknown as ForeignKeyRow
    const at = { table: unquote(want.table), column: want.column }
    if (!bool(exists)) out.push({ ...at, problem: `has no foreign key to ${unquote(want.target)}` })
    else if (want.deferred && !bool(deferred)) out.push({ ...at, problem: `its foreign key to ${unquote(want.target)} is not DEFERRABLE INITIALLY DEFERRED, as the schema declares` })
    // NO ACTION and RESTRICT refuse the same deletes (one at the end of the statement): either is fine where the schema declares none.
    else if (actions && !actions.includes(want.onDelete) && !(want.onDelete === 'a' && actions.includes('r'))) {
      out.push({ ...at, problem: `its foreign key to ${unquote(want.target)} is ON DELETE ${ACTION_NAME[actions[0]!] ?? actions}; the schema says ${ACTION_NAME[want.onDelete]}` })
    }
  })
  expected.indexes.forEach((want, i) => {
    if (missingTables.has(want.table) || bool(indexRows[i]?.[0])) return
    const kind = `${want.unique ? 'unique ' : ''}${want.partial ? 'partial ' : ''}index`
    out.push({ table: unquote(want.table), problem: `has no ${kind} on (${want.columns.join(', ')}) (the schema's ${want.name})` })
  })
  expected.checks.forEach((want, i) => {
    if (missingTables.has(want.table) || bool(checkRows[i]?.[0])) return
    out.push({ table: unquote(want.table), problem: `has no CHECK constraint ${want.name}` })
  })
  return out
}

/**
 * `orm.checkSchema()`: the catalog queries for `schema` (and the outcome ledger's table, quoted,
 * when there is one), sent together through `read`, compared.
 */
export async function checkSchemaWith(schema: Schema, ledgerTable: string | undefined, read: (statement: Statement) => Promise<readonly (readonly unknown[])[]>): Promise<SchemaDifference[]> {
  const expected = expectedTables(schema, ledgerTable)
  const [columns, keys, indexes, checks] = await Promise.all([
    read(renderColumnCatalog(expected.columns)),
    read(renderForeignKeyCatalog(expected.foreignKeys)),
    expected.indexes.length > 0 ? read(renderIndexCatalog(expected.indexes)) : [],
    expected.checks.length > 0 ? read(renderCheckCatalog(expected.checks)) : [],
  ])
  return compareCatalog(expected, columns, keys, indexes, checks)
}

/** `"book"` → `book`, `"billing"."invoice"` → `billing.invoice`, for messages. */
const unquote = (quoted: string): string => (quoted.startsWith('"') ? [...quoted.matchAll(/"((?:[^"]|"")*)"/g)].map((m) => m[1]!.replace(/""/g, '"')).join('.') : quoted)
