import type { EntityMeta } from '../schema/meta.js'
import { STATE, type HasState } from './entity-state.js'

/** One object per row per EntityManager, plus the new entities that have no row yet. */
export class IdentityMap {
  private readonly byId = new Map<EntityMeta, Map<string, HasState>>()
  private readonly tracked = new Map<EntityMeta, Set<HasState>>()

  get(meta: EntityMeta, id: unknown): HasState | undefined {
    return this.byId.get(meta)?.get(key(id))
  }

  /** Starts tracking an entity; registers it by id when it has one. */
  add(entity: HasState): void {
    const state = entity[STATE]
    let set = this.tracked.get(state.meta)
    if (!set) this.tracked.set(state.meta, (set = new Set()))
    set.add(entity)
    if (state.id !== undefined) this.register(entity)
  }

  register(entity: HasState): void {
    const state = entity[STATE]
    let ids = this.byId.get(state.meta)
    if (!ids) this.byId.set(state.meta, (ids = new Map()))
    ids.set(key(state.id), entity)
  }

  delete(entity: HasState): void {
    const state = entity[STATE]
    this.tracked.get(state.meta)?.delete(entity)
    if (state.id === undefined) return
    // A removed entity's id may be registered to the new entity replacing it (a provided id re-used).
    const ids = this.byId.get(state.meta)
    if (ids?.get(key(state.id)) === entity) ids.delete(key(state.id))
  }

  /** Every tracked entity of one type, in the order it became tracked. */
  of(meta: EntityMeta): Iterable<HasState> {
    return this.tracked.get(meta) ?? []
  }

  /** Tracked entities by type, live: for walks that change nothing. */
  byType(): Iterable<[EntityMeta, ReadonlySet<HasState>]> {
    return this.tracked
  }

  /** Every tracked entity, in a fresh array (so callers may change the map while they go). */
  all(): HasState[] {
    const out: HasState[] = []
    for (const set of this.tracked.values()) for (const entity of set) out.push(entity)
    return out
  }
}

function key(id: unknown): string {
  return String(id)
}
