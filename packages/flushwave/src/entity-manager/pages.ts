import { createHash, createHmac, timingSafeEqual } from 'node:crypto'
import { STATE, type HasState } from '../entities/entity-state.js'
import { InvalidCursorError, InvalidValueError } from '../errors.js'
import type { ColumnType } from '../schema/column-types.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import { allOf, type Condition } from '../sql/conditions.js'
import { renderFind } from '../sql/render-select.js'
import { columnOf, isPlainObject } from './where.js'

/**
 * Keyset pages: a page is the rows after the last one of the page before, in a total order (the
 * order asked for, then the id), so rows written before the cursor never shift a page, and ties
 * never repeat or skip a row. The cursor carries that row's values of the order's columns, the
 * query's fingerprint (its entity, conditions and order), and a signature over both.
 */

/** One column of a page's order. */
interface Key {
  readonly quoted: string
  readonly type: ColumnType<unknown>
  readonly direction: 'asc' | 'desc'
  readonly nullable: boolean
  /** How to read its value off an entity, as text. */
  readonly field: FieldMeta | undefined
}

export interface PageQuery {
  readonly orderBy: readonly (readonly [string, 'asc' | 'desc'])[]
  /** The conditions and, after a cursor, the keyset condition. */
  readonly where: Condition
  /** One row more than the page, to tell whether another follows. */
  readonly limit: number
  readonly first: number
  /** Makes the cursor of a page's last entity. */
  readonly cursorOf: (entity: HasState) => string
}

/** Checks `findPage`'s options and makes its query; an `after` that is not this query's cursor is an InvalidCursorError. */
export function pageQuery(meta: EntityMeta, where: Condition, options: unknown, secret: string | undefined): PageQuery {
  if (!isPlainObject(options)) throw new InvalidValueError(meta.name, 'options', options, 'findPage() takes { first, orderBy, after }')
  const { first, after, orderBy } = options as { first?: unknown; after?: unknown; orderBy?: unknown }
  if (!(typeof first === 'number' && Number.isSafeInteger(first) && first > 0)) throw new InvalidValueError(meta.name, 'first', first, 'expected a positive integer')
  if (orderBy !== undefined && !isPlainObject(orderBy)) throw new InvalidValueError(meta.name, 'orderBy', orderBy, "expected an object of property: 'asc' | 'desc'")
  const keys: Key[] = []
  for (const [prop, direction] of Object.entries(orderBy ?? {})) {
    const column = columnOf(meta, prop)
    if (direction !== 'asc' && direction !== 'desc') throw new InvalidValueError(meta.name, prop, direction, "order must be 'asc' or 'desc'")
    const field = prop === meta.id.prop && !meta.key ? undefined : meta.fieldByProp.get(prop)
    keys.push({ quoted: column.quoted, type: field?.type ?? meta.id.type, direction, nullable: field?.nullable ?? false, field })
  }
  // The id breaks ties: the order is total, so a page boundary falls between two rows, never within.
  if (meta.key) {
    // A composite key breaks them with its columns, those the order does not name already.
    for (const field of meta.key) if (!keys.some((k) => k.field === field)) keys.push({ quoted: field.quoted, type: field.type, direction: 'asc', nullable: false, field })
  } else if (!keys.some((k) => k.field === undefined)) keys.push({ quoted: meta.id.quoted, type: meta.id.type, direction: 'asc', nullable: false, field: undefined })
  const order = keys.map((k) => [k.quoted, k.direction] as const)
  const fingerprint = fingerprintOf(meta, where, order)
  let condition = where
  if (after !== undefined) {
    const values = decodeCursor(after, fingerprint, keys.length, secret)
    keys.forEach((key, i) => {
      const text = values[i]
      if (text === null || text === undefined ? !key.nullable : !valid(key.type, text)) throw new InvalidCursorError('the cursor does not hold this order\'s values')
    })
    condition = allOf([where, keysetAfter(keys, values, 0)])
  }
  const cursorOf = (entity: HasState) => encodeCursor(fingerprint, keys.map((key) => valueText(entity, key)), secret)
  return { orderBy: order, where: condition, limit: first + 1, first, cursorOf }
}

