import type { PendingQuery, ReservedSql, Row, Sql } from 'postgres'
import { endsSession, isServerError } from '../protocol/pg-error.js'
import { hedgedReserve } from './hedged-reserve.js'

/** The few fields of postgres.js's internal connection object a reservation relies on. */
interface Connection {
  onclose?: ((error: unknown) => void) | null
  terminate(): void
}

/**
 * `pool.reserve()` as Flushwave asks it of postgres.js 3.4.9: once more after a stale FATAL error
 * (afterStaleError), and again while the pool may have forgotten the request (hedgedReserve), each
 * time once a plain query through the pool answered. Rejects with ReserveTimeout at `deadline`.
 */
export function reserveFrom(pool: Sql, deadline: number): Promise<ReservedSql> {
  const reachable = () => afterStaleError(() => pool.unsafe('select 1')).then(
    () => true,
    () => false,
  )
  return hedgedReserve(() => afterStaleError(() => pool.reserve()), deadline, reachable)
}

/**
 * One reserved postgres.js connection that knows when its socket closed and can be cut.
 *
 * postgres.js gives no public handle on a reserved connection, and releasing one whose socket has
 * closed puts a dead connection back into the pool: the next query on it crashes the process with
 * a TypeError thrown from a timer (seen with postgres 3.4.9). So the first query of a reservation
 * passes `onexecute`, which hands over the connection object; its `onclose` tells us when the
 * socket is gone (the pool then reconnects it on demand, so it must not be released), and its
 * `terminate()` ends a flush that ran past its deadline.
 */
export class Reservation {
  private connection: Connection | undefined
  private closed = false
  private cut = false
  private markGone!: () => void
  /** Settles once the connection closed or was cut: queries still pending then never settle. */
  readonly gone = new Promise<void>((resolve) => (this.markGone = resolve))

  private constructor(readonly sql: ReservedSql) {}

  /**
   * Reserves a connection, giving up at `deadline` (ms since the epoch of performance.now()) with
   * ReserveTimeout. A reservation that arrives after that is released at once (hedged-reserve.ts).
   */
  static async open(pool: Sql, deadline: number): Promise<Reservation> {
    return new Reservation(await reserveFrom(pool, deadline))
  }

  /** Options for the reservation's first query: they hand over the connection object. */
  get tracking(): { onexecute: (connection: Connection) => boolean } {
    return {
      onexecute: (connection) => {
        if (this.connection === undefined) {
          this.connection = connection
          // Named before it is stored, not stored as it is made: on Node 20, an arrow stored into a
          // property as it was created made young GCs keep each flush's reservation, and what it
          // refers to, until the next full GC (docs/design-notes.md, "The reservation's onclose
          // named before it is stored").
          const onclose = () => {
            this.closed = true
            this.markGone()
          }
          connection.onclose = onclose
        }
        return true // keep pipelining
      },
    }
  }

  /** Whether queries can still be sent: sending on a closed reserved connection crashes postgres.js. */
  get usable(): boolean {
    return !this.closed && !this.cut
  }

  /** The server process of the connection, once a query ran on it (postgres.js keeps it for cancel). */
  pidOf(query: PendingQuery<Row[]>): number | undefined {
    const pid = (query as unknown as { state?: { pid?: number | null } }).state?.pid
    return typeof pid === 'number' ? pid : undefined
  }

  /**
   * Cuts the connection: postgres.js rejects every query it sent, says goodbye to the server and
   * closes the socket. The pool reopens the connection when it next needs it.
   */
  terminate(): void {
    if (this.connection === undefined || this.closed || this.cut) return
    this.cut = true
    this.connection.terminate()
    this.markGone()
  }

  /**
   * A query of the reservation failed with the connection (a socket error: ECONNRESET, EPIPE). The
   * socket closes a moment later, but until then postgres.js would still write queries on it, and
   * those it keeps for ever: it rejects what it had sent at the error, and a close that follows an
   * error rejects nothing. On reconnect the kept queries then take the new session's answers, every
   * answer one query late (postgres 3.4.9, seen with a connection cut in the middle of COPY data).
   * Cut at once: termination rejects everything sent, and nothing more is sent here.
   */
  failed(): void {
    this.terminate()
  }

  /** Returns a live connection to the pool; a closed or cut one is already out of it. */
  release(): void {
    if (this.connection !== undefined && !this.usable) return
    this.sql.release()
  }
}

/**
 * postgres.js keeps a server error that arrives during a query until the next ReadyForQuery. A
 * FATAL one (the server process was terminated) is followed by the socket closing instead, and the
 * error stays behind: when that connection object reconnects, it rejects the first query of the new
 * session with it (seen with postgres 3.4.9). Reads and reservations are safe to try once more.
 */
export async function afterStaleError<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run()
  } catch (error) {
    if (!(isServerError(error) && endsSession(error))) throw error
    return run()
  }
}
