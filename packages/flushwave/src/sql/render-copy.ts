import type { InsertOp } from '../plan/ops.js'
import type { WriteStatement } from './statement.js'

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
  const fields = e.fields
  const columns = [...(e.key ? [] : [e.id.quoted]), ...fields.map((f) => f.quoted)]
  // Per field: its values, how a wire text becomes the column's own, and whether it may need escaping.
  const values = fields.map((_, i) => op.columns[i]!)
  const toText = fields.map((f) => f.type.wire?.toText)
  const plain = fields.map((f) => PLAIN_TYPES.has(f.type.sqlType))
  // Lines joined once: appending each to one string built a rope of 100,000 pieces that the
  // driver then had to flatten, twice the time of the join.
  const lines = new Array<string>(op.ids.length + 1)
  for (let r = 0; r < op.ids.length; r++) {
    // An id (a number or a uuid) needs no escaping.
    let line = e.key ? '' : op.ids[r]!
    for (let i = 0; i < fields.length; i++) {
      const value = values[i]![r] ?? null
      const text = value === null ? '\\N' : toText[i] === undefined ? value : toText[i]!(value)
      const escaped = value === null || plain[i] ? text : copyText(text)
      line = e.key && i === 0 ? escaped : `${line}\t${escaped}`
    }
    lines[r] = line
  }
  lines[op.ids.length] = '' // the last row's newline
  return { op, text: `copy ${e.quotedTable} (${columns.join(', ')}) from stdin`, params: [], returnsRows: false, copy: lines.join('\n') }
}

/** Types whose text has no backslash, tab, newline or carriage return: written as they are. */
const PLAIN_TYPES = new Set(['int2', 'int4', 'int8', 'numeric', 'float4', 'float8', 'bool', 'uuid', 'date', 'time', 'timestamp', 'timestamptz', 'interval'])

/** A value's text as COPY's text format has it: backslash, newline, carriage return and tab escaped. */
function copyText(value: string): string {
  return /[\\\n\r\t]/.test(value) ? value.replace(/[\\\n\r\t]/g, escape) : value
}

const ESCAPES: Readonly<Record<string, string>> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' }
const escape = (c: string): string => ESCAPES[c]!
