import { rootIds, type CascadeDeleteOp, type CascadeNullOp, type UnlinkCycleOp, type DeleteOp, type InsertOp, type LinkDeleteOp, type LinkInsertOp, type LinkPurgeOp, type LockOp, type Op, type RowSet, type UpdateOp } from '../plan/ops.js'
import type { Plan } from '../plan/plan.js'
import type { Text, UpsertSpec } from '../plan/changes.js'
import { counterFields } from '../schema/counters.js'
import { treeFields } from '../schema/self-references.js'
import type { EntityMeta, FieldMeta, ManyToManyMeta } from '../schema/meta.js'
import { arrayLiteral, boolArrayLiteral } from './array-literal.js'
import { quoteIdent } from '../schema/quote.js'
import type { WriteStatement } from './statement.js'

/**
 * Renders ops to SQL. A statement's text depends only on the table, on whether it writes one row
 * or more, for tables with timestamps on whether its rows share them (sharedDecoded), and for a
 * one-row update on which columns it sets (oneRowUpdate); never on the row count. One bind
 * parameter per column: an array in the column's wire type (ColumnType.wire), or a scalar (one row,
 * or a value the rows share) in the column's own type. So each table has a few insert, update and
 * delete shapes, which postgres.js prepares once per connection.
 */
export function renderPlan(plan: Plan): WriteStatement[][] {
  const waves: WriteStatement[][] = []
  for (const wave of plan.waves) {
    const statements: WriteStatement[] = []
    for (const op of wave.ops) statements.push(renderOp(op))
    waves.push(statements)
  }
  return waves
}

/**
 * `form` is for warm-ups, which prepare each shape by running it with no rows: 'shared' renders an
 * insert or update in its shared-values form (see sharedDecoded) whatever its rows.
 */
export function renderOp(op: Op, form: 'rows' | 'shared' = 'rows'): WriteStatement {
  switch (op.kind) {
    case 'insert':
      return { op, ...renderInsert(op, form === 'shared' ? nothingShared(op.entity) : sharedDecoded(op)) }
    case 'update':
      return { op, ...renderUpdate(op, form === 'shared' ? nothingShared(op.entity) : sharedDecoded(op)) }
    case 'delete':
      return { op, ...renderDelete(op) }
    case 'link-insert':
      return { op, ...renderLinkInsert(op) }
    case 'link-delete':
      return { op, ...renderLinkDelete(op) }
    case 'link-purge':
      return { op, ...renderLinkPurge(op) }
    case 'cascade-delete':
      return { op, ...renderCascadeDelete(op) }
    case 'cascade-null':
      return { op, ...renderCascadeNull(op) }
    case 'unlink-cycle':
      return { op, ...renderUnlinkCycle(op) }
    case 'lock':
      return { op, ...renderLock(op) }
  }
}

/**
 * Whether `op` goes as a one-row statement: scalar binds, no arrays for the server to read and
 * unnest. Request handlers mostly write one row per table; replaying a mixedFlush×10 flush (an
 * insert, an update and a delete in each of 10 tables), its 30 statements took 7.2 ms in the array
 * form and 5.7 ms in this one (300 rounds, interleaved). Versioned, counting and returning forms
 * keep the array form (their checks are written over the set `d`).
 */
export function writesOneRow(op: Op): boolean {
  switch (op.kind) {
    case 'insert':
      return op.ids.length === 1 && op.upsert === undefined
    case 'update':
      return op.ids.length === 1 && op.increments === undefined && !(op.versions && op.entity.version)
    case 'delete':
      return op.ids.length === 1 && !(op.versions && op.entity.version) && treeFields(op.entity).length === 0
    default:
      return false
  }
}

/**
 * Per field, the value all the op's rows share (rows that don't `set` it don't count), when every
 * field the server decodes (ColumnType.wire: timestamps) has one; otherwise undefined. Then each
 * such field goes once, as a scalar that a subquery decodes once, instead of an array decoded row
 * by row: rows written together mostly share their timestamps (`defaultNow()` in one millisecond).
 * Server CPU of 50-row inserts into a table with two timestamp columns, every row at one time: 322
 * and 365 µs with arrays, 286 and 324 µs in this form (two runs); keeping the arrays, empty, beside
 * the shared values saved almost nothing (319 and 359 µs): a function scan pays per array. A
 * statement whose rows differ keeps the array form: a second shape per op.
 */
