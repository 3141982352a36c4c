import type { SchemaFacts } from '../schema/derive.js'
import type { EntityMeta, FixUp, ManyToManyMeta } from '../schema/meta.js'
import type { Changes, LinkChange, NewRows, RowDelete, RowUpdate, RowUpsert, Text } from './changes.js'
import { cascade, purgeOps } from './cascade.js'
import { softCascade, softDeleted } from './soft-delete.js'
import { chunk, DEFAULT_MAX_ROWS } from './chunk.js'
import { copies, type CopyPolicy } from './copy-policy.js'
import { addTo } from './groups.js'
import { referencedFirst } from './insert-groups.js'
import type { DeleteOp, InsertOp, LinkInsertOp, LockOp, Op, RowSet, UpdateOp } from './ops.js'
import type { Plan, Preparation } from './plan.js'

/**
 * Turns changes into one wave of per-table ops in an order that satisfies immediate foreign keys:
 *
 *   replaced rows (deletes marked `first`: their key is taken by a row written here), each with
 *   its cascades and links → inserts (parents first) → cycle fix-ups → link inserts → updates (per
 *   table one UPDATE, or one per `after` pass when rows pass unique values on) → link deletes →
 *   cycle references of rows to delete cleared → per deleted table, children first: its cascades,
 *   its links, its rows → the cascades of rows soft-deleted by the updates, then their guards
 *
 * A table whose updates need several passes has its rows locked first, all at once in id order.
 *
 * Updates sit between inserts and deletes because an update may point a row at a new parent, or
 * away from a parent about to be deleted; the change set marks a delete `first` only when nothing
 * written here needs its row (see replacedKeys). PostgreSQL runs pipelined statements in the order
 * sent, so ordering costs no round trip: every value is known, so every op goes in the first wave.
 */
export function planFlush(
  changes: Changes,
  schema: SchemaFacts,
  preparation: readonly Preparation[] = [],
  maxRows = DEFAULT_MAX_ROWS,
  copy?: CopyPolicy,
): Plan {
  const ops: Op[] = []
  const inserts = new Map<EntityMeta, NewRows>()
  // A table's second and later groups of new rows (see NewRows.omit): only tables with server-filled columns have them.
  let more: Map<EntityMeta, NewRows[]> | undefined
  for (const rows of changes.inserts) {
    if (!inserts.has(rows.entity)) inserts.set(rows.entity, rows)
    else addTo((more ??= new Map()), rows.entity, rows)
  }
  const upserts = byEntity(changes.upserts)
  const updates = byEntity(changes.updates)
  const deletes = new Map<EntityMeta, RowDelete[]>()
  const replaced = new Map<EntityMeta, RowDelete[]>()
  for (const d of changes.deletes) addTo(d.first ? replaced : deletes, d.entity, d)
  const order = schema.insertOrder
  const links = schema.links
  if (replaced.size > 0) ops.push(...deleting(replaced, schema, maxRows))
  const newIds = newIdsOf(inserts, more)
  const fixUps: Op[] = []
  for (const entity of order) {
    // Upserts first, one op per key and set of updated fields: a row created in the same flush with
    // an upserted key is then a duplicate (UniqueViolationError), as any create of a taken key is.
    const upserting = upserts.get(entity)
    if (upserting) for (const group of upsertGroups(upserting)) ops.push(upsertOp(entity, group))
    const rows = inserts.get(entity)
    if (rows === undefined) continue
    const groups = more?.get(entity)
    if (groups === undefined) insertOps(entity, rows, newIds, maxRows, ops, fixUps)
    else for (const group of referencedFirst(entity, [rows, ...groups])) insertOps(entity, group, newIds, maxRows, ops, fixUps)
  }
  ops.push(...fixUps)
  const linkAdds = byLink(changes.linkAdds)
  for (const link of links) {
    const adds = linkAdds.get(link)
    if (adds) ops.push(linkInsertOp(link, unique(adds)))
  }
  for (const entity of order) {
    const rows = updates.get(entity)
    if (!rows) continue
    const passes = inPasses(rows)
    if (passes.length > 1) ops.push(lockOp(entity, rows))
    for (const pass of passes) ops.push(updateOp(entity, pass))
  }
  const linkRemoves = byLink(changes.linkRemoves)
  for (const link of links) {
    const removes = linkRemoves.get(link)
    if (removes) ops.push({ kind: 'link-delete', link, ...ends(unique(removes)) })
  }
  ops.push(...deleting(deletes, schema, maxRows))
  const softly = softDeleted(updates, order)
  if (softly.length > 0) {
    // The children a soft delete reaches are marked with the flush's time; guards check last.
    const at = new Date().toISOString()
    const guards: Op[] = []
    for (const rows of softly) softCascade(rows, at, ops, guards)
    ops.push(...guards)
  }
  const chunked: Op[] = []
  for (const op of ops) {
    if (copies(op, copy)) chunked.push({ ...op, copy: true })
    else for (const part of chunk(op, maxRows)) chunked.push(part)
  }
  const waves = chunked.length === 0 ? [] : [{ ops: chunked, reason: 'every value is known to the client: one pipeline from BEGIN to COMMIT' }]
  return Object.freeze({ waves, preparation })
}

