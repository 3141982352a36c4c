import { quoteIdent } from '../schema/quote.js'
import type { Statement } from './statement.js'

/**
 * The outcome ledger: one small row per flush, written by the flush's own transaction, so that
 * when the connection fails the row's presence says whether the transaction committed, whatever
 * came back over the wire (see drivers/outcome.ts). A probe that finds no row writes one itself,
 * marked `probe`: from then on the flush's own insert of that token can only fail, so "rolled back"
 * stays true even if its pipeline reaches the server later.
 */
export interface Ledger {
  /** Quoted table name. */
  readonly table: string
}

export const DEFAULT_LEDGER_TABLE = 'flushwave_outcome'

export function ledger(table: string): Ledger {
  return { table: quoteIdent(table) }
}

/** The table and the index its pruning uses. Part of createTablesSql; for existing databases, run it once. */
export function ledgerTableSql(table: string = DEFAULT_LEDGER_TABLE): string[] {
  const quoted = quoteIdent(table)
  return [
    `create table if not exists ${quoted} (token uuid primary key, probe boolean not null default false, at timestamptz not null default now())`,
    `create index if not exists ${quoteIdent(`${table}_at_idx`)} on ${quoted} (at)`,
  ]
}

/**
 * The first statement after BEGIN: writes the token and returns the transaction id and the server
 * process, which flushes asked for already, so the ledger costs no statement. `prune` also deletes
 * up to 64 tokens older than `keepSeconds`, skipping any another flush is deleting: an occasional
 * flush keeps the table small without a job of its own and without waiting on anyone.
 */
export function renderCapture(ledger: Ledger, token: string, prune: false | { keepSeconds: number }): Statement {
  const insert = `insert into ${ledger.table} (token) values ($1::uuid) returning pg_current_xact_id()::text as xid, pg_backend_pid() as pid`
  if (!prune) return { text: insert, params: [token] }
  return {
    text:
      `with pruned as (delete from ${ledger.table} where token in ` +
      `(select token from ${ledger.table} where at < now() - make_interval(secs => $2::int4) order by at limit 64 for update skip locked)) ` +
      insert,
    params: [token, String(prune.keepSeconds)],
  }
}

/**
 * The probe's claim: a row back means the flush never wrote its token and now never will. It always
 * writes (a transactional WAL message, as the id fetch does), so that its commit, and with it every
 * commit it saw, is on the synchronous standby before it answers, also when it finds the token taken.
 */
export function renderClaim(ledger: Ledger, token: string): Statement {
  return {
    text:
      `with durable as materialized (select pg_logical_emit_message(true, 'flushwave', 'claim')) ` +
      `insert into ${ledger.table} (token, probe) select $1::uuid, true from durable on conflict (token) do nothing returning 1`,
    params: [token],
  }
}

/** After a claim found the token taken: by the flush (it committed), or by an earlier probe. */
export function renderClaimedBy(ledger: Ledger, token: string): Statement {
  return { text: `select probe from ${ledger.table} where token = $1::uuid`, params: [token] }
}
