import { NodePostgresExecutor } from './drivers/node-postgres/executor.js'
import { PGliteExecutor, type PGliteLike } from './drivers/pglite/executor.js'
import type { PgPool } from './drivers/node-postgres/pg-client.js'
import { knexSource, type KnexLike } from './drivers/node-postgres/knex-source.js'
import { poolSource } from './drivers/node-postgres/pg-source.js'
import { StatementNames, type PrepareMode } from './drivers/node-postgres/named-statements.js'
import { FlushwaveError } from './errors.js'
import type { Executor, QueryEvent } from './drivers/executor.js'
import type { ExecutorOptions, PipelineExecutor } from './drivers/protocol/pipeline-executor.js'
import { DEFAULT_REPLICA_RETRY_MS, MAX_REPLICA_WAIT_MS, ReplicatedExecutor } from './drivers/protocol/replicated-executor.js'
import { DEFAULT_FLUSH_TIMEOUT_MS } from './drivers/protocol/timeout.js'
import { PostgresJsExecutor, type PostgresJsLike } from './drivers/postgres-js/executor.js'
import { DEFAULT_LEDGER_TABLE, ledger } from './sql/render-ledger.js'
import type { TelemetryOptions } from './telemetry/otel-types.js'
import { withTelemetry } from './telemetry/setup.js'
import type { Telemetry } from './telemetry/telemetry.js'

/** How `flushwave()` reaches the database: the driver (one of `sql`, `pg`, `knex`, `pglite`, `executor`), its replicas, and what every flush and read does on it. */
export interface ConnectOptions {
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
   * Which inserts go by `COPY … FROM STDIN` (`FlushResult.copied`): in the flush's pipeline on `pg`
   * and `knex`, at one round trip more on postgres.js; never on PGlite. Unset: the cost model picks
   * them, inserts of 10,000 rows or more into a table whose columns all travel as text, and on
   * postgres.js only where the rows save more than a round trip (docs/guide/writes.md). A number:
   * every plain insert of that many rows or more. `false`: none.
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
  /**
   * Longest a flush may take, from taking a connection to COMMIT (default 30,000 ms). Past it the
   * connection is cut and the server asked what became of the transaction: the flush then fails
   * with FlushTimeoutError (or succeeds, when it had committed).
   */
  readonly flushTimeoutMs?: number
  /**
   * The outcome ledger table (default `flushwave_outcome`; `createTablesSql` creates it, and
   * `ledgerTableSql()` gives its two statements for a migration). Each flush writes one row to it
   * in its own transaction, in the statement that already fetches the transaction id, so that a flush
   * whose connection fails is resolved as committed or rolled back whenever the server can be
   * reached. `false` flushes without it: such a flush can then end with `outcome: 'unknown'`.
   */
  readonly outcomeLedger?: string | false
  /**
   * OpenTelemetry: with `@opentelemetry/api` installed, a span per flush, per read statement and
   * per `em.transaction()`, and the histograms `db.client.operation.duration` and
   * `flushwave.flush.round_trips`, to the global providers (or the ones given here). `false` turns
   * it off; without the API there is nothing to turn off.
   */
  readonly telemetry?: TelemetryOptions | false
  /**
   * Read replicas, each of the primary's driver: postgres.js instances with `sql`, pg.Pools with
   * `pg`, knex instances with `knex`. Reads outside `em.transaction()` go to them, round robin;
   * flushes, transactions, id fetches, `em.query` and streams after a flush go to the primary. An
   * EntityManager that flushed reads a replica only once it has replayed the flush's commit,
   * checked in the read's own pipeline; a replica behind it sends the read to the primary.
   */
  readonly replicas?: readonly (PostgresJsLike | PgPool | KnexLike)[]
  /** How long a replica whose connection failed is left out before it is tried again (default 5,000 ms). */
  readonly replicaRetryMs?: number
  /**
   * How long a read after a flush may wait on a replica that has not replayed the flush yet, on
   * the replica, in the check's own statement (default 0: go to the primary at once). Past it, the
   * read goes to the primary. At most 10,000 ms, and less than `flushTimeoutMs`.
   */
  readonly replicaWaitMs?: number
}

/** The executor `flushwave()` runs everything on, and what it was made with. */
export interface Connected {
  readonly executor: Executor
  /** The outcome ledger's table, quoted; undefined with `outcomeLedger: false`. */
  readonly ledgerTable: string | undefined
  readonly telemetry: Telemetry | undefined
}

