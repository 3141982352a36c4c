import { label, stateOf } from '../entities/entity-state.js'
import { EntityStateError, InvalidValueError } from '../errors.js'
import { text as textType, type ColumnType, type OperatorKind } from '../schema/column-types.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import { allOf, type ColumnRef, type CompareOp, type Condition, type Quantifier } from '../sql/conditions.js'

/**
 * Checks a `where` (schema/filters.ts) against the schema and turns it into a condition tree with
 * every value in text form: an unknown property, an operator its type lacks or a value its column
 * would refuse is an InvalidValueError, before anything is sent. Keys are read as own properties
 * only: `constructor`, `toString` or `__proto__` never find Object.prototype's members.
 * Soft-deleted rows are left out, of the entity and of every relation the conditions reach, unless
 * `withDeleted`.
 */
export function conditionOf(meta: EntityMeta, where: unknown, withDeleted = false): Condition {
  const condition = whereOf(meta, where, [], 'where', withDeleted)
  return withDeleted || !meta.softDelete ? condition : allOf([condition, liveOf(meta, [])])
}

/** The rows of `meta` not soft-deleted (every row of an entity without soft delete), reached through `through`. */
export function liveOf(meta: EntityMeta, through: readonly FieldMeta[]): Condition {
  return meta.softDelete ? { kind: 'null', column: { through, column: meta.softDelete.quoted }, negated: false } : { kind: 'true' }
}

const LOGIC = new Set(['and', 'or', 'not'])
const EQUALITY = new Set(['eq', 'ne', 'in', 'nin', 'isNull'])
const ORDERED = new Set([...EQUALITY, 'gt', 'gte', 'lt', 'lte', 'between'])
const TEXT = new Set([...ORDERED, 'like', 'ilike', 'notLike'])
const JSON_OPS = new Set(['eq', 'ne', 'isNull', 'contains', 'containedBy', 'hasKey'])
const ARRAY_OPS = new Set(['eq', 'ne', 'isNull', 'contains', 'containedBy', 'overlaps'])
const OPERATORS: Readonly<Record<OperatorKind, ReadonlySet<string>>> = { equality: EQUALITY, ordered: ORDERED, text: TEXT, json: JSON_OPS, array: ARRAY_OPS }
const QUANTIFIERS = new Set<string>(['some', 'none', 'every'])
const COMPARE: Readonly<Record<string, CompareOp>> = { eq: '=', ne: '<>', gt: '>', gte: '>=', lt: '<', lte: '<=', like: 'like', ilike: 'ilike', notLike: 'not like', contains: '@>', containedBy: '<@', overlaps: '&&' }

/** The column a property names, as a condition or an `orderBy` reads it. */
interface Target {
  readonly meta: EntityMeta
  readonly prop: string
  readonly type: ColumnType<unknown>
  readonly ref: ColumnRef
  readonly field: FieldMeta | undefined
}

function whereOf(meta: EntityMeta, where: unknown, through: readonly FieldMeta[], what: string, deleted: boolean): Condition {
  // Untyped callers: null, an array or an entity would otherwise fail raw or match every row.
  if (!isPlainObject(where)) throw new InvalidValueError(meta.name, what, where, 'conditions must be an object of properties')
  const out: Condition[] = []
  for (const [key, spec] of Object.entries(where)) {
    if (spec === undefined && !LOGIC.has(key)) {
      // An unknown property is an error even with an undefined value.
      if (!isProperty(meta, key)) throw new InvalidValueError(meta.name, key, undefined, `is not a property of ${meta.name}`)
      continue
    }
    if (key === 'and' || key === 'or') {
      if (spec === undefined) continue
      if (!Array.isArray(spec)) throw new InvalidValueError(meta.name, key, spec, `\`${key}\` takes an array of conditions`)
      const items = spec.map((item: unknown) => whereOf(meta, item, through, key, deleted))
      out.push(key === 'and' ? allOf(items) : { kind: 'or', items })
    } else if (key === 'not') {
      if (spec !== undefined) out.push({ kind: 'not', item: whereOf(meta, spec, through, 'not', deleted) })
    } else {
      out.push(propertyCondition(meta, key, spec, through, deleted))
    }
  }
  return allOf(out)
}

