import type { Op } from '../plan/ops.js'
import type { Plan } from '../plan/plan.js'
import { returnsRows } from './returning.js'
import type { WriteStatement } from './statement.js'
import { renderCascadeDelete, renderCascadeNull, renderCascadeSoftDelete, renderDelete, renderLiveGuard, renderUnlinkCycle } from './render-delete.js'
import { renderCopy } from './render-copy.js'
import { renderInsert } from './render-insert.js'
import { renderLinkDelete, renderLinkInsert, renderLinkPurge } from './render-links.js'
import { renderUpdate } from './render-update.js'
import { renderLock } from './row-sets.js'
import { nothingShared, sharedDecoded } from './write-values.js'

/**
 * Renders ops to SQL. A statement's text depends only on the table, on whether it writes one row
 * or more, for tables with timestamps on whether its rows share them (sharedDecoded), and for a
 * one-row update on which columns it sets (oneRowUpdate); never on the row count. One bind
 * parameter per column: an array in the column's wire type (ColumnType.wire), or a scalar (one row,
 * or a value the rows share) in the column's own type. So each table has a few insert, update and
 * delete shapes, which postgres.js prepares once per connection. A large insert the planner chose
 * for COPY goes as COPY instead (plan/copy-policy.ts, render-copy.ts).
 */
export function renderPlan(plan: Plan): WriteStatement[][] {
  const waves: WriteStatement[][] = []
  for (const wave of plan.waves) {
    const statements: WriteStatement[] = []
    for (const op of wave.ops) {
      if (op.kind === 'insert' && op.copy) statements.push(renderCopy(op))
      else statements.push(renderOp(op))
    }
    waves.push(statements)
  }
  return waves
}

/**
 * `form` is for warm-ups, which prepare each shape by running it with no rows: 'shared' renders an
 * insert or update in its shared-values form (see sharedDecoded) whatever its rows.
 */
export function renderOp(op: Op, form: 'rows' | 'shared' = 'rows'): WriteStatement {
  const { text, params } = renderText(op, form)
  return { op, text, params, returnsRows: returnsRows(op) }
}

function renderText(op: Op, form: 'rows' | 'shared'): { text: string; params: (string | null)[] } {
  switch (op.kind) {
    case 'insert':
      return renderInsert(op, form === 'shared' ? nothingShared(op.entity) : sharedDecoded(op))
    case 'update':
      return renderUpdate(op, form === 'shared' ? nothingShared(op.entity) : sharedDecoded(op))
    case 'delete':
      return renderDelete(op)
    case 'link-insert':
      return renderLinkInsert(op)
    case 'link-delete':
      return renderLinkDelete(op)
    case 'link-purge':
      return renderLinkPurge(op)
    case 'cascade-delete':
      return renderCascadeDelete(op)
    case 'cascade-null':
      return renderCascadeNull(op)
    case 'cascade-soft-delete':
      return renderCascadeSoftDelete(op)
    case 'live-guard':
      return renderLiveGuard(op)
    case 'unlink-cycle':
      return renderUnlinkCycle(op)
    case 'lock':
      return renderLock(op)
  }
}
