import type { InsertOp, Op, UpdateOp } from '../plan/ops.js'
import type { Text } from '../plan/changes.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'

/** How a write statement carries its values: one-row or array form, values the rows share, wire types, and texts made once per table. */

/**
 * Whether `op` goes as a one-row statement: scalar binds, no arrays for the server to read and
 * unnest. Request handlers mostly write one row per table, and the server runs such statements
 * faster in this form (docs/design-notes.md, "One-row statements"). Versioned, counting and
 * returning forms keep the array form (their checks are written over the set `d`).
 */
export function writesOneRow(op: Op): boolean {
  switch (op.kind) {
    case 'insert':
      return op.ids.length === 1 && op.upsert === undefined
    case 'update':
      return op.ids.length === 1 && op.increments === undefined && !(op.versions && op.entity.version)
    case 'delete':
      return op.ids.length === 1 && !(op.versions && op.entity.version) && op.entity.treeFields.length === 0
    default:
      return false
  }
}

/**
 * Per field, the value all the op's rows share (rows that don't `set` it don't count), when every
 * field the server decodes (ColumnType.wire: timestamps) has one; otherwise undefined. Then each
 * such field goes once, as a scalar that a subquery decodes once, instead of an array decoded row
 * by row: rows written together mostly share their timestamps (`defaultNow()` in one millisecond).
 * No array goes beside the shared values, not even an empty one: a function scan pays per array
 * (docs/design-notes.md, "Shared timestamps"). A statement whose rows differ keeps the array form:
 * a second shape per op.
 */
export function sharedDecoded(op: InsertOp | UpdateOp): Text[] | undefined {
  const e = op.entity
  if (op.ids.length === 0) return undefined
  let shared: Text[] | undefined
  for (let i = 0; i < e.fields.length; i++) {
    if (!isDecoded(e.fields[i]!)) continue
    const value = op.kind === 'insert' ? sharedValue(op.columns[i]!, undefined) : sharedValue(op.columns[i]!.values, op.columns[i]!.set)
    if (value === undefined) return undefined
    ;(shared ??= [])[i] = value
  }
  return shared
}

/** Whether the server decodes the field's values (ColumnType.wire), which makes it one sharedDecoded looks at. */
export const isDecoded = (f: FieldMeta): boolean => f.type.wire !== undefined && !f.version

/** The shared form with nothing in it, for warm-ups (renderOp). */
export const nothingShared = (e: EntityMeta): Text[] => e.fields.map(() => null)

/** The one value every counted row has (rows whose `set` is false don't count; none: null), or undefined. */
export function sharedValue(values: readonly Text[], set: readonly boolean[] | undefined): Text | undefined {
  let shared: Text | undefined
  for (let i = 0; i < values.length; i++) {
    if (set !== undefined && !set[i]) continue
    const v = values[i] ?? null
    if (shared === undefined) shared = v
    else if (v !== shared) return undefined
  }
  return shared ?? null
}

/** Whether field `f` goes as one shared value (sharedDecoded) rather than an array. */
export const sharedField = (f: FieldMeta, shared: readonly Text[] | undefined): boolean => shared !== undefined && isDecoded(f)

/** The type a field's values travel in within arrays (see ColumnType.wire). */
export const wireType = (f: FieldMeta): string => (f.type.wire ?? f.type).sqlType
/** Whether the field's wire texts are escaped already (Wire.escaped). */
export const wireEscaped = (f: FieldMeta): boolean => f.type.wire?.escaped === true

export const decoded = (f: FieldMeta, expr: string): string => (f.type.wire ? f.type.wire.decode(expr) : expr)

/**
 * A value of an op's column (in the wire's text) as a scalar bind, which goes in the column's own
 * type: a one-row statement's timestamp decoded from int8 ran slower than a plain timestamptz cast
 * (docs/design-notes.md, "Scalar binds in the column's own type").
 */
export const scalarText = (f: FieldMeta, text: Text): Text => (text !== null && f.type.wire ? f.type.wire.toText(text) : text)

/**
 * A statement text that depends on the table alone, made once: a flush of one row in each of 10
 * tables renders 30 statements, and rebuilding their texts each time was a large part of rendering
 * (docs/design-notes.md, "Statement texts made once per table").
 */
export function cached(e: EntityMeta, kind: string, make: () => string): string {
  const byKind = e.cache.texts
  let text = byKind.get(kind)
  if (text === undefined) byKind.set(kind, (text = make()))
  return text
}
