import { FlushError, FlushTimeoutError, FlushwaveError } from '../../errors.js'
import { renderEvidence } from '../../sql/render-evidence.js'
import { readNextIds, renderNextIds, type IdRequest } from '../../sql/render-ids.js'
import type { Statement, WriteStatement } from '../../sql/statement.js'
import { returnsRows, type Op } from '../../plan/ops.js'
import type { CarriedIds, Executor, IdBlocks, QueryEvent, WarmUp, WriteOutcome } from '../executor.js'
import { firstFailure, lost, unknownFailure } from '../protocol/failures.js'
import { Capture } from '../protocol/capture.js'
import { landCarriedIds } from '../protocol/carried-ids.js'
import { read } from '../protocol/reads.js'
import { OUTCOME_BUDGET_MS, resolveOutcome } from '../protocol/outcome.js'
import type { Ledger } from '../../sql/render-ledger.js'
import { destroyConnection, guardErrors, pgQuery, pipelined, type PgClient, type PgResult } from './pg-client.js'
import { endsSession, flushError, fromNodePostgres, isServerError } from '../protocol/pg-error.js'
import type { PgSource } from './pg-source.js'
import { DEFAULT_FLUSH_TIMEOUT_MS, until, withDeadline } from '../protocol/timeout.js'

export interface NodePostgresOptions {
  readonly onQuery?: (event: QueryEvent) => void
  /** Longest a flush may take, from checking out a connection to COMMIT (default 30 s). */
  readonly timeoutMs?: number
  /** The outcome ledger each flush writes its token to (see sql/render-ledger.ts); none: undefined. */
  readonly ledger?: Ledger | undefined
}

/**
 * Executes on node-postgres (pg ≥ 8.23), from a pg.Pool or from knex's pool. A write checks out one
 * connection and, in pipeline mode, sends BEGIN, the transaction id, every statement and COMMIT
 * before awaiting anything. node-postgres sends each query as Parse/Bind/Describe/Execute/Sync with
 * the unnamed statement: a new statement shape costs no describe round trip, and nothing is left on
 * the server for a transaction-mode pooler to lose. So every flush is one round trip, cold or warm,
 * direct or through PgBouncer. After a failure the server answers the later statements with 25P02
 * and the COMMIT with ROLLBACK: atomic without a wait.
 */
export class NodePostgresExecutor implements Executor {
  private readonly timeoutMs: number
  private readonly capture: Capture

  constructor(
    private readonly source: PgSource,
    private readonly options: NodePostgresOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? DEFAULT_FLUSH_TIMEOUT_MS
    this.capture = new Capture(options.ledger, this.timeoutMs)
  }

  async read(statement: Statement): Promise<unknown[][]> {
    this.emit('read', statement)
    return (await read(() => this.source.query(pgQuery(statement, 'array')), { retry: !this.source.inTransaction, timeoutMs: this.timeoutMs })).rows as unknown[][]
  }

  async nextIds(requests: readonly IdRequest[]): Promise<IdBlocks> {
    const statement = renderNextIds(requests)
    this.emit('allocate', statement)
    const result = await withDeadline(
      this.source.query(pgQuery(statement, 'array')),
      performance.now() + this.timeoutMs,
      () => new FlushTimeoutError(`flush timed out after ${this.timeoutMs} ms allocating ids; nothing was written`, 'rolled-back'),
    ).catch((error: unknown) => {
      // Taking ids writes nothing a flush could lose: whatever failed here, nothing was committed.
      throw error instanceof FlushwaveError || (isServerError(error) && !endsSession(error)) ? error : lost(error, 'rolled-back', undefined)
    })
    return { ids: readNextIds(requests, result.rows as unknown[][]), roundTrips: 1 }
  }

  /** Nothing to prepare: unnamed statements are parsed with every flush, in the same round trip. */
  async warmUp(): Promise<WarmUp> {
    return { connections: 0, prepared: 0, durationMs: 0, prepares: false, roundTrips: 0 }
  }

  transaction<T>(fn: (executor: Executor) => Promise<T>): Promise<T> {
    if (this.source.inTransaction) throw new FlushwaveError('transactions do not nest: already inside em.transaction()')
    return this.source.transaction((source) => fn(new NodePostgresExecutor(source, this.options))).catch((error: unknown) => {
      // A failure at COMMIT (a serialization conflict, a deferred constraint) is the server's too.
      throw isServerError(error) && !endsSession(error) ? flushError(fromNodePostgres(error), undefined, error) : error
    })
  }

