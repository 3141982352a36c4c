import type { Statement } from '../../sql/statement.js'
import { PipelineExecutor, type ExecutorOptions } from '../protocol/pipeline-executor.js'
import { fromNodePostgres } from '../protocol/pg-error.js'
import { withDeadline } from '../protocol/timeout.js'
import { ReserveTimeout, type Answer, type Connection, type Port, type QueryResult, type Sent } from '../port.js'
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
  constructor(source: PgSource, options: ExecutorOptions = {}) {
    super(new NodePostgresPort(source), options)
  }
}

export class NodePostgresPort implements Port {
  /** Pipeline mode sends every query at once. */
  readonly maxPipeline = Infinity
  readonly serverError = fromNodePostgres

  constructor(private readonly source: PgSource) {}

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
    return new PgConnection(this.source, client)
  }

  async query(statement: Statement): Promise<QueryResult> {
    return { rows: (await this.source.query(pgQuery(statement, statement.objects ? undefined : 'array'))).rows as unknown[][], roundTrips: 1 }
  }

  transaction<T>(fn: (port: Port) => Promise<T>): Promise<T> {
    return this.source.transaction((source) => fn(new NodePostgresPort(source)))
  }
}

class PgConnection implements Connection {
  private cutOff = false
  /** node-postgres emits 'error' on a checked-out client whose socket ends: listened to while held. */
  private readonly unguard: () => void

  constructor(
    private readonly source: PgSource,
    private readonly client: PgClient,
  ) {
    this.unguard = guardErrors(client)
  }

  async send(statements: readonly Statement[]): Promise<Sent> {
    const client = this.client
    // In pipeline mode each query goes out as it is made: made in order.
    const settled = await pipelined(client, () => {
      const queries: Promise<Answer>[] = []
      for (const s of statements) queries.push(client.query(pgQuery(s, s.returnsRows ? 'array' : undefined)))
      return Promise.allSettled(queries)
    })
    return { settled, roundTrips: 1, coldStatements: 0 }
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
