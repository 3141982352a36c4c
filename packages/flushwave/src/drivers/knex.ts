import type { Knex } from 'knex'
import { ConnectionLostError, FlushTimeoutError, FlushwaveError } from '../errors.js'
import { DEFAULT_FLUSH_TIMEOUT_MS, withDeadline } from './timeout.js'
import { readNextIds, renderNextIds, type IdRequest } from '../sql/render-ids.js'
import type { Statement, WriteStatement } from '../sql/statement.js'
import type { Executor, IdBlocks, QueryEvent, WarmUp, WriteOutcome } from './executor.js'
import { flushError, isServerError, type ServerError } from './pg-error.js'

export interface KnexOptions {
  readonly onQuery?: (event: QueryEvent) => void
  /** Set on the executor of `transaction()`: `knex` is then a transaction it does not own. */
  readonly inTransaction?: boolean
  /** Longest a flush may take (default 30 s): each statement gets what is left, and is cancelled past it. */
  readonly timeoutMs?: number
}

/**
 * Executes the same plans through knex (with node-postgres), for applications already on knex:
 * statement by statement inside a knex transaction, so a flush waits on BEGIN, one round trip per
 * statement, and COMMIT. The honest baseline for the pipelined executor, and the same semantics:
 * one transaction, the first real error, nothing committed on failure.
 */
export class KnexExecutor implements Executor {
  constructor(
    private readonly knex: Knex | Knex.Transaction,
    private readonly options: KnexOptions = {},
  ) {}

  async read(statement: Statement): Promise<unknown[][]> {
    this.emit('read', statement)
    return (await this.run(this.knex, statement, 'array')) as unknown[][]
  }

  async nextIds(requests: readonly IdRequest[]): Promise<IdBlocks> {
    const statement = renderNextIds(requests)
    this.emit('allocate', statement)
    const rows = (await this.run(this.knex, statement, 'array')) as unknown[][]
    return { ids: readNextIds(requests, rows), roundTrips: 1 }
  }

  async write(waves: readonly (readonly WriteStatement[])[]): Promise<WriteOutcome> {
    const timeoutMs = this.options.timeoutMs ?? DEFAULT_FLUSH_TIMEOUT_MS
    const deadline = performance.now() + timeoutMs
    const statements = waves.flat()
    const rowCounts: number[][] = waves.map(() => [])
    const send = async (trx: Knex | Knex.Transaction) => {
      for (const [w, wave] of waves.entries()) {
        for (const statement of wave) {
          this.emit('write', statement)
          try {
            const result = (await this.run(trx, statement, 'result', deadline)) as { rowCount: number | null }
            rowCounts[w]!.push(result.rowCount ?? 0)
          } catch (error) {
            const server = serverError(error)
            throw server ? flushError(server, statement.op, error) : error
          }
        }
      }
    }
    const inTransaction = this.options.inTransaction
    try {
      const sent = inTransaction ? send(this.knex) : (this.knex as Knex).transaction((trx) => send(trx))
      // A backstop for what the statement timeouts do not cover (BEGIN, COMMIT, a free connection).
      await withDeadline(sent, deadline + 1_000, () => new FlushTimeoutError(`flush timed out after ${timeoutMs} ms; the outcome is unknown`, 'unknown'))
    } catch (error) {
      if (error instanceof FlushwaveError) throw error
      if ((error as Error)?.name === 'KnexTimeoutError') {
        // A statement ran out of time before COMMIT: knex cancelled it and rolled the transaction back.
        throw new FlushTimeoutError(`flush timed out after ${timeoutMs} ms; nothing was committed`, 'rolled-back', { cause: error })
      }
      throw new ConnectionLostError(`connection lost during flush (${(error as Error)?.message ?? String(error)})`, 'unknown', { cause: error })
    }
    return { rowCounts, roundTrips: statements.length + (inTransaction ? 0 : 2), coldStatements: 0 }
  }

  transaction<T>(fn: (executor: Executor) => Promise<T>): Promise<T> {
    if (this.options.inTransaction) throw new FlushwaveError('transactions do not nest: already inside em.transaction()')
    return (this.knex as Knex).transaction((trx) => fn(new KnexExecutor(trx, { ...this.options, inTransaction: true }))).catch((error: unknown) => {
      const server = serverError(error)
      throw server ? flushError(server, undefined, error) : error
    })
  }

  /** node-postgres sends Parse, Bind and Execute together: a new shape costs no extra round trip. */
  async warmUp(): Promise<WarmUp> {
    return { connections: 0, prepared: 0, prepares: false, roundTrips: 0, durationMs: 0 }
  }

  /** knex binds `?`; Flushwave's statements number their parameters `$1…$n` in order. */
  private async run(knex: Knex | Knex.Transaction, statement: Statement, shape: 'array' | 'result', deadline?: number): Promise<unknown> {
    let n = 0
    const text = statement.text.replace(/\$(\d+)/g, (_, i: string) => {
      if (Number(i) !== ++n) throw new FlushwaveError(`statement parameters are not in order: ${statement.text}`)
      return '?'
    })
    const raw = knex.raw(text, statement.params as string[])
    // knex cancels the statement on the server (pg_cancel_backend) when it runs out of time.
    const query = deadline === undefined ? raw : raw.timeout(Math.max(1, Math.round(deadline - performance.now())), { cancel: true })
    // Rows as arrays, like postgres.js's .values(): select lists may repeat a column name.
    const result = (await (shape === 'array' ? query.options({ rowMode: 'array' }) : query)) as { rows: unknown[]; rowCount: number | null }
    return shape === 'result' ? result : result.rows
  }

  private emit(phase: QueryEvent['phase'], statement: Statement): void {
    this.options.onQuery?.({ phase, text: statement.text, params: statement.params })
  }
}

/** A node-postgres server error in postgres.js's shape (it names its fields `table` and `constraint`). */
function serverError(error: unknown): ServerError | undefined {
  if (!isServerError(error)) return undefined
  const e = error as ServerError & { table?: string; constraint?: string }
  return {
    code: e.code,
    message: e.message,
    ...(e.detail === undefined ? {} : { detail: e.detail }),
    ...(e.table === undefined ? {} : { table_name: e.table }),
    ...(e.constraint === undefined ? {} : { constraint_name: e.constraint }),
  }
}
