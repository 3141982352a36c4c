import { EntityStateError, InvalidValueError } from '../errors.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import type { ColumnType } from '../schema/column-types.js'
import type { ComparisonOp, Condition } from '../sql/render-select.js'
import { label, stateOf } from './entity-state.js'

const OPERATORS: Record<string, ComparisonOp> = { eq: '=', ne: '<>', gt: '>', gte: '>=', lt: '<', lte: '<=', like: 'like' }

/** Checks a `find` where object against the schema and turns its values into text-form conditions. */
export function conditions(meta: EntityMeta, where: Record<string, unknown>): Condition[] {
  const out: Condition[] = []
  for (const [prop, spec] of Object.entries(where)) {
    if (spec === undefined) continue
    const column = columnOf(meta, prop)
    const text = (value: unknown): string => toText(meta, prop, column, value)
    if (spec === null) {
      out.push({ column: column.quoted, op: 'is null' })
    } else if (!isComparison(spec)) {
      out.push({ column: column.quoted, sqlType: column.type.sqlType, op: '=', value: text(spec) })
    } else {
      for (const [key, value] of Object.entries(spec)) {
        if (value === undefined) continue
        if (key === 'in') {
          if (!Array.isArray(value)) throw new InvalidValueError(meta.name, prop, value, '`in` takes an array')
          out.push({ column: column.quoted, sqlType: column.type.sqlType, op: 'in', values: value.map(text) })
        } else if (key === 'isNull') {
          out.push({ column: column.quoted, op: value ? 'is null' : 'is not null' })
        } else if (OPERATORS[key]) {
          if (key === 'like' && typeof value !== 'string') throw new InvalidValueError(meta.name, prop, value, '`like` takes a string pattern')
          out.push({ column: column.quoted, sqlType: key === 'like' ? 'text' : column.type.sqlType, op: OPERATORS[key], value: key === 'like' ? (value as string) : text(value) })
        } else {
          throw new InvalidValueError(meta.name, prop, spec, `unknown operator ${JSON.stringify(key)}`)
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

function toText(meta: EntityMeta, prop: string, column: ColumnRef, value: unknown): string {
  if (column.field?.ref && typeof value === 'object' && value !== null) {
    const state = stateOf(value)
    if (!state || state.meta !== column.field.ref.target) throw new InvalidValueError(meta.name, prop, value, `expected a ${column.field.ref.target.name} or its id`)
    if (state.id === undefined) throw new EntityStateError(`${label(state)} has no id yet: flush it before using it in find()`)
    value = state.id
  }
  const reason = column.type.check(value)
  if (reason) throw new InvalidValueError(meta.name, prop, value, reason)
  return column.type.toText(value)
}

function isComparison(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !(value instanceof Date) && !Array.isArray(value) && stateOf(value) === undefined
}
