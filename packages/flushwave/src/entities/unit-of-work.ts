import { EntityStateError, InvalidValueError } from '../errors.js'
import { writeText } from '../schema/column-types.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import { addIncrement, counterOf } from './counters.js'
import { changeableInPlace, checkValue, GENERATED, makeEntity, notAssignable, writable, type CollectionFactory } from './entity-class.js'
import { label, STATE, stateOf, type EntityState, type HasState } from './entity-state.js'
import { isChanged, pinDates } from './dirty.js'
import { IdentityMap } from './identity-map.js'
import { KEY_PART, stubKeyValues, tupleOfValues } from './composite-key.js'
import { ManyToManyCollection } from './many-to-many.js'
import { OneToManyCollection } from './one-to-many.js'
import { Referrers } from './referrers.js'
import type { TransactionJournal } from './transaction-journal.js'
import { Upserts } from './upsert.js'
import { uuidv7 } from '../ids/uuid-v7.js'

/**
 * The entities of one EntityManager and their states: creation, references, rows read from the
 * database, removal. It does no I/O; the loader and the flush drive it.
 */
export class UnitOfWork implements CollectionFactory {
  readonly map = new IdentityMap()
  private readonly referrers = new Referrers((meta) => this.map.of(meta))
  /** Set while `em.transaction()` runs: what to put back if it rolls back. */
  journal: TransactionJournal | undefined
  /** em.upsert's indexes, made by its first upsert. */
  private upserts: Upserts | undefined
  /** While a read runs under `arriving`: the entities it brought in. */
  private arrivals: HasState[] | undefined

  changing(entity: HasState): void {
    this.journal?.save(entity)
  }

  create(meta: EntityMeta, data: Record<string, unknown>): HasState {
    // Untyped callers: `in` below would throw a raw TypeError on null or a string.
    if (typeof data !== 'object' || data === null || Array.isArray(data)) {
      throw new InvalidValueError(meta.name, 'data', data, 'create() takes an object of property values')
    }
    const state = this.newState(meta, 'new', undefined)
    const entity = makeEntity(state)
    const known = meta.creatable
    for (const prop in data) {
      if (!known.has(prop)) throw new InvalidValueError(meta.name, prop, data[prop], meta.fieldByProp.get(prop)?.generated ? GENERATED : 'is not a property that create() accepts')
    }
    if (meta.key) {
      // The key is its values: set below, and made a tuple once they are.
    } else if (meta.id.strategy !== 'sequence') {
      const id = data[meta.id.prop] ?? (meta.id.strategy === 'uuid' ? uuidv7() : undefined)
      const reason = meta.id.type.check(id)
      if (reason) throw new InvalidValueError(meta.name, meta.id.prop, id, reason)
      // A removed one may be replaced: the flush deletes it before it inserts this one.
      const existing = this.map.get(meta, id)
      if (existing && existing[STATE].status !== 'removed') throw new EntityStateError(`${meta.name}#${String(id)} is already in this EntityManager`)
      state.id = id
    } else if (meta.id.prop in data) {
      throw new InvalidValueError(meta.name, meta.id.prop, data[meta.id.prop], 'is assigned from its sequence by the flush')
    }
    // Indexed loops: this runs once per new entity, and for-of over the schema's arrays allocated an
    // iterator result per field here (docs/design-notes.md, "Indexed loops on per-entity paths").
    const fields = meta.fields
    for (let i = 0; i < fields.length; i++) {
      const field = fields[i]!
      let value: unknown
      if (field.version && field.prop in data) throw new InvalidValueError(meta.name, field.prop, data[field.prop], 'is the optimistic-lock version and starts at 1')
      const given = data[field.prop]
      if (given !== undefined) value = given
      else if (field.default?.clock) {
        // Held as its time until read (see EntityState.values): a clock reading needs no check.
        state.values[field.prop] = Date.now()
        continue
      } else if (field.default) value = field.default.make()
      // Left unset: the INSERT omits it and reads the server's value back (checked only for fields not given).
      else if (field.serverDefault !== undefined || field.generated !== undefined) continue
      else if (field.nullable) value = null
      else if (field.ref?.deferrable) continue // checked at COMMIT: set it any time before the flush
      else throw new InvalidValueError(meta.name, field.prop, data[field.prop], 'is required')
      checkValue(state, field, value)
      state.values[field.prop] = value
      if (field.ref) this.referrers.note(field, entity, value)
      // A Date or JSON value the caller passed in, it still holds: see EntityState.watched.
      else if (value === given && changeableInPlace(field, value)) state.watched = true
    }
    if (meta.key) this.composedId(state)
    this.map.add(entity)
    this.journal?.entered(entity)
    if (meta.manyToMany.length > 0) this.createLinks(entity, data)
    return entity
  }

