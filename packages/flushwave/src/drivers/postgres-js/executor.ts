import type { PendingQuery, ReservedSql, Row, Sql } from 'postgres'
import { ConnectionLostError, FlushError, FlushTimeoutError, FlushwaveError } from '../../errors.js'
import { Capture } from '../protocol/capture.js'
import { read } from '../protocol/reads.js'
import { withoutLeadingHoles } from './sparse-rows.js'
import { OUTCOME_BUDGET_MS, resolveOutcome } from '../protocol/outcome.js'
import type { OpenProbe } from '../port.js'
import type { Ledger } from '../../sql/render-ledger.js'
import { afterStaleError, Reservation, ReserveTimeout } from './reservation.js'
import { DEFAULT_FLUSH_TIMEOUT_MS, until, withDeadline } from '../protocol/timeout.js'
import { renderEvidence } from '../../sql/render-evidence.js'
import { readNextIds, renderNextIds, type IdRequest } from '../../sql/render-ids.js'
import type { Statement, WriteStatement } from '../../sql/statement.js'
import { returnsRows, type Op } from '../../plan/ops.js'
import type { CarriedIds, Executor, IdBlocks, QueryEvent, WarmUp, WriteOutcome } from '../executor.js'
import { endsSession, flushError, isServerError } from '../protocol/pg-error.js'
import { firstFailure, lost, unknownFailure } from '../protocol/failures.js'
import { newShapes, pipelineRoundTrips, readRoundTrips, wasDescribed } from './cold-shapes.js'
import { prepareInline } from './inline-prepare.js'
import { landCarriedIds } from '../protocol/carried-ids.js'

/**
 * Parameters go as `unknown` (OID 705), as node-postgres sends them: the server takes each one's type
 * from the cast beside it (`$1::int8[]`) and reads the text once, with that type's input function.
 * Typed `text` (25), every parameter was a text value first and then converted (an I/O cast per
 * parameter): replaying a mixedFlush×10 flush's 30 statements, 7.4 ms against 6.7 ms (300 rounds,
 * interleaved). postgres.js keeps a non-zero type as given and has no serializer for 705, so the
 * string is sent as it is.
 */
const UNKNOWN_OID = 705

export interface PostgresJsOptions {
  readonly onQuery?: (event: QueryEvent) => void
  /** Set on the executor of `transaction()`: `sql` is then inside a transaction it does not own. */
  readonly inTransaction?: boolean
  /** Longest a flush may take, from reserving a connection to COMMIT (default 30 s). */
  readonly timeoutMs?: number
  /** The outcome ledger each flush writes its token to (see sql/render-ledger.ts); none: undefined. */
  readonly ledger?: Ledger | undefined
}

/**
 * A postgres.js instance (`postgres(url)`) as Flushwave's public types name it: structural, so that
 * Flushwave's declarations do not import postgres.js's and applications on pg or knex alone need
 * not install it. The executor uses it as postgres.js's `Sql`.
 */
export interface PostgresJsLike {
  unsafe(...args: never[]): unknown
  begin(...args: never[]): unknown
  reserve(): Promise<unknown>
  end(...args: never[]): Promise<unknown>
  readonly options: object
}

/**
 * Executes on postgres.js. A write reserves one connection and sends BEGIN, every statement and
 * COMMIT before awaiting anything, so the driver pipelines them: one round trip when every shape is
 * prepared. postgres.js gives each statement its own Sync, so after a failure the server answers the
 * later statements with 25P02 and the pipelined COMMIT with ROLLBACK: atomic without a wait.
 */
export class PostgresJsExecutor implements Executor {
  /** postgres.js sends at most this many queries before waiting (its `max_pipeline`, default 100). */
  private readonly maxPipeline: number
  private readonly timeoutMs: number
  /** Set by a connection failure: the pool may have to reconnect before the next reservation. */
  private reconnecting = false
  private readonly capture: Capture
  private readonly sql: Sql
  /**
   * The last flush's BEGIN, capture and COMMIT, kept (a few hundred bytes) for their hidden
   * classes. postgres.js gives a query most of its properties as it builds and answers it, so its
   * classes are reached by transitions, which V8 frees in a major GC once no query has them; the
   * next flush then meets new classes in postgres.js's code, which re-learns them. A flush's
   * statements take the same transitions as its capture, so these three keep all of them. With a
   * full GC before each of 300 bulkCreate×1 flushes, `--log-ic` logged 90,525 inline-cache updates
   * without them and 56,771 with (the hand-written flush: 56,217). raw-pipelined ÷ flushwave,
   * measured as the bench does (300 rounds, alternated): 0.784, 0.796, 0.760 and 0.748 with them
   * against 0.773, 0.778, 0.748 and 0.745. Without a major GC in between, nothing changes.
   */
  private specimens: readonly PendingQuery<Row[]>[] = []

