/**
 * A column type knows how to check a JS value before anything is sent, how to write it in
 * PostgreSQL's text input format (every bind parameter Flushwave sends is text, cast in SQL), and
 * how to read back what a driver returned for its `selectExpr`, whatever parsers the caller configured.
 */
export interface ColumnType<T> {
  /** SQL type used in casts, already quoted where it is an identifier. */
  readonly sqlType: string
  /**
   * The column's declared type when it is narrower than the cast type: `varchar(20)` casts as
   * `varchar` (an explicit cast to varchar(20) would cut a longer value silently; assigning it to
   * the column refuses it) and is declared, created and checked as `varchar(20)`.
   */
  readonly columnType?: string
  /** Which operators `where` offers on it (the TypeScript side is the builder's phantom type). */
  readonly operators: OperatorKind
  /** Why `value` is not a valid T, or undefined when it is. */
  check(value: unknown): string | undefined
  toText(value: T): string
  /** Reads the driver's value for `selectExpr`, and `toText`'s form too (page cursors carry it). */
  fromDb(raw: unknown): T
  /** Expression that selects the column so that `fromDb` reads it unambiguously. */
  selectExpr(quotedColumn: string): string
  /** Its values are objects that can change in place (Date, JSON, bytes, arrays): flushes diff them even without a setter call. */
  readonly mutable?: true
  /**
   * How values travel in the write statements' arrays (and sit in snapshots) when not as `toText`:
   * timestamptz goes as epoch milliseconds in an int8 array, which PostgreSQL reads much faster
   * than date text; an array column goes as its literal in a text array, which `unnest` leaves
   * whole. `decode` turns each back in SQL.
   */
  readonly wire?: Wire<T>
  /**
   * Set on the number types that counters (`em.increment`) can add to: the exact sum of two
   * deltas, so that several increments of one property before a flush travel as one.
   */
  readonly add?: (a: T, b: T) => T
  /**
   * Set on the time types: an entity may hold a value of this type as its epoch milliseconds (a
   * number) until user code first reads it (see EntityState.values). `toText` and `wire.encode`
   * take that form too.
   */
  readonly fromTime?: (ms: number) => T
  /**
   * Set on the time types: the epoch milliseconds of a value read (what `fromDb` takes), without
   * making the Date. Entities read hold their times as numbers until user code reads them, as new
   * ones do (see fromTime): a list read makes no Date that nobody looks at.
   */
  readonly timeFromDb?: (raw: unknown) => number
}

/**
 * The operators of a type, at run time: `equality` (eq, ne, in, nin, isNull), `ordered` (and gt,
 * gte, lt, lte, between), `text` (and like, ilike, notLike), `json` (containment and keys), `array`
 * (containment and overlap).
 */
export type OperatorKind = 'equality' | 'ordered' | 'text' | 'json' | 'array'

export interface Wire<T> {
  readonly sqlType: string
  /** encode's text is already escaped as a quoted element of an array literal (`\` and `"` backslashed). */
  readonly escaped?: true
  encode(value: T): string
  /** SQL turning `expr` (a value of `sqlType`) into the column's type, exactly. */
  decode(expr: string): string
  /**
   * An encoded value as the column type's own text (`toText`'s form). A scalar bind goes in that
   * form, cast to the column's type: the server reads one value either way, and a plain cast plans
   * and runs for less than `decode`'s expression (see render-write.ts, scalarText).
   */
  toText(encoded: string): string
}

/** A value's text as flushes send it and snapshots hold it (a time not yet made a Date too: see `fromTime`). */
export function writeText<T>(type: ColumnType<T>, value: T): string {
  return type.wire ? type.wire.encode(value) : type.toText(value)
}

/** The type a column is declared with (DDL, catalog checks). */
export const declaredType = (type: ColumnType<unknown>): string => type.columnType ?? type.sqlType

/** selectExpr of the types that drivers read unambiguously as they are. */
export const plain = (c: string): string => c

/** selectExpr of the types read as their text output. */
export const asText = (c: string): string => `${c}::text`
