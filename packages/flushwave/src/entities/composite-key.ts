import { EntityStateError, InvalidValueError } from '../errors.js'
import { keyParts, keyTuple, writeText } from '../schema/column-types.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import { label, STATE, stateOf, type EntityState, type HasState } from './entity-state.js'

/**
 * Ids of entities with a composite primary key (EntityMeta.key): a key tuple of their key values'
 * texts (schema/types/key-tuple.ts), a many-to-one's as its target's id. Their state's `id` is that
 * tuple, known once every target has an id (at create, or when the flush assigns ids).
 */

/** The tuple of a composite-key entity's values; undefined while a target has no id yet (`inFlush`: or, in a flush, no `flushId` either). */
export function tupleOfValues(meta: EntityMeta, values: Record<string, unknown>, inFlush = false): string | undefined {
  const key = meta.key!
  const parts: string[] = []
  for (let i = 0; i < key.length; i++) {
    const field = key[i]!
    const value = values[field.prop]
    if (!field.ref) {
      parts.push(field.type.toText(value))
      continue
    }
    const target = (value as HasState)[STATE]
    if (target.id !== undefined) parts.push(field.type.toText(target.id))
    else {
      const id = inFlush ? target.flushId : undefined
      if (id === undefined) return undefined
      parts.push(id)
    }
  }
  return keyTuple(parts)
}

/**
 * What `em.load` and `em.ref` take as a composite key: an object with a value for each key
 * property (an entity, or its id, for a many-to-one), checked, as a tuple. Other ids pass through, checked.
 */
export function idOfInput(meta: EntityMeta, input: unknown): unknown {
  if (meta.key === undefined) {
    const reason = meta.id.type.check(input)
    if (reason) throw new InvalidValueError(meta.name, meta.id.prop, input, reason)
    return input
  }
  const props = meta.key.map((f) => f.prop)
  if (typeof input !== 'object' || input === null || Array.isArray(input) || stateOf(input) !== undefined) {
    throw new InvalidValueError(meta.name, 'key', input, `expected its primary key, an object of ${props.join(', ')}`)
  }
  const given = input as Record<string, unknown>
  for (const prop in given) if (!props.includes(prop)) throw new InvalidValueError(meta.name, prop, given[prop], `is not part of ${meta.name}'s primary key (${props.join(', ')})`)
  const parts = meta.key.map((field) => partText(meta, field, given[field.prop]))
  return keyTuple(parts)
}

function partText(meta: EntityMeta, field: FieldMeta, value: unknown): string {
  const target = field.ref && stateOf(value)
  if (target) {
    if (target.meta !== field.ref!.target) throw new InvalidValueError(meta.name, field.prop, value, `expected a ${field.ref!.target.name} entity or id`)
    if (target.id === undefined) throw new EntityStateError(`${label(target)} has no id yet, so ${meta.name}.${field.prop} cannot name it: flush it (or await em.assignIds()) first`)
    return field.type.toText(target.id)
  }
  const reason = value === undefined || value === null ? 'is part of the primary key: give it a value' : field.type.check(value)
  if (reason) throw new InvalidValueError(meta.name, field.prop, value, reason)
  return field.type.toText(value)
}

/** A composite key as `em.idOf` returns it: each key property's value, a many-to-one's as its target's id. */
export function keyObject(meta: EntityMeta, tuple: string): Record<string, unknown> {
  const parts = keyParts(tuple)
  const out: Record<string, unknown> = {}
  meta.key!.forEach((field, i) => (out[field.prop] = field.type.fromDb(parts[i])))
  return out
}

/**
 * A stub of a composite-key entity knows its key values from its id: they are its values and its
 * snapshot from the start (so no flush writes them), targets as stubs made by `reference`.
 */
export function stubKeyValues(state: EntityState, reference: (meta: EntityMeta, id: unknown) => HasState): void {
  const parts = keyParts(state.id as string)
  const snapshot: Record<string, unknown> = {}
  state.meta.key!.forEach((field, i) => {
    const value = field.ref ? reference(field.ref.target, field.type.fromDb(parts[i])) : field.type.fromDb(parts[i])
    state.values[field.prop] = value
    snapshot[field.prop] = field.ref ? value : writeText(field.type, value)
  })
  state.snapshot = snapshot
}

/** Why a key property may not be assigned. */
export const KEY_PART = 'is part of the primary key and cannot be changed: remove the entity and create another'
