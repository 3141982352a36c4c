import { PRIMARY, type Executor } from '../drivers/executor.js'
import { EntityStateError, FlushError, FlushwaveError, InvalidValueError } from '../errors.js'
import { checkSession, type TransactionOptions } from '../sql/render-session.js'
import type { Statement } from '../sql/statement.js'
import type { Schema, SchemaDefs } from '../schema/define.js'
import type { AssignInput, CounterDelta, CounterName, CreateInput, Entity, EntityName } from '../schema/infer.js'
import { STATE, type HasState } from '../entities/entity-state.js'
import type { ChangeSet } from '../flush/change-set.js'
import { flushCandidates } from '../entities/dirty.js'
import { needingIds } from '../flush/change-set.js'
import { flush, type FlushResult } from '../flush/flush.js'
import type { Telemetry } from '../telemetry/telemetry.js'
import { afterCommitCalls, hasValidateHooks, runBeforeHooks, validateHook, type HookTable } from './hooks.js'
import { fetchOn, type IdPool } from '../ids/id-pool.js'
import { TransactionJournal } from '../entities/transaction-journal.js'
import { DEFAULT_MAX_ROWS } from '../plan/chunk.js'
import { validate } from '../entities/validation.js'
import { checkMutableValues } from '../entities/entity-class.js'
import { EntityReads, type ReadSettings } from './entity-reads.js'

/** What `em.upsert` conflicts on: a unique property, the properties of a unique key, or a provided id. */
export interface UpsertOptions<D extends SchemaDefs, K extends EntityName<D>> {
  readonly onConflict: (keyof CreateInput<D, K> & string) | readonly (keyof CreateInput<D, K> & string)[]
}

/**
 * EntityManagers of idempotent units of work (idempotent.ts): 'working' while the work runs (it
 * may neither flush nor open a transaction), then the key's record, which their one flush sends.
 * Kept outside the class, so that it is no method of the public API.
 */
const idempotentRuns = new WeakMap<object, 'working' | { readonly record: Statement }>()

/** Marks `em` as running an idempotent unit of work's work. */
export function startIdempotentWork(em: object): void {
  idempotentRuns.set(em, 'working')
}

/** The work is done: the next flush of `em` carries `record` (in its transaction, right after the ledger's row). */
export function recordOnFlush(em: object, record: Statement): void {
  idempotentRuns.set(em, { record })
}

const IDEMPOTENT_WORK =
  'inside an idempotent unit of work (idempotencyKey) the work neither flushes nor opens a transaction: orm.unitOfWork flushes its changes once, with the key'

/**
 * Lifecycle hooks of one entity. The `before…` hooks run at `flush()`, before anything is sent, and
 * may be async: they may load data, change entities, create or remove others, and those changes
 * join the same flush. `validate` reports problems; `afterCommit` runs once the data is committed.
 */
export interface EntityHooks<D extends SchemaDefs, K extends EntityName<D>> {
  beforeCreate?(entity: Entity<D, K>, em: EntityManager<D>): void | Promise<void>
  beforeUpdate?(entity: Entity<D, K>, em: EntityManager<D>): void | Promise<void>
  beforeDelete?(entity: Entity<D, K>, em: EntityManager<D>): void | Promise<void>
  /** Whole-entity rules for new and changed entities: a message, several, or nothing. */
  validate?(entity: Entity<D, K>): string | readonly string[] | undefined
  afterCommit?(entity: Entity<D, K>, change: 'created' | 'updated' | 'deleted', em: EntityManager<D>): void | Promise<void>
}

export interface Hooks<D extends SchemaDefs> {
  /** Per entity name. */
  readonly entities?: { readonly [K in EntityName<D>]?: EntityHooks<D, K> }
  /** Once per flush, first: may change anything. */
  readonly beforeFlush?: (em: EntityManager<D>) => void | Promise<void>
  /** Once per committed flush (after `em.transaction()` commits, for flushes inside it). */
  readonly afterCommit?: (result: FlushResult, em: EntityManager<D>) => void | Promise<void>
}

