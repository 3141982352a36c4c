import { NodePostgresExecutor } from './drivers/node-postgres/executor.js'
import { PGliteExecutor, type PGliteLike } from './drivers/pglite/executor.js'
import type { PgPool } from './drivers/node-postgres/pg-client.js'
import { knexSource, type KnexLike } from './drivers/node-postgres/knex-source.js'
import { poolSource } from './drivers/node-postgres/pg-source.js'
import { StatementNames, type PrepareMode } from './drivers/node-postgres/named-statements.js'
import { FlushwaveError, SchemaMismatchError, type SchemaDifference } from './errors.js'
import type { Executor, QueryEvent } from './drivers/executor.js'
import { checkSchemaWith } from './catalog/check.js'
import { readMigrations } from './migrate/files.js'
import { migrateUp, type MigrateOptions } from './migrate/runner.js'
import { PostgresJsExecutor, type PostgresJsLike } from './drivers/postgres-js/executor.js'
import { DEFAULT_LEDGER_TABLE, ledger } from './sql/render-ledger.js'
import { checkSession, type SessionOptions } from './sql/render-session.js'
import { DEFAULT_IDEMPOTENCY_KEEP_SECONDS, DEFAULT_IDEMPOTENCY_TABLE, idempotencyStore, renderPruneKeys } from './sql/render-idempotency.js'
import { checkKey, pruneEvery, runIdempotent, type IdempotentResult, type JsonValue, type KeyStore } from './entity-manager/idempotent.js'
import type { Schema, SchemaDefs } from './schema/define.js'
import { EntityManager, type Hooks } from './entity-manager/entity-manager.js'
import type { ReadSettings } from './entity-manager/entity-reads.js'
import { IdPool } from './ids/id-pool.js'
import { runUnitOfWork, type RetryPolicy, type UnitOfWorkResult } from './entity-manager/retry.js'
import { warmUp, type WarmUpResult } from './flush/warm-up.js'
import { UnitOfWork } from './entities/unit-of-work.js'
import type { TelemetryOptions } from './telemetry/otel-types.js'
import { withTelemetry } from './telemetry/setup.js'
import type { Telemetry } from './telemetry/telemetry.js'

export interface FlushwaveOptions<D extends SchemaDefs> {
  readonly schema: Schema<D>
  /** Your postgres.js instance; Flushwave opens no pool of its own. One of `sql`, `pg`, `knex`, `executor`. */
  readonly sql?: PostgresJsLike
  /**
   * Your node-postgres `pg.Pool` (pg 8.23 or later). Each flush checks out one client and pipelines
   * it, switching its pipeline mode on for the flush: one round trip cold or warm, and through
   * transaction-mode poolers (PgBouncer, RDS Proxy, Supavisor) too.
   */
  readonly pg?: PgPool
  /** Your knex instance (`client: 'pg'`): flushes pipeline on a connection of its pool, inside your knex transaction when you pass one. */
  readonly knex?: KnexLike
  /**
   * With `pg` or `knex`: whether statements are named, so that each connection parses a shape once
   * and then only binds it. `'auto'` (the default) names them on connections found to be direct
   * (not through a pooler); `true` everywhere (a pooler that keeps prepared statements, such as
   * PgBouncer 1.21+ with `max_prepared_statements`); `false` never. postgres.js has its own
   * `prepare` option.
   */
  readonly prepare?: PrepareMode
  /**
   * An insert of at least this many rows into one table goes by `COPY … FROM STDIN`
   * (`FlushResult.copied`): in the flush's pipeline on `pg` and `knex`, at one round trip more on
   * postgres.js; not on PGlite. Off by default (unset or `false`): measured through Flushwave, COPY's
   * text format is not yet faster than unnest's arrays for most tables (docs/guide/writes.md).
   */
  readonly copyRows?: number | false
  /**
   * Your PGlite instance (`@electric-sql/pglite`): PostgreSQL in WebAssembly, in this process. A
   * flush runs inside PGlite's own transaction, which holds its other queries back until COMMIT.
   */
  readonly pglite?: PGliteLike
  /** Any other executor. */
  readonly executor?: Executor
  /** Called with every statement and its parameters, for debugging. */
  readonly onQuery?: (event: QueryEvent) => void
  /** Spare sequence ids fetched with a table's first shortfall (default 256; doubles with each later one). */
  readonly idBlockSize?: number
  /** Rows per statement at most (default 10,000); larger flushes send more statements, still pipelined. */
  readonly maxRowsPerStatement?: number
  /**
   * Longest a flush may take, from taking a connection to COMMIT (default 30,000 ms). Past it the
   * connection is cut and the server asked what became of the transaction: the flush then fails
   * with FlushTimeoutError (or succeeds, when it had committed).
   */
  readonly flushTimeoutMs?: number
  /** Lifecycle hooks and validation: `{ entities: { Author: { beforeCreate, validate, … } }, beforeFlush, afterCommit }`. */
  readonly hooks?: Hooks<D>
  /**
   * The outcome ledger table (default `flushwave_outcome`; `createTablesSql` creates it, and
   * `ledgerTableSql()` gives its two statements for a migration). Each flush writes one row to it
   * in its own transaction, in the statement that already fetches the transaction id, so that a flush
   * whose connection fails is resolved as committed or rolled back whenever the server can be
   * reached. `false` flushes without it: such a flush can then end with `outcome: 'unknown'`.
   */
  readonly outcomeLedger?: string | false
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
  /**
   * OpenTelemetry: with `@opentelemetry/api` installed, a span per flush, per read statement and
   * per `em.transaction()`, and the histograms `db.client.operation.duration` and
   * `flushwave.flush.round_trips`, to the global providers (or the ones given here). `false` turns
   * it off; without the API there is nothing to turn off.
   */
  readonly telemetry?: TelemetryOptions | false
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

