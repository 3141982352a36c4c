import { asText, type ColumnType, type OperatorKind } from './column-type.js'

/** What `t.custom()` takes: a type Flushwave has no builder for, described by its SQL name and its text form. */
export interface CustomTypeSpec<T> {
  /** The SQL type, as casts and DDL write it: `ltree`, `geometry(Point, 4326)`, `"my_domain"`. */
  readonly sqlType: string
  /** Why a value is not acceptable, or undefined (default: any value that is not null or undefined). */
  readonly check?: (value: unknown) => string | undefined
  /** The value in the type's text input form. */
  readonly toText: (value: T) => string
  /** The value from the type's text output (or from `selectExpr`'s). */
  readonly fromDb: (text: string) => T
  /** How to select the column as text the `fromDb` reads (default: `column::text`). */
  readonly selectExpr?: (quotedColumn: string) => string
  /** Which operators `where` offers (default: equality). */
  readonly operators?: Extract<OperatorKind, 'equality' | 'ordered' | 'text'>
  /** Values are objects that can change in place: flushes compare their text even without a setter call. */
  readonly mutable?: boolean
}

/** A type name as it may appear in a cast: words, digits, quotes, dots, parentheses, commas, spaces, []. */
const TYPE_NAME = /^[A-Za-z_"][\w ."(),[\]]*$/

export function custom<T>(spec: CustomTypeSpec<T>): ColumnType<T> {
  if (typeof spec.sqlType !== 'string' || !TYPE_NAME.test(spec.sqlType) || spec.sqlType.includes('--')) {
    throw new TypeError(`t.custom(): sqlType must be a type name such as 'ltree' or 'geometry(Point, 4326)', not ${JSON.stringify(spec.sqlType)}`)
  }
  return {
    sqlType: spec.sqlType,
    operators: spec.operators ?? 'equality',
    ...(spec.mutable ? { mutable: true as const } : {}),
    check: spec.check ?? ((v) => (v === null || v === undefined ? 'expected a value' : undefined)),
    toText: spec.toText,
    fromDb: (raw) => spec.fromDb(String(raw)),
    selectExpr: spec.selectExpr ?? asText,
  }
}
