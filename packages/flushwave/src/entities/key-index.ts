import { addTo } from '../plan/groups.js'
import type { EntityMeta } from '../schema/meta.js'
import { STATE, type HasState } from './entity-state.js'
import type { ChangeCount, IdentityMap } from './identity-map.js'

/**
 * An EntityManager's entities of one type by the text of one of its unique keys, for `em.upsert`,
 * which must find the entity it already holds with the key it is given. Made from the identity
 * map on first use and again whenever the map says an entity of that type (or any id) may have
 * changed since; an upsert that creates adds its entity itself. Upserting n rows one by one
 * walked every entity of the type n times (docs/design-notes.md, "Upserts find entities through a
 * key index").
 */
export class KeyIndex {
  private readonly byKey = new Map<string, HasState[]>()
  private readonly count: ChangeCount
  private changes = -1
  private allChanges = -1

  constructor(
    map: IdentityMap,
    private readonly meta: EntityMeta,
    /** An entity's key as text, undefined while a part of it is unset (or a reference without an id). */
    private readonly keyOf: (entity: HasState) => string | undefined,
    /**
     * The key has a Date or JSON column, which user code may change in place, past the identity
     * map: the index is made again for every lookup (each a walk of the type, as before it existed).
     */
    private readonly changesInPlace = false,
  ) {
    this.count = map.countChanges(meta)
  }

  /** The tracked entities that had key `wanted` when indexed, in the order the map tracks them. */
  find(map: IdentityMap, wanted: string): readonly HasState[] {
    if (this.changesInPlace || !this.current(map)) this.rebuild(map)
    return this.byKey.get(wanted) ?? []
  }

  /** Call right after creating `entity` (with key `key`), when the index was current before. */
  created(map: IdentityMap, entity: HasState, key: string | undefined): void {
    if (key !== undefined) addTo(this.byKey, key, entity)
    this.stamp(map)
  }

  /** Call right after setting values that are not this key's, when the index was current before. */
  keyUnchanged(map: IdentityMap): void {
    this.stamp(map)
  }

  private current(map: IdentityMap): boolean {
    return this.changes === this.count.changes && this.allChanges === map.allChanges
  }

  private rebuild(map: IdentityMap): void {
    this.byKey.clear()
    for (const entity of map.of(this.meta)) {
      if (entity[STATE].status === 'detached') continue
      const key = this.keyOf(entity)
      if (key !== undefined) addTo(this.byKey, key, entity)
    }
    this.stamp(map)
  }

  private stamp(map: IdentityMap): void {
    this.changes = this.count.changes
    this.allChanges = map.allChanges
  }
}
