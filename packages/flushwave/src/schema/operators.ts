/**
 * The operators a `where` offers on a property, by the property's type. Each column builder carries
 * its set as a phantom type (see Column), so that an operator a type does not have is a type error.
 * A row matches a condition only when the condition is true: a comparison with NULL matches nothing
 * (`ne`, `nin` and `notLike` included), and `not` matches every row its condition does not.
 */

/** Every column: equality, lists, NULL. */
export interface EqualityOps<T> {
  eq?: T
  ne?: T
  in?: readonly T[]
  /** Not one of the values. */
  nin?: readonly T[]
  isNull?: boolean
}

/** Columns with an order: numbers, decimals, text, times, UUIDs and enums (in their declared order). */
export interface OrderedOps<T> extends EqualityOps<T> {
  gt?: T
  gte?: T
  lt?: T
  lte?: T
  /** Between both bounds, inclusive. */
  between?: readonly [T, T]
}

/** Text columns: the ordered operators and patterns (`%` any run of characters, `_` one). */
export interface TextOps extends OrderedOps<string> {
  like?: string
  /** `like`, ignoring case. */
  ilike?: string
  notLike?: string
}

/** jsonb columns: equality of documents, containment and top-level keys. */
export interface JsonOps<T> {
  eq?: T
  ne?: T
  isNull?: boolean
  /** The document contains this one (`@>`): `{ contains: { tags: ['a'] } }`. */
  contains?: unknown
  /** The document is contained in this one (`<@`). */
  containedBy?: unknown
  /** The document is an object with this key, or an array with this string (`?`). */
  hasKey?: string
}

/** Array columns: equality of whole arrays, containment and overlap (`@>`, `<@`, `&&`). */
export interface ArrayOps<E> {
  eq?: readonly E[]
  ne?: readonly E[]
  isNull?: boolean
  /** Has every one of these elements: `{ tags: { contains: ['sale'] } }`. */
  contains?: readonly E[]
  /** Every element is one of these. */
  containedBy?: readonly E[]
  /** Has at least one of these elements. */
  overlaps?: readonly E[]
}