  constructor(
    sql: PostgresJsLike,
    private readonly options: PostgresJsOptions = {},
  ) {
    this.sql = sql as unknown as Sql
    const configured = (this.sql as { options?: { max_pipeline?: number } }).options?.max_pipeline
    this.maxPipeline = Math.max(4, configured ?? 100)
    this.timeoutMs = options.timeoutMs ?? DEFAULT_FLUSH_TIMEOUT_MS
    this.capture = new Capture(options.ledger, this.timeoutMs)
  }

  async read(statement: Statement): Promise<unknown[][]> {
    this.emit('read', statement)
    // afterStaleError: postgres.js may hand a terminated backend's FATAL to the next query (see there).
    const rows = await read(() => afterStaleError(() => this.run(this.sql, statement).values()), { retry: !this.options.inTransaction, timeoutMs: this.timeoutMs })
    return withoutLeadingHoles(rows as unknown as unknown[][])
  }

  async nextIds(requests: readonly IdRequest[]): Promise<IdBlocks> {
    const statement = renderNextIds(requests)
    this.emit('allocate', statement)
    let query: ReturnType<PendingQuery<Row[]>['values']> | undefined
    const attempt = () => (query = this.run(this.sql, statement).values())
    const rows = (await withDeadline(afterStaleError(attempt), performance.now() + this.timeoutMs, () => {
      query?.cancel()
      return new FlushTimeoutError(`flush timed out after ${this.timeoutMs} ms allocating ids; nothing was written`, 'rolled-back')
    }).catch((error: unknown) => {
      // Taking ids writes nothing a flush could lose: whatever failed here, nothing was committed.
      throw error instanceof FlushwaveError || (isServerError(error) && !endsSession(error)) ? error : lost(error, 'rolled-back', undefined)
    })) as unknown as unknown[][]
    return { ids: readNextIds(requests, withoutLeadingHoles(rows)), roundTrips: readRoundTrips(query!) }
  }

  /**
   * Reserves every connection of the pool at once (opening them) and sends every shape on each as
   * one pipeline, new shapes without a describe wait (inline-prepare.ts): about one round trip per
   * connection, all connections at once. `ids` rides along on the first connection's pipeline.
   */
  async warmUp(statements: readonly Statement[], ids: readonly IdRequest[] = []): Promise<WarmUp> {
    if (this.options.inTransaction) throw new FlushwaveError('warm up outside of transactions')
    const started = performance.now()
    const options = (this.sql as { options?: { max?: number; prepare?: boolean } }).options
    // With `prepare: false` (poolers) nothing stays prepared: only open the connections (and take ids).
    const prepares = options?.prepare !== false
    const idStatement = ids.length > 0 ? renderNextIds(ids) : undefined
    const connections = await Promise.all(Array.from({ length: options?.max ?? 10 }, () => Reservation.open(this.sql, Infinity)))
    let idRows: unknown[][] | undefined
    try {
      const counts = await Promise.all(
        connections.map(async (conn, c) => {
          const own = c === 0 ? idStatement : undefined
          const shapes = prepares ? [...statements.filter((s) => s.text !== own?.text), ...this.capture.shapes()] : []
          const sends: (() => PendingQuery<Row[]>)[] = [
            // A query without parameters is never held back, so it hands over the connection.
            () => conn.sql.unsafe('select 1', [], conn.tracking as object),
            ...shapes.map((s) => () => this.run(conn.sql, s)),
            ...(own ? [() => this.run(conn.sql, own).values() as unknown as PendingQuery<Row[]>] : []),
          ]
          let prepared = 0
          let roundTrips = 0
          // Past max_pipeline postgres.js sends the rest one per round trip: send waves of that size.
          for (let i = 0; i < sends.length; i += this.maxPipeline) {
            const queries = sends.slice(i, i + this.maxPipeline).map((send) => send())
            const settled = await Promise.allSettled(queries)
            const failed = settled.find((r) => r.status === 'rejected')
            if (failed) throw (failed as PromiseRejectedResult).reason
            roundTrips += pipelineRoundTrips(queries)
            if (prepares) prepared += queries.filter(wasDescribed).length
            if (own && i + this.maxPipeline >= sends.length) idRows = withoutLeadingHoles((settled[settled.length - 1] as PromiseFulfilledResult<unknown>).value as unknown[][])
          }
          return { prepared, roundTrips }
        }),
      )
      return {
        connections: connections.length,
        prepared: counts.reduce((n, c) => n + c.prepared, 0),
        prepares,
        // The connections warm in parallel: the slowest one sets the wait.
        roundTrips: Math.max(0, ...counts.map((c) => c.roundTrips)),
        durationMs: performance.now() - started,
        ...(idRows ? { ids: { ids: readNextIds(ids, idRows), roundTrips: 0 } } : {}),
      }
    } finally {
      for (const conn of connections) conn.release()
    }
  }

