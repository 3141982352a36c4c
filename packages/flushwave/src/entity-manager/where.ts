import { EntityStateError, InvalidValueError } from '../errors.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import { text as textType, type ColumnType } from '../schema/column-types.js'
import type { ComparisonOp, Condition } from '../sql/render-select.js'
import { label, stateOf } from '../entities/entity-state.js'

// Operators are looked up with Object.hasOwn: `constructor`, `toString` or `__proto__` must not
// find Object.prototype's members (their text would end up in the SQL).
const OPERATORS: Readonly<Record<string, ComparisonOp>> = { eq: '=', ne: '<>', gt: '>', gte: '>=', lt: '<', lte: '<=', like: 'like' }

/** Checks a `find` where object against the schema and turns its values into text-form conditions. */
export function conditions(meta: EntityMeta, where: Record<string, unknown>): Condition[] {
  // Untyped callers: null, an array or an entity would otherwise fail raw or match every row.
  if (!isPlainObject(where)) throw new InvalidValueError(meta.name, 'where', where, 'find() conditions must be an object of properties')
  const out: Condition[] = []
  for (const [prop, spec] of Object.entries(where)) {
    const column = columnOf(meta, prop) // an unknown property is an error even with an undefined value
    if (spec === undefined) continue
    if (spec === null) {
      out.push({ column: column.quoted, op: 'is null' })
    } else if (!isComparison(spec)) {
      out.push({ column: column.quoted, sqlType: column.type.sqlType, op: '=', value: toText(meta, prop, column, spec) })
    } else {
      for (const [key, value] of Object.entries(spec)) {
        if (key !== 'in' && key !== 'isNull' && !Object.hasOwn(OPERATORS, key)) {
          throw new InvalidValueError(meta.name, prop, spec, `unknown operator ${JSON.stringify(key)}`)
        }
        if (value === undefined) continue
        if (key === 'in') {
          if (!Array.isArray(value)) throw new InvalidValueError(meta.name, prop, value, '`in` takes an array')
          out.push({ column: column.quoted, sqlType: column.type.sqlType, op: 'in', values: textsOf(meta, prop, column, value) })
        } else if (key === 'isNull') {
          // A string such as 'false' is truthy: only a boolean says which.
          if (typeof value !== 'boolean') throw new InvalidValueError(meta.name, prop, value, '`isNull` takes a boolean')
          out.push({ column: column.quoted, op: value ? 'is null' : 'is not null' })
        } else if (key === 'like') {
          // PostgreSQL has LIKE for text only (uuid, numeric, enums, integers have no ~~ operator).
          if (column.type.sqlType !== 'text') throw new InvalidValueError(meta.name, prop, value, '`like` applies to text properties only')
          const reason = typeof value === 'string' ? textType.check(value) : '`like` takes a string pattern'
          if (reason) throw new InvalidValueError(meta.name, prop, value, reason)
          out.push({ column: column.quoted, sqlType: 'text', op: 'like', value: value as string })
        } else {
          out.push({ column: column.quoted, sqlType: column.type.sqlType, op: OPERATORS[key]!, value: toText(meta, prop, column, value) })
        }
      }
    }
  }
  return out
}

interface ColumnRef {
  readonly quoted: string
  readonly type: ColumnType<unknown>
  readonly field: FieldMeta | undefined
}

export function columnOf(meta: EntityMeta, prop: string): ColumnRef {
  if (prop === meta.id.prop) return { quoted: meta.id.quoted, type: meta.id.type, field: undefined }
  const field = meta.fieldByProp.get(prop)
  if (!field) throw new InvalidValueError(meta.name, prop, undefined, 'is not a column or many-to-one of this entity')
  if (field.type.sqlType === 'jsonb') throw new InvalidValueError(meta.name, prop, undefined, 'jsonb columns cannot be filtered with find()')
  return { quoted: field.quoted, type: field.type, field }
}

function textsOf(meta: EntityMeta, prop: string, column: ColumnRef, values: readonly unknown[]): string[] {
  const texts: string[] = []
  for (const value of values) texts.push(toText(meta, prop, column, value))
  return texts
}

function toText(meta: EntityMeta, prop: string, column: ColumnRef, value: unknown): string {
  if (column.field?.ref && typeof value === 'object' && value !== null) {
    const state = stateOf(value)
    if (!state || state.meta !== column.field.ref.target) throw new InvalidValueError(meta.name, prop, value, `expected a ${column.field.ref.target.name} or its id`)
    // New: no row refers to it yet (it may have its id already, from the pool at create).
    if (state.status === 'new') throw new EntityStateError(`${label(state)} is not inserted yet: flush it before using it in find()`)
    value = state.id
  }
  const reason = column.type.check(value)
  if (reason) throw new InvalidValueError(meta.name, prop, value, reason)
  return column.type.toText(value)
}

/** An object of named values (conditions, a comparison, options): not null, an array, a Date or an entity. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !(value instanceof Date) && !Array.isArray(value) && stateOf(value) === undefined
}

const isComparison = isPlainObject