  /**
   * BEGIN, the transaction id, the statements and COMMIT in one pipeline. If the connection fails
   * or the flush runs past its deadline, the connection is cut and the server is asked on a fresh
   * one what became of the transaction (see outcome.ts).
   */
  async write(waves: readonly (readonly WriteStatement[])[], ids?: CarriedIds): Promise<WriteOutcome> {
    if (this.source.inTransaction) return this.writeInTransaction(waves)
    const deadline = performance.now() + this.timeoutMs
    const client = await withDeadline(
      this.source.acquire(),
      deadline,
      () => new FlushTimeoutError(`flush timed out after ${this.timeoutMs} ms waiting for a free connection; nothing was sent`, 'rolled-back'),
    ).catch((error: unknown) => {
      throw error instanceof FlushwaveError ? error : lost(error, 'rolled-back', undefined)
    })
    const statements = waves.flat()
    const idStatement = ids && ids.requests.length > 0 ? renderNextIds(ids.requests) : undefined
    const captured = this.capture.next()
    // The server process comes from the capture's answer (pg_backend_pid()). The connection's key
    // data names it only on a direct connection: behind a pooler it is the pooler's own key, maybe
    // another client's backend. With the ledger nothing needs it; without, it is all there is.
    const flight: { xid?: string; pid?: number } = !captured.ledger && client.processID ? { pid: client.processID } : {}
    const unguard = guardErrors(client)
    let timedOut = false
    let broken = false
    const timer = setTimeout(() => {
      timedOut = true
      destroyConnection(client) // every query of the pipeline fails at once
    }, until(deadline))
    try {
      const answers = await pipelined(client, () => {
        // In pipeline mode each query goes out as it is made: make them in order.
        const begin = client.query({ text: 'begin' })
        const capture = client.query(pgQuery(captured.statement))
        const queries = [begin, capture, ...statements.map((s) => this.send(client, s)), client.query({ text: 'commit' })]
        // After COMMIT, outside the transaction: its answer comes whatever became of the flush.
        if (idStatement) queries.push((this.emit('allocate', idStatement), client.query(pgQuery(idStatement, 'array'))))
        capture.then(({ rows }) => Object.assign(flight, rows[0] as { xid: string; pid: number }), () => undefined)
        return Promise.allSettled(queries)
      })
      const settled = idStatement ? answers.slice(0, -1) : answers
      if (idStatement) landCarriedIds(ids!, answers.at(-1), (result) => result.rows as unknown[][])
      const failure = timedOut
        ? new Error('flush timed out')
        : ((settled[1]?.status === 'rejected' && this.capture.missingTable(settled[1].reason, fromNodePostgres)) || firstFailure(settled, 2, statements, fromNodePostgres))
      if (failure !== undefined) throw failure
      const tag = (settled.at(-1) as PromiseFulfilledResult<PgResult>).value.command
      if (tag !== 'COMMIT') throw new FlushError(`COMMIT answered ${tag}; nothing was committed`, unknownFailure)
      return { ...results(waves, settled.slice(2, -1)), roundTrips: 1, coldStatements: 0 }
    } catch (error) {
      // A server error: the pipelined COMMIT came back as ROLLBACK, the transaction is over.
      if (error instanceof FlushwaveError) throw error
      // The connection failed or ran out of time: cut it, then ask the server on another one.
      clearTimeout(timer)
      broken = true
      destroyConnection(client)
      const outcome = await resolveOutcome(
        this.source.openProbe,
        { xid: flight.xid, pid: flight.pid, ledger: captured.ledger },
        performance.now() + OUTCOME_BUDGET_MS,
        renderEvidence(waves),
      )
      if (outcome === 'committed') return { rowCounts: [], returned: new Map(), roundTrips: 1, coldStatements: 0, recovered: { transactionId: flight.xid, cause: error } }
      throw lost(error, outcome, flight.xid, timedOut && this.timeoutMs)
    } finally {
      clearTimeout(timer)
      // A cut connection may still report its end: keep listening, it is going away anyway.
      if (!broken) unguard()
      this.source.release(client, broken)
    }
  }

  /**
   * Inside a transaction: the same pipeline without BEGIN and COMMIT. A failure aborts the
   * transaction (PostgreSQL answers later statements with 25P02); `transaction()` then rolls back.
   */
  private async writeInTransaction(waves: readonly (readonly WriteStatement[])[]): Promise<WriteOutcome> {
    const client = await this.source.acquire()
    const statements = waves.flat()
    const settled = await pipelined(client, () => Promise.allSettled(statements.map((s) => this.send(client, s))))
    const failure = firstFailure(settled, 0, statements, fromNodePostgres)
    if (failure !== undefined) throw failure instanceof FlushwaveError ? failure : lost(failure, 'rolled-back', undefined)
    return { ...results(waves, settled), roundTrips: 1, coldStatements: 0 }
  }

  private send(client: PgClient, statement: WriteStatement): Promise<PgResult> {
    this.emit('write', statement)
    // Rows a flush reads back (counters, upserted rows, ids a cascade reached) come as arrays, in select-list order.
    return client.query(pgQuery(statement, returnsRows(statement.op) ? 'array' : undefined))
  }

  private emit(phase: QueryEvent['phase'], statement: Statement): void {
    this.options.onQuery?.({ phase, text: statement.text, params: statement.params })
  }
}

/**
 * Rows affected per statement, wave by wave, and the rows of statements that return them, from the
 * settled answers of the statements in order.
 */
function results(waves: readonly (readonly WriteStatement[])[], settled: readonly PromiseSettledResult<PgResult>[]): Pick<WriteOutcome, 'rowCounts' | 'returned'> {
  let i = 0
  const returned = new Map<Op, unknown[][]>()
  const rowCounts = waves.map((wave) =>
    wave.map((s) => {
      const result = (settled[i++] as PromiseFulfilledResult<PgResult>).value
      if (returnsRows(s.op)) returned.set(s.op, result.rows as unknown[][])
      return result.rowCount ?? 0
    }),
  )
  return { rowCounts, returned }
}

