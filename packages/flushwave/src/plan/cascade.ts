import type { LinkPurgeOp, Op, RowSet } from './ops.js'

/** The links of rows about to be deleted, on either side of every join table. */
export function purgeOps(rows: RowSet): LinkPurgeOp[] {
  return rows.entity.linkSides.map(({ link, side }) => ({ kind: 'link-purge', link, side, rows }))
}

/**
 * Before rows of `rows.entity` are deleted: children whose many-to-one says `onDelete('cascade')`
 * are deleted (their own children and links first), and those that say `'set null'` are unlinked.
 * Set-based, so children the client never loaded are reached without a read or a round trip.
 * A self-reference that cascades makes the rows below them in the tree go too: their children in
 * other tables and their links are handled here, first (a recursive subquery names them), and the
 * statement that deletes `rows` deletes them with it (see render-write.ts), so that every foreign
 * key is checked once both are gone. A self-reference that says `'set null'` unlinks their children.
 */
export function cascade(rows: RowSet, ops: Op[], doomed: RowSet[]): void {
  if (rows.kind !== 'subtree') {
    for (const field of rows.entity.treeFields) {
      const below = { kind: 'subtree', entity: rows.entity, field, roots: rows } as const
      doomed.push(below)
      cascade(below, ops, doomed)
      ops.push(...purgeOps(below))
    }
  }
  for (const { child, field } of rows.entity.referrers) {
    const children = { kind: 'children', entity: child, field, parent: rows } as const
    if (field.ref!.onDelete === 'set null') ops.push({ kind: 'cascade-null', rows: children })
    if (child === rows.entity) continue // a cascading tree: above
    if (field.ref!.onDelete === 'cascade') {
      doomed.push(children)
      cascade(children, ops, doomed)
      ops.push(...purgeOps(children), { kind: 'cascade-delete', rows: children })
    }
  }
}