/**
 * The rows after `values` in the order of `keys`, from key `i` on. PostgreSQL sorts NULLs last in
 * ascending order and first in descending order, and so does this condition.
 */
function keysetAfter(keys: readonly Key[], values: readonly (string | null)[], i: number): Condition {
  const key = keys[i]!
  const value = values[i] ?? null
  const column = { through: [], column: key.quoted }
  const cast = key.type.sqlType
  const beyond: Condition = { kind: 'compare', column, op: key.direction === 'asc' ? '>' : '<', value: value ?? '', cast }
  if (i === keys.length - 1) return beyond // the last key ends the id (or key): never NULL, never a tie
  const rest = keysetAfter(keys, values, i + 1)
  const isNull: Condition = { kind: 'null', column, negated: false }
  if (value === null) {
    // Ascending, NULLs come last: after a NULL only the NULLs further on. Descending, they come first.
    return key.direction === 'asc' ? allOf([isNull, rest]) : { kind: 'or', items: [{ kind: 'null', column, negated: true }, allOf([isNull, rest])] }
  }
  const tie = allOf([{ kind: 'compare', column, op: '=', value, cast }, rest])
  return { kind: 'or', items: key.direction === 'asc' && key.nullable ? [beyond, isNull, tie] : [beyond, tie] }
}

function valueText(entity: HasState, key: Key): string | null {
  const state = entity[STATE]
  if (key.field === undefined) return key.type.toText(state.id)
  const value = state.values[key.field.prop]
  if (value === null || value === undefined) return null
  if (key.field.ref) return key.field.ref.target.id.type.toText((value as HasState)[STATE].id)
  return key.type.toText(value)
}

/** Whether `text` is a value of the type, as the cursor's values must be (written by `valueText`). */
function valid(type: ColumnType<unknown>, text: string): boolean {
  try {
    return type.check(type.fromDb(text)) === undefined
  } catch {
    return false
  }
}

/** The query a cursor belongs to: its entity, its conditions with their values, and its order. */
function fingerprintOf(meta: EntityMeta, where: Condition, order: readonly (readonly [string, 'asc' | 'desc'])[]): string {
  const statement = renderFind(meta, where, { orderBy: order })
  return createHash('sha256').update(statement.text).update('\u0000').update(JSON.stringify(statement.params)).digest('base64url').slice(0, 16)
}

/** Without a `cursorSecret`, cursors are signed with this: they cannot be changed by accident, but can be forged. */
const DEFAULT_SECRET = 'flushwave page cursor'

function sign(payload: string, secret: string | undefined): string {
  return createHmac('sha256', secret ?? DEFAULT_SECRET).update(payload).digest('base64url')
}

function encodeCursor(fingerprint: string, values: readonly (string | null)[], secret: string | undefined): string {
  const payload = Buffer.from(JSON.stringify([fingerprint, values])).toString('base64url')
  return `${payload}.${sign(payload, secret)}`
}

function decodeCursor(cursor: unknown, fingerprint: string, length: number, secret: string | undefined): (string | null)[] {
  if (typeof cursor !== 'string') throw new InvalidCursorError('a page cursor is a string (a page\'s endCursor)')
  const [payload = '', signature = '', extra] = cursor.split('.')
  const expected = Buffer.from(sign(payload, secret))
  const given = Buffer.from(signature)
  if (extra !== undefined || given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw new InvalidCursorError('the cursor is not one findPage made, or it was changed')
  }
  let decoded: unknown
  try {
    decoded = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'))
  } catch {
    throw new InvalidCursorError('the cursor cannot be read')
  }
  const [print, values] = Array.isArray(decoded) ? decoded : []
  if (print !== fingerprint) throw new InvalidCursorError('the cursor belongs to another query (other conditions, order or entity)')
  if (!Array.isArray(values) || values.length !== length || !values.every((v) => v === null || typeof v === 'string')) {
    throw new InvalidCursorError('the cursor does not hold this order\'s values')
  }
  return values as (string | null)[]
}
