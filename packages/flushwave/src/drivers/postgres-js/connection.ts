import type { PendingQuery, ReservedSql, Row, Sql } from 'postgres'
import { copyIn } from './copy-in.js'
import type { Statement } from '../../sql/statement.js'
import { BEGIN, COMMIT, OPEN, ROLLBACK, type Answer, type Connection, type Sent } from '../port.js'
import { newShapes, pipelineRoundTrips } from './cold-shapes.js'
import { prepareInline } from './inline-prepare.js'
import { isConnectionFailure } from '../protocol/reads.js'
import { neverRetried } from './no-retry.js'
import type { Reservation } from './reservation.js'
import { withoutLeadingHoles } from './sparse-rows.js'

/**
 * Parameters go as `unknown` (OID 705), as node-postgres sends them: the server takes each one's
 * type from the cast beside it (`$1::int8[]`) and reads the text once, with that type's input
 * function; typed `text`, each would be converted again. postgres.js keeps a non-zero type as given
 * and has no serializer for 705, so the string is sent as it is.
 */
const UNKNOWN_OID = 705

/** The protocol's statements without parameters, which postgres.js sends by a path of its own. */
const plain = (s: Statement): boolean => s === BEGIN || s === COMMIT || s === ROLLBACK || s === OPEN

/** A statement as a postgres.js query, rows as arrays when `arrays`. */
export function run(sql: Sql | ReservedSql, statement: Statement, arrays: boolean, options?: object): PendingQuery<Row[]> {
  if (plain(statement)) return sql.unsafe<Row[]>(statement.text, [], options)
  const params: unknown[] = []
  for (const p of statement.params) params.push(sql.typed(p as never, UNKNOWN_OID))
  // unsafe() does not prepare unless asked; a global `prepare: false` (PgBouncer) still wins.
  // Every parameter is typed here, so a new shape needs no describe wait (inline-prepare.ts).
  const query = prepareInline(sql.unsafe<Row[]>(statement.text, params as never[], options ? { prepare: true, ...options } : { prepare: true }))
  return arrays ? (query.values() as unknown as PendingQuery<Row[]>) : query
}

/**
 * The last flush's BEGIN, capture and COMMIT, kept (a few hundred bytes) for their hidden classes:
 * postgres.js gives a query most of its properties as it builds and answers it, so its classes are
 * reached by transitions, which V8 frees in a major GC once no query has them, and the next flush
 * would then meet new classes that postgres.js's code re-learns. A flush's statements take the same
 * transitions as its capture, so these three keep all of them.
 */
export interface Specimens {
  queries: readonly object[]
}

/** What a reserved connection tells its pool's port. */
export interface PoolEvents {
  readonly specimens: Specimens
  /** A connection was cut: the pool may have to reconnect. */
  cut(): void
  /** A connection went back whole: the server is reachable. */
  released(): void
}

/** A reserved connection of the pool: one flush's, or one warm-up's. */
export class ReservedConnection implements Connection {
  private first: PendingQuery<Row[]> | undefined

  constructor(
    private readonly reservation: Reservation,
    private readonly pool: PoolEvents,
  ) {}

  async send(statements: readonly Statement[]): Promise<Sent> {
    // The reservation's first query hands over its connection object (Reservation.tracking).
    // Never sent again by postgres.js after the transaction ended (no-retry.ts).
    const make = (s: Statement) => {
      const query = neverRetried(run(this.reservation.sql, s, s.returnsRows === true, this.first ? undefined : this.reservation.tracking))
      this.first ??= query
      return query
    }
    const reservation = this.reservation
    const failed = () => reservation.failed()
    if (statements.some((s) => s.copy !== undefined)) return sendWithCopies(reservation.sql, statements, make, reservation.gone, failed)
    const queries = statements.map(make)
    const settled = settle(queries, reservation.gone, failed) // sends them, in order
    for (let i = 0; i < statements.length; i++) {
      if (statements[i] === BEGIN) this.pool.specimens.queries = [queries[i]!, queries[i + 1]!]
      if (statements[i] === COMMIT) this.pool.specimens.queries = [...this.pool.specimens.queries, queries[i]!]
    }
    return { settled: await settled, roundTrips: pipelineRoundTrips(queries), coldStatements: newShapes(queries) }
  }

  cut(): void {
    this.pool.cut()
    this.reservation.terminate()
  }

