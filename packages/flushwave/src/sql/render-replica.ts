import { FlushwaveError } from '../errors.js'
import type { Statement } from './statement.js'

/**
 * Read-your-writes on replicas. A flush of an executor with replicas asks for the primary's WAL
 * position after its COMMIT, in the same pipeline (its commit record is written by then). A read
 * on a replica for an EntityManager that flushed goes behind a check, in the same pipeline on the
 * same connection, that the replica has replayed that far: statements on one connection run in
 * order, so the reads after a passing check see the commit.
 */
export const CURRENT_LSN: Statement = { text: 'select pg_current_wal_lsn()::text', params: [], returnsRows: true }

/**
 * Whether the server has replayed `lsn`; true on a server not in recovery (a promoted replica, or
 * a primary given as a replica), whose data is its own latest.
 */
export function renderReplayed(lsn: string): Statement {
  return { text: 'select coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false) or not pg_is_in_recovery()', params: [lsn], returnsRows: true }
}

const LSN = /^[0-9A-F]{1,8}\/[0-9A-F]{1,8}$/i

/** Throws unless `lsn` is a WAL position as PostgreSQL prints one (`16/B374D848`). */
export function checkLsn(lsn: unknown, where: string): asserts lsn is string {
  if (typeof lsn !== 'string' || !LSN.test(lsn)) throw new FlushwaveError(`${where}: not a consistency token (a WAL position such as 16/B374D848): ${JSON.stringify(lsn)}`)
}

/** The later of two WAL positions; undefined counts as the earliest. */
export function laterLsn(a: string | undefined, b: string | undefined): string | undefined {
  if (a === undefined) return b
  if (b === undefined) return a
  return lsnValue(a) >= lsnValue(b) ? a : b
}

function lsnValue(lsn: string): bigint {
  const slash = lsn.indexOf('/')
  return (BigInt(`0x${lsn.slice(0, slash)}`) << 32n) + BigInt(`0x${lsn.slice(slash + 1)}`)
}
