import knexFactory from 'knex'
import pg from 'pg'
import postgres from 'postgres'
import { flushwave, tcpNoDelay, type Flushwave, type FlushwaveOptions, type Schema, type SchemaDefs } from '../../src/index.js'

/** Every executor Flushwave ships; suites that hold for all of them run once per name. */
export const EXECUTORS = ['postgres.js', 'node-postgres', 'knex'] as const
export type ExecutorName = (typeof EXECUTORS)[number]

export interface OpenedExecutor<D extends SchemaDefs> {
  readonly orm: Flushwave<D>
  /** Runs `select 1` through the executor's own driver: opens a connection, prepares nothing. */
  select1(): Promise<void>
  close(): Promise<void>
}

export interface OpenOptions<D extends SchemaDefs> {
  /** The schema to put first on the search path (a quoted-as-returned name from createTestSchema). */
  readonly searchPath?: string
  readonly max?: number
  /** postgres.js only: `prepare: false`, as transaction-mode poolers need. */
  readonly prepare?: boolean
  readonly orm?: Omit<FlushwaveOptions<D>, 'schema' | 'sql' | 'pg' | 'knex' | 'executor'>
}

/** A Flushwave on `url` through the named executor, with a pool of its own. */
export function openExecutor<D extends SchemaDefs>(name: ExecutorName, url: string, schema: Schema<D>, options: OpenOptions<D> = {}): OpenedExecutor<D> {
  const max = options.max ?? 1
  const path = options.searchPath
  const settings = { schema, ...options.orm }
  if (name === 'postgres.js') {
    const sql = postgres(url, {
      ...tcpNoDelay,
      max,
      onnotice: () => {},
      ...(options.prepare === undefined ? {} : { prepare: options.prepare }),
      ...(path ? { connection: { search_path: `"${path}"` } } : {}),
    })
    return { orm: flushwave({ ...settings, sql }), select1: async () => void (await sql`select 1`), close: () => sql.end() }
  }
  if (name === 'node-postgres') {
    // The application's pool as most are made: without `pipeline: true` (Flushwave switches it per flush).
    const pool = new pg.Pool({ connectionString: url, max, ...(path ? { options: `-c search_path="${path}"` } : {}) })
    return { orm: flushwave({ ...settings, pg: pool }), select1: async () => void (await pool.query('select 1')), close: () => pool.end() }
  }
  const knex = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max }, ...(path ? { searchPath: [path] } : {}) })
  return { orm: flushwave({ ...settings, knex }), select1: async () => void (await knex.raw('select 1')), close: () => knex.destroy() }
}