  get usable(): boolean {
    return this.reservation.usable
  }

  pid(): number | undefined {
    return this.first && this.reservation.pidOf(this.first)
  }

  release(broken: boolean): void {
    this.reservation.release()
    if (!broken) this.pool.released()
  }
}

/** The connection of a transaction the application holds (`sql.begin`): it is not the protocol's to cut or give back. */
export class TransactionConnection implements Connection {
  readonly usable = true

  constructor(private readonly sql: Sql) {}

  async send(statements: readonly Statement[]): Promise<Sent> {
    const make = (s: Statement) => run(this.sql, s, s.returnsRows === true)
    if (statements.some((s) => s.copy !== undefined)) return sendWithCopies(this.sql, statements, make, NEVER, ignore)
    const queries = statements.map(make)
    return { settled: await settle(queries, NEVER, ignore), roundTrips: pipelineRoundTrips(queries), coldStatements: newShapes(queries) }
  }

  cut(): void {}

  pid(): undefined {
    return undefined
  }

  release(): void {}
}

const NEVER = new Promise<void>(() => undefined)
const ignore = (): void => undefined

/**
 * A pipeline with COPY statements (copy-in.ts): the statements up to each COPY go out, the COPY
 * waits for its CopyInResponse (one round trip more), its rows go, and the next statements right
 * behind them. Answers as `settle` gives them.
 */
async function sendWithCopies(
  sql: Sql | ReservedSql,
  statements: readonly Statement[],
  make: (s: Statement) => PendingQuery<Row[]>,
  gone: Promise<void>,
  failed: () => void,
): Promise<Sent> {
  const results: (PromiseSettledResult<Answer> | undefined)[] = statements.map(() => undefined)
  const pending: Promise<void>[] = []
  const queries: PendingQuery<Row[]>[] = []
  let copies = 0
  // A query sent on a connection that has closed crashes postgres.js (a write from a timer on its
  // gone socket): once it is gone, the rest stay unanswered (undefined), as `settle` leaves them.
  let closed = false
  void gone.then(() => (closed = true))
  const fail = () => ((closed = true), failed())
  for (let i = 0; i < statements.length; i++) {
    if (closed) break
    const s = statements[i]!
    let answer: Promise<Answer>
    if (s.copy === undefined) {
      const query = make(s)
      queries.push(query)
      answer = query.then((value) => ({ command: value.command, rowCount: value.count, rows: withoutLeadingHoles(value) }))
    } else {
      copies++
      const copied = await copyIn(sql, s, gone)
      answer = copied.answer
      // Known now, not only once the answer's handler runs: nothing more may go on a broken connection.
      if (copied.failure !== undefined && isConnectionFailure(copied.failure.error)) fail()
    }
    pending.push(answer.then((value) => void (results[i] = { status: 'fulfilled', value }), (reason: unknown) => void (results[i] = rejected(reason, fail))))
  }
  await Promise.race([Promise.all(pending), gone.then(() => new Promise((resolve) => setImmediate(resolve)))])
  return { settled: results, roundTrips: pipelineRoundTrips(queries) + copies, coldStatements: newShapes(queries) }
}

/**
 * Every query's answer, or, once the connection is gone, what had settled by then (undefined for
 * the rest). postgres.js rejects the queries it sent when a connection closes, but not those it
 * held back behind a describe: waiting for all of them could take forever.
 */
async function settle(queries: readonly PendingQuery<Row[]>[], gone: Promise<void>, failed: () => void): Promise<(PromiseSettledResult<Answer> | undefined)[]> {
  const results: (PromiseSettledResult<Answer> | undefined)[] = queries.map(() => undefined)
  const all = Promise.all(
    queries.map((query, i) =>
      query.then(
        (value) => void (results[i] = { status: 'fulfilled', value: { command: value.command, rowCount: value.count, rows: withoutLeadingHoles(value) } }),
        (reason: unknown) => void (results[i] = rejected(reason, failed)),
      ),
    ),
  )
  // After the close, give the rejections postgres.js is delivering a turn of the event loop to land.
  await Promise.race([all, gone.then(() => new Promise((resolve) => setImmediate(resolve)))])
  return results
}

/** A query's failure; one of the connection's tells the connection at once (Reservation.failed). */
function rejected(reason: unknown, failed: () => void): PromiseRejectedResult {
  if (isConnectionFailure(reason)) failed()
  return { status: 'rejected', reason }
}
