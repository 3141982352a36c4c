import { inspect } from 'node:util'
import { EntityStateError, InvalidValueError, NotLoadedError } from '../errors.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import { label, STATE, stateOf, type EntityState, type HasState } from './entity-state.js'

/** What entity accessors need from their EntityManager's unit of work. */
export interface CollectionFactory {
  collection(entity: HasState, prop: string): unknown
}

const prototypes = new WeakMap<EntityMeta, object>()

/** Makes an entity object: a plain object whose properties are accessors over its state. */
export function makeEntity(state: EntityState): HasState {
  const entity = Object.create(prototypeFor(state.meta)) as HasState
  Object.defineProperty(entity, STATE, { value: state })
  return entity
}

function prototypeFor(meta: EntityMeta): object {
  let proto = prototypes.get(meta)
  if (proto) return proto
  proto = Object.create(null) as object
  Object.defineProperty(proto, meta.id.prop, {
    enumerable: true,
    get(this: HasState) {
      const id = this[STATE].id
      if (id === undefined) throw new EntityStateError(`${meta.name}.${meta.id.prop} is assigned by the first flush`)
      return id
    },
    set() {
      throw new EntityStateError(`${meta.name}.${meta.id.prop} cannot be changed`)
    },
  })
  for (const field of meta.fields) {
    Object.defineProperty(proto, field.prop, {
      enumerable: true,
      get(this: HasState) {
        const state = this[STATE]
        if (field.prop in state.values) return state.values[field.prop]
        throw new NotLoadedError(`${label(state)} is not loaded: read of ${field.prop}; await em.load or em.populate first`)
      },
      set(this: HasState, value: unknown) {
        const state = this[STATE]
        writable(state)
        checkValue(state, field, value)
        state.values[field.prop] = value
      },
    })
  }
  for (const rel of [...meta.oneToMany, ...meta.manyToMany]) {
    Object.defineProperty(proto, rel.prop, {
      enumerable: true,
      get(this: HasState) {
        return (this[STATE].owner as CollectionFactory).collection(this, rel.prop)
      },
    })
  }
  Object.defineProperty(proto, 'toJSON', { value: toJSON })
  Object.defineProperty(proto, inspect.custom, { value: inspectEntity })
  Object.defineProperty(proto, Symbol.toStringTag, { value: meta.name })
  prototypes.set(meta, proto)
  return proto
}

export function writable(state: EntityState): void {
  if (state.status === 'removed' || state.status === 'detached') {
    throw new EntityStateError(`${label(state)} is ${state.status} and cannot be changed`)
  }
}

/** Rejects a value its column cannot store, at the moment it is assigned. */
export function checkValue(state: EntityState, field: FieldMeta, value: unknown): void {
  const fail = (reason: string): never => {
    throw new InvalidValueError(state.meta.name, field.prop, value, reason)
  }
  if (value === undefined) fail('undefined is not a value (use null for nullable properties)')
  if (value === null) {
    if (!field.nullable) fail('is not nullable')
    return
  }
  if (field.ref) {
    const target = stateOf(value as object)
    if (!target || target.meta !== field.ref.target) fail(`expected a ${field.ref.target.name} entity`)
    if (target!.owner !== state.owner) fail('the entity belongs to another EntityManager')
    if (target!.status === 'removed' || target!.status === 'detached') fail(`${label(target!)} is ${target!.status}`)
    return
  }
  const reason = field.type.check(value)
  if (reason) fail(reason)
}

function toJSON(this: HasState): Record<string, unknown> {
  const state = this[STATE]
  const out: Record<string, unknown> = { [state.meta.id.prop]: state.id }
  for (const field of state.meta.fields) {
    if (!(field.prop in state.values)) continue
    const value = state.values[field.prop]
    out[field.prop] = field.ref && value !== null ? stateOf(value as object)?.id : value
  }
  return out
}

function inspectEntity(this: HasState): string {
  const state = this[STATE]
  return `${state.meta.name} ${inspect({ ...toJSON.call(this), '[status]': state.status })}`
}
