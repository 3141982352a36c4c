import { FlushError, FlushTimeoutError, FlushwaveError } from '../../errors.js'
import type { Op } from '../../plan/ops.js'
import { renderEvidence } from '../../sql/render-evidence.js'
import { renderNextIds, type IdBlocks } from '../../sql/render-ids.js'
import type { Statement, WriteStatement } from '../../sql/statement.js'
import type { CarriedIds, QueryEvent, WriteOutcome } from '../executor.js'
import { BEGIN, COMMIT, ROLLBACK, ReserveTimeout, type Answer, type Connection, type Port, type ServerError } from '../port.js'
import { batches } from './batches.js'
import type { Capture } from './capture.js'
import { landCarriedIds } from './carried-ids.js'
import { firstFailure, lost, unknownFailure } from './failures.js'
import { OUTCOME_BUDGET_MS, resolveOutcome } from './outcome.js'
import { protocolRefusal, recordError, settingsError } from './pg-error.js'
import { until } from './timeout.js'

/** What the flush protocol needs besides the port: the executor's settings and its onQuery. */
export interface WriteContext {
  readonly port: Port
  readonly capture: Capture
  readonly timeoutMs: number
  readonly onQuery: ((event: QueryEvent) => void) | undefined
  /** The EntityManager's settings (render-session.ts), sent right after the capture; none: undefined. */
  readonly settings?: Statement | undefined
  /** With replicas: the WAL position to ask for after COMMIT (CURRENT_LSN), for read-your-writes. */
  readonly lsn?: Statement | undefined
}

const sameError = (error: ServerError): ServerError => error
const NO_EXTRA: Statement[] = []

/**
 * One flush: BEGIN, the outcome capture, every statement and COMMIT in one pipeline (more only when
 * the driver bounds a pipeline), then the carried ids after COMMIT. Resolves only once it committed;
 * throws a FlushError when the server refused a statement (the pipelined COMMIT then came back as
 * ROLLBACK: atomic without a wait). When the connection fails or the deadline passes, the connection
 * is cut and the server is asked on a fresh one what became of the transaction (outcome.ts): a flush
 * that committed resolves with `recovered`; otherwise a ConnectionLostError (or FlushTimeoutError)
 * says whether it rolled back or, the server being unreachable, its outcome is unknown.
 */
export async function writeFlush(ctx: WriteContext, waves: readonly (readonly WriteStatement[])[], ids?: CarriedIds, record?: Statement): Promise<WriteOutcome> {
  let landed = false
  const carried = ids && { requests: ids.requests, landed: (blocks: IdBlocks) => ((landed = true), ids.landed(blocks)) }
  try {
    return await attempt(ctx, waves, carried, record)
  } catch (error) {
    if (!(error instanceof StatementsLost)) throw error
    // The connection had lost its prepared statements (DISCARD ALL, DEALLOCATE) and the flush rolled
    // back on the first of them: once more, on a new connection, where the driver prepares afresh.
    const again = await attempt(ctx, waves, landed ? undefined : carried, record)
    return { ...again, roundTrips: again.roundTrips + error.roundTrips, coldStatements: again.coldStatements + error.coldStatements }
  }
}

/** A flush that rolled back because its connection no longer had a prepared statement (26000). */
class StatementsLost extends Error {
  constructor(
    readonly roundTrips: number,
    readonly coldStatements: number,
  ) {
    super('the connection lost its prepared statements')
  }
}

/** 26000: a prepared statement the connection's driver sent by name no longer exists on the server. */
const lostStatement = (answer: PromiseSettledResult<unknown> | undefined): boolean => answer?.status === 'rejected' && (answer.reason as { code?: unknown } | null)?.code === '26000'

