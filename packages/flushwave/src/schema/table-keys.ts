import { SchemaError } from '../errors.js'
import { KEY_COLUMN_TYPES, type AnyProp } from './builders.js'
import type { CheckMeta, EntityMeta, FieldMeta, IndexMeta } from './meta.js'

/**
 * What a table declares besides its properties, checked against its resolved fields: its soft
 * delete column, composite primary key, unique keys, indexes and CHECK constraints.
 */

/** An index `entity(…, { indexes })` declares: its properties in order, and what kind it is. */
export interface IndexDef<Prop extends string> {
  readonly on: readonly Prop[]
  /** A unique index. */
  readonly unique?: boolean
  /** A partial index: its condition, in SQL (`deleted_at is null`). */
  readonly where?: string
  /** Its name in the database; default `<table>_<columns>_idx`. */
  readonly name?: string
}

/** The part of an entity's definition (define.ts, EntityDef) these read. */
export interface TableDef {
  readonly props: Readonly<Record<string, AnyProp>>
  readonly unique?: readonly (readonly string[])[]
  readonly softDelete?: string | undefined
  readonly primaryKey?: readonly string[] | undefined
  readonly indexes?: readonly IndexDef<string>[] | undefined
  readonly checks?: Readonly<Record<string, string>> | undefined
}

/** A table being resolved: its metadata and its fields by property. */
export interface TableDraft {
  readonly meta: EntityMeta
  readonly fields: readonly FieldMeta[]
  readonly fieldByProp: ReadonlyMap<string, FieldMeta>
}

/** The field `{ softDelete }` names, checked: a nullable time column of the entity. */
export function softDeleteField(d: TableDraft, def: TableDef): FieldMeta | undefined {
  if (def.softDelete === undefined) return undefined
  const field = d.fieldByProp.get(def.softDelete)
  const time = field && !field.ref && (field.type.sqlType === 'timestamptz' || field.type.sqlType === 'timestamp')
  if (!field || !time || !field.nullable || field.version || field.generated) {
    throw new SchemaError(`${d.meta.name}: softDelete names ${JSON.stringify(def.softDelete)}, which must be a nullable t.timestamptz() or t.timestamp() property of ${d.meta.name}`)
  }
  return field
}

/**
 * The fields `{ primaryKey }` names, checked: columns of a type keys can have or many-to-ones, not
 * nullable, filled by the application (no server value, no version), none named twice.
 */
export function primaryKey(d: TableDraft, def: TableDef): FieldMeta[] {
  const props = def.primaryKey ?? []
  const name = d.meta.name
  if (!Array.isArray(props) || props.length === 0) throw new SchemaError(`${name}: primaryKey lists one property or more, got ${JSON.stringify(props)}`)
  if (new Set(props).size !== props.length) throw new SchemaError(`${name}: primaryKey ${JSON.stringify(props)} names a property twice`)
  return props.map((prop) => {
    const field = d.fieldByProp.get(prop)
    const why = !field
      ? 'which is not a column or many-to-one of it'
      : field.nullable
        ? 'which is nullable'
        : field.serverDefault || field.generated
          ? 'which the server fills'
          : field.version
            ? 'which is its version'
            : field.ref === undefined && !KEY_COLUMN_TYPES.includes(field.type.sqlType) && field.enumValues === undefined
              ? `a ${field.type.sqlType} column (a key part is ${KEY_COLUMN_TYPES.join(', ')}, an enum or a many-to-one)`
              : d.meta.softDelete === field
                ? 'which marks its deleted rows'
                : undefined
    if (why) throw new SchemaError(`${name}: primaryKey names ${JSON.stringify(prop)}, ${why}`)
    return field!
  })
}

