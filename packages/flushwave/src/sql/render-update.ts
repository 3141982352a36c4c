import type { UpdateOp } from '../plan/ops.js'
import type { Text } from '../plan/changes.js'
import { checkedGenerated, countingColumns, generatedColumns } from './returning.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import { arrayLiteral, boolArrayLiteral } from './array-literal.js'
import { keyEquals, keyType, keyValue } from './keys.js'
import { lockedInIdOrder, staleCheck } from './row-sets.js'
import { cached, decoded, scalarText, sharedField, wireEscaped, wireType, writesOneRow } from './write-values.js'

/** UPDATE statements: one row naming the columns it sets, many rows through `unnest`, versioned and counting forms. */

export function renderUpdate(op: UpdateOp, shared: readonly Text[] | undefined) {
  const e = op.entity
  if (writesOneRow(op)) return oneRowUpdate(op)
  const counters = op.increments === undefined ? [] : e.counters
  const modes = setModes(op, shared !== undefined)
  // d(k, v1, s1, v2, s2, …, i1, i2, …): the key, then per field its new value and, when only some
  // rows set it, whether this row does; then per counter field the delta to add (with increments only).
  const sets: string[] = []
  const arrays = [`$1::${keyType(e)}[]`]
  const aliases = ['k']
  const params: (string | null)[] = [arrayLiteral(op.ids, keyType(e))]
  for (let i = 0; i < e.fields.length; i++) {
    const f = e.fields[i]!
    const mode = modes[i]
    // Flagged forms name every field; a generated one is never set (no row of the op sets it).
    if (f.version || mode === 'none' || f.generated) continue
    const n = params.length
    // A shared value is one scalar (sharedDecoded).
    const one = sharedField(f, shared)
    const given = one ? `$${n + 1}::${f.type.sqlType}` : decoded(f, `d.v${i + 1}`)
    const value = mode === 'every' ? given : `case when d.s${i + 1} then ${given} else t.${f.quoted} end`
    const c = counters.indexOf(f)
    sets.push(`${f.quoted} = ${c < 0 ? value : `(${value}) + coalesce(d.i${c + 1}, 0)`}`)
    const column = op.columns[i]!
    params.push(one ? scalarText(f, shared![i] ?? null) : arrayLiteral(column.values, wireType(f), wireEscaped(f)))
    if (!one) {
      arrays.push(`$${n + 1}::${wireType(f)}[]`)
      aliases.push(`v${i + 1}`)
    }
    if (mode === 'some') {
      arrays.push(`$${n + 2}::bool[]`)
      aliases.push(`s${i + 1}`)
      params.push(boolArrayLiteral(column.set))
    }
  }
  counters.forEach((f, c) => {
    arrays.push(`$${params.length + 1}::${f.type.sqlType}[]`)
    aliases.push(`i${c + 1}`)
    params.push(arrayLiteral(op.increments![c]!))
  })
  if (op.increments !== undefined) return renderCounting(op, counters, sets, arrays, aliases, params)
  if (!op.versions || !e.version) {
    return {
      text:
        `with d as (${lockedInIdOrder(e, `unnest(${arrays.join(', ')}) as a(${aliases.join(', ')})`, 'no key update')}) ` +
        `update ${e.quotedTable} as t set ${sets.join(', ')} from d where ${keyEquals(e, 't', 'd.k')}${returningGenerated(e)}`,
      params,
    }
  }
  const v = e.version
  arrays.push(`$${params.length + 1}::${v.type.sqlType}[]`)
  aliases.push('ver')
  params.push(arrayLiteral(op.versions))
  const generated = checkedGenerated(e)
  const checked =
    `with a as (select * from unnest(${arrays.join(', ')}) as a(${aliases.join(', ')})), ` +
    `d as (${lockedInIdOrder(e, 'a', 'no key update')}), ` +
    `w as (update ${e.quotedTable} as t set ${[...sets, `${v.quoted} = t.${v.quoted} + 1`].join(', ')} ` +
    `from d where ${keyEquals(e, 't', 'd.k')} and t.${v.quoted} = d.ver returning ${[`${keyValue(e, 't')} as k`, ...generated.returning].join(', ')}) `
  if (e.generated.length === 0) return { text: checked + staleCheck(e), params }
  // The rows written, with their generated columns, once the check passed (as a counting update's).
  return { text: `${checked}select ${['w.k::text', ...generated.selected].join(', ')} from (${staleCheck(e)}) as x(stale) left join w on x.stale is null`, params }
}

