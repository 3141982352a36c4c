import { EntityStateError } from '../errors.js'
import type { RowUpdate, Text } from '../plan/changes.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import { label, STATE, type EntityState, type HasState } from '../entities/entity-state.js'
import { addTo } from '../plan/groups.js'

/** Unique keys a flush moves between rows: rows deleted first because a write takes their key, and updates ordered so no key is held twice. */

/** Whether rows of `meta` have a key a written row could take: a unique key, or ids the application provides. */
export const keyed = (meta: EntityMeta): boolean => meta.uniqueKeys.length > 0 || meta.id.strategy === 'provided'

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
export function replacedKeys(
  removed: readonly HasState[],
  writers: readonly HasState[],
  fieldText: (state: EntityState, field: FieldMeta, value: unknown) => Text,
  idText: (state: EntityState) => string,
): Set<HasState> | undefined {
  const taken = new Set<string>()
  for (const entity of writers) {
    const state = entity[STATE]
    if (!keyed(state.meta)) continue
    for (const key of keysOf(state.meta, (f) => fieldText(state, f, state.values[f.prop]), () => idText(state))) taken.add(key)
  }
  if (taken.size === 0) return undefined
  const replaced = new Set<HasState>()
  for (const entity of removed) {
    const state = entity[STATE]
    const snapshot = state.snapshot
    if (state.status !== 'removed' || snapshot === undefined || !keyed(state.meta)) continue
    const old = (f: FieldMeta): Text => snapshotText(snapshot, f, idText)
    if (keysOf(state.meta, old, () => idText(state)).some((key) => taken.has(key))) replaced.add(entity)
  }
  if (replaced.size === 0) return undefined
  // Removed rows that refer to a replaced one go first with it (the planner deletes children first).
  // One whose values were never read may refer to it unseen: then nothing goes first.
  const referrers = new Map<HasState, HasState[]>()
  const unread: HasState[] = []
  for (const entity of removed) {
    const state = entity[STATE]
    const snapshot = state.snapshot
    // A stub knows only its key (a composite key's references among it): its other references are unread.
    if (snapshot === undefined || state.meta.fields.some((f) => f.ref && !(f.prop in snapshot))) {
      unread.push(entity)
      continue
    }
    for (const field of state.meta.fields) {
      if (!field.ref) continue
      const target = snapshot[field.prop] as HasState | null | undefined
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
export function snapshotText(snapshot: Record<string, unknown>, f: FieldMeta, idText: (state: EntityState) => string): Text {
  const value = snapshot[f.prop]
  return f.ref && value !== null && value !== undefined ? idText((value as HasState)[STATE]) : ((value as Text | undefined) ?? null)
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
export function orderKeyChanges(
  inserted: readonly HasState[],
  keyedUpdates: readonly (readonly [HasState, number])[],
  updates: RowUpdate[],
  fieldText: (state: EntityState, field: FieldMeta, value: unknown) => Text,
  idText: (state: EntityState) => string,
): void {
  let vacated: Map<string, HasState> | undefined
  const taking: [HasState, number, string[]][] = []
  for (const [entity, at] of keyedUpdates) {
    const state = entity[STATE]
    const snapshot = state.snapshot
    if (snapshot === undefined) continue
    const id = () => idText(state)
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
    for (const key of keysOf(state.meta, (f) => fieldText(state, f, state.values[f.prop]), () => idText(state))) {
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
export function keysOf(meta: EntityMeta, text: (field: FieldMeta) => Text, id: () => string): string[] {
  const out: string[] = []
  if (meta.id.strategy === 'provided') out.push(`${meta.name}\u0000id\u0000${id()}`)
  meta.uniqueKeys.forEach((key, k) => {
    const parts = key.map(text)
    if (parts.every((p) => p !== null)) out.push(`${meta.name}\u0000${k}\u0000${parts.join('\u0000')}`)
  })
  return out
}
