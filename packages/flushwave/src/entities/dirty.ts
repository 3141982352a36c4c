import { writeText } from '../schema/column-types.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import { STATE, type EntityState, type HasState } from './entity-state.js'
import type { IdentityMap } from './identity-map.js'

/**
 * Whether a field of a loaded entity (or a stub) differs from what its row is known to hold.
 * Scalars compare in text form, so in-place changes to a Date or a JSON object count; the version
 * field never counts (flushes own it).
 */
export function isChanged(state: EntityState, field: FieldMeta): boolean {
  if (field.version || !(field.prop in state.values)) return false
  const value = state.values[field.prop]
  const now = field.ref || value === null ? value : writeText(field.type, value)
  return !(state.snapshot && field.prop in state.snapshot && state.snapshot[field.prop] === now)
}

/** Whether the entity has a change for the next flush to write (its links not included). */
export function isDirty(state: EntityState): boolean {
  if (state.status === 'new' || state.status === 'removed') return true
  if (state.status !== 'managed' && state.status !== 'stub') return false
  return state.increments !== undefined || state.meta.fields.some((f) => isChanged(state, f))
}

/**
 * The entities a flush must diff: new, removed and touched ones (the map's pending list), and
 * watched ones whose Date or JSON values were changed in place (or made invalid in place: the
 * flush's checks then say so). Linear in those lists, not in the entities loaded: a no-op flush
 * over many loaded entities reads nothing of those whose mutable values were never handed out,
 * and a few comparisons per Date of those that were. Prunes from `pending` what a flush has taken.
 */
export function flushCandidates(map: IdentityMap): HasState[] {
  const out = map.prunePending(isCandidate).slice()
  let meta: EntityMeta | undefined
  let mutable: readonly FieldMeta[] = []
  for (const entity of map.watched) {
    const state = entity[STATE]
    const status = state.status
    if (status === 'detached') map.watched.delete(entity)
    // Those in pending are in already (a new or removed one is not diffed field by field).
    else if (status === 'new' || status === 'removed' || state.touched) continue
    else {
      if (state.meta !== meta) mutable = (meta = state.meta).mutableFields
      if (changedInPlace(state, mutable)) out.push(entity)
    }
  }
  return out
}

function isCandidate(state: EntityState): boolean {
  const status = state.status
  return status === 'new' || status === 'removed' || (state.touched && status !== 'detached')
}

function changedInPlace(state: EntityState, mutable: readonly FieldMeta[]): boolean {
  for (let i = 0; i < mutable.length; i++) {
    const field = mutable[i]!
    const value = state.values[field.prop]
    if (typeof value !== 'object' || value === null) continue
    const pinned = state.pins?.[i]
    // The common case: the same Date at the same time as when its text was the snapshot's.
    if (pinned !== undefined && pinned.date === value && pinned.time === (value as Date).getTime() && state.snapshot?.[field.prop] === pinned.text) continue
    if (field.type.check(value) !== undefined || isChanged(state, field)) return true
    if (value instanceof Date) pin(state, i, value)
  }
  return false
}

/**
 * Remembers, right after the snapshot's text was made from them, which Date each mutable field held
 * and at what time, so that a no-op flush over many loaded entities costs a few comparisons per
 * Date, not a toISOString(). Call it only where the snapshot's text was made from the value in the
 * same synchronous step (a pin taken later could pair a new time with an old text). A stale pin is
 * harmless: it counts only while the snapshot still holds its text.
 */
export function pinDates(state: EntityState): void {
  const mutable = state.meta.mutableFields
  for (let i = 0; i < mutable.length; i++) {
    const value = state.values[mutable[i]!.prop]
    if (value instanceof Date && Number.isFinite(value.getTime())) pin(state, i, value)
  }
}

function pin(state: EntityState, index: number, date: Date): void {
  const text = state.snapshot?.[state.meta.mutableFields[index]!.prop]
  if (typeof text !== 'string') return
  state.pins ??= []
  state.pins[index] = { date, time: date.getTime(), text }
}
