import type { Opening } from '../../sql/render-session.js'
import type { LateQuery, OpenProbe } from '../port.js'
import { SettingsRefused } from '../protocol/opening.js'
import { destroyConnection, guardErrors, pgQuery, pipelined, whenIdle } from './pg-client.js'
import { batchedReads } from './pg-read-batch.js'
import { StatementNames } from './named-statements.js'
import type { PgClient, PgPool, PgPoolClient, PgResult, PgStandaloneClient } from './pg-client.js'

type QueryConfig = { text: string; values?: unknown[]; rowMode?: 'array' }

/**
 * Where the node-postgres executor gets its connections: the application's `pg.Pool`, a client held
 * by `em.transaction()`, or knex's pool (its `pg` dialect hands out node-postgres clients). The
 * executor is the same for all three; only checking out, giving back and probing differ.
 */
export interface PgSource {
  /** Inside a transaction the executor does not own: flushes send no BEGIN or COMMIT. */
  readonly inTransaction: boolean
  /** One statement on some connection (reads, id allocation). */
  /** With `late`, reads on a pooled connection set `late.stop` (Port.query). */
  query(config: QueryConfig, late?: LateQuery): Promise<PgResult>
  acquire(): Promise<PgClient>
  /** Gives the connection back; a broken one (cut, or failed mid-flush) is destroyed, never reused. */
  release(client: PgClient, broken: boolean): void
  /** A connection of its own, outside any pool, to ask about a flush whose connection failed. */
  readonly openProbe: OpenProbe
  /** How many connections its pool holds at most (a warm-up takes them all at once). */
  readonly connections: number
  /** Names for statements on its clients (named-statements.ts). */
  readonly names: StatementNames
  /** Runs `fn` in one transaction on one connection: committed when it resolves, rolled back when it throws (see Port.transaction for `opening`). */
  transaction<T>(fn: (source: PgSource) => Promise<T>, opening?: Opening): Promise<T>
}

/** The application's pg.Pool. */
export function poolSource(pool: PgPool, names: StatementNames = new StatementNames()): PgSource {
  // pg.Pool keeps its Client class and its configuration: a probe connects as the pool does.
  const openProbe = probeWith(async () => new (pool.Client ?? (await loadPg()).Client)(pool.options))
  return {
    inTransaction: false,
    // Not pool.query(): it listens for one 'error' of the client only, and a connection the server
    // ends mid-query can emit two (the FATAL, then the closed socket); the second would crash the process.
    query: batchedReads(
      () => pool.connect(),
      (client, broken) => (client as PgPoolClient).release(broken ? new Error('flushwave: connection failed during a read') : undefined),
      names,
      false,
    ),
    names,
    // pg.Pool's default size.
    connections: (pool.options as { max?: number }).max ?? 10,
    acquire: () => pool.connect(),
    release: (client, broken) => (client as PgPoolClient).release(broken ? new Error('flushwave: connection cut during a flush') : undefined),
    openProbe,
    transaction: (fn, opening) =>
      ownTransaction(
        () => pool.connect(),
        (client, broken) => (client as PgPoolClient).release(broken ? new Error('flushwave: rollback failed') : undefined),
        (client) => fn(clientSource(client, openProbe, names)),
        opening,
      ),
  }
}

/**
 * A transaction on a connection of the pool, BEGIN and COMMIT sent by Flushwave. The opening's
 * settings go in the same pipeline as BEGIN: one round trip, as a bare BEGIN.
 */
export async function ownTransaction<T>(
  acquire: () => Promise<PgClient>,
  release: (client: PgClient, broken: boolean) => void,
  fn: (client: PgClient) => Promise<T>,
  opening: Opening | undefined,
): Promise<T> {
  const client = await acquire()
  // The pool does not listen to a checked-out client: a connection ended while the transaction
  // waits between statements would emit 'error' with no listener.
  const unguard = guardErrors(client)
  let broken = false
  try {
    const begin = { text: opening?.modes ? `begin ${opening.modes}` : 'begin' }
    const settings = opening?.settings
    if (settings === undefined) await client.query(begin)
    else {
      const [began, applied] = await pipelined(client, () => Promise.allSettled([client.query(begin), client.query(pgQuery(settings))]))
      if (began.status === 'rejected') throw began.reason
      if (applied.status === 'rejected') throw new SettingsRefused(applied.reason)
    }
    const value = await fn(client)
    await client.query({ text: 'commit' })
    return value
  } catch (error) {
    await client.query({ text: 'rollback' }).catch(() => (broken = true))
    throw error
  } finally {
    unguard()
    release(client, broken)
  }
}

/**
 * A client already inside a transaction (em.transaction() on a pg.Pool). Reads made together go out
 * as one batch once what the transaction has in flight on it (a flush, an earlier batch) is over.
 */
export function clientSource(client: PgClient, openProbe: OpenProbe, names: StatementNames): PgSource {
  return {
    inTransaction: true,
    query: batchedReads(
      () => whenIdle(client),
      () => undefined,
      names,
      true,
    ),
    names,
    connections: 1,
    acquire: async () => client,
    release: () => undefined,
    openProbe,
    transaction: () => Promise.reject(new Error('transactions do not nest')),
  }
}

/** A probe on a fresh connection made by `make`; `connect` says whether it still has to connect. */
export function probeWith(make: () => Promise<PgStandaloneClient>, connect = true): OpenProbe {
  return () => {
    const made = make().then((client) => {
      // A probe may be cut off mid-answer: an 'error' with no listener would crash the process.
      ;(client as unknown as { on?: (event: string, fn: () => void) => void }).on?.('error', () => undefined)
      return client
    })
    const opened = made.then(async (client) => {
      if (connect) await client.connect()
      return client
    })
    opened.catch(() => undefined) // a probe that failed to connect and was never asked anything
    return {
      probe: async (text, params) => (await (await opened).query({ text, values: [...params], rowMode: 'array' })).rows as unknown[][],
      // Never waits for the connection: neither for it to finish connecting nor for end(), which
      // waits for the peer to close. A pooler can hold a new connection's login for many seconds
      // (PgBouncer after KILL: server_login_retry, 15 s), and waiting here kept a failed flush
      // unsettled that long, past its timeout plus OUTCOME_BUDGET_MS. Say goodbye, and cut the
      // socket if it has not closed soon after; a connection still being made gets the same once made.
      close: async () => {
        void made.then(
          (client) => {
            void client.end().catch(() => undefined)
            setTimeout(() => destroyConnection(client), CLOSE_GRACE_MS).unref()
          },
          () => undefined,
        )
      },
    }
  }
}

/** How long a probe connection gets to close politely before its socket is cut. */
const CLOSE_GRACE_MS = 100

/** node-postgres itself, loaded only when a pool does not say which Client class it uses. */
async function loadPg(): Promise<{ Client: new (config: object) => PgStandaloneClient }> {
  const name = 'pg' // a variable: the package compiles without pg's types installed
  return ((await import(name)) as { default: { Client: new (config: object) => PgStandaloneClient } }).default
}