  transaction<T>(fn: (executor: Executor) => Promise<T>): Promise<T> {
    if (this.options.inTransaction) throw new FlushwaveError('transactions do not nest: already inside em.transaction()')
    return (this.sql.begin((tx) => fn(new PostgresJsExecutor(tx as unknown as Sql, { ...this.options, inTransaction: true }))) as Promise<T>).catch(
      (error: unknown) => {
        // A failure at COMMIT (a serialization conflict, a deferred constraint) is the server's too.
        throw isServerError(error) ? flushError(error, undefined) : error
      },
    )
  }

  /**
   * BEGIN, the transaction id, the statements and COMMIT in one pipeline. If the connection fails
   * or the flush runs past its deadline, the connection is cut and the server is asked on a fresh
   * one what became of the transaction (see outcome.ts).
   */
  async write(waves: readonly (readonly WriteStatement[])[], ids?: CarriedIds): Promise<WriteOutcome> {
    if (this.options.inTransaction) return this.writeInTransaction(waves)
    const deadline = performance.now() + this.timeoutMs
    const idStatement = ids && ids.requests.length > 0 ? renderNextIds(ids.requests) : undefined
    const batches = this.batches(waves, idStatement ? 2 : 1)
    let reservation: Reservation
    try {
      if (this.reconnecting) {
        // postgres.js 3.4.9 loses a connection for good when a reserve() fails to connect (the
        // rejected request stays queued and later swallows a connection). After a connection
        // failure, let plain queries reconnect the pool first: they leave nothing queued. One per
        // connection of the pool, at once, so that each closed connection reconnects through one:
        // a connection whose session ended with a FATAL error (a terminated backend, PgBouncer's
        // KILL) hands that error to the first request of its next session, and a reservation
        // taking it would lose the connection (one of two, after a KILL through PgBouncer). This
        // opens every connection of the pool, once per connection failure.
        const connections = (this.sql as { options?: { max?: number } }).options?.max ?? 1
        const reconnect = () => afterStaleError(() => this.sql.unsafe('select 1'))
        await withDeadline(Promise.all(Array.from({ length: connections }, reconnect)), deadline, () => new ReserveTimeout())
        this.reconnecting = false
      }
      reservation = await Reservation.open(this.sql, deadline)
    } catch (error) {
      if (!(error instanceof ReserveTimeout)) {
        this.reconnecting = true
        throw lost(error, 'rolled-back', undefined)
      }
      throw new FlushTimeoutError(`flush timed out after ${this.timeoutMs} ms waiting for a free connection; nothing was sent`, 'rolled-back')
    }
    const conn = reservation.sql
    let ended = false
    let commitSent = false
    let timedOut = false
    const captured = this.capture.next()
    const flight: { xid?: string; pid?: number; begin?: PendingQuery<Row[]> } = {}
    let roundTrips = 0
    let coldStatements = 0
    const rowCounts: number[][] = waves.map(() => [])
    const returned = new Map<Op, unknown[][]>()
    const timer = setTimeout(() => {
      timedOut = true
      reservation.terminate() // the pipeline below stops waiting at once
    }, until(deadline))
    try {
      for (const [index, batch] of batches.entries()) {
        const first = index === 0
        const last = index === batches.length - 1
        const queries: PendingQuery<Row[]>[] = []
        const begin = first ? conn.unsafe<Row[]>('begin', [], reservation.tracking as object) : undefined
        const capture = first ? this.run(conn, captured.statement) : undefined
        if (begin && capture) queries.push(begin, capture)
        for (const s of batch.statements) {
          this.emit('write', s)
          queries.push(this.run(conn, s))
        }
        if (last) queries.push(conn.unsafe('commit'))
        commitSent = last
        const commitAt = queries.length - 1
        // After COMMIT, outside the transaction: its answer comes whatever became of the flush.
        const idQuery = last && idStatement ? (this.emit('allocate', idStatement), this.run(conn, idStatement).values()) : undefined
        if (idQuery) queries.push(idQuery as unknown as PendingQuery<Row[]>)
        const settling = settle(queries, reservation.gone) // sends them, in order
        if (begin && capture) this.specimens = [begin, capture]
        if (last) this.specimens = [...this.specimens, queries[commitAt]!]
        if (begin && capture) {
          flight.begin = begin
          capture.then((rows) => {
            const row = withoutLeadingHoles(rows)[0] as { xid: string; pid: number } | undefined
            if (row) Object.assign(flight, row)
          }, () => undefined)
        }
        const answers = await settling
        roundTrips += pipelineRoundTrips(queries)
        coldStatements += newShapes(queries)
        const settled = idQuery ? answers.slice(0, commitAt + 1) : answers
        if (idQuery) landCarriedIds(ids!, answers[commitAt + 1], (rows) => withoutLeadingHoles(rows as unknown as unknown[][]))
        const offset = first ? 2 : 0
        const failure = timedOut
          ? new Error('flush timed out')
          : ((first && settled[1]?.status === 'rejected' && this.capture.missingTable(settled[1].reason)) || firstFailure(settled, offset, batch.statements))
        if (failure !== undefined) {
          // A pipelined COMMIT after a failure comes back as ROLLBACK; without one, end it here.
          ended = last && settled[settled.length - 1]?.status === 'fulfilled'
          throw failure
        }
        for (let i = 0; i < batch.statements.length; i++) {
          const s = batch.statements[i]!
          const result = (settled[offset + i] as unknown as PromiseFulfilledResult<unknown[][] & { count: number }>).value
          rowCounts[batch.wave]!.push(result.count)
          if (returnsRows(s.op)) returned.set(s.op, withoutLeadingHoles(result))
        }
        if (last) {
          ended = true
          const tag = (settled[settled.length - 1] as unknown as PromiseFulfilledResult<{ command: string }>).value.command
          if (tag !== 'COMMIT') throw new FlushError(`COMMIT answered ${tag}; nothing was committed`, unknownFailure)
        }
      }
      resetBackoff(this.sql)
      return { rowCounts, returned, roundTrips, coldStatements }
    } catch (error) {
      if (error instanceof FlushwaveError) {
        if (!ended && reservation.usable) await conn.unsafe('rollback').catch(() => undefined)
        throw error
      }
      // The connection failed or ran out of time: cut it, then ask the server on another one.
      clearTimeout(timer)
      this.reconnecting = true
      reservation.terminate()
      // As in node-postgres.ts: the key data's process id only without the ledger (behind a pooler
      // it is not the flush's server process).
      const pid = flight.pid ?? (!captured.ledger && flight.begin ? reservation.pidOf(flight.begin) : undefined)
      const outcome = await resolveOutcome(
        () => this.openProbe(),
        { xid: flight.xid, pid, ledger: captured.ledger },
        performance.now() + OUTCOME_BUDGET_MS,
        renderEvidence(waves),
      )
      if (outcome === 'committed' && commitSent) {
        return { rowCounts: [], returned: new Map(), roundTrips, coldStatements, recovered: { transactionId: flight.xid, cause: error } }
      }
      // Without COMMIT nothing can have committed, whatever the server could be asked.
      throw lost(error, commitSent && outcome === 'unknown' ? 'unknown' : 'rolled-back', flight.xid, timedOut && this.timeoutMs)
    } finally {
      clearTimeout(timer)
      reservation.release()
    }
  }

