import type { DeleteOp, InsertOp, LinkDeleteOp, LinkInsertOp, LinkPurgeOp, Op, UpdateOp } from '../plan/ops.js'
import type { Plan } from '../plan/plan.js'
import type { EntityMeta } from '../schema/meta.js'
import { arrayLiteral, boolArrayLiteral } from './array-literal.js'
import { quoteIdent } from './quote.js'
import type { WriteStatement } from './statement.js'

/**
 * Renders ops to SQL. A statement's text depends only on the table, never on the row count or on
 * which columns changed: one bind parameter per column (an array), so each table has one insert,
 * one update and one delete shape, which postgres.js prepares once per connection.
 */
export function renderPlan(plan: Plan): WriteStatement[][] {
  return plan.waves.map((wave) => wave.ops.map(renderOp))
}

export function renderOp(op: Op): WriteStatement {
  switch (op.kind) {
    case 'insert':
      return { op, ...renderInsert(op) }
    case 'update':
      return { op, ...renderUpdate(op) }
    case 'delete':
      return { op, ...renderDelete(op) }
    case 'link-insert':
      return { op, ...renderLinkInsert(op) }
    case 'link-delete':
      return { op, ...renderLinkDelete(op) }
    case 'link-purge':
      return { op, ...renderLinkPurge(op) }
  }
}

function renderInsert(op: InsertOp) {
  const e = op.entity
  const names = [e.id.quoted, ...e.fields.map((f) => f.quoted)].join(', ')
  const arrays = [`$1::${e.id.type.sqlType}[]`, ...e.fields.map((f, i) => `$${i + 2}::${f.type.sqlType}[]`)].join(', ')
  return {
    text: `insert into ${e.quotedTable} (${names}) select * from unnest(${arrays})`,
    params: [arrayLiteral(op.ids), ...op.columns.map(arrayLiteral)],
  }
}

function renderUpdate(op: UpdateOp) {
  const e = op.entity
  // d(k, v1, s1, v2, s2, …): the key, then per field its new value and whether this row sets it.
  const sets = e.fields.map((f, i) => `${f.quoted} = case when d.s${i + 1} then d.v${i + 1} else t.${f.quoted} end`)
  const arrays = [`$1::${e.id.type.sqlType}[]`]
  const aliases = ['k']
  e.fields.forEach((f, i) => {
    arrays.push(`$${2 * i + 2}::${f.type.sqlType}[]`, `$${2 * i + 3}::bool[]`)
    aliases.push(`v${i + 1}`, `s${i + 1}`)
  })
  return {
    text:
      `update ${e.quotedTable} as t set ${sets.join(', ')} ` +
      `from unnest(${arrays.join(', ')}) as d(${aliases.join(', ')}) where t.${e.id.quoted} = d.k`,
    params: [arrayLiteral(op.ids), ...op.columns.flatMap((c) => [arrayLiteral(c.values), boolArrayLiteral(c.set)])],
  }
}

function renderDelete(op: DeleteOp) {
  const e = op.entity
  return {
    text: `delete from ${e.quotedTable} where ${e.id.quoted} = any($1::${e.id.type.sqlType}[])`,
    params: [arrayLiteral(op.ids)],
  }
}

function linkColumns(link: { owner: EntityMeta; target: EntityMeta; ownColumn: string; targetColumn: string }) {
  return {
    own: quoteIdent(link.ownColumn),
    target: quoteIdent(link.targetColumn),
    ownType: link.owner.id.type.sqlType,
    targetType: link.target.id.type.sqlType,
  }
}

function renderLinkInsert(op: LinkInsertOp) {
  const c = linkColumns(op.link)
  return {
    // Adding a link twice writes one row: the join table's primary key makes the second a no-op.
    text:
      `insert into ${op.link.quotedTable} (${c.own}, ${c.target}) ` +
      `select * from unnest($1::${c.ownType}[], $2::${c.targetType}[]) on conflict do nothing`,
    params: [arrayLiteral(op.owners), arrayLiteral(op.targets)],
  }
}

function renderLinkDelete(op: LinkDeleteOp) {
  const c = linkColumns(op.link)
  return {
    text:
      `delete from ${op.link.quotedTable} as j using unnest($1::${c.ownType}[], $2::${c.targetType}[]) as d(o, t) ` +
      `where j.${c.own} = d.o and j.${c.target} = d.t`,
    params: [arrayLiteral(op.owners), arrayLiteral(op.targets)],
  }
}

function renderLinkPurge(op: LinkPurgeOp) {
  const c = linkColumns(op.link)
  const [column, type] = op.side === 'owner' ? [c.own, c.ownType] : [c.target, c.targetType]
  return {
    text: `delete from ${op.link.quotedTable} where ${column} = any($1::${type}[])`,
    params: [arrayLiteral(op.ids)],
  }
}
