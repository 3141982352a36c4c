import { inspect } from 'node:util'
import { EntityStateError, InvalidValueError, NotLoadedError } from '../errors.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import { writeText } from '../schema/column-types.js'
import { label, STATE, stateOf, type EntityState, type HasState } from './entity-state.js'
import { KEY_PART } from './composite-key.js'

/** What entity accessors need from their EntityManager's unit of work. */
export interface CollectionFactory {
  collection(entity: HasState, prop: string): unknown
  /** The entity's state is about to change: inside `em.transaction()`, saved first (see TransactionJournal). */
  changing(entity: HasState): void
  /** A many-to-one was set: one-to-many collections find their items through these notes. */
  noteReference(field: FieldMeta, from: HasState, to: unknown): void
  /** The entity has a change for the next flush (see IdentityMap.touch). */
  touch(entity: HasState): void
  /** User code may now hold one of the entity's Date or JSON values (see EntityState.watched). */
  watch(entity: HasState): void
}

type EntityClass = new (state: EntityState) => HasState

/**
 * The end of every entity class's prototype chain. An assignment to a name that no accessor of the
 * class handles (a typo, an unknown key of a request body passed to Object.assign) reaches this
 * proxy and is rejected, rather than making an own property that no flush would ever write. The
 * properties of the entity are accessors found first, on the class prototype: they never get here.
 */
const unknownProperties: object = new Proxy(Object.create(Object.prototype) as object, {
  set(target, key, value, receiver) {
    if (typeof key === 'symbol') return Reflect.set(target, key, value, receiver)
    const name = stateOf(receiver)?.meta.name ?? 'entity'
    throw new InvalidValueError(name, key, value, `is not a property of ${name}`)
  },
})

/** Makes an entity object: its only own property is its state; its properties are accessors on a class per entity. */
export function makeEntity(state: EntityState): HasState {
  const cache = state.meta.cache
  const EntityClass = (cache.entityClass ??= classFor(state.meta)) as EntityClass
  return new EntityClass(state)
}

function classFor(meta: EntityMeta): EntityClass {
  const EntityClass = class {
    readonly [STATE]: EntityState
    constructor(state: EntityState) {
      this[STATE] = state
    }
  }
  const proto = EntityClass.prototype as object
  Object.setPrototypeOf(proto, unknownProperties)
  if (!meta.key) Object.defineProperty(proto, meta.id.prop, {
    enumerable: true,
    get(this: HasState) {
      const id = this[STATE].id
      if (id === undefined) throw new EntityStateError(`${meta.name}.${meta.id.prop} is not assigned yet: the id pool had none at create; await em.assignIds() or flush first`)
      return id
    },
    set() {
      throw new EntityStateError(`${meta.name}.${meta.id.prop} cannot be changed`)
    },
  })
  for (const field of meta.fields) {
    // A Date or JSON value handed out can be changed in place: the entity is watched from then on.
    const mutable = !field.ref && field.type.mutable
    const keyPart = meta.key?.includes(field) === true
    Object.defineProperty(proto, field.prop, {
      enumerable: true,
      get: mutable
        ? function (this: HasState) {
            const state = this[STATE]
            if (!(field.prop in state.values)) throw notLoaded(state, field)
            const value = readValue(state, field)
            if (!state.watched && typeof value === 'object' && value !== null) (state.owner as CollectionFactory).watch(this)
            return value
          }
        : function (this: HasState) {
            const state = this[STATE]
            if (field.prop in state.values) return state.values[field.prop]
            throw notLoaded(state, field)
          },
      set(this: HasState, value: unknown) {
        const state = this[STATE]
        writable(state)
        if (field.version) throw new EntityStateError(`${label(state)}.${field.prop} is the optimistic-lock version: flushes advance it`)
        if (field.generated) throw new InvalidValueError(meta.name, field.prop, value, GENERATED)
        if (keyPart) throw new InvalidValueError(meta.name, field.prop, value, KEY_PART)
        checkValue(state, field, value)
        if (state.upsert !== undefined && state.status === 'new' && state.upsert.key !== 'id' && state.upsert.key.includes(field)) {
          throw new EntityStateError(`${label(state)}.${field.prop} is the key of its pending upsert: upsert again with the other key instead`)
        }
        ;(state.owner as CollectionFactory).changing(this)
        state.values[field.prop] = value
        // An assigned value replaces what was pending: the flush writes exactly it.
        if (state.increments?.delete(field) && state.increments.size === 0) state.increments = undefined
        const owner = state.owner as CollectionFactory
        owner.touch(this)
        if (field.ref) owner.noteReference(field, this, value)
        else if (!state.watched && changeableInPlace(field, value)) owner.watch(this)
      },
    })
  }
  for (const rel of [...meta.oneToMany, ...meta.manyToMany]) {
    Object.defineProperty(proto, rel.prop, {
      enumerable: true,
      get(this: HasState) {
        return (this[STATE].owner as CollectionFactory).collection(this, rel.prop)
      },
      set() {
        throw new EntityStateError(`${meta.name}.${rel.prop} is a collection: change it with add() and remove()`)
      },
    })
  }
  Object.defineProperty(proto, 'toJSON', { value: toJSON })
  Object.defineProperty(proto, inspect.custom, { value: inspectEntity })
  Object.defineProperty(proto, Symbol.toStringTag, { value: meta.name })
  Object.defineProperty(EntityClass, 'name', { value: meta.name })
  return EntityClass
}

