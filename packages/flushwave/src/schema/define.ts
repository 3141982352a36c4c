import { SchemaError } from '../errors.js'
import { quoteIdent } from './quote.js'
import type { AnyProp, Column, ColumnSpec, IdSpec, ManyToManySpec, ManyToOne, ManyToOneSpec, OneToManySpec } from './builders.js'
import type { CheckMeta, EntityMeta, FieldMeta, IdMeta, IndexMeta, ManyToManyMeta, OneToManyMeta } from './meta.js'
import { snakeCase } from './naming.js'
import { tableOrder } from './table-order.js'
import { deriveFacts, type SchemaFacts } from './derive.js'
import { keyTupleType, type ColumnType } from './column-types.js'
import { checksOf, indexesOf, primaryKey, softDeleteField, uniqueKeys, type IndexDef } from './table-keys.js'

export type { IndexDef } from './table-keys.js'

export interface EntityDef<P extends Record<string, AnyProp> = Record<string, AnyProp>, K extends string = string> {
  readonly table: string
  /** The PostgreSQL schema (namespace) of its table; unset: the connection's search path finds it. */
  readonly schema?: string | undefined
  readonly props: P
  /** Unique keys over several columns (a single column's is `.unique()`), by property name. */
  readonly unique: readonly (readonly string[])[]
  /** The nullable timestamp property that marks a row deleted (`em.remove` sets it), when soft-deleted. */
  readonly softDelete?: string | undefined
  /** The properties of a composite primary key (`entity(…, { primaryKey })`), when it has one. */
  readonly primaryKey?: readonly K[] | undefined
  /** Indexes over several columns, unique or partial ones (`entity(…, { indexes })`). */
  readonly indexes?: readonly IndexDef<string>[] | undefined
  /** CHECK constraints by name (`entity(…, { checks })`). */
  readonly checks?: Readonly<Record<string, string>> | undefined
}

export type SchemaDefs = Record<string, EntityDef>

/** The properties a unique key may name: columns and many-to-one references. */
type KeyProp<P> = { [F in keyof P]: P[F] extends Column<unknown, boolean, boolean, boolean, unknown> | ManyToOne<string, boolean, boolean> ? F : never }[keyof P] & string

export interface EntityOptions<P, K extends string = never> {
  /** Unique keys over several columns: `unique: [['order', 'sku']]` is `unique (order_id, sku)`. */
  readonly unique?: readonly (readonly KeyProp<P>[])[]
  /**
   * The PostgreSQL schema (namespace) the table is in: `{ schema: 'billing' }` is
   * `"billing"."invoice"` in every statement. Its many-to-many join tables go in it too.
   */
  readonly schema?: string
  /**
   * Soft delete: `em.remove` sets this nullable timestamptz (or timestamp) property to the time of
   * the flush instead of deleting the row, and reads leave such rows out unless `withDeleted`.
   */
  readonly softDelete?: TimeProp<P>
  /**
   * A primary key over several columns (or one column that is also a many-to-one), instead of an
   * id property: `primaryKey: ['student', 'course']` is `primary key (student_id, course_id)`.
   * Its properties are columns of a key type or many-to-ones, not nullable, set by `create` and
   * never changed; `em.load` and `em.ref` take `{ student, course }`.
   */
  readonly primaryKey?: readonly K[]
  /**
   * Indexes over one column or several, unique or partial: `indexes: [{ on: ['author', 'title'] },
   * { on: ['email'], unique: true, where: 'deleted_at is null' }]` (`.index()` on a column for one
   * alone). A foreign key's column gets an index of its own unless an index leads with it.
   */
  readonly indexes?: readonly IndexDef<KeyProp<P>>[]
  /** CHECK constraints over the row, by name: `checks: { order_dates: 'shipped_at >= ordered_at' }`. */
  readonly checks?: Readonly<Record<string, string>>
}

/** The nullable time columns an entity may mark deleted rows with. */
type TimeProp<P> = { [F in keyof P]: P[F] extends Column<Date, true, boolean> ? F : never }[keyof P] & string

