import { FlushTimeoutError, FlushwaveError } from '../../errors.js'
import type { Ledger } from '../../sql/render-ledger.js'
import { readNextIds, renderNextIds, type IdBlocks, type IdRequest } from '../../sql/render-ids.js'
import type { Statement, WriteStatement } from '../../sql/statement.js'
import type { CarriedIds, Executor, QueryEvent, WarmUp, WriteOptions, WriteOutcome } from '../executor.js'
import type { LateQuery, Port, ServerError } from '../port.js'
import { mergeSession, opening, renderSettings, type SessionOptions, type TransactionOptions } from '../../sql/render-session.js'
import { CURRENT_LSN } from '../../sql/render-replica.js'
import { Capture } from './capture.js'
import { lost } from './failures.js'
import { endsSession, flushError, isServerError } from './pg-error.js'
import { refusal, SettingsRefused } from './opening.js'
import { AUTO_COPY_ROWS, type CopyPolicy } from '../../plan/copy-policy.js'
import { PipelinedReads } from './pipelined-reads.js'
import { RoundTripClock } from './round-trip-clock.js'
import { read } from './reads.js'
import { DEFAULT_FLUSH_TIMEOUT_MS, withDeadline } from './timeout.js'
import { streamRows } from './stream.js'
import { warmUpPort } from './warm-up.js'
import { writeFlush, writeInTransaction, type WriteContext } from './write.js'

export interface ExecutorOptions {
  readonly onQuery?: (event: QueryEvent) => void
  /** Longest a flush may take, from taking a connection to COMMIT (default 30 s). */
  readonly timeoutMs?: number
  /** The outcome ledger each flush writes its token to (see sql/render-ledger.ts); none: undefined. */
  readonly ledger?: Ledger | undefined
  /** Settings every transaction of this executor applies (an EntityManager's, `withSession`). */
  readonly session?: SessionOptions | undefined
  /** Ask each flush's WAL position after its COMMIT (`WriteOutcome.lsn`): for read-your-writes on replicas. */
  readonly captureLsn?: boolean
}

/**
 * The one Executor: the flush protocol (write.ts), reads, id allocation, warm-ups and transactions,
 * over any driver's Port. Each executor Flushwave ships is this class over its driver's port.
 */
export class PipelineExecutor implements Executor {
  private readonly context: WriteContext
  /** Reads outside a transaction of the application's, when the session has settings. */
  private readonly sessionReads: PipelinedReads | undefined
  /** The quickest round trip lately (the COPY cost model's), shared with the executors made from this one. */
  private readonly roundTrip: RoundTripClock
  /** Whether COPY costs this port a round trip: only then are round trips timed. */
  private readonly timed: boolean

  constructor(
    readonly port: Port,
    private readonly options: ExecutorOptions = {},
    capture?: Capture,
    roundTrip?: RoundTripClock,
  ) {
    this.roundTrip = roundTrip ?? new RoundTripClock()
    this.timed = port.copy?.roundTrip === true
    const timeoutMs = options.timeoutMs ?? DEFAULT_FLUSH_TIMEOUT_MS
    const settings = options.session && renderSettings(options.session)
    const lsn = options.captureLsn ? CURRENT_LSN : undefined
    this.context = { port, capture: capture ?? new Capture(options.ledger, timeoutMs), timeoutMs, onQuery: options.onQuery, settings, lsn }
    this.sessionReads = settings && !port.inTransaction ? new PipelinedReads(port, { settings }, timeoutMs) : undefined
  }

  /** The same executor (port, ledger, onQuery) with `session` applied in every transaction it opens. */
  withSession(session: SessionOptions): PipelineExecutor {
    return new PipelineExecutor(this.port, { ...this.options, session }, this.context.capture, this.roundTrip)
  }

  /** The port's COPY as the planner weighs it: the application's threshold, or the cost model with this executor's round trip. */
  get copyPolicy(): CopyPolicy | undefined {
    const copy = this.port.copy
    if (copy === undefined) return undefined
    if (copy.rows !== undefined) return { minRows: copy.rows, auto: false, extraMs: 0 }
    return { minRows: AUTO_COPY_ROWS, auto: true, extraMs: copy.roundTrip ? this.roundTrip.ms : 0 }
  }