function sharedDecoded(op: InsertOp | UpdateOp): Text[] | undefined {
  const e = op.entity
  if (op.ids.length === 0) return undefined
  let shared: Text[] | undefined
  for (let i = 0; i < e.fields.length; i++) {
    if (!isDecoded(e.fields[i]!)) continue
    const value = op.kind === 'insert' ? sharedValue(op.columns[i]!, undefined) : sharedValue(op.columns[i]!.values, op.columns[i]!.set)
    if (value === undefined) return undefined
    ;(shared ??= [])[i] = value
  }
  return shared
}

/** Whether the server decodes the field's values (ColumnType.wire), which makes it one sharedDecoded looks at. */
export const isDecoded = (f: FieldMeta): boolean => f.type.wire !== undefined && !f.version

/** The shared form with nothing in it, for warm-ups (renderOp). */
const nothingShared = (e: EntityMeta): Text[] => e.fields.map(() => null)

/** The one value every counted row has (rows whose `set` is false don't count; none: null), or undefined. */
function sharedValue(values: readonly Text[], set: readonly boolean[] | undefined): Text | undefined {
  let shared: Text | undefined
  for (let i = 0; i < values.length; i++) {
    if (set !== undefined && !set[i]) continue
    const v = values[i] ?? null
    if (shared === undefined) shared = v
    else if (v !== shared) return undefined
  }
  return shared ?? null
}

/** Whether field `f` goes as one shared value (sharedDecoded) rather than an array. */
const sharedField = (f: FieldMeta, shared: readonly Text[] | undefined): boolean => shared !== undefined && isDecoded(f)

function renderInsert(op: InsertOp, shared: readonly Text[] | undefined) {
  const e = op.entity
  if (writesOneRow(op)) {
    const params: (string | null)[] = [op.ids[0]!]
    for (let i = 0; i < op.columns.length; i++) params.push(scalarText(e.fields[i]!, op.columns[i]![0] ?? null))
    return { text: cached(e, 'insert-one', () => insertOneText(e)), params }
  }
  const params: Text[] = [arrayLiteral(op.ids, e.id.type.sqlType)]
  for (let i = 0; i < op.columns.length; i++) {
    const f = e.fields[i]!
    params.push(sharedField(f, shared) ? scalarText(f, shared![i] ?? null) : arrayLiteral(op.columns[i]!, wireType(f)))
  }
  const select = () => unnestSelect(e, shared !== undefined)
  if (op.upsert === undefined) return { text: cached(e, shared ? 'insert-shared' : 'insert', () => `insert into ${e.quotedTable} (${columnNames(e)}) ${select()}`), params }
  return { text: `insert into ${e.quotedTable} as t (${columnNames(e)}) ${select()} ${onConflict(e, op.upsert)}`, params }
}

const columnNames = (e: EntityMeta): string => [e.id.quoted, ...e.fields.map((f) => f.quoted)].join(', ')

/** `where … is not null`: run with nulls (warm-up prepares shapes by running them) it inserts nothing. */
function insertOneText(e: EntityMeta): string {
  const id = `$1::${e.id.type.sqlType}`
  const values = [id, ...e.fields.map((f, i) => `$${i + 2}::${f.type.sqlType}`)]
  return `insert into ${e.quotedTable} (${columnNames(e)}) select ${values.join(', ')} where ${id} is not null`
}

/** Field i's parameter is $(i + 2); in the shared form, a decoded field's is a scalar, read once (sharedDecoded). */
function unnestSelect(e: EntityMeta, shared: boolean): string {
  const arrays = [`$1::${e.id.type.sqlType}[]`]
  const names = ['c0']
  const values = ['d.c0']
  e.fields.forEach((f, i) => {
    if (shared && isDecoded(f)) {
      values.push(`$${i + 2}::${f.type.sqlType}`)
    } else {
      arrays.push(`$${i + 2}::${wireType(f)}[]`)
      names.push(`c${i + 1}`)
      values.push(decoded(f, `d.c${i + 1}`))
    }
  })
  // Columns that travel in another type are decoded by name; without any, the rows pass through.
  if (!e.fields.some((f) => f.type.wire)) return `select * from unnest(${arrays.join(', ')})`
  return `select ${values.join(', ')} from unnest(${arrays.join(', ')}) as d(${names.join(', ')})`
}

