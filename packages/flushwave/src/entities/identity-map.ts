import type { EntityMeta } from '../schema/meta.js'
import { STATE, type EntityState, type HasState } from './entity-state.js'

/**
 * One object per row per EntityManager, plus the new entities that have no row yet; and the two
 * short lists a flush diffs instead of walking them all (see flushCandidates).
 */
export class IdentityMap {
  private readonly byId = new Map<EntityMeta, Map<string, HasState>>()
  /**
   * New entities a flush gave an id (`register`) and not yet in `byId`, per type, in the order they
   * got it: filed at the type's next lookup (fileIds). A bulk insert is rarely looked up by id in
   * the same EntityManager, and filing its 100,000 new ids took a flush 31 ms of about 490.
   */
  private readonly unfiled = new Map<EntityMeta, HasState[]>()
  private readonly tracked = new Map<EntityMeta, TrackedList>()
  /**
   * Every entity that is new or removed or was touched, and maybe some that no longer are (a flush
   * took their changes, or it left the map detached): kept by `touch` and `add`, each once
   * (EntityState.pending), pruned by whoever walks it (`prunePending`). An array, not a Set: a
   * 100,000-row create paid two Set insertions an entity, this one and `tracked`'s.
   */
  private pendingList: HasState[] = []
  /** Every entity a Date or JSON value of which user code may hold, so may change in place (see EntityState.watched). */
  readonly watched = new Set<HasState>()
  /**
   * Per type that has a KeyIndex (em.upsert's), a count of the changes that may have changed which
   * of its entities are tracked or what their values are; `everything`, of those that may reach any
   * type's: an id given to a tracked entity changes the keys of the rows that refer to it. Only
   * indexed types are counted: a Map update per add, touch and register cost a measurable share of
   * a large create's own work, which an application that never upserts need not pay
   * (docs/design-notes.md, "Upserts find entities through a key index").
   */
  private counted: Map<EntityMeta, ChangeCount> | undefined
  private everything = 0

  get(meta: EntityMeta, id: unknown): HasState | undefined {
    if (this.unfiled.size !== 0) this.fileIds(meta)
    return this.byId.get(meta)?.get(key(id))
  }

  /** Starts tracking an entity; registers it by id when it has one. */
  add(entity: HasState): void {
    const state = entity[STATE]
    let list = this.tracked.get(state.meta)
    if (!list) this.tracked.set(state.meta, (list = new TrackedList()))
    list.add(entity)
    this.changed(state.meta)
    if (state.id !== undefined) this.byIdSet(entity)
    if (state.status === 'new' || state.status === 'removed' || state.touched) this.listPending(state, entity)
    if (state.watched) this.watched.add(entity)
  }

  /** The entity has a change for the next flush: a property set, a link, an increment. */
  touch(entity: HasState): void {
    entity[STATE].touched = true
    this.pend(entity)
  }

  /** The next flush must look at the entity (touched, or now removed). */
  pend(entity: HasState): void {
    const state = entity[STATE]
    this.listPending(state, entity)
    this.changed(state.meta)
  }

  /** The pending list as it stands (see prunePending). */
  get pending(): readonly HasState[] {
    return this.pendingList
  }

  private listPending(state: EntityState, entity: HasState): void {
    if (state.pending) return
    state.pending = true
    this.pendingList.push(entity)
  }

  /**
   * The pending entities that `keep` says still are (in the order they became pending), the others
   * dropped from the list: they come back with their next touch.
   */
  prunePending(keep: (state: EntityState) => boolean): HasState[] {
    const kept: HasState[] = []
    const list = this.pendingList
    for (let i = 0; i < list.length; i++) {
      const entity = list[i]!
      const state = entity[STATE]
      if (keep(state)) kept.push(entity)
      else state.pending = false
    }
    this.pendingList = kept
    return kept
  }

  /** User code has been handed one of the entity's Date or JSON values: from now on flushes check it for in-place changes. */
  watch(entity: HasState): void {
    const state = entity[STATE]
    if (state.watched) return
    state.watched = true
    if (state.status !== 'detached') this.watched.add(entity)
  }

  /**
   * A tracked entity has its id now: it is found by it, and the rows referring to it have it in
   * their keys. `referredTo: false` for an entity just created, which no row refers to yet.
   */
  register(entity: HasState, referredTo = true): void {
    const meta = entity[STATE].meta
    const list = this.unfiled.get(meta)
    if (list === undefined) this.unfiled.set(meta, [entity])
    else list.push(entity)
    this.changed(meta)
    if (referredTo) this.changedAll()
  }

