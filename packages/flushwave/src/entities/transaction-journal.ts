import type { EntityMeta } from '../schema/meta.js'
import { STATE, type EntityState, type HasState } from './entity-state.js'
import type { IdentityMap } from './identity-map.js'
import { ManyToManyCollection } from './many-to-many.js'
import { forgetCounters } from './counters.js'
import { readAllValues } from './entity-class.js'
import { OneToManyCollection } from './one-to-many.js'

/** An entity as it was before `em.transaction()` first changed it. */
interface Saved {
  readonly status: EntityState['status']
  readonly id: unknown
  readonly values: Record<string, unknown>
  readonly snapshot: Record<string, unknown> | undefined
  readonly touched: boolean
  readonly pins: EntityState['pins']
  readonly increments: EntityState['increments']
  readonly poolId: boolean
  readonly collections: ReadonlyMap<unknown, SavedCollection>
}

type SavedCollection =
  | { readonly kind: 'one-to-many'; readonly loaded: boolean }
  | { readonly kind: 'many-to-many'; readonly persisted: Set<HasState> | undefined; readonly added: Set<HasState>; readonly removed: Set<HasState> }

/** Entered the EntityManager inside the transaction: created, referenced or read there. */
const ENTERED = 'entered'

/**
 * What `em.transaction()` must put back when its callback throws: every entity it changed, as it was
 * before the first change (values, status, id, snapshot, collections), and every entity that entered
 * the EntityManager inside it, detached (what it was read as may be the transaction's own writes).
 * Entities are saved when first changed, not when the transaction starts: a transaction costs
 * nothing per entity it does not touch.
 */
export class TransactionJournal {
  private readonly saved = new Map<HasState, Saved | typeof ENTERED>()
  /** Entities whose pending increments a flush inside sent. */
  private readonly sent = new Set<HasState>()

  /** A flush inside the transaction took the entity's pending increments (saved before). */
  incrementsSent(entity: HasState): void {
    this.sent.add(entity)
  }

  /** Call before anything of the entity's state changes (a setter, remove, a flush's bookkeeping, a populate). */
  save(entity: HasState): void {
    if (this.saved.has(entity)) return
    const s = entity[STATE]
    // Times held as numbers become Dates now, shared by both copies: one read inside and changed
    // in place stays the entity's after a rollback, as any Date would.
    readAllValues(s)
    const collections = new Map<unknown, SavedCollection>()
    for (const c of s.collections?.values() ?? []) {
      if (c instanceof OneToManyCollection) collections.set(c, { kind: 'one-to-many', loaded: c.loaded })
      else if (c instanceof ManyToManyCollection) {
        collections.set(c, { kind: 'many-to-many', persisted: c.persisted && new Set(c.persisted), added: new Set(c.added), removed: new Set(c.removed) })
      }
    }
    this.saved.set(entity, {
      status: s.status,
      id: s.id,
      values: { ...s.values },
      snapshot: s.snapshot && { ...s.snapshot },
      touched: s.touched,
      pins: s.pins,
      increments: s.increments && new Map(s.increments),
      poolId: s.poolId,
      collections,
    })
  }

  /** The entity was created, referenced or read inside the transaction. */
  entered(entity: HasState): void {
    if (!this.saved.has(entity)) this.saved.set(entity, ENTERED)
  }

  /**
   * Puts every saved entity back (telling `restored` of each) and detaches every entity that
   * entered. Sequence ids that flushes inside the transaction assigned go to `giveBack` (the rollback
   * means no row kept them), unless the transaction's outcome is unknown: then they stay with their
   * entities, so that a retry fails as a duplicate rather than writing the rows twice.
   */
  restore(map: IdentityMap, giveBack: ((meta: EntityMeta, ids: string[]) => void) | undefined, restored: (entity: HasState) => void): void {
    const freed = new Map<EntityMeta, string[]>()
    const free = (s: EntityState, before: unknown) => {
      // An upserted entity may hold an existing row's id: never the pool's to take back.
      if (giveBack === undefined || s.meta.id.strategy !== 'sequence' || s.id === undefined || before !== undefined || s.upsert !== undefined) return
      const ids = freed.get(s.meta)
      if (ids) ids.push(String(s.id))
      else freed.set(s.meta, [String(s.id)])
    }
    // Out of the identity map first, all of them: an entity restored to its old id must not be
    // unregistered by another that held that key inside the transaction.
    for (const entity of this.saved.keys()) map.delete(entity)
    for (const [entity, saved] of this.saved) {
      const s = entity[STATE]
      if (saved === ENTERED) {
        // Only an entity created inside had its id from this transaction's flushes (one read inside has its row's).
        if (s.createdHere) free(s, undefined)
        s.status = 'detached'
        continue
      }
      free(s, saved.id)
      for (const key of Object.keys(s.values)) if (!(key in saved.values)) delete s.values[key]
      Object.assign(s.values, saved.values)
      restored(entity)
      Object.assign(s, { status: saved.status, id: giveBack === undefined && saved.id === undefined ? s.id : saved.id, snapshot: saved.snapshot, touched: saved.touched, pins: saved.pins, increments: saved.increments && new Map(saved.increments) })
      // An id kept because the transaction may have committed is no longer the pool's to take back.
      s.poolId = giveBack === undefined ? false : saved.poolId
      for (const c of s.collections?.values() ?? []) restoreCollection(c, saved.collections.get(c), s.createdHere)
      // The transaction may have committed: increments its flushes sent must not be sent again.
      if (giveBack === undefined && this.sent.has(entity) && s.increments) {
        forgetCounters(entity, s.increments.keys())
        s.increments = undefined
      }
      if (s.status !== 'detached') map.add(entity)
    }
    // Ids and values went back, of rows others refer to as well.
    map.changedAll()
    for (const [meta, ids] of freed) giveBack?.(meta, ids)
  }
}

function restoreCollection(c: unknown, saved: SavedCollection | undefined, createdHere: boolean): void {
  if (c instanceof OneToManyCollection) c.loaded = saved?.kind === 'one-to-many' ? saved.loaded : createdHere
  else if (c instanceof ManyToManyCollection) {
    const was = saved?.kind === 'many-to-many' ? saved : { persisted: createdHere ? new Set<HasState>() : undefined, added: new Set<HasState>(), removed: new Set<HasState>() }
    c.persisted = was.persisted && new Set(was.persisted)
    c.added.clear()
    c.removed.clear()
    for (const x of was.added) c.added.add(x)
    for (const x of was.removed) c.removed.add(x)
  }
}