const texts = new WeakMap<EntityMeta, Map<string, string>>()

/**
 * A statement text that depends on the table alone, made once: a flush of one row in each of 10
 * tables renders 30 statements, and rebuilding their texts each time was a third of rendering.
 */
function cached(e: EntityMeta, kind: string, make: () => string): string {
  let byKind = texts.get(e)
  if (byKind === undefined) texts.set(e, (byKind = new Map()))
  let text = byKind.get(kind)
  if (text === undefined) byKind.set(kind, (text = make()))
  return text
}

/**
 * An upsert: on a conflict over its key, the existing row takes the given fields (and advances its
 * version, unchecked); with none given, a no-op update, so that the row still comes back. Every
 * row written returns its id and every column, as text where a driver could parse it otherwise.
 */
function onConflict(e: EntityMeta, spec: UpsertSpec): string {
  const key = spec.key === 'id' ? [e.id.quoted] : spec.key.map((f) => f.quoted)
  const sets = spec.update.length > 0 ? spec.update.map((f) => `${f.quoted} = excluded.${f.quoted}`) : [`${key[0]} = excluded.${key[0]}`]
  if (e.version) sets.push(`${e.version.quoted} = t.${e.version.quoted} + 1`)
  const returning = [`t.${e.id.quoted}::text`, ...e.fields.map((f) => (f.ref ? `t.${f.quoted}::text` : f.type.selectExpr(`t.${f.quoted}`)))]
  return `on conflict (${key.join(', ')}) do update set ${sets.join(', ')} returning ${returning.join(', ')}`
}

/** The type a field's values travel in within arrays (see ColumnType.wire). */
const wireType = (f: FieldMeta): string => (f.type.wire ?? f.type).sqlType
const decoded = (f: FieldMeta, expr: string): string => (f.type.wire ? f.type.wire.decode(expr) : expr)

/**
 * A value of an op's column (in the wire's text) as a scalar bind, which goes in the column's own
 * type. Replaying mixedFlush ×10's statements (see oneRowUpdate), one-row inserts whose timestamp
 * was decoded from int8 ran the pipeline at 0.91 of hand-written SQL's speed, with a plain
 * timestamptz cast at 0.94 (0.86 and 0.91 unnamed, 0.93 and 0.94 prepared and warm).
 */
const scalarText = (f: FieldMeta, text: Text): Text => (text !== null && f.type.wire ? f.type.wire.toText(text) : text)

function renderUpdate(op: UpdateOp, shared: readonly Text[] | undefined) {
  const e = op.entity
  if (writesOneRow(op)) return oneRowUpdate(op)
  const counters = op.increments === undefined ? [] : counterFields(e)
  const modes = setModes(op, shared !== undefined)
  // d(k, v1, s1, v2, s2, …, i1, i2, …): the key, then per field its new value and, when only some
  // rows set it, whether this row does; then per counter field the delta to add (with increments only).
  const sets: string[] = []
  const arrays = [`$1::${e.id.type.sqlType}[]`]
  const aliases = ['k']
  const params: (string | null)[] = [arrayLiteral(op.ids, e.id.type.sqlType)]
  for (let i = 0; i < e.fields.length; i++) {
    const f = e.fields[i]!
    const mode = modes[i]
    if (f.version || mode === 'none') continue
    const n = params.length
    // A shared value is one scalar (sharedDecoded).
    const one = sharedField(f, shared)
    const given = one ? `$${n + 1}::${f.type.sqlType}` : decoded(f, `d.v${i + 1}`)
    const value = mode === 'every' ? given : `case when d.s${i + 1} then ${given} else t.${f.quoted} end`
    const c = counters.indexOf(f)
    sets.push(`${f.quoted} = ${c < 0 ? value : `(${value}) + coalesce(d.i${c + 1}, 0)`}`)
    const column = op.columns[i]!
    params.push(one ? scalarText(f, shared![i] ?? null) : arrayLiteral(column.values, wireType(f)))
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
        `update ${e.quotedTable} as t set ${sets.join(', ')} from d where t.${e.id.quoted} = d.k`,
      params,
    }
  }
  const v = e.version
  arrays.push(`$${params.length + 1}::${v.type.sqlType}[]`)
  aliases.push('ver')
  params.push(arrayLiteral(op.versions))
  return {
    text:
      `with a as (select * from unnest(${arrays.join(', ')}) as a(${aliases.join(', ')})), ` +
      `d as (${lockedInIdOrder(e, 'a', 'no key update')}), ` +
      `w as (update ${e.quotedTable} as t set ${[...sets, `${v.quoted} = t.${v.quoted} + 1`].join(', ')} ` +
      `from d where t.${e.id.quoted} = d.k and t.${v.quoted} = d.ver returning t.${e.id.quoted} as k) ` +
      staleCheck(e.table),
    params,
  }
}