  /** The collections given to create(): all or nothing, like the rest of it. */
  private createLinks(entity: HasState, data: Record<string, unknown>): void {
    const state = entity[STATE]
    const meta = state.meta
    try {
      for (const link of meta.manyToMany) {
        const items = data[link.prop]
        if (items === undefined) continue
        if (!Array.isArray(items)) throw new InvalidValueError(meta.name, link.prop, items, 'expected an array of entities')
        const collection = this.collection(entity, link.prop) as ManyToManyCollection
        for (const item of items) collection.add(item as HasState)
      }
    } catch (error) {
      // A create() that throws creates nothing: the next flush must not insert a half-made entity.
      this.map.delete(entity)
      state.status = 'detached'
      throw error
    }
  }

  /** `em.upsert` (see upsert.ts). */
  upsert(meta: EntityMeta, data: Record<string, unknown>, onConflict: unknown): HasState {
    return (this.upserts ??= new Upserts(this)).upsert(meta, data, onConflict)
  }

  /** Checks a value for a field of a new entity, as create() checks it. */
  checkNew(meta: EntityMeta, field: FieldMeta, value: unknown): void {
    checkValue(this.newState(meta, 'new', undefined), field, value)
  }

  /**
   * A new composite-key entity's id, its key tuple, once every target of its key has an id (else
   * the flush composes it: see composeKeys); refused when this EntityManager holds that key already.
   */
  private composedId(state: EntityState): void {
    const id = tupleOfValues(state.meta, state.values)
    if (id === undefined) return
    const existing = this.map.get(state.meta, id)
    if (existing && existing[STATE].status !== 'removed') throw new EntityStateError(`${label(existing[STATE])} is already in this EntityManager`)
    state.id = id
  }

  /**
   * Gives a new sequence-id entity an id the pool handed out: at create (`justCreated`: no row
   * refers to it yet), or by `assignIds`.
   */
  giveId(entity: HasState, id: string, justCreated = false): void {
    const state = entity[STATE]
    state.id = state.meta.id.type.fromDb(id)
    state.poolId = true
    this.map.register(entity, !justCreated)
  }

  /**
   * Takes back the pool ids of new entities that no flush may have committed (see
   * EntityState.poolId), for an abandoned unit of work: they are given to `giveBack`, and the
   * entities lose them (a later flush of this EntityManager takes others).
   */
  releaseIds(giveBack: (meta: EntityMeta, ids: string[]) => void): void {
    const freed = new Map<EntityMeta, string[]>()
    for (const [meta, entities] of this.map.byType()) {
      if (meta.id.strategy !== 'sequence') continue
      for (const entity of [...entities]) {
        const state = entity[STATE]
        if (!state.poolId || state.status !== 'new') continue
        this.map.delete(entity)
        const ids = freed.get(meta)
        if (ids) ids.push(meta.id.type.toText(state.id))
        else freed.set(meta, [meta.id.type.toText(state.id)])
        state.id = undefined
        state.poolId = false
        this.map.add(entity)
      }
    }
    // Rows referring to these entities lost the ids in their keys too.
    if (freed.size > 0) this.map.changedAll()
    for (const [meta, ids] of freed) giveBack(meta, ids)
  }

  /** The entity for a row known by id only: the tracked one, or a new unloaded stub. */
  reference(meta: EntityMeta, id: unknown): HasState {
    const existing = this.map.get(meta, id)
    if (existing) return existing
    const state = this.newState(meta, 'stub', id)
    if (meta.key) stubKeyValues(state, (target, targetId) => this.reference(target, targetId))
    const entity = makeEntity(state)
    // Its key's references are known: one-to-many collections of their targets find it.
    if (meta.key) for (const field of meta.key) if (field.ref) this.referrers.note(field, entity, state.values[field.prop])
    this.map.add(entity)
    this.journal?.entered(entity)
    this.arrivals?.push(entity)
    return entity
  }

  /**
   * Runs `read` and returns it with the entities it brought into this unit of work (rows and the
   * references they hold), for a stream to let go of them once it moves on (see `detach`).
   */
  arriving<T>(read: () => T): [T, HasState[]] {
    const arrivals: HasState[] = []
    this.arrivals = arrivals
    try {
      return [read(), arrivals]
    } finally {
      this.arrivals = undefined
    }
  }

