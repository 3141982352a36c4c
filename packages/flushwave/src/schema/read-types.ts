import type { Column, ManyToMany, ManyToOne, OneToMany } from './builders.js'
import type { SchemaDefs } from './define.js'
import type { CounterName, EntityName, IdOf, PropsOf, RelationName } from './infer.js'

/** The entity a relation property of K leads to. */
type RelationTarget<D extends SchemaDefs, K extends EntityName<D>, R> = R extends keyof PropsOf<D, K>
  ? PropsOf<D, K>[R] extends ManyToOne<infer T, boolean, boolean> | OneToMany<infer T, string> | ManyToMany<infer T>
    ? T & EntityName<D>
    : never
  : never

/**
 * A relation of K, or a path of relations through it (`'books.reviews.author'`), up to four
 * levels: what `em.populate` and `find(…, { populate })` load.
 */
export type PopulatePath<D extends SchemaDefs, K extends EntityName<D>, Depth extends readonly unknown[] = []> = Depth['length'] extends 4
  ? never
  : { [R in RelationName<D, K>]: R | `${R}.${PopulatePath<D, RelationTarget<D, K, R>, [...Depth, unknown]>}` }[RelationName<D, K>]

/** Columns with an order, which `min` and `max` take (not jsonb, boolean, bytea or array ones). */
export type OrderedName<D extends SchemaDefs, K extends EntityName<D>> = {
  [F in keyof PropsOf<D, K>]: PropsOf<D, K>[F] extends Column<unknown, boolean, boolean, boolean, infer O> ? (unknown extends O ? F : 'gt' extends keyof O ? F : never) : never
}[keyof PropsOf<D, K>] &
  string

/** What a group is keyed by: columns and many-to-ones (by the id they hold). */
export type GroupName<D extends SchemaDefs, K extends EntityName<D>> = {
  [F in keyof PropsOf<D, K>]: PropsOf<D, K>[F] extends Column<unknown, boolean, boolean, boolean, unknown> | ManyToOne<string, boolean, boolean> ? F : never
}[keyof PropsOf<D, K>] &
  string

/** What `em.aggregate` computes, per group of `groupBy` (without it, over every row that matches). */
export interface AggregateSpec<D extends SchemaDefs, K extends EntityName<D>> {
  readonly groupBy?: readonly GroupName<D, K>[]
  /** Sums of number columns: a number for integer, a bigint for bigint, a decimal string for numeric. */
  readonly sum?: readonly CounterName<D, K>[]
  /** Averages of number columns, as exact decimal strings. */
  readonly avg?: readonly CounterName<D, K>[]
  readonly min?: readonly OrderedName<D, K>[]
  readonly max?: readonly OrderedName<D, K>[]
}

type ColumnValue<D extends SchemaDefs, P> =
  P extends Column<infer T, boolean, boolean, boolean, unknown> ? T : P extends ManyToOne<infer Target, boolean, boolean> ? (Target extends EntityName<D> ? IdOf<D, Target> : never) : never

type NullableValue<D extends SchemaDefs, P> = P extends Column<unknown, infer N, boolean, boolean, unknown> | ManyToOne<string, infer N, boolean> ? (N extends true ? null : never) : never

/** A sum in JavaScript: integer columns sum to a number, bigint to a bigint, numeric to a decimal string. */
type SumValue<P> = P extends Column<infer T, boolean, boolean, true, unknown> ? (T extends number ? number : T) : never

type Picked<S, F extends string> = S extends { readonly [key in F]?: readonly (infer N)[] } ? N & string : never

/** One group's figures: its keys, `count`, and each function asked for, by column (null over no values). */
export type AggregateRow<D extends SchemaDefs, K extends EntityName<D>, S extends AggregateSpec<D, K>> = {
  readonly [G in Picked<S, 'groupBy'>]: ColumnValue<D, PropsOf<D, K>[G]> | NullableValue<D, PropsOf<D, K>[G]>
} & { readonly count: number } & ([Picked<S, 'sum'>] extends [never] ? unknown : { readonly sum: { readonly [F in Picked<S, 'sum'>]: SumValue<PropsOf<D, K>[F]> | null } }) &
  ([Picked<S, 'avg'>] extends [never] ? unknown : { readonly avg: { readonly [F in Picked<S, 'avg'>]: string | null } }) &
  ([Picked<S, 'min'>] extends [never] ? unknown : { readonly min: { readonly [F in Picked<S, 'min'>]: ColumnValue<D, PropsOf<D, K>[F]> | null } }) &
  ([Picked<S, 'max'>] extends [never] ? unknown : { readonly max: { readonly [F in Picked<S, 'max'>]: ColumnValue<D, PropsOf<D, K>[F]> | null } })

/** `em.aggregate`'s answer: one row, or one per group (in the order of their keys) with `groupBy`. */
export type AggregateResult<D extends SchemaDefs, K extends EntityName<D>, S extends AggregateSpec<D, K>> = S extends { readonly groupBy: readonly unknown[] }
  ? AggregateRow<D, K, S>[]
  : AggregateRow<D, K, S>

/** One page of `em.findPage`. */
export interface Page<T> {
  readonly items: T[]
  /** The cursor of the last item, for `after`: undefined on an empty page. */
  readonly endCursor: string | undefined
  readonly hasNextPage: boolean
}