  /** A one-connection client with the pool's settings, for outcome probes; closing it destroys the connection. */
  private openProbe(): ReturnType<OpenProbe> {
    const options = (this.sql as unknown as { options: object }).options
    // Loaded here, not at the top: applications on knex alone need not install postgres.js.
    // Its own `shared` state: failed probes must not lengthen the pool's reconnect backoff.
    const own = { ...options, max: 1, idle_timeout: 0, fetch_types: false, shared: { retries: 0, typeArrayMap: {} } }
    const client = import('postgres').then(({ default: postgres }) => postgres(own as never) as Sql)
    return {
      probe: async (text, params) => withoutLeadingHoles((await (await client).unsafe(text, params as string[]).values()) as unknown as unknown[][]),
      close: async () => (await client).end({ timeout: 0 }),
    }
  }

  /**
   * Inside a user's transaction: the same pipelines without BEGIN and COMMIT. A failure aborts the
   * transaction (PostgreSQL answers later statements with 25P02); `transaction()` then rolls back.
   */
  private async writeInTransaction(waves: readonly (readonly WriteStatement[])[]): Promise<WriteOutcome> {
    let roundTrips = 0
    let coldStatements = 0
    const rowCounts: number[][] = []
    const returned = new Map<Op, unknown[][]>()
    for (const batch of this.batches(waves, 0)) {
      const queries = batch.statements.map((s) => (this.emit('write', s), this.run(this.sql, s)))
      const settled = await Promise.allSettled(queries)
      roundTrips += pipelineRoundTrips(queries)
      coldStatements += newShapes(queries)
      const failure = firstFailure(settled, 0, batch.statements)
      if (failure !== undefined) throw failure instanceof FlushwaveError ? failure : lost(failure, 'rolled-back', undefined)
      rowCounts[batch.wave] ??= []
      settled.forEach((r, i) => {
        const result = (r as unknown as PromiseFulfilledResult<unknown[][] & { count: number }>).value
        rowCounts[batch.wave]!.push(result.count)
        if (returnsRows(batch.statements[i]!.op)) returned.set(batch.statements[i]!.op, withoutLeadingHoles(result))
      })
    }
    return { rowCounts, returned, roundTrips, coldStatements }
  }

