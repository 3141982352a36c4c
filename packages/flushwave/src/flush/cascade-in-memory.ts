import type { EntityMeta, FieldMeta, Referrer } from '../schema/meta.js'
import { STATE, type HasState } from '../entities/entity-state.js'
import type { IdentityMap } from '../entities/identity-map.js'
import { addTo } from '../plan/groups.js'

/**
 * What the cascade statements will do to entities this EntityManager holds: children of deleted
 * entities are deleted too (added to `deleted`; down a cascading tree as well) or have their
 * reference cleared (returned). Only the types a cascade can reach from the deleted ones are
 * walked, each once per reference that reaches it: a flush deleting one row among many loaded rows
 * of types nothing cascades to walks none, where it used to walk them all (docs/design-notes.md,
 * "Cascades walk only the types they reach"). Linear in the entities of the types walked.
 */
export function cascadeInMemory(map: IdentityMap, deleted: HasState[]): [HasState, FieldMeta][] {
  const { cascading, nulling } = cascadesFrom(deleted)
  if (cascading.length + nulling.length === 0) return []
  const gone = new Set(deleted)
  const cascadingFrom = new Map<HasState, HasState[]>()
  for (const { child, field } of cascading) {
    for (const entity of map.of(child)) {
      const state = entity[STATE]
      if (state.status !== 'managed' && state.status !== 'stub') continue
      const parent = state.values[field.prop] as HasState | null | undefined
      if (parent) addTo(cascadingFrom, parent, entity)
    }
  }
  for (let i = 0; i < deleted.length; i++) {
    for (const child of cascadingFrom.get(deleted[i]!) ?? []) {
      if (gone.has(child)) continue
      gone.add(child)
      deleted.push(child)
    }
  }
  const nulled: [HasState, FieldMeta][] = []
  for (const { child, field } of nulling) {
    for (const entity of map.of(child)) {
      const state = entity[STATE]
      if (state.status !== 'managed' && state.status !== 'stub') continue
      if (!gone.has(entity) && gone.has(state.values[field.prop] as HasState)) nulled.push([entity, field])
    }
  }
  return nulled
}

/**
 * The references an `on delete cascade` or `set null` follows from the deleted entities' types:
 * those pointing at a deleted type, or at a type a cascade deletes from, transitively.
 */
export function cascadesFrom(deleted: readonly HasState[]): { cascading: Referrer[]; nulling: Referrer[] } {
  const reached = new Set<EntityMeta>()
  for (let i = 0; i < deleted.length; i++) reached.add(deleted[i]![STATE].meta)
  const cascading: Referrer[] = []
  const nulling: Referrer[] = []
  for (const type of reached) {
    for (const referrer of type.referrers) {
      const onDelete = referrer.field.ref!.onDelete
      if (onDelete === 'set null') nulling.push(referrer)
      else if (onDelete === 'cascade') {
        cascading.push(referrer)
        reached.add(referrer.child) // a Set's for-of visits what is added during it
      }
    }
  }
  return { cascading, nulling }
}
