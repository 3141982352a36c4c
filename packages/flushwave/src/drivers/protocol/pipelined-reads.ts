import type { Statement } from '../../sql/statement.js'
import { BEGIN, COMMIT, ReserveTimeout, type Answer, type Connection, type Port, type ServerError } from '../port.js'
import { IN_FAILED_TRANSACTION, isServerError, protocolRefusal, settingsError } from './pg-error.js'
import { isConnectionFailure } from './reads.js'

interface PendingRead {
  readonly statement: Statement
  resolve(rows: unknown[][]): void
  reject(error: unknown): void
}

/** Most reads one transaction carries, as for node-postgres's batches (pg-read-batch.ts). */
const MAX_BATCH = 100

/**
 * Reads of an EntityManager with settings (a tenant, a role), outside any transaction of the
 * application's: the settings are transaction-local, so the reads run in a transaction of their
 * own, `BEGIN; set_config(…); the reads; COMMIT`, sent as one pipeline on one connection. Reads
 * that arrive while its connection is being taken join it, so a `Promise.all` of reads is still
 * one round trip. A read that fails fails alone: the reads behind it in the pipeline (answered
 * 25P02, the transaction being aborted) are sent again in the next batch.
 */
export class SessionReads {
  private open: PendingRead[] | undefined

  constructor(
    private readonly port: Port,
    private readonly settings: Statement,
    private readonly timeoutMs: number,
  ) {}

  read(statement: Statement): Promise<unknown[][]> {
    return new Promise((resolve, reject) => {
      if (this.open === undefined || this.open.length >= MAX_BATCH) void this.start((this.open = []))
      this.open.push({ statement, resolve, reject })
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
    let broken = false
    try {
      // Arrays in select-list order unless the read asked for objects (em.query).
      const reads = batch.map((r): Statement => ({ ...r.statement, returnsRows: r.statement.objects !== true }))
      const { settled } = await connection.send([BEGIN, this.settings, ...reads, COMMIT])
      broken = settled.some((s) => s === undefined || (s.status === 'rejected' && isConnectionFailure(s.reason)))
      const applied = settled[1]
      const refused = applied?.status === 'rejected' ? protocolRefusal(applied.reason, this.port.serverError ?? same, settingsError) : undefined
      if (refused !== undefined) {
        for (const read of batch) read.reject(refused)
        return
      }
      batch.forEach((read, i) => this.answer(read, settled[2 + i]))
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
    if (isServerError(error) && error.code === IN_FAILED_TRANSACTION) return void this.read(read.statement).then(read.resolve, read.reject)
    read.reject(error)
  }
}

const same = (error: ServerError): ServerError => error
