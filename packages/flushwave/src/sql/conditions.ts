import type { FieldMeta, ManyToManyMeta, OneToManyMeta } from '../schema/meta.js'

/**
 * A read's conditions as data: a tree checked against the schema, every value already in
 * PostgreSQL's text form (entity-manager/where.ts makes it from a `where`; render-where.ts renders
 * it). A row matches when its condition is true: `not` matches when its condition is not true, so
 * NULLs never make a row match both a condition and its negation, nor neither.
 */
export type Condition =
  | { readonly kind: 'true' }
  | { readonly kind: 'false' }
  | { readonly kind: 'and' | 'or'; readonly items: readonly Condition[] }
  | { readonly kind: 'not'; readonly item: Condition }
  | { readonly kind: 'compare'; readonly column: ColumnRef; readonly op: CompareOp; readonly value: string; readonly cast: string }
  | { readonly kind: 'in'; readonly column: ColumnRef; readonly values: readonly string[]; readonly cast: string; readonly negated: boolean }
  | { readonly kind: 'null'; readonly column: ColumnRef; readonly negated: boolean }
  | { readonly kind: 'between'; readonly column: ColumnRef; readonly low: string; readonly high: string; readonly cast: string }
  | {
      readonly kind: 'related'
      readonly through: readonly FieldMeta[]
      readonly relation: Relation
      readonly quantifier: Quantifier
      readonly where: Condition
      /** Which related rows count at all, whatever the quantifier (soft-deleted ones do not): `true` for every row. */
      readonly among: Condition
    }

export type CompareOp = '=' | '<>' | '<' | '<=' | '>' | '>=' | 'like' | 'ilike' | 'not like' | '@>' | '<@' | '&&' | '?'

export type Quantifier = 'some' | 'none' | 'every'

/** A to-many relation a condition looks through (an EXISTS subquery). */
export type Relation = { readonly kind: 'one-to-many'; readonly meta: OneToManyMeta } | { readonly kind: 'many-to-many'; readonly meta: ManyToManyMeta }

/**
 * A column of the row a condition is about, or of a row it reaches by following many-to-one
 * references (`through`, in order from that row: joins).
 */
export interface ColumnRef {
  readonly through: readonly FieldMeta[]
  /** The column, quoted. */
  readonly column: string
}

export const ALL: Condition = { kind: 'true' }

/** `and` of conditions, without the trivial cases: no item is every row, one is itself. */
export function allOf(items: readonly Condition[]): Condition {
  const kept = items.filter((c) => c.kind !== 'true')
  if (kept.some((c) => c.kind === 'false')) return { kind: 'false' }
  return kept.length === 0 ? ALL : kept.length === 1 ? kept[0]! : { kind: 'and', items: kept }
}