  /**
   * Splits waves into pipelines of at most max_pipeline queries: the first also carries BEGIN and
   * the transaction id, the last COMMIT and what follows it (`tail` queries in all). A wave never
   * shares a pipeline with the next one.
   */
  private batches(waves: readonly (readonly WriteStatement[])[], tail: number): { wave: number; statements: readonly WriteStatement[] }[] {
    const out: { wave: number; statements: readonly WriteStatement[] }[] = []
    let left = waves.reduce((n, wave) => n + wave.length, 0)
    waves.forEach((statements, wave) => {
      for (let i = 0; i < statements.length; ) {
        const room = this.maxPipeline - (out.length === 0 ? 2 : 0)
        const inWave = statements.length - i
        // The pipeline that takes the last statement needs room for COMMIT (and the rest of the tail) too.
        // When they do not fit, this pipeline leaves it one statement (none, when BEGIN fills it).
        const take = inWave === left && inWave + tail > room && inWave <= room ? inWave - 1 : Math.min(inWave, room)
        out.push({ wave, statements: statements.slice(i, i + take) })
        i += take
        left -= take
      }
    })
    return out
  }

  private run(sql: Sql | ReservedSql, statement: Statement): PendingQuery<Row[]> {
    const params: unknown[] = []
    for (const p of statement.params) params.push(sql.typed(p as never, UNKNOWN_OID))
    // unsafe() does not prepare unless asked; a global `prepare: false` (PgBouncer) still wins.
    // Every parameter is typed here, so a new shape needs no describe wait (inline-prepare.ts).
    const query = prepareInline(sql.unsafe<Row[]>(statement.text, params as never[], { prepare: true }))
    // Rows a flush reads back (counters, upserted rows, ids a cascade reached) come as arrays, in select-list order.
    return 'op' in statement && returnsRows((statement as WriteStatement).op) ? (query.values() as unknown as PendingQuery<Row[]>) : query
  }

  private emit(phase: QueryEvent['phase'], statement: Statement): void {
    this.options.onQuery?.({ phase, text: statement.text, params: statement.params })
  }
}

/**
 * Every query's result, or, once the connection is gone, what had settled by then (undefined for
 * the rest). postgres.js rejects the queries it sent when a connection closes, but not those it
 * held back behind a describe: waiting for all of them could take forever.
 */
async function settle(queries: readonly PendingQuery<Row[]>[], gone: Promise<void>): Promise<(PromiseSettledResult<Row[]> | undefined)[]> {
  const results: (PromiseSettledResult<Row[]> | undefined)[] = queries.map(() => undefined)
  const all = Promise.all(
    queries.map((query, i) =>
      query.then(
        (value) => void (results[i] = { status: 'fulfilled', value }),
        (reason: unknown) => void (results[i] = { status: 'rejected', reason }),
      ),
    ),
  )
  // After the close, give the rejections postgres.js is delivering a turn of the event loop to land.
  await Promise.race([all, gone.then(() => new Promise((resolve) => setImmediate(resolve)))])
  return results
}

/**
 * postgres.js lengthens the wait before reconnecting with every connection that closes with an error
 * (a counter shared by the pool), and sets it back only when a query, not a reservation, opens a
 * connection (postgres.js 3.4.9; flushes reconnect through reservations). After a dozen cut
 * connections, reconnects waited seconds in the fault soak (docs/reliability.md). A flush that just
 * committed proves the server reachable: the next reconnect needs no wait.
 */
function resetBackoff(sql: Sql): void {
  const shared = (sql as unknown as { options?: { shared?: { retries?: number } } }).options?.shared
  if (shared?.retries) shared.retries = 0
}
