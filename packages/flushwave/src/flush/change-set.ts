import { EntityStateError } from '../errors.js'
import { newRows, type Changes, type LinkChange, type NewRows, type RowDelete, type RowUpdate, type RowUpsert, type Text } from '../plan/changes.js'
import { writeText } from '../schema/column-types.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import { label, STATE, type EntityState, type HasState } from '../entities/entity-state.js'
import type { IdentityMap } from '../entities/identity-map.js'
import { isChanged } from '../entities/dirty.js'
import { ManyToManyCollection } from '../entities/many-to-many.js'
import { cascadeInMemory } from './cascade-in-memory.js'
import { keyed, orderKeyChanges, replacedKeys } from './unique-keys.js'
import { tupleOfValues } from '../entities/composite-key.js'

/** What a flush writes, and what to record once it committed. */
export interface ChangeSet {
  readonly changes: Changes
  /** Per updated entity (or one with increments): the snapshot entries it will have after commit. */
  readonly written: ReadonlyMap<HasState, Record<string, unknown>>
  readonly inserted: readonly HasState[]
  /** Per inserted entity, at the same index: its snapshot after commit (an array, not a Map entry per new row). */
  readonly insertedSnapshots: readonly Record<string, unknown>[]
  /** Removed entities, and loaded ones a cascade deletes with them. */
  readonly deleted: readonly HasState[]
  /** Loaded entities whose reference a `'set null'` cascade clears. */
  readonly nulled: readonly (readonly [HasState, FieldMeta])[]
  readonly collections: readonly ManyToManyCollection[]
  /**
   * The pending increments this flush sends, by entity (in `written` too). The flush takes them off
   * the entities when it sends them, and puts them back if the flush fails.
   */
  readonly counted: ReadonlyMap<HasState, ReadonlyMap<FieldMeta, unknown>>
  /** The inserted entities that are upserts (`em.upsert`): they take their row's id after commit. */
  readonly upserted: readonly HasState[]
  /** Inserted entities (not upserts) whose INSERT omits columns: they take the server's values after commit. */
  readonly serverFilled: readonly HasState[]
}

/** New sequence-id entities among `entities`: they need ids from the pool before the changes can be computed. */
export function needingIds(entities: readonly HasState[]): Map<EntityMeta, HasState[]> {
  const out = new Map<EntityMeta, HasState[]>()
  for (let e = 0; e < entities.length; e++) {
    const entity = entities[e]!
    const state = entity[STATE]
    if (state.status !== 'new' || state.id !== undefined || state.meta.key) continue
    let list = out.get(state.meta)
    if (!list) out.set(state.meta, (list = []))
    list.push(entity)
  }
  return out
}

/**
 * New composite-key entities whose key waited for a target's id (see UnitOfWork.composedId): their
 * tuples, from the ids the flush took, become their `flushId` and join `assigned`. A key this
 * EntityManager holds already, or one whose target gets its id only from the flush's own upsert, is
 * refused before anything is sent.
 */
export function composeKeys(map: IdentityMap, candidates: readonly HasState[], assigned: HasState[]): void {
  const composed = new Map<EntityMeta, Set<string>>()
  for (let c = 0; c < candidates.length; c++) {
    const entity = candidates[c]!
    const state = entity[STATE]
    if (state.status !== 'new' || state.id !== undefined || !state.meta.key) continue
    const tuple = tupleOfValues(state.meta, state.values, true)
    if (tuple === undefined) {
      const waiting = state.meta.key.find((f) => f.ref && (state.values[f.prop] as HasState)[STATE].id === undefined && (state.values[f.prop] as HasState)[STATE].flushId === undefined)!
      throw upsertedTarget(`${label(state)}.${waiting.prop}`, (state.values[waiting.prop] as HasState)[STATE])
    }
    const existing = map.get(state.meta, tuple)
    if (existing && existing !== entity && existing[STATE].status !== 'removed') throw new EntityStateError(`${label(existing[STATE])} is already in this EntityManager`)
    let seen = composed.get(state.meta)
    if (!seen) composed.set(state.meta, (seen = new Set()))
    if (seen.has(tuple)) throw new EntityStateError(`two new ${state.meta.name} entities have the key ${label({ ...state, id: tuple })}`)
    seen.add(tuple)
    state.flushId = tuple
    assigned.push(entity)
  }
}

/**
 * Diffs the flush's candidates (see flushCandidates) against their snapshots. Pure: it reads states
 * and changes none. `map` is read only for cascades, the types a cascade can reach (EntityMeta.referrers).
 * New entities without an id go with the `flushId` the flush took for them; those without one
 * either (a preview, or created while the flush took ids) are left out.
 */
