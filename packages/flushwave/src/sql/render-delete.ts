import { rootIds, type CascadeDeleteOp, type CascadeNullOp, type CascadeSoftDeleteOp, type LiveGuardOp, type UnlinkCycleOp, type DeleteOp, type RowSet } from '../plan/ops.js'
import { idColumn } from './returning.js'
import { arrayLiteral } from './array-literal.js'
import { keyEquals, keyText, keyType, keyValue } from './keys.js'
import { deleteFound, foundInIdOrder, LIVE_MARK, lockedInIdOrder, matches, orBelow, staleCheck, updateFound } from './row-sets.js'
import { cached, writesOneRow } from './write-values.js'

/** DELETE statements, and the cascades and unlinks that go before them. */

export function renderDelete(op: DeleteOp) {
  const e = op.entity
  if (writesOneRow(op)) return { text: cached(e, 'delete-one', () => (e.key ? `delete from ${e.quotedTable} as t where ${keyEquals(e, 't', '$1')}` : `delete from ${e.quotedTable} where ${e.id.quoted} = $1::${e.id.type.sqlType}`)), params: [op.ids[0]!] }
  const roots: RowSet = { kind: 'ids', entity: e, ids: op.ids }
  if (!op.versions || !e.version) {
    const text =
      e.treeFields.length === 0
        ? `with d as (${lockedInIdOrder(e, `unnest($1::${keyType(e)}[]) as a(k)`, 'update')}) delete from ${e.quotedTable} as t using d where ${keyEquals(e, 't', 'd.k')}`
        : deleteFound(e, orBelow(`t.${e.id.quoted} = any($1::${e.id.type.sqlType}[])`, roots))
    return { text, params: [arrayLiteral(op.ids, keyType(e))] }
  }
  const v = e.version
  const a = `with a as (select * from unnest($1::${keyType(e)}[], $2::${v.type.sqlType}[]) as a(k, ver)), `
  const params = [arrayLiteral(op.ids, keyType(e)), arrayLiteral(op.versions, v.type.sqlType)]
  if (e.treeFields.length === 0) {
    return {
      text:
        a +
        `d as (${lockedInIdOrder(e, 'a', 'update')}), ` +
        `w as (delete from ${e.quotedTable} as t using d where ${keyEquals(e, 't', 'd.k')} and t.${v.quoted} = d.ver returning ${keyValue(e, 't')} as k) ` +
        staleCheck(e),
      params,
    }
  }
  // The rows below the removed ones in a cascading tree go in the same statement, unchecked (the
  // version check is for the rows the application removed); every id deleted comes back.
  const removed = orBelow(`exists (select from a where a.k = t.${e.id.quoted} and a.ver = t.${v.quoted})`, roots)
  return {
    text:
      a +
      `d as (${foundInIdOrder(e, removed, 'update')}), ` +
      `w as (delete from ${e.quotedTable} as t using d where t.${e.id.quoted} = d.k returning t.${e.id.quoted} as k) ` +
      `select w.k::text from (${staleCheck(e)}) as x(stale) left join w on x.stale is null`,
    params,
  }
}

export function renderCascadeDelete(op: CascadeDeleteOp) {
  const { entity, field, parent } = op.rows
  return {
    text: deleteFound(entity, orBelow(matches(`t.${field.quoted}`, parent), op.rows)),
    params: [arrayLiteral(rootIds(op.rows))],
  }
}

export function renderCascadeNull(op: CascadeNullOp) {
  const { entity, field, parent } = op.rows
  return {
    text: `${updateFound(entity, matches(`t.${field.quoted}`, parent), `${field.quoted} = null`)} returning ${idColumn(entity, 't')}`,
    params: [arrayLiteral(rootIds(op.rows))],
  }
}

export function renderUnlinkCycle(op: UnlinkCycleOp) {
  const e = op.rows.entity
  const where = op.rows.kind === 'children' ? matches(`t.${op.rows.field.quoted}`, op.rows.parent) : matches(`t.${e.id.quoted}`, op.rows)
  const sets = op.fields.map((f) => `${f.quoted} = null`).join(', ')
  const found = `${where} and (${op.fields.map((f) => `t.${f.quoted} is not null`).join(' or ')})`
  return {
    text: updateFound(e, found, sets),
    params: [arrayLiteral(rootIds(op.rows))],
  }
}

/** Marks the live rows a soft delete cascades to with its time, and returns their ids. */
export function renderCascadeSoftDelete(op: CascadeSoftDeleteOp) {
  const rows = op.rows
  const entity = rows.entity
  const soft = entity.softDelete!
  const reached = rows.kind === 'children' ? matches(`t.${rows.field.quoted}`, rows.parent) : matches(`t.${entity.id.quoted}`, rows)
  return {
    text: `${updateFound(entity, `${reached} and t.${soft.quoted} is null`, `${soft.quoted} = $2::${soft.type.sqlType}`)} returning ${idColumn(entity, 't')}`,
    params: [arrayLiteral(rootIds(rows)), op.at],
  }
}

/**
 * Raises, inside the pipeline, when a live row still refers to one of the soft-deleted parents: the
 * cast of the mark to int4 fails (see staleCheck), and flushError makes it a ForeignKeyViolationError.
 */
export function renderLiveGuard(op: LiveGuardOp) {
  const { entity, field, parent } = op.rows
  const live = entity.softDelete ? ` and t.${entity.softDelete.quoted} is null` : ''
  const mark = `${LIVE_MARK}${entity.table}.${field.column}`.replace(/'/g, "''")
  return {
    text: `select ('${mark}:' || ${keyText(entity, 't')})::int4 from ${entity.quotedTable} as t where ${matches(`t.${field.quoted}`, parent)}${live} limit 1`,
    params: [arrayLiteral(rootIds(op.rows))],
  }
}
