import { FlushwaveError } from '../../errors.js'
import type { Statement } from '../../sql/statement.js'

/**
 * The parts of a node-postgres (`pg` ≥ 8.23) client that Flushwave uses, written out so that the
 * package needs neither `pg` nor `@types/pg` to compile: a `pg.Client`, a pooled client, and the
 * connection knex's `pg` dialect hands out all fit.
 */
export interface PgClient {
  query(config: { name?: string; text: string; values?: unknown[]; rowMode?: 'array' }): Promise<PgResult>
  /** node-postgres 8.23's pipeline mode; undefined in older versions. */
  pipeline?: boolean
  /** The server process of this connection (from BackendKeyData). */
  readonly processID?: number | null
}

export interface PgResult {
  readonly command: string
  readonly rowCount: number | null
  readonly rows: unknown[]
}

/** A client that can be opened and closed on its own: outcome probes use one. */
export interface PgStandaloneClient extends PgClient {
  connect(): Promise<unknown>
  end(): Promise<void>
}

/** What `flushwave({ pg })` takes: the application's `pg.Pool`. */
export interface PgPool {
  connect(): Promise<PgPoolClient>
  query(config: { text: string; values?: unknown[]; rowMode?: 'array' }): Promise<PgResult>
  /** The pool's configuration (pg.Pool keeps it): a probe connects with the same settings. */
  readonly options: object
  /** The client class the pool makes connections with. */
  readonly Client?: new (config: object) => PgStandaloneClient
}

export interface PgPoolClient extends PgClient {
  /** With an error (or true), the pool destroys the connection instead of reusing it. */
  release(destroy?: Error | boolean): void
}

/** A statement as node-postgres takes it; `array` rows are in select-list order, like postgres.js's `.values()`. */
export function pgQuery(statement: Statement, rowMode?: 'array'): { text: string; values: unknown[]; rowMode?: 'array' } {
  return { text: statement.text, values: statement.params as unknown[], ...(rowMode ? { rowMode } : {}) }
}

/**
 * Cuts the client's socket: every query it sent fails at once ("Connection terminated"). node-
 * postgres has no public way to do that without waiting for the server (`end()` in pipeline mode
 * waits for every answer), hence its connection's stream, there since node-postgres 1.
 */
export function destroyConnection(client: PgClient): void {
  const stream = (client as { connection?: { stream?: { destroy(): void } } }).connection?.stream
  stream?.destroy()
}

/**
 * Runs `send` with the client in pipeline mode: queries issued without awaiting go out at once,
 * each with its own Sync, and a new statement costs no describe round trip. A client made without
 * `pipeline: true` is switched for the duration and switched back once every answer is in.
 *
 * One section at a time per client: inside a transaction, a batch of reads and a flush share the
 * transaction's client, and a section that ended would switch pipeline mode off under the other's
 * queries. A section that finds another running starts once it is over.
 */
export function pipelined<T>(client: PgClient, send: () => Promise<T>): Promise<T> {
  const running = sections.get(client)
  const section = running === undefined ? pipelineSection(client, send) : running.then(() => pipelineSection(client, send))
  const over = section.then(
    () => undefined,
    () => undefined,
  )
  sections.set(client, over)
  void over.then(() => {
    if (sections.get(client) === over) sections.delete(client)
  })
  return section
}

/** Resolves with the client once no pipelined section runs on it (at once when none does). */
export async function whenIdle<C extends PgClient>(client: C): Promise<C> {
  await sections.get(client)
  return client
}

/** The end of the last section started on each client, while one runs. */
const sections = new WeakMap<PgClient, Promise<void>>()

async function pipelineSection<T>(client: PgClient, send: () => Promise<T>): Promise<T> {
  const before = client.pipeline
  if (typeof before !== 'boolean') {
    throw new FlushwaveError('the node-postgres executor needs pg 8.23 or later (its pipeline mode); this client has none')
  }
  client.pipeline = true
  try {
    return await send()
  } finally {
    client.pipeline = before
  }
}

/**
 * node-postgres emits 'error' on a client whose socket ends while it is checked out; with no
 * listener that would crash the process. Listen while Flushwave holds the client (a flush, a read,
 * a transaction); the returned function stops listening.
 */
export function guardErrors(client: PgClient): () => void {
  const emitter = client as unknown as { on?(event: 'error', fn: () => void): void; off?(event: 'error', fn: () => void): void }
  const ignore = () => undefined
  emitter.on?.('error', ignore)
  return () => emitter.off?.('error', ignore)
}