/** The INSERT of a group of new rows, and the updates that set their cycle-breaking references later. */
function insertOps(entity: EntityMeta, rows: NewRows, newIds: NewIds, maxRows: number, ops: Op[], fixUps: Op[]): void {
  if (rows.ids.length === 0) return
  const { now, later } = breakCycles(entity, entity.fixUps, rows, newIds)
  const { ids, columns } = rows.ids.length > maxRows ? parentsFirst(entity, now) : now
  ops.push(rows.omit === undefined ? { kind: 'insert', entity, ids, columns } : { kind: 'insert', entity, ids, columns, omit: rows.omit })
  if (later.length > 0) fixUps.push({ ...updateOp(entity, later), versions: undefined, increments: undefined })
}

/**
 * Deletes rows, per table children first: cycle references of every doomed row cleared, then each
 * table's cascades, its links, its rows.
 */
function deleting(deletes: ReadonlyMap<EntityMeta, readonly RowDelete[]>, schema: SchemaFacts, maxRows: number): Op[] {
  const doomed: RowSet[] = []
  const ops: Op[] = []
  for (const entity of schema.childrenFirst) {
    const rows = deletes.get(entity)
    if (!rows) continue
    const set: RowSet = { kind: 'ids', entity, ids: idsOf(rows) }
    doomed.push(set)
    cascade(set, ops, doomed)
    ops.push(...purgeOps(set), deleteOp(entity, rows, rows.length > maxRows))
  }
  const unlinks: Op[] = []
  for (const rows of doomed) {
    const fields = rows.entity.fixUps
    if (fields.length > 0) unlinks.push({ kind: 'unlink-cycle', rows, fields: fields.map(([field]) => field) })
  }
  return [...unlinks, ...ops]
}

/**
 * Rows whose cycle-breaking reference (`fixUp`) points at a row inserted by this flush go in with
 * NULL there; the returned updates set it once every insert has run, still in the same pipeline.
 */
function breakCycles(
  entity: EntityMeta,
  fields: readonly FixUp[],
  rows: NewRows,
  newIds: NewIds,
): { now: NewRows; later: RowUpdate[] } {
  if (fields.length === 0) return { now: rows, later: [] }
  const later: RowUpdate[] = []
  const columns = [...rows.columns]
  for (let r = 0; r < rows.ids.length; r++) {
    let changed: Map<number, Text> | undefined
    for (const [field, i] of fields) {
      const value = rows.columns[i]![r]
      if (value == null || !newIds.get(field.ref!.target)?.has(value)) continue
      ;(changed ??= new Map()).set(i, value)
      if (columns[i] === rows.columns[i]) columns[i] = [...rows.columns[i]!]
      columns[i]![r] = null
    }
    if (changed) later.push({ entity, id: rows.ids[r]!, changed })
  }
  return { now: later.length === 0 ? rows : { ...rows, columns }, later }
}

/**
 * A self-referencing table's new rows, each after the new row it refers to: one INSERT is checked
 * at its end, but a table split into several statements (more than `maxRows` rows) is checked
 * statement by statement, and a row must not refer to one of a later chunk. Linear (Kahn's order);
 * rows in a cycle (only possible through a deferrable reference, checked at COMMIT) keep their place
 * after the others.
 */
function parentsFirst(entity: EntityMeta, rows: NewRows): NewRows {
  const self = entity.fields.flatMap((f, i) => (f.ref?.target === entity ? [i] : []))
  if (self.length === 0) return rows
  const count = rows.ids.length
  const at = new Map(rows.ids.map((id, i) => [id, i]))
  const waiting = new Array<number>(count).fill(0)
  const children = new Map<number, number[]>()
  for (let i = 0; i < count; i++) {
    for (const f of self) {
      const value = rows.columns[f]![i]
      const parent = value == null ? undefined : at.get(value)
      if (parent === undefined || parent === i) continue
      waiting[i]!++
      const list = children.get(parent)
      if (list) list.push(i)
      else children.set(parent, [i])
    }
  }
  const order: number[] = []
  for (let i = 0; i < count; i++) if (waiting[i] === 0) order.push(i)
  for (let k = 0; k < order.length; k++) for (const child of children.get(order[k]!) ?? []) if (--waiting[child]! === 0) order.push(child)
  if (order.length < count) for (let i = 0; i < count; i++) if (waiting[i]! > 0) order.push(i)
  // An omitted column (NewRows.omit) has no values to reorder.
  return { ...rows, ids: order.map((i) => rows.ids[i]!), columns: rows.columns.map((column) => (column.length === 0 ? column : order.map((i) => column[i]!))) }
}

