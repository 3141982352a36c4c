import { keyParts } from '../schema/column-types.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'

/**
 * - new: created in this EntityManager, not yet inserted;
 * - managed: its row exists and `snapshot` holds what the row is known to contain;
 * - stub: only its id is known (a reference not yet loaded); properties set on it are written as-is;
 * - removed: to be deleted by the next flush;
 * - detached: deleted, or dropped before it was ever inserted.
 */
export type Status = 'new' | 'managed' | 'stub' | 'removed' | 'detached'

export const STATE: unique symbol = Symbol('flushwave.state')

/** Internal bookkeeping behind every entity object; users never see it. */
export interface EntityState {
  readonly meta: EntityMeta
  /** The EntityManager that owns the entity (opaque here to avoid an import cycle). */
  readonly owner: object
  status: Status
  /**
   * Undefined until known: a new sequence-id entity gets its id from the pool at create when the
   * pool holds one, else from `em.assignIds()` or the flush that inserts it.
   */
  id: unknown
  /**
   * The id came from the pool at create (or `em.assignIds()`) and no flush that may have committed
   * has sent it: an abandoned unit of work may give it back.
   */
  poolId: boolean
  /**
   * While a flush is in flight: the id (or composite-key tuple), as text, that it took for this
   * new entity and sends in its INSERT; it becomes `id` at COMMIT and is cleared whatever the
   * outcome. A field, not a Map the flush carries: a 100,000-row flush looked each one up four times.
   */
  flushId: string | undefined
  /** Its index in the identity map's list of its type (-1 when not tracked): see TrackedList. */
  slot: number
  /** In the identity map's pending list (see IdentityMap.prunePending). */
  pending: boolean
  /**
   * Current values by property: scalars as JS values, many-to-one as the target entity or null. A
   * `defaultNow()` time that no user code has read yet is held as its epoch milliseconds, and made a
   * Date when first read (readValue): a Date costs several times the heap of the number, and most
   * new rows' timestamps are never read before their flush (docs/design-notes.md, "Timestamps held
   * as numbers until read"). Read values through readValue, or writeText, which takes both forms.
   */
  readonly values: Record<string, unknown>
  /**
   * What the row holds, by property: scalars in PostgreSQL text form (so in-place changes to a Date
   * or a JSON object are seen), many-to-one as the target entity. Undefined for new entities and stubs.
   */
  snapshot: Record<string, unknown> | undefined
  /** Created by this EntityManager: its row had no children or links but those made here. */
  readonly createdHere: boolean
  /**
   * A property was set or a link changed since the last flush took this entity's changes (or since
   * it was read): the next flush must diff it. Untouched managed entities are diffed only when
   * watched, for their Dates and JSON values, which can change in place without a setter.
   */
  touched: boolean
  /**
   * User code may hold one of its Date or JSON values (it read one through a getter or `toJSON`, or
   * assigned one): such a value can change in place without a setter, so every flush checks this
   * entity. Values read from the database and never handed out cannot, and are not checked.
   */
  watched: boolean
  /** Dates of the snapshot, for a cheap in-place-change check (see pinDates). */
  pins: (DatePin | undefined)[] | undefined
  /**
   * Pending `em.increment` deltas of a managed entity or a stub, by field: added on the server
   * (`col = col + delta`) by the next flush, which reads the new values back. Undefined when none.
   */
  increments: Map<FieldMeta, unknown> | undefined
  /**
   * Set by `em.upsert` on a new entity: its INSERT goes `on conflict (key) do update` of the given
   * properties, and the flush takes its id from the row (an existing row's, on a conflict).
   */
  upsert: Upsert | undefined
  /** Collection objects by property, made on first access (most entities never have one). */
  collections: Map<string, unknown> | undefined
}

export interface Upsert {
  /** The unique key the conflict is on: fields of a unique constraint, or 'id' for a provided id. */
  readonly key: readonly FieldMeta[] | 'id'
  /** The properties a conflict updates: those the upserts gave, the key's aside. */
  readonly update: Set<FieldMeta>
}

/** A Date held by a mutable field, its time, and the snapshot text it had then. */
export interface DatePin {
  readonly date: Date
  readonly time: number
  readonly text: string
}

export interface HasState {
  readonly [STATE]: EntityState
}

/** The state of an entity; undefined for anything else, null and undefined included (untyped callers pass them). */
/**
 * Whether the entity is gone as collections see it: removed, detached, or soft-deleted (its
 * soft-delete time set, flushed or not), as a read would leave it out.
 */
export function isGone(state: EntityState): boolean {
  if (state.status === 'removed' || state.status === 'detached') return true
  const soft = state.meta.softDelete
  if (soft === undefined) return false
  const time = state.values[soft.prop]
  return time !== null && time !== undefined
}

export function stateOf(entity: unknown): EntityState | undefined {
  return typeof entity === 'object' && entity !== null ? (entity as Partial<HasState>)[STATE] : undefined
}

export function label(state: EntityState): string {
  const id = state.id === undefined ? '' : state.meta.key ? `#(${keyParts(state.id as string).join(', ')})` : `#${String(state.id)}`
  return state.status === 'new' ? `new ${state.meta.name}${id}` : `${state.meta.name}${id}`
}
