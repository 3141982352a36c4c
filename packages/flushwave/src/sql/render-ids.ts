import { arrayLiteral } from './array-literal.js'
import type { Statement } from './statement.js'

export interface IdRequest {
  readonly quotedTable: string
  readonly column: string
  readonly count: number
}

/**
 * One statement for every table's block of ids: `count` nextval calls on the sequence behind each
 * id column (serial or identity). Rows: the 1-based request index, then the id as text.
 */
export function renderNextIds(requests: readonly IdRequest[]): Statement {
  return {
    text:
      'select s.i, nextval(pg_get_serial_sequence(s.tbl, s.col))::text from unnest($1::text[], $2::text[], $3::int4[]) ' +
      'with ordinality as s(tbl, col, n, i), generate_series(1, s.n)',
    params: [
      arrayLiteral(requests.map((r) => r.quotedTable)),
      arrayLiteral(requests.map((r) => r.column)),
      arrayLiteral(requests.map((r) => String(r.count))),
    ],
  }
}
