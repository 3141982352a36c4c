import * as types from './column-types.js'
import { declaredType, type ColumnType, type CustomTypeSpec } from './column-types.js'
import { compareDecimals, decimalParts } from './decimals.js'
import { quoteIdent } from './quote.js'
import type { ArrayOps, EqualityOps, JsonOps, OrderedOps, TextOps } from './operators.js'
import type { ColumnSpec, DefaultSpec, GeneratedSpec, IdSpec, IdStrategy, ManyToManySpec, ManyToOneSpec, OnDelete, OneToManySpec, PropSpec, Rule, ServerDefaultSpec } from './specs.js'

export type { ColumnSpec, DefaultSpec, GeneratedSpec, IdSpec, IdStrategy, ManyToManySpec, ManyToOneSpec, OnDelete, OneToManySpec, PropSpec, Rule, ServerDefaultSpec } from './specs.js'

/**
 * Property builders. Each is an immutable value whose type parameters carry what the entity type
 * needs (TS type, nullability, whether create() may omit it); `spec` carries what the runtime needs.
 */


/**
 * A column property. `C` marks the number columns (integer, bigint, numeric) that `em.increment`
 * can add to; types tell them apart from other columns of the same JS type (numeric from text).
 * `O` is the operators `where` offers on it (operators.ts); unknown means the ordered ones.
 */
export class Column<T, N extends boolean = false, D extends boolean = false, C extends boolean = false, O = unknown> {
  declare readonly _value: T
  declare readonly _nullable: N
  declare readonly _hasDefault: D
  declare readonly _counter: C
  declare readonly _operators: O
  constructor(readonly spec: ColumnSpec) {}

  nullable(): Column<T, true, D, C, O> {
    return new Column({ ...this.spec, nullable: true })
  }

  /** A client-side default: applied by `em.create`, and written into emitted DDL when it is a literal. */
  default(value: T | (() => T)): Column<T, N, true, C, O> {
    serverValued(this.spec, '.default()')
    // An object default (a JSON document, a Date) is copied for each entity: sharing one would let
    // a change made in place to one entity's value show in every other's.
    const make = typeof value === 'function' ? (value as () => T) : typeof value === 'object' && value !== null ? () => structuredClone(value) : () => value
    const sql = typeof value === 'function' ? undefined : literal(this.spec.type, value)
    return new Column({ ...this.spec, default: { make, sql } })
  }

  unique(): Column<T, N, D, C, O> {
    return new Column({ ...this.spec, unique: true })
  }

  /**
   * The database has a default for the column (`sql`, e.g. `'now()'`, is what createTablesSql
   * writes): `create` may leave it unset, the INSERT then omits it and reads the row's value back
   * in the same pipeline. Reading it before the flush throws.
   */
  serverDefault(sql?: string): Column<T, N, true, C, O> {
    serverValued(this.spec, '.serverDefault()')
    if (this.spec.default !== undefined) throw new TypeError('.serverDefault() on a column with a .default(): choose one')
    if (sql !== undefined && (typeof sql !== 'string' || sql.trim() === '')) throw new TypeError(`.serverDefault() takes an SQL expression, got ${JSON.stringify(sql)}`)
    return new Column({ ...this.spec, serverDefault: { sql } })
  }

  /**
   * A stored generated column, `generated always as (sql) stored`: never written by Flushwave,
   * read back by every INSERT and UPDATE of its row; `create` and assignments refuse it.
   */
  generated(sql: string): Generated<T, N, O> {
    serverValued(this.spec, '.generated()')
    if (this.spec.default !== undefined) throw new TypeError('.generated() on a column with a .default(): a generated column has no default')
    if (typeof sql !== 'string' || sql.trim() === '') throw new TypeError(`.generated() takes an SQL expression, got ${JSON.stringify(sql)}`)
    return new Generated({ ...this.spec, generated: { sql } })
  }

  /** Database column name, when it is not the snake_case of the property. */
  column(name: string): Column<T, N, D, C, O> {
    return new Column({ ...this.spec, column: name })
  }

  /** An index on this column alone (`entity(…, { indexes })` for several columns, unique or partial ones). */
  index(): this {
    return new (this.constructor as new (spec: ColumnSpec) => this)({ ...this.spec, index: true })
  }

  /**
   * A CHECK constraint on the column, enforced by the server: `t.integer().checkSql('quantity
   * between 1 and 100')`. Named `<table>_<column>_check`, as PostgreSQL names a column's check.
   * Unlike `.check(rule)`, nothing is checked before sending: a violation fails the flush with
   * CheckViolationError.
   */
  checkSql(sql: string): this {
    if (typeof sql !== 'string' || sql.trim() === '') throw new TypeError(`.checkSql() takes an SQL condition, got ${JSON.stringify(sql)}`)
    return new (this.constructor as new (spec: ColumnSpec) => this)({ ...this.spec, checkSql: sql })
  }

