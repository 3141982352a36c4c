import type { InsertOp, Op, UpdateOp } from '../plan/ops.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import { keyText, keyValue } from './keys.js'

/**
 * The rows a flush's statements return, written and read in one place: the renderer asks here what
 * a statement returns, and the flush reads each returned row through the accessors below, never by
 * a position of its own. Every returned row starts with the id of a written row, as text.
 *
 *   counting update (increments)  id, then each counter (counterFields order), then the version,
 *                                 then each generated field (`entity.generated` order)
 *   update of generated columns   id, then each generated field
 *   upsert                        id, then every field (`entity.fields` order), as a read selects them
 *   insert omitting columns       id, then each omitted field (InsertOp.omit order)
 *   cascade, tree delete, unlink  id
 */

/**
 * Whether the op's statement returns rows the flush reads: an update with increments (the new
 * counter values), an upsert (the row it met), and every statement that reaches rows the client did
 * not name (cascades, and deletes of a cascading tree), whose ids let the identity map follow
 * exactly what the server did.
 */
export function returnsRows(op: Op): boolean {
  switch (op.kind) {
    case 'update':
      return op.increments !== undefined || op.entity.generated.length > 0
    case 'insert':
      return op.upsert !== undefined || op.omit !== undefined
    case 'cascade-delete':
    case 'cascade-null':
    case 'cascade-soft-delete':
      return true
    case 'delete':
      return op.entity.treeFields.length > 0
    default:
      return false
  }
}

/**
 * Whether the server's row count is the op's: a version-checked statement is a SELECT over a
 * data-modifying CTE (one row), and it only succeeds when every row was written; with increments
 * it returns the written rows themselves.
 */
export function serverCountsRows(op: Op): boolean {
  return !('versions' in op && op.versions) || returnsRows(op)
}

/** The written row's id as text, for a RETURNING or select list. */
export const idColumn = (e: EntityMeta, alias: string): string => keyText(e, alias)

/** An upsert's RETURNING list: the id, then every field as text where a driver could parse it otherwise. */
export function upsertColumns(e: EntityMeta): string {
  let list = idColumn(e, 't')
  for (const f of e.fields) list += `, ${f.ref ? `t.${f.quoted}::text` : f.type.selectExpr(`t.${f.quoted}`)}`
  return list
}

/** An insert's RETURNING list when it leaves columns to the server: the id, then each of those, as a read selects it. */
export function insertedColumns(e: EntityMeta, omit: readonly number[]): string {
  let list = idColumn(e, 't')
  for (const i of omit) list += `, ${e.fields[i]!.type.selectExpr(`t.${e.fields[i]!.quoted}`)}`
  return list
}

/** An insert's value of the `k`th omitted field (InsertOp.omit), as the server returned it. */
export const returnedOmitted = (row: readonly unknown[], k: number): unknown => row[k + 1]

/**
 * A counting update's lists: what its CTE `w` returns (`k`, `c1`…, `ver`), and what the statement
 * selects from it, in the order the accessors below read.
 */
export function countingColumns(e: EntityMeta, counters: readonly FieldMeta[]): { readonly returning: string[]; readonly selected: string[] } {
  const returning = [`${keyValue(e, 't')} as k`]
  const selected = ['w.k::text']
  counters.forEach((f, c) => {
    returning.push(`${f.type.selectExpr(`t.${f.quoted}`)} as c${c + 1}`)
    selected.push(`w.c${c + 1}`)
  })
  if (e.version) {
    returning.push(`t.${e.version.quoted} as ver`)
    selected.push('w.ver')
  }
  const generated = checkedGenerated(e)
  return { returning: [...returning, ...generated.returning], selected: [...selected, ...generated.selected] }
}

/** The generated fields as a checked update's `w` CTE returns them (`g1`…), and as its final select reads them. */
export function checkedGenerated(e: EntityMeta): { readonly returning: string[]; readonly selected: string[] } {
  return { returning: e.generated.map((f, g) => `${f.type.selectExpr(`t.${f.quoted}`)} as g${g + 1}`), selected: e.generated.map((_, g) => `w.g${g + 1}`) }
}

/**
 * An update's RETURNING list when the entity has generated columns (which may change with the
 * columns they are made of): the key, then each, as a read selects it.
 */
export function generatedColumns(e: EntityMeta): string[] {
  return [idColumn(e, 't'), ...e.generated.map((f) => f.type.selectExpr(`t.${f.quoted}`))]
}

/** An updated row's value of generated field `g` (its index in `entity.generated`). */
export function returnedGenerated(op: UpdateOp, row: readonly unknown[], g: number): unknown {
  const counted = op.increments === undefined ? 0 : op.entity.counters.length + (op.entity.version ? 1 : 0)
  return row[1 + counted + g]
}

/** The id of the row a returned row describes, as the server wrote it (text). */
export const returnedId = (row: readonly unknown[]): unknown => row[0]

/** A counting update's value of counter `c` (its index in `counterFields`). */
export const returnedCounter = (row: readonly unknown[], c: number): unknown => row[c + 1]

/** A counting update's new version (for an entity with one). */
export const returnedVersion = (row: readonly unknown[], counters: number): unknown => row[counters + 1]

/**
 * The columns of an upsert's returned row in a read's order (id, then `entity.fields`), which is
 * what hydrating a row takes: the row itself.
 */
export const upsertedRow = (row: readonly unknown[]): readonly unknown[] => row

/** An upserted row's value of `field` (the id's for 'id'), for matching rows to entities by key. */
export function upsertedValue(op: InsertOp, row: readonly unknown[], field: FieldMeta | 'id'): unknown {
  return field === 'id' ? row[0] : row[op.entity.fields.indexOf(field) + 1]
}
