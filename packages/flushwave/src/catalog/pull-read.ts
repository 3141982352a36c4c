import { arrayLiteral } from '../sql/array-literal.js'
import { bool, checkCondition, ON_DELETE, textArray } from './rows.js'

/**
 * What `flushwave pull` reads from a database's catalog: the tables of one PostgreSQL schema or
 * several, their columns (with the element type of array columns), keys and foreign keys (to tables
 * of any schema), and the labels and schemas of the enum types they use. Two queries, no writes;
 * the result is plain data for pull-generate.ts.
 */

export interface CatalogColumn {
  readonly name: string
  /** format_type() of the column: `integer`, `character varying(200)`, `text[]`, `USER-DEFINED` never. */
  readonly type: string
  /** pg_type.typname (`int4`, `text`, `book_status`, `_text` for arrays). */
  readonly typeName: string
  /** For an array column, its element type's typname (`text`, `varchar`, `book_status`); else undefined. */
  readonly elementTypeName: string | undefined
  /**
   * atttypmod, -1 when the type has no modifier: a varchar(n) or char(n) column (or an array of
   * them) has n + 4, a numeric(p, s), time(p) or timestamp(p) its precision in the type's encoding.
   */
  readonly typmod: number
  /** attndims: the dimensions an array column was declared with (PostgreSQL does not enforce them); 0 otherwise. */
  readonly dimensions: number
  readonly notNull: boolean
  /** An identity column or one with an owned sequence (serial). */
  readonly sequence: boolean
  /** An identity column declared GENERATED ALWAYS, into which an insert cannot give a value. */
  readonly identityAlways: boolean
  /** pg_get_expr of the default, when there is one; of the generation expression for a generated column. */
  readonly default: string | undefined
  /** A stored generated column (`generated always as (…) stored`): `default` is its expression. */
  readonly generated: boolean
  /** Labels in order when the column's type, or an array column's element type, is an enum. */
  readonly enumValues: readonly string[] | undefined
  /** The PostgreSQL schema of that enum type; undefined when the column is not of an enum. */
  readonly enumSchema: string | undefined
}

export interface CatalogForeignKey {
  readonly column: string
  /** The referenced table, without its schema. */
  readonly target: string
  /** The referenced table's PostgreSQL schema: one of those read, or any other. */
  readonly targetSchema: string
  readonly onDelete: 'cascade' | 'set null' | 'restrict' | undefined
  readonly deferred: boolean
}

export interface CatalogTable {
  /** The PostgreSQL schema the table is in. */
  readonly schema: string
  /** The table's name, without its schema. */
  readonly name: string
  readonly columns: readonly CatalogColumn[]
  readonly primaryKey: readonly string[]
  /** Columns with a single-column unique constraint or unique index. */
  readonly unique: ReadonlySet<string>
  /** Unique constraints and indexes over several columns, each once. */
  readonly uniqueKeys: readonly (readonly string[])[]
  /** Single-column foreign keys (multi-column ones are listed as unsupported). */
  readonly foreignKeys: readonly CatalogForeignKey[]
  /** Multi-column foreign keys, by their columns, for the unsupported list. */
  readonly compositeForeignKeys: readonly string[]
  /** Indexes that back no constraint, over columns (not expressions): non-unique ones, and partial unique ones. */
  readonly indexes?: readonly CatalogIndex[]
  /** Indexes over expressions, by name, for the unsupported list. */
  readonly expressionIndexes?: readonly string[]
  /** CHECK constraints: name, the columns they read, and the condition as the server writes it. */
  readonly checks?: readonly { readonly name: string; readonly columns: readonly string[]; readonly sql: string }[]
}

export interface CatalogIndex {
  readonly name: string
  readonly columns: readonly string[]
  readonly unique: boolean
  /** A partial index's condition, as the server writes it. */
  readonly where: string | undefined
}

/** Runs one statement with text parameters and returns rows as arrays. */
export type CatalogQuery = (text: string, params: readonly string[]) => Promise<unknown[][]>

