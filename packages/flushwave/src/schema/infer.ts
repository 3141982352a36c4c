import type { Column, Generated, Id, IdStrategy, ManyToMany, ManyToOne, OneToMany } from './builders.js'
import type { EntityDef, Schema, SchemaDefs } from './define.js'

/**
 * A to-many relation of one entity. `items` throws until the collection is loaded (`em.populate`);
 * `add` and `remove` work either way and are written by the next flush.
 */
export interface Collection<T> extends Iterable<T> {
  readonly isLoaded: boolean
  /** The related entities, as the unit of work sees them now (including unflushed changes). */
  readonly items: readonly T[]
  readonly length: number
  has(item: T): boolean
  add(item: T): void
  remove(item: T): void
}

/** Type-level only: tells entities of different names apart even when their properties match. */
export declare const entityName: unique symbol

export type EntityName<D extends SchemaDefs> = keyof D & string

export type PropsOf<D extends SchemaDefs, K extends EntityName<D>> = D[K] extends EntityDef<infer P> ? P : never

export type Nullable<T, N> = N extends true ? T | null : T

type WritableValue<D extends SchemaDefs, P> =
  P extends Column<infer T, infer N, boolean, boolean>
    ? Nullable<T, N>
    : P extends ManyToOne<infer Target, infer N, boolean>
      ? Target extends EntityName<D>
        ? Nullable<Entity<D, Target>, N>
        : never
      : never

type ReadonlyValue<D extends SchemaDefs, P> =
  P extends Id<infer T, IdStrategy>
    ? T
    : P extends Generated<infer T, infer N, unknown>
      ? Nullable<T, N>
      : P extends OneToMany<infer Target, string> | ManyToMany<infer Target>
      ? Target extends EntityName<D>
        ? Collection<Entity<D, Target>>
        : never
      : never

/** Columns and many-to-ones, not generated columns (the server writes those). */
type WritableKeys<P> = {
  [F in keyof P]: P[F] extends Generated<unknown, boolean, unknown> ? never : P[F] extends Column<unknown, boolean, boolean, boolean> | ManyToOne<string, boolean, boolean> ? F : never
}[keyof P]

/**
 * The object type of entity `K`: columns and many-to-one references are assignable properties, the
 * id and collections are read-only. `Entity<typeof schema.defs, 'Author'>`, or `EntityOf<typeof schema, 'Author'>`.
 */
export type Entity<D extends SchemaDefs, K extends EntityName<D>> = { readonly [entityName]: K } & {
  -readonly [F in WritableKeys<PropsOf<D, K>>]: WritableValue<D, PropsOf<D, K>[F]>
} & {
  readonly [F in Exclude<keyof PropsOf<D, K>, WritableKeys<PropsOf<D, K>>>]: ReadonlyValue<D, PropsOf<D, K>[F]>
}

export type DefsOf<S> = S extends Schema<infer D> ? D : never

/** `type Author = EntityOf<typeof schema, 'Author'>` */
export type EntityOf<S extends Schema, K extends EntityName<DefsOf<S>>> = Entity<DefsOf<S>, K>

/** Any entity of schema D. */
export type AnyEntity<D extends SchemaDefs> = { [K in EntityName<D>]: Entity<D, K> }[EntityName<D>]

/** The properties of K's composite primary key (`entity(…, { primaryKey })`); never for an entity with an id property. */
export type KeyPropsOf<D extends SchemaDefs, K extends EntityName<D>> = NonNullable<D[K]['primaryKey']>[number]

/**
 * The id value type of entity K: its id property's type; for a composite primary key, an object of
 * the key's values (a many-to-one's as its target's id): `{ student: 7, course: 'fr-101' }`.
 */
