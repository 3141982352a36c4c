import type { FieldMeta } from './meta.js'

/** A number column that `em.increment` can add to: integer, bigint or numeric, not the version nor a generated column. */
export function isCounter(field: FieldMeta): boolean {
  return field.type.add !== undefined && !field.ref && !field.version && !field.generated
}
