import type { EntityMeta } from '../schema/meta.js'

/**
 * ` and t.deleted_at is null` for an entity with soft delete, '' for others: what collections and
 * their loads add, so that they hold live rows only (conditions use entity-manager/where.ts's liveOf).
 */
export function live(entity: EntityMeta, alias: string): string {
  return entity.softDelete ? ` and ${alias}.${entity.softDelete.quoted} is null` : ''
}