  /**
   * Lets go of entities read and never changed: they leave the identity map (a later read makes
   * new objects for their rows), and nothing here refers to them any more. Entities with changes
   * waiting for a flush stay, and so does everything when one of them does (it may refer to them).
   */
  detach(entities: readonly HasState[]): void {
    for (const entity of entities) {
      const state = entity[STATE]
      if (state.touched || state.increments || (state.status !== 'managed' && state.status !== 'stub')) return
    }
    for (const entity of entities) {
      this.referrers.forget(entity)
      this.map.delete(entity)
      entity[STATE].status = 'detached'
    }
  }

  /**
   * Merges a row read from the database (id, then `meta.fields` in order). A tracked entity keeps
   * its unflushed changes; a stub gets the row's values for every property it has not had set.
   * With `refresh` (a locking read), a loaded entity takes the row as its snapshot, and its values
   * for every property without an unflushed change: those stay, to be written over the locked row.
   */
  hydrate(meta: EntityMeta, row: readonly unknown[], refresh = false, at = 0): HasState {
    const id = meta.id.type.fromDb(row[at])
    const entity = this.reference(meta, id)
    const state = entity[STATE]
    if (refresh && state.status === 'managed') {
      this.refresh(entity, at === 0 ? row : row.slice(at))
      return entity
    }
    if (state.status !== 'stub') return entity
    this.changing(entity)
    // What a flush wrote of a stub is in its snapshot already, and what was set on it in its values: the row fills in the rest.
    const known = state.snapshot
    const snapshot: Record<string, unknown> = known === undefined ? {} : { ...known }
    const values = state.values
    const fields = meta.fields
    for (let i = 0; i < fields.length; i++) {
      const field = fields[i]!
      const raw = row[at + i + 1]
      // decode() inlined: a row of a list read is the hot path, and its tuple an allocation per column.
      let value: unknown = null
      let text: unknown = null
      if (raw !== null && raw !== undefined) {
        if (field.ref) value = text = this.reference(field.ref.target, field.ref.target.id.type.fromDb(raw))
        else {
          const type = field.type
          value = type.timeFromDb ? type.timeFromDb(raw) : type.fromDb(raw)
          text = writeText(type, value)
        }
      }
      if (known === undefined || !(field.prop in snapshot)) snapshot[field.prop] = text
      if (field.prop in values) continue
      values[field.prop] = value
      if (field.ref) this.referrers.note(field, entity, value)
    }
    state.snapshot = snapshot
    state.status = 'managed'
    this.map.changed(meta)
    pinDates(state)
    return entity
  }

  /** A column of a row read: its value (a reference for a many-to-one) and its snapshot form. */
  private decode(field: FieldMeta, raw: unknown): [value: unknown, text: unknown] {
    if (raw === null || raw === undefined) return [null, null]
    if (field.ref) {
      const target = this.reference(field.ref.target, field.ref.target.id.type.fromDb(raw))
      return [target, target]
    }
    const type = field.type
    // A time stays a number until user code reads it (see ColumnType.timeFromDb).
    const value = type.timeFromDb ? type.timeFromDb(raw) : type.fromDb(raw)
    return [value, writeText(type, value)]
  }

  private refresh(entity: HasState, row: readonly unknown[]): void {
    const state = entity[STATE]
    this.changing(entity)
    this.map.changed(state.meta)
    const snapshot = state.snapshot ?? (state.snapshot = {})
    state.meta.fields.forEach((field, i) => {
      const [value, text] = this.decode(field, row[i + 1])
      const keep = isChanged(state, field)
      snapshot[field.prop] = text
      if (keep) return
      state.values[field.prop] = value
      if (field.ref) this.referrers.note(field, entity, value)
    })
    pinDates(state)
  }

  /**
   * Sets several properties, all or nothing: each value is checked as its setter would check it
   * before any is set, so one bad value leaves the entity as it was.
   */
  assign(entity: HasState, data: Record<string, unknown>): void {
    const state = this.own(entity)
    writable(state)
    const meta = state.meta
    if (typeof data !== 'object' || data === null || Array.isArray(data)) {
      throw new InvalidValueError(meta.name, 'data', data, 'assign() takes an object of property values')
    }
    for (const prop in data) {
      const field = meta.fieldByProp.get(prop)
      if (field === undefined) throw new InvalidValueError(meta.name, prop, data[prop], notAssignable(meta, prop))
      if (field.version) throw new InvalidValueError(meta.name, prop, data[prop], 'is the optimistic-lock version: flushes advance it')
      if (field.generated) throw new InvalidValueError(meta.name, prop, data[prop], GENERATED)
      if (meta.key?.includes(field)) throw new InvalidValueError(meta.name, prop, data[prop], KEY_PART)
      checkValue(state, field, data[prop])
    }
    // Through the setters: change tracking, references and a transaction's journal as for any assignment.
    for (const prop in data) (entity as unknown as Record<string, unknown>)[prop] = data[prop]
  }

