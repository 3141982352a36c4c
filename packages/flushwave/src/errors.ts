/** Every error Flushwave throws on purpose is a FlushwaveError, so callers can tell ours from bugs. */
export class FlushwaveError extends Error {
  override name = 'FlushwaveError'
}

/** The schema definition is inconsistent (unknown relation target, bad inverse, duplicate table…). */
export class SchemaError extends FlushwaveError {
  override name = 'SchemaError'
}

/** One way the live database differs from the schema. */
export interface SchemaDifference {
  /** The table as the schema names it. */
  readonly table: string
  /** The column, unless the whole table is the problem. */
  readonly column?: string
  /** What differs, in words: "is missing", "has type text; the schema says integer", … */
  readonly problem: string
}

/**
 * The live database does not match the schema (`orm.assertSchema()`): every difference at once, in
 * `differences` and one a line in the message.
 */
export class SchemaMismatchError extends SchemaError {
  override name = 'SchemaMismatchError'
  constructor(readonly differences: readonly SchemaDifference[]) {
    super(`the database does not match the schema (${differences.length} difference${differences.length === 1 ? '' : 's'}):\n${describeDifferences(differences)}`)
  }
}

/** A value cannot be stored in its column; raised before anything is sent to the database. */
export class InvalidValueError extends FlushwaveError {
  override name = 'InvalidValueError'
  constructor(
    readonly entity: string,
    readonly property: string,
    readonly value: unknown,
    reason: string,
  ) {
    super(`${entity}.${property}: ${reason} (got ${describe(value)})`)
  }
}

export interface ValidationFailure {
  /** `Author#3`, or `new Author` for one without an id yet. */
  readonly entity: string
  /** The property, or undefined for a rule about the whole entity. */
  readonly property: string | undefined
  readonly message: string
}

/** Validation rules failed; every failure of the flush is listed. Nothing was sent. */
export class ValidationError extends FlushwaveError {
  override name = 'ValidationError'
  constructor(readonly failures: readonly ValidationFailure[]) {
    super(
      `${failures.length} validation failure${failures.length === 1 ? '' : 's'}: ` +
        failures.map((f) => `${f.entity}${f.property ? `.${f.property}` : ''} ${f.message}`).join('; '),
    )
  }
}

/** An entity was used in a way its state forbids (removed, of another EntityManager, id not yet assigned…). */
export class EntityStateError extends FlushwaveError {
  override name = 'EntityStateError'
}

/** A property of an entity (or a collection) was read before its row was loaded. */
export class NotLoadedError extends FlushwaveError {
  override name = 'NotLoadedError'
}

/**
 * A page cursor (`em.findPage`'s `after`) that this query did not make: from another query (other
 * conditions or order), changed, or not a cursor at all. Start from the first page again.
 */
export class InvalidCursorError extends FlushwaveError {
  override name = 'InvalidCursorError'
}

/** `em.load` found no row for the id. */
export class NotFoundError extends FlushwaveError {
  override name = 'NotFoundError'
  constructor(
    readonly entity: string,
    readonly id: unknown,
  ) {
    super(`${entity} ${typeof id === 'object' && id !== null ? JSON.stringify(id, (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v)) : String(id)} not found`)
  }
}

export interface StatementFailure {
  /** SQLSTATE of the first real error (never the 25P02 echoes that follow it). */
  readonly code: string | undefined
  readonly table: string
  readonly entity: string | undefined
  readonly constraint: string | undefined
  readonly detail: string | undefined
}

/** A flush failed on the server; nothing of it was committed. */
export class FlushError extends FlushwaveError implements StatementFailure {
  override name = 'FlushError'
  readonly code: string | undefined
  readonly table: string
  readonly entity: string | undefined
  readonly constraint: string | undefined
  readonly detail: string | undefined
  constructor(message: string, failure: StatementFailure, options?: { cause?: unknown }) {
    super(message, options)
    this.code = failure.code
    this.table = failure.table
    this.entity = failure.entity
    this.constraint = failure.constraint
    this.detail = failure.detail
  }
}

/**
 * Rows the flush meant to update or delete no longer had the version it read (another transaction
 * changed or deleted them). Nothing of the flush was committed; reload and retry.
 */
export class OptimisticLockError extends FlushError {
  override name = 'OptimisticLockError'
  /** Running the unit of work again, on freshly loaded rows, is safe. */
  readonly retryable = true
  constructor(
    message: string,
    failure: StatementFailure,
    /** Ids of the stale rows, as text. */
    readonly ids: readonly string[],
    options?: { cause?: unknown },
  ) {
    super(message, failure, options)
  }
}