  async read(statement: Statement): Promise<unknown[][]> {
    this.emit('read', statement)
    const reads = this.sessionReads
    if (reads !== undefined) return read(() => reads.read(statement), { retry: true, timeoutMs: this.context.timeoutMs })
    const started = this.timed ? performance.now() : 0
    const result = await read((late) => this.port.query(statement, late), { retry: !this.port.inTransaction, timeoutMs: this.context.timeoutMs })
    if (this.timed && result.roundTrips === 1) this.roundTrip.note(performance.now() - started)
    return result.rows
  }

  stream(statement: Statement, batchSize: number): AsyncIterableIterator<unknown[][]> {
    this.emit('read', statement)
    return streamRows(this.port, statement, batchSize, this.options.session && opening(this.options.session))
  }

  async nextIds(requests: readonly IdRequest[]): Promise<IdBlocks> {
    const statement = renderNextIds(requests)
    this.emit('allocate', statement)
    const timeoutMs = this.context.timeoutMs
    const timedOut = () => new FlushTimeoutError(`flush timed out after ${timeoutMs} ms allocating ids; nothing was written`, 'rolled-back')
    const late: LateQuery = {}
    const stopped = () => (late.stop?.(), timedOut())
    const result = await withDeadline(this.port.query(statement, late), performance.now() + timeoutMs, stopped).catch((error: unknown) => {
      // Taking ids writes nothing a flush could lose: whatever failed here, nothing was committed.
      // The server's refusal is typed as a flush's is (25006 on a server that is a standby now).
      if (error instanceof FlushwaveError) throw error
      if (isServerError(error) && !endsSession(error)) throw flushError((this.port.serverError ?? same)(error), undefined, error)
      throw lost(error, 'rolled-back', undefined)
    })
    return { ids: readNextIds(requests, result.rows), roundTrips: result.roundTrips }
  }

  warmUp(statements: readonly Statement[], ids: readonly IdRequest[] = []): Promise<WarmUp> {
    if (this.port.inTransaction) throw new FlushwaveError('warm up outside of transactions')
    return warmUpPort(this.port, this.context.capture, statements, ids)
  }

  transaction<T>(fn: (executor: Executor) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    if (this.port.inTransaction) throw new FlushwaveError('transactions do not nest: already inside em.transaction()')
    const start = opening(mergeSession(this.options.session, options))
    const inside = (port: Port) => fn(new PipelineExecutor(port, this.options, this.context.capture, this.roundTrip))
    const normalize = this.port.serverError ?? ((e: ServerError) => e)
    return this.port.transaction(inside, start.modes === '' && start.settings === undefined ? undefined : start).catch((error: unknown) => {
      // The settings after BEGIN were refused (a role that does not exist): COMMIT was never sent.
      if (error instanceof SettingsRefused) throw refusal(error, normalize)
      // A failure at COMMIT (a serialization conflict, a deferred constraint) is the server's too.
      if (!isServerError(error)) throw error
      // The session ended instead of answering: whether COMMIT got through cannot be told here.
      if (endsSession(error)) throw lost(error, 'unknown', undefined)
      throw flushError(normalize(error), undefined, error)
    })
  }

  readonly recordsKeys = true

  write(waves: readonly (readonly WriteStatement[])[], ids?: CarriedIds, options?: WriteOptions): Promise<WriteOutcome> {
    if (options?.record !== undefined && this.port.inTransaction) throw new FlushwaveError('an idempotent unit of work cannot record its key inside a transaction of its own')
    if (this.port.inTransaction) return writeInTransaction(this.context, waves)
    if (!this.timed) return writeFlush(this.context, waves, ids, options?.record)
    const started = performance.now()
    return writeFlush(this.context, waves, ids, options?.record).then((outcome) => {
      if (outcome.roundTrips === 1) this.roundTrip.note(performance.now() - started)
      return outcome
    })
  }

  private emit(phase: QueryEvent['phase'], statement: Statement): void {
    this.options.onQuery?.({ phase, text: statement.text, params: statement.params })
  }
}

const same = (error: ServerError): ServerError => error