type SetMode = 'none' | 'every' | 'some'

/**
 * Per field, how a multi-row update writes it: not at all when no row sets it, without per-row
 * flags when every row does, and `case when d.sN then … else t."col" end` when only some do. Naming
 * every column with flags made the server parse and join arrays of nulls and falses for the
 * columns nobody set: replaying a 10,000-row update of one column of three, 48.6 ms with every
 * column flagged, 44.2 with that column alone but flagged, 42.6 without flags (30 rounds
 * interleaved; at 100 rows 1.15× and 1.18×). Each such set of modes is a shape of its own, so past
 * EXACT_UPDATE_SHAPES of them per table (besides one per column, which warm-ups prepare) every
 * field goes flagged. So do updates with increments (their counters add to every row) and
 * versioned ones: a request handler's one-row versioned update takes this path, and its one
 * flagged shape is always prepared by a warm-up, whichever columns it sets.
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
  let seen = multiRowShapes.get(e)
  if (seen === undefined) multiRowShapes.set(e, (seen = new Set()))
  if (!seen.has(key)) {
    if (!roomForShape(e, seen)) return flagged()
    seen.add(key)
  }
  return modes
}

/** The sets of modes each table's multi-row updates have used (setModes). */
const multiRowShapes = new WeakMap<EntityMeta, Set<string>>()

/**
 * The rows of `from` (aliased `a`, keyed by `a.k`) whose table row exists, each row locked before
 * the write reads it and all of them in id order. Without this the server locks rows in the order
 * its plan meets them: a hash join or a scan of a small table meets them in heap order, which moves
 * as rows are updated, and two flushes that lock shared rows in two orders deadlock (each deadlock
 * waits out `deadlock_timeout`, 1 s by default: the example's checkouts retried 2 to 10 per 10 s
 * run). The lock is the one the write takes anyway (an update that keeps its key takes `no key
 * update`, which does not block a concurrent insert of a row that references it). An update that
 * changes a unique column a foreign key may reference needs `update` and upgrades to it: that one
 * can still wait on a concurrent transaction that inserted a row referencing it.
 */
function lockedInIdOrder(e: EntityMeta, from: string, mode: 'no key update' | 'update'): string {
  return `select a.* ${fromInIdOrder(e, from, mode)}`
}

/** lockedInIdOrder after its select list: what a lock of the rows alone (renderLock) selects from. */
function fromInIdOrder(e: EntityMeta, from: string, mode: 'no key update' | 'update'): string {
  return `from ${from} join ${e.quotedTable} as x on x.${e.id.quoted} = a.k order by a.k for ${mode} of x`
}

/**
 * The rows of `e` (aliased `t`) that `condition` selects, each locked in id order as
 * lockedInIdOrder does, keyed by `k`: for writes that find their rows by a reference or by walking
 * a tree (cascades), whose order the client cannot sort.
 */
function foundInIdOrder(e: EntityMeta, condition: string, mode: 'no key update' | 'update'): string {
  return `select t.${e.id.quoted} as k from ${e.quotedTable} as t where ${condition} order by t.${e.id.quoted} for ${mode} of t`
}

