import type { ColumnType } from './column-types.js'
import type { DefaultSpec, IdStrategy, OnDelete, Rule } from './builders.js'

/** Resolved, runtime description of an entity: what the unit of work, planner and SQL renderer read. */
export interface EntityMeta {
  readonly name: string
  readonly table: string
  readonly quotedTable: string
  readonly id: IdMeta
  /** Stored columns other than the id, in declaration order: scalars and many-to-one FKs. */
  readonly fields: readonly FieldMeta[]
  readonly fieldByProp: ReadonlyMap<string, FieldMeta>
  readonly oneToMany: readonly OneToManyMeta[]
  readonly manyToMany: readonly ManyToManyMeta[]
  /** The optimistic-lock version field, when the entity has one. */
  readonly version: FieldMeta | undefined
  /** Unique keys besides the id: each `.unique()` field alone, then each key over several columns. */
  readonly uniqueKeys: readonly (readonly FieldMeta[])[]
}

export interface IdMeta {
  readonly prop: string
  readonly column: string
  readonly quoted: string
  readonly type: ColumnType<unknown>
  readonly strategy: IdStrategy
}

export interface FieldMeta {
  readonly prop: string
  readonly column: string
  readonly quoted: string
  /** For a many-to-one, the target's id type. */
  readonly type: ColumnType<unknown>
  readonly nullable: boolean
  readonly default: DefaultSpec | undefined
  readonly unique: boolean
  readonly enumValues: readonly string[] | undefined
  /** Set when the field is a many-to-one foreign key. */
  readonly ref: ReferenceMeta | undefined
  /** True for the optimistic-lock version field. */
  readonly version: boolean
  /** Validation rules of the column (none for references). */
  readonly rules: readonly Rule[]
}

export interface ReferenceMeta {
  readonly target: EntityMeta
  readonly onDelete: OnDelete | undefined
  readonly deferrable: boolean
  /**
   * Set on one nullable reference of each cycle of immediate foreign keys: a row inserted with a
   * new target gets NULL here, and an UPDATE later in the same pipeline sets the reference.
   */
  readonly fixUp: boolean
}

export interface OneToManyMeta {
  readonly prop: string
  readonly target: EntityMeta
  /** The many-to-one field on `target` that this collection mirrors. */
  readonly inverse: FieldMeta
}

export interface ManyToManyMeta {
  readonly prop: string
  readonly owner: EntityMeta
  readonly target: EntityMeta
  readonly table: string
  readonly quotedTable: string
  readonly ownColumn: string
  readonly targetColumn: string
}
