import type { EntityMeta } from '../schema/meta.js'

/**
 * How statements name a row by its key. An entity with an id column writes it as it always did
 * (`t."id" = any($1::int8[])`); one with a composite key (EntityMeta.key) travels as key tuples,
 * one text each (`{"7","en"}`, schema/types/key-tuple.ts), which SQL takes apart into the key's
 * columns (`(k::text[])[1]::int8`), so that every statement keeps one parameter per set of ids and
 * the primary key's index still finds each row.
 */

/** The element type of an array of the entity's ids (key tuples travel as text). */
export const keyType = (e: EntityMeta): string => e.id.type.sqlType

/** The row's key as one value: its id column, or the text array of its key's values. */
export function keyValue(e: EntityMeta, alias: string): string {
  if (!e.key) return `${alias}.${e.id.quoted}`
  return `array[${e.key.map((f) => `${alias}.${f.quoted}::text`).join(', ')}]`
}

/** The row's key as text: the id's, or a key tuple in the server's array form (keyTupleType reads either). */
export const keyText = (e: EntityMeta, alias: string): string => `${keyValue(e, alias)}::text`

/** The `i`th column's value of `k`, a key tuple (text or text array). */
const part = (e: EntityMeta, k: string, i: number): string => `(${k}::text[])[${i + 1}]::${e.key![i]!.type.sqlType}`

/** The row is the one `k` names (an id, or a key tuple): one comparison per key column. */
export function keyEquals(e: EntityMeta, alias: string, k: string): string {
  if (!e.key) return `${alias}.${e.id.quoted} = ${k}`
  return e.key.map((f, i) => `${alias}.${f.quoted} = ${part(e, k, i)}`).join(' and ')
}

/** What sorts ids (or key tuples) `k` in the order rows are locked: by value, column by column. */
export const keyOrder = (e: EntityMeta, k: string): string => (e.key ? e.key.map((_, i) => part(e, k, i)).join(', ') : k)

/** What sorts rows `alias` in that same order: by their key columns. */
export const rowOrder = (e: EntityMeta, alias: string): string => (e.key ? e.key.map((f) => `${alias}.${f.quoted}`).join(', ') : `${alias}.${e.id.quoted}`)

/** The row's key is among the ids (or key tuples) of array parameter `param` (`$1`). */
export function keyIn(e: EntityMeta, alias: string, param: string): string {
  if (!e.key) return `${alias}.${e.id.quoted} = any(${param}::${e.id.type.sqlType}[])`
  return `(${rowOrder(e, alias)}) in (select ${keyOrder(e, 'u.k')} from unnest(${param}::text[]) as u(k))`
}

/** The row's key is among those that `select` (a query of one column, `column`, of ids or key tuples) returns. */
export function keyAmong(e: EntityMeta, alias: string, column: string, select: string): string {
  if (!e.key) return `${alias}.${e.id.quoted} in (select ${column} ${select})`
  return `(${rowOrder(e, alias)}) in (select ${keyOrder(e, column)} ${select})`
}
