import knexFactory, { type Knex } from 'knex'
import pg from 'pg'
import postgres from 'postgres'
import { reserveFrom } from '../../src/drivers/postgres-js/reservation.js'
import { flushwave, tcpNoDelay, type Flushwave, type FlushwaveOptions, type KnexLike, type PgPool, type PostgresJsLike, type Schema, type SchemaDefs } from '../../src/index.js'

/** Every executor Flushwave ships on a network driver; suites that hold for all of them run once per name. */
export const EXECUTORS = ['postgres.js', 'node-postgres', 'knex'] as const
export type ExecutorName = (typeof EXECUTORS)[number]

/**
 * The network executors and PGlite (in-process): suites that need neither the network nor a second
 * connection at the same time run on all of them (see support/pglite.ts).
 */
export const ALL_EXECUTORS = [...EXECUTORS, 'pglite'] as const
export type AnyExecutorName = (typeof ALL_EXECUTORS)[number]

export interface OpenedExecutor<D extends SchemaDefs> {
  readonly orm: Flushwave<D>
  /** Runs `select 1` through the executor's own driver: opens a connection, prepares nothing. */
  select1(): Promise<void>
  /** Runs one statement through the executor's own driver, on a connection of its pool; rows as objects. */
  query(text: string): Promise<Record<string, unknown>[]>
  /** Checks out every connection of the pool at once and gives them back: none was leaked. */
  whole(): Promise<void>
  close(): Promise<void>
}

export interface OpenOptions<D extends SchemaDefs> {
  /** The schema to put first on the search path (a quoted-as-returned name from createTestSchema). */
  readonly searchPath?: string
  readonly max?: number
  /** postgres.js only: `prepare: false`, as transaction-mode poolers need. */
  readonly prepare?: boolean
  /** The connections' application_name, to find their server processes in pg_stat_activity. */
  readonly applicationName?: string
  /** postgres.js only: seconds to wait for a connection (its `connect_timeout`). */
  readonly connectTimeout?: number
  readonly orm?: Omit<FlushwaveOptions<D>, 'schema' | 'sql' | 'pg' | 'knex' | 'executor' | 'replicas'>
  /** Replicas: pools of the same driver, passed as `replicas`. */
  readonly replicas?: readonly ReplicaTarget[]
}

/** A replica for `openExecutor`: a pool of the same driver on `url`, with its own search path. */
export interface ReplicaTarget {
  readonly url: string
  /** Schemas in order, quoted as given (`['rep', 'pg_catalog']` puts functions of `rep` first). */
  readonly searchPath?: readonly string[]
  readonly applicationName?: string
}

/** A Flushwave on `url` through the named executor, with a pool of its own (and one per replica). */
export function openExecutor<D extends SchemaDefs>(name: ExecutorName, url: string, schema: Schema<D>, options: OpenOptions<D> = {}): OpenedExecutor<D> {
  const primary = openDriver(name, url, { ...options, searchPath: options.searchPath === undefined ? undefined : [options.searchPath] })
  const replicas = (options.replicas ?? []).map((r) => openDriver(name, r.url, { ...options, searchPath: r.searchPath, applicationName: r.applicationName }))
  const settings = { schema, ...options.orm, ...(replicas.length > 0 ? { replicas: replicas.map((r) => r.instance) } : {}) }
  const orm =
    primary.driver.kind === 'postgres.js'
      ? flushwave({ ...settings, sql: primary.driver.sql })
      : primary.driver.kind === 'node-postgres'
        ? flushwave({ ...settings, pg: primary.driver.pool })
        : flushwave({ ...settings, knex: primary.driver.knex })
  const close = async () => {
    await primary.close()
    for (const replica of replicas) await replica.close()
  }
  return { orm, select1: primary.select1, query: primary.query, whole: primary.whole, close }
}

type Driver = { kind: 'postgres.js'; sql: postgres.Sql } | { kind: 'node-postgres'; pool: pg.Pool } | { kind: 'knex'; knex: Knex }

interface OpenedDriver extends Omit<OpenedExecutor<never>, 'orm'> {
  readonly driver: Driver
  /** The pool, as `replicas` takes it. */
  readonly instance: PostgresJsLike | PgPool | KnexLike
}

/** The named driver's pool on `url`, as an application would make it. */
function openDriver(name: ExecutorName, url: string, options: Omit<OpenOptions<never>, 'searchPath' | 'orm' | 'replicas'> & { searchPath?: readonly string[] | undefined }): OpenedDriver {
  const max = options.max ?? 1
  const path = options.searchPath
  const app = options.applicationName
  const all = <T>(take: () => Promise<T>, give: (t: T) => unknown) => async () => {
    for (const taken of await Promise.all(Array.from({ length: max }, take))) give(taken)
  }
  if (name === 'postgres.js') {
    const sql = postgres(url, {
      ...tcpNoDelay,
      max,
      onnotice: () => {},
      ...(options.prepare === undefined ? {} : { prepare: options.prepare }),
      ...(options.connectTimeout === undefined ? {} : { connect_timeout: options.connectTimeout }),
      connection: { ...(path ? { search_path: path.map((p) => `"${p}"`).join(', ') } : {}), ...(app ? { application_name: app } : {}) },
    })
    // Reserved as Flushwave reserves (reserveFrom): postgres.js may hand a terminated server's FATAL
    // error to the next session's first request, or forget a queued reservation when a connection
    // closes; driver quirks, not leaks. A connection held for good still leaves a request unanswered.
    const whole = all(() => reserveFrom(sql, Infinity), (conn) => conn.release())
    const query = async (text: string) => [...(await sql.unsafe(text))] as Record<string, unknown>[]
    return { driver: { kind: name, sql }, instance: sql, select1: async () => void (await sql`select 1`), query, whole, close: () => sql.end({ timeout: 1 }) }
  }
  if (name === 'node-postgres') {
    // The application's pool as most are made: without `pipeline: true` (Flushwave switches it per flush).
    const pool = new pg.Pool({ connectionString: url, max, ...(path ? { options: `-c search_path=${path.map((p) => `"${p}"`).join(',')}` } : {}), ...(app ? { application_name: app } : {}) })
    // A pooled client whose connection dropped while idle emits 'error' on the pool: the pool removes it.
    pool.on('error', () => undefined)
    const whole = all(() => pool.connect(), (client) => client.release())
    const query = async (text: string) => (await pool.query(text)).rows as Record<string, unknown>[]
    return { driver: { kind: name, pool }, instance: pool as unknown as PgPool, select1: async () => void (await pool.query('select 1')), query, whole, close: () => pool.end() }
  }
  const knex = knexFactory({
    client: 'pg',
    connection: { connectionString: url, ...(app ? { application_name: app } : {}) },
    pool: { min: 0, max },
    // knex logs every dropped pooled connection; the fault suites drop them on purpose.
    log: { warn: () => {} },
    ...(path ? { searchPath: [...path] } : {}),
  })
  const whole = all(() => knex.client.acquireConnection() as Promise<unknown>, (conn) => knex.client.releaseConnection(conn))
  const query = async (text: string) => ((await knex.raw(text)) as { rows: Record<string, unknown>[] }).rows
  return { driver: { kind: name, knex }, instance: knex as unknown as KnexLike, select1: async () => void (await knex.raw('select 1')), query, whole, close: () => knex.destroy() }
}
