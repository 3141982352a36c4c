/**
 * A column type knows three things: how to check a JS value before anything is sent, how to write it
 * in PostgreSQL's text input format (every bind parameter Flushwave sends is text, cast in SQL), and
 * how to read back what postgres.js returned, whatever parsers the caller configured.
 */
export interface ColumnType<T> {
  /** SQL type used in casts and DDL, already quoted where it is an identifier. */
  readonly sqlType: string
  /** Why `value` is not a valid T, or undefined when it is. */
  check(value: unknown): string | undefined
  toText(value: T): string
  fromDb(raw: unknown): T
  /** Expression that selects the column so that `fromDb` reads it unambiguously. */
  selectExpr(quotedColumn: string): string
}

const INT4_MIN = -(2 ** 31)
const INT4_MAX = 2 ** 31 - 1
const INT8_MIN = -(2n ** 63n)
const INT8_MAX = 2n ** 63n - 1n
const NUMERIC = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

const plain = (c: string): string => c

function noNul(s: string): string | undefined {
  return s.includes('\0') ? 'text cannot contain NUL (\\0) characters' : undefined
}

export const text: ColumnType<string> = {
  sqlType: 'text',
  check: (v) => (typeof v === 'string' ? noNul(v) : 'expected a string'),
  toText: (v) => v,
  fromDb: (raw) => String(raw),
  selectExpr: plain,
}

export const integer: ColumnType<number> = {
  sqlType: 'int4',
  check: (v) =>
    typeof v === 'number' && Number.isInteger(v) && v >= INT4_MIN && v <= INT4_MAX
      ? undefined
      : 'expected an integer between -2^31 and 2^31-1',
  toText: (v) => String(v),
  fromDb: (raw) => Number(raw),
  selectExpr: plain,
}

export const bigint: ColumnType<bigint> = {
  sqlType: 'int8',
  check: (v) =>
    typeof v === 'bigint' && v >= INT8_MIN && v <= INT8_MAX ? undefined : 'expected a bigint between -2^63 and 2^63-1',
  toText: (v) => v.toString(),
  fromDb: (raw) => BigInt(raw as string | number | bigint),
  selectExpr: plain,
}

/** Sequence-backed int8 ids, exposed as JS numbers: exact up to 2^53, far beyond any sequence in practice. */
export const serialId: ColumnType<number> = {
  sqlType: 'int8',
  check: (v) => (typeof v === 'number' && Number.isSafeInteger(v) ? undefined : 'expected a safe integer id'),
  toText: (v) => String(v),
  fromDb: (raw) => {
    const n = Number(raw)
    if (!Number.isSafeInteger(n)) throw new RangeError(`id ${String(raw)} exceeds Number.MAX_SAFE_INTEGER`)
    return n
  },
  selectExpr: plain,
}

/** Exact decimals travel as strings; a finite JS number is accepted on write. */
export const numeric: ColumnType<string> = {
  sqlType: 'numeric',
  check: (v) =>
    (typeof v === 'string' && NUMERIC.test(v)) || (typeof v === 'number' && Number.isFinite(v))
      ? undefined
      : 'expected a decimal string or a finite number',
  toText: (v) => String(v),
  fromDb: (raw) => String(raw),
  selectExpr: (c) => `${c}::text`,
}

export const boolean: ColumnType<boolean> = {
  sqlType: 'bool',
  check: (v) => (typeof v === 'boolean' ? undefined : 'expected a boolean'),
  toText: (v) => (v ? 't' : 'f'),
  fromDb: (raw) => raw === true || raw === 't' || raw === 'true',
  selectExpr: plain,
}

// Entities created together mostly share a millisecond: remember the last one formatted.
let lastTime = NaN
let lastText = ''

export const timestamptz: ColumnType<Date> = {
  sqlType: 'timestamptz',
  check: (v) => (v instanceof Date && !Number.isNaN(v.getTime()) ? undefined : 'expected a valid Date'),
  toText: (v) => {
    const time = v.getTime()
    if (time !== lastTime) {
      lastText = v.toISOString()
      lastTime = time
    }
    return lastText
  },
  fromDb: (raw) => (raw instanceof Date ? raw : new Date(String(raw))),
  // JSON output of timestamptz is ISO 8601 whatever the session's DateStyle.
  selectExpr: (c) => `to_json(${c}) #>> '{}'`,
}

export const uuid: ColumnType<string> = {
  sqlType: 'uuid',
  check: (v) => (typeof v === 'string' && UUID.test(v) ? undefined : 'expected a UUID string'),
  toText: (v) => v,
  fromDb: (raw) => String(raw),
  selectExpr: plain,
}

export function jsonb<T>(): ColumnType<T> {
  return {
    sqlType: 'jsonb',
    check: (v) => {
      try {
        const json = JSON.stringify(v) as string | undefined
        return json === undefined ? 'expected a JSON value' : noNul(json)
      } catch (error) {
        return `not serializable as JSON: ${(error as Error).message}`
      }
    },
    toText: (v) => JSON.stringify(v),
    fromDb: (raw) => JSON.parse(String(raw)) as T,
    // Read as text so the caller's postgres.js json parser cannot change what we see.
    selectExpr: (c) => `${c}::text`,
  }
}

export function enumeration<const V extends string>(sqlType: string, values: readonly V[]): ColumnType<V> {
  const allowed = new Set<string>(values)
  return {
    sqlType,
    check: (v) =>
      typeof v === 'string' && allowed.has(v) ? undefined : `expected one of ${values.map((x) => JSON.stringify(x)).join(', ')}`,
    toText: (v) => v,
    fromDb: (raw) => String(raw) as V,
    selectExpr: plain,
  }
}
