import type { Opening } from '../../sql/render-session.js'
import type { Statement } from '../../sql/statement.js'
import { PipelineExecutor, type ExecutorOptions } from '../protocol/pipeline-executor.js'
import { fromNodePostgres } from '../protocol/pg-error.js'
import { withDeadline } from '../protocol/timeout.js'
import { BEGIN, COMMIT, OPEN, ReserveTimeout, copySupport, type Connection, type CopySupport, type LateQuery, type Port, type QueryResult, type Sent } from '../port.js'
import type { StatementNames } from './named-statements.js'
import { copyQuery } from './copy-query.js'
import { destroyConnection, guardErrors, pgQuery, pipelined, type PgClient } from './pg-client.js'
import type { PgSource } from './pg-source.js'

/**
 * Flushes on node-postgres (pg ≥ 8.23), from a pg.Pool or from knex's pool. A flush checks out one
 * client and, in pipeline mode, sends BEGIN, every statement and COMMIT before awaiting anything.
 * node-postgres sends each query as Parse/Bind/Describe/Execute/Sync with the unnamed statement: a
 * new statement shape costs no describe round trip, and nothing is left on the server for a
 * transaction-mode pooler to lose. So every flush is one round trip, cold or warm, direct or
 * through PgBouncer.
 */
export class NodePostgresExecutor extends PipelineExecutor {
  /**
   * `copyRows`: inserts of that many rows or more go by COPY, in the flush's pipeline
   * (copy-query.ts); unset: the ones the cost model picks (plan/copy-policy.ts); false: none.
   */
  constructor(source: PgSource, options: ExecutorOptions = {}, copyRows?: number | false) {
    super(new NodePostgresPort(source, copySupport(copyRows, false)), options)
  }
}

export class NodePostgresPort implements Port {
  /** Pipeline mode sends every query at once. */
  readonly maxPipeline = Infinity
  readonly serverError = fromNodePostgres
  /** Named statements are kept per connection: a warm-up prepares them on every one of the pool. */
  readonly warmUp: Port['warmUp']

  constructor(
    private readonly source: PgSource,
    readonly copy?: CopySupport,
  ) {
    this.warmUp = source.names.mode === false ? undefined : { connections: source.connections, prepares: true }
  }

  get inTransaction(): boolean {
    return this.source.inTransaction
  }

  get openProbe(): Port['openProbe'] {
    return this.source.openProbe
  }

  async acquire(deadline: number): Promise<Connection> {
    const checkout = this.source.acquire()
    const client = await withDeadline(checkout, deadline, () => {
      checkout.then((late) => this.source.release(late, false), () => undefined)
      return new ReserveTimeout()
    })
    return new PgConnection(this.source, client, this.source.names)
  }

  async query(statement: Statement, late?: LateQuery): Promise<QueryResult> {
    return { rows: (await this.source.query(pgQuery(statement, statement.objects ? undefined : 'array'), late)).rows as unknown[][], roundTrips: 1 }
  }

  transaction<T>(fn: (port: Port) => Promise<T>, opening?: Opening): Promise<T> {
    return this.source.transaction((source) => fn(new NodePostgresPort(source, this.copy)), opening)
  }
}

class PgConnection implements Connection {
  private cutOff = false
  /** node-postgres emits 'error' on a checked-out client whose socket ends: listened to while held. */
  private readonly unguard: () => void

  constructor(
    private readonly source: PgSource,
    private readonly client: PgClient,
    private readonly names: StatementNames,
  ) {
    this.unguard = guardErrors(client)
  }

  async send(statements: readonly Statement[]): Promise<Sent> {
    const client = this.client
    const configs = statements.map((s) => (s.copy === undefined ? pgQuery(s, s.returnsRows ? 'array' : undefined) : { issue: (on: PgClient) => copyQuery(on, s) }))
    // A warm-up's pipeline: whether the connection keeps names is known before its shapes go out.
    if (statements[0] === OPEN) await this.names.known(client)
    // In pipeline mode each query goes out as it is made: made in order.
    const { settled, cold } = await pipelined(client, () => this.names.issue(client, configs))
    if (!this.names.lost(client, settled)) return { settled, roundTrips: 1, coldStatements: cold }
    // A named statement the server did not have: sent again unnamed, where that is the same as
    // sending it once. The whole pipeline when its transaction rolled back; only what follows a
    // COMMIT that went through (the carried ids). Inside a transaction the failure stands.
    const commitAt = statements.indexOf(COMMIT)
    const commit = settled[commitAt]
    const tag = commit?.status === 'fulfilled' ? commit.value.command : undefined
    const from = statements[0] === BEGIN && tag === 'ROLLBACK' ? 0 : tag === 'COMMIT' ? commitAt + 1 : -1
    if (from < 0 || from === statements.length) return { settled, roundTrips: 1, coldStatements: cold }
    const again = await pipelined(client, () => this.names.unnamed(client, configs.slice(from)))
    return { settled: [...settled.slice(0, from), ...again], roundTrips: 2, coldStatements: 0 }
  }

  /** Every query of the pipeline fails at once ("Connection terminated"). */
  cut(): void {
    this.cutOff = true
    destroyConnection(this.client)
  }

  get usable(): boolean {
    return !this.cutOff
  }

  pid(): number | undefined {
    return this.client.processID ?? undefined
  }

  release(broken: boolean): void {
    // A cut connection may still report its end: keep listening, it is going away anyway.
    if (!broken) this.unguard()
    this.source.release(this.client, broken)
  }
}
