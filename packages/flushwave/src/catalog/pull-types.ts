import * as types from '../schema/column-types.js'
import type { ColumnType } from '../schema/column-types.js'
import { quoteIdent } from '../schema/quote.js'
import type { CatalogColumn } from './pull-read.js'

/**
 * The builder `flushwave pull` writes for a column's type, and the defaults it can carry over.
 * Every type with a builder maps to it, and so does a one-dimensional array of any of them.
 */

/** A column's type as pull writes it. */
export interface PulledType {
  /** The builder, without nullability, default or name: `t.varchar(12)`, `t.array(t.text().nullable())`. */
  readonly builder: string
  /** The column type that builder makes: a default is carried over only when it accepts the value. */
  readonly type: ColumnType<unknown>
  /** Whether a default's text can be written as a JS literal of the property's value (not for Dates, bytes or JSON). */
  readonly literals: boolean
  /**
   * Set when the column's type has a precision the builder does not carry (numeric(10,2), time(0),
   * timestamptz(0), interval year): the server rounds values to it, so one can read back changed.
   */
  readonly precision?: true
}

interface Scalar {
  readonly builder: string
  readonly type: ColumnType<unknown>
  readonly literals: boolean
}

const scalar = <T>(builder: string, type: ColumnType<T>, literals = true): Scalar => ({ builder, type: type as ColumnType<unknown>, literals })

/** The types with a builder of their own, by pg_type.typname (varchar, bpchar and enums are below). */
const SCALARS = new Map<string, Scalar>([
  ['text', scalar('t.text()', types.text)],
  ['int2', scalar('t.smallint()', types.smallint)],
  ['int4', scalar('t.integer()', types.integer)],
  ['int8', scalar('t.bigint()', types.bigint)],
  ['numeric', scalar('t.numeric()', types.numeric)],
  ['float4', scalar('t.real()', types.real)],
  ['float8', scalar('t.double()', types.double)],
  ['bool', scalar('t.boolean()', types.boolean)],
  ['date', scalar('t.date()', types.date)],
  ['time', scalar('t.time()', types.time)],
  ['timestamp', scalar('t.timestamp()', types.timestamp, false)],
  ['timestamptz', scalar('t.timestamptz()', types.timestamptz, false)],
  ['interval', scalar('t.interval()', types.interval)],
  ['bytea', scalar('t.bytea()', types.bytea, false)],
  ['jsonb', scalar('t.jsonb()', types.jsonb(), false)],
  ['uuid', scalar('t.uuid()', types.uuid)],
  ['citext', scalar('t.citext()', types.citext)],
  ['inet', scalar('t.inet()', types.inet)],
  ['cidr', scalar('t.cidr()', types.cidr)],
])

/**
 * The builder for a type by its typname and type modifier, or why there is none (undefined: no
 * builder at all). An enum type is named with its schema (`{ schema }`) when it is not in `defaultSchema`.
 */
function scalarOf(typeName: string, typmod: number, column: CatalogColumn, defaultSchema: string | undefined): Scalar | string | undefined {
  const { enumValues, enumSchema } = column
  if (enumValues && enumValues.length > 0) {
    const qualified = enumSchema !== undefined && defaultSchema !== undefined && enumSchema !== defaultSchema
    const options = qualified ? `, { schema: ${quote(enumSchema)} }` : ''
    const sqlType = qualified ? `${quoteIdent(enumSchema)}.${quoteIdent(typeName)}` : quoteIdent(typeName)
    return scalar(`t.enum(${quote(typeName)}, [${enumValues.map(quote).join(', ')}]${options})`, types.enumeration(sqlType, enumValues))
  }
  // The catalog keeps the n of varchar(n) and char(n) as n + 4; -1 when there is none.
  if (typeName === 'varchar') return typmod >= 0 ? scalar(`t.varchar(${typmod - 4})`, types.varchar(typmod - 4)) : scalar('t.text()', types.text)
  if (typeName === 'bpchar') return typmod >= 0 ? scalar(`t.char(${typmod - 4})`, types.char(typmod - 4)) : 'bpchar without a length is not supported (t.char(n) has one)'
  return SCALARS.get(typeName)
}

/**
 * What pull writes for a column's type, or why it cannot (a line of the module's "not in this
 * schema" list, after the column's name). An enum type outside `defaultSchema` (the schema whose
 * names the module leaves to the search path) gets `{ schema }`; with no default, none does.
 *
 * A varchar without a length is `t.text()`: a text value is what it holds, and checkSchema()
 * accepts a varchar column for t.text(). An array of them is left out: `where` compares an array
 * in its own type, and PostgreSQL has no operators between varchar[] and text[].
 *
 * An array's elements are always `.nullable()`: the catalog does not record whether an array may
 * hold NULLs (only a CHECK could forbid them). With non-null elements, a row read with a NULL in
 * the array would fail every flush of its entity (an array is checked again at each flush, as a
 * value that can change in place). The property's type is then `(T | null)[]`; drop the
 * `.nullable()` to make it `T[]` when you know there are none.
 */
