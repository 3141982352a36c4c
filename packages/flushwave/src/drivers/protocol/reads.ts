import { ConnectionLostError } from '../../errors.js'
import type { LateQuery } from '../port.js'
import { endsSession, isServerError } from './pg-error.js'
import { withDeadline } from './timeout.js'

/**
 * Whether a query failed because its connection did, not because of what it asked: a session-ending
 * server error (the backend was terminated, the server shuts down) or a driver's socket error.
 */
export function isConnectionFailure(error: unknown): boolean {
  if (isServerError(error)) return endsSession(error)
  const e = error as { code?: unknown; message?: unknown } | null
  if (typeof e?.code === 'string' && /^(CONNECTION_|CONNECT_TIMEOUT$|E[A-Z]+$)/.test(e.code)) return true
  return typeof e?.message === 'string' && /connection terminated|connection error|not queryable|connection (closed|ended)/i.test(e.message)
}

/**
 * Runs a read. A read whose connection was dead when it was sent (a pooled connection the server
 * ended while it sat idle) wrote nothing and is run once more, on whatever connection the pool
 * gives next; a second such failure, or one inside a transaction (which died with its connection),
 * is a ConnectionLostError. So is a read still unanswered after `timeoutMs` (the flush timeout): a
 * driver that lost track of a connection must not leave the request waiting forever, and the
 * connection is cut where the port can (LateQuery). Errors about
 * the query itself pass through unchanged.
 */
export async function read<T>(run: (late: LateQuery) => Promise<T>, options: { readonly retry: boolean; readonly timeoutMs: number }): Promise<T> {
  const deadline = performance.now() + options.timeoutMs
  const bounded = () => {
    const late: LateQuery = {}
    return withDeadline(run(late), deadline, () => {
      late.stop?.()
      return new ConnectionLostError(`read timed out after ${options.timeoutMs} ms; nothing was written`, 'rolled-back')
    })
  }
  try {
    return await bounded()
  } catch (error) {
    if (!isConnectionFailure(error)) throw error
    if (!options.retry) throw readLost(error)
    try {
      return await bounded()
    } catch (again) {
      throw isConnectionFailure(again) ? readLost(again) : again
    }
  }
}

function readLost(error: unknown): ConnectionLostError {
  return new ConnectionLostError(`connection lost during a read; nothing was written (${(error as Error)?.message ?? String(error)})`, 'rolled-back', {
    cause: error,
    transactionId: undefined,
  })
}