/** Checks the options and makes the executor: the driver's, with its replicas, wrapped for telemetry. */
export function connect(options: ConnectOptions): Connected {
  const timeoutMs = options.flushTimeoutMs
  if (timeoutMs !== undefined && !(timeoutMs > 0)) throw new FlushwaveError(`flushTimeoutMs must be a positive number of milliseconds, not ${timeoutMs}`)
  const table = options.outcomeLedger ?? DEFAULT_LEDGER_TABLE
  if (table !== false && (typeof table !== 'string' || table.length === 0)) throw new FlushwaveError(`outcomeLedger must be a table name or false, not ${String(table)}`)
  const replicas = options.replicas ?? []
  checkDriver(options, replicas)
  const reads: ExecutorOptions = { ...(options.onQuery ? { onQuery: options.onQuery } : {}), ...(timeoutMs === undefined ? {} : { timeoutMs }) }
  const settings: ExecutorOptions = { ...reads, ...(table === false ? {} : { ledger: ledger(table) }), ...(replicas.length > 0 ? { captureLsn: true } : {}) }
  const primary = options.executor ?? driverExecutor(options, options.sql ?? options.pg ?? options.knex ?? options.pglite, settings, options.copyRows)
  const executor =
    replicas.length === 0
      ? primary
      : ReplicatedExecutor.over(
          primary,
          replicas.map((replica) => driverExecutor(options, replica, reads, undefined)),
          { timeoutMs: timeoutMs ?? DEFAULT_FLUSH_TIMEOUT_MS, retryMs: options.replicaRetryMs ?? DEFAULT_REPLICA_RETRY_MS, waitMs: options.replicaWaitMs ?? 0, onQuery: options.onQuery },
        )
  const observed = withTelemetry(executor, options.telemetry, options.sql ?? options.pg ?? options.knex ?? options.pglite)
  return { executor: observed.executor, telemetry: observed.telemetry, ledgerTable: table === false ? undefined : ledger(table).table }
}

/** An executor over `driver`, which is of the kind the options name (`sql`, `pg`, `knex`, `pglite`). */
function driverExecutor(options: ConnectOptions, driver: unknown, settings: ExecutorOptions, copyRows: number | false | undefined): PipelineExecutor {
  if (options.sql) return new PostgresJsExecutor(driver as PostgresJsLike, settings, copyRows)
  if (options.pglite) return new PGliteExecutor(driver as PGliteLike, settings)
  // Each pool names its statements for itself: a replica's connections are not the primary's.
  const names = new StatementNames(options.prepare)
  return new NodePostgresExecutor(options.pg ? poolSource(driver as PgPool, names) : knexSource(driver as KnexLike, names), settings, copyRows)
}

function checkDriver(options: ConnectOptions, replicas: readonly unknown[]): void {
  const given = [options.sql, options.pg, options.knex, options.pglite, options.executor].filter((x) => x !== undefined).length
  if (given !== 1) throw new FlushwaveError('flushwave() takes exactly one of `sql` (postgres.js), `pg` (a pg.Pool), `knex`, `pglite` or `executor`')
  if (options.prepare !== undefined && options.pg === undefined && options.knex === undefined) {
    throw new FlushwaveError('`prepare` is for `pg` and `knex`; postgres.js takes its own `prepare` option (postgres(url, { prepare }))')
  }
  if (options.prepare !== undefined && options.prepare !== 'auto' && typeof options.prepare !== 'boolean') throw new FlushwaveError(`prepare must be 'auto', true or false, not ${String(options.prepare)}`)
  if (options.copyRows !== undefined && options.pglite !== undefined) throw new FlushwaveError('`copyRows` is for `sql`, `pg` and `knex`: PGlite flushes insert row sets as they are')
  if (options.copyRows !== undefined && options.copyRows !== false && !(Number.isInteger(options.copyRows) && options.copyRows > 0)) {
    throw new FlushwaveError(`copyRows must be a positive whole number of rows or false, not ${String(options.copyRows)}`)
  }
  if (!Array.isArray(replicas)) throw new FlushwaveError('replicas must be an array of the primary driver\'s instances')
  if (replicas.length > 0 && (options.pglite !== undefined || options.executor !== undefined)) throw new FlushwaveError('`replicas` is for `sql`, `pg` and `knex`')
  if (replicas.some((r) => typeof r !== 'function' && (typeof r !== 'object' || r === null))) throw new FlushwaveError('each of `replicas` must be an instance of the primary\'s driver')
  const retryMs = options.replicaRetryMs
  if (retryMs !== undefined && !(retryMs >= 0)) throw new FlushwaveError(`replicaRetryMs must be a number of milliseconds ≥ 0, not ${String(retryMs)}`)
  const waitMs = options.replicaWaitMs
  const deadline = options.flushTimeoutMs ?? DEFAULT_FLUSH_TIMEOUT_MS
  if (waitMs !== undefined && !(Number.isInteger(waitMs) && waitMs >= 0 && waitMs <= MAX_REPLICA_WAIT_MS && waitMs < deadline)) {
    throw new FlushwaveError(`replicaWaitMs must be a whole number of milliseconds from 0 to ${MAX_REPLICA_WAIT_MS}, and less than flushTimeoutMs, not ${String(waitMs)}`)
  }
}
