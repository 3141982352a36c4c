import type { LockOp, RowSet } from '../plan/ops.js'
import { idColumn } from './returning.js'
import type { EntityMeta } from '../schema/meta.js'
import { arrayLiteral } from './array-literal.js'
import { keyEquals, keyOrder, keyType, keyValue, rowOrder } from './keys.js'

/** How write statements find the rows they touch and lock them in id order, and how a version check fails a statement. */

/**
 * The rows of `from` (aliased `a`, keyed by `a.k`) whose table row exists, each row locked before
 * the write reads it and all of them in id order. Without this the server locks rows in the order
 * its plan meets them: a hash join or a scan of a small table meets them in heap order, which moves
 * as rows are updated, and two flushes that lock shared rows in two orders deadlock (each deadlock
 * waits out `deadlock_timeout`, 1 s by default: docs/design-notes.md, "Rows locked in id order").
 * The lock is the one the write takes anyway (an update that keeps its key takes `no key
 * update`, which does not block a concurrent insert of a row that references it). An update that
 * changes a unique column a foreign key may reference needs `update` and upgrades to it: that one
 * can still wait on a concurrent transaction that inserted a row referencing it.
 */
export function lockedInIdOrder(e: EntityMeta, from: string, mode: 'no key update' | 'update'): string {
  return `select a.* ${fromInIdOrder(e, from, mode)}`
}

/** lockedInIdOrder after its select list: what a lock of the rows alone (renderLock) selects from. */
export function fromInIdOrder(e: EntityMeta, from: string, mode: 'no key update' | 'update'): string {
  return `from ${from} join ${e.quotedTable} as x on ${keyEquals(e, 'x', 'a.k')} order by ${keyOrder(e, 'a.k')} for ${mode} of x`
}

/**
 * The rows of `e` (aliased `t`) that `condition` selects, each locked in id order as
 * lockedInIdOrder does, keyed by `k`: for writes that find their rows by a reference or by walking
 * a tree (cascades), whose order the client cannot sort.
 */
export function foundInIdOrder(e: EntityMeta, condition: string, mode: 'no key update' | 'update'): string {
  return `select ${keyValue(e, 't')} as k from ${e.quotedTable} as t where ${condition} order by ${rowOrder(e, 't')} for ${mode} of t`
}

/** Deletes the rows `condition` selects, locked in id order first, and returns their ids. */
export function deleteFound(e: EntityMeta, condition: string): string {
  return `with d as (${foundInIdOrder(e, condition, 'update')}) delete from ${e.quotedTable} as t using d where ${keyEquals(e, 't', 'd.k')} returning ${idColumn(e, 't')}`
}

/** Sets `sets` (no key column) on the rows `condition` selects, locked in id order first. */
export function updateFound(e: EntityMeta, condition: string, sets: string): string {
  return `with d as (${foundInIdOrder(e, condition, 'no key update')}) update ${e.quotedTable} as t set ${sets} from d where ${keyEquals(e, 't', 'd.k')}`
}

/**
 * Fails the statement, on the server and inside the pipeline, when any row asked for (`a`) was not
 * written by `w` (its version moved on, or it is gone): the cast of a non-number to int4 raises, so
 * the pipelined COMMIT turns into ROLLBACK and the client never waits to check a row count.
 */
export function staleCheck(e: EntityMeta): string {
  const mark = `'${STALE_MARK}${e.table.replace(/'/g, "''")}:'`
  if (!e.key) return `select (${mark} || string_agg(a.k::text, ',' order by a.k))::int4 from a where a.k not in (select w.k from w)`
  // Key tuples hold commas: listed as a text array of them. `w.k` is each row's key as a text array (keyValue).
  return `select (${mark} || array_agg(a.k order by ${keyOrder(e, 'a.k')})::text)::int4 from a where a.k::text[] not in (select w.k from w)`
}

/** Prefix of the error that a version check raises; the executor turns it into OptimisticLockError. */
export const STALE_MARK = 'flushwave-stale:'

/** Prefix of the error a soft delete's guard raises (`<table>.<column>:<id>`): a ForeignKeyViolationError. */
export const LIVE_MARK = 'flushwave-live-reference:'

/** Locks the rows, in id order, in the mode an update takes (lockedInIdOrder); selects no column. */
export function renderLock(op: LockOp) {
  const e = op.entity
  return {
    text: `select ${fromInIdOrder(e, `unnest($1::${keyType(e)}[]) as a(k)`, 'no key update')}`,
    params: [arrayLiteral(op.ids, keyType(e))],
  }
}

/**
 * `condition`, or, when the entity's self-reference cascades, also the rows below `rows` in the
 * tree: one statement deletes both, so every foreign key is checked once all are gone.
 */
export function orBelow(condition: string, rows: RowSet): string {
  const below = rows.entity.treeFields.map((field) => matches(`t.${rows.entity.id.quoted}`, { kind: 'subtree', entity: rows.entity, field, roots: rows }))
  return below.length === 0 ? condition : `(${[condition, ...below].join(' or ')})`
}

/**
 * `column` refers to one of `rows`: `= any($1)` for ids, a subquery per level for children, and a
 * recursive one for the rows below roots in a tree (`union`: a cycle in the data cannot loop it).
 */
export function matches(column: string, rows: RowSet, depth = 1): string {
  if (rows.kind === 'ids') return `${column} = any($1::${rows.entity.id.type.sqlType}[])`
  if (rows.kind === 'subtree') {
    const { entity, field, roots } = rows
    const [tree, row, id] = [`s${depth}`, `r${depth}`, entity.id.quoted]
    const notRoot = `not ${matches(`${row}.${id}`, roots, depth + 1)}`
    return (
      `${column} in (with recursive ${tree}(id) as (` +
      `select ${row}.${id} from ${entity.quotedTable} as ${row} where ${matches(`${row}.${field.quoted}`, roots, depth + 1)} and ${notRoot} ` +
      `union select ${row}.${id} from ${entity.quotedTable} as ${row} join ${tree} on ${row}.${field.quoted} = ${tree}.id where ${notRoot}` +
      `) select id from ${tree})`
    )
  }
  const alias = `c${depth}`
  return (
    `${column} in (select ${alias}.${rows.entity.id.quoted} from ${rows.entity.quotedTable} as ${alias} ` +
    `where ${matches(`${alias}.${rows.field.quoted}`, rows.parent, depth + 1)})`
  )
}
