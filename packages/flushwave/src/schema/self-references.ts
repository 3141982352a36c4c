import type { EntityMeta, FieldMeta } from './meta.js'

const selfByMeta = new WeakMap<EntityMeta, readonly FieldMeta[]>()
const treeByMeta = new WeakMap<EntityMeta, readonly FieldMeta[]>()

/** The references of an entity to its own table, in `meta.fields` order. */
export function selfReferences(meta: EntityMeta): readonly FieldMeta[] {
  let fields = selfByMeta.get(meta)
  if (fields === undefined) selfByMeta.set(meta, (fields = meta.fields.filter((f) => f.ref?.target === meta)))
  return fields
}

/**
 * The self-references that cascade: deleting a row deletes the tree below it. Cached: executors
 * ask it of every delete they send (see returnsRows).
 */
export function treeFields(meta: EntityMeta): readonly FieldMeta[] {
  let fields = treeByMeta.get(meta)
  if (fields === undefined) treeByMeta.set(meta, (fields = selfReferences(meta).filter((f) => f.ref!.onDelete === 'cascade')))
  return fields
}