export type IdOf<D extends SchemaDefs, K extends EntityName<D>> = [KeyPropsOf<D, K>] extends [never]
  ? {
      [F in keyof PropsOf<D, K>]: PropsOf<D, K>[F] extends Id<infer T, IdStrategy> ? T : never
    }[keyof PropsOf<D, K>]
  : { readonly [F in KeyPropsOf<D, K>]: KeyPartValue<D, PropsOf<D, K>[F], false> }

/** What `em.load` and `em.ref` take for K: its id, or for a composite key its values, a many-to-one's as an entity or an id. */
export type KeyOf<D extends SchemaDefs, K extends EntityName<D>> = [KeyPropsOf<D, K>] extends [never]
  ? IdOf<D, K>
  : { readonly [F in KeyPropsOf<D, K>]: KeyPartValue<D, PropsOf<D, K>[F], true> }

type KeyPartValue<D extends SchemaDefs, P, AsEntity extends boolean> =
  P extends ManyToOne<infer Target, boolean, boolean>
    ? Target extends EntityName<D>
      ? AsEntity extends true
        ? Entity<D, Target> | IdOf<D, Target>
        : IdOf<D, Target>
      : never
    : P extends Column<infer T, boolean, boolean, boolean, unknown>
      ? T
      : never

type RequiredOnCreate<P> = {
  [F in keyof P]: P[F] extends Column<unknown, false, false, boolean> | ManyToOne<string, false, false> | Id<unknown, 'provided'> ? F : never
}[keyof P]

type OptionalOnCreate<P> = {
  [F in keyof P]: P[F] extends Generated<unknown, boolean, unknown>
    ? never
    : P[F] extends
    | Column<unknown, true, boolean, boolean>
    | Column<unknown, boolean, true, boolean>
    | ManyToOne<string, true, boolean>
    | ManyToOne<string, boolean, true>
    | Id<unknown, 'uuid'>
    | ManyToMany<string>
    ? F
    : never
}[keyof P]

type CreateValue<D extends SchemaDefs, P> =
  P extends Id<infer T, IdStrategy>
    ? T
    : P extends ManyToMany<infer Target>
      ? Target extends EntityName<D>
        ? readonly Entity<D, Target>[]
        : never
      : WritableValue<D, P>

/** What `em.create` takes: required are the non-null columns without a default and non-null references. */
export type CreateInput<D extends SchemaDefs, K extends EntityName<D>> = {
  [F in RequiredOnCreate<PropsOf<D, K>>]: CreateValue<D, PropsOf<D, K>[F]>
} & {
  [F in Exclude<OptionalOnCreate<PropsOf<D, K>>, RequiredOnCreate<PropsOf<D, K>>>]?: CreateValue<D, PropsOf<D, K>[F]>
}

/** What `em.assign` takes: any of the entity's columns and many-to-one references. */
export type AssignInput<D extends SchemaDefs, K extends EntityName<D>> = {
  [F in WritableKeys<PropsOf<D, K>>]?: WritableValue<D, PropsOf<D, K>[F]>
}

/** Names of K's relation properties, for `em.populate`. */
export type RelationName<D extends SchemaDefs, K extends EntityName<D>> = {
  [F in keyof PropsOf<D, K>]: PropsOf<D, K>[F] extends
    | ManyToOne<string, boolean, boolean>
    | OneToMany<string, string>
    | ManyToMany<string>
    ? F
    : never
}[keyof PropsOf<D, K>] &
  string

/** Names of K's counter properties: its integer, bigint and numeric columns, for `em.increment`. */
export type CounterName<D extends SchemaDefs, K extends EntityName<D>> = {
  [F in keyof PropsOf<D, K>]: PropsOf<D, K>[F] extends Column<unknown, boolean, boolean, true> ? F : never
}[keyof PropsOf<D, K>] &
  string

/** What `em.increment` adds to counter F of K: a number, a bigint, or a decimal string. */
export type CounterDelta<D extends SchemaDefs, K extends EntityName<D>, F extends CounterName<D, K>> =
  PropsOf<D, K>[F] extends Column<infer T, boolean, boolean, true> ? T : never