/** Deletes the rows `condition` selects, locked in id order first, and returns their ids. */
function deleteFound(e: EntityMeta, condition: string): string {
  return `with d as (${foundInIdOrder(e, condition, 'update')}) delete from ${e.quotedTable} as t using d where t.${e.id.quoted} = d.k returning t.${e.id.quoted}::text`
}

/** Sets `sets` (no key column) on the rows `condition` selects, locked in id order first. */
function updateFound(e: EntityMeta, condition: string, sets: string): string {
  return `with d as (${foundInIdOrder(e, condition, 'no key update')}) update ${e.quotedTable} as t set ${sets} from d where t.${e.id.quoted} = d.k`
}

/**
 * A one-row update that names only the columns it sets: `update t set "a" = $2 where "id" = $1`.
 * The form that names every column (`"a" = case when $3 then $2 else t."a" end`) has one shape per
 * table, but costs the server more to plan and run. Replaying mixedFlush ×10's statements on one
 * postgres.js connection (10 tables, one insert, update and delete each, ledger row included),
 * 150 rounds interleaved with a full GC before each, the pipeline ran at 0.76 of hand-written
 * SQL's speed with every-column updates and at 0.91 with these, when the plans were invalidated
 * between rounds (as the bench's truncates do); 0.87 against 0.93 prepared and warm; 0.80 against
 * 0.86 with unnamed statements (node-postgres, knex, poolers), which the server plans every time.
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
    if (f.version) continue
    const column = op.columns[i]!
    all.push(scalarText(f, column.values[0] ?? null), column.set[0] ? 't' : 'f')
  }
  return { text: cached(e, 'update-one', () => everyColumnText(e)), params: all }
}

/** Sets of columns per table, beyond one per column (warm-ups prepare those), that get a one-row update shape of their own. */
export const EXACT_UPDATE_SHAPES = 32

const updateShapes = new WeakMap<EntityMeta, Map<string, string>>()

/** Whether a table's update shapes (of one form) are below the bound: EXACT_UPDATE_SHAPES besides one per column. */
const roomForShape = (e: EntityMeta, shapes: { readonly size: number }): boolean => shapes.size < EXACT_UPDATE_SHAPES + e.fields.length

/** The text for this set of columns, made once; undefined once the table has its share of them. */
function updateShape(e: EntityMeta, columns: string, make: () => string): string | undefined {
  let byColumns = updateShapes.get(e)
  if (byColumns === undefined) updateShapes.set(e, (byColumns = new Map()))
  let text = byColumns.get(columns)
  if (text === undefined && roomForShape(e, byColumns)) byColumns.set(columns, (text = make()))
  return text
}

function setColumnsText(e: EntityMeta, op: UpdateOp): string {
  const sets: string[] = []
  e.fields.forEach((f, i) => {
    if (!f.version && op.columns[i]!.set[0]) sets.push(`${f.quoted} = $${sets.length + 2}::${f.type.sqlType}`)
  })
  return `update ${e.quotedTable} set ${sets.join(', ')} where ${e.id.quoted} = $1::${e.id.type.sqlType}`
}

function everyColumnText(e: EntityMeta): string {
  const sets: string[] = []
  let n = 1
  for (const f of e.fields) {
    if (f.version) continue
    n += 2
    sets.push(`${f.quoted} = case when $${n}::bool then $${n - 1}::${f.type.sqlType} else t.${f.quoted} end`)
  }
  return `update ${e.quotedTable} as t set ${sets.join(', ')} where t.${e.id.quoted} = $1::${e.id.type.sqlType}`
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
  const returning = [`t.${e.id.quoted} as k`, ...counters.map((f, c) => `${f.type.selectExpr(`t.${f.quoted}`)} as c${c + 1}`)]
  const columns = ['w.k::text', ...counters.map((_, c) => `w.c${c + 1}`)]
  let where = `t.${e.id.quoted} = d.k`
  if (v) {
    arrays.push(`$${params.length + 1}::${v.type.sqlType}[]`)
    aliases.push('ver')
    params.push(arrayLiteral(op.versions ?? op.ids.map(() => null)))
    sets.push(`${v.quoted} = t.${v.quoted} + 1`)
    where += ` and (d.ver is null or t.${v.quoted} = d.ver)`
    returning.push(`t.${v.quoted} as ver`)
    columns.push('w.ver')
  }
  return {
    text:
      `with a as (select * from unnest(${arrays.join(', ')}) as a(${aliases.join(', ')})), ` +
      `d as (${lockedInIdOrder(e, 'a', 'no key update')}), ` +
      `w as (update ${e.quotedTable} as t set ${sets.join(', ')} from d where ${where} returning ${returning.join(', ')}) ` +
      `select ${columns.join(', ')} from (${staleCheck(e.table)}) as x(stale) left join w on x.stale is null`,
    params,
  }
}