/**
 * One unit of work, typically one per request: an identity map of the entities it loaded or
 * created, and `flush()`, which writes every change in one transaction and (ids known) one round trip.
 */
export class EntityManager<D extends SchemaDefs> extends EntityReads<D> {
  private flushing = false
  private assigning = false
  /** afterCommit calls of flushes inside `transaction()`, made once it commits. */
  private deferred: (() => Promise<void>)[] | undefined
  /** Inside a read-only `transaction()`: flushes that would write are refused. */
  private readOnly = false
  /** A flush inside `transaction()` wrote: once it commits, reads must see it. */
  private wroteInTransaction = false

  /** @internal use `Flushwave.em()` */
  constructor(
    schema: Schema<D>,
    executor: Executor,
    private readonly ids: IdPool,
    private readonly hooks: Hooks<D> = {},
    private readonly maxRowsPerStatement: number = DEFAULT_MAX_ROWS,
    reads: ReadSettings = {},
    private readonly telemetry?: Telemetry,
  ) {
    super(schema, executor, reads)
  }

  /**
   * Runs `fn` inside one database transaction: its reads see its own flushes, each flush pipelines
   * its statements with no BEGIN or COMMIT of its own, and the transaction commits when `fn`
   * resolves. If `fn` throws (or COMMIT fails), everything rolls back and the EntityManager is as it
   * was before: every entity changed inside has its values, status and collections back, entities
   * created inside are dropped, and entities first read inside are detached (read them again).
   * Changes made in place to a Date or JSON value (`date.setTime()`, `doc.n = 1`) are not seen when
   * made, so they are not undone: they stay pending, as they would outside a transaction.
   */
  async transaction<T>(fn: (em: this) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    if (this.uow.journal) throw new EntityStateError('transactions do not nest: already inside em.transaction()')
    if (idempotentRuns.has(this)) throw new EntityStateError(IDEMPOTENT_WORK)
    checkSession(options, 'em.transaction()')
    const outer = this.executor
    const withOptions = Object.values(options).some((v) => v !== undefined)
    if (withOptions && outer.withSession === undefined) throw new FlushwaveError('em.transaction(): this executor takes no transaction options (its withSession() is missing)')
    const journal = new TransactionJournal()
    const deferred: (() => Promise<void>)[] = []
    let value: T
    let fnFailed = false
    try {
      const inside = async (executor: Executor) => {
        this.executor = executor
        this.uow.journal = journal
        this.deferred = deferred
        this.readOnly = options.readOnly === true
        try {
          return await fn(this)
        } catch (error) {
          fnFailed = true
          throw error
        } finally {
          this.executor = outer
          this.uow.journal = undefined
          this.deferred = undefined
          this.readOnly = false
        }
      }
      value = await (this.telemetry ? this.telemetry.transaction(options.isolation, () => outer.transaction(inside, options)) : outer.transaction(inside, options))
    } catch (error) {
      // Ids that flushes inside took are free again once the rollback is certain: the callback threw
      // (COMMIT was never sent) or the server refused COMMIT. A connection lost at COMMIT may have committed.
      const rolledBack = fnFailed || error instanceof FlushError
      journal.restore(this.uow.map, rolledBack ? (meta, ids) => this.ids.give(meta, ids) : undefined, (entity) => this.uow.restored(entity))
      throw error
    }
    // Its commit's WAL position is not known: with replicas, later reads go to the primary.
    if (this.wroteInTransaction) this.executor = this.executor.after?.(PRIMARY) ?? this.executor
    this.wroteInTransaction = false
    for (const call of deferred) await call()
    return value
  }

  /**
   * What this EntityManager's reads must see, to hand to the next request (`orm.em({ after })`, in
   * a cookie or a header), so that a user's next page shows their own writes on a replica: the
   * WAL position of its last flush, or `'primary'` after a transaction that wrote (reads then go to
   * the primary). Undefined before any write, and without replicas.
   */
  consistencyToken(): string | undefined {
    return this.executor.position
  }

