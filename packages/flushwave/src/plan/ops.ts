import type { EntityMeta, FieldMeta, ManyToManyMeta } from '../schema/meta.js'
import type { Text, UpsertSpec } from './changes.js'

/**
 * A plan's operations: one per table and kind, with values held column-wise, so that each renders to
 * one statement whose text does not depend on the number of rows.
 */
export type Op =
  | InsertOp
  | UpdateOp
  | DeleteOp
  | LinkInsertOp
  | LinkDeleteOp
  | LinkPurgeOp
  | CascadeDeleteOp
  | CascadeNullOp
  | CascadeSoftDeleteOp
  | LiveGuardOp
  | UnlinkCycleOp
  | LockOp

/**
 * Rows named without reading them: the rows with these ids; the rows of `entity` whose `field`
 * points at rows of `parent` (so a cascade reaches children the client never loaded); or the rows
 * below `roots` in a tree, through `field`, a self-reference of `entity` (not the roots themselves).
 */
export type RowSet =
  | { readonly kind: 'ids'; readonly entity: EntityMeta; readonly ids: readonly string[] }
  | { readonly kind: 'children'; readonly entity: EntityMeta; readonly field: FieldMeta; readonly parent: RowSet }
  | { readonly kind: 'subtree'; readonly entity: EntityMeta; readonly field: FieldMeta; readonly roots: RowSet }

export function rootIds(rows: RowSet): readonly string[] {
  return rows.kind === 'ids' ? rows.ids : rootIds(rows.kind === 'children' ? rows.parent : rows.roots)
}

export interface InsertOp {
  readonly kind: 'insert'
  readonly entity: EntityMeta
  readonly ids: readonly string[]
  /** One array per `entity.fields`, each with one value per row. */
  readonly columns: readonly (readonly Text[])[]
  /** Upserts (one key and one set of updated fields per op): the statement returns every row. */
  readonly upsert?: UpsertSpec
  /**
   * Indexes in `entity.fields` of columns left to the server (their `columns` arrays are empty for
   * inserts): the statement leaves them out and returns each row's id and their values.
   */
  readonly omit?: readonly number[]
  /** Sent as `copy … from stdin` (plan/copy-policy.ts): a plain insert the planner chose for COPY. */
  readonly copy?: true
}

export interface UpdateOp {
  readonly kind: 'update'
  readonly entity: EntityMeta
  readonly ids: readonly string[]
  /** Per field: the new value per row, and whether that row sets it (unchanged fields keep the row's value). */
  readonly columns: readonly { readonly values: readonly Text[]; readonly set: readonly boolean[] }[]
  /** Expected versions, one per row, when the entity has a version field (null: not checked). */
  readonly versions: readonly Text[] | undefined
  /**
   * When some row has increments: per counter field (`counterFields(entity)`), the delta per row
   * (null for none). The statement then adds them and returns every row's counters and version.
   */
  readonly increments: readonly (readonly Text[])[] | undefined
}

export interface DeleteOp {
  readonly kind: 'delete'
  readonly entity: EntityMeta
  readonly ids: readonly string[]
  /** Expected versions, one per row, when the entity has a version field. */
  readonly versions: readonly Text[] | undefined
}

/**
 * Locks rows, in id order, before updates that write them in another order: a table's updates
 * that pass unique values on go as one UPDATE per link of the chain (planner.ts, inPasses), each
 * locking its own rows. Locked first, the flush holds none of them while it waits for one, as a
 * single UPDATE's rows are (render-write.ts, lockedInIdOrder).
 */
export interface LockOp {
  readonly kind: 'lock'
  readonly entity: EntityMeta
  readonly ids: readonly string[]
}

export interface LinkInsertOp {
  readonly kind: 'link-insert'
  readonly link: ManyToManyMeta
  readonly owners: readonly string[]
  readonly targets: readonly string[]
  /** Some link joins two rows that exist already, so it may be in the table: its insert must do nothing then. */
  readonly mayExist: boolean
}

export interface LinkDeleteOp {
  readonly kind: 'link-delete'
  readonly link: ManyToManyMeta
  readonly owners: readonly string[]
  readonly targets: readonly string[]
}

/** Removes every link of deleted rows, before the rows themselves go. */
export interface LinkPurgeOp {
  readonly kind: 'link-purge'
  readonly link: ManyToManyMeta
  readonly side: 'owner' | 'target'
  readonly rows: RowSet
}

/**
 * Deletes the children of rows being deleted, for a many-to-one declared `onDelete('cascade')`
 * (and, in the same statement, the trees below them when their entity's self-reference cascades).
 */
export interface CascadeDeleteOp {
  readonly kind: 'cascade-delete'
  readonly rows: Extract<RowSet, { kind: 'children' }>
}

/**
 * Before rows of a reference cycle are deleted, clears their cycle-breaking references (the same
 * `fixUp` ones inserts set late), so deleting either side never trips the other's FK.
 */
export interface UnlinkCycleOp {
  readonly kind: 'unlink-cycle'
  readonly rows: RowSet
  readonly fields: readonly FieldMeta[]
}

/** Nulls the foreign key of children of rows being deleted, for `onDelete('set null')`. */
export interface CascadeNullOp {
  readonly kind: 'cascade-null'
  readonly rows: Extract<RowSet, { kind: 'children' }>
}

/**
 * Marks deleted the live children of rows being soft-deleted, for a many-to-one declared
 * `onDelete('cascade')` to them (or the live rows below them in a soft-deleted tree), with the time
 * of the flush. Their entity is soft-deleted too (the planner refuses a cascade to one that is not).
 */
export interface CascadeSoftDeleteOp {
  readonly kind: 'cascade-soft-delete'
  readonly rows: Extract<RowSet, { kind: 'children' | 'subtree' }>
  /** The time, as ISO 8601 text. */
  readonly at: string
}

/**
 * Fails the flush, on the server and inside the pipeline, when a live row still refers to a row
 * being soft-deleted through a many-to-one that neither cascades nor sets null: a hard delete would
 * have been refused by its foreign key; a soft one would leave a live row pointing at a deleted one.
 */
export interface LiveGuardOp {
  readonly kind: 'live-guard'
  readonly rows: Extract<RowSet, { kind: 'children' }>
}

/** The table an op writes, for results and error messages. */
export function tableOf(op: Op): string {
  return 'entity' in op ? op.entity.table : 'link' in op ? op.link.table : op.rows.entity.table
}

/** The entity an op writes rows of; undefined for join tables. */
export function entityOf(op: Op): string | undefined {
  return 'entity' in op ? op.entity.name : 'link' in op ? undefined : op.rows.entity.name
}

export function rowCount(op: Op): number {
  switch (op.kind) {
    case 'insert':
    case 'update':
    case 'delete':
      return op.ids.length
    case 'link-insert':
    case 'link-delete':
      return op.owners.length
    case 'link-purge':
    case 'cascade-delete':
    case 'cascade-null':
    case 'unlink-cycle':
    case 'cascade-soft-delete':
      return 0 // unknown to the client: the server's count is reported
    case 'live-guard':
      return 0 // writes nothing
    case 'lock':
      return 0 // writes nothing
  }
}