async function attempt(ctx: WriteContext, waves: readonly (readonly WriteStatement[])[], ids: CarriedIds | undefined, record: Statement | undefined): Promise<WriteOutcome> {
  const { port, capture, timeoutMs } = ctx
  const deadline = performance.now() + timeoutMs
  const idStatement = ids && ids.requests.length > 0 ? renderNextIds(ids.requests) : undefined
  const normalize = port.serverError ?? sameError
  // After BEGIN and the capture: the idempotency key's record (as the connection's own user, like
  // the ledger's row), then the EntityManager's settings.
  // Indexes are in the first pipeline: BEGIN 0, the capture 1, then these. Most flushes have none.
  const extra: Statement[] = record === undefined && ctx.settings === undefined ? NO_EXTRA : []
  const recordAt = record === undefined ? -1 : 1 + extra.push(record)
  const settingsAt = ctx.settings === undefined ? -1 : 1 + extra.push(ctx.settings)
  const head = 2 + extra.length
  const pipelines = batches(waves, port.maxPipeline, head, 1 + (idStatement ? 1 : 0) + (ctx.lsn ? 1 : 0))
  let connection: Connection
  try {
    connection = await port.acquire(deadline)
  } catch (error) {
    if (error instanceof ReserveTimeout) {
      throw new FlushTimeoutError(`flush timed out after ${timeoutMs} ms waiting for a free connection; nothing was sent`, 'rolled-back')
    }
    throw error instanceof FlushwaveError ? error : lost(error, 'rolled-back', undefined)
  }
  const captured = capture.next()
  const flight: { xid?: string; pid?: number } = {}
  let timedOut = false
  let broken = false
  let commitSent = false
  let ended = false
  let statementLost = false
  let roundTrips = 0
  let coldStatements = 0
  let lsn: string | undefined
  const rowCounts: number[][] = waves.map(() => [])
  const returned = new Map<Op, unknown[][]>()
  const timer = setTimeout(() => {
    timedOut = true
    connection.cut() // every statement in flight fails at once
  }, until(deadline))
  try {
    for (let index = 0; index < pipelines.length; index++) {
      const batch = pipelines[index]!
      const first = index === 0
      const last = index === pipelines.length - 1
      const pipeline: Statement[] = first ? (extra === NO_EXTRA ? [BEGIN, captured.statement] : [BEGIN, captured.statement, ...extra]) : []
      for (const s of batch.statements) {
        ctx.onQuery?.({ phase: 'write', text: s.text, params: s.params })
        pipeline.push(s)
      }
      if (last) pipeline.push(COMMIT)
      commitSent = last
      const commitAt = pipeline.length - 1
      // After COMMIT, outside the transaction: the WAL position its commit reached (read-your-writes
      // on replicas), and the id pool's refill, whose answer comes whatever became of the flush.
      const lsnAt = last && ctx.lsn ? pipeline.push(ctx.lsn) - 1 : -1
      if (last && idStatement) {
        ctx.onQuery?.({ phase: 'allocate', text: idStatement.text, params: idStatement.params })
        pipeline.push(idStatement)
      }
      const sent = await connection.send(pipeline)
      roundTrips += sent.roundTrips
      coldStatements += sent.coldStatements
      const answers = sent.settled
      const captureAnswer = first ? answers[1] : undefined
      if (captureAnswer?.status === 'fulfilled') Object.assign(flight, captureAnswer.value.rows[0] as { xid: string; pid: number } | undefined)
      if (last && idStatement) landCarriedIds(ids!, answers[pipeline.length - 1], (answer: Answer) => answer.rows as unknown[][])
      const lsnAnswer = lsnAt >= 0 ? answers[lsnAt] : undefined
      if (lsnAnswer?.status === 'fulfilled') lsn = (lsnAnswer.value.rows[0] as unknown[] | undefined)?.[0] as string | undefined
      const settled = last && (idStatement || lsnAt >= 0) ? answers.slice(0, commitAt + 1) : answers
      const offset = first ? head : 0
      const recordAnswer = first && recordAt >= 0 ? answers[recordAt] : undefined
      const settingsAnswer = first && settingsAt >= 0 ? answers[settingsAt] : undefined
      const failure = timedOut
        ? new Error('flush timed out')
        : ((captureAnswer?.status === 'rejected' && capture.missingTable(captureAnswer.reason, normalize)) ||
          (recordAnswer?.status === 'rejected' && protocolRefusal(recordAnswer.reason, normalize, recordError)) ||
          (settingsAnswer?.status === 'rejected' && protocolRefusal(settingsAnswer.reason, normalize, settingsError)) ||
          firstFailure(settled, offset, batch.statements, normalize))
      if (failure !== undefined) {
        // A pipelined COMMIT after a failure comes back as ROLLBACK; without one, end it below.
        ended = last && settled[settled.length - 1]?.status === 'fulfilled'
        statementLost = answers.some(lostStatement)
        throw failure
      }
      collect(batch.wave, batch.statements, settled, offset, rowCounts, returned)
      if (last) {
        ended = true
        const tag = (settled[settled.length - 1] as PromiseFulfilledResult<Answer>).value.command
        if (tag !== 'COMMIT') throw new FlushError(`COMMIT answered ${tag}; nothing was committed`, unknownFailure)
      }
    }
    return lsn === undefined ? { rowCounts, returned, roundTrips, coldStatements } : { rowCounts, returned, roundTrips, coldStatements, lsn }
  } catch (error) {
    if (error instanceof FlushwaveError) {
      if (statementLost && (ended || !commitSent)) {
        // Rolled back (or never to commit: the cut ends it). Its driver still counts those
        // statements as prepared: this connection is not used again.
        broken = true
        connection.cut()
        throw new StatementsLost(roundTrips, coldStatements)
      }
      if (!ended && connection.usable) await connection.send([ROLLBACK]).catch(() => undefined)
      throw error
    }
    // The connection failed or ran out of time: cut it, then ask the server on another one.
    clearTimeout(timer)
    broken = true
    connection.cut()
    // The connection's own idea of its server process only without the ledger: behind a pooler it
    // is the pooler's, maybe another client's backend. With the ledger nothing needs it.
    const pid = flight.pid ?? (captured.ledger ? undefined : connection.pid())
    const outcome = await resolveOutcome(port.openProbe, { xid: flight.xid, pid, ledger: captured.ledger }, performance.now() + OUTCOME_BUDGET_MS, renderEvidence(waves))
    if (outcome === 'committed' && commitSent) {
      return { rowCounts: [], returned: new Map(), roundTrips, coldStatements, recovered: { transactionId: flight.xid, cause: error } }
    }
    // Without COMMIT nothing can have committed, whatever the server could be asked.
    throw lost(error, commitSent && outcome === 'unknown' ? 'unknown' : 'rolled-back', flight.xid, timedOut && timeoutMs)
  } finally {
    clearTimeout(timer)
    connection.release(broken)
  }
}

