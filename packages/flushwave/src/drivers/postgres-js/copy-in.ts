import type { PendingQuery, ReservedSql, Row, Sql } from 'postgres'
import type { Statement } from '../../sql/statement.js'
import type { Answer } from '../port.js'

/**
 * `copy … from stdin` in a postgres.js pipeline. postgres.js sends COPY as a simple query and gives
 * its rows a stream only once the server's CopyInResponse is in, so the statements before it are
 * answered first: one round trip more per COPY. The rows, CopyDone and the statements after it then
 * go at once, in that order, and the server answers them together (on an error in the rows it
 * drops the rest of them, and the next statements find the transaction failed, as after any error).
 *
 * postgres.js resolves the query twice: with the stream at CopyInResponse, with the command's
 * result (`COPY n`) at its end; and rejects it with the server's error. Its `resolve` and `reject`
 * are watched for the second, and the stream's `_final` for CopyDone written (internal to
 * postgres.js, src/query.js and src/connection.js; a later version that changed them fails
 * copy.test.ts).
 */
interface CopyQuery {
  resolve(value: unknown): void
  reject(error: unknown): void
  writable(): Promise<NodeJS.WritableStream & { on(event: 'error', fn: () => void): void }>
}

/** A COPY sent: its answer to come, and its failure if it has already failed (a connection that broke under its rows). */
export interface Copied {
  readonly answer: Promise<Answer>
  readonly failure: { readonly error: unknown } | undefined
}

/**
 * Starts the COPY of `statement` on `sql` and waits until its rows and CopyDone are written;
 * `answer` then settles with its answer. What `sql` is sent next goes right behind them. (Wrapped:
 * a promise resolved with a promise would wait for the inner one.)
 */
export async function copyIn(sql: Sql | ReservedSql, statement: Statement, gone: Promise<void>): Promise<Copied> {
  const query = sql.unsafe<Row[]>(statement.text) as unknown as PendingQuery<Row[]> & CopyQuery
  let finish!: (answer: Answer) => void
  let fail!: (error: unknown) => void
  const answer = new Promise<Answer>((resolve, reject) => ((finish = resolve), (fail = reject)))
  answer.catch(() => undefined) // read by the caller; not unhandled if the connection goes first
  const [resolve, reject] = [query.resolve, query.reject]
  let resolved = 0
  query.resolve = (value) => {
    if (resolved++ > 0) finish({ command: 'COPY', rowCount: (value as { count?: number } | undefined)?.count ?? null, rows: [] })
    resolve(value)
  }
  let failure: { readonly error: unknown } | undefined
  query.reject = (error) => {
    failure = { error }
    fail(error)
    reject(error)
  }
  let stream
  try {
    stream = await Promise.race([query.writable(), gone.then(() => Promise.reject(new Error('the connection closed before COPY began')))])
  } catch (error) {
    fail(error)
    return { answer, failure: { error } }
  }
  // An error in the rows reaches the query (rejected above); the stream, destroyed, must not throw it again.
  stream.on('error', () => undefined)
  // postgres.js refuses other queries until the stream has written CopyDone (its `final`), which
  // it does once the rows are in the socket: the next statements wait for that, not for an answer.
  const ended = new Promise<void>((resolve) => {
    const writer = stream as unknown as {
      _final(callback: (error?: Error) => void): void
      _destroy(error: Error | null, callback: (error: Error | null) => void): void
      once(event: string, fn: () => void): void
    }
    const final = writer._final
    writer._final = function (this: unknown, callback) {
      final.call(this, callback)
      // Once finished, postgres.js's stream destroys itself and sends CopyFail: harmless when the
      // server is idle, but behind these rows the next COPY may have begun, and that would end it.
      writer._destroy = (error, done) => done(error)
      resolve()
    }
    writer.once('close', resolve)
  })
  // Piece by piece, with a turn of the event loop after each: the socket takes each piece while
  // the next renders, and a large COPY does not hold the event loop for its whole rendering.
  let closed = false
  void gone.then(() => (closed = true))
  if (statement.copy !== undefined) {
    for (const piece of statement.copy.pieces()) {
      if (closed) break
      stream.write(piece)
      await new Promise((resolve) => setImmediate(resolve))
    }
  }
  if (!closed) stream.end()
  // A connection cut or closed before then may leave the stream waiting for its socket for ever.
  await Promise.race([ended, gone])
  return { answer, failure }
}
