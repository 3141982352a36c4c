import { quoteIdent } from '../schema/quote.js'
import { bool, checkCondition, ON_DELETE, textArray } from './rows.js'
import { arrayLiteral } from '../sql/array-literal.js'
import type { Statement } from '../sql/statement.js'
import type { ColumnModel, DbModel, ForeignKeyModel, IndexModel, TableModel } from './model.js'

/**
 * A database's tables as a DbModel (model.ts), read from its catalog: what `migrate generate`
 * compares with the model the migrations make. Names are as the model writes them (a table of the
 * default namespace unqualified, `"billing"."invoice"` otherwise); types and expressions are as the
 * server prints them (`bigint`, `'draft'::public.book_status`), which only another reading of the
 * same server compares with (migrate/drift.ts reads the model the migrations make that way too).
 * The caller sets `search_path` to `pg_catalog` for the reads, so that every type is printed with
 * its namespace.
 */

/** Which namespaces to read, and the PostgreSQL schema each stands for in the model (undefined: the default, unqualified). */
export type Namespaces = ReadonlyMap<string, string | undefined>

type Read = (statement: Statement) => Promise<readonly (readonly unknown[])[]>

const COLUMNS = `
select n.nspname, c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attidentity <> '',
       case when a.attgenerated = '' then pg_get_expr(d.adbin, d.adrelid) end, case when a.attgenerated <> '' then pg_get_expr(d.adbin, d.adrelid) end
from pg_class c
join pg_namespace n on n.oid = c.relnamespace
join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
left join pg_attrdef d on d.adrelid = c.oid and d.adnum = a.attnum
where n.nspname = any($1::text[]) and c.relkind in ('r', 'p')
order by 1, 2, a.attnum`

// Keys and checks; a foreign key's target with its namespace, and its one referenced column.
const CONSTRAINTS = `
select n.nspname, c.relname, con.contype::text, con.conname,
       array(select a.attname::text from unnest(con.conkey) with ordinality k(num, i) join pg_attribute a on a.attrelid = con.conrelid and a.attnum = k.num order by k.i),
       fn.nspname, f.relname, (select a.attname from pg_attribute a where a.attrelid = con.confrelid and a.attnum = con.confkey[1]),
       con.confdeltype::text, con.condeferrable and con.condeferred, case when con.contype = 'c' then pg_get_constraintdef(con.oid) end
from pg_constraint con
join pg_class c on c.oid = con.conrelid
join pg_namespace n on n.oid = c.relnamespace
left join pg_class f on f.oid = con.confrelid
left join pg_namespace fn on fn.oid = f.relnamespace
where n.nspname = any($1::text[]) and con.contype in ('p', 'u', 'f', 'c')
order by 1, 2, 4`

// Indexes that no constraint owns (a key's index is its constraint's).
const INDEXES = `
select n.nspname, c.relname, ic.relname,
       array(select a.attname::text from unnest(i.indkey::int2[]) with ordinality k(num, i) join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.num order by k.i),
       i.indisunique, pg_get_expr(i.indpred, i.indrelid)
from pg_index i
join pg_class c on c.oid = i.indrelid
join pg_class ic on ic.oid = i.indexrelid
join pg_namespace n on n.oid = c.relnamespace
where n.nspname = any($1::text[]) and not exists (select from pg_constraint con where con.conindid = i.indexrelid and con.conrelid = i.indrelid)
order by 1, 2, 3`

const ENUMS = `
select n.nspname, t.typname, array(select e.enumlabel::text from pg_enum e where e.enumtypid = t.oid order by e.enumsortorder)
from pg_type t join pg_namespace n on n.oid = t.typnamespace
where n.nspname = any($1::text[]) and t.typtype = 'e'
order by 1, 2`

const OTHERS = `select array(select extname::text from pg_extension order by 1), array(select nspname::text from pg_namespace where nspname = any($1::text[]) order by 1)`

/**
 * Reads the namespaces given; `text` rewrites every type and expression as it is read (a shadow
 * namespace's name into the one it stands for). Tables come in namespace then name order.
 */
export async function readModel(read: Read, namespaces: Namespaces, text: (printed: string) => string = (s) => s): Promise<DbModel> {
  const names = arrayLiteral([...namespaces.keys()])
  const [columnRows, constraintRows, indexRows, enumRows, otherRows] = await Promise.all(
    [COLUMNS, CONSTRAINTS, INDEXES, ENUMS, OTHERS].map((sql) => read({ text: sql, params: [names] })),
  )
  const others = otherRows![0]!
  const named = (space: unknown, name: unknown): string => {
    const schema = namespaces.get(String(space))
    return schema === undefined ? quoteIdent(String(name)) : `${quoteIdent(schema)}.${quoteIdent(String(name))}`
  }
  type Draft = { columns: ColumnModel[]; primaryKey: TableModel['primaryKey']; uniques: TableModel['uniques'][number][]; foreignKeys: ForeignKeyModel[]; indexes: IndexModel[]; checks: TableModel['checks'][number][] }
  const tables = new Map<string, Draft>()
  const table = (space: unknown, name: unknown): Draft => {
    const key = named(space, name)
    let draft = tables.get(key)
    if (!draft) tables.set(key, (draft = { columns: [], primaryKey: { name: '', columns: [] }, uniques: [], foreignKeys: [], indexes: [], checks: [] }))
    return draft
  }
  for (const [space, rel, name, type, notNull, identity, fallback, generated] of columnRows!) {
    table(space, rel).columns.push({
      name: String(name),
      type: text(String(type)),
      notNull: bool(notNull),
      ...(fallback !== null && fallback !== undefined && { default: text(String(fallback)) }),
      ...(bool(identity) && { identity: true as const }),
      ...(generated !== null && generated !== undefined && { generated: text(String(generated)) }),
    })
  }
  for (const [space, rel, kind, name, columns, targetSpace, target, targetColumn, onDelete, deferred, definition] of constraintRows!) {
    const t = table(space, rel)
    const cols = textArray(columns)
    if (kind === 'p') t.primaryKey = { name: String(name), columns: cols }
    else if (kind === 'u') t.uniques.push({ name: String(name), columns: cols })
    else if (kind === 'c') t.checks.push({ name: String(name), sql: text(checkCondition(String(definition))) })
    else {
      const action = ON_DELETE[String(onDelete)]
      t.foreignKeys.push({
        name: String(name),
        // A key over several columns is told apart from one over the first by its column list.
        column: cols.join(', '),
        target: named(targetSpace, target),
        targetColumn: String(targetColumn),
        ...(action !== undefined && { onDelete: action }),
        ...(bool(deferred) && { deferrable: true as const }),
      })
    }
  }
  for (const [space, rel, name, columns, unique, where] of indexRows!) {
    table(space, rel).indexes.push({ name: String(name), columns: textArray(columns), ...(bool(unique) && { unique: true as const }), ...(where !== null && where !== undefined && { where: text(String(where)) }) })
  }
  return {
    schemas: textArray(others[1]).flatMap((space) => {
      const schema = namespaces.get(space)
      return schema === undefined ? [] : [schema]
    }),
    extensions: textArray(others[0]).filter((name) => name !== 'plpgsql'),
    enums: enumRows!.map(([space, name, values]) => ({ name: named(space, name), values: textArray(values) })),
    tables: [...tables].map(([name, t]) => ({ name, ...t })),
  }
}