// $1 is the schemas to read, in order: tables come in that order of their schemas, then by name.
const COLUMNS = `
select n.nspname, c.relname, a.attname, format_type(a.atttypid, a.atttypmod), t.typname, a.attnotnull,
       a.attidentity <> '' or pg_get_serial_sequence(quote_ident(n.nspname) || '.' || quote_ident(c.relname), a.attname) is not null,
       pg_get_expr(d.adbin, d.adrelid),
       (select array_agg(l.enumlabel::text order by l.enumsortorder) from pg_enum l where l.enumtypid = coalesce(e.oid, t.oid)),
       e.typname, a.atttypmod, a.attndims, a.attidentity = 'a',
       (select tn.nspname from pg_namespace tn where tn.oid = coalesce(e.typnamespace, t.typnamespace)),
       a.attgenerated = 's'
from pg_class c
join pg_namespace n on n.oid = c.relnamespace
join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
join pg_type t on t.oid = a.atttypid
-- The element type of a true array type only (whose element's array type it is): not of int2vector or point.
left join pg_type e on e.oid = t.typelem and e.typarray = t.oid
left join pg_attrdef d on d.adrelid = c.oid and d.adnum = a.attnum
where n.nspname = any($1::text[]) and c.relkind in ('r', 'p')
order by array_position($1::text[], n.nspname::text), c.relname, a.attnum`

const CONSTRAINTS = `
select n.nspname, c.relname, con.contype, array(select a.attname::text from unnest(con.conkey) with ordinality k(num, i) join pg_attribute a on a.attrelid = con.conrelid and a.attnum = k.num order by k.i),
       f.relname, con.confdeltype, con.condeferrable and con.condeferred, fn.nspname
from pg_constraint con
join pg_class c on c.oid = con.conrelid
join pg_namespace n on n.oid = c.relnamespace
left join pg_class f on f.oid = con.confrelid
left join pg_namespace fn on fn.oid = f.relnamespace
where n.nspname = any($1::text[]) and con.contype in ('p', 'u', 'f')
union all
select n.nspname, c.relname, 'u', array(select a.attname::text from unnest(i.indkey::int2[]) with ordinality k(num, i) join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.num order by k.i), null, null, null, null
from pg_index i
join pg_class c on c.oid = i.indrelid
join pg_namespace n on n.oid = c.relnamespace
where n.nspname = any($1::text[]) and i.indisunique and not i.indisprimary and i.indpred is null and i.indexprs is null
order by 1, 2`

// Indexes that no constraint owns (a unique key's and the primary key's are read above), and checks.
const INDEXES_AND_CHECKS = `
select n.nspname, c.relname, 'i', ic.relname, array(select a.attname::text from unnest(i.indkey::int2[]) with ordinality k(num, i) join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.num order by k.i),
       i.indisunique, pg_get_expr(i.indpred, i.indrelid), i.indexprs is not null
from pg_index i
join pg_class c on c.oid = i.indrelid
join pg_class ic on ic.oid = i.indexrelid
join pg_namespace n on n.oid = c.relnamespace
where n.nspname = any($1::text[]) and not i.indisprimary and not exists (select from pg_constraint con where con.conindid = i.indexrelid)
  and (not i.indisunique or i.indpred is not null or i.indexprs is not null)
union all
select n.nspname, c.relname, 'c', con.conname, array(select a.attname::text from unnest(con.conkey) with ordinality k(num, i) join pg_attribute a on a.attrelid = con.conrelid and a.attnum = k.num order by k.i),
       null, pg_get_constraintdef(con.oid), null
from pg_constraint con
join pg_class c on c.oid = con.conrelid
join pg_namespace n on n.oid = c.relnamespace
where n.nspname = any($1::text[]) and con.contype = 'c'
order by 1, 2, 4`

/**
 * Reads the tables of a PostgreSQL schema (default `public`), or of several: `['public', 'billing']`.
 * Tables come in the order of their schemas as given, then by name.
 */