export function computeChanges(map: IdentityMap, candidates: readonly HasState[]): ChangeSet {
  const idText = (state: EntityState): string => {
    if (state.id !== undefined) return state.meta.id.type.toText(state.id)
    if (state.flushId === undefined) throw new EntityStateError(`${label(state)} was created while this flush was running; flush again`)
    return state.flushId
  }
  const fieldText = (state: EntityState, field: FieldMeta, value: unknown): Text => {
    // undefined: a column left to the server, whose value (say, in a unique key) is not known yet.
    if (value === null || value === undefined) return null
    if (!field.ref) return writeText(field.type, value)
    const target = (value as HasState)[STATE]
    if (target.status === 'removed' || target.status === 'detached') {
      throw new EntityStateError(`${label(state)}.${field.prop} refers to ${label(target)}, which is ${target.status}`)
    }
    if (target.status === 'new' && target.upsert) throw upsertedTarget(`${label(state)}.${field.prop}`, target)
    return idText(target)
  }
  const inserts = new Map<EntityMeta, NewRows>()
  const upserts: RowUpsert[] = []
  const updates: RowUpdate[] = []
  const deletes: RowDelete[] = []
  const linkAdds: LinkChange[] = []
  const linkRemoves: LinkChange[] = []
  const written = new Map<HasState, Record<string, unknown>>()
  /** Updated entities of types with a unique key (or provided ids), and their row's index in `updates`. */
  const keyedUpdates: [HasState, number][] = []
  const inserted: HasState[] = []
  const insertedSnapshots: Record<string, unknown>[] = []
  const deleted: HasState[] = []
  const collections: ManyToManyCollection[] = []
  const counted = new Map<HasState, ReadonlyMap<FieldMeta, unknown>>()
  const upserted: HasState[] = []
  const serverFilled: HasState[] = []

  // The new rows' table, looked up once per run of candidates of one type (they mostly come so).
  let table: NewRows | undefined
  // Tables with server-filled columns: their new rows by the set of those they leave unset.
  let grouped: Map<EntityMeta, Map<number, NewRows>> | undefined
  // Indexed loops over entities here and in the flush's other per-entity passes: for-of over these
  // arrays allocated an iterator result per entity (docs/design-notes.md, "Indexed loops on
  // per-entity paths").
  for (let c = 0; c < candidates.length; c++) {
    const entity = candidates[c]!
    const state = entity[STATE]
    const meta = state.meta
    if (state.status === 'new' && state.id === undefined && state.flushId === undefined) continue
    if (state.status === 'removed') {
      const self = meta.selfReferences
      deletes.push({
        entity: meta,
        id: idText(state),
        ...(meta.version ? { version: expectedVersion(state) } : {}),
        ...(self.length > 0 ? { parents: parentsRead(state, self, idText) } : {}),
      })
      deleted.push(entity)
      continue
    }
    const snapshot: Record<string, unknown> = {}
    if (state.status === 'new') {
      // A plain loop, no closure per row: this runs once per new row. Its values go straight onto
      // the table's columns (an upsert's into a row of its own); a throw drops the whole change set.
      const fields = meta.fields
      const upsert = state.upsert
      let columns: Text[][] | undefined
      let values: Text[] | undefined
      let omit: number[] | undefined
      if (upsert !== undefined) values = new Array<Text>(fields.length)
      else {
        if (meta.serverValued.length > 0) table = serverGroup((grouped ??= new Map()), state)
        else if (table?.entity !== meta) {
          table = inserts.get(meta)
          if (!table) inserts.set(meta, (table = newRows(meta)))
        }
        columns = table.columns
      }
      for (let i = 0; i < fields.length; i++) {
        const field = fields[i]!
        const value = state.values[field.prop]
        if (value === undefined) {
          // Left to the server: its table's group omits the column (serverGroup), an upsert its own.
          if (field.serverDefault !== undefined || field.generated !== undefined) {
            if (values) (omit ??= []).push(i)
            continue
          }
          throw new EntityStateError(`${label(state)}.${field.prop} is required: set it before flushing`)
        }
        const text = fieldText(state, field, value)
        snapshot[field.prop] = field.ref ? value : text
        if (columns) columns[i]!.push(text)
        else values![i] = text
      }
      const id = idText(state)
      if (upsert === undefined) {
        table!.ids.push(id)
        if (table!.omit !== undefined) serverFilled.push(entity)
      } else {
        const spec = { key: upsert.key, update: meta.fields.filter((f) => upsert.update.has(f)) }
        upserts.push(omit ? { entity: meta, id, values: values!, upsert: spec, omit } : { entity: meta, id, values: values!, upsert: spec })
        upserted.push(entity)
      }
      inserted.push(entity)
      insertedSnapshots.push(snapshot)
    } else {
      const changed = new Map<number, Text>()
      const fields = meta.fields
      for (let i = 0; i < fields.length; i++) {
        const field = fields[i]!
        if (!isChanged(state, field) || field.generated !== undefined) continue // a generated JSON value changed in place is not written
        const value = state.values[field.prop]
        const text = fieldText(state, field, value)
        changed.set(i, text)
        snapshot[field.prop] = field.ref ? value : text
      }
      // Counters and the version of a row with increments are read back from the UPDATE.
      const increments = state.increments && incrementTexts(meta, state.increments)
      if (increments) counted.set(entity, state.increments!)
      if (changed.size > 0) {
        if (keyed(meta)) keyedUpdates.push([entity, updates.length])
        if (meta.version) {
          const version = expectedVersion(state)
          if (!increments) snapshot[meta.version.prop] = String(Number(version) + 1)
          updates.push({ entity: meta, id: idText(state), changed, version, ...(increments && { increments }) })
        } else {
          updates.push({ entity: meta, id: idText(state), changed, ...(increments && { increments }) })
        }
        written.set(entity, snapshot)
      } else if (increments) {
        updates.push({ entity: meta, id: idText(state), changed, increments })
        written.set(entity, snapshot)
      }
    }
    if (state.collections === undefined) continue
    for (const collection of state.collections.values()) {
      if (!(collection instanceof ManyToManyCollection)) continue
      if (collection.added.size + collection.removed.size === 0) continue
      if (state.status === 'new' && state.upsert && collection.added.size > 0) throw upsertedTarget(`${label(state)}.${collection.meta.prop}`, state)
      const owner = idText(state)
      for (const target of collection.added) {
        const t = target[STATE]
        if (t.status === 'removed' || t.status === 'detached') continue
        if (t.status === 'new' && t.upsert) throw upsertedTarget(`${label(state)}.${collection.meta.prop}`, t)
        const fresh = state.status === 'new' || t.status === 'new'
        linkAdds.push({ link: collection.meta, owner, target: idText(t), ...(fresh && { fresh }) })
      }
      for (const target of collection.removed) {
        if (target[STATE].status !== 'managed' && target[STATE].status !== 'stub') continue // purged with it
        linkRemoves.push({ link: collection.meta, owner, target: idText(target[STATE]) })
      }
      collections.push(collection)
    }
  }
  if (keyedUpdates.length > 0) orderKeyChanges(inserted, keyedUpdates, updates, fieldText, idText)
  const replaced = deletes.length > 0 && inserted.length + written.size > 0 ? replacedKeys(deleted, [...inserted, ...written.keys()], fieldText, idText) : undefined
  const ordered = replaced === undefined ? deletes : deletes.map((d, i) => (replaced.has(deleted[i]!) ? { ...d, first: true as const } : d))
  const nulled = deleted.length > 0 ? cascadeInMemory(map, deleted) : []
  const newRowSets = grouped === undefined ? [...inserts.values()] : [...inserts.values(), ...inGroupOrder(grouped)]
  return { changes: { inserts: newRowSets, upserts, updates, deletes: ordered, linkAdds, linkRemoves }, written, inserted, insertedSnapshots, deleted, nulled, collections, counted, upserted, serverFilled }
}

