import { planFlush } from '../plan/planner.js'
import { insertsOf, type Changes, type LinkChange, type RowDelete, type RowUpdate } from '../plan/changes.js'
import type { Op, RowSet } from '../plan/ops.js'
import type { Schema } from '../schema/define.js'
import { renderNextIds } from './render-ids.js'
import { renderLoadByIds, renderLoadByReference, renderLoadLinks } from './render-select.js'
import { renderOp } from './render-write.js'
import { isDecoded, writesOneRow } from './write-values.js'
import type { Statement } from './statement.js'

/**
 * Every statement text a flush or a load of this schema can send, each with zero rows (empty
 * arrays; one-row shapes with nulls, which match and insert nothing): running them changes
 * nothing, and leaves each shape prepared on the connection.
 * Find queries are not here: their text follows their where clause.
 */
export function allShapes(schema: Schema): Statement[] {
  const out = new Map<string, Statement>()
  const add = (s: Statement) => out.set(s.text, { text: s.text, params: s.params })
  // Every form an op can take: its array form, and its one-row form where it has one.
  const addForms = (op: Op) => {
    add(renderOp(empty(op)))
    if (writesOneRow(op)) add(nulls(renderOp(op)))
    // An update names the columns it sets (render-write.ts: oneRowUpdate, and setModes for several
    // rows, flagged only where some rows don't set them): every column is the shape above; each
    // column alone is the commonest other (a bulk update of one column, in the multi-row form).
    if (op.kind === 'update') {
      const multiRow = op.increments === undefined && !(op.versions && op.entity.version)
      op.entity.fields.forEach((f, i) => {
        if (f.version || f.generated) return
        if (writesOneRow(op)) add(nulls(renderOp({ ...op, columns: op.columns.map((c, j) => ({ values: c.values, set: [i === j] })) })))
        if (!multiRow) return
        const alone: Op = { ...op, ids: ['0', '0'], columns: op.columns.map((_, j) => ({ values: ['0', '0'], set: [i === j, i === j] })) }
        add(noRows(renderOp(alone)))
        if (isDecoded(f)) add(noRows(renderOp(alone, 'shared')))
      })
    }
    // Links to a new row go without the conflict clause.
    if (op.kind === 'link-insert') add(renderOp(empty({ ...op, mayExist: false })))
    // Rows that share their timestamps send each once (render-write.ts, sharedDecoded).
    if ((op.kind === 'insert' || op.kind === 'update') && op.entity.fields.some(isDecoded)) add(renderOp(empty(op), 'shared'))
  }
  const order = schema.insertOrder
  for (const entity of order) {
    // One row per kind, to make the planner emit every op (cascades, purges, fix-ups, versioned
    // forms); each op is then rendered with its rows removed.
    const row = { entity, id: '0' }
    // Generated columns are never written; inserts mostly leave every server-filled column unset.
    const writable = entity.fields.flatMap((f, i) => (f.generated ? [] : [i]))
    const server = entity.serverValued.length > 0 ? entity.serverValued : undefined
    const changes: Changes = {
      inserts: insertsOf([{ ...row, values: entity.fields.map(() => '0') }]).map((rows) => ({ ...rows, ...(server && { omit: server }) })),
      upserts: [],
      updates: [
        { ...row, changed: new Map(writable.map((i) => [i, '0'])), ...(entity.version ? { version: '1' } : {}) } satisfies RowUpdate,
      ],
      deletes: [{ ...row, ...(entity.version ? { version: '1' } : {}) } satisfies RowDelete],
      linkAdds: entity.manyToMany.map((link): LinkChange => ({ link, owner: '0', target: '0' })),
      linkRemoves: entity.manyToMany.map((link): LinkChange => ({ link, owner: '0', target: '0' })),
    }
    for (const wave of planFlush(changes, schema).waves) for (const op of wave.ops) addForms(op)
    // The other common insert: every server default given, only generated columns omitted.
    if (server) {
      const generated = server.filter((i) => entity.fields[i]!.generated)
      addForms({ kind: 'insert', entity, ids: ['0'], columns: entity.fields.map(() => ['0']), ...(generated.length > 0 && { omit: generated }) })
    }
    // Fix-ups of cycles use the unversioned update shape.
    if (entity.version) {
      for (const wave of planFlush({ ...changes, updates: [{ ...row, changed: new Map([[writable[0]!, '0']]) }] }, schema).waves) {
        for (const op of wave.ops) if (op.kind === 'update') addForms({ ...op, versions: undefined })
      }
    }
    // Updates that add increments (atomic counters) have a shape of their own.
    const counters = entity.counters
    if (counters.length > 0) {
      const increments = new Map(counters.map((f) => [entity.fields.indexOf(f), '0']))
      for (const wave of planFlush({ ...changes, inserts: [], deletes: [], updates: [{ ...row, changed: new Map(), increments }] }, schema).waves) {
        for (const op of wave.ops) if (op.kind === 'update') addForms(op)
      }
    }
    // Rows passing a unique value on are locked before their updates (planner.ts, lockOp).
    if (entity.uniqueKeys.length > 0) addForms({ kind: 'lock', entity, ids: [] })
    add(renderLoadByIds(entity, []))
    for (const rel of entity.oneToMany) add(renderLoadByReference(rel.target, rel.inverse, []))
    for (const link of entity.manyToMany) add(renderLoadLinks(link, []))
  }
  add(renderNextIds([]))
  return [...out.values()]
}

/** An array statement with every array empty and every scalar null: it writes no row. */
function noRows(statement: Statement): Statement {
  return { text: statement.text, params: statement.params.map((p) => (typeof p === 'string' && p.startsWith('{') ? '{}' : null)) }
}

/** A one-row statement with every parameter null: it writes no row. */
function nulls(statement: Statement): Statement {
  return { text: statement.text, params: statement.params.map(() => null) }
}

/** The same op with no rows: its statement text is the same, its parameters empty arrays. */
function empty(op: Op): Op {
  switch (op.kind) {
    case 'insert':
      return { ...op, ids: [], columns: op.columns.map(() => []) }
    case 'update':
      return { ...op, ids: [], columns: op.columns.map(() => ({ values: [], set: [] })), versions: op.versions && [], increments: op.increments?.map(() => []) }
    case 'delete':
      return { ...op, ids: [], versions: op.versions && [] }
    case 'lock':
      return { ...op, ids: [] }
    case 'link-insert':
    case 'link-delete':
      return { ...op, owners: [], targets: [] }
    case 'link-purge':
    case 'unlink-cycle':
      return { ...op, rows: emptyRoot(op.rows) }
    case 'cascade-delete':
    case 'cascade-null':
    case 'live-guard':
      return { ...op, rows: { ...op.rows, parent: emptyRoot(op.rows.parent) } }
    case 'cascade-soft-delete':
      return { ...op, rows: emptyRoot(op.rows) as typeof op.rows }
  }
}

function emptyRoot(rows: RowSet): RowSet {
  if (rows.kind === 'ids') return { ...rows, ids: [] }
  return rows.kind === 'children' ? { ...rows, parent: emptyRoot(rows.parent) } : { ...rows, roots: emptyRoot(rows.roots) }
}
