import { FlushError } from '../../errors.js'
import { renderCapture, type Ledger } from '../../sql/render-ledger.js'
import type { Statement } from '../../sql/statement.js'
import { CAPTURE_TRANSACTION, newToken, type InFlight } from './outcome.js'
import type { ServerError } from '../port.js'

/** One flush in 64 also prunes the ledger (up to 64 old tokens: as many as 64 flushes add). */
const PRUNE_EVERY = 64
/** Tokens are kept an hour longer than a flush may last: long after any question about them. */
const KEEP_SECONDS = 3_600

/**
 * The statement each flush sends right after BEGIN, shared by the executors: with an outcome
 * ledger, the insert of the flush's token (returning the transaction id and server process);
 * without, a plain select of both.
 */
export class Capture {
  private flushes = 0

  constructor(
    readonly ledger: Ledger | undefined,
    private readonly timeoutMs: number,
  ) {}

  next(): { readonly statement: Statement; readonly ledger: InFlight['ledger'] } {
    if (this.ledger === undefined) return { statement: { text: CAPTURE_TRANSACTION, params: [] }, ledger: undefined }
    const token = newToken()
    const prune = ++this.flushes % PRUNE_EVERY === 0 && { keepSeconds: KEEP_SECONDS + Math.ceil(this.timeoutMs / 1000) }
    return { statement: renderCapture(this.ledger, token, prune), ledger: { ledger: this.ledger, token } }
  }

  /**
   * Both forms of the capture, for warm-ups to prepare: like a flush's, each writes a token (a row
   * of the ledger that no flush will ask about, pruned in time).
   */
  shapes(): Statement[] {
    if (this.ledger === undefined) return [{ text: CAPTURE_TRANSACTION, params: [] }]
    return [renderCapture(this.ledger, newToken(), false), renderCapture(this.ledger, newToken(), { keepSeconds: KEEP_SECONDS })]
  }

  /** The capture failed because the ledger table does not exist: say what to do, not just 42P01. */
  missingTable(error: unknown, normalize: (error: ServerError) => ServerError = (e) => e): FlushError | undefined {
    const e = error as Partial<ServerError> | undefined
    if (this.ledger === undefined || e?.code === undefined) return undefined
    const server = normalize(e as ServerError)
    if (server.code !== '42P01') return undefined
    return new FlushError(
      `the outcome ledger table ${this.ledger.table} does not exist; nothing was committed. Create it once with the statements of ` +
        'ledgerTableSql() (createTablesSql includes them), or pass `outcomeLedger: false` to flushwave() to flush without it',
      { code: server.code, table: this.ledger.table, entity: undefined, constraint: undefined, detail: undefined },
      { cause: error },
    )
  }
}
