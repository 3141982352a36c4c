import { EntityStateError } from '../errors.js'
import type { EntityMeta } from '../schema/meta.js'
import type { RowUpdate } from './changes.js'
import type { Op, RowSet } from './ops.js'

/**
 * The rows this flush soft-deletes: updates that set an entity's soft-delete time (`em.remove`
 * does), per entity in `order`. Unsetting it (undeleting) cascades nothing.
 */
export function softDeleted(updates: ReadonlyMap<EntityMeta, readonly RowUpdate[]>, order: readonly EntityMeta[]): RowSet[] {
  const out: RowSet[] = []
  for (const entity of order) {
    const field = entity.softDelete
    const rows = field && updates.get(entity)
    if (!field || !rows) continue
    const index = entity.fields.indexOf(field)
    const ids: string[] = []
    for (const row of rows) {
      const value = row.changed.get(index)
      if (value !== undefined && value !== null) ids.push(row.id)
    }
    if (ids.length > 0) out.push({ kind: 'ids', entity, ids })
  }
  return out
}

/**
 * What soft-deleting `rows` does to the rows that refer to them, as a delete's foreign keys would:
 * children that `onDelete('cascade')` are soft-deleted too (their entity must be soft-deleted:
 * otherwise this refuses the flush before anything is sent), with the time `at`, and their own
 * children in turn, and the rows below them in a cascading tree; `'set null'` children are unlinked;
 * and for every other reference a guard fails the flush when a live row still points at one of
 * them, where a delete would have failed on the foreign key. Guards go last, after every change.
 */
export function softCascade(rows: RowSet, at: string, ops: Op[], guards: Op[]): void {
  const entity = rows.entity
  if (rows.kind !== 'subtree') {
    for (const field of entity.treeFields) {
      const below = { kind: 'subtree', entity, field, roots: rows } as const
      ops.push({ kind: 'cascade-soft-delete', rows: below, at })
      softCascade(below, at, ops, guards)
    }
  }
  for (const { child, field } of entity.referrers) {
    const onDelete = field.ref!.onDelete
    const children = { kind: 'children', entity: child, field, parent: rows } as const
    if (onDelete === 'set null') ops.push({ kind: 'cascade-null', rows: children })
    else if (onDelete === 'cascade') {
      if (child === entity) continue // a cascading tree: above
      if (!child.softDelete) {
        throw new EntityStateError(
          `soft-deleting ${entity.name} would cascade to ${child.name}.${field.prop} (onDelete 'cascade'), and ${child.name} has no soft delete: ` +
            `its rows would stay, pointing at a deleted ${entity.name}. Give ${child.name} a softDelete property, or delete them first; nothing was sent`,
        )
      }
      ops.push({ kind: 'cascade-soft-delete', rows: children, at })
      softCascade(children, at, ops, guards)
    } else guards.push({ kind: 'live-guard', rows: children })
  }
}
