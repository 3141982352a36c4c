import type { Column, Id, IdStrategy, ManyToMany, ManyToOne, OneToMany } from './builders.js'
import type { SchemaDefs } from './define.js'
import type { Entity, EntityName, IdOf, Nullable, PropsOf } from './infer.js'
import type { EqualityOps, OrderedOps } from './operators.js'

/** The ordered operators (`eq`, `ne`, `gt`, …, `in`, `nin`, `between`, `isNull`); kept under its old name. */
export type Comparison<T> = OrderedOps<T>

/** A column's operators: those its builder declares, the ordered ones when it declares none. */
type OperatorsOf<T, O> = unknown extends O ? OrderedOps<T> : O

/**
 * What a property may be matched with. A column: its value (NULL: `null`), or an object of its
 * operators; a jsonb column only the latter, since a document is an object too. A many-to-one:
 * an entity or its id, equality operators, or conditions on the entity it refers to (a join). A
 * one-to-many or many-to-many: some, none or every related entity meeting conditions (EXISTS).
 */
type FilterValue<D extends SchemaDefs, P> =
  P extends Column<infer T, infer N, boolean, boolean, infer O>
    ? ('hasKey' extends keyof O ? never : T) | Nullable<never, N> | OperatorsOf<T, O>
    : P extends ManyToOne<infer Target, infer N, boolean>
      ? Target extends EntityName<D>
        ? Nullable<Entity<D, Target> | IdOf<D, Target>, N> | EqualityOps<Entity<D, Target> | IdOf<D, Target>> | Where<D, Target>
        : never
      : P extends Id<infer T, IdStrategy>
        ? T | OrderedOps<T>
        : P extends OneToMany<infer Target, string> | ManyToMany<infer Target>
          ? Target extends EntityName<D>
            ? RelationFilter<D, Target>
            : never
          : never

/** Conditions on the entities of a one-to-many or many-to-many. */
export interface RelationFilter<D extends SchemaDefs, K extends EntityName<D>> {
  /** At least one related entity meets them. */
  some?: Where<D, K>
  /** No related entity meets them. */
  none?: Where<D, K>
  /** Every related entity meets them (true when there is none). */
  every?: Where<D, K>
}

/**
 * Conditions of `em.find` and the other reads: each property given must match (see FilterValue),
 * and `and`, `or` and `not` combine conditions at any depth. A row matches only when every condition
 * is true: a comparison with NULL matches no row, and `not` matches every row its conditions don't.
 */
export type Where<D extends SchemaDefs, K extends EntityName<D>> = {
  [F in keyof PropsOf<D, K>]?: FilterValue<D, PropsOf<D, K>[F]>
} & {
  /** Every one of these matches. */
  and?: readonly Where<D, K>[]
  /** At least one of these matches (none given: no row). */
  or?: readonly Where<D, K>[]
  /** These conditions do not match. */
  not?: Where<D, K>
}

type ColumnKeys<P> = { [F in keyof P]: P[F] extends OneToMany<string, string> | ManyToMany<string> ? never : F }[keyof P]

export type OrderBy<D extends SchemaDefs, K extends EntityName<D>> = {
  [F in ColumnKeys<PropsOf<D, K>>]?: 'asc' | 'desc'
}
