import { arrayLiteral } from '../sql/array-literal.js'
import type { Statement } from '../sql/statement.js'

/** A column the schema expects: table quoted as Flushwave writes it, column as stored, SQL type as cast. */
export interface ExpectedColumn {
  readonly table: string
  readonly column: string
  readonly sqlType: string
  readonly notNull: boolean
  /** The id of a table with sequence ids: it needs an identity column or an owned sequence. */
  readonly sequence: boolean
  /** The n of a varchar(n) or char(n) column. */
  readonly length?: number | undefined
  /** Filled by the server: `.serverDefault()` needs a DEFAULT, `.generated()` a stored generated column. */
  readonly server?: 'default' | 'generated' | undefined
}

/** A foreign key the schema expects, from `table`.`column` to `target`'s primary key. */
export interface ExpectedForeignKey {
  readonly table: string
  readonly column: string
  readonly target: string
  /** Declared `.deferrable()`: the planner relies on it being checked at COMMIT. */
  readonly deferred: boolean
  /** Its ON DELETE action, as pg_constraint.confdeltype has it: `a` no action, `r` restrict, `c` cascade, `n` set null. */
  readonly onDelete: string
}

/** An index the schema declares: on these columns, in order, unique or not, partial or not. */
export interface ExpectedIndex {
  readonly table: string
  readonly name: string
  readonly columns: readonly string[]
  readonly unique: boolean
  readonly partial: boolean
}

/** A CHECK constraint the schema declares, by name. */
export interface ExpectedCheck {
  readonly table: string
  readonly name: string
}

/**
 * One row per expected column, in order: whether the table and column exist, the column's type and
 * the expected type as the server names them (to_regtype: null when that type does not exist, e.g.
 * a missing enum), NOT NULL, whether it has an identity or owned sequence, its type modifier, whether
 * it has a default (or a generation expression), and how it is generated ('s': stored). Tables resolve
 * through the search path, as the flushes' own statements do.
 */
export function renderColumnCatalog(columns: readonly ExpectedColumn[]): Statement {
  return {
    text:
      'select to_regclass(x.tbl) is not null, a.attnum is not null, a.atttypid::regtype::text, to_regtype(x.typ)::text, a.attnotnull, ' +
      "case when a.attnum is not null then a.attidentity <> '' or pg_get_serial_sequence(x.tbl, x.col) is not null end, a.atttypmod, " +
      'a.atthasdef, a.attgenerated::text ' +
      'from unnest($1::text[], $2::text[], $3::text[]) with ordinality as x(tbl, col, typ, i) ' +
      'left join pg_attribute a on a.attrelid = to_regclass(x.tbl) and a.attname = x.col and a.attnum > 0 and not a.attisdropped ' +
      'order by x.i',
    params: [arrayLiteral(columns.map((c) => c.table)), arrayLiteral(columns.map((c) => c.column)), arrayLiteral(columns.map((c) => c.sqlType))],
  }
}

/**
 * One row per expected foreign key, in order: whether a single-column foreign key from that column
 * to that table exists, and whether it is deferrable and initially deferred.
 */
export function renderForeignKeyCatalog(keys: readonly ExpectedForeignKey[]): Statement {
  return {
    text:
      "select x.i, bool_or(con.oid is not null), bool_or(con.condeferrable and con.condeferred), string_agg(con.confdeltype::text, '') " +
      'from unnest($1::text[], $2::text[], $3::text[]) with ordinality as x(tbl, col, target, i) ' +
      'left join pg_attribute a on a.attrelid = to_regclass(x.tbl) and a.attname = x.col and a.attnum > 0 and not a.attisdropped ' +
      "left join pg_constraint con on con.contype = 'f' and con.conrelid = a.attrelid and con.conkey = array[a.attnum] and con.confrelid = to_regclass(x.target) " +
      'group by x.i order by x.i',
    params: [arrayLiteral(keys.map((k) => k.table)), arrayLiteral(keys.map((k) => k.column)), arrayLiteral(keys.map((k) => k.target))],
  }
}

/**
 * One row per expected index, in order: whether the table has an index on exactly those columns in
 * that order, of that uniqueness and partial or not (whatever its name: a database made by other
 * tools names its indexes its own way).
 */
export function renderIndexCatalog(indexes: readonly ExpectedIndex[]): Statement {
  return {
    text:
      'select exists (select from pg_index i where i.indrelid = to_regclass(x.tbl) and i.indisunique = x.uniq and (i.indpred is not null) = x.partial ' +
      'and array(select a.attname::text from unnest(i.indkey::int2[]) with ordinality k(num, n) join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.num order by k.n) = x.cols::text[]) ' +
      'from unnest($1::text[], $2::text[], $3::bool[], $4::bool[]) with ordinality as x(tbl, cols, uniq, partial, i) order by x.i',
    params: [
      arrayLiteral(indexes.map((x) => x.table)),
      arrayLiteral(indexes.map((x) => arrayLiteral(x.columns))),
      `{${indexes.map((x) => (x.unique ? 't' : 'f')).join(',')}}`,
      `{${indexes.map((x) => (x.partial ? 't' : 'f')).join(',')}}`,
    ],
  }
}

/** One row per expected CHECK constraint, in order: whether the table has a check of that name. */
export function renderCheckCatalog(checks: readonly ExpectedCheck[]): Statement {
  return {
    text:
      "select exists (select from pg_constraint c where c.conrelid = to_regclass(x.tbl) and c.contype = 'c' and c.conname = x.name) " +
      'from unnest($1::text[], $2::text[]) with ordinality as x(tbl, name, i) order by x.i',
    params: [arrayLiteral(checks.map((c) => c.table)), arrayLiteral(checks.map((c) => c.name))],
  }
}
