import {
  CheckViolationError,
  PermissionError,
  ReadOnlyTransactionError,
  DeadlockError,
  LockTimeoutError,
  OptimisticLockError,
  SerializationError,
  StatementTimeoutError,
  FlushError,
  ForeignKeyViolationError,
  NotNullViolationError,
  UniqueViolationError,
  type StatementFailure,
} from '../../errors.js'
import { entityOf, tableOf, type Op } from '../../plan/ops.js'
import { REPLAY_MARK } from '../../sql/render-idempotency.js'
import { LIVE_MARK, STALE_MARK } from '../../sql/row-sets.js'
import { keyTupleType, parseArrayLiteral } from '../../schema/column-types.js'
import type { ServerError } from '../port.js'

/**
 * A server error carries a five-character SQLSTATE and a severity; connection errors do not.
 * postgres.js names the severity field S `severity_local` and V `severity`. PgBouncer's own errors
 * (FATAL 08P01 "database removed" after KILL, …) have no V: without the fallback they passed for
 * driver errors, so reads let them through untyped and the stale-FATAL retry did not retry them.
 */
export function isServerError(error: unknown): error is ServerError {
  const e = error as { code?: unknown; severity?: unknown; severity_local?: unknown } | null
  return typeof e?.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) && (typeof e.severity === 'string' || typeof e.severity_local === 'string')
}

/**
 * A server error that ends the session rather than the statement: FATAL or PANIC severity (the
 * server is shutting down, the backend was terminated, the database dropped) or a class 08
 * connection exception. For a flush that is a lost connection, not a failed statement.
 */
export function endsSession(error: ServerError): boolean {
  const e = error as { severity?: string; severity_local?: string }
  const severity = e.severity ?? e.severity_local
  return severity === 'FATAL' || severity === 'PANIC' || error.code.startsWith('08')
}