  /** A validation rule (null values skip it): return a message when the value is not acceptable. */
  check(rule: (value: T) => string | undefined): this {
    return new (this.constructor as new (spec: ColumnSpec) => this)({ ...this.spec, rules: [...this.spec.rules, rule as Rule] })
  }

  /** Length bounds for text, in characters (code points). */
  length(bounds: { min?: number; max?: number }): this {
    return this.check((value) => {
      const n = [...String(value)].length
      if (bounds.min !== undefined && n < bounds.min) return `must be at least ${bounds.min} characters long`
      if (bounds.max !== undefined && n > bounds.max) return `must be at most ${bounds.max} characters long`
      return undefined
    })
  }

  /** Bounds for numbers (also bigint and decimal strings, compared exactly). */
  range(bounds: { min?: number | bigint; max?: number | bigint }): this {
    return this.check((value) => {
      // Number('5.0000000000000000001') is 5: a decimal string is compared digit by digit instead.
      const decimal = typeof value === 'string' ? decimalParts(value) : undefined
      const v = typeof value === 'bigint' ? value : Number(value)
      const compare = (bound: number | bigint): number => {
        const b = decimal && decimalParts(String(bound))
        return b ? compareDecimals(decimal, b) : v < bound ? -1 : v > bound ? 1 : 0
      }
      if (bounds.min !== undefined && compare(bounds.min) < 0) return `must be at least ${bounds.min}`
      if (bounds.max !== undefined && compare(bounds.max) > 0) return `must be at most ${bounds.max}`
      return undefined
    })
  }
}

/** A generated column (see Column.generated): read-only in the entity type, and not a property of `create`. */
export class Generated<T, N extends boolean = false, O = unknown> extends Column<T, N, true, false, O> {
  declare readonly _generated: true
  override nullable(): Generated<T, true, O> {
    return new Generated({ ...this.spec, nullable: true })
  }
  override column(name: string): Generated<T, N, O> {
    return new Generated({ ...this.spec, column: name })
  }
  override unique(): Generated<T, N, O> {
    return new Generated({ ...this.spec, unique: true })
  }
}

/** A column is server-valued once at most, and never the version. */
function serverValued(spec: ColumnSpec, modifier: string): void {
  if (spec.version) throw new TypeError(`t.version() cannot take ${modifier}: flushes write the version`)
  if (spec.serverDefault) throw new TypeError(`${modifier} on a column with a .serverDefault(): choose one`)
  if (spec.generated) throw new TypeError(`${modifier} on a .generated() column: it has no other value`)
}

export class Timestamp<N extends boolean = false, D extends boolean = false> extends Column<Date, N, D> {
  /**
   * Defaults to the client's clock at create time, and to `now()` in emitted DDL (for a timestamp
   * without time zone, now in UTC: its Date's UTC fields are the stored wall clock).
   */
  defaultNow(): Column<Date, N, true> {
    serverValued(this.spec, '.defaultNow()')
    const sql = this.spec.type.sqlType === 'timestamp' ? "(now() at time zone 'utc')" : 'now()'
    return new Column({ ...this.spec, default: { make: () => new Date(), sql, clock: true } })
  }
}

export class Id<T, S extends IdStrategy> {
  declare readonly _value: T
  declare readonly _strategy: S
  constructor(readonly spec: IdSpec) {}
  column(name: string): Id<T, S> {
    return new Id({ ...this.spec, column: name })
  }
}

export class ManyToOne<Target extends string, N extends boolean = false, Deferred extends boolean = false> {
  declare readonly _target: Target
  declare readonly _nullable: N
  declare readonly _deferred: Deferred
  constructor(readonly spec: ManyToOneSpec) {}
  nullable(): ManyToOne<Target, true, Deferred> {
    return new ManyToOne({ ...this.spec, nullable: true })
  }
  column(name: string): ManyToOne<Target, N, Deferred> {
    return new ManyToOne({ ...this.spec, column: name })
  }
  /** The FK's ON DELETE action in emitted DDL. */
  onDelete(action: OnDelete): ManyToOne<Target, N, Deferred> {
    return new ManyToOne({ ...this.spec, onDelete: action })
  }
  /**
   * The foreign key is DEFERRABLE INITIALLY DEFERRED (checked at COMMIT): the way to declare a
   * cycle of non-null references. The database's constraint must say so too (emitted DDL does).
   * `create` may then leave it out, as long as it is set before the flush.
   */
  deferrable(): ManyToOne<Target, N, true> {
    return new ManyToOne({ ...this.spec, deferrable: true })
  }
}

export class OneToMany<Target extends string, Inverse extends string> {
  declare readonly _target: Target
  declare readonly _inverse: Inverse
  constructor(readonly spec: OneToManySpec) {}
}