/**
 * The new rows of the state's table that leave the same server-filled columns unset (a bit each,
 * in `serverValued` order; generated ones always are): they share an INSERT that omits them.
 */
function serverGroup(grouped: Map<EntityMeta, Map<number, NewRows>>, state: EntityState): NewRows {
  const meta = state.meta
  const server = meta.serverValued
  let mask = 0
  for (let j = 0; j < server.length; j++) if (state.values[meta.fields[server[j]!]!.prop] === undefined) mask += 2 ** j
  let byMask = grouped.get(meta)
  if (!byMask) grouped.set(meta, (byMask = new Map()))
  let rows = byMask.get(mask)
  if (!rows) {
    const omit = server.filter((_, j) => Math.floor(mask / 2 ** j) % 2 === 1)
    byMask.set(mask, (rows = newRows(meta, omit.length > 0 ? omit : undefined)))
  }
  return rows
}

/** Each table's groups by their sets of omitted columns, whatever order the rows came in. */
function inGroupOrder(grouped: ReadonlyMap<EntityMeta, ReadonlyMap<number, NewRows>>): NewRows[] {
  const out: NewRows[] = []
  for (const byMask of grouped.values()) for (const mask of [...byMask.keys()].sort((a, b) => a - b)) out.push(byMask.get(mask)!)
  return out
}

/** The ids a removed row referred to through its self-references, as read (null when not read). */
function parentsRead(state: EntityState, fields: readonly FieldMeta[], idText: (state: EntityState) => string): Text[] {
  return fields.map((f) => {
    const target = state.snapshot?.[f.prop] as HasState | null | undefined
    return target ? idText(target[STATE]) : null
  })
}

/** A row written in the flush of an upsert cannot refer to it: the row (and its id) is known only after. */
function upsertedTarget(what: string, target: EntityState): EntityStateError {
  return new EntityStateError(`${what} refers to ${label(target)}, upserted in this flush: its row, and its id, are known only once the flush is over; flush the upsert first`)
}

/** Pending deltas as the UPDATE's text values, by index into `meta.fields`. */
function incrementTexts(meta: EntityMeta, increments: ReadonlyMap<FieldMeta, unknown>): Map<number, Text> | undefined {
  if (increments.size === 0) return undefined
  const out = new Map<number, Text>()
  meta.fields.forEach((field, i) => {
    if (increments.has(field)) out.set(i, writeText(field.type, increments.get(field)))
  })
  return out
}

/** The version a versioned row was read with; a reference that was never read has none to check. */
function expectedVersion(state: EntityState): string {
  const version = state.snapshot?.[state.meta.version!.prop]
  if (typeof version !== 'string') {
    throw new EntityStateError(`${label(state)} has a version column but was never loaded: load it before changing or removing it`)
  }
  return version
}
