import { EntityStateError, InvalidValueError } from '../errors.js'
import { isCounter } from '../schema/counters.js'
import type { FieldMeta } from '../schema/meta.js'
import { notAssignable } from './entity-class.js'
import { label, STATE, type EntityState, type HasState } from './entity-state.js'

/**
 * Checks an increment before anything changes: a counter property, a delta its column can hold, and
 * an entity whose row can be updated. The field is returned for `addIncrement`.
 */
export function counterOf(state: EntityState, prop: unknown, by: unknown): FieldMeta {
  const meta = state.meta
  const field = typeof prop === 'string' ? meta.fieldByProp.get(prop) : undefined
  if (field === undefined || !isCounter(field)) {
    const why = field?.version
      ? 'is the optimistic-lock version: flushes advance it'
      : field !== undefined
        ? 'is not a number column (integer, bigint or numeric): only those can be incremented'
        : notAssignable(meta, String(prop))
    throw new InvalidValueError(meta.name, String(prop), by, why)
  }
  const reason = field.type.check(by)
  if (reason !== undefined) throw new InvalidValueError(meta.name, field.prop, by, `is not a valid increment: ${reason}`)
  if (state.status === 'removed' || state.status === 'detached') {
    throw new EntityStateError(`${label(state)} is ${state.status} and cannot be changed`)
  }
  return field
}

/**
 * Adds `by` to the entity's pending delta for `field` (a new entity's value itself: its INSERT
 * writes it). A sum its column cannot hold is refused, and the pending delta stays as it was.
 */
export function addIncrement(entity: HasState, field: FieldMeta, by: unknown): void {
  const state = entity[STATE]
  const add = field.type.add!
  if (state.status === 'new') {
    const value = state.values[field.prop]
    if (value === null) return // NULL + n is NULL, in SQL too
    const sum = add(value, by)
    check(state, field, sum, by)
    state.values[field.prop] = sum
    return
  }
  const pending = state.increments?.get(field)
  const sum = pending === undefined ? by : add(pending, by)
  check(state, field, sum, by)
  ;(state.increments ??= new Map()).set(field, sum)
}

function check(state: EntityState, field: FieldMeta, sum: unknown, by: unknown): void {
  const reason = field.type.check(sum)
  if (reason !== undefined) throw new InvalidValueError(state.meta.name, field.prop, by, `makes a pending increment of ${String(sum)}, which ${reason.replace(/^expected/, 'is not')}`)
}

/** Adds deltas a failed flush took back to the entity's pending ones (made while it was in flight). */
export function restoreIncrements(entity: HasState, deltas: ReadonlyMap<FieldMeta, unknown>): void {
  const state = entity[STATE]
  if (state.status === 'removed' || state.status === 'detached') return
  for (const [field, delta] of deltas) {
    const pending = state.increments?.get(field)
    ;(state.increments ??= new Map()).set(field, pending === undefined ? delta : field.type.add!(delta, pending))
  }
}

/**
 * After a flush whose increments committed but whose answer was lost (recovered, or an unknown
 * outcome): the counters' and the version's new values are not known here, so they are forgotten
 * (read them again with `em.load`), and the deltas are never sent a second time.
 */
export function forgetCounters(entity: HasState, fields: Iterable<FieldMeta>): void {
  const state = entity[STATE]
  const forget = (prop: string) => {
    delete state.values[prop]
    if (state.snapshot) delete state.snapshot[prop]
  }
  for (const field of fields) forget(field.prop)
  if (state.meta.version) forget(state.meta.version.prop)
  if (state.status === 'managed') state.status = 'stub'
}
