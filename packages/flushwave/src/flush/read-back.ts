import type { IdPool } from '../ids/id-pool.js'
import type { Op } from '../plan/ops.js'
import { writeText } from '../schema/column-types.js'
import type { FieldMeta } from '../schema/meta.js'
import { returnedCounter, returnedGenerated, returnedId, returnedOmitted, returnedVersion, upsertedRow, upsertedValue } from '../sql/returning.js'
import { forgetCounters } from '../entities/counters.js'
import { isChanged } from '../entities/dirty.js'
import { STATE, type EntityState, type HasState } from '../entities/entity-state.js'
import type { UnitOfWork } from '../entities/unit-of-work.js'
import type { ChangeSet } from './change-set.js'

/**
 * After COMMIT, what the statements returned (see sql/returning.ts) reaches the entities: counters
 * and versions of updates with increments, the rows upserts met, and the rows the server's cascades
 * reached. Without the rows (a commit recovered after a lost connection) each falls back as it says.
 */

/**
 * Sets what the UPDATEs with increments returned: each counter that was incremented, and the
 * version. A value assigned while the flush was in flight stays, to be written by the next one.
 * Without the rows (the commit was recovered after a lost connection), the values are forgotten.
 */
export function readBack(uow: UnitOfWork, counted: ChangeSet['counted'], returned: ReadonlyMap<Op, readonly (readonly unknown[])[]>): void {
  const done = new Set<HasState>()
  for (const [op, rows] of returned) {
    if (op.kind !== 'update') continue
    const meta = op.entity
    const counters = meta.counters
    const version = meta.version
    for (const row of rows) {
      const entity = uow.map.get(meta, meta.id.type.fromDb(returnedId(row)))
      const deltas = entity && counted.get(entity)
      if (!entity || !deltas) continue
      const state = entity[STATE]
      const snapshot = (state.snapshot ??= {})
      counters.forEach((field, c) => {
        if (!deltas.has(field)) return
        const raw = returnedCounter(row, c)
        const value = raw === null || raw === undefined ? null : field.type.fromDb(raw)
        if (!isChanged(state, field)) state.values[field.prop] = value
        snapshot[field.prop] = value === null ? null : writeText(field.type, value)
      })
      if (version) {
        const value = version.type.fromDb(returnedVersion(row, counters.length))
        state.values[version.prop] = value
        snapshot[version.prop] = version.type.toText(value)
      }
      done.add(entity)
    }
  }
  for (const [entity, deltas] of counted) if (!done.has(entity)) forgetCounters(entity, deltas.keys())
}

/**
 * New entities take the values of the columns their INSERT left to the server (InsertOp.omit), as
 * it returned them, into their values and snapshot: a later flush does not write them again. A
 * value assigned while the flush was in flight stays, to be written by the next one. Without the
 * rows (a commit recovered after a lost connection) the entity becomes a stub: a load fills them in.
 */
export function readServerValues(uow: UnitOfWork, entities: readonly HasState[], returned: ReadonlyMap<Op, readonly (readonly unknown[])[]>): void {
  if (entities.length === 0) return
  let read = 0
  for (const [op, rows] of returned) {
    if (op.kind !== 'insert' || op.omit === undefined || op.upsert !== undefined) continue
    const meta = op.entity
    const omit = op.omit
    for (let r = 0; r < rows.length; r++) {
      const row = rows[r]!
      const entity = uow.map.get(meta, meta.id.type.fromDb(returnedId(row)))
      if (entity === undefined) continue
      const state = entity[STATE]
      const snapshot = (state.snapshot ??= {})
      for (let k = 0; k < omit.length; k++) {
        const field = meta.fields[omit[k]!]!
        const raw = returnedOmitted(row, k)
        // A time stays a number until user code reads it (see ColumnType.timeFromDb).
        const value = raw === null || raw === undefined ? null : field.type.timeFromDb ? field.type.timeFromDb(raw) : field.type.fromDb(raw)
        snapshot[field.prop] = value === null ? null : writeText(field.type, value)
        if (!(field.prop in state.values)) state.values[field.prop] = value
      }
      read++
    }
  }
  if (read === entities.length) return
  for (const entity of entities) {
    const state = entity[STATE]
    if (state.status === 'managed' && state.meta.serverValued.some((i) => !(state.meta.fields[i]!.prop in state.values))) state.status = 'stub'
  }
}

/**
 * Updated rows' generated columns, which may have changed with their inputs: the UPDATE returned
 * them (returning.ts), and `written`, the updated entities that have such columns, take them. An entity whose row did not come back (a commit
 * recovered after a lost connection returns none) forgets them (regenerated).
 */
export function readGenerated(uow: UnitOfWork, written: readonly HasState[], returned: ReadonlyMap<Op, readonly (readonly unknown[])[]>): void {
  let read: Set<HasState> | undefined
  for (const [op, rows] of returned) {
    if (op.kind !== 'update' || op.entity.generated.length === 0) continue
    const meta = op.entity
    for (const row of rows) {
      const entity = uow.map.get(meta, meta.id.type.fromDb(returnedId(row)))
      if (entity === undefined) continue
      const state = entity[STATE]
      meta.generated.forEach((field, g) => {
        const raw = returnedGenerated(op, row, g)
        const value = raw === null || raw === undefined ? null : field.type.timeFromDb ? field.type.timeFromDb(raw) : field.type.fromDb(raw)
        state.values[field.prop] = value
        if (state.snapshot) state.snapshot[field.prop] = value === null ? null : writeText(field.type, value)
      })
      ;(read ??= new Set()).add(entity)
    }
  }
  for (const entity of written) if (!read?.has(entity)) regenerated(entity[STATE])
}

