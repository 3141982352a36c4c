import { InvalidValueError } from '../errors.js'
import { isCounter } from '../schema/counters.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import type { Condition } from '../sql/conditions.js'
import { renderAggregate, type AggregateColumn } from '../sql/render-select.js'
import type { Statement } from '../sql/statement.js'
import { isPlainObject } from './where.js'

const FUNCTIONS = ['sum', 'avg', 'min', 'max'] as const
type Fn = (typeof FUNCTIONS)[number]

/** `em.aggregate`'s statement, and how to read its rows into the result AggregateResult describes. */
export function aggregateQuery(meta: EntityMeta, where: Condition, spec: unknown): { statement: Statement; decode(rows: readonly (readonly unknown[])[]): unknown } {
  if (!isPlainObject(spec)) throw new InvalidValueError(meta.name, 'aggregate', spec, 'expected { groupBy, sum, avg, min, max }')
  for (const key of Object.keys(spec)) {
    if (key !== 'groupBy' && !(FUNCTIONS as readonly string[]).includes(key)) throw new InvalidValueError(meta.name, key, spec[key], 'is not groupBy, sum, avg, min or max')
  }
  const groupBy = spec.groupBy === undefined ? undefined : fieldsOf(meta, 'groupBy', spec.groupBy, () => undefined)
  const functions: { fn: Fn; field: FieldMeta }[] = []
  for (const fn of FUNCTIONS) {
    const fields = spec[fn] === undefined ? [] : fieldsOf(meta, fn, spec[fn], (f) => refusal(fn, f))
    for (const field of fields) functions.push({ fn, field })
  }
  const column = (f: FieldMeta): AggregateColumn => ({ quoted: f.quoted, select: f.ref ? (e) => `${e}::text` : (e) => f.type.selectExpr(e) })
  const statement = renderAggregate(meta, where, { groupBy: (groupBy ?? []).map(column), functions: functions.map(({ fn, field }) => ({ fn, column: column(field) })) })
  const decode = (rows: readonly (readonly unknown[])[]) => {
    const out = rows.map((row) => {
      const result: Record<string, unknown> = {}
      let i = 0
      for (const field of groupBy ?? []) result[field.prop] = valueOf(field, row[i++])
      result.count = Number(row[i++])
      for (const { fn, field } of functions) {
        const raw = row[i++]
        const values = (result[fn] ??= {}) as Record<string, unknown>
        values[field.prop] = raw === null || raw === undefined ? null : fn === 'sum' ? sumOf(meta, field, String(raw)) : fn === 'avg' ? String(raw) : field.type.fromDb(raw)
      }
      return result
    })
    return groupBy === undefined ? out[0] : out
  }
  return { statement, decode }
}

/** Why `fn` cannot take `field`, or undefined. */
function refusal(fn: Fn, field: FieldMeta): string | undefined {
  if (fn === 'sum' || fn === 'avg') return isCounter(field) ? undefined : `${fn} takes integer, bigint and numeric columns`
  if (field.ref || !(field.type.operators === 'ordered' || field.type.operators === 'text')) return `${fn} takes columns with an order (not jsonb, boolean, bytea, an array or a reference)`
  return undefined
}

function fieldsOf(meta: EntityMeta, key: string, props: unknown, refuse: (field: FieldMeta) => string | undefined): FieldMeta[] {
  if (!Array.isArray(props)) throw new InvalidValueError(meta.name, key, props, 'expected an array of property names')
  return props.map((prop: unknown) => {
    const field = typeof prop === 'string' ? meta.fieldByProp.get(prop) : undefined
    if (!field) throw new InvalidValueError(meta.name, key, prop, `is not a column or many-to-one of ${meta.name}`)
    const reason = refuse(field)
    if (reason) throw new InvalidValueError(meta.name, field.prop, undefined, reason)
    return field
  })
}

function valueOf(field: FieldMeta, raw: unknown): unknown {
  if (raw === null || raw === undefined) return null
  return field.ref ? field.ref.target.id.type.fromDb(raw) : field.type.fromDb(raw)
}

/** A sum in the column's JavaScript type: integer sums (int8 on the server) as numbers while exact. */
function sumOf(meta: EntityMeta, field: FieldMeta, text: string): unknown {
  if (field.type.sqlType === 'numeric') return text
  if (field.type.sqlType === 'int8') return BigInt(text)
  const n = Number(text)
  if (!Number.isSafeInteger(n)) throw new InvalidValueError(meta.name, field.prop, text, 'its sum is past Number.MAX_SAFE_INTEGER: declare the column t.bigint()')
  return n
}
