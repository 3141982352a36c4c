import type { EntityMeta, ManyToManyMeta } from '../schema/meta.js'
import type { LinkPurgeOp, Op, RowSet } from './ops.js'

/** The links of rows about to be deleted, on either side of every join table. */
export function purgeOps(rows: RowSet, links: readonly ManyToManyMeta[]): LinkPurgeOp[] {
  const ops: LinkPurgeOp[] = []
  for (const link of links) {
    if (link.owner === rows.entity) ops.push({ kind: 'link-purge', link, side: 'owner', rows })
    if (link.target === rows.entity) ops.push({ kind: 'link-purge', link, side: 'target', rows })
  }
  return ops
}

/**
 * Before rows of `rows.entity` are deleted: children whose many-to-one says `onDelete('cascade')`
 * are deleted (their own children and links first), and those that say `'set null'` are unlinked.
 * Set-based, so children the client never loaded are reached without a read or a round trip.
 * Self-references are left to the database's own ON DELETE action.
 */
export function cascade(rows: RowSet, order: readonly EntityMeta[], ops: Op[], doomed: RowSet[]): void {
  const links = order.flatMap((e) => e.manyToMany)
  for (const child of [...order].reverse()) {
    if (child === rows.entity) continue
    for (const field of child.fields) {
      if (field.ref?.target !== rows.entity) continue
      const children = { kind: 'children', entity: child, field, parent: rows } as const
      if (field.ref.onDelete === 'set null') ops.push({ kind: 'cascade-null', rows: children })
      if (field.ref.onDelete === 'cascade') {
        doomed.push(children)
        cascade(children, order, ops, doomed)
        ops.push(...purgeOps(children, links), { kind: 'cascade-delete', rows: children })
      }
    }
  }
}
