import { quoteIdent } from '../schema/quote.js'
import type { Statement } from './statement.js'

/**
 * Idempotency keys (`orm.unitOfWork(work, { idempotencyKey })`): one row per key, written by the
 * unit of work's own flush, in its transaction, with the result the work returned. A second run
 * with the key finds the row and answers with that result instead of writing again; a run whose
 * COMMIT answer was lost is settled by the outcome ledger as any flush is, and a retry after an
 * unknown outcome finds the row if it committed. Rows older than `keepSeconds` no longer count and
 * are pruned.
 */
export const DEFAULT_IDEMPOTENCY_TABLE = 'flushwave_idempotency'

/** A day: longer than any client retries a request, short enough to keep the table small. */
export const DEFAULT_IDEMPOTENCY_KEEP_SECONDS = 86_400

export interface IdempotencyStore {
  /** Quoted table name. */
  readonly table: string
  readonly keepSeconds: number
}

export function idempotencyStore(table: string, keepSeconds: number): IdempotencyStore {
  return { table: quoteIdent(table), keepSeconds }
}

/** The table and the index its pruning uses. Part of createTablesSql with `idempotencyKeys`; for existing databases, run it once. */
export function idempotencyTableSql(table: string = DEFAULT_IDEMPOTENCY_TABLE): string[] {
  const quoted = quoteIdent(table)
  return [
    `create table if not exists ${quoted} (key text primary key, result jsonb not null, at timestamptz not null default now())`,
    `create index if not exists ${quoteIdent(`${table}_at_idx`)} on ${quoted} (at)`,
  ]
}

/** Prefix of the error the record statement raises when the key was used already. */
export const REPLAY_MARK = 'flushwave-idempotency-key-used:'

/**
 * Records the key and the work's result, inside the flush's transaction (right after the outcome
 * capture). A live row of the key makes it fail, and with it the transaction, before any of the
 * flush's writes: a concurrent run of the same key waits here on the row's lock until the first
 * commits (then fails) or rolls back (then writes). An expired row is taken over. The error comes
 * from a count over the insert's rows, which the planner cannot fold away.
 */
export function renderRecord(store: IdempotencyStore, key: string, resultJson: string): Statement {
  return {
    text:
      `with recorded as (insert into ${store.table} as r (key, result) values ($1::text, $2::jsonb) on conflict (key) do update ` +
      `set result = excluded.result, at = now() where r.at < now() - make_interval(secs => $3::int4) returning 1) ` +
      `select ('${REPLAY_MARK}' || count(*))::int4 from recorded having count(*) = 0`,
    params: [key, resultJson, String(store.keepSeconds)],
  }
}

/** The result a live key recorded, as JSON text. */
export function renderRecorded(store: IdempotencyStore, key: string): Statement {
  return {
    text: `select result::text from ${store.table} where key = $1::text and at >= now() - make_interval(secs => $2::int4)`,
    params: [key, String(store.keepSeconds)],
  }
}

/** Deletes up to 256 expired keys, skipping rows another pruner holds. */
export function renderPruneKeys(store: IdempotencyStore): Statement {
  return {
    text:
      `delete from ${store.table} where key in (select key from ${store.table} ` +
      `where at < now() - make_interval(secs => $1::int4) order by at limit 256 for update skip locked)`,
    params: [String(store.keepSeconds)],
  }
}
