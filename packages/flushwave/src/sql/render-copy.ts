import type { InsertOp } from '../plan/ops.js'
import type { CopyRows, WriteStatement } from './statement.js'

/**
 * A large insert as `COPY … FROM STDIN` (chosen by plan/copy-policy.ts), every value as its column
 * type's text. Hand written, COPY cost the server about half of unnest's arrays at 100,000 rows
 * (../shared/design/pipelining.md, "Bulk"); through Flushwave it pays for tables whose values go
 * as their text (docs/design-notes.md, "COPY in the pipeline, when it pays"). On node-postgres the
 * rows follow the command (extended protocol) without waiting for the server's CopyInResponse,
 * inside the flush's pipeline: no round trip of their own; on any error the server discards them
 * up to the command's Sync, so the transaction fails like any statement's (tested on the wire: a
 * missing table, a duplicate key, malformed or null data, a transaction failed before).
 * postgres.js waits for the CopyInResponse: one round trip more (copy-in.ts). Only plain inserts go
 * this way (`copies`): an upsert needs its conflict clause, and columns the server fills need
 * RETURNING, which COPY has not.
 */
export function renderCopy(op: InsertOp): WriteStatement {
  const e = op.entity
  const columns = [...(e.key ? [] : [e.id.quoted]), ...e.fields.map((f) => f.quoted)]
  return { op, text: `copy ${e.quotedTable} (${columns.join(', ')}) from stdin`, params: [], returnsRows: false, copy: new CopyLines(op) }
}

/**
 * Rows per piece of COPY data. Small enough that the server is storing the first piece while the
 * client renders the next (a flush of 100,000 rows rendered them all, 10 to 25 ms, before it sent
 * one), large enough that a piece costs the driver one write.
 */
export const PIECE_ROWS = 4096

/** An insert's rows as COPY text, rendered piece by piece (see CopyRows). */
class CopyLines implements CopyRows {
  readonly rows: number
  // Per field: how a wire text becomes the column's own, and whether it may need escaping.
  private readonly toText: readonly (((text: string) => string) | undefined)[]
  private readonly plain: readonly boolean[]

  constructor(private readonly op: InsertOp) {
    this.rows = op.ids.length
    this.toText = op.entity.fields.map((f) => f.type.wire?.toText)
    this.plain = op.entity.fields.map((f) => PLAIN_TYPES.has(f.type.sqlType))
  }

  *pieces(): Generator<string> {
    for (let from = 0; from < this.rows; from += PIECE_ROWS) yield this.lines(from, Math.min(this.rows, from + PIECE_ROWS))
  }

  /** Rows `from` to `to` (exclusive), each line ended by a newline. */
  private lines(from: number, to: number): string {
    const { op, toText, plain } = this
    const keyed = op.entity.key !== undefined
    const values = op.columns
    const fields = values.length
    // Lines joined once: appending each to one string built a rope of pieces that the driver then
    // had to flatten, twice the time of the join.
    const lines = new Array<string>(to - from + 1)
    for (let r = from; r < to; r++) {
      // An id (a number or a uuid) needs no escaping.
      let line = keyed ? '' : op.ids[r]!
      for (let i = 0; i < fields; i++) {
        const value = values[i]![r] ?? null
        const text = value === null ? '\\N' : toText[i] === undefined ? value : toText[i]!(value)
        const escaped = value === null || plain[i] ? text : copyText(text)
        line = keyed && i === 0 ? escaped : `${line}\t${escaped}`
      }
      lines[r - from] = line
    }
    lines[to - from] = '' // the last row's newline
    return lines.join('\n')
  }
}

/** Types whose text has no backslash, tab, newline or carriage return: written as they are. */
const PLAIN_TYPES = new Set(['int2', 'int4', 'int8', 'numeric', 'float4', 'float8', 'bool', 'uuid', 'date', 'time', 'timestamp', 'timestamptz', 'interval'])

/** A value's text as COPY's text format has it: backslash, newline, carriage return and tab escaped. */
function copyText(value: string): string {
  return /[\\\n\r\t]/.test(value) ? value.replace(/[\\\n\r\t]/g, escape) : value
}

const ESCAPES: Readonly<Record<string, string>> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' }
const escape = (c: string): string => ESCAPES[c]!