export class UniqueViolationError extends FlushError {
  override name = 'UniqueViolationError'
}
export class ForeignKeyViolationError extends FlushError {
  override name = 'ForeignKeyViolationError'
}
export class NotNullViolationError extends FlushError {
  override name = 'NotNullViolationError'
}
export class CheckViolationError extends FlushError {
  override name = 'CheckViolationError'
}

/** 40001: the transaction could not be serialized with concurrent ones. Retrying the unit of work is safe. */
export class SerializationError extends FlushError {
  override name = 'SerializationError'
  readonly retryable = true
}

/** 40P01: PostgreSQL broke a deadlock by aborting this transaction. Retrying the unit of work is safe. */
export class DeadlockError extends FlushError {
  override name = 'DeadlockError'
  readonly retryable = true
}

/** 55P03: a row or table lock was not available within `lock_timeout` (or NOWAIT). */
export class LockTimeoutError extends FlushError {
  override name = 'LockTimeoutError'
  readonly retryable = true
}

/**
 * 42501: the role has no privilege for the statement, or a row written breaks a row-level security
 * policy (`new row violates row-level security policy`): a write across tenants, say.
 */
export class PermissionError extends FlushError {
  override name = 'PermissionError'
}

/**
 * 25006: a write in a read-only transaction. In `em.transaction(fn, { readOnly: true })` a flush
 * with changes is refused before anything is sent (`retryable` false). The server's own refusal is
 * `retryable`: a flush (or raw write) reached a server that is read only now, such as a primary
 * demoted during a failover, and a retry may reach the new primary.
 */
export class ReadOnlyTransactionError extends FlushError {
  override name = 'ReadOnlyTransactionError'
  readonly retryable: boolean
  constructor(message: string, failure: StatementFailure, options?: { cause?: unknown; retryable?: boolean }) {
    super(message, failure, options)
    this.retryable = options?.retryable ?? true
  }
}

/** 57014: the statement ran past `statement_timeout` (or was cancelled). */
export class StatementTimeoutError extends FlushError {
  override name = 'StatementTimeoutError'
}

/**
 * The connection failed mid-flush. `outcome` says what the server did with the transaction:
 * 'rolled-back' when COMMIT was never sent or the server reported the transaction aborted, and
 * 'unknown' only when the server could not be asked (it stayed unreachable) or did not answer even
 * the first query of the flush. (When the server says it committed, the flush succeeds instead:
 * see `FlushResult.recovered`.)
 */
export class ConnectionLostError extends FlushwaveError {
  override name = 'ConnectionLostError'
  /** Retrying the unit of work is safe when nothing was committed. */
  readonly retryable: boolean
  constructor(
    message: string,
    readonly outcome: 'rolled-back' | 'unknown',
    options?: { cause?: unknown; transactionId?: string | undefined },
  ) {
    super(message, options)
    this.retryable = outcome === 'rolled-back'
    this.transactionId = options?.transactionId
  }
  /** The server's transaction id (`pg_current_xact_id()`), when its answer arrived. */
  readonly transactionId: string | undefined
}

/** The flush ran past `flushTimeoutMs`: Flushwave cut its connection and asked the server what became of it. */
export class FlushTimeoutError extends ConnectionLostError {
  override name = 'FlushTimeoutError'
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? value.slice(0, 40) + '…' : value)
  if (typeof value === 'bigint') return `${value}n`
  if (value instanceof Date) return `Date(${Number.isNaN(value.getTime()) ? 'Invalid' : value.toISOString()})`
  if (value === null || value === undefined || typeof value !== 'object') return String(value)
  return Object.prototype.toString.call(value)
}

/** All differences at once, one a line. */
function describeDifferences(differences: readonly SchemaDifference[]): string {
  return differences.map((d) => `  - ${d.column === undefined ? d.table : `${d.table}.${d.column}`}: ${d.problem}`).join('\n')
}

/**
 * A migration failed (`migrate up`, `down`, `orm.migrate()`): its transaction rolled back, so the
 * database is as it was before it, and the history too. Names the migration and the statement.
 */
export class MigrationError extends FlushwaveError {
  override name = 'MigrationError'
  constructor(
    /** The migration's id (its directory's name). */
    readonly migration: string,
    /** The statement that failed, as the file has it; undefined when the failure was not a statement's. */
    readonly statement: string | undefined,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options)
  }
}
