import type { Executor } from '../drivers/executor.js'
import { EntityStateError, InvalidValueError, NotFoundError } from '../errors.js'
import { isGone, STATE, type HasState } from '../entities/entity-state.js'
import { UnitOfWork } from '../entities/unit-of-work.js'
import type { Schema, SchemaDefs } from '../schema/define.js'
import type { OrderBy, Where } from '../schema/filters.js'
import type { AggregateResult, AggregateSpec, Page, PopulatePath } from '../schema/read-types.js'
import { isServerError } from '../drivers/protocol/pg-error.js'
import { aggregateQuery } from './aggregate.js'
import { pageQuery } from './pages.js'
import { entityRows, rawStatement, withoutExtra, type RawSql } from './raw.js'
import type { Entity, EntityName, IdOf, KeyOf, RelationName } from '../schema/infer.js'
import { idOfInput, keyObject, tupleOfValues } from '../entities/composite-key.js'
import { renderCount, renderExists, renderFind } from '../sql/render-select.js'
import { Loader, pathTree } from './loader.js'
import { findAlong } from './populate-along.js'
import { lockingRead, rowLock, selectOptions, withDeletedOf, type DeletedOptions, type FindOptions, type LockOptions } from './read-options.js'
import { conditionOf } from './where.js'

export type { DeletedOptions, FindOptions, LockOptions }

/** `stream`'s options. */
export interface StreamOptions<D extends SchemaDefs, K extends EntityName<D>> extends DeletedOptions {
  /** Rows per batch (default 1,000): the most the stream holds at once. */
  readonly batchSize?: number
  readonly orderBy?: OrderBy<D, K>
  /** Keep the entities in this EntityManager once the loop moves on (default: they leave it). */
  readonly keep?: boolean
}

/** `findPage`'s options: the page size, the order (the id breaks ties) and the cursor to start after. */
export interface PageOptions<D extends SchemaDefs, K extends EntityName<D>> extends DeletedOptions {
  readonly first: number
  readonly orderBy?: OrderBy<D, K>
  readonly after?: string | undefined
  /** Relations, or paths of them, to load with the page's entities, in the same round trip (see `find`). */
  readonly populate?: readonly PopulatePath<D, K>[]
}

/** Settings of reads that come from `flushwave()`. */
export interface ReadSettings {
  /** Signs page cursors (see `findPage`). */
  readonly cursorSecret?: string | undefined
}

/**
 * The reads of an EntityManager: entities by id, by conditions, by page, by hand-written SQL, their
 * relations, counts and aggregates. Every read is one statement (one per relation level for
 * populate), and reads made together go out together: a `Promise.all` of them is one round trip.
 */
export abstract class EntityReads<D extends SchemaDefs> {
  protected readonly uow = new UnitOfWork()
  protected readonly loader: Loader

  constructor(
    protected readonly schema: Schema<D>,
    /** The executor reads and flushes use now: inside `transaction()`, the transaction's. */
    protected executor: Executor,
    protected readonly reads: ReadSettings,
  ) {
    this.loader = new Loader(this.uow, () => this.executor)
  }

  /**
   * The entity with this id; throws NotFoundError when there is none. Calls in one tick share one
   * query. With `{ lock }` (inside `em.transaction()`), the row is read and locked even when the
   * entity is already here, and the entity takes the row's values but for its unflushed changes.
   */
  async load<K extends EntityName<D>>(name: K, key: KeyOf<D, K>, options: LockOptions & DeletedOptions = {}): Promise<Entity<D, K>> {
    const found = await this.tryLoad(name, key, options)
    if (!found) throw new NotFoundError(name, key)
    return found
  }

  /** Like `load`, but resolves with undefined when there is no such row. */
  async tryLoad<K extends EntityName<D>>(name: K, key: KeyOf<D, K>, options: LockOptions & DeletedOptions = {}): Promise<Entity<D, K> | undefined> {
    const meta = this.schema.meta(name)
    const id = idOfInput(meta, key)
    const lock = rowLock(meta.name, options, this.uow.journal !== undefined)
    const withDeleted = withDeletedOf(meta, options)
    const found = lock === undefined ? await this.loader.byId(meta, id) : await lockingRead(meta, () => this.loader.byIdLocked(meta, id, lock))
    // Loads by id share one statement per tick: a soft-deleted row is read, then left out here.
    if (found && !withDeleted && meta.softDelete && isGone(found[STATE])) return undefined
    return found as unknown as Entity<D, K> | undefined
  }

  /** A reference to a row by id, without reading it: set it on a many-to-one, or remove it. */
  ref<K extends EntityName<D>>(name: K, key: KeyOf<D, K>): Entity<D, K> {
    const meta = this.schema.meta(name)
    return this.uow.reference(meta, idOfInput(meta, key)) as unknown as Entity<D, K>
  }