/** Declares an entity: its table, its properties built with `t`, and keys over several columns. */
export function entity<const P extends Record<string, AnyProp>, const K extends KeyProp<P> = never>(table: string, props: P, options: EntityOptions<P, K> = {}): EntityDef<P, NoInfer<K>> {
  if (options.schema !== undefined && (typeof options.schema !== 'string' || options.schema === '')) throw new SchemaError(`entity ${JSON.stringify(table)}: schema must be a non-empty name`)
  const primaryKey = options.primaryKey === undefined ? undefined : Object.freeze([...options.primaryKey])
  const indexes = options.indexes === undefined ? undefined : Object.freeze(options.indexes.map((index) => Object.freeze({ ...index, on: Object.freeze([...(index?.on ?? [])]) })))
  const checks = options.checks === undefined ? undefined : Object.freeze({ ...options.checks })
  return Object.freeze({ table, schema: options.schema, props, unique: Object.freeze((options.unique ?? []).map((key) => Object.freeze([...key]))), softDelete: options.softDelete, primaryKey, indexes, checks })
}

/** A table's name in messages and results (`billing.invoice`), and as statements write it (`"billing"."invoice"`). */
function tableNames(table: string, schema: string | undefined): { table: string; quotedTable: string } {
  return schema === undefined ? { table, quotedTable: quoteIdent(table) } : { table: `${schema}.${table}`, quotedTable: `${quoteIdent(schema)}.${quoteIdent(table)}` }
}

/** A checked, resolved set of entities. Entity names are the keys of `defs`. */
export class Schema<D extends SchemaDefs = SchemaDefs> implements SchemaFacts {
  readonly entities: ReadonlyMap<string, EntityMeta>
  /** Entities ordered so that each one's foreign-key targets come before it. */
  readonly insertOrder: readonly EntityMeta[]
  readonly childrenFirst: readonly EntityMeta[]
  readonly links: readonly ManyToManyMeta[]
  readonly compositeKeys: boolean
  readonly fieldRules: boolean

  constructor(readonly defs: D) {
    this.entities = resolve(defs)
    this.insertOrder = tableOrder([...this.entities.values()])
    const facts = deriveFacts(this.insertOrder)
    this.childrenFirst = facts.childrenFirst
    this.links = facts.links
    this.compositeKeys = facts.compositeKeys
    this.fieldRules = facts.fieldRules
    for (const meta of this.entities.values()) Object.freeze(meta)
  }

  meta(name: string): EntityMeta {
    const meta = this.entities.get(name)
    if (!meta) throw new SchemaError(`unknown entity ${JSON.stringify(name)}; known: ${[...this.entities.keys()].join(', ')}`)
    return meta
  }
}

/** Checks the definitions and resolves every relation; throws SchemaError on the first inconsistency. */
export function defineSchema<const D extends SchemaDefs>(defs: D): Schema<D> {
  return new Schema(defs)
}

interface Draft {
  meta: EntityMeta
  fields: FieldMeta[]
  fieldByProp: Map<string, FieldMeta>
  oneToMany: OneToManyMeta[]
  manyToMany: ManyToManyMeta[]
}

/** Property names a `where` takes for itself. */
const RESERVED = new Set(['and', 'or', 'not'])

