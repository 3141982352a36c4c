import type { EntityMeta, FieldMeta } from './meta.js'

/** A number column that `em.increment` can add to: integer, bigint or numeric, not the version. */
export function isCounter(field: FieldMeta): boolean {
  return field.type.add !== undefined && !field.ref && !field.version
}

const countersByMeta = new WeakMap<EntityMeta, readonly FieldMeta[]>()

/** The entity's counter fields, in `meta.fields` order: the columns an UPDATE with increments reads back. */
export function counterFields(meta: EntityMeta): readonly FieldMeta[] {
  let fields = countersByMeta.get(meta)
  if (fields === undefined) countersByMeta.set(meta, (fields = meta.fields.filter(isCounter)))
  return fields
}