  constructor(options: FlushwaveOptions<D>) {
    this.schema = options.schema
    this.hooks = options.hooks ?? {}
    this.maxRowsPerStatement = options.maxRowsPerStatement
    if (options.cursorSecret !== undefined && (typeof options.cursorSecret !== 'string' || options.cursorSecret.length === 0)) {
      throw new FlushwaveError('cursorSecret must be a non-empty string')
    }
    this.reads = { cursorSecret: options.cursorSecret }
    const timeoutMs = options.flushTimeoutMs
    if (timeoutMs !== undefined && !(timeoutMs > 0)) throw new FlushwaveError(`flushTimeoutMs must be a positive number of milliseconds, not ${timeoutMs}`)
    const table = options.outcomeLedger ?? DEFAULT_LEDGER_TABLE
    if (table !== false && (typeof table !== 'string' || table.length === 0)) throw new FlushwaveError(`outcomeLedger must be a table name or false, not ${String(table)}`)
    const settings = {
      ...(options.onQuery ? { onQuery: options.onQuery } : {}),
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
      ...(table === false ? {} : { ledger: ledger(table) }),
    }
    this.ledgerTable = settings.ledger?.table
    const given = [options.sql, options.pg, options.knex, options.pglite, options.executor].filter((x) => x !== undefined).length
    if (given !== 1) throw new FlushwaveError('flushwave() takes exactly one of `sql` (postgres.js), `pg` (a pg.Pool), `knex`, `pglite` or `executor`')
    if (options.prepare !== undefined && options.pg === undefined && options.knex === undefined) {
      throw new FlushwaveError('`prepare` is for `pg` and `knex`; postgres.js takes its own `prepare` option (postgres(url, { prepare }))')
    }
    if (options.prepare !== undefined && options.prepare !== 'auto' && typeof options.prepare !== 'boolean') throw new FlushwaveError(`prepare must be 'auto', true or false, not ${String(options.prepare)}`)
    const names = new StatementNames(options.prepare)
    if (options.copyRows !== undefined && options.pglite !== undefined) throw new FlushwaveError('`copyRows` is for `sql`, `pg` and `knex`: PGlite flushes insert row sets as they are')
    if (options.copyRows !== undefined && options.copyRows !== false && !(Number.isInteger(options.copyRows) && options.copyRows > 0)) {
      throw new FlushwaveError(`copyRows must be a positive whole number of rows or false, not ${String(options.copyRows)}`)
    }
    const executor =
      options.executor ??
      (options.sql
        ? new PostgresJsExecutor(options.sql, settings, options.copyRows)
        : options.pglite
          ? new PGliteExecutor(options.pglite, settings)
          : new NodePostgresExecutor(options.pg ? poolSource(options.pg, names) : knexSource(options.knex!, names), settings, options.copyRows))
    const observed = withTelemetry(executor, options.telemetry, options.sql ?? options.pg ?? options.knex ?? options.pglite)
    this.executor = observed.executor
    this.telemetry = observed.telemetry
    this.ids = new IdPool(options.idBlockSize === undefined ? {} : { blockSize: options.idBlockSize })
    const keys = options.idempotencyKeys ?? {}
    const keepSeconds = keys.keepSeconds ?? DEFAULT_IDEMPOTENCY_KEEP_SECONDS
    if (!(Number.isInteger(keepSeconds) && keepSeconds > 0)) throw new FlushwaveError(`idempotencyKeys.keepSeconds must be a whole number of seconds > 0, not ${String(keepSeconds)}`)
    const keyTable = keys.table ?? DEFAULT_IDEMPOTENCY_TABLE
    if (typeof keyTable !== 'string' || keyTable.length === 0) throw new FlushwaveError('idempotencyKeys.table must be a table name')
    const store = idempotencyStore(keyTable, keepSeconds)
    const reader = this.executor
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
    return checkSchemaWith(this.schema, this.ledgerTable, (statement) => this.executor.read(statement))
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
  em(session: SessionOptions = {}): EntityManager<D> {
    return this.emOn(this.sessionExecutor(session, 'orm.em()'))
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

/** `orm.unitOfWork()`'s options: how to retry, and the session every attempt's EntityManager applies. */
export interface UnitOfWorkOptions extends RetryPolicy, SessionOptions {}

export function flushwave<D extends SchemaDefs>(options: FlushwaveOptions<D>): Flushwave<D> {
  return new Flushwave(options)
}
