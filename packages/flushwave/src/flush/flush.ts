import type { Executor, Recovery } from '../drivers/executor.js'
import { forgetCounters, restoreIncrements } from '../entities/counters.js'
import { STATE, type EntityState, type HasState } from '../entities/entity-state.js'
import type { UnitOfWork } from '../entities/unit-of-work.js'
import { ConnectionLostError, FlushError, ReadOnlyTransactionError } from '../errors.js'
import { fetchOn, type IdPool } from '../ids/id-pool.js'
import { isEmpty, type NewRows } from '../plan/changes.js'
import { rowCount, tableOf, type Op } from '../plan/ops.js'
import type { Plan, Preparation } from '../plan/plan.js'
import { planFlush } from '../plan/planner.js'
import type { SchemaFacts } from '../schema/derive.js'
import type { EntityMeta } from '../schema/meta.js'
import { renderPlan } from '../sql/render-write.js'
import type { Statement, WriteStatement } from '../sql/statement.js'
import { serverCountsRows } from '../sql/returning.js'
import { composeKeys, computeChanges, needingIds, type ChangeSet } from './change-set.js'
import { keepShapes } from './kept-shapes.js'
import { PhaseClock, type FlushPhases } from './phases.js'
import { followCascades, readBack, readGenerated, readServerValues, settleUpserts } from './read-back.js'
import { tableCounts } from './table-counts.js'

/** Ops that change rows in place: their counts are `updated`, whatever else they are part of. */
const UPDATES = new Set(['update', 'cascade-null', 'unlink-cycle', 'cascade-soft-delete'])

/** What a flush did. */
export interface FlushResult {
  /**
   * Rows written per table (join tables included), as the server counted them. These four records
   * have no prototype (see table-counts.ts): a table may be called `constructor` or `__proto__`.
   */
  readonly inserted: Readonly<Record<string, number>>
  /** Rows upserted per table (`em.upsert`): inserted, or updated on a conflict. */
  readonly upserted: Readonly<Record<string, number>>
  readonly updated: Readonly<Record<string, number>>
  readonly deleted: Readonly<Record<string, number>>
  /** Of `inserted`, the rows per table that went by COPY (plan/copy-policy.ts: large plain inserts, or `copyRows`). */
  readonly copied: Readonly<Record<string, number>>
  readonly statements: number
  readonly waves: number
  /** Round trips waited on: id allocation, then each pipeline (plus any describe wait postgres.js made; see cold-shapes.ts). */
  readonly roundTrips: number
  /** Statement shapes new to the connection: parsed by the server in this flush, at no extra round trip. */
  readonly coldStatements: number
  readonly durationMs: number
  /** Where `durationMs` went, in ms (see FlushPhases). */
  readonly phases: FlushPhases
  readonly plan: Plan
  /**
   * Set when the connection failed after COMMIT was sent and the server, asked on a fresh
   * connection, said the transaction had committed: the flush succeeded, and its row counts come
   * from the plan rather than from the server.
   */
  readonly recovered?: Recovery
  /**
   * With replicas: the primary's WAL position after this flush's COMMIT (`16/B374D848`), asked in
   * the same pipeline. The EntityManager's later reads on a replica wait for it (read-your-writes);
   * `em.consistencyToken()` carries it to another request.
   */
  readonly lsn?: string
}

export interface FlushContext {
  readonly uow: UnitOfWork
  /** The entities that may have changes (see flushCandidates): the only ones diffed. */
  readonly candidates: readonly HasState[]
  readonly executor: Executor
  readonly ids: IdPool
  readonly schema: SchemaFacts
  /** Inside `em.transaction()`: ids are fetched on its connection (the transaction's journal restores the rest). */
  readonly inTransaction?: boolean
  /** Rows per statement at most. */
  readonly maxRows?: number
  /** Told, after the bookkeeping, which entities the committed (or journaled) flush wrote. */
  readonly onWritten?: (set: ChangeSet) => void
  /** Inside a read-only `em.transaction()`: a flush that would write is refused before anything is sent. */
  readonly readOnly?: boolean
  /** An idempotent unit of work's key record: sent in the flush's transaction, which then commits even with nothing else to write. */
  readonly record?: Statement
}

