import { FlushwaveError, SchemaMismatchError, type SchemaDifference } from './errors.js'
import { PRIMARY, type Executor } from './drivers/executor.js'
import { connect, type ConnectOptions } from './connect.js'
import { checkSchemaWith } from './catalog/check.js'
import { readMigrations } from './migrate/files.js'
import { migrateUp, type MigrateOptions } from './migrate/runner.js'
import { checkSession, type SessionOptions } from './sql/render-session.js'
import { checkLsn } from './sql/render-replica.js'
import { DEFAULT_IDEMPOTENCY_KEEP_SECONDS, DEFAULT_IDEMPOTENCY_TABLE, idempotencyStore, renderPruneKeys } from './sql/render-idempotency.js'
import { checkKey, pruneEvery, runIdempotent, type IdempotentResult, type JsonValue, type KeyStore } from './entity-manager/idempotent.js'
import type { Schema, SchemaDefs } from './schema/define.js'
import { EntityManager, type Hooks } from './entity-manager/entity-manager.js'
import type { ReadSettings } from './entity-manager/entity-reads.js'
import { IdPool } from './ids/id-pool.js'
import { runUnitOfWork, type RetryPolicy, type UnitOfWorkResult } from './entity-manager/retry.js'
import { warmUp, type WarmUpResult } from './flush/warm-up.js'
import { UnitOfWork } from './entities/unit-of-work.js'
import type { Telemetry } from './telemetry/telemetry.js'

export interface FlushwaveOptions<D extends SchemaDefs> extends ConnectOptions {
  readonly schema: Schema<D>
  /** Spare sequence ids fetched with a table's first shortfall (default 256; doubles with each later one). */
  readonly idBlockSize?: number
  /** Rows per statement at most (default 10,000); larger flushes send more statements, still pipelined. */
  readonly maxRowsPerStatement?: number
  /** Lifecycle hooks and validation: `{ entities: { Author: { beforeCreate, validate, … } }, beforeFlush, afterCommit }`. */
  readonly hooks?: Hooks<D>
  /**
   * Signs the page cursors of `em.findPage` (HMAC-SHA256), so that a client cannot forge one. Give
   * every process of an application the same secret; without one, cursors still carry a checksum
   * that catches a changed or foreign cursor, but anyone can make a valid one.
   */
  readonly cursorSecret?: string
  /**
   * Where `orm.unitOfWork(work, { idempotencyKey })` records its keys (default table
   * `flushwave_idempotency`; `idempotencyTableSql()` or `createTablesSql(schema, { idempotencyKeys: true })`
   * creates it) and how long a key counts (default a day). Expired keys are pruned in the
   * background, at most once a minute per process.
   */
  readonly idempotencyKeys?: { readonly table?: string; readonly keepSeconds?: number }
}

/** One per process (per database): holds the schema, the executor and the shared id pool. */
export class Flushwave<D extends SchemaDefs> {
  readonly schema: Schema<D>
  readonly executor: Executor
  private readonly ids: IdPool
  private readonly hooks: Hooks<D>
  private readonly maxRowsPerStatement: number | undefined
  private readonly reads: ReadSettings
  /** The outcome ledger's table, quoted; undefined with `outcomeLedger: false`. */
  private readonly ledgerTable: string | undefined
  /**
   * Never used: an EntityManager and a specimen of each entity type, which keep the hidden classes
   * of a unit of work alive between requests (see UnitOfWork.keepHiddenClasses).
   */
  private readonly hiddenClasses: readonly [EntityManager<D>, readonly object[]]
  private readonly keys: KeyStore
  private readonly telemetry: Telemetry | undefined
  /** The executor whose reads go to the primary (the executor itself, without replicas). */
  private readonly primaryReads: Executor

  constructor(options: FlushwaveOptions<D>) {
    this.schema = options.schema
    this.hooks = options.hooks ?? {}
    this.maxRowsPerStatement = options.maxRowsPerStatement
    if (options.cursorSecret !== undefined && (typeof options.cursorSecret !== 'string' || options.cursorSecret.length === 0)) {
      throw new FlushwaveError('cursorSecret must be a non-empty string')
    }
    this.reads = { cursorSecret: options.cursorSecret }
    const connection = connect(options)
    this.executor = connection.executor
    this.telemetry = connection.telemetry
    this.ledgerTable = connection.ledgerTable
    this.primaryReads = this.executor.after?.(PRIMARY) ?? this.executor
    this.ids = new IdPool(options.idBlockSize === undefined ? {} : { blockSize: options.idBlockSize })
    const keys = options.idempotencyKeys ?? {}
    const keepSeconds = keys.keepSeconds ?? DEFAULT_IDEMPOTENCY_KEEP_SECONDS
    if (!(Number.isInteger(keepSeconds) && keepSeconds > 0)) throw new FlushwaveError(`idempotencyKeys.keepSeconds must be a whole number of seconds > 0, not ${String(keepSeconds)}`)
    const keyTable = keys.table ?? DEFAULT_IDEMPOTENCY_TABLE
    if (typeof keyTable !== 'string' || keyTable.length === 0) throw new FlushwaveError('idempotencyKeys.table must be a table name')
    const store = idempotencyStore(keyTable, keepSeconds)
    // The keys are read where they are written: a replica may not have them yet.
    const reader = this.primaryReads
    this.keys = { store, executor: reader, prune: pruneEvery(60_000, () => reader.read(renderPruneKeys(store))) }
    this.hiddenClasses = [this.em(), new UnitOfWork().keepHiddenClasses(this.schema.entities.values())]
  }

