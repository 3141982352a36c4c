import type { Opening } from '../sql/render-session.js'
import type { Statement } from '../sql/statement.js'

/** A port's COPY: who chooses the inserts that go by it, and what it costs beyond the pipeline. */
export interface CopySupport {
  /** The application's `copyRows`: every plain insert of that many rows or more; unset: the cost model (plan/copy-policy.ts). */
  readonly rows?: number
  /** The port waits for the server's CopyInResponse before it sends the rows: one round trip more (postgres.js). */
  readonly roundTrip: boolean
}

/** A port's COPY from the application's `copyRows`: a threshold, unset for the cost model, or `false` for none. */
export function copySupport(copyRows: number | false | undefined, roundTrip: boolean): CopySupport | undefined {
  if (copyRows === false) return undefined
  return copyRows === undefined ? { roundTrip } : { rows: copyRows, roundTrip }
}

/**
 * What a driver gives the flush protocol (protocol/pipeline-executor.ts): connections that send a
 * pipeline of statements and can be cut, one-statement queries, transactions and probe connections.
 * The protocol owns everything else (deadline, BEGIN, the outcome capture, COMMIT and its tag,
 * carried ids, failure classification, outcome recovery), so a port is a thin file over its driver.
 */
export interface Port {
  /** Most statements one pipeline may hold (postgres.js's `max_pipeline`); Infinity when unbounded. */
  readonly maxPipeline: number
  /** Inside a transaction the protocol does not own: flushes send no BEGIN or COMMIT. */
  readonly inTransaction: boolean
  /** How the port sends `copy … from stdin` (Statement.copy) in a flush; unset: it does not. */
  readonly copy?: CopySupport
  /**
   * A connection for one flush, given back with `release`. Rejects with ReserveTimeout when none
   * became free by `deadline` (a performance.now() time); a connection that arrives later is released.
   */
  acquire(deadline: number): Promise<Connection>
  /**
   * One statement on some connection (reads, id allocation), rows as arrays in select-list order
   * (as objects when the statement says `objects`). Errors are the driver's own. With `late`, a
   * port that can end the query's connection sets `late.stop` once the query is on one; its caller
   * calls it when the query has run past its deadline.
   */
  query(statement: Statement, late?: LateQuery): Promise<QueryResult>
  /**
   * Runs `fn` in one transaction on one connection, with a port bound to it (`inTransaction`). With
   * `opening`, BEGIN carries its modes and its settings statement goes right behind BEGIN, before
   * anything of `fn`'s and without a round trip of its own; a failure of it fails the transaction
   * with the server's error.
   */
  transaction<T>(fn: (port: Port) => Promise<T>, opening?: Opening): Promise<T>
  /** A connection of its own, outside any pool, to ask about a flush whose connection failed. */
  readonly openProbe: OpenProbe
  /** The driver's server error in postgres.js's field names (node-postgres names two differently). */
  readonly serverError?: (error: ServerError) => ServerError
  /**
   * Set when warming up pays: the driver keeps prepared statements per connection. `connections`
   * is the pool's size; `prepares` false when it prepares nothing (a pooler): a warm-up then only
   * opens the connections. Unset: a warm-up has nothing to do.
   */
  readonly warmUp?: { readonly connections: number; readonly prepares: boolean }
}

/** One connection, held for a flush (or the transaction's own). */
export interface Connection {
  /**
   * Sends the statements in order without waiting between them, and settles once every one is
   * answered or the connection is gone (those never answered are undefined). Rows come as arrays
   * for statements that `returnsRows`.
   */
  send(statements: readonly Statement[]): Promise<Sent>
  /** Cuts the connection: every statement in flight fails at once, and it is never reused. */
  cut(): void
  /** Whether statements can still be sent: not cut, not closed. */
  readonly usable: boolean
  /** The server process, as the connection itself knows it (its key data): only right on a direct connection. */
  pid(): number | undefined
  /** Gives the connection back; a broken one (cut, or failed mid-flush) is destroyed, never reused. */
  release(broken: boolean): void
}

/** What one pipeline got back. */
export interface Sent {
  readonly settled: readonly (PromiseSettledResult<Answer> | undefined)[]
  /** Round trips waited on: 1, more only when the driver stopped to describe a new statement. */
  readonly roundTrips: number
  /** Statement shapes new to the connection (parsed by the server in this pipeline). */
  readonly coldStatements: number
}

/** One statement's answer. */
export interface Answer {
  /** The command tag's verb: `COMMIT`, or `ROLLBACK` when the transaction had failed. */
  readonly command: string
  readonly rowCount: number | null
  readonly rows: readonly unknown[]
}

/**
 * A pooled query's way out when it is late: `stop` cuts its connection, which fails everything
 * pipelined on it. A connection whose answers stopped would otherwise keep taking the pool's
 * queries (postgres.js pipelines onto busy connections), each one as late.
 */
export interface LateQuery {
  stop?: () => void
}

export interface QueryResult {
  readonly rows: unknown[][]
  /** 1, or 2 when the driver described the statement before binding it. */
  readonly roundTrips: number
}

/** No connection became free before the deadline. */
export class ReserveTimeout extends Error {
  override name = 'ReserveTimeout'
  constructor() {
    super('no connection became free before the deadline')
  }
}

/**
 * The protocol's own statements. Ports tell them apart by identity where their driver sends
 * statements without parameters another way (postgres.js).
 */
export const BEGIN: Statement = { text: 'begin', params: [] }
export const COMMIT: Statement = { text: 'commit', params: [] }
export const ROLLBACK: Statement = { text: 'rollback', params: [] }
/** A warm-up's first statement on each connection. */
export const OPEN: Statement = { text: 'select 1', params: [] }

/** The fields postgres.js puts on a server error (a port maps its driver's into these: `serverError`). */
export interface ServerError {
  readonly code: string
  readonly message: string
  readonly detail?: string
  readonly table_name?: string
  readonly constraint_name?: string
}

/** Runs one statement on a connection other than a failed flush's; rows as arrays. */
export type Probe = (text: string, params: readonly string[]) => Promise<unknown[][]>

/**
 * Opens a fresh connection to probe on. Never a pooled one: after a network failure the pool may
 * hold connections that look open and never answer. `close` destroys it, answered or not.
 */
export type OpenProbe = () => { readonly probe: Probe; close(): Promise<void> }