export function pulledType(column: CatalogColumn, defaultSchema?: string): PulledType | string {
  const unsupported = `type ${column.type} is not supported; not generated`
  if (column.elementTypeName === undefined) {
    const found = scalarOf(column.typeName, column.typmod, column, defaultSchema)
    if (typeof found === 'string') return `${found}; not generated`
    return found ? { ...found, ...precisionOf(column.typeName, column.typmod) } : unsupported
  }
  if (column.dimensions > 1) return `type ${column.type} declared with ${column.dimensions} dimensions is not supported (t.array() is one-dimensional); not generated`
  if (column.elementTypeName === 'varchar' && column.typmod < 0) {
    return `type ${column.type} is not supported (no operators compare varchar[] with text[]: \`alter table … alter column … type text[]\`, or give it a length); not generated`
  }
  const element = scalarOf(column.elementTypeName, column.typmod, column, defaultSchema)
  if (typeof element === 'string') return `type ${column.type}: ${element}; not generated`
  if (!element) return unsupported
  return {
    builder: `t.array(${element.builder}.nullable())`,
    type: types.array(element.type, true) as ColumnType<unknown>,
    literals: element.literals,
    ...precisionOf(column.elementTypeName, column.typmod),
  }
}

/** Whether a type modifier makes the server round values a builder allows. */
function precisionOf(typeName: string, typmod: number): { precision?: true } {
  if (typmod < 0) return {}
  switch (typeName) {
    case 'numeric':
      return { precision: true }
    case 'time':
      return typmod < 6 ? { precision: true } : {}
    // Flushwave's Dates hold milliseconds.
    case 'timestamp':
    case 'timestamptz':
      return typmod < 3 ? { precision: true } : {}
    case 'interval': {
      // The fields (`interval year`) in the upper half, 0x7fff for all; the precision in the lower, 0xffff for none.
      const fields = (typmod >> 16) & 0x7fff
      const precision = typmod & 0xffff
      return fields !== 0x7fff || (precision !== 0xffff && precision < 6) ? { precision: true } : {}
    }
    default:
      return {}
  }
}

const NOW = "(?:now\\(\\)|CURRENT_TIMESTAMP|transaction_timestamp\\(\\))"
/** `now()` for timestamptz; now in UTC for timestamp, as `t.timestamp().defaultNow()` writes it (`now() at time zone 'utc'`, or `timezone('utc', now())`). */
const TIMESTAMPTZ_NOW = new RegExp(`^${NOW}$`, 'i')
const TIMESTAMP_NOW = new RegExp(`^(?:\\(${NOW} AT TIME ZONE 'utc'::text\\)|timezone\\('utc'::text, ${NOW}\\))$`, 'i')
/** A quoted literal, perhaps cast: `'x'::character varying`, `'{}'::character varying(20)[]`. */
const LITERAL = /^'((?:[^']|'')*)'(?:::[\w." (),[\]]+)?$/
/** A number as pg_get_expr writes one: `5`, `(-5)`, `1.5`. */
const NUMBER = /^\(?(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)\)?(?:::[\w ]+)?$/i
const EMPTY_ARRAY = /^ARRAY\[\]::[\w." (),]+\[\]$/

/**
 * The `.default(…)` (or `.defaultNow()`) that carries a column's default, when Flushwave can: now()
 * on a timestamp, and a literal its builder accepts as it is (a number, a text, an enum label, an
 * array of them). Undefined for any other expression: the caller lists it as not carried over.
 */
export function defaultSource(column: CatalogColumn, pulled: PulledType): string | undefined {
  const d = column.default
  if (d === undefined) return undefined
  const array = column.elementTypeName !== undefined
  if (!array && column.typeName === 'timestamptz' && TIMESTAMPTZ_NOW.test(d)) return '.defaultNow()'
  if (!array && column.typeName === 'timestamp' && TIMESTAMP_NOW.test(d)) return '.defaultNow()'
  const literal = LITERAL.exec(d)
  const text = literal ? literal[1]!.replace(/''/g, "'") : /^(true|false)$/.test(d) ? d : NUMBER.exec(d)?.[1]
  // An empty array is one whatever its elements.
  if (array && (text === '{}' || EMPTY_ARRAY.test(d))) return '.default([])'
  if (text === undefined || !pulled.literals) return undefined
  let value: unknown
  try {
    value = pulled.type.fromDb(text)
  } catch {
    return undefined
  }
  if (value === null || pulled.type.check(value) !== undefined) return undefined
  const source = sourceOf(value)
  return source === undefined ? undefined : `.default(${source})`
}

/** A value as a JS expression: strings, numbers (NaN, -0 and ±Infinity too), bigints, booleans, arrays of them and nulls. */
function sourceOf(value: unknown): string | undefined {
  if (value === null) return 'null'
  switch (typeof value) {
    case 'string':
      return quote(value)
    case 'number':
      return Object.is(value, -0) ? '-0' : String(value)
    case 'bigint':
      return `${value}n`
    case 'boolean':
      return String(value)
  }
  if (!Array.isArray(value)) return undefined
  const items = value.map(sourceOf)
  return items.includes(undefined) ? undefined : `[${items.join(', ')}]`
}

const ESCAPES: Readonly<Record<string, string>> = { '\\': '\\\\', "'": "\\'", '\n': '\\n', '\r': '\\r', '\u2028': '\\u2028', '\u2029': '\\u2029' }

/** A single-quoted JS string literal. */
export const quote = (s: string): string => `'${s.replace(/[\\'\n\r\u2028\u2029]/g, (c) => ESCAPES[c]!)}'`