/** Each column's `.index()`, then each of `entity(…, { indexes })`, checked and named. */
export function indexesOf(d: TableDraft, def: TableDef): IndexMeta[] {
  const name = d.meta.name
  const out: IndexMeta[] = []
  for (const [prop, builder] of Object.entries(def.props)) {
    const spec = builder.spec
    if (spec.kind === 'column' && spec.index) out.push({ name: `${d.meta.bareTable}_${d.fieldByProp.get(prop)!.column}_idx`, fields: [d.fieldByProp.get(prop)!], unique: false, where: undefined })
  }
  for (const index of def.indexes ?? []) {
    const on: unknown = index?.on
    if (!Array.isArray(on) || on.length === 0) throw new SchemaError(`${name}: an index lists one property or more in \`on\`, got ${JSON.stringify(on)}`)
    const fields = on.map((prop: unknown) => {
      const field = typeof prop === 'string' ? d.fieldByProp.get(prop) : undefined
      if (!field) throw new SchemaError(`${name}: index on ${JSON.stringify(on)} names ${JSON.stringify(prop)}, which is not a column or many-to-one of ${name}`)
      return field
    })
    if (index.where !== undefined && (typeof index.where !== 'string' || index.where.trim() === '')) throw new SchemaError(`${name}: an index's where is an SQL condition, got ${JSON.stringify(index.where)}`)
    if (index.name !== undefined && (typeof index.name !== 'string' || index.name === '')) throw new SchemaError(`${name}: an index's name is a non-empty string, got ${JSON.stringify(index.name)}`)
    out.push({ name: index.name ?? `${d.meta.bareTable}_${fields.map((f) => f.column).join('_')}_idx`, fields, unique: index.unique === true, where: index.where })
  }
  const names = new Set<string>()
  for (const index of out) {
    if (names.has(index.name)) throw new SchemaError(`${name}: two indexes are named ${JSON.stringify(index.name)}; give one a name of its own`)
    names.add(index.name)
  }
  return out
}

/** Each column's `.checkSql()`, then `entity(…, { checks })`, named. */
export function checksOf(d: TableDraft, def: TableDef): CheckMeta[] {
  const out: CheckMeta[] = []
  for (const [prop, builder] of Object.entries(def.props)) {
    const spec = builder.spec
    if (spec.kind === 'column' && spec.checkSql !== undefined) out.push({ name: `${d.meta.bareTable}_${d.fieldByProp.get(prop)!.column}_check`, sql: spec.checkSql })
  }
  for (const [checkName, sql] of Object.entries(def.checks ?? {})) {
    if (typeof sql !== 'string' || sql.trim() === '') throw new SchemaError(`${d.meta.name}: check ${JSON.stringify(checkName)} is an SQL condition, got ${JSON.stringify(sql)}`)
    if (out.some((c) => c.name === checkName)) throw new SchemaError(`${d.meta.name}: two checks are named ${JSON.stringify(checkName)}`)
    out.push({ name: checkName, sql })
  }
  return out
}

/** Every unique key of an entity: each `.unique()` column, then each key of `entity(…, { unique })`, checked. */
export function uniqueKeys(d: TableDraft, def: TableDef): (readonly FieldMeta[])[] {
  const keys: (readonly FieldMeta[])[] = d.fields.filter((f) => f.unique).map((f) => [f])
  const seen = new Set(keys.map((key) => key[0]!.column))
  for (const key of def.unique ?? []) {
    if (!Array.isArray(key) || key.length === 0) throw new SchemaError(`${d.meta.name}: a unique key lists one property or more, got ${JSON.stringify(key)}`)
    const fields = key.map((prop) => {
      const field = d.fieldByProp.get(prop)
      if (!field) throw new SchemaError(`${d.meta.name}: unique key ${JSON.stringify(key)} names ${JSON.stringify(prop)}, which is not a column or many-to-one of ${d.meta.name}`)
      return field
    })
    const columns = fields.map((f) => f.column)
    if (new Set(columns).size !== columns.length) throw new SchemaError(`${d.meta.name}: unique key ${JSON.stringify(key)} names a property twice`)
    const name = [...columns].sort().join(',')
    if (seen.has(name)) throw new SchemaError(`${d.meta.name}: unique key ${JSON.stringify(key)} is declared twice`)
    seen.add(name)
    keys.push(fields)
  }
  return keys
}