  /** With replicas, the reads after a flush see its commit: its WAL position, or the primary's when unknown. */
  private sawWrite(result: FlushResult): void {
    if (this.uow.journal !== undefined) this.wroteInTransaction = true
    else if (this.executor.after !== undefined) this.executor = this.executor.after(result.lsn ?? PRIMARY)
  }

  /**
   * A new entity, inserted by the next flush. Defaults apply now; a uuid id is made now, and a
   * sequence id is taken now when the process's id pool holds one (it usually does: `warmUp()`
   * fills it and flushes top it up), so `entity.id` can be read at once; otherwise
   * `await em.assignIds()` or the flush gives it one.
   */
  create<K extends EntityName<D>>(name: K, data: CreateInput<D, K>): Entity<D, K> {
    const meta = this.schema.meta(name)
    const entity = this.uow.create(meta, data as Record<string, unknown>)
    if (meta.id.strategy === 'sequence') {
      const id = this.ids.takeNow(meta)
      if (id !== undefined) this.uow.giveId(entity, id, true)
    }
    return entity as unknown as Entity<D, K>
  }

  /**
   * Insert or update by a unique key, in the next flush's pipeline: its INSERT goes `on conflict
   * (key) do update` of the properties in `data` (the key's aside), and returns the row, whose id
   * and columns the entity then takes (an existing row keeps its other columns; a versioned one
   * advances its version, unchecked). `onConflict` names a unique property, the properties of a
   * unique key, or the id when the application provides ids. When this EntityManager already holds
   * the entity with that key (an upsert made before, or a row read), that entity is returned with
   * `data` assigned: two upserts of one key in a flush are one row, the later values winning. The
   * id is known after the flush; rows written in the same flush cannot refer to it yet.
   */
  upsert<K extends EntityName<D>>(name: K, data: CreateInput<D, K>, options: UpsertOptions<D, K>): Entity<D, K> {
    const meta = this.schema.meta(name)
    if (typeof options !== 'object' || options === null) throw new InvalidValueError(meta.name, 'options', options, 'upsert() takes { onConflict }')
    return this.uow.upsert(meta, data as Record<string, unknown>, options.onConflict) as unknown as Entity<D, K>
  }

  /**
   * Gives every new entity that has no id yet (upserted ones aside) its sequence id, in one round trip when the id pool
   * runs short (none when it holds enough), so that the ids can be read before the flush. Ids stay
   * with their entities through failed flushes; `orm.unitOfWork` gives an abandoned attempt's back.
   */
  async assignIds(): Promise<void> {
    if (this.flushing) throw new EntityStateError('assignIds() cannot run while flush() is running')
    // Upserted entities take their row's id at the flush (an existing row's, on a conflict).
    const needed = needingIds(flushCandidates(this.uow.map).filter((e) => e[STATE].upsert === undefined))
    if (needed.size === 0) return
    this.assigning = true
    try {
      const counts = new Map([...needed].map(([meta, list]) => [meta, list.length]))
      const { ids } = await this.ids.take(counts, fetchOn(this.executor), { private: this.uow.journal !== undefined })
      for (const [meta, list] of needed) {
        const unused: string[] = []
        list.forEach((entity, i) => {
          const state = entity[STATE]
          const id = ids.get(meta)![i]!
          if (state.status !== 'new' || state.id !== undefined) return void unused.push(id) // removed meanwhile
          this.uow.changing(entity)
          this.uow.giveId(entity, id)
        })
        if (unused.length > 0) this.ids.give(meta, unused)
      }
    } finally {
      this.assigning = false
    }
  }

  /**
   * For a unit of work being abandoned: the sequence ids its new entities took that no flush may
   * have committed go back to the pool, and those entities lose them (a later flush would take
   * others). `orm.unitOfWork` does it between attempts; a hand-written retry loop may too.
   */
  releaseIds(): void {
    this.uow.releaseIds((meta, ids) => this.ids.give(meta, ids))
  }

