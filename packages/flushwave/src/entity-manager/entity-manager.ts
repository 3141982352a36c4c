import type { Executor } from '../drivers/executor.js'
import { EntityStateError, FlushError, FlushwaveError, InvalidValueError, NotFoundError } from '../errors.js'
import type { Schema, SchemaDefs } from '../schema/define.js'
import type { AssignInput, CounterDelta, CounterName, CreateInput, Entity, EntityName, IdOf, OrderBy, RelationName, Where } from '../schema/infer.js'
import { STATE, type HasState } from '../entities/entity-state.js'
import type { ChangeSet } from '../flush/change-set.js'
import { flushCandidates, isDirty } from '../entities/dirty.js'
import { needingIds } from '../flush/change-set.js'
import { flush, type FlushResult } from '../flush/flush.js'
import { MAX_HOOK_ROUNDS, type EntityHooks, type Hooks } from './hooks.js'
import { fetchOn, type IdPool } from '../ids/id-pool.js'
import { Loader } from './loader.js'
import { ManyToManyCollection } from '../entities/many-to-many.js'
import { OneToManyCollection } from '../entities/one-to-many.js'
import { TransactionJournal } from '../entities/transaction-journal.js'
import { UnitOfWork } from '../entities/unit-of-work.js'
import { DEFAULT_MAX_ROWS } from '../plan/chunk.js'
import { validate } from '../entities/validation.js'
import { checkMutableValues } from '../entities/entity-class.js'
import { columnOf, conditions, isPlainObject } from './where.js'
import type { RowLock } from '../sql/render-select.js'
import { isServerError, lockingReadError } from '../drivers/protocol/pg-error.js'
import type { EntityMeta } from '../schema/meta.js'

/** A locking read's server errors, typed: `nowait` on a locked row is a (retryable) LockTimeoutError. */
async function lockingRead<T>(meta: EntityMeta, read: () => Promise<T>): Promise<T> {
  try {
    return await read()
  } catch (error) {
    throw isServerError(error) ? lockingReadError(error, meta.name, meta.table) : error
  }
}

/**
 * A locking read, inside `em.transaction()` only: `for update` (or `for share`) of the rows read,
 * held until the transaction ends; `wait: 'nowait'` fails at once with LockTimeoutError when a row
 * is locked, `'skip-locked'` leaves such rows out (a job queue's next job).
 */
export interface LockOptions {
  readonly lock?: 'update' | 'share'
  readonly wait?: 'nowait' | 'skip-locked'
}

/** What `em.upsert` conflicts on: a unique property, the properties of a unique key, or a provided id. */
export interface UpsertOptions<D extends SchemaDefs, K extends EntityName<D>> {
  readonly onConflict: (keyof CreateInput<D, K> & string) | readonly (keyof CreateInput<D, K> & string)[]
}

export interface FindOptions<D extends SchemaDefs, K extends EntityName<D>> extends LockOptions {
  readonly orderBy?: OrderBy<D, K>
  readonly limit?: number
}

/**
 * One unit of work, typically one per request: an identity map of the entities it loaded or
 * created, and `flush()`, which writes every change in one transaction and (ids known) one round trip.
 */
export class EntityManager<D extends SchemaDefs> {
  private readonly uow = new UnitOfWork()
  private readonly loader: Loader
  private flushing = false
  private assigning = false
  /** afterCommit calls of flushes inside `transaction()`, made once it commits. */
  private deferred: (() => Promise<void>)[] | undefined