/**
 * change set → ids → plan → SQL → one pipelined transaction → record. Entity states change only
 * after COMMIT, so a failed flush leaves the EntityManager as it was and can simply be retried.
 * `checksMs`: the EntityManager's hooks and checks before this, counted in the result's times.
 */
export async function flush(ctx: FlushContext, checksMs: number): Promise<FlushResult> {
  const clock = new PhaseClock(checksMs)
  if (ctx.readOnly) refuseWrites(ctx)
  const { assigned, preparation } = await assignIds(ctx)
  clock.lap('ids')
  try {
    return await flushWithIds(ctx, clock, assigned, preparation)
  } finally {
    // Recorded as the entities' ids, given back, pinned or lost with an unknown outcome: settled either way.
    forgetFlushIds(assigned)
  }
}

/** The flush once its new entities have ids: changes, plan, SQL, the transaction, its record. */
async function flushWithIds(ctx: FlushContext, clock: PhaseClock, assigned: HasState[], preparation: readonly Preparation[]): Promise<FlushResult> {
  let set: ChangeSet
  try {
    if (ctx.schema.compositeKeys) composeKeys(ctx.uow.map, ctx.candidates, assigned)
    set = computeChanges(ctx.uow.map, ctx.candidates)
  } catch (error) {
    giveBack(ctx, assigned)
    throw error
  }
  // Inside `em.transaction()`, what this flush's bookkeeping will change is saved first, before
  // `touched` is cleared, so that a rollback puts each entity back as dirty as it was.
  if (ctx.uow.journal) saveWritten(ctx.uow, set)
  // Their changes are in the change set now; a property set while the flush is in flight touches
  // the entity again. A flush that fails touches them all again (below).
  for (let c = 0; c < ctx.candidates.length; c++) ctx.candidates[c]![STATE].touched = false
  // Increments are in flight now: one made meanwhile waits for the next flush, and a failure puts
  // these back (see below).
  for (const entity of set.counted.keys()) {
    entity[STATE].increments = undefined
    ctx.uow.journal?.incrementsSent(entity)
  }
  clock.lap('changes')
  const plan = planFlush(set.changes, ctx.schema, preparation, ctx.maxRows, ctx.executor.copyPolicy)
  clock.lap('plan')
  let prepared = 0
  for (const p of preparation) prepared += p.roundTrips
  if (isEmpty(set.changes) && ctx.record === undefined) return result(plan, [], prepared, 0, clock, [])
  const waves = renderPlan(plan)
  clock.lap('render')
  const inserted = assigned.length > 0 || set.inserted.length > 0 ? insertedPerTable(set.changes.inserts) : undefined
  // The id pool's refill, when this flush leaves it low and it is cheap for the server (pooled
  // sequences), rides at the end of the flush's pipeline, after COMMIT: no round trip of its own,
  // and no connection held apart from the flush's (a background refill on a pool of one made the
  // next flush wait behind it). Otherwise, and inside a transaction, it runs in the background.
  const refill = inserted && !ctx.inTransaction ? ctx.ids.dueRefill(inserted) : undefined
  let outcome
  try {
    outcome = await ctx.executor.write(waves, refill, ctx.record === undefined ? undefined : { record: ctx.record })
  } catch (error) {
    // Ids of a rolled-back transaction were never committed by anyone: safe to use again.
    if (error instanceof FlushError || (error instanceof ConnectionLostError && error.outcome === 'rolled-back')) {
      giveBack(ctx, assigned)
      for (const [entity, deltas] of set.counted) restoreIncrements(entity, deltas)
    }
    // It may have committed (a lost connection; or anything else, a driver's own error: no proof of
    // a rollback either). A retry after a lost connection must insert with the same ids, so that it
    // fails as a duplicate instead of writing the rows a second time; and no retry may add the same
    // increments again, or give back ids that may be committed rows'.
    else {
      if (error instanceof ConnectionLostError) keepIds(ctx.uow, assigned)
      for (const entity of set.inserted) entity[STATE].poolId = false
      for (const [entity, deltas] of set.counted) forgetCounters(entity, deltas.keys())
    }
    for (const entity of ctx.candidates) ctx.uow.map.touch(entity)
    ctx.uow.map.changedAll() // increments and ids put back, past the map's own methods
    throw error
  } finally {
    // Top up the id pool now, between flushes, rather than when the next flush runs short (or the
    // next creates find it empty): also when every id came at create.
    ctx.ids.afterFlush(refill, inserted)
  }
  clock.lap('write')
  const regenerate = record(ctx.uow, set)
  const returned = outcome.returned ?? new Map<Op, readonly (readonly unknown[])[]>()
  if (set.counted.size > 0) readBack(ctx.uow, set.counted, returned)
  if (set.serverFilled.length > 0) readServerValues(ctx.uow, set.serverFilled, returned)
  if (regenerate !== undefined) readGenerated(ctx.uow, regenerate, returned)
  if (returned.size > 0) followCascades(ctx.uow, returned)
  settleUpserts(ctx.uow, ctx.ids, set, returned)
  // Ids, statuses and values changed past the identity map's own methods: em.upsert's key indexes start over.
  ctx.uow.map.changedAll()
  ctx.onWritten?.(set)
  clock.lap('record')
  const done = result(plan, outcome.rowCounts, prepared + outcome.roundTrips, outcome.coldStatements, clock, waves)
  keepShapes(waves, [set.changes, waves, done, clock])
  if (outcome.recovered) return { ...done, recovered: outcome.recovered }
  return outcome.lsn === undefined ? done : { ...done, lsn: outcome.lsn }
}

