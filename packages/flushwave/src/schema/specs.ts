import type { ColumnType } from './column-types.js'

/** What the runtime needs of each property, as its builder (builders.ts) carries it in `spec`. */

export interface DefaultSpec {
  /** Value for a new entity, computed when it is created so the object shows it before the flush. */
  readonly make: () => unknown
  /** DEFAULT clause for emitted DDL, when the default can be written in SQL. */
  readonly sql: string | undefined
  /**
   * The client's clock at create (`defaultNow()`): a new entity holds just the time, in ms, and
   * makes the Date when it is first read (see EntityState.values).
   */
  readonly clock?: true
}

export interface ColumnSpec {
  readonly kind: 'column'
  readonly type: ColumnType<unknown>
  readonly nullable: boolean
  readonly default: DefaultSpec | undefined
  readonly unique: boolean
  readonly column: string | undefined
  /** Set for enum columns so DDL can create the type. */
  readonly enumValues: readonly string[] | undefined
  /** The optimistic-lock version column: checked and advanced by every update and delete. */
  readonly version: boolean
  /** Validation rules, checked before every flush that writes the field: a message when broken. */
  readonly rules: readonly Rule[]
  /** `.serverDefault(sql)`: the database fills the column when `create` leaves it unset (read back by the INSERT). */
  readonly serverDefault: ServerDefaultSpec | undefined
  /** `.generated(sql)`: `generated always as (sql) stored`, never written, read back after every write. */
  readonly generated: GeneratedSpec | undefined
  /** `.index()`: an index on the column alone. */
  readonly index?: boolean
  /** `.checkSql(sql)`: a CHECK constraint on the column, the server's to enforce. */
  readonly checkSql?: string | undefined
}

export interface ServerDefaultSpec {
  /** The DEFAULT clause for emitted DDL (`now()`), when given. */
  readonly sql: string | undefined
}

export interface GeneratedSpec {
  /** The expression of `generated always as (…) stored`. */
  readonly sql: string
}

/** A validation rule: undefined when the value is fine, else what is wrong with it. */
export type Rule = (value: never) => string | undefined

export type IdStrategy = 'sequence' | 'uuid' | 'provided'

export interface IdSpec {
  readonly kind: 'id'
  readonly type: ColumnType<unknown>
  readonly strategy: IdStrategy
  readonly column: string | undefined
}

export type OnDelete = 'restrict' | 'cascade' | 'set null'

export interface ManyToOneSpec {
  readonly kind: 'manyToOne'
  readonly target: string
  readonly nullable: boolean
  readonly column: string | undefined
  readonly onDelete: OnDelete | undefined
  /** DEFERRABLE INITIALLY DEFERRED: checked at COMMIT, so insert order does not matter for it. */
  readonly deferrable: boolean
}

export interface OneToManySpec {
  readonly kind: 'oneToMany'
  readonly target: string
  readonly inverse: string
}

export interface ManyToManySpec {
  readonly kind: 'manyToMany'
  readonly target: string
  readonly table: string | undefined
  readonly ownColumn: string | undefined
  readonly targetColumn: string | undefined
}

export type PropSpec = ColumnSpec | IdSpec | ManyToOneSpec | OneToManySpec | ManyToManySpec