  /** Adds `by` to a counter, on the server, at the next flush (see EntityManager.increment). */
  increment(entity: HasState, prop: unknown, by: unknown): void {
    const state = this.own(entity)
    const field = counterOf(state, prop, by)
    this.changing(entity)
    addIncrement(entity, field, by)
    this.map.touch(entity)
  }

  remove(entity: HasState): void {
    const state = this.own(entity)
    if (state.status === 'detached') throw new EntityStateError(`${label(state)} is already deleted`)
    const soft = state.meta.softDelete
    if (soft && state.status !== 'new' && state.status !== 'removed') {
      // A soft delete is an update of its time, through the setter (change tracking, the journal);
      // the flush cascades it (plan/soft-delete.ts). Removed again, it keeps its first time.
      const time = state.values[soft.prop]
      if (time === null || time === undefined) (entity as unknown as Record<string, unknown>)[soft.prop] = new Date()
      return
    }
    this.changing(entity)
    if (state.status === 'new') {
      state.status = 'detached'
      this.map.delete(entity)
    } else {
      state.status = 'removed'
      this.map.pend(entity)
    }
  }

  collection(entity: HasState, prop: string): unknown {
    const state = entity[STATE]
    state.collections ??= new Map()
    let collection = state.collections.get(prop)
    if (collection) return collection
    const o2m = state.meta.oneToMany.find((r) => r.prop === prop)
    const m2m = state.meta.manyToMany.find((r) => r.prop === prop)
    collection = o2m ? new OneToManyCollection(this.referrers, entity, o2m) : new ManyToManyCollection(entity, m2m!)
    state.collections.set(prop, collection)
    return collection
  }

  noteReference(field: FieldMeta, from: HasState, to: unknown): void {
    this.referrers.note(field, from, to)
  }

  /**
   * A rollback put the entity's values back. The referrers index may have been made inside the
   * transaction, after a reference moved: the one restored is then news to it.
   */
  restored(entity: HasState): void {
    const state = entity[STATE]
    for (const field of state.meta.fields) if (field.ref) this.referrers.note(field, entity, state.values[field.prop])
  }

  touch(entity: HasState): void {
    this.map.touch(entity)
  }

  watch(entity: HasState): void {
    this.map.watch(entity)
  }

  /**
   * For a unit of work that is never flushed: one detached entity of each type, with a value in
   * every field (in schema order, as create and the change set add them) and each of its
   * collections, for the Flushwave instance to hold (they hold this unit of work in turn). They give
   * the hidden classes of entities, values and snapshot records, collections and this unit of
   * work's own objects an object that outlives every request. V8 frees a hidden class in a major GC
   * once no object has it; when no entity survived one, the next unit of work made new classes,
   * and the code optimised for the old ones deoptimised or went megamorphic (docs/design-notes.md,
   * "Kept hidden classes").
   */
  keepHiddenClasses(metas: Iterable<EntityMeta>): readonly HasState[] {
    const specimens: HasState[] = []
    for (const meta of metas) {
      const state = this.newState(meta, 'detached', undefined)
      const entity = makeEntity(state)
      for (const field of meta.fields) state.values[field.prop] = null
      for (const relation of [...meta.oneToMany, ...meta.manyToMany]) this.collection(entity, relation.prop)
      specimens.push(entity)
    }
    return specimens
  }

  /** The entity's state, after checking that it belongs to this unit of work. */
  own(entity: unknown): EntityState {
    const state = typeof entity === 'object' && entity !== null ? stateOf(entity) : undefined
    if (!state) throw new EntityStateError(`expected an entity, got ${entity === null ? 'null' : typeof entity}`)
    if (state.owner !== this) throw new EntityStateError(`${label(state)} belongs to another EntityManager`)
    return state
  }

  // A literal, not `new` of a class: V8 allocates a literal's objects in the old generation once most
  // survive (docs/design-notes.md, "The entity state stays an object literal").
  private newState(meta: EntityMeta, status: EntityState['status'], id: unknown): EntityState {
    return { meta, owner: this, status, id, values: {}, snapshot: undefined, collections: undefined, createdHere: status === 'new', touched: false, watched: false, pins: undefined, increments: undefined, poolId: false, flushId: undefined, slot: -1, pending: false, upsert: undefined }
  }
}