/**
 * A self-referencing table's removed rows, each before the removed row it refers to (as read): a
 * table split into several DELETE statements is checked statement by statement, so a parent must
 * not go in an earlier chunk than its children (nor, in a cascading tree, may an earlier chunk's
 * tree take a later chunk's rows, whose versions are still to be checked). Linear (Kahn's order,
 * stable); rows whose parents were not read keep their place after the others.
 */
function childrenFirst(rows: readonly RowDelete[]): readonly RowDelete[] {
  if (!rows.some((r) => r.parents?.some((p) => p !== null))) return rows
  const at = new Map(rows.map((r, i) => [r.id, i]))
  const children = new Array<number>(rows.length).fill(0)
  const parentsOf: number[][] = rows.map(() => [])
  rows.forEach((row, i) => {
    for (const parent of row.parents ?? []) {
      const j = parent === null ? undefined : at.get(parent)
      if (j === undefined || j === i) continue
      children[j]!++
      parentsOf[i]!.push(j)
    }
  })
  const order: number[] = []
  rows.forEach((_, i) => children[i] === 0 && order.push(i))
  for (let k = 0; k < order.length; k++) for (const j of parentsOf[order[k]!]!) if (--children[j]! === 0) order.push(j)
  if (order.length < rows.length) rows.forEach((_, i) => children[i]! > 0 && order.push(i))
  return order.map((i) => rows[i]!)
}

/** Upsert rows grouped by conflict key and updated fields (the statement's text depends on both), in order. */
function upsertGroups(rows: readonly RowUpsert[]): RowUpsert[][] {
  const groups = new Map<string, RowUpsert[]>()
  for (const row of rows) {
    const spec = row.upsert
    const signature = `${spec.key === 'id' ? 'id' : spec.key.map((f) => f.prop).join(',')}|${spec.update.map((f) => f.prop).join(',')}|${row.omit?.join(',') ?? ''}`
    addTo(groups, signature, row)
  }
  return [...groups.values()]
}

function upsertOp(entity: EntityMeta, rows: readonly RowUpsert[]): InsertOp {
  return {
    kind: 'insert',
    entity,
    ids: rows.map((r) => r.id),
    columns: entity.fields.map((_, i) => rows.map((r) => r.values[i] ?? null)),
    upsert: rows[0]!.upsert,
    ...(rows[0]!.omit && { omit: rows[0]!.omit }),
  }
}

/**
 * Rows of an UPDATE or DELETE in the order the server locks them (see lockedInIdOrder in
 * render-write.ts): by id as the server orders ids of that type. Within a statement the server
 * sorts them itself; this order makes a change set larger than one statement split into chunks
 * that follow the same order, so concurrent flushes still lock shared rows alike. What the sort
 * costs: docs/design-notes.md, "Rows locked in id order".
 */
function inLockOrder<T extends { readonly id: string }>(entity: EntityMeta, rows: readonly T[]): readonly T[] {
  if (rows.length < 2) return rows
  const compare = INTEGER_TYPES.has(entity.id.type.sqlType) ? compareIntegers : compareTexts
  return [...rows].sort((a, b) => compare(a.id, b.id))
}

const INTEGER_TYPES = new Set(['int2', 'int4', 'int8'])
const compareTexts = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

/** Integers written as Flushwave writes them (no `+`, no leading zeros): by value, without parsing. */
function compareIntegers(a: string, b: string): number {
  const negative = a.startsWith('-')
  if (negative !== b.startsWith('-')) return negative ? -1 : 1
  const byMagnitude = a.length - b.length || compareTexts(a, b)
  return negative ? -byMagnitude : byMagnitude
}

