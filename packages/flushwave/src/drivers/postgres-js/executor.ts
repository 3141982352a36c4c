import type { Sql } from 'postgres'
import { afterSettings } from '../protocol/opening.js'
import { PipelineExecutor, type ExecutorOptions } from '../protocol/pipeline-executor.js'
import { withDeadline } from '../protocol/timeout.js'
import { ReserveTimeout, copySupport, type Connection, type CopySupport, type LateQuery, type OpenProbe, type Port, type QueryResult } from '../port.js'
import type { Opening } from '../../sql/render-session.js'
import type { Statement } from '../../sql/statement.js'
import { readRoundTrips } from './cold-shapes.js'
import { ReservedConnection, run, TransactionConnection, type PoolEvents, type Specimens } from './connection.js'
import { afterStaleError, Reservation } from './reservation.js'
import { withoutLeadingHoles } from './sparse-rows.js'

/**
 * A postgres.js instance (`postgres(url)`) as Flushwave's public types name it: structural, so that
 * Flushwave's declarations do not import postgres.js's and applications on pg or knex alone need
 * not install it. The port uses it as postgres.js's `Sql`.
 */
export interface PostgresJsLike {
  unsafe(...args: never[]): unknown
  begin(...args: never[]): unknown
  reserve(): Promise<unknown>
  end(...args: never[]): Promise<unknown>
  readonly options: object
}

/**
 * Flushes on postgres.js: each reserves one connection and sends BEGIN, every statement and COMMIT
 * before awaiting anything, so the driver pipelines them (one round trip when every shape is
 * prepared; new shapes go without a describe wait, see inline-prepare.ts). postgres.js gives each
 * statement its own Sync, so after a failure the server answers the later statements with 25P02
 * and the pipelined COMMIT with ROLLBACK.
 */
export class PostgresJsExecutor extends PipelineExecutor {
  /**
   * `copyRows`: inserts of that many rows or more go by COPY, at one round trip more each
   * (copy-in.ts); unset: the ones the cost model picks (plan/copy-policy.ts); false: none.
   */
  constructor(sql: PostgresJsLike, options: ExecutorOptions = {}, copyRows?: number | false) {
    super(new PostgresJsPort(sql as unknown as Sql, false, copySupport(copyRows, true)), options)
  }
}

export class PostgresJsPort implements Port {
  /** postgres.js sends at most this many queries before waiting (its `max_pipeline`, default 100). */
  readonly maxPipeline: number
  readonly warmUp: Port['warmUp']
  readonly specimens: Specimens = { queries: [] }
  /** Set by a connection failure: the pool may have to reconnect before the next reservation. */
  private reconnecting = false
  private readonly options: { max?: number; prepare?: boolean; max_pipeline?: number; shared?: { retries?: number } }

  constructor(
    private readonly sql: Sql,
    readonly inTransaction = false,
    readonly copy?: CopySupport,
  ) {
    this.options = (sql as unknown as { options?: PostgresJsPort['options'] }).options ?? {}
    this.maxPipeline = Math.max(4, this.options.max_pipeline ?? 100)
    this.warmUp = { connections: this.options.max ?? 10, prepares: this.options.prepare !== false }
  }

  async acquire(deadline: number): Promise<Connection> {
    if (this.inTransaction) return new TransactionConnection(this.sql)
    try {
      if (this.reconnecting) {
        // postgres.js 3.4.9 loses a connection for good when a reserve() fails to connect (the
        // rejected request stays queued and later swallows a connection). After a connection
        // failure, plain queries reconnect the pool first, one per connection, at once: they leave
        // nothing queued, and each takes the FATAL error a closed session may hand to the first
        // request of its next one (see afterStaleError), which would cost a reservation its connection.
        const reconnect = () => afterStaleError(() => this.sql.unsafe('select 1'))
        await withDeadline(Promise.all(Array.from({ length: this.options.max ?? 1 }, reconnect)), deadline, () => new ReserveTimeout())
        this.reconnecting = false
      }
      return new ReservedConnection(await Reservation.open(this.sql, deadline), this.events)
    } catch (error) {
      if (!(error instanceof ReserveTimeout)) this.reconnecting = true
      throw error
    }
  }

  async query(statement: Statement, late?: LateQuery): Promise<QueryResult> {
    // Not cancelled when late: postgres.js's cancel() opens a connection for the CancelRequest and
    // drops the promise of it, so a failure of that connection (the network that made the query
    // late) would be an unhandled rejection. The connection is cut instead (`late.stop`).
    const options = late === undefined || this.inTransaction ? undefined : this.stoppable(late)
    let query: ReturnType<typeof run> | undefined
    // afterStaleError: postgres.js may hand a terminated backend's FATAL to the next query (see there).
    const rows = await afterStaleError(() => (query = run(this.sql, statement, statement.objects !== true, options)))
    return { rows: withoutLeadingHoles(rows as unknown as unknown[][]), roundTrips: readRoundTrips(query!) }
  }

  /** Query options that give `late` the connection the query went out on (postgres.js's `onexecute`). */
  private stoppable(late: LateQuery): { onexecute: (connection: { terminate(): void }) => boolean } {
    const events = this.events
    return {
      onexecute: (connection) => {
        late.stop = () => {
          events.cut()
          connection.terminate()
        }
        return true // keep pipelining
      },
    }
  }

  /**
   * postgres.js's own transaction: BEGIN with the opening's modes, answered before `fn` runs. The
   * settings statement is sent at once, not awaited: postgres.js queues a transaction's queries on
   * its connection in order, so it goes out ahead of (and pipelined with) whatever `fn` sends first.
   */
  transaction<T>(fn: (port: Port) => Promise<T>, opening?: Opening): Promise<T> {
    const run = (tx: Sql) => {
      const port = new PostgresJsPort(tx, true, this.copy)
      const settings = opening?.settings
      return settings === undefined ? fn(port) : afterSettings(tx.unsafe(settings.text, settings.params as string[]).execute(), () => fn(port))
    }
    return (opening?.modes ? this.sql.begin(opening.modes, (tx) => run(tx as unknown as Sql)) : this.sql.begin((tx) => run(tx as unknown as Sql))) as Promise<T>
  }

  /** A one-connection client with the pool's settings; closing it destroys the connection. */
  readonly openProbe: OpenProbe = () => {
    // Loaded here, not at the top: applications on knex alone need not install postgres.js.
    // Its own `shared` state: failed probes must not lengthen the pool's reconnect backoff.
    const own = { ...this.options, max: 1, idle_timeout: 0, fetch_types: false, shared: { retries: 0, typeArrayMap: {} } }
    const client = import('postgres').then(({ default: postgres }) => postgres(own as never) as Sql)
    return {
      probe: async (text, params) => withoutLeadingHoles((await (await client).unsafe(text, params as string[]).values()) as unknown as unknown[][]),
      close: async () => (await client).end({ timeout: 0 }),
    }
  }

  private readonly events: PoolEvents = {
    specimens: this.specimens,
    cut: () => {
      this.reconnecting = true
    },
    /**
     * postgres.js lengthens the wait before reconnecting with every connection that closes with an
     * error (a counter shared by the pool), and sets it back only when a query, not a reservation,
     * opens a connection (3.4.9; flushes reconnect through reservations): after a dozen cut
     * connections, reconnects waited seconds. A flush that went through proves the server reachable.
     */
    released: () => {
      if (this.options.shared?.retries) this.options.shared.retries = 0
    },
  }
}
