import type { Evidence } from '../../sql/render-evidence.js'
import { renderClaim, renderClaimedBy, type Ledger } from '../../sql/render-ledger.js'
import { uuidv7 } from '../../ids/uuid-v7.js'
import type { OpenProbe, Probe } from '../port.js'
import { withDeadline } from './timeout.js'

/**
 * When a connection fails after COMMIT was sent, the client cannot tell from the wire whether the
 * transaction committed. Every flush therefore asks for its transaction id and server process id
 * right after BEGIN, in the same pipeline (no extra round trip), and on such a failure this module
 * asks the server on a fresh connection. Needs PostgreSQL 13 (`pg_current_xact_id`, `pg_xact_status`).
 */

/** First statement after BEGIN without a ledger: the transaction id (assigned now) and the server process. */
export const CAPTURE_TRANSACTION = 'select pg_current_xact_id()::text as xid, pg_backend_pid() as pid'

/** A flush's ledger token (uuid v7: tokens of one period sit together in the ledger's index). */
export const newToken = (): string => uuidv7()

export type Outcome = 'committed' | 'rolled-back' | 'unknown'

/** What the client knows about a transaction whose connection failed. */
export interface InFlight {
  /** From CAPTURE_TRANSACTION, when its answer arrived. */
  readonly xid: string | undefined
  /** The server process that ran it, when known. */
  readonly pid: number | undefined
  /** The token the flush wrote to the outcome ledger in its transaction, when there is a ledger. */
  readonly ledger?: { readonly ledger: Ledger; readonly token: string } | undefined
}

/** How long Flushwave keeps asking after a failed flush: its promise settles within flushTimeoutMs plus this. */
export const OUTCOME_BUDGET_MS = 5_000

/** Longest one probe attempt may take before it is abandoned and retried on a new connection. */
const ATTEMPT_MS = 1_000

/**
 * The transaction's fate, asked on another connection. A transaction still in progress (its server
 * process has not noticed that the client is gone: it waits on a lock, or on a stalled network) is
 * ended with pg_terminate_backend, which rolls it back unless COMMIT won the race, and asked about
 * again. Failed probes are retried until `deadline` (a performance.now() time); past it, 'unknown'.
 */
export async function resolveOutcome(open: OpenProbe, flight: InFlight, deadline: number, evidence?: Evidence): Promise<Outcome> {
  let xid = flight.xid
  let terminated = false
  for (let attempt = 0; performance.now() < deadline; attempt++) {
    const connection = open()
    const probe: Probe = (text, params) => withDeadline(connection.probe(text, params), Math.min(deadline, performance.now() + ATTEMPT_MS), timedOut)
    try {
      // With a ledger, only the ledger: the transaction id and server process were the old
      // server's, and after a failover the new primary hands the same ids to other transactions
      // (seen on the Patroni cluster: pg_xact_status said 'committed' of a flush that was lost).
      if (flight.ledger) return await byLedger(connection.probe, open, flight.ledger, deadline)
      if (xid === undefined) {
        // Not even the first answer arrived. If the server process is inside a transaction, that
        // is this flush's: end it and take its id from pg_stat_activity (32 bits, widened here).
        const [row] = flight.pid === undefined ? [] : await probe(TERMINATE_AND_WIDEN, [String(flight.pid)])
        if (row === undefined) {
          // No transaction to ask about: it is over, or never began. Rows it inserted can still tell.
          if (evidence === undefined) return 'unknown'
          const [[found] = []] = await probe(evidence.text, evidence.params as string[])
          return Number(found) === evidence.rows ? 'committed' : 'unknown'
        }
        xid = String(row[0])
        terminated = true
      }
      for (;;) {
        const [[status] = []] = await probe('select pg_xact_status($1::xid8)', [xid])
        if (status === 'committed') return 'committed'
        if (status === 'aborted') return 'rolled-back'
        // null: older than the server keeps statuses for, or an id the server never used.
        if (status !== 'in progress') return 'unknown'
        if (!terminated && flight.pid !== undefined) {
          await probe('select pg_terminate_backend($1::int4)', [String(flight.pid)])
          terminated = true
        }
        await sleep(20)
        if (performance.now() >= deadline) return 'unknown'
      }
    } catch (error) {
      if (neverDurable(error)) return 'rolled-back'
      // This connection failed or hung: try again on a new one until the deadline.
    } finally {
      await connection.close().catch(() => undefined)
    }
    await sleep(Math.min(250, 20 * 2 ** attempt))
  }
  return 'unknown'
}

/**
 * The ledger's answer (see sql/render-ledger.ts). The probe claims the token: a row back means the
 * flush's transaction never wrote it and, the token now being taken, never will: rolled back. No row
 * means the token is taken: by the flush, which therefore committed, or by an earlier probe. Either
 * answer is durable: the claim commits a write of its own, so under synchronous replication it is
 * acknowledged only once the standby has the WAL up to it, the flush's commit included (a server
 * about to be demoted and rewound cannot acknowledge it, and the probe ends 'unknown'). While
 * the flush's transaction is still open the claim waits on it (the token's unique index); if that
 * lasts, the transactions it waits on are ended (pg_blocking_pids names exactly them), which works
 * without knowing the flush's server process, behind a pooler too.
 */
async function byLedger(probe: Probe, open: OpenProbe, flight: { readonly ledger: Ledger; readonly token: string }, deadline: number): Promise<Outcome> {
  const bounded = <T>(work: Promise<T>) => withDeadline(work, deadline, timedOut)
  const [[self] = []] = await bounded(probe('select pg_backend_pid()', []))
  const claim = renderClaim(flight.ledger, flight.token)
  const claiming = probe(claim.text, claim.params as string[])
  let claimed = await Promise.race([claiming, sleep(CLAIM_PATIENCE_MS).then(() => WAITING)])
  if (claimed === WAITING) {
    const helper = open()
    try {
      await bounded(helper.probe('select pg_terminate_backend(b) from unnest(pg_blocking_pids($1::int4)) as b', [String(self)]))
    } finally {
      await helper.close().catch(() => undefined)
    }
    claimed = await bounded(claiming)
  }
  if (claimed.length > 0) return 'rolled-back'
  const check = renderClaimedBy(flight.ledger, flight.token)
  const [[byProbe] = []] = await bounded(probe(check.text, check.params as string[]))
  if (byProbe === undefined) return 'unknown' // the token vanished: pruned, so far older than any flush in doubt
  return byProbe === true || byProbe === 't' ? 'rolled-back' : 'committed'
}

/** How long a claim waits on the flush's open transaction before ending it. */
const CLAIM_PATIENCE_MS = 200
const WAITING = 'waiting' as const

/**
 * After a crash, an id the server hands out again if the transaction never reached the WAL: asked
 * about it, the server says "transaction ID … is in the future". Nothing of it survived.
 */
function neverDurable(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | null
  return e?.code === '22023' && typeof e.message === 'string' && e.message.includes('is in the future')
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const timedOut = () => new Error('outcome probe timed out')

/**
 * Terminates the process if it is inside a transaction with an id, and returns that id as xid8:
 * pg_stat_activity shows 32 bits; the epoch comes from the next id to be assigned.
 */
const TERMINATE_AND_WIDEN = `select (((next >> 32) - (case when xid > (next & 4294967295) then 1 else 0 end)) << 32 | xid)::text, pg_terminate_backend(pid)
from (select pid, backend_xid::text::int8 as xid, pg_snapshot_xmax(pg_current_snapshot())::text::int8 as next
      from pg_stat_activity where pid = $1::int4 and backend_xid is not null) a`