/** An update's RETURNING clause for an entity with generated columns (their values may change with their inputs); none otherwise. */
const returningGenerated = (e: EntityMeta): string => (e.generated.length > 0 ? ` returning ${generatedColumns(e).join(', ')}` : '')

type SetMode = 'none' | 'every' | 'some'

/**
 * Per field, how a multi-row update writes it: not at all when no row sets it, without per-row
 * flags when every row does, and `case when d.sN then … else t."col" end` when only some do. Naming
 * every column with flags made the server parse and join arrays of nulls and falses for the
 * columns nobody set, and a column every row sets costs less without its flags
 * (docs/design-notes.md, "Multi-row updates flag only where rows differ"). Each such set of modes
 * is a shape of its own, so past EXACT_UPDATE_SHAPES of them per table (besides one per column,
 * which warm-ups prepare) every field goes flagged. So do updates with increments (their counters
 * add to every row) and versioned ones: a request handler's one-row versioned update takes this
 * path, and its one flagged shape is always prepared by a warm-up, whichever columns it sets.
 */
function setModes(op: UpdateOp, shared: boolean): readonly SetMode[] {
  const e = op.entity
  const flagged = () => e.fields.map((): SetMode => 'some')
  if (op.increments !== undefined || (op.versions && e.version) || op.ids.length === 0) return flagged()
  let key = shared ? 's' : 'a'
  let named = 0
  const modes: SetMode[] = []
  for (let i = 0; i < op.columns.length; i++) {
    if (e.fields[i]!.version) {
      modes.push('none')
      continue
    }
    const column = op.columns[i]!
    let count = 0
    for (const set of column.set) if (set) count++
    const mode = count === 0 ? 'none' : count === column.set.length ? 'every' : 'some'
    if (mode !== 'none') named++
    key += mode === 'none' ? '-' : mode === 'every' ? 'e' : 's'
    modes.push(mode)
  }
  if (named === 0) return flagged()
  const seen = e.cache.multiRowShapes
  if (!seen.has(key)) {
    if (!roomForShape(e, seen)) return flagged()
    seen.add(key)
  }
  return modes
}

/**
 * A one-row update that names only the columns it sets: `update t set "a" = $2 where "id" = $1`.
 * The form that names every column (`"a" = case when $3 then $2 else t."a" end`) has one shape per
 * table, but costs the server more to plan and run: prepared, unnamed (node-postgres, knex, poolers)
 * or planned again after an invalidation (docs/design-notes.md, "One-row updates name only their
 * columns").
 *
 * Each set of columns is a shape of its own, prepared once per connection. An application updates
 * a few sets per table; one that updates any subset (a PATCH of user-chosen fields) could make
 * thousands, so past EXACT_UPDATE_SHAPES sets per table (besides one per column) the every-column
 * form takes the rest.
 */
function oneRowUpdate(op: UpdateOp) {
  const e = op.entity
  const params: Text[] = [op.ids[0]!]
  let key = ''
  for (let i = 0; i < e.fields.length; i++) {
    const f = e.fields[i]!
    const column = op.columns[i]!
    if (f.version || !column.set[0]) continue
    params.push(scalarText(f, column.values[0] ?? null))
    key += `${i},`
  }
  if (params.length > 1) {
    const text = updateShape(e, key, () => setColumnsText(e, op))
    if (text !== undefined) return { text, params }
  }
  // Per field, its value and whether the row sets it: $2, $3 for the first, and so on.
  const all: Text[] = [op.ids[0]!]
  for (let i = 0; i < e.fields.length; i++) {
    const f = e.fields[i]!
    if (f.version || f.generated) continue
    const column = op.columns[i]!
    all.push(scalarText(f, column.values[0] ?? null), column.set[0] ? 't' : 'f')
  }
  return { text: cached(e, 'update-one', () => everyColumnText(e)), params: all }
}