// Inserts, updates and deletes (here, the renderer, flush.ts, the postgres.js executor, reads and
// hydration) walk their rows and columns with loops, not with callbacks made per call
// (`rows.map((r) => …)`); rarer ops (upserts, increments, self-referencing trees) still use them:
// a major GC frees the optimised code of closures no longer alive, and each one made later starts
// unoptimised and is compiled again (docs/design-notes.md, "Loops instead of callbacks on the
// flush path").
function updateOp(entity: EntityMeta, unordered: readonly RowUpdate[]): UpdateOp {
  const rows = inLockOrder(entity, unordered)
  let counting = false
  for (const row of rows) if (row.increments !== undefined) counting = true
  const columns: { values: Text[]; set: boolean[] }[] = []
  for (let i = 0; i < entity.fields.length; i++) {
    const values: Text[] = []
    const set: boolean[] = []
    for (const row of rows) {
      values.push(row.changed.get(i) ?? null)
      set.push(row.changed.has(i))
    }
    columns.push({ values, set })
  }
  return {
    kind: 'update',
    entity,
    ids: idsOf(rows),
    columns,
    versions: entity.version ? versionsOf(rows) : undefined,
    increments: counting ? incrementsOf(entity, rows) : undefined,
  }
}

function lockOp(entity: EntityMeta, rows: readonly RowUpdate[]): LockOp {
  return { kind: 'lock', entity, ids: idsOf(inLockOrder(entity, rows)) }
}

/** Per counter field, the delta each row adds (null: none). */
function incrementsOf(entity: EntityMeta, rows: readonly RowUpdate[]): Text[][] {
  return entity.counters.map((f) => {
    const i = entity.fields.indexOf(f)
    return rows.map((r): Text => r.increments?.get(i) ?? null)
  })
}

function deleteOp(entity: EntityMeta, unordered: readonly RowDelete[], chunked = false): DeleteOp {
  const sorted = inLockOrder(entity, unordered)
  const rows = chunked ? childrenFirst(sorted) : sorted
  return { kind: 'delete', entity, ids: idsOf(rows), versions: entity.version ? versionsOf(rows) : undefined }
}

function linkInsertOp(link: ManyToManyMeta, adds: readonly LinkChange[]): LinkInsertOp {
  let mayExist = false
  for (let i = 0; i < adds.length && !mayExist; i++) mayExist = adds[i]!.fresh !== true
  return { kind: 'link-insert', link, ...ends(adds), mayExist }
}

function ends(changes: readonly LinkChange[]): { owners: string[]; targets: string[] } {
  return { owners: changes.map((c) => c.owner), targets: changes.map((c) => c.target) }
}

function unique(changes: readonly LinkChange[]): LinkChange[] {
  const seen = new Set<string>()
  const out: LinkChange[] = []
  for (const c of changes) {
    const key = `${c.owner}\u0000${c.target}`
    if (!seen.has(key)) {
      seen.add(key)
      out.push(c)
    }
  }
  return out
}

/**
 * The ids each table inserts, as sets, made on first use: only cycle-breaking references
 * (`fixUp`) ask, and a flush of thousands of rows should not build sets nothing reads.
 */
function newIdsOf(inserts: ReadonlyMap<EntityMeta, NewRows>, more: ReadonlyMap<EntityMeta, readonly NewRows[]> | undefined): NewIds {
  const made = new Map<EntityMeta, ReadonlySet<string>>()
  return {
    get(entity) {
      let ids = made.get(entity)
      const rows = inserts.get(entity)
      if (ids === undefined && rows !== undefined) {
        made.set(entity, (ids = new Set(rows.ids)))
        for (const group of more?.get(entity) ?? []) for (const id of group.ids) (ids as Set<string>).add(id)
      }
      return ids
    },
  }
}

interface NewIds {
  get(entity: EntityMeta): ReadonlySet<string> | undefined
}

function byLink(changes: readonly LinkChange[]): Map<ManyToManyMeta, LinkChange[]> {
  const out = new Map<ManyToManyMeta, LinkChange[]>()
  for (const change of changes) addTo(out, change.link, change)
  return out
}

function idsOf(rows: readonly { readonly id: string }[]): string[] {
  const ids: string[] = []
  for (const row of rows) ids.push(row.id)
  return ids
}

function versionsOf(rows: readonly { readonly version?: Text }[]): Text[] {
  const versions: Text[] = []
  for (const row of rows) versions.push(row.version ?? null)
  return versions
}

/** A table's updates in the UPDATEs they need: one, or one per `after` when rows pass unique values on. */
function inPasses(rows: readonly RowUpdate[]): (readonly RowUpdate[])[] {
  let last = 0
  for (const row of rows) if (row.after !== undefined && row.after > last) last = row.after
  if (last === 0) return [rows]
  const passes: RowUpdate[][] = Array.from({ length: last + 1 }, () => [])
  for (const row of rows) passes[row.after ?? 0]!.push(row)
  return passes.filter((pass) => pass.length > 0)
}

function byEntity<R extends { readonly entity: EntityMeta }>(rows: readonly R[]): Map<EntityMeta, R[]> {
  const out = new Map<EntityMeta, R[]>()
  for (const row of rows) addTo(out, row.entity, row)
  return out
}