function resolve(defs: SchemaDefs): Map<string, EntityMeta> {
  const drafts = new Map<string, Draft>()
  const tables = new Map<string, string>()
  for (const [name, def] of Object.entries(defs)) {
    claim(tables, tableNames(def.table, def.schema).table, name)
    drafts.set(name, draft(name, def))
  }
  const target = (owner: string, prop: string, name: string): EntityMeta => {
    const found = drafts.get(name)
    if (!found) throw new SchemaError(`${owner}.${prop} refers to unknown entity ${JSON.stringify(name)}`)
    return found.meta
  }
  // Pass 1: many-to-one fields, whose FK type is the target's id type.
  for (const [name, def] of Object.entries(defs)) {
    const d = drafts.get(name)!
    for (const [prop, builder] of Object.entries(def.props)) {
      if (RESERVED.has(prop)) throw new SchemaError(`${name}.${prop}: \`${prop}\` is reserved, as conditions combine with and, or and not: name the property otherwise (.column('${prop}') keeps the column)`)
      const spec = builder.spec
      if (spec.kind === 'column') d.fields.push(columnField(prop, spec))
      if (spec.kind === 'manyToOne') d.fields.push(referenceField(prop, spec, target(name, prop, spec.target), name))
    }
  }
  // Pass 2: collections, which point at fields resolved above.
  for (const [name, def] of Object.entries(defs)) {
    const d = drafts.get(name)!
    for (const [prop, builder] of Object.entries(def.props)) {
      const spec = builder.spec
      if (spec.kind === 'oneToMany') d.oneToMany.push(oneToMany(d.meta, prop, spec, target(name, prop, spec.target)))
      if (spec.kind === 'manyToMany') {
        const link = manyToMany(d.meta, prop, spec, target(name, prop, spec.target))
        claim(tables, link.table, `${name}.${prop}`)
        d.manyToMany.push(link)
      }
    }
  }
  for (const d of drafts.values()) {
    const columns = new Set(d.meta.key ? [] : [d.meta.id.column])
    for (const field of d.fields) {
      if (columns.has(field.column)) throw new SchemaError(`${d.meta.name}: column "${field.column}" is defined twice`)
      columns.add(field.column)
      d.fieldByProp.set(field.prop, field)
    }
    ;(d.meta as { uniqueKeys: readonly (readonly FieldMeta[])[] }).uniqueKeys = uniqueKeys(d, defs[d.meta.name]!)
    const versions = d.fields.filter((f) => f.version)
    if (versions.length > 1) throw new SchemaError(`${d.meta.name} has ${versions.length} version columns; one at most`)
    ;(d.meta as { version: FieldMeta | undefined }).version = versions[0]
    ;(d.meta as { softDelete: FieldMeta | undefined }).softDelete = softDeleteField(d, defs[d.meta.name]!)
    if (d.meta.key) (d.meta.key as FieldMeta[]).push(...primaryKey(d, defs[d.meta.name]!))
    ;(d.meta as { indexes: readonly IndexMeta[] }).indexes = indexesOf(d, defs[d.meta.name]!)
    ;(d.meta as { checks: readonly CheckMeta[] }).checks = checksOf(d, defs[d.meta.name]!)
    Object.freeze(d.fields)
  }
  return new Map([...drafts].map(([name, d]) => [name, d.meta]))
}

function claim(tables: Map<string, string>, table: string, owner: string): void {
  const other = tables.get(table)
  if (other) throw new SchemaError(`table "${table}" is used by both ${other} and ${owner}`)
  tables.set(table, owner)
}

function draft(name: string, def: EntityDef): Draft {
  const ids = Object.entries(def.props).filter(([, b]) => b.spec.kind === 'id')
  if (def.primaryKey !== undefined && ids.length > 0) throw new SchemaError(`${name} has a primaryKey and an id property (${ids[0]![0]}): one or the other`)
  if (def.primaryKey === undefined && ids.length !== 1) throw new SchemaError(`${name} must have exactly one id property (t.id() or t.uuidId()) or a primaryKey, found ${ids.length}`)
  let id: IdMeta = COMPOSITE_ID
  if (def.primaryKey === undefined) {
    const [idProp, idBuilder] = ids[0]!
    const idSpec = idBuilder.spec as IdSpec
    const idColumn = idSpec.column ?? snakeCase(idProp)
    id = { prop: idProp, column: idColumn, quoted: quoteIdent(idColumn), type: idSpec.type, strategy: idSpec.strategy }
  }
  const fields: FieldMeta[] = []
  const oneToMany: OneToManyMeta[] = []
  const manyToMany: ManyToManyMeta[] = []
  const fieldByProp = new Map<string, FieldMeta>()
  const meta: EntityMeta = {
    name,
    ...tableNames(def.table, def.schema),
    schema: def.schema,
    bareTable: def.table,
    id,
    // Filled once the fields are resolved (primaryKey).
    key: def.primaryKey === undefined ? undefined : [],
    fields,
    fieldByProp,
    oneToMany,
    manyToMany,
    version: undefined,
    softDelete: undefined,
    uniqueKeys: [],
    indexes: [],
    checks: [],
    // Derived once the schema is ordered (derive.ts).
    counters: [],
    selfReferences: [],
    treeFields: [],
    mutableFields: [],
    serverValued: [],
    generated: [],
    creatable: new Set(),
    referrers: [],
    linkSides: [],
    fixUps: [],
    cache: { texts: new Map(), updateShapes: new Map(), multiRowShapes: new Set(), entityClass: undefined },
  }
  return { meta, fields, fieldByProp, oneToMany, manyToMany }
}