/**
 * Gives the flush's new sequence-id entities without an id one from the pool, as their `flushId`:
 * `assigned` lists them (composeKeys adds the composite keys it composes) for the outcome to settle:
 * committed, the ids become theirs (record); rolled back, they go back to the pool (giveBack).
 */
async function assignIds(ctx: FlushContext): Promise<{ assigned: HasState[]; preparation: Preparation[] }> {
  const needed = needingIds(ctx.candidates)
  const assigned: HasState[] = []
  if (needed.size === 0) return { assigned, preparation: [] }
  const counts = new Map([...needed].map(([meta, list]) => [meta, list.length]))
  // Inside a transaction the fetch runs on the transaction's connection, which no other flush may wait on.
  const { ids, fetched } = await ctx.ids.take(counts, fetchOn(ctx.executor), { private: ctx.inTransaction === true })
  for (const [meta, list] of needed) {
    const taken = ids.get(meta)!
    for (let i = 0; i < list.length; i++) {
      list[i]![STATE].flushId = taken[i]!
      assigned.push(list[i]!)
    }
  }
  const preparation = fetched.map(({ counts, roundTrips, refill }): Preparation => ({
    kind: 'allocate-ids',
    counts,
    roundTrips,
    reason: refill
      ? 'the id pool ran short while a background refill was in flight: waited for it before the transaction'
      : 'the id pool ran short: one nextval() statement before the transaction',
  }))
  return { assigned, preparation }
}

function giveBack(ctx: FlushContext, assigned: readonly HasState[]): void {
  const byMeta = new Map<EntityMeta, string[]>()
  for (const entity of assigned) {
    const { meta, flushId } = entity[STATE]
    if (meta.key) continue // a key tuple (composeKeys), not from the pool
    const ids = byMeta.get(meta)
    if (ids) ids.push(flushId!)
    else byMeta.set(meta, [flushId!])
  }
  for (const [meta, ids] of byMeta) ctx.ids.give(meta, ids)
}

/** Pins the ids a flush of unknown outcome sent on its new entities (they stay new). */
function keepIds(uow: UnitOfWork, assigned: readonly HasState[]): void {
  for (const entity of assigned) {
    const state = entity[STATE]
    if (state.id !== undefined) continue
    state.id = state.meta.id.type.fromDb(state.flushId)
    uow.map.register(entity)
  }
}

function forgetFlushIds(assigned: readonly HasState[]): void {
  for (let i = 0; i < assigned.length; i++) assigned[i]![STATE].flushId = undefined
}

function saveWritten(uow: UnitOfWork, set: ChangeSet): void {
  for (const entity of set.inserted) uow.changing(entity)
  for (const entity of set.written.keys()) uow.changing(entity)
  for (const entity of set.deleted) uow.changing(entity)
  for (const [entity] of set.nulled) uow.changing(entity)
  for (const collection of set.collections) uow.changing(collection.owner)
}