/** The ids a version check reported as stale: it raises 22P02 on `flushwave-stale:<table>:<ids>`. */
function staleRows(error: ServerError): string[] | undefined {
  if (error.code !== '22P02') return undefined
  const at = error.message.indexOf(STALE_MARK)
  if (at < 0) return undefined
  const rest = error.message.slice(at + STALE_MARK.length).replace(/"$/, '')
  const ids = rest.slice(rest.indexOf(':') + 1)
  // Composite keys come as a text array of key tuples (see staleCheck).
  return ids.startsWith('{') ? (parseArrayLiteral(ids) as string[]).map((tuple) => keyTupleType.fromDb(tuple)) : ids.split(',')
}

/** 25P02: "current transaction is aborted", the echo of an earlier failure in the same pipeline. */
export const IN_FAILED_TRANSACTION = '25P02'

const classes: Record<string, typeof FlushError> = {
  '23505': UniqueViolationError,
  '23503': ForeignKeyViolationError,
  '23001': ForeignKeyViolationError, // restrict_violation: ON DELETE RESTRICT
  '40001': SerializationError,
  '40P01': DeadlockError,
  '55P03': LockTimeoutError,
  '57014': StatementTimeoutError,
  '23502': NotNullViolationError,
  '23514': CheckViolationError,
  '42501': PermissionError,
  '25006': ReadOnlyTransactionError,
}

/**
 * The idempotency key a unit of work records was used already (and has not expired): the flush
 * rolled back before any of its writes, and `orm.unitOfWork` answers with the recorded result.
 */
export class KeyUsed extends FlushError {
  override name = 'KeyUsed'
}

/**
 * A server error of one of the protocol's own statements after BEGIN (the record, the settings)
 * typed, or undefined when it is no server error or one that ended the session: the caller then
 * finds out what became of the connection.
 */
export function protocolRefusal(reason: unknown, normalize: (error: ServerError) => ServerError, type: (error: ServerError, cause: unknown) => FlushError): FlushError | undefined {
  return isServerError(reason) && !endsSession(reason) ? type(normalize(reason), reason) : undefined
}

/** The record statement of an idempotent unit of work failed (render-idempotency.ts). */
export function recordError(error: ServerError, cause: unknown = error): FlushError {
  if (error.code === '22P02' && error.message.includes(REPLAY_MARK)) return new KeyUsed('the idempotency key was used already; nothing was committed', noTable(error), { cause })
  if (error.code === '42P01') {
    const message = `the idempotency keys' table is missing (${error.message}): create it with idempotencyTableSql(), or createTablesSql(schema, { idempotencyKeys: true }); nothing was committed`
    return new FlushError(message, noTable(error), { cause })
  }
  return protocolError('recording the idempotency key failed', error, cause)
}

/**
 * The statement after BEGIN that applies an EntityManager's or a transaction's settings was refused
 * (a role that does not exist or may not be taken, a value the parameter does not take).
 */
export function settingsError(error: ServerError, cause: unknown = error): FlushError {
  return protocolError("the transaction's settings (settings, role, statementTimeoutMs) were refused", error, cause)
}

function protocolError(what: string, error: ServerError, cause: unknown): FlushError {
  const ErrorClass = classes[error.code] ?? FlushError
  return new ErrorClass(`${what}: ${error.message}${error.detail ? ` — ${error.detail}` : ''}; nothing was committed`, noTable(error), { cause })
}

/** A failure of a statement that writes no table of the schema's. */
const noTable = (error: ServerError): StatementFailure => ({ code: error.code, table: 'unknown', entity: undefined, constraint: undefined, detail: error.detail })

/** Names the entity and table a failed statement wrote, with the server's own words. */
export function flushError(error: ServerError, op: Op | undefined, cause: unknown = error): FlushError {
  const stale = staleRows(error)
  if (stale && op) {
    const entity = entityOf(op) ?? tableOf(op)
    return new OptimisticLockError(
      op.kind === 'update' && op.increments !== undefined
        ? `flush failed: ${entity} ${stale.join(', ')} not found (deleted, or never there), or changed since it was loaded (stale version); nothing was committed`
        : `flush failed: ${entity} ${stale.join(', ')} changed or deleted since it was loaded (stale version); nothing was committed`,
      { code: error.code, table: tableOf(op), entity: entityOf(op), constraint: undefined, detail: undefined },
      stale,
      { cause },
    )
  }
  if (op?.kind === 'live-guard' && error.code === '22P02' && error.message.includes(LIVE_MARK)) {
    // A soft delete's guard: a live row still refers to a row being soft-deleted (see renderLiveGuard).
    const { entity, field, parent } = op.rows
    const id = error.message.slice(error.message.lastIndexOf(':') + 1).replace(/"$/, '')
    return new ForeignKeyViolationError(
      `flush failed: ${entity.name} ${id} still refers to a ${parent.entity.name} being soft-deleted, through ${field.prop} (a delete would break its foreign key); nothing was committed`,
      { code: error.code, table: entity.table, entity: entity.name, constraint: undefined, detail: undefined },
      { cause },
    )
  }
  const failure: StatementFailure = {
    code: error.code,
    // The table the failed statement wrote; the server's table_name may be the other side of an FK.
    table: op ? tableOf(op) : (error.table_name ?? 'unknown'),
    entity: op ? entityOf(op) : undefined,
    constraint: error.constraint_name,
    detail: error.detail,
  }
  const what = op ? `${op.kind} ${failure.entity ? `${failure.entity} (table ${failure.table})` : `table ${failure.table}`}` : 'commit'
  const message = `flush failed at ${what}: ${error.message}${error.detail ? ` — ${error.detail}` : ''}; nothing was committed`
  const ErrorClass = classes[error.code] ?? FlushError
  return new ErrorClass(message, failure, { cause })
}

/**
 * A locking read's server error as a typed error (`nowait` on a locked row: LockTimeoutError), for
 * postgres.js's and node-postgres's errors alike. Nothing was written by the read itself.
 */
export function lockingReadError(error: ServerError, entity: string, table: string): FlushError {
  const e = error as ServerError & { table?: string; constraint?: string }
  const failure: StatementFailure = { code: e.code, table, entity, constraint: e.constraint_name ?? e.constraint, detail: e.detail }
  const ErrorClass = classes[e.code] ?? FlushError
  return new ErrorClass(`locking read of ${entity} (table ${table}) failed: ${e.message}${e.detail ? ` — ${e.detail}` : ''}`, failure, { cause: error })
}

/** A node-postgres server error in postgres.js's shape (node-postgres names the fields `table` and `constraint`). */
export function fromNodePostgres(error: ServerError): ServerError {
  const e = error as ServerError & { table?: string; constraint?: string }
  return {
    code: e.code,
    message: e.message,
    ...(e.detail === undefined ? {} : { detail: e.detail }),
    ...(e.table === undefined ? {} : { table_name: e.table }),
    ...(e.constraint === undefined ? {} : { constraint_name: e.constraint }),
  }
}
