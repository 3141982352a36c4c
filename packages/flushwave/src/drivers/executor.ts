import type { CopyPolicy } from '../plan/copy-policy.js'
import type { Op } from '../plan/ops.js'
import type { IdBlocks, IdRequest } from '../sql/render-ids.js'
import type { SessionOptions, TransactionOptions } from '../sql/render-session.js'

export type { IdBlocks }
import type { Statement, WriteStatement } from '../sql/statement.js'

/** Runs rendered SQL. Only executors do I/O; everything before them is pure. */
export interface Executor {
  /**
   * A read outside any flush; rows as arrays in select-list order, or as objects keyed by column
   * name when the statement says `objects` (`em.query`).
   */
  read(statement: Statement): Promise<unknown[][]>
  /**
   * Runs every wave in one transaction (BEGIN, the waves, COMMIT) and resolves only once it committed.
   * On any failure it throws a FlushwaveError, and the transaction is over and the connection released.
   * With `ids`, it also fetches them (as `nextIds` does) after COMMIT in the same pipeline.
   */
  write(waves: readonly (readonly WriteStatement[])[], ids?: CarriedIds, options?: WriteOptions): Promise<WriteOutcome>
  /** Whether `write` sends `WriteOptions.record` (idempotent units of work need it). */
  readonly recordsKeys?: boolean
  /** Which inserts may be written as `copy … from stdin` (plan/copy-policy.ts); unset: none. */
  readonly copyPolicy?: CopyPolicy
  /**
   * A read of any size in batches of `batchSize` rows (arrays in select-list order), through a
   * server-side cursor: one batch in memory at a time. Optional: `em.stream` needs it.
   */
  stream?(statement: Statement, batchSize: number): AsyncIterableIterator<unknown[][]>
  /** Fetches `count` values from the sequence behind each table's id column, in one statement. */
  nextIds(requests: readonly IdRequest[]): Promise<IdBlocks>
  /**
   * Runs `fn` with an executor bound to one database transaction, committed when `fn` resolves and
   * rolled back when it throws. That executor's `write` sends no BEGIN or COMMIT of its own.
   * `options` (isolation, read only, settings) are only passed to an executor with `withSession`.
   */
  transaction<T>(fn: (executor: Executor) => Promise<T>, options?: TransactionOptions): Promise<T>
  /**
   * The same executor with `session`'s settings applied in every transaction it opens: its flushes'
   * (right after BEGIN, in the same pipeline), `transaction()`'s, and the one its reads then run in.
   * Without it, the executor takes no settings and no transaction options: asking is an error.
   */
  withSession?(session: SessionOptions): Executor
  /**
   * Runs each statement once on every connection of the pool, so that none of them is cold later.
   * An executor that can also fetch `ids` in the same wave answers them in `ids`; otherwise the
   * caller fetches them with `nextIds`.
   */
  warmUp(statements: readonly Statement[], ids?: readonly IdRequest[]): Promise<WarmUp>
  /**
   * With replicas: the same executor whose reads see every commit up to `position` too (a WAL
   * position a flush returned, or PRIMARY: reads go to the primary). Without replicas it is missing.
   */
  after?(position: Position): Executor
  /** What this executor's reads are sure to see (see `after`); undefined: no requirement. */
  readonly position?: Position | undefined
}

/** Reads must go to the primary: the WAL position they must see is not known (a transaction's commit). */
export const PRIMARY = 'primary'

/** A WAL position (`16/B374D848`) reads must see, or PRIMARY. */
export type Position = string

/**
 * Ids a write fetches after its COMMIT, in the same pipeline: the id pool's refill, at no round
 * trip of its own (see IdPool.dueRefill).
 */
export interface CarriedIds {
  readonly requests: readonly IdRequest[]
  /**
   * Takes their blocks once the answer came, whatever became of the transaction. Not called when
   * it failed or never came (a failed id statement costs the pool a fetch, never the flush), nor
   * by an executor that cannot carry ids: the caller then fetches them itself.
   */
  landed(blocks: IdBlocks): void
}

/** More for one write to send, in its transaction. */
export interface WriteOptions {
  /** An idempotency key's record (render-idempotency.ts), sent first after the outcome capture; with it, a write with no waves still commits a transaction. */
  readonly record?: Statement
}

/** What an executor's warm-up did. */
export interface WarmUp {
  readonly connections: number
  /** Statements that were new to a connection, summed over connections. */
  readonly prepared: number
  readonly durationMs: number
  /**
   * False when the driver keeps no prepared statements (postgres.js with `prepare: false`, for
   * transaction-mode poolers; knex): nothing could be prepared ahead. Missing means unknown.
   */
  readonly prepares?: boolean
  /** Round trips waited on, counted by the executor (connections warmed in parallel count once). */
  readonly roundTrips?: number
  /** The blocks for `ids`, when the executor fetched them in the warm-up wave. */
  readonly ids?: IdBlocks
}

export interface WriteOutcome {
  /** Rows affected by each statement, wave by wave. */
  readonly rowCounts: readonly (readonly number[])[]
  /**
   * The rows of each statement whose op returns them (`returnsRows`), as arrays in select-list
   * order; empty when recovered. An executor that leaves it out (one written before it existed)
   * still flushes, but increments are then forgotten rather than read back (see
   * `em.increment`), upserted entities detached, and cascades followed by the client's guess.
   */
  readonly returned?: ReadonlyMap<Op, readonly (readonly unknown[])[]>
  /** Network round trips waited on, counted from what the driver did (see each executor). */
  readonly roundTrips: number
  /** Shapes the connection had not prepared yet (sent with their Parse; see inline-prepare.ts). */
  readonly coldStatements: number
  /**
   * Set when the connection failed after COMMIT was sent and the server, asked on another
   * connection, said the transaction committed. `rowCounts` is then empty.
   */
  readonly recovered?: Recovery
  /** The primary's WAL position after COMMIT, asked in the same pipeline by an executor with replicas. */
  readonly lsn?: string
}

export interface Recovery {
  /**
   * The committed transaction (`pg_current_xact_id()`), when its answer arrived; without it, the
   * commit was proven by the rows the flush inserted with sequence ids.
   */
  readonly transactionId: string | undefined
  /** The connection failure (or timeout) that hid the COMMIT's answer. */
  readonly cause: unknown
}

export type QueryPhase = 'read' | 'write' | 'allocate'

/** One statement as sent, for `onQuery`. */
export interface QueryEvent {
  readonly phase: QueryPhase
  readonly text: string
  readonly params: readonly (string | null)[]
}