  /** Entities whose properties match `where` (see Where: properties, relations, and, or, not). */
  async find<K extends EntityName<D>>(name: K, where: Where<D, K> = {}, options: FindOptions<D, K> = {}): Promise<Entity<D, K>[]> {
    const meta = this.schema.meta(name)
    const select = selectOptions(meta, options, this.uow.journal !== undefined)
    const condition = conditionOf(meta, where, withDeletedOf(meta, options))
    const tree = options.populate?.length ? pathTree(meta, options.populate) : undefined
    if (tree && select.lock === undefined) {
      // The find and its populate in one statement; what it could not cover is read after.
      const found = await findAlong(this.uow, this.executor, meta, condition, select, tree)
      await this.loader.populateTree(found, tree)
      return found as unknown as Entity<D, K>[]
    }
    const read = () => this.loader.find(meta, condition, select)
    const found = select.lock === undefined ? await read() : await lockingRead(meta, read)
    if (tree) await this.loader.populateTree(found, tree)
    return found as unknown as Entity<D, K>[]
  }

  /** The first entity `find` would return (`orderBy` decides which), or undefined. */
  async findOne<K extends EntityName<D>>(name: K, where: Where<D, K>, options: Omit<FindOptions<D, K>, 'limit'> = {}): Promise<Entity<D, K> | undefined> {
    const [first] = await this.find(name, where, { ...options, limit: 1 })
    return first
  }

  /** How many rows match `where`, counted by the database: one statement. */
  async count<K extends EntityName<D>>(name: K, where: Where<D, K> = {}, options: DeletedOptions = {}): Promise<number> {
    const meta = this.schema.meta(name)
    const [[count] = []] = await this.executor.read(renderCount(meta, conditionOf(meta, where, withDeletedOf(meta, options))))
    return Number(count)
  }

  /** Whether any row matches `where`: one statement, which stops at the first row found. */
  async exists<K extends EntityName<D>>(name: K, where: Where<D, K> = {}, options: DeletedOptions = {}): Promise<boolean> {
    const meta = this.schema.meta(name)
    const [[found] = []] = await this.executor.read(renderExists(meta, conditionOf(meta, where, withDeletedOf(meta, options))))
    return found === true || found === 't'
  }

  /**
   * Loads relations of many entities at once, and relations of theirs by path
   * (`'books.reviews.author'`): one query per relation and level, whatever the number of entities;
   * the relations of one level go out together (one round trip), and what is loaded already is not
   * read again. Many-to-one targets, one-to-many and many-to-many collections.
   */
  async populate<K extends EntityName<D>>(entities: Entity<D, K> | readonly Entity<D, K>[], ...paths: PopulatePath<D, K>[]): Promise<void> {
    const list = (Array.isArray(entities) ? entities : [entities]) as unknown as HasState[]
    if (list.length === 0) return
    const meta = this.uow.own(list[0]).meta
    for (const e of list) if (this.uow.own(e).meta !== meta) throw new EntityStateError('populate() takes entities of one type')
    await this.loader.populateTree(list, pathTree(meta, paths))
  }

  /**
   * Figures over the rows that match `where`, computed by the database in one statement: `count`
   * always, and the `sum`, `avg`, `min` and `max` of columns; per group of `groupBy` columns (one row
   * per group, in the order of their values) or over all of them (one row).
   */
  async aggregate<K extends EntityName<D>, S extends AggregateSpec<D, K>>(name: K, where: Where<D, K>, spec: S, options: DeletedOptions = {}): Promise<AggregateResult<D, K, S>> {
    const meta = this.schema.meta(name)
    const query = aggregateQuery(meta, conditionOf(meta, where, withDeletedOf(meta, options)), spec)
    return query.decode(await this.executor.read(query.statement)) as AggregateResult<D, K, S>
  }

  /**
   * A page of the entities that match `where`, in `orderBy` order then by id: the `first` ones after
   * the cursor `after` (a page's `endCursor`), in one statement. Rows written before the cursor never
   * shift a page, and rows that tie in the order never repeat or go missing across pages. A cursor
   * of another query, or changed, is an InvalidCursorError.
   */
  async findPage<K extends EntityName<D>>(name: K, where: Where<D, K>, options: PageOptions<D, K>): Promise<Page<Entity<D, K>>> {
    const meta = this.schema.meta(name)
    const page = pageQuery(meta, conditionOf(meta, where, withDeletedOf(meta, options)), options, this.reads.cursorSecret)
    const populate = (options as { populate?: unknown }).populate
    if (populate !== undefined && !(Array.isArray(populate) && populate.every((p) => typeof p === 'string'))) {
      throw new InvalidValueError(meta.name, 'populate', populate, 'expected an array of relation paths')
    }
    const tree = populate?.length ? pathTree(meta, populate) : undefined
    const select = { orderBy: page.orderBy, limit: page.limit }
    let found: HasState[]
    if (tree) {
      found = await findAlong(this.uow, this.executor, meta, page.where, select, tree)
      await this.loader.populateTree(found.slice(0, page.first), tree)
    } else found = await this.loader.find(meta, page.where, select)
    const items = found.slice(0, page.first)
    const last = items[items.length - 1]
    return { items: items as unknown as Entity<D, K>[], endCursor: last && page.cursorOf(last), hasNextPage: found.length > page.first }
  }

