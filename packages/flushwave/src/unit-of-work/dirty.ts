import type { FieldMeta } from '../schema/meta.js'
import type { EntityState } from './entity-state.js'

/**
 * Whether a field of a loaded entity (or a stub) differs from what its row is known to hold.
 * Scalars compare in text form, so in-place changes to a Date or a JSON object count; the version
 * field never counts (flushes own it).
 */
export function isChanged(state: EntityState, field: FieldMeta): boolean {
  if (field.version || !(field.prop in state.values)) return false
  const value = state.values[field.prop]
  const now = field.ref || value === null ? value : field.type.toText(value)
  return !(state.snapshot && field.prop in state.snapshot && state.snapshot[field.prop] === now)
}

/** Whether the entity has a change for the next flush to write (its links not included). */
export function isDirty(state: EntityState): boolean {
  if (state.status === 'new' || state.status === 'removed') return true
  if (state.status !== 'managed' && state.status !== 'stub') return false
  return state.meta.fields.some((f) => isChanged(state, f))
}