  /**
   * Prepares every statement shape of the schema on every connection of the pool, and fills the id
   * pool for every table with sequence ids: call it at start-up so that first flushes wait on
   * neither (see `FlushResult.coldStatements` and `plan.preparation`).
   */
  warmUp(): Promise<WarmUpResult> {
    return warmUp(this.schema, this.executor, this.ids)
  }

  /**
   * Compares the schema with the live database (through the search path, as flushes see it): every
   * table, column, type, nullability, sequence for ids and foreign key the flushes and reads rely
   * on, foreign keys' ON DELETE actions, the indexes and CHECK constraints the schema declares, and
   * the outcome ledger. Catalog queries read together; returns every difference, none when it
   * matches. Not compared: numeric's precision, enum labels, the text of defaults, checks and
   * partial indexes' conditions.
   */
  async checkSchema(): Promise<SchemaDifference[]> {
    return checkSchemaWith(this.schema, this.ledgerTable, (statement) => this.primaryReads.read(statement))
  }

  /**
   * Applies the migrations of `dir` (default `migrations`, from the working directory) that are not
   * applied yet, as `flushwave migrate up` does: each in its own transaction, under an advisory lock
   * that lets every instance of the application call it at start-up. Resolves with the ids it applied.
   */
  async migrate(options: MigrateOptions & { readonly dir?: string } = {}): Promise<string[]> {
    return migrateUp(this.executor, await readMigrations(options.dir ?? 'migrations'), options)
  }

  /** `checkSchema()`, throwing a SchemaMismatchError that lists every difference: for start-up. */
  async assertSchema(): Promise<void> {
    const differences = await this.checkSchema()
    if (differences.length > 0) throw new SchemaMismatchError(differences)
  }

  /**
   * Runs `work` on a new EntityManager, then flushes it. With `{ attempts: n }`, a unit of work
   * that lost a race (stale version, deadlock, serialization failure, lock timeout, or a connection
   * lost before COMMIT) runs again from the start on a fresh EntityManager, up to n times in all.
   */
  unitOfWork<T extends JsonValue | void>(work: (em: EntityManager<D>) => Promise<T>, options: UnitOfWorkOptions & { readonly idempotencyKey: string }): Promise<IdempotentResult<T>>
  unitOfWork<T>(work: (em: EntityManager<D>) => Promise<T>, options?: UnitOfWorkOptions): Promise<UnitOfWorkResult<T>>
  unitOfWork<T>(work: (em: EntityManager<D>) => Promise<T>, options: UnitOfWorkOptions & { readonly idempotencyKey?: string } = {}): Promise<UnitOfWorkResult<T> | IdempotentResult<T>> {
    const { settings, role, statementTimeoutMs, idempotencyKey, ...policy } = options
    // Checked once, before the first attempt; every attempt's EntityManager shares the executor.
    const executor = this.sessionExecutor({ settings, role, statementTimeoutMs }, 'orm.unitOfWork()')
    const newEm = () => this.emOn(executor)
    if (idempotencyKey === undefined) return runUnitOfWork(newEm, work, policy)
    if (this.executor.recordsKeys !== true) throw new FlushwaveError('idempotencyKey: this executor cannot record keys (its recordsKeys is not true)')
    checkKey(idempotencyKey)
    return runIdempotent(newEm, work as (em: EntityManager<D>) => Promise<JsonValue>, idempotencyKey, this.keys, policy) as Promise<IdempotentResult<T>>
  }

  /**
   * A new EntityManager: one per request or job. With `session`, every transaction it opens (each
   * flush's, `em.transaction()`'s, and the one its reads outside a transaction then run in) applies
   * its settings, role and statement timeout right after BEGIN, in the same pipeline.
   */
  em(options: EmOptions = {}): EntityManager<D> {
    const { after, ...session } = options
    const executor = this.sessionExecutor(session, 'orm.em()')
    if (after === undefined) return this.emOn(executor)
    if (after !== PRIMARY) checkLsn(after, 'orm.em({ after })')
    // Without replicas every read is the primary's: the token has nothing to wait for.
    return this.emOn(executor.after?.(after) ?? executor)
  }

  private emOn(executor: Executor): EntityManager<D> {
    return new EntityManager(this.schema, executor, this.ids, this.hooks, this.maxRowsPerStatement, this.reads, this.telemetry)
  }

  /** The executor, with `session` applied when it sets anything; checked first. */
  private sessionExecutor(session: SessionOptions, where: string): Executor {
    checkSession(session, where)
    if (Object.keys(session.settings ?? {}).length === 0 && session.role === undefined && session.statementTimeoutMs === undefined) return this.executor
    if (this.executor.withSession === undefined) throw new FlushwaveError(`${where}: this executor takes no settings (its withSession() is missing)`)
    return this.executor.withSession(session)
  }
}

/** `orm.em()`'s options: the session its transactions apply, and what its reads must see. */
export interface EmOptions extends SessionOptions {
  /**
   * A consistency token (`em.consistencyToken()` of an earlier request's EntityManager): this
   * EntityManager's reads on replicas see every commit that EntityManager had made.
   */
  readonly after?: string | undefined
}

/** `orm.unitOfWork()`'s options: how to retry, and the session every attempt's EntityManager applies. */
export interface UnitOfWorkOptions extends RetryPolicy, SessionOptions {}

export function flushwave<D extends SchemaDefs>(options: FlushwaveOptions<D>): Flushwave<D> {
  return new Flushwave(options)
}