  /**
   * Entities from hand-written SQL: its rows must have the entity's columns, by their names (more or
   * fewer is an InvalidValueError); they join this EntityManager as `find`'s do. Values are bind
   * parameters: `(text, [values])` with `$1`, `$2` in the text, or a `` raw`…${value}…` `` template.
   * Inside `transaction()` it runs on the transaction's connection.
   */
  async findBySql<K extends EntityName<D>>(name: K, text: string | RawSql, params?: readonly unknown[]): Promise<Entity<D, K>[]> {
    const meta = this.schema.meta(name)
    const statement = entityRows(meta, rawStatement(meta.name, text, params))
    let rows: unknown[][]
    try {
      rows = await this.executor.read(statement)
    } catch (error) {
      const e = error as { code?: unknown; message?: unknown }
      if (isServerError(error) && e.code === '42703' && typeof e.message === 'string' && e.message.includes('r.')) {
        throw new InvalidValueError(meta.name, 'sql', typeof text === 'string' ? text : text.text, `its rows lack a column of ${meta.name}: ${e.message}`)
      }
      throw error
    }
    const entities: HasState[] = []
    for (const row of withoutExtra(meta, rows)) entities.push(this.uow.hydrate(meta, row))
    return entities as unknown as Entity<D, K>[]
  }

  /**
   * The entities that match `where`, any number of them, read in batches of `batchSize` (default
   * 1,000) through a server-side cursor: one batch in memory at a time. Once the loop moves past a
   * batch, its entities leave this EntityManager (they were not here before the stream), unless
   * `keep` is set; change entities of a stream with `keep`, or collect what to change. Outside
   * `transaction()` the cursor holds a connection in a transaction of its own until the loop ends.
   */
  async *stream<K extends EntityName<D>>(name: K, where: Where<D, K> = {}, options: StreamOptions<D, K> = {}): AsyncGenerator<Entity<D, K>, void, undefined> {
    const meta = this.schema.meta(name)
    const { batchSize = 1_000, keep = false, orderBy } = options
    if (!(Number.isSafeInteger(batchSize) && batchSize > 0)) throw new InvalidValueError(meta.name, 'batchSize', batchSize, 'expected a positive integer')
    const select = selectOptions(meta, orderBy === undefined ? {} : { orderBy }, false)
    const executor = this.executor
    if (!executor.stream) throw new EntityStateError('this executor cannot stream (its stream() is missing)')
    for await (const rows of executor.stream(renderFind(meta, conditionOf(meta, where, withDeletedOf(meta, options)), select), batchSize)) {
      const [batch, arrived] = this.uow.arriving(() => rows.map((row) => this.uow.hydrate(meta, row)))
      for (const entity of batch) yield entity as unknown as Entity<D, K>
      if (!keep) this.uow.detach(arrived)
    }
  }

  /**
   * Rows of hand-written SQL that are not entities, as objects keyed by column name with values as
   * the driver parses them. Values are bind parameters (as in `findBySql`); inside `transaction()`
   * it runs on the transaction's connection.
   */
  async query<R extends Record<string, unknown> = Record<string, unknown>>(text: string | RawSql, params?: readonly unknown[]): Promise<R[]> {
    const statement = rawStatement('query', text, params)
    return (await this.executor.read({ ...statement, objects: true })) as unknown as R[]
  }

  /** The id, or undefined for a new sequence-id entity that has none yet (see `create` and `assignIds`). */
  idOf<K extends EntityName<D>>(entity: Entity<D, K>): IdOf<D, K> | undefined {
    const state = this.uow.own(entity)
    if (state.meta.key === undefined) return state.id as IdOf<D, K> | undefined
    const tuple = state.id ?? tupleOfValues(state.meta, state.values)
    return (tuple === undefined ? undefined : keyObject(state.meta, tuple as string)) as IdOf<D, K> | undefined
  }

  /** Whether the entity's row has been read (false for references not loaded yet). */
  isLoaded<K extends EntityName<D>>(entity: Entity<D, K>): boolean {
    return this.uow.own(entity).status !== 'stub'
  }}
