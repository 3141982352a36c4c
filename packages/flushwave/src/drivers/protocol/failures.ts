import { ConnectionLostError, FlushTimeoutError } from '../../errors.js'
import type { WriteStatement } from '../../sql/statement.js'
import { endsSession, flushError, IN_FAILED_TRANSACTION, isServerError } from './pg-error.js'
import type { ServerError } from '../port.js'
import { OUTCOME_BUDGET_MS } from './outcome.js'

/** What every executor reads from a pipeline's answers: the same rules whatever the driver. */

export const unknownFailure = { code: undefined, table: 'unknown', entity: undefined, constraint: undefined, detail: undefined }

/**
 * The first real error of a pipeline, never the 25P02 echoes that follow it. A connection-level
 * failure (socket closed, FATAL from the server, a query that never settled) comes back as is:
 * the caller finds out what became of the transaction.
 */
export function firstFailure(
  settled: readonly (PromiseSettledResult<unknown> | undefined)[],
  offset: number,
  statements: readonly WriteStatement[],
  /** The driver's server error in postgres.js's shape (node-postgres names its fields differently). */
  normalize: (error: ServerError) => ServerError = (error) => error,
): unknown {
  let echo: unknown
  for (const [i, result] of settled.entries()) {
    if (result === undefined) return new Error('the connection closed before every query of the flush was answered')
    if (result.status === 'fulfilled') continue
    const error: unknown = result.reason
    if (!isServerError(error) || endsSession(error)) return error
    if (error.code === IN_FAILED_TRANSACTION) {
      echo ??= error
      continue
    }
    return flushError(normalize(error), statements[i - offset]?.op, error)
  }
  return echo === undefined ? undefined : flushError(normalize(echo as ServerError), undefined, echo)
}

/** The error of a flush whose connection failed or timed out, with what became of its transaction. */
export function lost(error: unknown, outcome: 'rolled-back' | 'unknown', transactionId: string | undefined, timedOutAfter: number | false = false): ConnectionLostError {
  const what =
    outcome === 'rolled-back'
      ? 'nothing was committed'
      : `the outcome is unknown: no answer to this flush arrived, and the server could not be reached within the ${OUTCOME_BUDGET_MS / 1000} s outcome budget ` +
        '(or, with outcomeLedger: false, could not tell) to say whether it committed ' +
        '(a retry cannot write it twice: its inserts would fail as duplicates, its versioned updates as stale)'
  const options = { cause: error, transactionId }
  if (timedOutAfter !== false) return new FlushTimeoutError(`flush timed out after ${timedOutAfter} ms; ${what}`, outcome, options)
  return new ConnectionLostError(`connection lost during flush; ${what} (${(error as Error)?.message ?? String(error)})`, outcome, options)
}