/** After COMMIT: ids, statuses and snapshots now describe the rows. */
/** Returns the updated entities that have generated columns, whose new values the UPDATEs returned (readGenerated). */
function record(uow: UnitOfWork, set: ChangeSet): HasState[] | undefined {
  let regenerate: HasState[] | undefined
  for (let i = 0; i < set.inserted.length; i++) {
    const entity = set.inserted[i]!
    const state = entity[STATE]
    // An id taken at create (or provided) was registered then; one taken by this flush is new.
    if (state.id === undefined) {
      state.id = state.meta.id.type.fromDb(state.flushId)
      uow.map.register(entity)
    }
    state.poolId = false
    state.status = 'managed'
    wrote(state, set.insertedSnapshots[i]!)
  }
  for (const [entity, written] of set.written) {
    const state = entity[STATE]
    wrote(state, written)
    if (state.meta.generated.length > 0) (regenerate ??= []).push(entity)
  }
  for (const entity of set.deleted) {
    entity[STATE].status = 'detached'
    uow.map.delete(entity)
  }
  for (const [entity, field] of set.nulled) {
    const state = entity[STATE]
    state.values[field.prop] = null
    if (state.snapshot) state.snapshot[field.prop] = null
  }
  for (const collection of set.collections) collection.committed()
  return regenerate
}

/** The row now holds `written`: it joins the entity's snapshot. */
function wrote(state: EntityState, written: Record<string, unknown>): void {
  state.snapshot = state.snapshot ? Object.assign(state.snapshot, written) : written
  // Only a committed flush advances the in-memory version.
  const version = state.meta.version
  if (version && version.prop in written) state.values[version.prop] = version.type.fromDb(written[version.prop])
}

/** Rows inserted per table, for the id pool's demand. */
function insertedPerTable(inserts: readonly NewRows[]): Map<EntityMeta, number> {
  const out = new Map<EntityMeta, number>()
  for (const rows of inserts) out.set(rows.entity, (out.get(rows.entity) ?? 0) + rows.ids.length)
  return out
}

function result(plan: Plan, rowCounts: readonly (readonly number[])[], roundTrips: number, coldStatements: number, clock: PhaseClock, waves: readonly (readonly WriteStatement[])[]): FlushResult {
  const inserted = tableCounts()
  const copied = tableCounts()
  const upserted = tableCounts()
  const updated = tableCounts()
  const deleted = tableCounts()
  let statements = 0
  for (let w = 0; w < plan.waves.length; w++) {
    const ops = plan.waves[w]!.ops
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i]!
      statements++
      if (op.kind === 'lock' || op.kind === 'live-guard') continue // writes nothing
      const into = op.kind === 'insert' && op.upsert ? upserted : op.kind === 'insert' || op.kind === 'link-insert' ? inserted : UPDATES.has(op.kind) ? updated : deleted
      const table = tableOf(op)
      const counted = serverCountsRows(op) ? rowCounts[w]?.[i] : undefined
      into[table] = (into[table] ?? 0) + (counted ?? rowCount(op))
      if (waves[w]?.[i]?.copy !== undefined) copied[table] = (copied[table] ?? 0) + (counted ?? rowCount(op))
    }
  }
  return {
    inserted,
    upserted,
    updated,
    deleted,
    copied,
    statements,
    waves: plan.waves.length,
    roundTrips,
    coldStatements,
    durationMs: clock.total(),
    phases: clock.phases,
    plan,
  }
}

/**
 * In a read-only transaction, a flush with anything to write fails here, typed, before ids are taken
 * (nextval is a write too) or anything is sent. Entities touched without a change pass.
 */
function refuseWrites(ctx: FlushContext): void {
  let first = ctx.candidates.find((e) => e[STATE].status === 'new' || e[STATE].status === 'removed')
  if (first === undefined) {
    const set = computeChanges(ctx.uow.map, ctx.candidates)
    if (isEmpty(set.changes)) return
    first = set.written.keys().next().value
  }
  const state = first?.[STATE]
  const what = state === undefined ? 'a collection changed' : `${state.meta.name}${state.id === undefined ? '' : ` ${String(state.id)}`} is ${state.status === 'new' || state.status === 'removed' ? state.status : 'changed'}`
  throw new ReadOnlyTransactionError(`flush refused: the transaction is read only (em.transaction(fn, { readOnly: true })), and ${what}; nothing was sent`, {
    code: '25006',
    table: state?.meta.table ?? 'unknown',
    entity: state?.meta.name,
    constraint: undefined,
    detail: undefined,
  }, { retryable: false })
}