export class ManyToMany<Target extends string> {
  declare readonly _target: Target
  constructor(readonly spec: ManyToManySpec) {}
}

export type AnyProp =
  | Column<unknown, boolean, boolean, boolean, unknown>
  | Id<unknown, IdStrategy>
  | ManyToOne<string, boolean, boolean>
  | OneToMany<string, string>
  | ManyToMany<string>

function column<T, C extends boolean = false, O = unknown>(type: ColumnType<T>, enumValues?: readonly string[]): Column<T, false, false, C, O> {
  return new Column({
    kind: 'column',
    type: type as ColumnType<unknown>,
    nullable: false,
    default: undefined,
    unique: false,
    column: undefined,
    enumValues,
    version: false,
    rules: [],
    serverDefault: undefined,
    generated: undefined,
  })
}

function literal<T>(type: ColumnType<T>, value: T): string | undefined {
  if (value === null) return 'NULL'
  return `'${type.toText(value).replace(/'/g, "''")}'::${declaredType(type as ColumnType<unknown>)}`
}

/** The TypeScript value of an array property: its element's, with null when the element is `.nullable()`. */
type ElementsOf<E, N extends boolean> = N extends true ? (E | null)[] : E[]

/** The `where` operators of a custom type, by the kind it declares. */
type CustomOps<T, K> = K extends 'text' ? TextOps : K extends 'ordered' ? OrderedOps<T> : EqualityOps<T>

/**
 * Column types a key (or a part of a composite key) the application provides can have: compared
 * exactly by their text, never changed in place. Not citext: the identity map and loads by id
 * match keys exactly, the server ignoring case.
 */
export const KEY_COLUMN_TYPES: readonly string[] = ['int2', 'int4', 'int8', 'text', 'varchar', 'bpchar', 'uuid']

/** The column types each kind of id takes. */
const KEY_TYPES: Readonly<Record<IdStrategy, readonly string[]>> = {
  sequence: ['int2', 'int4'],
  provided: KEY_COLUMN_TYPES,
  uuid: ['uuid'],
}

/** The column type of an id given as a column builder (`t.id(t.integer())`), checked; undefined for the default. */
function idType(column: Column<unknown, boolean, boolean, boolean, unknown> | undefined, strategy: IdStrategy): ColumnType<unknown> | undefined {
  if (column === undefined) return undefined
  const { type, nullable } = column.spec
  if (column.spec.serverDefault || column.spec.generated) throw new TypeError(`${strategy === 'sequence' ? 't.id()' : 't.providedId()'} takes a plain column type: an id has no .serverDefault() or .generated()`)
  if (nullable || !KEY_TYPES[strategy].includes(type.sqlType)) {
    throw new TypeError(`${strategy === 'sequence' ? 't.id()' : 't.providedId()'} takes ${KEY_TYPES[strategy].join(', ')} (not nullable), not ${declaredType(type)}${nullable ? ' nullable' : ''}`)
  }
  return type
}

