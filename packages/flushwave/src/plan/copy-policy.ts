import type { EntityMeta } from '../schema/meta.js'
import type { InsertOp, Op } from './ops.js'

/**
 * When an insert goes as `copy … from stdin` (sql/render-copy.ts) rather than as one statement of
 * arrays (`unnest`). Per table, per flush, from a cost model whose constants were measured here
 * (docs/design-notes.md, "COPY in the pipeline, when it pays"): one-table flushes through Flushwave, COPY against
 * unnest, medians of 7, on postgres.js, node-postgres and knex.
 *
 * - Types. A column whose values travel in another form than their text (timestamps as epoch
 *   milliseconds, bytea as hex, arrays: ColumnType.wire) must be turned into text for COPY, and the
 *   server then parses that text: a table with a timestamptz column took 1.04–1.28× unnest's time by
 *   COPY from 10,000 to 30,000 rows. Tables whose every column goes as it is gain.
 * - Rows. Such a table (id, text) took 0.79–0.89× at 10,000 rows and 0.65–0.95× at 20,000;
 *   below a few thousand the two were within noise.
 * - Round trips. node-postgres and knex send a COPY's rows behind its command in the flush's
 *   pipeline; postgres.js waits for the server's CopyInResponse first, one round trip more. There
 *   a COPY must save more than that round trip: at least COPY_SAVES_MS_PER_ROW per row, the least
 *   gain measured at 10,000 rows and up.
 *
 * `copyRows` set by the application overrides the model: every plain insert of that many rows or
 * more goes by COPY, whatever its types and round trips.
 */
export interface CopyPolicy {
  /** Inserts of at least this many rows may go by COPY. */
  readonly minRows: number
  /** The cost model decides (copyRows not set); false: the application's `copyRows` does. */
  readonly auto: boolean
  /** What a COPY costs beyond the pipeline on this executor: a round trip (postgres.js), or 0. */
  readonly extraMs: number
}

/** Rows from which the model considers COPY (see above). */
export const AUTO_COPY_ROWS = 10_000
/** The least a COPY saved per row, in ms, from AUTO_COPY_ROWS rows up (0.5 µs: 10,000 rows save 5 ms). */
export const COPY_SAVES_MS_PER_ROW = 0.0005

/**
 * Whether an insert goes by COPY: a plain insert that needs no rows back (no upsert, no columns the
 * server fills), large enough, and (for the model) of a table whose columns all go as text and
 * whose rows save more than the round trip COPY may cost. COPY sends its rows as data, not
 * parameters, so such an insert is never split by `maxRows`.
 */
export function copies(op: Op, policy: CopyPolicy | undefined): op is InsertOp {
  if (policy === undefined || op.kind !== 'insert' || op.ids.length < policy.minRows || op.upsert !== undefined || op.omit !== undefined) return false
  if (!policy.auto) return true
  return op.ids.length * COPY_SAVES_MS_PER_ROW > policy.extraMs && asText(op.entity)
}

/** Whether every column of the table travels as its text (no ColumnType.wire form to convert). */
function asText(entity: EntityMeta): boolean {
  const fields = entity.fields
  for (let i = 0; i < fields.length; i++) if (fields[i]!.type.wire !== undefined) return false
  return true
}