  /**
   * Sets several columns and references at once, all or nothing: every value is checked first, so
   * one bad value (InvalidValueError) leaves the entity as it was, unlike `Object.assign`.
   */
  assign<K extends EntityName<D>>(entity: Entity<D, K>, data: AssignInput<D, K>): Entity<D, K> {
    this.uow.assign(entity as unknown as HasState, data as Record<string, unknown>)
    return entity
  }

  /**
   * Adds `by` to a number column (integer, bigint, numeric) on the server: the next flush sends
   * `col = col + by` in its pipeline, merged into the row's UPDATE with its other changes, and sets
   * the column's new value (and the version) from the row it wrote. Works on a reference
   * (`em.ref`) without reading the row; checks no version (adding commutes), though the row's
   * version still advances. Increments of one property add up until the flush; assigning the
   * property replaces them. A row that is gone fails the flush (OptimisticLockError), and a CHECK
   * the new value breaks fails it as CheckViolationError naming the constraint. On a new entity it
   * adds to the value its INSERT will write.
   */
  increment<K extends EntityName<D>, F extends CounterName<D, K>>(entity: Entity<D, K>, prop: F, by: CounterDelta<D, K, F>): void {
    this.uow.increment(entity as unknown as HasState, prop, by)
  }

  /** Marks an entity for deletion by the next flush (a new one is simply dropped). */
  remove<K extends EntityName<D>>(entity: Entity<D, K>): void {
    this.uow.remove(entity as unknown as HasState)
  }

  /**
   * Writes every change in one transaction; see FlushResult for what it did. First the hooks run
   * and every validation rule is checked (nothing is sent if one fails), then ids are taken from
   * the pool and everything goes out in one pipeline.
   */
  flush(): Promise<FlushResult> {
    const telemetry = this.telemetry
    return telemetry === undefined ? this.flushChanges() : telemetry.flush(() => this.flushChanges(), this.uow.journal !== undefined)
  }

  private async flushChanges(): Promise<FlushResult> {
    const idempotent = idempotentRuns.get(this)
    if (idempotent === 'working') throw new EntityStateError(IDEMPOTENT_WORK)
    const record = idempotent?.record
    if (this.flushing) throw new EntityStateError('flush() is already running on this EntityManager')
    if (this.assigning) throw new EntityStateError('assignIds() is running on this EntityManager: await it before flush()')
    this.flushing = true
    try {
      const checking = performance.now()
      // Dates and JSON objects may have been changed in place since they were assigned: check them
      // before anything reads their text (hooks, dirty checks), and again after hooks that may change them.
      // Each check below is a pass over every candidate (2–3 ms for 100,000 new rows): skipped when
      // nothing can fail it, as when no entity holds a Date or JSON value user code may change in place.
      let candidates = flushCandidates(this.uow.map)
      if (this.uow.map.watched.size > 0) checkMutableValues(candidates)
      if (this.hooks.beforeFlush || this.hooks.entities) {
        await runBeforeHooks(this.hooks as HookTable<this>, this, this.uow.map)
        // Hooks may have created, changed or removed entities.
        candidates = flushCandidates(this.uow.map)
        if (this.uow.map.watched.size > 0) checkMutableValues(candidates)
      }
      if (this.schema.fieldRules || hasValidateHooks(this.hooks as HookTable<this>)) {
        validate(candidates, (name) => validateHook(this.hooks as HookTable<this>, name) as never)
      }
      const checks = performance.now() - checking
      let written: ChangeSet | undefined
      const result = await flush(
        {
          uow: this.uow,
          candidates,
          executor: this.executor,
          ids: this.ids,
          schema: this.schema,
          inTransaction: this.uow.journal !== undefined,
          maxRows: this.maxRowsPerStatement,
          onWritten: (set) => (written = set),
          readOnly: this.readOnly,
          record,
        },
        checks,
      )
      if (result.statements > 0) this.sawWrite(result)
      const after = written && afterCommitCalls(this.hooks as HookTable<this>, this, result, written)
      if (after && this.deferred) this.deferred.push(after)
      else if (after) await after()
      return result
    } finally {
      this.flushing = false
    }
  }


}