/**
 * The id of an entity with a composite primary key: no column or property of its own. Its values
 * are key tuples (keyTupleType), and it is kept as a provided id is: the application chooses the key.
 */
const COMPOSITE_ID: IdMeta = Object.freeze({ prop: '', column: '', quoted: '', type: keyTupleType as ColumnType<unknown>, strategy: 'provided' })

function columnField(prop: string, spec: ColumnSpec): FieldMeta {
  const column = spec.column ?? snakeCase(prop)
  return {
    prop,
    column,
    quoted: quoteIdent(column),
    type: spec.type,
    nullable: spec.nullable,
    default: spec.default,
    unique: spec.unique,
    enumValues: spec.enumValues,
    ref: undefined,
    version: spec.version,
    rules: spec.rules,
    serverDefault: spec.serverDefault,
    generated: spec.generated,
  }
}

function referenceField(prop: string, spec: ManyToOneSpec, target: EntityMeta, owner: string): FieldMeta {
  if (target.key) throw new SchemaError(`${owner}.${prop} refers to ${target.name}, whose primary key has several columns: a many-to-one refers to an entity with an id property`)
  const column = spec.column ?? `${snakeCase(prop)}_${target.id.column}`
  return {
    prop,
    column,
    quoted: quoteIdent(column),
    type: target.id.type,
    nullable: spec.nullable,
    default: undefined,
    unique: false,
    enumValues: undefined,
    ref: { target, onDelete: spec.onDelete, deferrable: spec.deferrable, fixUp: false },
    version: false,
    rules: [],
    serverDefault: undefined,
    generated: undefined,
  }
}

function oneToMany(owner: EntityMeta, prop: string, spec: OneToManySpec, target: EntityMeta): OneToManyMeta {
  const inverse = target.fields.find((f) => f.prop === spec.inverse)
  if (!inverse?.ref || inverse.ref.target !== owner) {
    throw new SchemaError(
      `${owner.name}.${prop}: ${target.name}.${spec.inverse} must be a t.manyToOne(${JSON.stringify(owner.name)})`,
    )
  }
  return { prop, target, inverse }
}

function manyToMany(owner: EntityMeta, prop: string, spec: ManyToManySpec, target: EntityMeta): ManyToManyMeta {
  const keyed = owner.key ? owner : target.key ? target : undefined
  if (keyed) throw new SchemaError(`${owner.name}.${prop}: ${keyed.name} has a composite primary key; a many-to-many joins entities with id properties (make the join table an entity of its own)`)
  const bare = spec.table ?? `${owner.bareTable}_${target.bareTable}`
  const ownColumn = spec.ownColumn ?? `${owner.bareTable}_${owner.id.column}`
  const targetColumn = spec.targetColumn ?? `${target.bareTable}_${target.id.column}`
  if (ownColumn === targetColumn) {
    throw new SchemaError(`${owner.name}.${prop}: join table "${bare}" needs distinct ownColumn and targetColumn`)
  }
  return { prop, owner, target, ...tableNames(bare, owner.schema), schema: owner.schema, bareTable: bare, ownColumn, targetColumn }
}