/** Why `prop` is not a column or reference of `meta` to assign (or add to). */
export function notAssignable(meta: EntityMeta, prop: string): string {
  if (prop === meta.id.prop) return 'is the id and cannot be changed'
  if (meta.oneToMany.some((r) => r.prop === prop) || meta.manyToMany.some((r) => r.prop === prop)) return 'is a collection: change it with add() and remove()'
  return `is not a property of ${meta.name}`
}

export function writable(state: EntityState): void {
  if (state.status === 'removed' || state.status === 'detached') {
    throw new EntityStateError(`${label(state)} is ${state.status} and cannot be changed`)
  }
}

/**
 * A field's value as user code is to see it: a time held as a number (see EntityState.values)
 * becomes the Date it stands for, kept from then on, since whoever reads it may change it in place.
 */
export function readValue(state: EntityState, field: FieldMeta): unknown {
  const value = state.values[field.prop]
  if (typeof value !== 'number' || field.type.fromTime === undefined) return value
  return (state.values[field.prop] = field.type.fromTime(value))
}

/** Makes Dates of every time the entity holds as a number (see readValue). */
export function readAllValues(state: EntityState): void {
  const fields = state.meta.fields
  for (let i = 0; i < fields.length; i++) if (fields[i]!.type.fromTime !== undefined) readValue(state, fields[i]!)
}

/** A Date or JSON object of a column: whoever holds it can change it in place, without a setter (see EntityState.watched). */
export function changeableInPlace(field: FieldMeta, value: unknown): boolean {
  return !field.ref && field.type.mutable === true && typeof value === 'object' && value !== null
}

/** Rejects a value its column cannot store, at the moment it is assigned. */
export function checkValue(state: EntityState, field: FieldMeta, value: unknown): void {
  const reason = invalidity(state, field, value)
  if (reason !== undefined) throw new InvalidValueError(state.meta.name, field.prop, value, reason)
}

/**
 * Checks again, before a flush sends anything, the values that can change after they were assigned:
 * Dates and JSON objects, changed in place (`date.setTime(NaN)`, `doc.n = 1n`). Other values are
 * immutable and were checked when assigned, and so are those of an entity that is not watched: no
 * user code was handed them (see EntityState.watched).
 */
export function checkMutableValues(entities: readonly HasState[]): void {
  for (let e = 0; e < entities.length; e++) {
    const entity = entities[e]!
    const state = entity[STATE]
    if (!state.watched || state.status === 'removed' || state.status === 'detached') continue
    for (const field of state.meta.fields) {
      const value = state.values[field.prop]
      if (field.ref || typeof value !== 'object' || value === null) continue
      const reason = field.type.check(value)
      if (reason === undefined) continue
      // As read from the database and unchanged, it will not be written: a value the schema would not
      // take (a NULL element where elements are not nullable) must not fail every flush of its entity.
      if (unchangedSinceRead(state, field, value)) continue
      throw new InvalidValueError(state.meta.name, field.prop, value, `${reason} (${label(state)}: changed in place after it was assigned)`)
    }
  }
}

/** Whether the value's text is still the snapshot's, the text it was read (or last written) as. */
function unchangedSinceRead(state: EntityState, field: FieldMeta, value: unknown): boolean {
  const before = state.snapshot?.[field.prop]
  if (before === undefined || before === null) return false
  try {
    return writeText(field.type, value) === before
  } catch {
    return false
  }
}

function invalidity(state: EntityState, field: FieldMeta, value: unknown): string | undefined {
  if (value === undefined) return 'undefined is not a value (use null for nullable properties)'
  if (value === null) return field.nullable ? undefined : 'is not nullable'
  if (!field.ref) return field.type.check(value)
  const target = stateOf(value)
  if (!target || target.meta !== field.ref.target) return `expected a ${field.ref.target.name} entity`
  if (target.owner !== state.owner) return 'the entity belongs to another EntityManager'
  if (target.status === 'removed' || target.status === 'detached') return `${label(target)} is ${target.status}`
  return undefined
}

function toJSON(this: HasState): Record<string, unknown> {
  const state = this[STATE]
  const out: Record<string, unknown> = state.meta.key ? {} : { [state.meta.id.prop]: state.id }
  let handsOut = false
  for (const field of state.meta.fields) {
    if (!(field.prop in state.values)) continue
    const value = readValue(state, field)
    if (field.ref) out[field.prop] = value !== null ? stateOf(value as object)?.id : value
    else {
      out[field.prop] = value
      if (changeableInPlace(field, value)) handsOut = true
    }
  }
  // The object holds the entity's own Dates and JSON values: the caller may change them in place.
  if (handsOut && !state.watched) (state.owner as CollectionFactory).watch(this)
  return out
}

/** Why a generated column refuses a value. */
export const GENERATED = 'is generated by the database: it is never written, and reads back after the flush'

// Reached only when the value is missing: a new entity's server-filled column is one (see UnitOfWork.create).
function notLoaded(state: EntityState, field: FieldMeta): NotLoadedError | EntityStateError {
  if (state.status === 'new' && (field.serverDefault || field.generated)) {
    return new EntityStateError(`${label(state)}.${field.prop} is set by the server: read it after the flush`)
  }
  return new NotLoadedError(`${label(state)} is not loaded: read of ${field.prop}; await em.load or em.populate first`)
}

function inspectEntity(this: HasState): string {
  const state = this[STATE]
  return `${state.meta.name} ${inspect({ ...toJSON.call(this), '[status]': state.status })}`
}
