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

const REPLAYED = 'coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false) or not pg_is_in_recovery()'

/** How often a waiting check looks again (ms). */
export const REPLAY_POLL_MS = 5

/**
 * Whether the server has replayed `lsn`; true on a server not in recovery (a promoted replica, or
 * a primary given as a replica), whose data is its own latest. With `waitMs`, the server looks
 * again every REPLAY_POLL_MS until it has, for about that long: each tick of the series sleeps
 * (the lateral subquery runs once per tick), and EXISTS stops at the first tick that passes. The
 * statements after it take snapshots of their own, so they see what the wait let replay.
 */
export function renderReplayed(lsn: string, waitMs = 0): Statement {
  if (waitMs <= 0) return { text: `select ${REPLAYED}`, params: [lsn], returnsRows: true }
  const ticks = Math.ceil(waitMs / REPLAY_POLL_MS)
  return {
    text:
      `select exists (select 1 from generate_series(0, $2::int4) as tick ` +
      `cross join lateral (select 1 from pg_sleep(case when tick = 0 then 0 else ${REPLAY_POLL_MS / 1000} end)) as pause ` +
      `where ${REPLAYED})`,
    params: [lsn, String(ticks)],
    returnsRows: true,
  }
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
