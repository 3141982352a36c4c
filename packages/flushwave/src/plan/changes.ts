import type { EntityMeta, FieldMeta, ManyToManyMeta } from '../schema/meta.js'

/**
 * What a flush must write, with every value already checked and in PostgreSQL text form, and every
 * id known. This is the planner's whole input: it needs no entity objects and does no I/O.
 */
export interface Changes {
  /**
   * New rows, column-wise: one entry per table, or per table and set of server-filled columns its
   * rows leave unset (`omit`), in a deterministic order within each table.
   */
  readonly inserts: readonly NewRows[]
  /** Rows of `em.upsert`, one object each: their statements group by key and updated fields. */
  readonly upserts: readonly RowUpsert[]
  readonly updates: readonly RowUpdate[]
  readonly deletes: readonly RowDelete[]
  readonly linkAdds: readonly LinkChange[]
  readonly linkRemoves: readonly LinkChange[]
}

export type Text = string | null

/**
 * A table's new rows held column-wise, as its INSERT sends them (one array per column, as in Joist's
 * EntityWriter): the change set appends each row's values to the columns, and the plan takes the
 * arrays as they are. Made row by row, a flush built two objects per row and copied every value
 * again to transpose them.
 */
export interface NewRows {
  readonly entity: EntityMeta
  readonly ids: string[]
  /** One array per `entity.fields`, each with one value per row (empty for the omitted ones). */
  readonly columns: Text[][]
  /**
   * Indexes in `entity.fields` of the columns these rows leave to the server (`.serverDefault()`
   * unset, `.generated()`), ascending: the INSERT omits them and returns their values.
   */
  readonly omit?: readonly number[]
}

export function newRows(entity: EntityMeta, omit?: readonly number[]): NewRows {
  const columns: Text[][] = []
  for (let i = 0; i < entity.fields.length; i++) columns.push([])
  return omit === undefined ? { entity, ids: [], columns } : { entity, ids: [], columns, omit }
}

/** Rows given one by one (tests, warm-up) as column-wise inserts, one entry per table in first-seen order. */
export function insertsOf(rows: readonly { readonly entity: EntityMeta; readonly id: string; readonly values: readonly Text[] }[]): NewRows[] {
  const tables = new Map<EntityMeta, NewRows>()
  for (const row of rows) {
    let table = tables.get(row.entity)
    if (!table) tables.set(row.entity, (table = newRows(row.entity)))
    table.ids.push(row.id)
    table.columns.forEach((column, i) => column.push(row.values[i] ?? null))
  }
  return [...tables.values()]
}

/** An upsert's row (see `Changes.upserts`). */
export interface RowUpsert {
  readonly entity: EntityMeta
  readonly id: string
  /** One value per `entity.fields`, in order. */
  readonly values: readonly Text[]
  /** On a conflict over `key`, the existing row gets `update` instead (see em.upsert). */
  readonly upsert: UpsertSpec
  /** As NewRows.omit: the columns left to the server (their `values` are null). */
  readonly omit?: readonly number[]
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
  /**
   * Sent in a later UPDATE than the rows of its table with a lower `after` (absent: 0): it takes a
   * unique value one of them gives up, and PostgreSQL checks a unique key row by row.
   */
  readonly after?: number
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
  /**
   * An end of the link is a row this flush inserts, so the join table cannot hold the link yet
   * (its foreign keys see to that) and the INSERT needs no `on conflict do nothing`.
   */
  readonly fresh?: true
}

export function isEmpty(changes: Changes): boolean {
  return (
    changes.inserts.length + changes.upserts.length + changes.updates.length + changes.deletes.length + changes.linkAdds.length + changes.linkRemoves.length === 0
  )
}