  /** Files an entity that came with its id (a read row, a provided id) at once, after those waiting before it. */
  private byIdSet(entity: HasState): void {
    const state = entity[STATE]
    if (this.unfiled.size !== 0) this.fileIds(state.meta)
    let ids = this.byId.get(state.meta)
    if (!ids) this.byId.set(state.meta, (ids = new Map()))
    ids.set(key(state.id), entity)
  }

  /** Files the type's entities that got an id since its last lookup, in order: a later one with the same id wins, as it did when filed at once. */
  private fileIds(meta: EntityMeta): void {
    const list = this.unfiled.get(meta)
    if (list === undefined) return
    this.unfiled.delete(meta)
    let ids = this.byId.get(meta)
    if (!ids) this.byId.set(meta, (ids = new Map()))
    for (let i = 0; i < list.length; i++) {
      const entity = list[i]!
      const state = entity[STATE]
      // An id taken back since is not filed (releaseIds deletes the entity first: a safeguard).
      if (state.id !== undefined) ids.set(key(state.id), entity)
    }
  }

  delete(entity: HasState): void {
    const state = entity[STATE]
    this.changed(state.meta)
    this.tracked.get(state.meta)?.delete(entity)
    // Left in the pending list: a detached entity is pruned by its next walk, one added back stays listed once.
    this.watched.delete(entity)
    if (state.id === undefined) return
    if (this.unfiled.size !== 0) this.fileIds(state.meta)
    // A removed entity's id may be registered to the new entity replacing it (a provided id re-used).
    const ids = this.byId.get(state.meta)
    if (ids?.get(key(state.id)) === entity) ids.delete(key(state.id))
  }

  /** Every tracked entity of one type, in the order it became tracked. */
  of(meta: EntityMeta): Iterable<HasState> {
    return this.tracked.get(meta) ?? []
  }

  /** Tracked entities by type, live: for walks that change nothing. */
  byType(): Iterable<[EntityMeta, Iterable<HasState>]> {
    return this.tracked
  }

  /** Entities of `meta` were added, removed or changed (the map's own methods say so themselves). */
  changed(meta: EntityMeta): void {
    if (this.counted === undefined) return
    const count = this.counted.get(meta)
    if (count !== undefined) count.changes++
  }

  /** Entities of any type may have changed: ids, values or membership (a flush's bookkeeping, a rollback). */
  changedAll(): void {
    this.everything++
  }

  /** From now on, counts the changes to entities of `meta` (for a KeyIndex). */
  countChanges(meta: EntityMeta): ChangeCount {
    this.counted ??= new Map()
    let count = this.counted.get(meta)
    if (count === undefined) this.counted.set(meta, (count = { changes: 0 }))
    return count
  }

  get allChanges(): number {
    return this.everything
  }
}

/** How many times entities of one type may have changed (see IdentityMap.countChanges). */
export interface ChangeCount {
  changes: number
}

/**
 * The tracked entities of one type, in the order they became tracked: an array with a hole where
 * one left, each entity knowing its index (EntityState.slot). A Set cost a 100,000-row create as
 * much again as the array. Holes are squeezed out into a new array once they are half of it, so
 * that a walk under way goes on over the array it began with.
 */
class TrackedList implements Iterable<HasState> {
  private items: (HasState | undefined)[] = []
  private holes = 0

  add(entity: HasState): void {
    entity[STATE].slot = this.items.length
    this.items.push(entity)
  }

  delete(entity: HasState): void {
    const state = entity[STATE]
    if (this.items[state.slot] !== entity) return
    this.items[state.slot] = undefined
    state.slot = -1
    if (++this.holes >= 64 && this.holes * 2 >= this.items.length) this.squeeze()
  }

  *[Symbol.iterator](): Iterator<HasState> {
    const items = this.items
    for (let i = 0; i < items.length; i++) {
      const entity = items[i]
      if (entity !== undefined) yield entity
    }
  }

  private squeeze(): void {
    const items: HasState[] = []
    for (const entity of this.items) {
      if (entity === undefined) continue
      entity[STATE].slot = items.length
      items.push(entity)
    }
    this.items = items
    this.holes = 0
  }
}

function key(id: unknown): string {
  return String(id)
}
