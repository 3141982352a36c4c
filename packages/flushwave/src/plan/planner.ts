import type { EntityMeta, ManyToManyMeta } from '../schema/meta.js'
import type { Changes, LinkChange, RowDelete, RowInsert, RowUpdate, Text } from './changes.js'
import type { DeleteOp, InsertOp, LinkDeleteOp, LinkInsertOp, LinkPurgeOp, Op, UpdateOp } from './ops.js'
import type { Plan, Preparation } from './plan.js'

/**
 * Turns changes into one wave of per-table ops in an order that satisfies immediate foreign keys:
 *
 *   inserts (parents first) → link inserts → updates → link deletes → deletes (children first)
 *
 * Updates sit between inserts and deletes because an update may point a row at a new parent, or
 * away from a parent about to be deleted. PostgreSQL runs pipelined statements in the order sent,
 * so ordering costs no round trip: every value is known, so every op goes in the first wave.
 */
export function planFlush(changes: Changes, order: readonly EntityMeta[], preparation: readonly Preparation[] = []): Plan {
  const ops: Op[] = []
  const inserts = byEntity(changes.inserts)
  const updates = byEntity(changes.updates)
  const deletes = byEntity(changes.deletes)
  for (const entity of order) {
    const rows = inserts.get(entity)
    if (rows) ops.push(insertOp(entity, rows))
  }
  const links = order.flatMap((e) => e.manyToMany)
  for (const link of links) {
    const adds = unique(changes.linkAdds.filter((c) => c.link === link))
    if (adds.length > 0) ops.push(linkOp('link-insert', link, adds))
  }
  for (const entity of order) {
    const rows = updates.get(entity)
    if (rows) ops.push(updateOp(entity, rows))
  }
  for (const link of links) {
    const removes = unique(changes.linkRemoves.filter((c) => c.link === link))
    if (removes.length > 0) ops.push(linkOp('link-delete', link, removes))
    ops.push(...purgeOps(link, changes.deletes))
  }
  for (const entity of [...order].reverse()) {
    const rows = deletes.get(entity)
    if (rows) ops.push(deleteOp(entity, rows))
  }
  const waves = ops.length === 0 ? [] : [{ ops, reason: 'every value is known to the client: one pipeline from BEGIN to COMMIT' }]
  return Object.freeze({ waves, preparation })
}

function insertOp(entity: EntityMeta, rows: readonly RowInsert[]): InsertOp {
  return {
    kind: 'insert',
    entity,
    ids: rows.map((r) => r.id),
    columns: entity.fields.map((_, i) => rows.map((r) => r.values[i] ?? null)),
  }
}

function updateOp(entity: EntityMeta, rows: readonly RowUpdate[]): UpdateOp {
  return {
    kind: 'update',
    entity,
    ids: rows.map((r) => r.id),
    columns: entity.fields.map((_, i) => ({
      values: rows.map((r): Text => r.changed.get(i) ?? null),
      set: rows.map((r) => r.changed.has(i)),
    })),
  }
}

function deleteOp(entity: EntityMeta, rows: readonly RowDelete[]): DeleteOp {
  return { kind: 'delete', entity, ids: rows.map((r) => r.id) }
}

function linkOp<K extends 'link-insert' | 'link-delete'>(
  kind: K,
  link: ManyToManyMeta,
  changes: readonly LinkChange[],
): LinkInsertOp | LinkDeleteOp {
  return { kind, link, owners: changes.map((c) => c.owner), targets: changes.map((c) => c.target) }
}

function purgeOps(link: ManyToManyMeta, deletes: readonly RowDelete[]): LinkPurgeOp[] {
  const ops: LinkPurgeOp[] = []
  const owners = deletes.filter((d) => d.entity === link.owner).map((d) => d.id)
  if (owners.length > 0) ops.push({ kind: 'link-purge', link, side: 'owner', ids: owners })
  const targets = deletes.filter((d) => d.entity === link.target).map((d) => d.id)
  if (targets.length > 0) ops.push({ kind: 'link-purge', link, side: 'target', ids: targets })
  return ops
}

function unique(changes: readonly LinkChange[]): LinkChange[] {
  const seen = new Set<string>()
  return changes.filter((c) => {
    const key = `${c.owner}\u0000${c.target}`
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}

function byEntity<R extends { readonly entity: EntityMeta }>(rows: readonly R[]): Map<EntityMeta, R[]> {
  const out = new Map<EntityMeta, R[]>()
  for (const row of rows) {
    const list = out.get(row.entity)
    if (list) list.push(row)
    else out.set(row.entity, [row])
  }
  return out
}