/**
 * Fails the statement, on the server and inside the pipeline, when any row asked for (`a`) was not
 * written by `w` (its version moved on, or it is gone): the cast of a non-number to int4 raises, so
 * the pipelined COMMIT turns into ROLLBACK and the client never waits to check a row count.
 */
function staleCheck(table: string): string {
  return `select ('${STALE_MARK}${table.replace(/'/g, "''")}:' || string_agg(a.k::text, ',' order by a.k))::int4 from a where a.k not in (select w.k from w)`
}

/** Locks the rows, in id order, in the mode an update takes (lockedInIdOrder); selects no column. */
function renderLock(op: LockOp) {
  const e = op.entity
  return {
    text: `select ${fromInIdOrder(e, `unnest($1::${e.id.type.sqlType}[]) as a(k)`, 'no key update')}`,
    params: [arrayLiteral(op.ids, e.id.type.sqlType)],
  }
}

/** Prefix of the error that a version check raises; the executor turns it into OptimisticLockError. */
export const STALE_MARK = 'flushwave-stale:'

function renderDelete(op: DeleteOp) {
  const e = op.entity
  if (writesOneRow(op)) return { text: cached(e, 'delete-one', () => `delete from ${e.quotedTable} where ${e.id.quoted} = $1::${e.id.type.sqlType}`), params: [op.ids[0]!] }
  const roots: RowSet = { kind: 'ids', entity: e, ids: op.ids }
  if (!op.versions || !e.version) {
    const text =
      treeFields(e).length === 0
        ? `with d as (${lockedInIdOrder(e, `unnest($1::${e.id.type.sqlType}[]) as a(k)`, 'update')}) delete from ${e.quotedTable} as t using d where t.${e.id.quoted} = d.k`
        : deleteFound(e, orBelow(`t.${e.id.quoted} = any($1::${e.id.type.sqlType}[])`, roots))
    return { text, params: [arrayLiteral(op.ids, e.id.type.sqlType)] }
  }
  const v = e.version
  const a = `with a as (select * from unnest($1::${e.id.type.sqlType}[], $2::${v.type.sqlType}[]) as a(k, ver)), `
  const params = [arrayLiteral(op.ids, e.id.type.sqlType), arrayLiteral(op.versions, v.type.sqlType)]
  if (treeFields(e).length === 0) {
    return {
      text:
        a +
        `d as (${lockedInIdOrder(e, 'a', 'update')}), ` +
        `w as (delete from ${e.quotedTable} as t using d where t.${e.id.quoted} = d.k and t.${v.quoted} = d.ver returning t.${e.id.quoted} as k) ` +
        staleCheck(e.table),
      params,
    }
  }
  // The rows below the removed ones in a cascading tree go in the same statement, unchecked (the
  // version check is for the rows the application removed); every id deleted comes back.
  const removed = orBelow(`exists (select from a where a.k = t.${e.id.quoted} and a.ver = t.${v.quoted})`, roots)
  return {
    text:
      a +
      `d as (${foundInIdOrder(e, removed, 'update')}), ` +
      `w as (delete from ${e.quotedTable} as t using d where t.${e.id.quoted} = d.k returning t.${e.id.quoted} as k) ` +
      `select w.k::text from (${staleCheck(e.table)}) as x(stale) left join w on x.stale is null`,
    params,
  }
}