/**
 * An updated row whose generated columns are not known: the entity forgets them and becomes a stub,
 * so that reading one says to load it, and a load fills them in (and only them: see UnitOfWork.hydrate).
 */
export function regenerated(state: EntityState): void {
  for (const field of state.meta.generated) {
    delete state.values[field.prop]
    if (state.snapshot) delete state.snapshot[field.prop]
  }
  if (state.status === 'managed') state.status = 'stub'
}

/**
 * Upserted entities take the row their statement returned: its id (on a conflict, an existing
 * row's: the id the flush had taken for it goes back to the pool, never committed) and its columns.
 * When this EntityManager already held that row as another object (a reference it never loaded),
 * that object takes the row and the upsert's is detached. Without the rows (a commit recovered
 * after a lost connection) the id is unknown: the entity is detached, and its row found by its key.
 */
export function settleUpserts(uow: UnitOfWork, ids: IdPool, set: ChangeSet, returned: ReadonlyMap<Op, readonly (readonly unknown[])[]>): void {
  const upserted = set.upserted
  if (upserted.length === 0) return
  const rows = new Map<string, readonly unknown[]>()
  for (const [op, list] of returned) {
    if (op.kind !== 'insert' || op.upsert === undefined) continue
    const key = op.upsert.key === 'id' ? (['id'] as const) : op.upsert.key
    // An id as the unit of work holds it (a composite key's tuple comes back in the server's form).
    const id = (raw: unknown) => op.entity.id.type.toText(op.entity.id.type.fromDb(raw))
    for (const row of list) rows.set(`${op.entity.name}\u0000${key.map((f) => (f === 'id' ? id(upsertedValue(op, row, f)) : textOf(f, upsertedValue(op, row, f)))).join('\u0000')}`, upsertedRow(row))
  }
  const deleted = new Set(set.deleted.map((e) => `${e[STATE].meta.name}\u0000${String(e[STATE].id)}`))
  for (const entity of upserted) {
    const state = entity[STATE]
    const meta = state.meta
    const spec = state.upsert!
    const taken = state.flushId !== undefined // by this flush, from the pool (or a composed key)
    const sent = state.flushId ?? meta.id.type.toText(state.id)
    const key = spec.key === 'id' ? [sent] : spec.key.map((f) => textOf(f, f.ref ? (state.values[f.prop] as HasState)[STATE].id : state.values[f.prop], true))
    const row = rows.get(`${meta.name}\u0000${key.join('\u0000')}`)
    uow.map.delete(entity) // registered under the id it was sent with
    if (row === undefined) {
      state.status = 'detached'
      continue
    }
    state.id = meta.id.type.fromDb(returnedId(row))
    const id = meta.id.type.toText(state.id)
    if (id !== sent && taken && !meta.key) ids.give(meta, [sent])
    state.poolId = false
    // The row this upsert met was deleted later in the same flush (a reference to it removed).
    if (deleted.has(`${meta.name}\u0000${id}`)) {
      state.status = 'detached'
      continue
    }
    const held = uow.map.get(meta, state.id)
    if (held !== undefined && held !== entity) {
      state.status = 'detached'
      uow.hydrate(meta, row, true)
      continue
    }
    uow.map.add(entity)
    uow.hydrate(meta, row, true) // the row's columns: a conflict's existing row keeps those not given
  }
}

/** A key column as text, from a returned row (`raw`) or, with `fromValue`, from an entity's value. */
function textOf(field: FieldMeta | undefined, raw: unknown, fromValue = false): string {
  if (raw === null || raw === undefined) return ''
  if (field === undefined || field.ref) return String(raw)
  return writeText(field.type, fromValue ? raw : field.type.fromDb(raw))
}

/**
 * The rows the server's cascades deleted or unlinked, by the ids their statements returned: loaded
 * entities among them are detached, or lose the reference, even when the client could not see the
 * way there (through a reference it never loaded). The change set's own guess covers the rest.
 */
export function followCascades(uow: UnitOfWork, returned: ReadonlyMap<Op, readonly (readonly unknown[])[]>): void {
  for (const [op, rows] of returned) {
    if (op.kind !== 'delete' && op.kind !== 'cascade-delete' && op.kind !== 'cascade-null' && op.kind !== 'cascade-soft-delete') continue
    const meta = op.kind === 'delete' ? op.entity : op.rows.entity
    for (const row of rows) {
      const entity = uow.map.get(meta, meta.id.type.fromDb(returnedId(row)))
      const state = entity?.[STATE]
      if (!entity || !state || (state.status !== 'managed' && state.status !== 'stub')) continue
      uow.changing(entity)
      if (op.kind === 'cascade-null') {
        const field = op.rows.field
        if (!isChanged(state, field)) state.values[field.prop] = null // unless set again while the flush was in flight
        if (state.snapshot) state.snapshot[field.prop] = null
      } else if (op.kind === 'cascade-soft-delete') {
        // Marked deleted by the server, as the row now is; a time is held as its milliseconds until read.
        const field = meta.softDelete!
        const time = Date.parse(op.at)
        if (!isChanged(state, field)) state.values[field.prop] = time
        if (state.snapshot) state.snapshot[field.prop] = writeText(field.type, time as never)
      } else {
        state.status = 'detached'
        uow.map.delete(entity)
      }
    }
  }
}
