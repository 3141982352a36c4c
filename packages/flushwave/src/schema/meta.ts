import type { ColumnType } from './column-types.js'
import type { DefaultSpec, GeneratedSpec, IdStrategy, OnDelete, Rule, ServerDefaultSpec } from './builders.js'

/** Resolved, runtime description of an entity: what the unit of work, planner and SQL renderer read. */
export interface EntityMeta {
  readonly name: string
  /** The table as messages and results name it: `invoice`, or `billing.invoice` in a schema. */
  readonly table: string
  /** The table as statements write it: `"invoice"`, `"billing"."invoice"`. */
  readonly quotedTable: string
  /** Its PostgreSQL schema, when the entity names one. */
  readonly schema: string | undefined
  /** The table's own name, without its schema. */
  readonly bareTable: string
  /**
   * The id: its own column, or for a composite primary key (`key`) a tuple of the key's values
   * (`keyTuple`), kept as a provided id is, with no column, property or SQL of its own.
   */
  readonly id: IdMeta
  /** The fields of a composite primary key, in key order; undefined for an entity with an id property. */
  readonly key: readonly FieldMeta[] | undefined
  /** Stored columns other than the id, in declaration order: scalars and many-to-one FKs. */
  readonly fields: readonly FieldMeta[]
  readonly fieldByProp: ReadonlyMap<string, FieldMeta>
  readonly oneToMany: readonly OneToManyMeta[]
  readonly manyToMany: readonly ManyToManyMeta[]
  /** The optimistic-lock version field, when the entity has one. */
  readonly version: FieldMeta | undefined
  /** The time field that marks a row soft-deleted, when the entity is (`entity(…, { softDelete })`). */
  readonly softDelete: FieldMeta | undefined
  /** Unique keys besides the id: each `.unique()` field alone, then each key over several columns. */
  readonly uniqueKeys: readonly (readonly FieldMeta[])[]
  /** Indexes the schema declares (`.index()`, `entity(…, { indexes })`); foreign keys' own are not listed. */
  readonly indexes: readonly IndexMeta[]
  /** CHECK constraints: each column's `.checkSql()`, then `entity(…, { checks })`. */
  readonly checks: readonly CheckMeta[]

  // Facts derived from the whole schema, compiled once when it is defined (see define.ts).
  /** The counter fields (`em.increment`), in `fields` order: what an UPDATE with increments reads back. */
  readonly counters: readonly FieldMeta[]
  /** References to the entity's own table, in `fields` order. */
  readonly selfReferences: readonly FieldMeta[]
  /** The self-references that cascade: deleting a row deletes the tree below it. */
  readonly treeFields: readonly FieldMeta[]
  /** Fields whose values can change in place (Dates, JSON), in `fields` order. */
  readonly mutableFields: readonly FieldMeta[]
  /**
   * Indexes in `fields` of the columns the server may fill (`.serverDefault()`, `.generated()`):
   * what an INSERT may omit and read back. Empty for most entities, which then pay nothing.
   */
  readonly serverValued: readonly number[]
  /** The `.generated()` fields, in `fields` order: what an UPDATE of the entity reads back. */
  readonly generated: readonly FieldMeta[]
  /** The properties `create()` accepts. */
  readonly creatable: ReadonlySet<string>
  /** The many-to-ones that point at this table: children first, each table's in field order. */
  readonly referrers: readonly Referrer[]
  /** The join tables this table is a side of, in the schema's link order (a self-link twice: owner, then target). */
  readonly linkSides: readonly LinkSide[]
  /** Its cycle-breaking references (`fixUp`), each with its index in `fields`. */
  readonly fixUps: readonly FixUp[]
  /** What later layers make from this metadata once and keep with it (see TableCache). */
  readonly cache: TableCache
}

/** A many-to-one of `child` that points at some table. */
export interface Referrer {
  readonly child: EntityMeta
  readonly field: FieldMeta
}

/** A join table that an entity is one side of. */
export interface LinkSide {
  readonly link: ManyToManyMeta
  readonly side: 'owner' | 'target'
}

/** A cycle-breaking reference (`fixUp`) and its index in its entity's `fields`. */
export type FixUp = readonly [FieldMeta, number]

/**
 * Made from an entity's metadata by later layers on first use, and kept with it for the life of
 * the schema: statement texts that depend on the table alone (sql/render-write.ts) and the class
 * of its entity objects (entities/entity-class.ts).
 */
export interface TableCache {
  /** Statement texts by kind (`insert-one`, `delete-one`, …). */
  readonly texts: Map<string, string>
  /** One-row update texts by set of columns. */
  readonly updateShapes: Map<string, string>
  /** Multi-row update forms seen, by their columns' modes. */
  readonly multiRowShapes: Set<string>
  /** The entity class. */
  entityClass: (new (state: never) => object) | undefined
}

export interface IndexMeta {
  /** The index's name in the database. */
  readonly name: string
  readonly fields: readonly FieldMeta[]
  readonly unique: boolean
  /** A partial index's condition, as written. */
  readonly where: string | undefined
}

export interface CheckMeta {
  readonly name: string
  /** The condition, as written. */
  readonly sql: string
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
  /** The database's default fills it when `create` leaves it unset (see Column.serverDefault). */
  readonly serverDefault: ServerDefaultSpec | undefined
  /** A stored generated column: never written, read back (see Column.generated). */
  readonly generated: GeneratedSpec | undefined
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
  /** As EntityMeta's: the join table is in its owner's schema. */
  readonly table: string
  readonly quotedTable: string
  readonly schema: string | undefined
  readonly bareTable: string
  readonly ownColumn: string
  readonly targetColumn: string
}