/**
 * `condition`, or, when the entity's self-reference cascades, also the rows below `rows` in the
 * tree: one statement deletes both, so every foreign key is checked once all are gone.
 */
function orBelow(condition: string, rows: RowSet): string {
  const below = treeFields(rows.entity).map((field) => matches(`t.${rows.entity.id.quoted}`, { kind: 'subtree', entity: rows.entity, field, roots: rows }))
  return below.length === 0 ? condition : `(${[condition, ...below].join(' or ')})`
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
    // Links that each have a new end cannot be there yet, and skip the speculative insert that
    // costs (bulkCreate×1, 100 links: 0.14 ms of a 2.7 ms pipeline on the server, in a replay).
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

function renderLinkDelete(op: LinkDeleteOp) {
  const c = linkColumns(op.link)
  return {
    text: deleteLinksInKeyOrder(
      op.link,
      `${op.link.quotedTable} as j join unnest($1::${c.ownType}[], $2::${c.targetType}[]) as a(o, t) on j.${c.own} = a.o and j.${c.target} = a.t`,
    ),
    params: [arrayLiteral(op.owners, c.ownType), arrayLiteral(op.targets, c.targetType)],
  }
}

function renderLinkPurge(op: LinkPurgeOp) {
  const c = linkColumns(op.link)
  return {
    text: deleteLinksInKeyOrder(op.link, `${op.link.quotedTable} as j where ${matches(`j.${op.side === 'owner' ? c.own : c.target}`, op.rows)}`),
    params: [arrayLiteral(rootIds(op.rows))],
  }
}

function renderCascadeDelete(op: CascadeDeleteOp) {
  const { entity, field, parent } = op.rows
  return {
    text: deleteFound(entity, orBelow(matches(`t.${field.quoted}`, parent), op.rows)),
    params: [arrayLiteral(rootIds(op.rows))],
  }
}

function renderCascadeNull(op: CascadeNullOp) {
  const { entity, field, parent } = op.rows
  return {
    text: `${updateFound(entity, matches(`t.${field.quoted}`, parent), `${field.quoted} = null`)} returning t.${entity.id.quoted}::text`,
    params: [arrayLiteral(rootIds(op.rows))],
  }
}

function renderUnlinkCycle(op: UnlinkCycleOp) {
  const e = op.rows.entity
  const where = op.rows.kind === 'children' ? matches(`t.${op.rows.field.quoted}`, op.rows.parent) : matches(`t.${e.id.quoted}`, op.rows)
  const sets = op.fields.map((f) => `${f.quoted} = null`).join(', ')
  const found = `${where} and (${op.fields.map((f) => `t.${f.quoted} is not null`).join(' or ')})`
  return {
    text: updateFound(e, found, sets),
    params: [arrayLiteral(rootIds(op.rows))],
  }
}

/**
 * `column` refers to one of `rows`: `= any($1)` for ids, a subquery per level for children, and a
 * recursive one for the rows below roots in a tree (`union`: a cycle in the data cannot loop it).
 */
function matches(column: string, rows: RowSet, depth = 1): string {
  if (rows.kind === 'ids') return `${column} = any($1::${rows.entity.id.type.sqlType}[])`
  if (rows.kind === 'subtree') {
    const { entity, field, roots } = rows
    const [tree, row, id] = [`s${depth}`, `r${depth}`, entity.id.quoted]
    const notRoot = `not ${matches(`${row}.${id}`, roots, depth + 1)}`
    return (
      `${column} in (with recursive ${tree}(id) as (` +
      `select ${row}.${id} from ${entity.quotedTable} as ${row} where ${matches(`${row}.${field.quoted}`, roots, depth + 1)} and ${notRoot} ` +
      `union select ${row}.${id} from ${entity.quotedTable} as ${row} join ${tree} on ${row}.${field.quoted} = ${tree}.id where ${notRoot}` +
      `) select id from ${tree})`
    )
  }
  const alias = `c${depth}`
  return (
    `${column} in (select ${alias}.${rows.entity.id.quoted} from ${rows.entity.quotedTable} as ${alias} ` +
    `where ${matches(`${alias}.${rows.field.quoted}`, rows.parent, depth + 1)})`
  )
}
