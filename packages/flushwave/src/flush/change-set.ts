import { EntityStateError } from '../errors.js'
import { newRows, type Changes, type LinkChange, type NewRows, type RowDelete, type RowUpdate, type RowUpsert, type Text } from '../plan/changes.js'
import { writeText } from '../schema/column-types.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import { selfReferences } from '../schema/self-references.js'
import { label, STATE, type EntityState, type HasState } from '../entities/entity-state.js'
import type { IdentityMap } from '../entities/identity-map.js'
import { addTo } from '../plan/groups.js'
import type { Referrer, TableIndex } from '../plan/table-index.js'
import { isChanged } from '../entities/dirty.js'
import { ManyToManyCollection } from '../entities/many-to-many.js'

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
}

/** New sequence-id entities among `entities`: they need ids from the pool before the changes can be computed. */
export function needingIds(entities: readonly HasState[]): Map<EntityMeta, HasState[]> {
  const out = new Map<EntityMeta, HasState[]>()
  for (let e = 0; e < entities.length; e++) {
    const entity = entities[e]!
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
 * and changes none. `map` is read only for cascades, the types `index` says a cascade can reach;
 * `assigned` holds the ids a flush took from the pool for new entities.
 */
export function computeChanges(map: IdentityMap, candidates: readonly HasState[], assigned: ReadonlyMap<HasState, string>, index: TableIndex): ChangeSet {
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
    if (target.status === 'new' && target.upsert) throw upsertedTarget(`${label(state)}.${field.prop}`, target)
    return idText(target, value as HasState)
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

  // The new rows' table, looked up once per run of candidates of one type (they mostly come so).
  let table: NewRows | undefined
  // Indexed loops over entities here and in the flush's other per-entity passes: for-of over these
  // arrays allocated an iterator result per entity in a heap profile of bulkCreate×100.
  for (let c = 0; c < candidates.length; c++) {
    const entity = candidates[c]!
    const state = entity[STATE]
    const meta = state.meta
    if (state.status === 'new' && state.id === undefined && !assigned.has(entity)) continue
    if (state.status === 'removed') {
      const self = selfReferences(meta)
      deletes.push({
        entity: meta,
        id: idText(state, entity),
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
      if (upsert !== undefined) values = new Array<Text>(fields.length)
      else {
        if (table?.entity !== meta) {
          table = inserts.get(meta)
          if (!table) inserts.set(meta, (table = newRows(meta)))
        }
        columns = table.columns
      }
      for (let i = 0; i < fields.length; i++) {
        const field = fields[i]!
        const value = state.values[field.prop]
        if (value === undefined) throw new EntityStateError(`${label(state)}.${field.prop} is required: set it before flushing`)
        const text = fieldText(state, field, value)
        snapshot[field.prop] = field.ref ? value : text
        if (columns) columns[i]!.push(text)
        else values![i] = text
      }
      const id = idText(state, entity)
      if (upsert === undefined) table!.ids.push(id)
      else {
        upserts.push({ entity: meta, id, values: values!, upsert: { key: upsert.key, update: meta.fields.filter((f) => upsert.update.has(f)) } })
        upserted.push(entity)
      }
      inserted.push(entity)
      insertedSnapshots.push(snapshot)
    } else {
      const changed = new Map<number, Text>()
      const fields = meta.fields
      for (let i = 0; i < fields.length; i++) {
        const field = fields[i]!
        if (!isChanged(state, field)) continue
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
          updates.push({ entity: meta, id: idText(state, entity), changed, version, ...(increments && { increments }) })
        } else {
          updates.push({ entity: meta, id: idText(state, entity), changed, ...(increments && { increments }) })
        }
        written.set(entity, snapshot)
      } else if (increments) {
        updates.push({ entity: meta, id: idText(state, entity), changed, increments })
        written.set(entity, snapshot)
      }
    }
    if (state.collections === undefined) continue
    for (const collection of state.collections.values()) {
      if (!(collection instanceof ManyToManyCollection)) continue
      if (collection.added.size + collection.removed.size === 0) continue
      if (state.status === 'new' && state.upsert && collection.added.size > 0) throw upsertedTarget(`${label(state)}.${collection.meta.prop}`, state)
      const owner = idText(state, entity)
      for (const target of collection.added) {
        const t = target[STATE]
        if (t.status === 'removed' || t.status === 'detached') continue
        if (t.status === 'new' && t.upsert) throw upsertedTarget(`${label(state)}.${collection.meta.prop}`, t)
        const fresh = state.status === 'new' || t.status === 'new'
        linkAdds.push({ link: collection.meta, owner, target: idText(t, target), ...(fresh && { fresh }) })
      }
      for (const target of collection.removed) {
        if (target[STATE].status !== 'managed' && target[STATE].status !== 'stub') continue // purged with it
        linkRemoves.push({ link: collection.meta, owner, target: idText(target[STATE], target) })
      }
      collections.push(collection)
    }
  }
  if (keyedUpdates.length > 0) orderKeyChanges(inserted, keyedUpdates, updates, fieldText, idText)
  const replaced = deletes.length > 0 && inserted.length + written.size > 0 ? replacedKeys(deleted, [...inserted, ...written.keys()], fieldText, idText) : undefined
  const ordered = replaced === undefined ? deletes : deletes.map((d, i) => (replaced.has(deleted[i]!) ? { ...d, first: true as const } : d))
  const nulled = deleted.length > 0 ? cascadeInMemory(map, deleted, index) : []
  return { changes: { inserts: [...inserts.values()], upserts, updates, deletes: ordered, linkAdds, linkRemoves }, written, inserted, insertedSnapshots, deleted, nulled, collections, counted, upserted }
}

/** The ids a removed row referred to through its self-references, as read (null when not read). */
function parentsRead(state: EntityState, fields: readonly FieldMeta[], idText: (state: EntityState, entity: HasState) => string): Text[] {
  return fields.map((f) => {
    const target = state.snapshot?.[f.prop] as HasState | null | undefined
    return target ? idText(target[STATE], target) : null
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

/**
 * What the cascade statements will do to entities this EntityManager holds: children of deleted
 * entities are deleted too (added to `deleted`; down a cascading tree as well) or have their
 * reference cleared (returned). Only the types a cascade can reach from the deleted ones are
 * walked, each once per reference that reaches it: a flush deleting one row among 10,000 loaded
 * rows of types nothing cascades to walks none (it walked all 10,000: 3.1 ms of its changes phase,
 * 18.7 ms among 100,000). Linear in the entities of the types walked.
 */
function cascadeInMemory(map: IdentityMap, deleted: HasState[], index: TableIndex): [HasState, FieldMeta][] {
  const { cascading, nulling } = cascadesFrom(deleted, index)
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
function cascadesFrom(deleted: readonly HasState[], index: TableIndex): { cascading: Referrer[]; nulling: Referrer[] } {
  const reached = new Set<EntityMeta>()
  for (let i = 0; i < deleted.length; i++) reached.add(deleted[i]![STATE].meta)
  const cascading: Referrer[] = []
  const nulling: Referrer[] = []
  for (const type of reached) {
    for (const referrer of index.referrers(type)) {
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

/** The version a versioned row was read with; a reference that was never read has none to check. */
function expectedVersion(state: EntityState): string {
  const version = state.snapshot?.[state.meta.version!.prop]
  if (typeof version !== 'string') {
    throw new EntityStateError(`${label(state)} has a version column but was never loaded: load it before changing or removing it`)
  }
  return version
}

/** Whether rows of `meta` have a key a written row could take: a unique key, or ids the application provides. */
const keyed = (meta: EntityMeta): boolean => meta.uniqueKeys.length > 0 || meta.id.strategy === 'provided'

/**
 * Replace by key: removed entities whose unique key (or provided id) a row written by this flush
 * takes. Deleted after the inserts as usual, they would make the flush fail with a unique
 * violation; so the planner deletes them first, with the removed rows that refer to them, and that
 * is safe when nothing written here needs those rows: no written row refers to one, no updated row
 * is moving away from one (that update must run before the delete), no table with written rows
 * cascades from theirs (a cascade would reach rows this flush still updates), and no removed row
 * that was never read could refer to one. Otherwise all stay last, and a real clash fails as a
 * UniqueViolationError. Linear in the entities written and removed. Rows the EntityManager never
 * loaded that still refer to a replaced row make its delete fail (ForeignKeyViolationError), as
 * they would at the end.
 */
function replacedKeys(
  removed: readonly HasState[],
  writers: readonly HasState[],
  fieldText: (state: EntityState, field: FieldMeta, value: unknown) => Text,
  idText: (state: EntityState, entity: HasState) => string,
): Set<HasState> | undefined {
  const taken = new Set<string>()
  for (const entity of writers) {
    const state = entity[STATE]
    if (!keyed(state.meta)) continue
    for (const key of keysOf(state.meta, (f) => fieldText(state, f, state.values[f.prop]), () => idText(state, entity))) taken.add(key)
  }
  if (taken.size === 0) return undefined
  const replaced = new Set<HasState>()
  for (const entity of removed) {
    const state = entity[STATE]
    const snapshot = state.snapshot
    if (state.status !== 'removed' || snapshot === undefined || !keyed(state.meta)) continue
    const old = (f: FieldMeta): Text => snapshotText(snapshot, f, idText)
    if (keysOf(state.meta, old, () => idText(state, entity)).some((key) => taken.has(key))) replaced.add(entity)
  }
  if (replaced.size === 0) return undefined
  // Removed rows that refer to a replaced one go first with it (the planner deletes children first).
  // One whose values were never read may refer to it unseen: then nothing goes first.
  const referrers = new Map<HasState, HasState[]>()
  const unread: HasState[] = []
  for (const entity of removed) {
    const state = entity[STATE]
    if (state.snapshot === undefined) {
      unread.push(entity)
      continue
    }
    for (const field of state.meta.fields) {
      if (!field.ref) continue
      const target = state.snapshot[field.prop] as HasState | null | undefined
      if (!target) continue
      const list = referrers.get(target)
      if (list) list.push(entity)
      else referrers.set(target, [entity])
    }
  }
  for (const entity of replaced) for (const child of referrers.get(entity) ?? []) replaced.add(child) // a Set visits what is added
  const metas = new Set([...replaced].map((e) => e[STATE].meta))
  for (const entity of unread) for (const field of entity[STATE].meta.fields) if (field.ref && metas.has(field.ref.target)) return undefined
  // Safety, as above: if any row of the group must stay, they all do.
  const cascadedInto = new Set<EntityMeta>()
  for (const entity of writers) {
    const state = entity[STATE]
    for (const field of state.meta.fields) {
      if (!field.ref) continue
      if (field.ref.onDelete === 'cascade' || field.ref.onDelete === 'set null') cascadedInto.add(field.ref.target)
      if (replaced.has(state.values[field.prop] as HasState)) return undefined
      if (state.snapshot && replaced.has(state.snapshot[field.prop] as HasState)) return undefined
    }
  }
  for (const entity of replaced) if (cascadedInto.has(entity[STATE].meta)) return undefined
  return replaced
}

/** A field's value as the row was read (a reference as its id). */
function snapshotText(snapshot: Record<string, unknown>, f: FieldMeta, idText: (state: EntityState, entity: HasState) => string): Text {
  const value = snapshot[f.prop]
  return f.ref && value !== null && value !== undefined ? idText((value as HasState)[STATE], value as HasState) : ((value as Text | undefined) ?? null)
}

/**
 * Rows that give up a unique value (or provided id) in this flush, and rows that take one:
 *
 * - An inserted or upserted row cannot take a value an updated row gives up. Inserts run before
 *   updates (an update may point at a row inserted here), so the updated row still holds the value
 *   then: an insert fails (UniqueViolationError), and an upsert finds that row and updates it
 *   instead of making its own, which the update then renames: one row for two entities, the
 *   upserted values lost. Refused before anything is sent.
 * - An updated row that takes a value another updated row gives up goes in a later UPDATE of its
 *   table (`after`): PostgreSQL checks a non-deferrable unique key row by row, so within one UPDATE
 *   the pass succeeded or failed by the rows' order. A cycle (a swap) cannot pass row by row at
 *   all: its rows stay in one UPDATE, and the server refuses it.
 *
 * Linear in the updated rows of types with a unique key.
 */
function orderKeyChanges(
  inserted: readonly HasState[],
  keyedUpdates: readonly (readonly [HasState, number])[],
  updates: RowUpdate[],
  fieldText: (state: EntityState, field: FieldMeta, value: unknown) => Text,
  idText: (state: EntityState, entity: HasState) => string,
): void {
  let vacated: Map<string, HasState> | undefined
  const taking: [HasState, number, string[]][] = []
  for (const [entity, at] of keyedUpdates) {
    const state = entity[STATE]
    const snapshot = state.snapshot
    if (snapshot === undefined) continue
    const id = () => idText(state, entity)
    const before = keysOf(state.meta, (f) => snapshotText(snapshot, f, idText), id)
    const now = keysOf(state.meta, (f) => fieldText(state, f, state.values[f.prop]), id)
    for (const key of before) if (!now.includes(key)) (vacated ??= new Map()).set(key, entity)
    const takes = now.filter((key) => !before.includes(key))
    if (takes.length > 0) taking.push([entity, at, takes])
  }
  if (vacated === undefined) return
  for (const entity of inserted) {
    const state = entity[STATE]
    if (!keyed(state.meta)) continue
    for (const key of keysOf(state.meta, (f) => fieldText(state, f, state.values[f.prop]), () => idText(state, entity))) {
      const from = vacated.get(key)
      if (from === undefined) continue
      const would = state.upsert ? 'an upsert would find that row and update it' : 'the insert would find the key taken'
      throw new EntityStateError(
        `${label(state)} takes a unique key that ${label(from[STATE])} gives up in this flush: rows are inserted before others are updated, so ${would}; flush the change to ${label(from[STATE])} first`,
      )
    }
  }
  // Each updated row after the ones whose values it takes: levels along the longest chain (Kahn's
  // order). Rows in or behind a cycle are never reached and stay in the first UPDATE.
  const givesTo = new Map<HasState, HasState[]>()
  /** Per row that takes values: how many of the rows it takes them from are not placed yet. */
  const waiting = new Map<HasState, number>()
  for (const [entity, , takes] of taking) {
    for (const key of takes) {
      const from = vacated.get(key)
      if (from === undefined || from === entity) continue
      addTo(givesTo, from, entity)
      waiting.set(entity, (waiting.get(entity) ?? 0) + 1)
    }
  }
  if (waiting.size === 0) return
  const level = new Map<HasState, number>()
  const ready: HasState[] = []
  for (const from of givesTo.keys()) if (!waiting.has(from)) ready.push(from)
  for (let i = 0; i < ready.length; i++) {
    const from = ready[i]!
    const next = (level.get(from) ?? 0) + 1
    for (const taker of givesTo.get(from) ?? []) {
      if (next > (level.get(taker) ?? 0)) level.set(taker, next)
      const left = waiting.get(taker)! - 1
      waiting.set(taker, left)
      if (left === 0) ready.push(taker)
    }
  }
  for (const [entity, at] of taking) {
    if (waiting.get(entity) !== 0) continue // in or behind a cycle
    const after = level.get(entity)
    if (after !== undefined && after > 0) updates[at] = { ...updates[at]!, after }
  }
}

/** An entity's unique-key values as strings, one per key with no NULL in it (NULLs never clash). */
function keysOf(meta: EntityMeta, text: (field: FieldMeta) => Text, id: () => string): string[] {
  const out: string[] = []
  if (meta.id.strategy === 'provided') out.push(`${meta.name}\u0000id\u0000${id()}`)
  meta.uniqueKeys.forEach((key, k) => {
    const parts = key.map(text)
    if (parts.every((p) => p !== null)) out.push(`${meta.name}\u0000${k}\u0000${parts.join('\u0000')}`)
  })
  return out
}
