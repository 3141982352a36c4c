import type { EntityMeta, FieldMeta, ManyToManyMeta } from '../schema/meta.js'

/**
 * What a flush must write, with every value already checked and in PostgreSQL text form, and every
 * id known. This is the planner's whole input: it needs no entity objects and does no I/O.
 */
export interface Changes {
  readonly inserts: readonly RowInsert[]
  readonly updates: readonly RowUpdate[]
  readonly deletes: readonly RowDelete[]
  readonly linkAdds: readonly LinkChange[]
  readonly linkRemoves: readonly LinkChange[]
}

export type Text = string | null

export interface RowInsert {
  readonly entity: EntityMeta
  readonly id: string
  /** One value per `entity.fields`, in order. */
  readonly values: readonly Text[]
  /** An upsert: on a conflict over `key`, the existing row gets `update` instead (see em.upsert). */
  readonly upsert?: UpsertSpec
}

export interface UpsertSpec {
  /** The unique key's fields, or 'id' (a provided id). */
  readonly key: readonly FieldMeta[] | 'id'
  /** The fields a conflict updates, in `entity.fields` order. */
  readonly update: readonly FieldMeta[]
}

export interface RowUpdate {
  readonly entity: EntityMeta
  readonly id: string
  /** New values by index into `entity.fields`; only changed fields are present (never the version). */
  readonly changed: ReadonlyMap<number, Text>
  /** The version the row must still have, for entities with a version field. */
  readonly version?: Text
  /**
   * Deltas to add on the server, by index into `entity.fields` (counter fields only). A row with
   * increments and no other change checks no version: adding commutes with concurrent writers.
   */
  readonly increments?: ReadonlyMap<number, Text>
}

export interface RowDelete {
  readonly entity: EntityMeta
  readonly id: string
  /** The version the row must still have, for entities with a version field. */
  readonly version?: Text
  /**
   * A row this flush writes takes its unique key (or its provided id): it is deleted before the
   * inserts and updates, so that a replace by key commits (see replacedKeys in change-set.ts).
   */
  readonly first?: true
  /**
   * For an entity that refers to itself: the ids its row refers to through those references, as
   * read (null or missing when unknown). A table split into several DELETE statements goes
   * children first (see childrenFirst in planner.ts).
   */
  readonly parents?: readonly Text[]
}

export interface LinkChange {
  readonly link: ManyToManyMeta
  readonly owner: string
  readonly target: string
}

export function isEmpty(changes: Changes): boolean {
  return (
    changes.inserts.length + changes.updates.length + changes.deletes.length + changes.linkAdds.length + changes.linkRemoves.length === 0
  )
}
