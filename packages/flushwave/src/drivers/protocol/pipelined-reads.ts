import type { Statement } from '../../sql/statement.js'
import type { QueryEvent } from '../executor.js'
import { renderReplayed, laterLsn } from '../../sql/render-replica.js'
import { BEGIN, COMMIT, ReserveTimeout, type Answer, type Connection, type Port, type ServerError } from '../port.js'
import { IN_FAILED_TRANSACTION, isServerError, protocolRefusal, settingsError } from './pg-error.js'
import { isConnectionFailure } from './reads.js'

interface PendingRead {
  readonly statement: Statement
  /** The WAL position the server must have replayed first (a replica read after a flush). */
  readonly after: string | undefined
  resolve(rows: unknown[][]): void
  reject(error: unknown): void
}

/** Most reads one pipeline carries, as for node-postgres's batches (pg-read-batch.ts). */
const MAX_BATCH = 100

export interface PipelinedReadsOptions {
  /**
   * An EntityManager's settings (a tenant, a role): transaction-local, so the reads run in a
   * transaction of their own, `BEGIN; set_config(…); the reads; COMMIT`.
   */
  readonly settings?: Statement | undefined
  /**
   * Where reads go whose server had not replayed their position (a lagging replica): the primary.
   * Without it no read may ask for a position.
   */
  readonly stale?: (statement: Statement) => Promise<unknown[][]>
  /** How long the check may wait on the server for the position to be replayed (ms; 0 or unset: not at all). */
  readonly waitMs?: number
  /** Told of each statement sent for the reads' sake (the replay check): `onQuery`. */
  readonly onQuery?: ((event: QueryEvent) => void) | undefined
}

/**
 * Reads sent as one pipeline on one connection: reads that arrive while its connection is being
 * taken join it, so a `Promise.all` of reads is still one round trip. With settings they run in a
 * transaction of their own; with a WAL position (`read(statement, after)`) they go behind a check
 * that the server replayed it, on the same connection, so that they see that commit, or else are
 * sent to `stale` (the primary). A read that fails fails alone: reads behind it in a transaction
 * (answered 25P02) are sent again in the next batch.
 */
export class PipelinedReads {
  private open: PendingRead[] | undefined

  constructor(
    private readonly port: Port,
    private readonly options: PipelinedReadsOptions,
    private readonly timeoutMs: number,
  ) {}

  read(statement: Statement, after?: string): Promise<unknown[][]> {
    return new Promise((resolve, reject) => {
      if (this.open === undefined || this.open.length >= MAX_BATCH) void this.start((this.open = []))
      this.open.push({ statement, after, resolve, reject })
    })
  }

  private async start(batch: PendingRead[]): Promise<void> {
    let connection: Connection
    try {
      connection = await this.port.acquire(performance.now() + this.timeoutMs)
    } catch (error) {
      if (this.open === batch) this.open = undefined
      const reason = error instanceof ReserveTimeout ? new Error(`no connection became free within ${this.timeoutMs} ms for a read`) : error
      for (const read of batch) read.reject(reason)
      return
    }
    if (this.open === batch) this.open = undefined
    const { settings } = this.options
    let after: string | undefined
    for (const read of batch) after = laterLsn(after, read.after)
    const head: Statement[] = settings === undefined ? [] : [BEGIN, settings]
    if (after !== undefined) {
      const check = renderReplayed(after, this.options.waitMs ?? 0)
      this.options.onQuery?.({ phase: 'read', text: check.text, params: check.params })
      head.push(check)
    }
    let broken = false
    try {
      // Arrays in select-list order unless the read asked for objects (em.query).
      const reads = batch.map((r): Statement => ({ ...r.statement, returnsRows: r.statement.objects !== true }))
      const { settled } = await connection.send(settings === undefined ? [...head, ...reads] : [...head, ...reads, COMMIT])
      broken = settled.some((s) => s === undefined || (s.status === 'rejected' && isConnectionFailure(s.reason)))
      const applied = settings === undefined ? undefined : settled[1]
      const refused = applied?.status === 'rejected' ? protocolRefusal(applied.reason, this.port.serverError ?? same, settingsError) : undefined
      if (refused !== undefined) {
        for (const read of batch) read.reject(refused)
        return
      }
      if (after !== undefined && !replayed(settled[head.length - 1])) {
        // Behind the position, or the check failed: the answers may be stale, so the reads go to the primary.
        for (const read of batch) this.options.stale!(read.statement).then(read.resolve, read.reject)
        return
      }
      batch.forEach((read, i) => this.answer(read, settled[head.length + i]))
    } catch (error) {
      broken = true
      for (const read of batch) read.reject(error)
    } finally {
      connection.release(broken)
    }
  }

  private answer(read: PendingRead, answer: PromiseSettledResult<Answer> | undefined): void {
    if (answer === undefined) return read.reject(new Error('the connection closed before the read was answered'))
    if (answer.status === 'fulfilled') return read.resolve(answer.value.rows as unknown[][])
    const error: unknown = answer.reason
    // Aborted by a read before it in the same transaction: it asked nothing wrong itself.
    if (isServerError(error) && error.code === IN_FAILED_TRANSACTION) return void this.read(read.statement, read.after).then(read.resolve, read.reject)
    read.reject(error)
  }
}

/** The check's answer said the position was replayed. */
function replayed(answer: PromiseSettledResult<Answer> | undefined): boolean {
  return answer?.status === 'fulfilled' && (answer.value.rows[0] as unknown[] | undefined)?.[0] === true
}

const same = (error: ServerError): ServerError => error