function propertyCondition(meta: EntityMeta, prop: string, spec: unknown, through: readonly FieldMeta[], deleted: boolean): Condition {
  const relation = meta.oneToMany.find((r) => r.prop === prop) ?? meta.manyToMany.find((r) => r.prop === prop)
  if (relation) {
    if (!isPlainObject(spec)) throw new InvalidValueError(meta.name, prop, spec, 'a collection takes { some }, { none } or { every } with conditions on its entities')
    const items: Condition[] = []
    for (const [quantifier, where] of Object.entries(spec)) {
      if (!QUANTIFIERS.has(quantifier)) throw new InvalidValueError(meta.name, prop, spec, `unknown operator ${JSON.stringify(quantifier)}: a collection takes some, none or every`)
      if (where === undefined) continue
      const kind = 'inverse' in relation ? ('one-to-many' as const) : ('many-to-many' as const)
      const related = kind === 'one-to-many' ? { kind, meta: relation as (typeof meta.oneToMany)[number] } : { kind, meta: relation as (typeof meta.manyToMany)[number] }
      const among = deleted ? ({ kind: 'true' } as const) : liveOf(relation.target, [])
      items.push({ kind: 'related', through, relation: related, quantifier: quantifier as Quantifier, where: whereOf(relation.target, where, [], `${prop}.${quantifier}`, deleted), among })
    }
    return allOf(items)
  }
  const target = targetOf(meta, prop, through)
  const ref = target.field?.ref
  if (ref && isPlainObject(spec)) {
    const keys = Object.keys(spec)
    const operators = keys.filter((k) => EQUALITY.has(k))
    // Conditions on the entity it refers to (a join), unless every key is an operator. A row whose
    // reference is NULL refers to no entity, so it meets none of them, not even `not` or `{}`: a
    // nullable reference must be set (a non-null one always joins its row).
    if (operators.length === 0) {
      const joined = [...through, target.field!]
      // Conditions on the entity referred to hold only of a live one (a soft-deleted one meets none).
      const nested = allOf([whereOf(ref.target, spec, joined, prop, deleted), deleted ? { kind: 'true' } : liveOf(ref.target, joined)])
      return target.field!.nullable ? allOf([{ kind: 'null', column: target.ref, negated: true }, nested]) : nested
    }
    if (operators.length < keys.length) {
      throw new InvalidValueError(meta.name, prop, spec, `mixes operators (${operators.join(', ')}) with conditions on ${ref.target.name}: nest the conditions in \`and\``)
    }
  }
  if (spec === null) return { kind: 'null', column: target.ref, negated: false }
  if (!isPlainObject(spec)) {
    if (target.type.operators === 'json') throw new InvalidValueError(meta.name, prop, spec, 'a jsonb property takes an object of operators, e.g. { eq: … } or { contains: … }')
    return compare(target, '=', spec)
  }
  return allOf(Object.entries(spec).map(([op, value]) => operatorCondition(target, op, value, spec)))
}

