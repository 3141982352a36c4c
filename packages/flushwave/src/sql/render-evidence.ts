import type { Statement, WriteStatement } from './statement.js'
import { arrayLiteral } from './array-literal.js'

/** A count that equals `rows` only if the flush committed. */
export interface Evidence extends Statement {
  readonly rows: number
}

/**
 * Evidence of a commit that does not need the transaction id: the rows a flush inserted with ids
 * from a sequence. No other writer holds those ids, so if every one of them exists, this flush
 * committed them. (Their absence proves nothing: someone may have deleted them since.) Ids the
 * application provides, or uuids it may choose, could belong to another row: they are not used.
 */
export function renderEvidence(waves: readonly (readonly WriteStatement[])[]): Evidence | undefined {
  for (const wave of waves) {
    for (const { op } of wave) {
      if (op.kind !== 'insert' || op.entity.id.strategy !== 'sequence' || op.ids.length === 0) continue
      const { quotedTable, id } = op.entity
      return {
        text: `select count(*)::int8 from ${quotedTable} where ${id.quoted} = any($1::${id.type.sqlType}[])`,
        params: [arrayLiteral(op.ids)],
        rows: op.ids.length,
      }
    }
  }
  return undefined
}
