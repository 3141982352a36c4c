import { FlushwaveError } from '../../errors.js'
import type { Statement } from '../../sql/statement.js'
import type { PgClient, PgResult } from './pg-client.js'

/**
 * `copy … from stdin` in node-postgres's pipeline mode: the command (Parse, Bind, Execute), its
 * rows (CopyData, piece by piece as they render), CopyDone and Sync written without waiting for the server's
 * CopyInResponse, then the pipeline's next statements. node-postgres's own COPY (pg-copy-streams)
 * waits for that response, and pipeline mode accepts no query of another class: this is one of
 * its own Query objects (the client's `Client.Query`) with `submit` writing those messages and the
 * CopyInResponse left unanswered (the rows are on their way). Its answer is the command's:
 * `COPY n`, or the server's error (it then skips the rows up to the Sync).
 */

/** The parts of node-postgres's connection (lib/connection.js) the messages are written with. */
interface WireConnection {
  readonly stream: { cork?(): void; uncork?(): void }
  parse(message: { text: string; name: string; types: unknown[] }): void
  bind(message: { portal: string; statement: string; values: unknown[] }): void
  execute(message: { portal: string; rows: number }): void
  sendCopyFromChunk(chunk: Buffer): void
  endCopyFrom(): void
  sync(): void
}

interface PgQuery {
  submit(connection: WireConnection): Error | null
  handleCopyInResponse(connection: WireConnection): void
}

type QueryClass = new (config: { text: string; callback: (error: Error | null, result: PgResult) => void }) => PgQuery

/** Issues `statement` (its `copy` rows included) on `client`; settles with the command's answer. */
export function copyQuery(client: PgClient, statement: Statement): Promise<PgResult> {
  const Query = (client.constructor as { Query?: QueryClass }).Query
  if (Query === undefined) return Promise.reject(new FlushwaveError('COPY needs a node-postgres client (its Client.Query)'))
  return new Promise<PgResult>((resolve, reject) => {
    const query = new Query({ text: statement.text, callback: (error, result) => (error ? reject(error) : resolve(result)) })
    query.submit = (connection) => {
      connection.stream.cork?.()
      try {
        connection.parse({ text: statement.text, name: '', types: [] })
        connection.bind({ portal: '', statement: '', values: [] })
        connection.execute({ portal: '', rows: 0 })
      } finally {
        connection.stream.uncork?.()
      }
      // Uncorked, each piece goes to the socket as soon as it is rendered: the server stores it
      // while the next renders. (node-postgres submits synchronously: no turn of the event loop here.)
      if (statement.copy !== undefined) for (const piece of statement.copy.pieces()) connection.sendCopyFromChunk(Buffer.from(piece, 'utf8'))
      connection.stream.cork?.()
      try {
        connection.endCopyFrom()
        connection.sync()
      } finally {
        connection.stream.uncork?.()
      }
      return null
    }
    query.handleCopyInResponse = () => undefined
    ;(client as unknown as { query(query: PgQuery): unknown }).query(query)
  })
}