function operatorCondition(target: Target, op: string, value: unknown, spec: Record<string, unknown>): Condition {
  const { meta, prop, type } = target
  const allowed = target.field?.ref ? EQUALITY : OPERATORS[type.operators]
  if (!allowed.has(op)) {
    throw new InvalidValueError(meta.name, prop, spec, `unknown operator ${JSON.stringify(op)} for this property (it takes ${[...allowed].join(', ')})`)
  }
  if (value === undefined) return { kind: 'true' }
  switch (op) {
    case 'isNull':
      // A string such as 'false' is truthy: only a boolean says which.
      if (typeof value !== 'boolean') throw new InvalidValueError(meta.name, prop, value, '`isNull` takes a boolean')
      return { kind: 'null', column: target.ref, negated: !value }
    case 'in':
    case 'nin': {
      if (!Array.isArray(value)) throw new InvalidValueError(meta.name, prop, value, `\`${op}\` takes an array`)
      const values = value.map((v: unknown) => textOf(target, v))
      // No value: `in` matches no row; `nin` every row, NULLs too (as `<> all` of no values does).
      if (values.length === 0) return { kind: op === 'in' ? 'false' : 'true' }
      return { kind: 'in', column: target.ref, values, cast: castOf(target), negated: op === 'nin' }
    }
    case 'between': {
      if (!Array.isArray(value) || value.length !== 2) throw new InvalidValueError(meta.name, prop, value, '`between` takes [low, high]')
      return { kind: 'between', column: target.ref, low: textOf(target, value[0]), high: textOf(target, value[1]), cast: castOf(target) }
    }
    case 'like':
    case 'ilike':
    case 'notLike': {
      const reason = typeof value === 'string' ? textType.check(value) : `\`${op}\` takes a string pattern`
      if (reason) throw new InvalidValueError(meta.name, prop, value, reason)
      return { kind: 'compare', column: target.ref, op: COMPARE[op]!, value: value as string, cast: 'text' }
    }
    case 'contains':
    case 'containedBy':
    case 'overlaps':
      // jsonb containment, or array containment and overlap (castOf: the array's own type).
      return { kind: 'compare', column: target.ref, op: COMPARE[op]!, value: textOf(target, value), cast: castOf(target) }
    case 'hasKey': {
      const reason = typeof value === 'string' ? textType.check(value) : '`hasKey` takes a string'
      if (reason) throw new InvalidValueError(meta.name, prop, value, reason)
      return { kind: 'compare', column: target.ref, op: '?', value: value as string, cast: 'text' }
    }
    default:
      return compare(target, COMPARE[op]!, value)
  }
}

function compare(target: Target, op: CompareOp, value: unknown): Condition {
  return { kind: 'compare', column: target.ref, op, value: textOf(target, value), cast: castOf(target) }
}

/** A foreign key compares in its target's id type; a column in its own. */
const castOf = (target: Target): string => target.type.sqlType

function targetOf(meta: EntityMeta, prop: string, through: readonly FieldMeta[]): Target {
  if (prop === meta.id.prop && !meta.key) return { meta, prop, type: meta.id.type, ref: { through, column: meta.id.quoted }, field: undefined }
  const field = propertyOf(meta, prop)
  return { meta, prop, type: field.type, ref: { through, column: field.quoted }, field }
}

const isProperty = (meta: EntityMeta, prop: string): boolean =>
  (prop === meta.id.prop && !meta.key) || meta.fieldByProp.has(prop) || meta.oneToMany.some((r) => r.prop === prop) || meta.manyToMany.some((r) => r.prop === prop)

function propertyOf(meta: EntityMeta, prop: string): FieldMeta {
  const field = meta.fieldByProp.get(prop)
  if (!field) throw new InvalidValueError(meta.name, prop, undefined, `is not a property of ${meta.name}`)
  return field
}

function textOf(target: Target, value: unknown): string {
  const { meta, prop, type } = target
  const ref = target.field?.ref
  if (ref && typeof value === 'object' && value !== null) {
    const state = stateOf(value)
    if (!state || state.meta !== ref.target) throw new InvalidValueError(meta.name, prop, value, `expected a ${ref.target.name} or its id`)
    // New: no row refers to it yet (it may have its id already, from the pool at create).
    if (state.status === 'new') throw new EntityStateError(`${label(state)} is not inserted yet: flush it before using it in a condition`)
    value = state.id
  }
  const reason = type.check(value)
  if (reason) throw new InvalidValueError(meta.name, prop, value, reason)
  return type.toText(value)
}

/** The own column a property names, for `orderBy`: the id, a column or a many-to-one's key. */
export function columnOf(meta: EntityMeta, prop: string): { readonly quoted: string } {
  if (prop === meta.id.prop && !meta.key) return meta.id
  const field = meta.fieldByProp.get(prop)
  if (!field) throw new InvalidValueError(meta.name, prop, undefined, 'is not a column or many-to-one of this entity')
  const kind = field.ref ? 'ordered' : field.type.operators
  if (kind === 'json' || kind === 'array') throw new InvalidValueError(meta.name, prop, undefined, `a ${kind === 'json' ? 'jsonb' : 'array'} column has no order to sort by`)
  return field
}

/** An object of named values (conditions, a comparison, options): not null, an array, a Date, bytes or an entity. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !(value instanceof Date) && !Array.isArray(value) && !ArrayBuffer.isView(value) && stateOf(value) === undefined
}
