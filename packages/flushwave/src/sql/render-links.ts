import { rootIds, type LinkDeleteOp, type LinkInsertOp, type LinkPurgeOp } from '../plan/ops.js'
import type { EntityMeta, ManyToManyMeta } from '../schema/meta.js'
import { arrayLiteral } from './array-literal.js'
import { quoteIdent } from '../schema/quote.js'
import { matches } from './row-sets.js'

/** Join-table statements: adding, removing and purging many-to-many links. */

function linkColumns(link: { owner: EntityMeta; target: EntityMeta; ownColumn: string; targetColumn: string }) {
  return {
    own: quoteIdent(link.ownColumn),
    target: quoteIdent(link.targetColumn),
    ownType: link.owner.id.type.sqlType,
    targetType: link.target.id.type.sqlType,
  }
}

export function renderLinkInsert(op: LinkInsertOp) {
  const c = linkColumns(op.link)
  return {
    // Adding a link twice writes one row: the join table's primary key makes the second a no-op.
    // Links that each have a new end cannot be there yet, and skip the speculative insert, which
    // costs the server time (docs/design-notes.md, "Link inserts without on conflict").
    text:
      `insert into ${op.link.quotedTable} (${c.own}, ${c.target}) ` +
      `select * from unnest($1::${c.ownType}[], $2::${c.targetType}[])${op.mayExist ? ' on conflict do nothing' : ''}`,
    params: [arrayLiteral(op.owners, c.ownType), arrayLiteral(op.targets, c.targetType)],
  }
}

/**
 * Deletes the join-table rows `found` selects (the table aliased `j`, with its joins and conditions),
 * locked first in key order (owner, then target) as lockedInIdOrder locks a table's rows: two
 * flushes that unlink or purge shared links would otherwise lock them in heap order and could
 * deadlock.
 */
function deleteLinksInKeyOrder(link: ManyToManyMeta, found: string): string {
  const c = linkColumns(link)
  return (
    `with d as (select j.${c.own} as o, j.${c.target} as t from ${found} order by 1, 2 for update of j) ` +
    `delete from ${link.quotedTable} as j using d where j.${c.own} = d.o and j.${c.target} = d.t`
  )
}

export function renderLinkDelete(op: LinkDeleteOp) {
  const c = linkColumns(op.link)
  return {
    text: deleteLinksInKeyOrder(
      op.link,
      `${op.link.quotedTable} as j join unnest($1::${c.ownType}[], $2::${c.targetType}[]) as a(o, t) on j.${c.own} = a.o and j.${c.target} = a.t`,
    ),
    params: [arrayLiteral(op.owners, c.ownType), arrayLiteral(op.targets, c.targetType)],
  }
}

export function renderLinkPurge(op: LinkPurgeOp) {
  const c = linkColumns(op.link)
  return {
    text: deleteLinksInKeyOrder(op.link, `${op.link.quotedTable} as j where ${matches(`j.${op.side === 'owner' ? c.own : c.target}`, op.rows)}`),
    params: [arrayLiteral(rootIds(op.rows))],
  }
}
