/**
 * Wiring shared by `pnpm example` (main.ts) and the tests: migrate, connect the pool, build the
 * Flushwave instance and the app, optionally seed, listen.
 */
import type { AddressInfo } from 'node:net'
import { searchPathOptions } from 'devdb'
import type { FastifyInstance } from 'fastify'
import { flushwave, tcpNoDelay, type Flushwave, type WarmUp } from 'flushwave'
import knexFactory, { type Knex } from 'knex'
import pg from 'pg'
import postgres from 'postgres'
import { buildApp } from './app.js'
import { IDEMPOTENCY_KEYS } from './idempotency.js'
import { migrateLatest } from './migrate.js'
import { hooks, schema, type Defs } from './schema.js'
import { seed, type SeedResult } from './seed.js'

export interface BookstoreOptions {
  /** Where the migrations run: directly on the database. */
  databaseUrl: string
  /** Where the app's pool connects; default databaseUrl (main.ts passes the toxiproxy URL here). */
  appDatabaseUrl?: string
  /** Use this PostgreSQL schema only (tests); default: the server's search_path. */
  searchPath?: string
  host?: string
  /** 0 for any free port. */
  port?: number
  /** Connections of the app's pool (default 10). */
  poolMax?: number
  logLevel?: string
  seed?: boolean
  /** Prepare every statement shape on every pooled connection before listening (`orm.warmUp()`). */
  warmUp?: boolean
  /**
   * How flushes reach the database, each a pipeline on one connection: `postgres` (postgres.js, the
   * default), `pg` (a node-postgres `pg.Pool`, as for a transaction pooler) or `knex` (a connection
   * of a knex pool, as an application on knex would run).
   */
  executor?: 'postgres' | 'pg' | 'knex'
  /**
   * Streaming replicas of the app's database (main.ts: REPLICA_URLS): reads go there, each of the
   * executor's kind, with read-your-writes across requests by consistency token (consistency.ts).
   */
  replicaUrls?: readonly string[]
  /** A span per HTTP request, to OpenTelemetry's global tracer (main.ts: TELEMETRY set). */
  traceRequests?: boolean
  /** Called with the app before it listens (tests add routes here). */
  configure?: (app: FastifyInstance) => void
}

export interface Bookstore {
  app: FastifyInstance
  sql: postgres.Sql
  orm: Flushwave<Defs>
  /** http://host:port */
  url: string
  migrations: string[]
  seeded: SeedResult | undefined
  warmedUp: WarmUp | undefined
  /** Stops listening (in-flight requests finish), then closes the pool. */
  close(): Promise<void>
}

export async function startBookstore(options: BookstoreOptions): Promise<Bookstore> {
  const migrations = await migrateLatest({ url: options.databaseUrl, searchPath: options.searchPath })
  const url = options.appDatabaseUrl ?? options.databaseUrl
  // The primary's driver and each replica's, of the same kind.
  const drivers = [url, ...(options.replicaUrls ?? [])].map((at) => openDriver(options, at))
  const [primary, ...replicas] = drivers as [Driver, ...Driver[]]
  // Checkouts with an Idempotency-Key record it in flushwave_idempotency (made by the migrations).
  const config = { schema, hooks, idempotencyKeys: IDEMPOTENCY_KEYS }
  const orm =
    primary.kind === 'knex'
      ? flushwave({ ...config, knex: primary.knex, replicas: replicas.map((r) => (r as typeof primary).knex) })
      : primary.kind === 'pg'
        ? flushwave({ ...config, pg: primary.pool, replicas: replicas.map((r) => (r as typeof primary).pool) })
        : flushwave({ ...config, sql: primary.sql, replicas: replicas.map((r) => (r as typeof primary).sql) })
  const sql = primary.kind === 'postgres' ? primary.sql : postgres(url, { max: 2, onnotice: () => {}, ...searchPath(options) })
  const closeAll = async (timeout: number) => {
    for (const driver of drivers) await driver.close(timeout).catch(() => {})
    if (primary.kind !== 'postgres') await sql.end({ timeout }).catch(() => {})
  }
  const app = buildApp({ orm, traceRequests: options.traceRequests === true, ...(options.logLevel ? { logLevel: options.logLevel } : {}) })
  try {
    options.configure?.(app)
    // The migrated database must match the schema the handlers flush with: fail at start-up with
    // every difference listed (SchemaMismatchError), not at the first flush that trips over one.
    await orm.assertSchema()
    const seeded = options.seed ? await seed(orm) : undefined
    // Opens the pooled connections, prepares every shape on each and fills the id pool; without it a
    // shape new to a connection is parsed in its first flush (Server-Timing then says "N cold").
    const warmedUp = options.warmUp ? await orm.warmUp() : undefined
    await app.listen({ host: options.host ?? '127.0.0.1', port: options.port ?? 0 })
    const { address, port } = app.server.address() as AddressInfo
    return {
      app,
      sql,
      orm,
      url: `http://${address.includes(':') ? `[${address}]` : address}:${port}`,
      migrations,
      seeded,
      warmedUp,
      close: async () => {
        await app.close()
        await closeAll(5)
      },
    }
  } catch (error) {
    await app.close().catch(() => {})
    await closeAll(1)
    throw error
  }
}

type Driver =
  | { kind: 'postgres'; sql: postgres.Sql; close(timeout: number): Promise<void> }
  | { kind: 'pg'; pool: pg.Pool; close(timeout: number): Promise<void> }
  | { kind: 'knex'; knex: Knex; close(timeout: number): Promise<void> }

const searchPath = (options: BookstoreOptions) => (options.searchPath === undefined ? {} : searchPathOptions(options.searchPath))

/** A pool of the executor's kind on `url`: postgres.js (the default), a pg.Pool, or knex. */
function openDriver(options: BookstoreOptions, url: string): Driver {
  const max = options.poolMax ?? 10
  if (options.executor === 'knex') {
    const knex = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max }, ...(options.searchPath === undefined ? {} : { searchPath: [options.searchPath] }) })
    return { kind: 'knex', knex, close: () => knex.destroy() }
  }
  if (options.executor === 'pg') {
    const pool = new pg.Pool({ connectionString: url, max, ...(options.searchPath === undefined ? {} : { options: `-c search_path="${options.searchPath}"` }) })
    // An idle pooled client whose connection drops emits 'error' on the pool; the pool replaces it.
    pool.on('error', () => undefined)
    return { kind: 'pg', pool, close: () => pool.end() }
  }
  // tcpNoDelay: a flush is one pipeline: let its pieces leave without waiting for ACKs.
  const sql = postgres(url, { ...tcpNoDelay, max, onnotice: () => {}, ...searchPath(options) })
  return { kind: 'postgres', sql, close: (timeout) => sql.end({ timeout }) }
}
