import { FlushwaveError } from '../../errors.js'
import { pgQuery, whenIdle, type PgClient, type PgStandaloneClient } from './pg-client.js'
import { SettingsRefused } from '../protocol/opening.js'
import { batchedReads } from './pg-read-batch.js'
import { clientSource, ownTransaction, probeWith, type PgSource } from './pg-source.js'
import { StatementNames } from './named-statements.js'

/**
 * The part of a knex instance or transaction (`client: 'pg'`) Flushwave uses. Structural, so that
 * Flushwave's declarations do not import knex's: applications without knex need not install it.
 */
export interface KnexLike {
  readonly client: unknown
  readonly isTransaction?: boolean
  transaction(scope: (trx: KnexLike) => Promise<unknown>): Promise<unknown>
}

/** What Flushwave calls on knex's client (knex's Client, not part of its public types either). */
interface KnexClient {
  acquireConnection(): Promise<unknown>
  releaseConnection(connection: unknown): unknown
  acquireRawConnection(): Promise<unknown>
  destroyRawConnection(connection: unknown): Promise<void>
}

/** The knex instance (or transaction) of an application on knex with the `pg` client. */
export function knexSource(knex: KnexLike, names: StatementNames = new StatementNames()): PgSource {
  // In a knex transaction, its client hands out the transaction's connection and ignores releases.
  const client = knex.client as KnexClient
  const acquire = async () => (await client.acquireConnection()) as PgClient
  const release = (connection: PgClient) => void client.releaseConnection(connection)
  const source: PgSource = {
    inTransaction: knex.isTransaction === true,
    // In a transaction every read is on its connection: reads made together wait for whatever the
    // transaction has in flight there (a flush), then go out as one batch.
    query: batchedReads(
      knex.isTransaction === true ? () => acquire().then(whenIdle) : acquire,
      release,
      names,
      knex.isTransaction === true,
    ),
    names,
    // Its tarn pool's size (knex's default is 10).
    connections: knex.isTransaction === true ? 1 : ((knex.client as { pool?: { max?: number } }).pool?.max ?? 10),
    acquire,
    // knex marks a connection whose socket ended (`__knex__disposed`) and its pool destroys it on release.
    release: (connection) => release(connection),
    // acquireRawConnection opens a connection with the instance's settings (search path included), outside its pool.
    // (knex listens for its errors itself.)
    openProbe: probeWith(async () => {
      const raw = (await client.acquireRawConnection()) as PgClient
      const probe: PgStandaloneClient = { query: (config) => raw.query(config), connect: async () => undefined, end: () => client.destroyRawConnection(raw) }
      // The raw client's connection, so that destroyConnection can cut this probe's socket too.
      return Object.assign(probe, { connection: (raw as { connection?: unknown }).connection })
    }, false),
    // On the instance, a transaction of Flushwave's own on a connection of knex's pool (BEGIN and the
    // opening's settings in one pipeline); inside the application's knex transaction, a savepoint
    // of knex's, where transaction modes can no longer be chosen.
    transaction: async (fn, opening) => {
      if (knex.isTransaction !== true) return ownTransaction(acquire, (connection) => release(connection), (connection) => fn(clientSource(connection, source.openProbe, names)), opening)
      if (opening?.modes) throw new FlushwaveError(`em.transaction() inside a knex transaction is a savepoint: its modes (${opening.modes}) are the outer transaction's`)
      return (await knex.transaction(async (trx) => {
        const nested = knexSource(trx, names)
        if (opening?.settings) await nested.query(pgQuery(opening.settings)).catch((error: unknown) => Promise.reject(new SettingsRefused(error)))
        return fn(nested)
      })) as Awaited<ReturnType<typeof fn>>
    },
  }
  return source
}
