import { BEGIN, COMMIT, OPEN, ROLLBACK } from '../port.js'
import type { PgClient, PgResult } from './pg-client.js'

/**
 * Named statements on node-postgres: each statement text gets a name, so that node-postgres parses
 * it once per connection and afterwards only binds it (Bind/Execute, no Parse), as postgres.js does
 * with its prepared statements. The server then neither parses nor plans a kept shape again.
 *
 * A name is only worth anything where the connection keeps it. A transaction-mode pooler hands each
 * transaction another server connection: there a name parsed on one is missing on the next
 * (26000) or there already (42P05). So, by `prepare`:
 * - `'auto'` (the default): names on a connection found to be direct, where the server process
 *   answering `pg_backend_pid()` is the one the connection's key data names; a pooler answers with
 *   its own key. The question rides the client's first pipeline, which goes unnamed.
 * - `true`: names everywhere, for a pooler that keeps prepared statements (PgBouncer 1.21 and
 *   later with `max_prepared_statements`, and others).
 * - `false`: never (every statement unnamed, parsed each time).
 * A connection that answers 26000 or 42P05 all the same has lost its statements (`DISCARD ALL`, a
 * pooler that does not keep them): its names are forgotten, and whoever sent the statements sends
 * them again unnamed (a flush whose transaction rolled back, a read outside a transaction).
 */
export type PrepareMode = 'auto' | boolean

/** Names by statement text, process-wide: several Flushwave instances may share one pool's clients. */
const names = new Map<string, string>()
/** Texts past this many go unnamed: every one costs each connection a prepared statement. */
const MAX_NAMES = 2000

/**
 * The protocol's own statements stay unnamed: nothing to plan in them, and a BEGIN that failed for
 * its name would leave the rest of a flush to commit statement by statement.
 */
const UNNAMED = new Set([BEGIN.text, COMMIT.text, ROLLBACK.text, OPEN.text])

function nameOf(text: string): string | undefined {
  if (UNNAMED.has(text)) return undefined
  let name = names.get(text)
  if (name === undefined && names.size < MAX_NAMES) names.set(text, (name = `flushwave_${names.size}`))
  return name
}

/** Whether each client keeps named statements: set by the `pg_backend_pid()` check, or by a failure. */
const keeps = new WeakMap<PgClient, boolean>()

/** pg's own record of what a connection has parsed (there since pg 7); emptied when the server's is lost. */
interface ParsedRecord {
  parsedStatements?: Record<string, string>
  submittedNamedStatements?: Record<string, string>
}

type QueryConfig = { readonly text: string; readonly values?: unknown[]; readonly rowMode?: 'array' }
/** A query that issues itself (a COPY: copy-query.ts), never named. */
export type SelfIssued = { readonly issue: (client: PgClient) => Promise<PgResult> }
type Sendable = QueryConfig | SelfIssued

export class StatementNames {
  constructor(readonly mode: PrepareMode = 'auto') {}

  /**
   * Issues each config on `client` (in pipeline mode: all go out at once), named where it keeps
   * them; `settled` as Promise.allSettled's, `cold` the names it parses for the first time. A new
   * client's `pg_backend_pid()` check goes with them.
   */
  async issue(client: PgClient, configs: readonly Sendable[]): Promise<{ settled: PromiseSettledResult<PgResult>[]; cold: number }> {
    const kept = keeps.get(client)
    const check = this.mode === 'auto' && kept === undefined ? this.check(client) : undefined
    const named = this.mode === true ? kept !== false : this.mode === 'auto' && kept === true
    const record = (client as { connection?: ParsedRecord }).connection
    let cold = 0
    const queries = configs.map((config) => {
      if ('issue' in config || !named) return send(client, config)
      const name = nameOf(config.text)
      if (name === undefined) return client.query(config)
      if (record?.parsedStatements?.[name] === undefined && record?.submittedNamedStatements?.[name] === undefined) cold++
      return client.query({ ...config, name })
    })
    const settled = await Promise.allSettled(queries)
    await check
    return { settled, cold }
  }

  /** Finds out, when it does not know yet, whether `client` keeps names (before a warm-up names its shapes). */
  async known(client: PgClient): Promise<void> {
    if (this.mode === 'auto' && keeps.get(client) === undefined) await this.check(client)
  }

  /** Asks whether the client is a direct connection; settles once it knows (never rejects). */
  private check(client: PgClient): Promise<void> {
    return client.query({ text: 'select pg_backend_pid()', rowMode: 'array' }).then(
      (result) => {
        const pid = Number((result.rows[0] as unknown[] | undefined)?.[0])
        if (keeps.get(client) === undefined) keeps.set(client, client.processID != null && pid === client.processID)
      },
      () => undefined, // a cut connection, an aborted transaction: asked again next time
    )
  }

  /**
   * Whether `settled` holds a named statement the server no longer had (or had already): then the
   * client's names are forgotten; a client not known to be direct sends unnamed from now on.
   */
  lost(client: PgClient, settled: readonly (PromiseSettledResult<unknown> | undefined)[]): boolean {
    if (!settled.some((s) => s?.status === 'rejected' && lostName(s.reason))) return false
    const record = (client as { connection?: ParsedRecord }).connection
    if (record) {
      record.parsedStatements = {}
      record.submittedNamedStatements = {}
    }
    if (keeps.get(client) !== true) keeps.set(client, false)
    return true
  }

  /** Issues each config unnamed (the statements of a pipeline that met a lost name, again). */
  unnamed(client: PgClient, configs: readonly Sendable[]): Promise<PromiseSettledResult<PgResult>[]> {
    return Promise.allSettled(configs.map((config) => send(client, config)))
  }
}

const send = (client: PgClient, config: Sendable): Promise<PgResult> => ('issue' in config ? config.issue(client) : client.query(config))

/** 26000: prepared statement does not exist; 42P05: it exists already. */
export const lostName = (error: unknown): boolean => {
  const code = (error as { code?: unknown } | null)?.code
  return code === '26000' || code === '42P05'
}
