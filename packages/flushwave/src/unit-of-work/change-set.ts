import { EntityStateError } from '../errors.js'
import type { Changes, LinkChange, RowDelete, RowInsert, RowUpdate, Text } from '../plan/changes.js'
import { writeText } from '../schema/column-types.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import { label, STATE, type EntityState, type HasState } from './entity-state.js'
import type { IdentityMap } from './identity-map.js'
import { isChanged } from './dirty.js'
import { ManyToManyCollection } from './many-to-many.js'

/** What a flush writes, and what to record once it committed. */
export interface ChangeSet {
  readonly changes: Changes
  /** Per written entity: the snapshot entries it will have after commit. */
  readonly written: ReadonlyMap<HasState, Record<string, unknown>>
  readonly inserted: readonly HasState[]
  /** Removed entities, and loaded ones a cascade deletes with them. */
  readonly deleted: readonly HasState[]
  /** Loaded entities whose reference a `'set null'` cascade clears. */
  readonly nulled: readonly (readonly [HasState, FieldMeta])[]
  readonly collections: readonly ManyToManyCollection[]
}

/** New sequence-id entities among `entities`: they need ids from the pool before the changes can be computed. */
export function needingIds(entities: readonly HasState[]): Map<EntityMeta, HasState[]> {
  const out = new Map<EntityMeta, HasState[]>()
  for (const entity of entities) {
    const state = entity[STATE]
    if (state.status !== 'new' || state.id !== undefined) continue
    let list = out.get(state.meta)
    if (!list) out.set(state.meta, (list = []))
    list.push(entity)
  }
  return out
}

/**
 * Diffs the flush's candidates (see flushCandidates) against their snapshots. Pure: it reads states
 * and changes none. `map` is read only for cascades; `assigned` holds the ids a flush took from
 * the pool for new entities.
 */
export function computeChanges(map: IdentityMap, candidates: readonly HasState[], assigned: ReadonlyMap<HasState, string>): ChangeSet {
  const idText = (state: EntityState, entity: HasState): string => {
    if (state.id !== undefined) return state.meta.id.type.toText(state.id)
    const id = assigned.get(entity)
    if (id === undefined) throw new EntityStateError(`${label(state)} was created while this flush was running; flush again`)
    return id
  }
  const fieldText = (state: EntityState, field: FieldMeta, value: unknown): Text => {
    if (value === null) return null
    if (!field.ref) return writeText(field.type, value)
    const target = (value as HasState)[STATE]
    if (target.status === 'removed' || target.status === 'detached') {
      throw new EntityStateError(`${label(state)}.${field.prop} refers to ${label(target)}, which is ${target.status}`)
    }
    return idText(target, value as HasState)
  }
  const inserts: RowInsert[] = []
  const updates: RowUpdate[] = []
  const deletes: RowDelete[] = []
  const linkAdds: LinkChange[] = []
  const linkRemoves: LinkChange[] = []
  const written = new Map<HasState, Record<string, unknown>>()
  const inserted: HasState[] = []
  const deleted: HasState[] = []
  const collections: ManyToManyCollection[] = []

  for (const entity of candidates) {
    const state = entity[STATE]
    const meta = state.meta
    if (state.status === 'new' && state.id === undefined && !assigned.has(entity)) continue
    if (state.status === 'removed') {
      deletes.push({ entity: meta, id: idText(state, entity), ...(meta.version ? { version: expectedVersion(state) } : {}) })
      deleted.push(entity)
      continue
    }
    const snapshot: Record<string, unknown> = {}
    if (state.status === 'new') {
      const values = meta.fields.map((field) => {
        if (!(field.prop in state.values)) throw new EntityStateError(`${label(state)}.${field.prop} is required: set it before flushing`)
        const value = state.values[field.prop]
        const text = fieldText(state, field, value)
        snapshot[field.prop] = field.ref ? value : text
        return text
      })
      inserts.push({ entity: meta, id: idText(state, entity), values })
      inserted.push(entity)
      written.set(entity, snapshot)
    } else {
      const changed = new Map<number, Text>()
      meta.fields.forEach((field, i) => {
        if (!isChanged(state, field)) return
        const value = state.values[field.prop]
        const text = fieldText(state, field, value)
        changed.set(i, text)
        snapshot[field.prop] = field.ref ? value : text
      })
      if (changed.size > 0) {
        if (meta.version) {
          const version = expectedVersion(state)
          snapshot[meta.version.prop] = String(Number(version) + 1)
          updates.push({ entity: meta, id: idText(state, entity), changed, version })
        } else {
          updates.push({ entity: meta, id: idText(state, entity), changed })
        }
        written.set(entity, snapshot)
      }
    }
    for (const collection of state.collections?.values() ?? []) {
      if (!(collection instanceof ManyToManyCollection)) continue
      if (collection.added.size + collection.removed.size === 0) continue
      const owner = idText(state, entity)
      for (const target of collection.added) {
        const t = target[STATE]
        if (t.status === 'removed' || t.status === 'detached') continue
        linkAdds.push({ link: collection.meta, owner, target: idText(t, target) })
      }
      for (const target of collection.removed) {
        if (target[STATE].status !== 'managed' && target[STATE].status !== 'stub') continue // purged with it
        linkRemoves.push({ link: collection.meta, owner, target: idText(target[STATE], target) })
      }
      collections.push(collection)
    }
  }
  const nulled = deleted.length > 0 ? cascadeInMemory(map, deleted) : []
  return { changes: { inserts, updates, deletes, linkAdds, linkRemoves }, written, inserted, deleted, nulled, collections }
}

/**
 * What the cascade statements will do to entities this EntityManager holds: children of deleted
 * entities are deleted too (added to `deleted`) or have their reference cleared (returned).
 */
function cascadeInMemory(map: IdentityMap, deleted: HasState[]): [HasState, FieldMeta][] {
  const gone = new Set(deleted)
  const alive = map.all().filter((e) => e[STATE].status === 'managed' || e[STATE].status === 'stub')
  for (let grew = true; grew; ) {
    grew = false
    for (const entity of alive) {
      if (gone.has(entity)) continue
      const state = entity[STATE]
      const doomed = state.meta.fields.some(
        (f) => f.ref?.onDelete === 'cascade' && f.ref.target !== state.meta && gone.has(state.values[f.prop] as HasState),
      )
      if (!doomed) continue
      gone.add(entity)
      deleted.push(entity)
      grew = true
    }
  }
  const nulled: [HasState, FieldMeta][] = []
  for (const entity of alive) {
    if (gone.has(entity)) continue
    for (const f of entity[STATE].meta.fields) {
      if (f.ref?.onDelete === 'set null' && gone.has(entity[STATE].values[f.prop] as HasState)) nulled.push([entity, f])
    }
  }
  return nulled
}

/** The version a versioned row was read with; a reference that was never read has none to check. */
function expectedVersion(state: EntityState): string {
  const version = state.snapshot?.[state.meta.version!.prop]
  if (typeof version !== 'string') {
    throw new EntityStateError(`${label(state)} has a version column but was never loaded: load it before changing or removing it`)
  }
  return version
}