/** Sets of columns per table, beyond one per column (warm-ups prepare those), that get a one-row update shape of their own. */
export const EXACT_UPDATE_SHAPES = 32

/** Whether a table's update shapes (of one form) are below the bound: EXACT_UPDATE_SHAPES besides one per column. */
const roomForShape = (e: EntityMeta, shapes: { readonly size: number }): boolean => shapes.size < EXACT_UPDATE_SHAPES + e.fields.length

/** The text for this set of columns, made once; undefined once the table has its share of them. */
function updateShape(e: EntityMeta, columns: string, make: () => string): string | undefined {
  const byColumns = e.cache.updateShapes
  let text = byColumns.get(columns)
  if (text === undefined && roomForShape(e, byColumns)) byColumns.set(columns, (text = make()))
  return text
}

function setColumnsText(e: EntityMeta, op: UpdateOp): string {
  const sets: string[] = []
  e.fields.forEach((f, i) => {
    if (!f.version && op.columns[i]!.set[0]) sets.push(`${f.quoted} = $${sets.length + 2}::${f.type.sqlType}`)
  })
  if (e.key || e.generated.length > 0) return `update ${e.quotedTable} as t set ${sets.join(', ')} where ${keyEquals(e, 't', `$1::${e.id.type.sqlType}`)}${returningGenerated(e)}`
  return `update ${e.quotedTable} set ${sets.join(', ')} where ${e.id.quoted} = $1::${e.id.type.sqlType}`
}

function everyColumnText(e: EntityMeta): string {
  const sets: string[] = []
  let n = 1
  for (const f of e.fields) {
    if (f.version || f.generated) continue
    n += 2
    sets.push(`${f.quoted} = case when $${n}::bool then $${n - 1}::${f.type.sqlType} else t.${f.quoted} end`)
  }
  return `update ${e.quotedTable} as t set ${sets.join(', ')} where ${keyEquals(e, 't', `$1::${e.id.type.sqlType}`)}${returningGenerated(e)}`
}

/**
 * An update that adds increments returns, per row written, its id (as text), every counter and the
 * version: the flush sets them on the entities. Rows whose version is null check none (an increment
 * alone commutes with concurrent writers) but still advance it. A row not found fails the statement
 * as a stale version does. The check is the left join's outer side, and the join condition reads
 * its value: so it runs even when no row was written, and the planner cannot drop it as unused.
 */
function renderCounting(op: UpdateOp, counters: readonly FieldMeta[], sets: string[], arrays: string[], aliases: string[], params: (string | null)[]) {
  const e = op.entity
  const v = e.version
  const { returning, selected } = countingColumns(e, counters)
  let where = keyEquals(e, 't', 'd.k')
  if (v) {
    arrays.push(`$${params.length + 1}::${v.type.sqlType}[]`)
    aliases.push('ver')
    params.push(arrayLiteral(op.versions ?? op.ids.map(() => null)))
    sets.push(`${v.quoted} = t.${v.quoted} + 1`)
    where += ` and (d.ver is null or t.${v.quoted} = d.ver)`
  }
  return {
    text:
      `with a as (select * from unnest(${arrays.join(', ')}) as a(${aliases.join(', ')})), ` +
      `d as (${lockedInIdOrder(e, 'a', 'no key update')}), ` +
      `w as (update ${e.quotedTable} as t set ${sets.join(', ')} from d where ${where} returning ${returning.join(', ')}) ` +
      `select ${selected.join(', ')} from (${staleCheck(e)}) as x(stale) left join w on x.stale is null`,
    params,
  }
}
