import type { EntityMeta, ManyToManyMeta } from '../schema/meta.js'
import type { Text } from './changes.js'

/**
 * A plan's operations: one per table and kind, with values held column-wise, so that each renders to
 * one statement whose text does not depend on the number of rows.
 */
export type Op = InsertOp | UpdateOp | DeleteOp | LinkInsertOp | LinkDeleteOp | LinkPurgeOp

export interface InsertOp {
  readonly kind: 'insert'
  readonly entity: EntityMeta
  readonly ids: readonly string[]
  /** One array per `entity.fields`, each with one value per row. */
  readonly columns: readonly (readonly Text[])[]
}

export interface UpdateOp {
  readonly kind: 'update'
  readonly entity: EntityMeta
  readonly ids: readonly string[]
  /** Per field: the new value per row, and whether that row sets it (unchanged fields keep the row's value). */
  readonly columns: readonly { readonly values: readonly Text[]; readonly set: readonly boolean[] }[]
}

export interface DeleteOp {
  readonly kind: 'delete'
  readonly entity: EntityMeta
  readonly ids: readonly string[]
}

export interface LinkInsertOp {
  readonly kind: 'link-insert'
  readonly link: ManyToManyMeta
  readonly owners: readonly string[]
  readonly targets: readonly string[]
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
  readonly ids: readonly string[]
}

/** The table an op writes, for results and error messages. */
export function tableOf(op: Op): string {
  return 'entity' in op ? op.entity.table : op.link.table
}

/** The entity an op writes rows of; undefined for join tables. */
export function entityOf(op: Op): string | undefined {
  return 'entity' in op ? op.entity.name : undefined
}

export function rowCount(op: Op): number {
  switch (op.kind) {
    case 'insert':
    case 'update':
    case 'delete':
    case 'link-purge':
      return op.ids.length
    case 'link-insert':
    case 'link-delete':
      return op.owners.length
  }
}