/**
 * Inside a transaction the application holds: the same pipelines without BEGIN and COMMIT. A
 * failure aborts the transaction (PostgreSQL answers later statements with 25P02); the
 * transaction's owner then rolls back.
 */
export async function writeInTransaction(ctx: WriteContext, waves: readonly (readonly WriteStatement[])[]): Promise<WriteOutcome> {
  const { port } = ctx
  const normalize = port.serverError ?? sameError
  const connection = await port.acquire(Infinity)
  let roundTrips = 0
  let coldStatements = 0
  const rowCounts: number[][] = waves.map(() => [])
  const returned = new Map<Op, unknown[][]>()
  try {
    for (const batch of batches(waves, port.maxPipeline, 0, 0)) {
      for (const s of batch.statements) ctx.onQuery?.({ phase: 'write', text: s.text, params: s.params })
      const sent = await connection.send(batch.statements)
      roundTrips += sent.roundTrips
      coldStatements += sent.coldStatements
      const failure = firstFailure(sent.settled, 0, batch.statements, normalize)
      if (failure !== undefined) throw failure instanceof FlushwaveError ? failure : lost(failure, 'rolled-back', undefined)
      collect(batch.wave, batch.statements, sent.settled, 0, rowCounts, returned)
    }
  } finally {
    connection.release(false)
  }
  return { rowCounts, returned, roundTrips, coldStatements }
}

/** Row counts of a pipeline's statements (from `offset` in its answers), and the rows of those that return them. */
function collect(
  wave: number,
  statements: readonly WriteStatement[],
  settled: readonly (PromiseSettledResult<Answer> | undefined)[],
  offset: number,
  rowCounts: number[][],
  returned: Map<Op, unknown[][]>,
): void {
  const counts = rowCounts[wave]!
  for (let i = 0; i < statements.length; i++) {
    const s = statements[i]!
    const answer = (settled[offset + i] as PromiseFulfilledResult<Answer>).value
    counts.push(answer.rowCount ?? 0)
    if (s.returnsRows) returned.set(s.op, answer.rows as unknown[][])
  }
}