  /** @internal use `Flushwave.em()` */
  constructor(
    private readonly schema: Schema<D>,
    private executor: Executor,
    private readonly ids: IdPool,
    private readonly hooks: Hooks<D> = {},
    private readonly maxRowsPerStatement: number = DEFAULT_MAX_ROWS,
  ) {
    this.loader = new Loader(this.uow, () => this.executor)
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
  async transaction<T>(fn: (em: this) => Promise<T>): Promise<T> {
    if (this.uow.journal) throw new EntityStateError('transactions do not nest: already inside em.transaction()')
    const outer = this.executor
    const journal = new TransactionJournal()
    const deferred: (() => Promise<void>)[] = []
    let value: T
    let fnFailed = false
    try {
      value = await outer.transaction(async (executor) => {
        this.executor = executor
        this.uow.journal = journal
        this.deferred = deferred
        try {
          return await fn(this)
        } catch (error) {
          fnFailed = true
          throw error
        } finally {
          this.executor = outer
          this.uow.journal = undefined
          this.deferred = undefined
        }
      })
    } catch (error) {
      // Ids that flushes inside took are free again once the rollback is certain: the callback threw
      // (COMMIT was never sent) or the server refused COMMIT. A connection lost at COMMIT may have committed.
      const rolledBack = fnFailed || error instanceof FlushError
      journal.restore(this.uow.map, rolledBack ? (meta, ids) => this.ids.give(meta, ids) : undefined, (entity) => this.uow.restored(entity))
      throw error
    }
    for (const call of deferred) await call()
    return value
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
   * The entity with this id; throws NotFoundError when there is none. Calls in one tick share one
   * query. With `{ lock }` (inside `em.transaction()`), the row is read and locked even when the
   * entity is already here, and the entity takes the row's values but for its unflushed changes.
   */
  async load<K extends EntityName<D>>(name: K, id: IdOf<D, K>, options: LockOptions = {}): Promise<Entity<D, K>> {
    const found = await this.tryLoad(name, id, options)
    if (!found) throw new NotFoundError(name, id)
    return found
  }

  /** Like `load`, but resolves with undefined when there is no such row. */
  async tryLoad<K extends EntityName<D>>(name: K, id: IdOf<D, K>, options: LockOptions = {}): Promise<Entity<D, K> | undefined> {
    const meta = this.schema.meta(name)
    const reason = meta.id.type.check(id)
    if (reason) throw new InvalidValueError(meta.name, meta.id.prop, id, reason)
    const lock = this.rowLock(meta.name, options)
    if (lock === undefined) return (await this.loader.byId(meta, id)) as unknown as Entity<D, K> | undefined
    return (await lockingRead(meta, () => this.loader.byIdLocked(meta, id, lock))) as unknown as Entity<D, K> | undefined
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

  /** A reference to a row by id, without reading it: set it on a many-to-one, or remove it. */
  ref<K extends EntityName<D>>(name: K, id: IdOf<D, K>): Entity<D, K> {
    const meta = this.schema.meta(name)
    const reason = meta.id.type.check(id)
    if (reason) throw new InvalidValueError(meta.name, meta.id.prop, id, reason)
    return this.uow.reference(meta, id) as unknown as Entity<D, K>
  }

  /** Entities whose properties match `where` (every condition ANDed). */
  async find<K extends EntityName<D>>(name: K, where: Where<D, K> = {}, options: FindOptions<D, K> = {}): Promise<Entity<D, K>[]> {
    const meta = this.schema.meta(name)
    // Untyped callers: null or an array here would otherwise be read as "no options" or by index.
    if (!isPlainObject(options as unknown)) throw new InvalidValueError(meta.name, 'options', options, 'find() options must be an object')
    if (options.orderBy !== undefined && !isPlainObject(options.orderBy as unknown)) {
      throw new InvalidValueError(meta.name, 'orderBy', options.orderBy, "expected an object of property: 'asc' | 'desc'")
    }
    const orderBy = Object.entries(options.orderBy ?? {}).map(([prop, dir]) => {
      const column = columnOf(meta, prop) // an unknown property is the error, whatever its direction
      if (dir !== 'asc' && dir !== 'desc') throw new InvalidValueError(meta.name, prop, dir, "order must be 'asc' or 'desc'")
      return [column.quoted, dir] as const
    })
    if (options.limit !== undefined && !(Number.isSafeInteger(options.limit) && options.limit >= 0)) {
      throw new InvalidValueError(meta.name, 'limit', options.limit, 'expected a non-negative integer')
    }
    const lock = this.rowLock(meta.name, options)
    const select = { orderBy, lock, ...(options.limit === undefined ? {} : { limit: options.limit }) }
    const read = () => this.loader.find(meta, conditions(meta, where as Record<string, unknown>), select)
    const found = lock === undefined ? await read() : await lockingRead(meta, read)
    return found as unknown as Entity<D, K>[]
  }

  /** The first entity `find` would return (`orderBy` decides which), or undefined. */
  async findOne<K extends EntityName<D>>(name: K, where: Where<D, K>, options: Omit<FindOptions<D, K>, 'limit'> = {}): Promise<Entity<D, K> | undefined> {
    const [first] = await this.find(name, where, { ...options, limit: 1 })
    return first
  }

  /** Marks an entity for deletion by the next flush (a new one is simply dropped). */
  remove<K extends EntityName<D>>(entity: Entity<D, K>): void {
    this.uow.remove(entity as unknown as HasState)
  }

  /**
   * Loads relations of many entities at once: one query per relation, whatever the number of
   * entities. Many-to-one targets, one-to-many and many-to-many collections.
   */
  async populate<K extends EntityName<D>>(entities: Entity<D, K> | readonly Entity<D, K>[], ...relations: RelationName<D, K>[]): Promise<void> {
    const list = (Array.isArray(entities) ? entities : [entities]) as unknown as HasState[]
    if (list.length === 0) return
    const meta = this.uow.own(list[0]).meta
    for (const e of list) if (this.uow.own(e).meta !== meta) throw new EntityStateError('populate() takes entities of one type')
    await Promise.all(relations.map((relation) => this.populateOne(list, relation)))
  }

  /**
   * Writes every change in one transaction; see FlushResult for what it did. First the hooks run
   * and every validation rule is checked (nothing is sent if one fails), then ids are taken from
   * the pool and everything goes out in one pipeline.
   */
  async flush(): Promise<FlushResult> {
    if (this.flushing) throw new EntityStateError('flush() is already running on this EntityManager')
    if (this.assigning) throw new EntityStateError('assignIds() is running on this EntityManager: await it before flush()')
    this.flushing = true
    try {
      const checking = performance.now()
      // Dates and JSON objects may have been changed in place since they were assigned: check them
      // before anything reads their text (hooks, dirty checks), and again after hooks that may change them.
      let candidates = flushCandidates(this.uow.map)
      checkMutableValues(candidates)
      if (this.hooks.beforeFlush || this.hooks.entities) {
        await this.runBeforeHooks()
        // Hooks may have created, changed or removed entities.
        candidates = flushCandidates(this.uow.map)
        checkMutableValues(candidates)
      }
      validate(candidates, (name) => this.entityHooks(name)?.validate as never)
      const checks = performance.now() - checking
      let written: ChangeSet | undefined
      const result = await flush(
        {
          uow: this.uow,
          candidates,
          executor: this.executor,
          ids: this.ids,
          order: this.schema.insertOrder,
          inTransaction: this.uow.journal !== undefined,
          maxRows: this.maxRowsPerStatement,
          onWritten: (set) => (written = set),
        },
        checks,
      )
      if (written) await this.afterCommit(result, written)
      return result
    } finally {
      this.flushing = false
    }
  }

  /** The id, or undefined for a new sequence-id entity that has none yet (see `create` and `assignIds`). */
  idOf<K extends EntityName<D>>(entity: Entity<D, K>): IdOf<D, K> | undefined {
    return this.uow.own(entity).id as IdOf<D, K> | undefined
  }

  /** Whether the entity's row has been read (false for references not loaded yet). */
  isLoaded<K extends EntityName<D>>(entity: Entity<D, K>): boolean {
    return this.uow.own(entity).status !== 'stub'
  }

  /** The checked lock of a read, or undefined; a lock outside `em.transaction()` would end with the read. */
  private rowLock(entity: string, options: LockOptions): RowLock | undefined {
    const { lock, wait } = options
    if (lock === undefined) {
      if (wait !== undefined) throw new InvalidValueError(entity, 'wait', wait, "takes a lock: { lock: 'update', wait }")
      return undefined
    }
    if (lock !== 'update' && lock !== 'share') throw new InvalidValueError(entity, 'lock', lock, "expected 'update' or 'share'")
    if (wait !== undefined && wait !== 'nowait' && wait !== 'skip-locked') throw new InvalidValueError(entity, 'wait', wait, "expected 'nowait' or 'skip-locked'")
    if (this.uow.journal === undefined) {
      throw new EntityStateError(`a locking read (lock: '${lock}') needs em.transaction(): outside one, the lock would be released as soon as the read returns`)
    }
    return { strength: lock, wait }
  }

  private entityHooks(name: string): EntityHooks<D, EntityName<D>> | undefined {
    return (this.hooks.entities as Record<string, EntityHooks<D, EntityName<D>>> | undefined)?.[name]
  }

  /** beforeFlush once, then the entity hooks of every new, changed or removed entity, until none is left. */
  private async runBeforeHooks(): Promise<void> {
    if (!this.hooks.beforeFlush && !this.hooks.entities) return
    await this.hooks.beforeFlush?.(this)
    if (!this.hooks.entities) return
    const seen = new Map<HasState, 'create' | 'update' | 'delete'>()
    for (let round = 1; ; round++) {
      let called = 0
      for (const entity of flushCandidates(this.uow.map)) {
        const state = entity[STATE]
        const kind = state.status === 'new' ? 'create' : state.status === 'removed' ? 'delete' : isDirty(state) ? 'update' : undefined
        if (!kind || seen.get(entity) === kind) continue
        seen.set(entity, kind)
        const hooks = this.entityHooks(state.meta.name)
        const hook = kind === 'create' ? hooks?.beforeCreate : kind === 'update' ? hooks?.beforeUpdate : hooks?.beforeDelete
        if (!hook) continue
        called++
        await hook(entity as never, this)
      }
      if (called === 0) return
      if (round === MAX_HOOK_ROUNDS) {
        throw new FlushwaveError(`before-hooks still created or changed entities after ${MAX_HOOK_ROUNDS} rounds; a hook keeps creating work`)
      }
    }
  }

  private async afterCommit(result: FlushResult, set: ChangeSet): Promise<void> {
    const calls: (() => void | Promise<void>)[] = []
    const hasEntityHooks = this.hooks.entities !== undefined && Object.values(this.hooks.entities).some((h) => h?.afterCommit)
    if (hasEntityHooks) {
      const each = (entity: HasState, change: 'created' | 'updated' | 'deleted') => {
        const hook = this.entityHooks(entity[STATE].meta.name)?.afterCommit
        if (hook) calls.push(() => hook(entity as never, change, this))
      }
      for (const entity of set.inserted) each(entity, 'created')
      for (const entity of set.written.keys()) each(entity, 'updated')
      for (const entity of set.deleted) each(entity, 'deleted')
    }
    if (this.hooks.afterCommit) calls.push(() => this.hooks.afterCommit!(result, this))
    if (calls.length === 0) return
    const run = async () => {
      for (const call of calls) await call()
    }
    if (this.deferred) this.deferred.push(run)
    else await run()
  }

  private async populateOne(list: HasState[], relation: string): Promise<void> {
    const meta = list[0]![STATE].meta
    const field = meta.fieldByProp.get(relation)
    if (field?.ref) {
      const targets = list.map((e) => e[STATE].values[relation]).filter((t): t is HasState => !!t && (t as HasState)[STATE].status === 'stub')
      await Promise.all(targets.map((t) => this.loader.byId(t[STATE].meta, t[STATE].id)))
      return
    }
    const persisted = list.filter((e) => e[STATE].id !== undefined && e[STATE].status !== 'new')
    if (meta.oneToMany.some((r) => r.prop === relation)) {
      const pending = persisted.filter((e) => !(this.uow.collection(e, relation) as OneToManyCollection).isLoaded)
      for (const owner of pending) this.uow.changing(owner) // the load marks their collections loaded
      await this.loader.oneToMany(pending.map((e) => this.uow.collection(e, relation) as OneToManyCollection), pending)
      return
    }
    if (meta.manyToMany.some((r) => r.prop === relation)) {
      const pending = persisted.filter((e) => !(this.uow.collection(e, relation) as ManyToManyCollection).isLoaded)
      for (const owner of pending) this.uow.changing(owner)
      await this.loader.manyToMany(pending.map((e) => this.uow.collection(e, relation) as ManyToManyCollection), pending)
      return
    }
    throw new InvalidValueError(meta.name, relation, undefined, 'is not a relation')
  }
}