export async function readCatalog(query: CatalogQuery, schemas: string | readonly string[] = 'public'): Promise<CatalogTable[]> {
  const names = arrayLiteral(typeof schemas === 'string' ? [schemas] : schemas)
  const [columnRows, constraintRows, extraRows] = await Promise.all([query(COLUMNS, [names]), query(CONSTRAINTS, [names]), query(INDEXES_AND_CHECKS, [names])])
  type Draft = {
    schema: string
    name: string
    columns: CatalogColumn[]
    primaryKey: string[]
    unique: Set<string>
    keys: Map<string, string[]>
    foreignKeys: CatalogForeignKey[]
    composite: string[]
    indexes: CatalogIndex[]
    expressionIndexes: string[]
    checks: { name: string; columns: string[]; sql: string }[]
  }
  const tables = new Map<string, Draft>()
  const table = (schema: unknown, name: unknown) => {
    const key = `${String(schema)}\0${String(name)}`
    let t = tables.get(key)
    if (!t) tables.set(key, (t = { schema: String(schema), name: String(name), columns: [], primaryKey: [], unique: new Set(), keys: new Map(), foreignKeys: [], composite: [], indexes: [], expressionIndexes: [], checks: [] }))
    return t
  }
  for (const [nspname, relname, name, type, typeName, notNull, sequence, def, labels, elementTypeName, typmod, dimensions, always, typeSchema, generated] of columnRows) {
    const enumValues = labels === null || labels === undefined ? undefined : textArray(labels)
    table(nspname, relname).columns.push({
      name: String(name),
      type: String(type),
      typeName: String(typeName),
      elementTypeName: elementTypeName === null || elementTypeName === undefined ? undefined : String(elementTypeName),
      typmod: Number(typmod),
      dimensions: Number(dimensions),
      notNull: bool(notNull),
      sequence: bool(sequence),
      identityAlways: bool(always),
      default: def === null || def === undefined ? undefined : String(def),
      generated: bool(generated),
      enumValues,
      enumSchema: enumValues === undefined ? undefined : String(typeSchema),
    })
  }
  for (const [nspname, relname, kind, columns, target, deleteAction, deferred, targetSchema] of constraintRows) {
    const t = table(nspname, relname)
    const cols = textArray(columns)
    if (kind === 'p') t.primaryKey.push(...cols)
    else if (kind === 'u' && cols.length === 1) t.unique.add(cols[0]!)
    // A unique constraint comes with its index: one key for both.
    else if (kind === 'u') t.keys.set([...cols].sort().join(','), cols)
    else if (kind === 'f' && cols.length === 1) {
      t.foreignKeys.push({ column: cols[0]!, target: String(target), targetSchema: String(targetSchema), onDelete: ON_DELETE[String(deleteAction)], deferred: bool(deferred) })
    } else if (kind === 'f') t.composite.push(cols.join(', '))
  }
  for (const [nspname, relname, kind, name, columns, unique, text, expressions] of extraRows) {
    const t = tables.get(`${String(nspname)}\0${String(relname)}`)
    if (t === undefined) continue
    if (kind === 'c') t.checks.push({ name: String(name), columns: textArray(columns), sql: checkCondition(String(text)) })
    else if (bool(expressions)) t.expressionIndexes.push(String(name))
    else t.indexes.push({ name: String(name), columns: textArray(columns), unique: bool(unique), where: text === null || text === undefined ? undefined : String(text) })
  }
  return [...tables.values()].map((t) => ({
    schema: t.schema,
    name: t.name,
    columns: t.columns,
    primaryKey: t.primaryKey,
    unique: t.unique,
    uniqueKeys: [...t.keys.values()],
    foreignKeys: t.foreignKeys,
    compositeForeignKeys: t.composite,
    indexes: t.indexes,
    expressionIndexes: t.expressionIndexes,
    checks: t.checks,
  }))
}