/** The property builders: `t.text()`, `t.manyToOne('Author')`, … */
export const t = {
  /**
   * A primary key whose values come from its sequence (identity or serial), allocated in blocks
   * before the flush: int8 by default, `t.id(t.integer())` for an int4 (`serial`) key.
   */
  id: (type?: Column<number, false, false, true, unknown>): Id<number, 'sequence'> =>
    new Id({ kind: 'id', type: idType(type, 'sequence') ?? (types.serialId as ColumnType<unknown>), strategy: 'sequence', column: undefined }),
  /**
   * A primary key the application provides to `create` (no sequence, no allocation): int8 by
   * default; an integer, text, varchar, char or uuid column type for natural keys, e.g.
   * `t.providedId(t.varchar(20))` or `t.providedId(t.integer())`.
   */
  providedId: <T extends number | string | bigint = number>(type?: Column<T, false, false, boolean, unknown>): Id<T, 'provided'> =>
    new Id({ kind: 'id', type: idType(type, 'provided') ?? (types.serialId as ColumnType<unknown>), strategy: 'provided', column: undefined }),
  /** uuid primary key made on the client (UUID v7) when the entity is created; `create` may pass one. */
  uuidId: (): Id<string, 'uuid'> =>
    new Id({ kind: 'id', type: types.uuid as ColumnType<unknown>, strategy: 'uuid', column: undefined }),
  text: (): Column<string, false, false, false, TextOps> => column(types.text),
  integer: (): Column<number, false, false, true> => column(types.integer),
  bigint: (): Column<bigint, false, false, true> => column(types.bigint),
  numeric: (): Column<string, false, false, true> => column(types.numeric),
  boolean: (): Column<boolean, false, false, false, EqualityOps<boolean>> => column(types.boolean),
  timestamptz: (): Timestamp => new Timestamp(column(types.timestamptz).spec),
  jsonb: <T = unknown>(): Column<T, false, false, false, JsonOps<T>> => column(types.jsonb<T>()),
  uuid: (): Column<string> => column(types.uuid),
  /** int2: an integer from -32768 to 32767. */
  smallint: (): Column<number, false, false, true> => column(types.smallint),
  /** float8: any JS number, NaN, ±Infinity and -0 included, exactly. */
  double: (): Column<number> => column(types.double),
  /** float4: a number that float4 keeps as it is (0.1, 21.5); one it would change is refused. */
  real: (): Column<number> => column(types.real),
  /** A calendar date as `'YYYY-MM-DD'` text: no time zone can move it. */
  date: (): Column<string> => column(types.date),
  /** A time of day as `'HH:MM:SS[.ffffff]'` text. */
  time: (): Column<string> => column(types.time),
  /** timestamp without time zone, as a Date whose UTC fields are the stored wall clock. */
  timestamp: (): Timestamp => new Timestamp(column(types.timestamp).spec),
  /** interval, as text in PostgreSQL's syntax or ISO 8601 (read back in PostgreSQL's). */
  interval: (): Column<string> => column(types.interval),
  /** bytea, as a Uint8Array (a Buffer is one). */
  bytea: (): Column<Uint8Array, false, false, false, EqualityOps<Uint8Array>> => column(types.bytea),
  /** varchar(n): text of at most n characters, checked before sending. */
  varchar: (n: number): Column<string, false, false, false, TextOps> => column(types.varchar(n)),
  /** char(n): text of at most n characters, without trailing spaces (the server pads and drops them). */
  char: (n: number): Column<string, false, false, false, TextOps> => column(types.char(n)),
  /** citext (the extension): text compared and matched ignoring case. */
  citext: (): Column<string, false, false, false, TextOps> => column(types.citext),
  /** inet: an IPv4 or IPv6 host address, optionally with a prefix. */
  inet: (): Column<string> => column(types.inet),
  /** cidr: an IPv4 or IPv6 network. */
  cidr: (): Column<string> => column(types.cidr),
  /**
   * A one-dimensional array of the element's type: `t.array(t.text())` is `text[]` (string[]);
   * `t.array(t.integer().nullable())` allows NULL elements ((number | null)[]).
   */
  array: <E, EN extends boolean>(element: Column<E, EN, boolean, boolean, unknown>): Column<ElementsOf<E, EN>, false, false, false, ArrayOps<E>> =>
    column(types.array(element.spec.type, element.spec.nullable) as ColumnType<ElementsOf<E, EN>>, element.spec.enumValues),
  /** A type Flushwave has no builder for (ltree, PostGIS geometry as text, a domain), described by its text form. */
  custom: <T, const K extends 'equality' | 'ordered' | 'text' = 'equality'>(spec: CustomTypeSpec<T> & { readonly operators?: K }): Column<T, false, false, false, CustomOps<T, K>> =>
    column(types.custom(spec)),
  /**
   * An optimistic-lock version (int4, 1 for a new row). Every update and delete of the entity checks
   * it on the server, in the same pipeline, and advances it; a stale one fails the whole flush with
   * OptimisticLockError. Read-only for the application.
   */
  version: (): Column<number, false, true> =>
    new Column({ ...column(types.integer).spec, default: { make: () => 1, sql: '1' }, version: true }),
  /** A PostgreSQL enum type named `typeName` (in `options.schema` when given), its labels in order. */
  enum: <const V extends string>(typeName: string, values: readonly [V, ...V[]], options: { readonly schema?: string } = {}): Column<V> =>
    column(types.enumeration(options.schema === undefined ? quoteIdent(typeName) : `${quoteIdent(options.schema)}.${quoteIdent(typeName)}`, values), values),
  manyToOne: <const Target extends string>(target: Target): ManyToOne<Target> =>
    new ManyToOne({ kind: 'manyToOne', target, nullable: false, column: undefined, onDelete: undefined, deferrable: false }),
  /** The inverse side of `Target`'s many-to-one property named `inverse`; stores nothing itself. */
  oneToMany: <const Target extends string, const Inverse extends string>(
    target: Target,
    inverse: Inverse,
  ): OneToMany<Target, Inverse> => new OneToMany({ kind: 'oneToMany', target, inverse }),
  /** Links through a join table (default `<table>_<targetTable>` with `<table>_id`, `<targetTable>_id`). */
  manyToMany: <const Target extends string>(
    target: Target,
    options: { table?: string; ownColumn?: string; targetColumn?: string } = {},
  ): ManyToMany<Target> =>
    new ManyToMany({
      kind: 'manyToMany',
      target,
      table: options.table,
      ownColumn: options.ownColumn,
      targetColumn: options.targetColumn,
    }),
}
