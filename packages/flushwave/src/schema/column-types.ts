import { isoTime } from './iso-time.js'

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
  /** Its values are objects that can change in place (Date, JSON): flushes diff them even without a setter call. */
  readonly mutable?: true
  /**
   * How values travel in the write statements' arrays (and sit in snapshots) when not as `toText`:
   * timestamptz goes as epoch milliseconds in an int8 array, which PostgreSQL reads much faster
   * than date text, `decode` turning each back in SQL (docs/design-notes.md, "Timestamps as epoch
   * milliseconds in arrays").
   */
  readonly wire?: Wire<T>
  /**
   * Set on the number types that counters (`em.increment`) can add to: the exact sum of two
   * deltas, so that several increments of one property before a flush travel as one.
   */
  readonly add?: (a: T, b: T) => T
  /**
   * Set on timestamptz: an entity may hold a value of this type as its epoch milliseconds (a
   * number) until user code first reads it (see EntityState.values). `toText` and `wire.encode`
   * take that form too.
   */
  readonly fromTime?: (ms: number) => T
  /**
   * Set on timestamptz: the epoch milliseconds of a value read (what `fromDb` takes), without
   * making the Date. Entities read hold their times as numbers until user code reads them, as new
   * ones do (see fromTime): a list read makes no Date that nobody looks at.
   */
  readonly timeFromDb?: (raw: unknown) => number
}

export interface Wire<T> {
  readonly sqlType: string
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

const INT4_MIN = -(2 ** 31)
const INT4_MAX = 2 ** 31 - 1
const INT8_MIN = -(2n ** 63n)
const INT8_MAX = 2n ** 63n - 1n
/** Integer digits, fraction digits (either may be empty, not both) and exponent of a decimal string. */
const NUMERIC = /^[+-]?(?:(\d+)(?:\.(\d*))?|\.(\d+))(?:[eE]([+-]?\d+))?$/
/** PostgreSQL's numeric limits (numeric.c): 131072 digits before the point, 16383 after, |exponent| ≤ 2^30-1. */
const NUMERIC_MAX_INTEGER_DIGITS = 131072
const NUMERIC_MAX_SCALE = 16383
const NUMERIC_MAX_EXPONENT = 2 ** 30 - 1
/** In JSON.stringify's output: a \u escape (after an even run of backslashes) of NUL or of a surrogate. */
const UNSTORABLE_JSON_ESCAPE = /(?<!\\)(?:\\\\)*\\u(0000|[dD][89a-fA-F][0-9a-fA-F]{2})/
/** What toISOString() writes in a form PostgreSQL reads: years 1 to 9999 (others get a sign and six digits). */
const TIMESTAMP_MIN = Date.parse('0001-01-01T00:00:00.000Z')
const TIMESTAMP_MAX = Date.parse('9999-12-31T23:59:59.999Z')
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

const plain = (c: string): string => c

/** String.prototype.isWellFormed (ES2024, in every Node.js this package supports). */
const isWellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed()

/**
 * PostgreSQL text cannot hold NUL; and a lone UTF-16 surrogate is no Unicode character: encoded to
 * UTF-8 on its way to the server it would silently become U+FFFD, so the text would not be stored as given.
 */
function unstorableText(s: string): string | undefined {
  if (s.includes('\0')) return 'text cannot contain NUL (\\0) characters'
  if (!isWellFormed(s)) return 'text cannot contain a lone UTF-16 surrogate (it is not valid Unicode)'
  return undefined
}

export const text: ColumnType<string> = {
  sqlType: 'text',
  check: (v) => (typeof v === 'string' ? unstorableText(v) : 'expected a string'),
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
  add: (a, b) => a + b,
}

export const bigint: ColumnType<bigint> = {
  sqlType: 'int8',
  check: (v) =>
    typeof v === 'bigint' && v >= INT8_MIN && v <= INT8_MAX ? undefined : 'expected a bigint between -2^63 and 2^63-1',
  toText: (v) => v.toString(),
  fromDb: (raw) => BigInt(raw as string | number | bigint),
  selectExpr: plain,
  add: (a, b) => a + b,
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
  check: (v) => {
    if (typeof v === 'number') return Number.isFinite(v) ? undefined : 'expected a decimal string or a finite number'
    return typeof v === 'string' ? numericProblem(v) : 'expected a decimal string or a finite number'
  },
  toText: (v) => String(v),
  fromDb: (raw) => String(raw),
  selectExpr: (c) => `${c}::text`,
  add: (a, b) => addDecimals(String(a), String(b)),
}

/** A checked decimal (see numericProblem) as digits × 10^-scale, exactly. */
function scaled(s: string): { digits: bigint; scale: number } {
  const m = NUMERIC.exec(s)!
  const fraction = m[2] ?? m[3] ?? ''
  let digits = BigInt((m[1] ?? '') + fraction || '0')
  let scale = fraction.length - (m[4] === undefined ? 0 : Number(m[4]))
  if (scale < 0) {
    digits *= 10n ** BigInt(-scale)
    scale = 0
  }
  return { digits: s.startsWith('-') ? -digits : digits, scale }
}

/** The exact sum of two decimal strings, as a plain decimal string (no exponent). */
function addDecimals(a: string, b: string): string {
  const x = scaled(a)
  const y = scaled(b)
  const scale = Math.max(x.scale, y.scale)
  const sum = x.digits * 10n ** BigInt(scale - x.scale) + y.digits * 10n ** BigInt(scale - y.scale)
  if (scale === 0) return sum.toString()
  const text = (sum < 0n ? -sum : sum).toString().padStart(scale + 1, '0')
  return `${sum < 0n ? '-' : ''}${text.slice(0, -scale)}.${text.slice(-scale)}`
}

export const boolean: ColumnType<boolean> = {
  sqlType: 'bool',
  check: (v) => (typeof v === 'boolean' ? undefined : 'expected a boolean'),
  toText: (v) => (v ? 't' : 'f'),
  fromDb: (raw) => raw === true || raw === 't' || raw === 'true',
  selectExpr: plain,
}

/**
 * A Date's text by its time, remembering the last one: entities created together mostly share a
 * millisecond. Takes the time alone as well (see ColumnType.fromTime).
 */
function lastFormatted(format: (time: number) => string): (date: Date | number) => string {
  let lastTime = NaN
  let lastText = ''
  return (date) => {
    const time = typeof date === 'number' ? date : date.getTime()
    if (time !== lastTime) {
      lastText = format(time)
      lastTime = time
    }
    return lastText
  }
}

/**
 * Epoch milliseconds as int8. Whole seconds and the remaining milliseconds are added as separate
 * intervals: multiplying one interval by the whole count goes through float8 and would lose
 * microseconds near year 9999; these products stay exact over years 1 to 9999.
 */
const epochMilliseconds: Wire<Date> = {
  sqlType: 'int8',
  encode: lastFormatted((time) => String(time)),
  decode: (x) => `(timestamptz 'epoch' + (${x} / 1000) * interval '1 second' + (${x} % 1000) * interval '1 millisecond')`,
  toText: (encoded) => isoText(Number(encoded)),
}

/** toISOString() is exact to the millisecond, and PostgreSQL reads it over years 1 to 9999 (TIMESTAMP_MAX). */
const isoText = lastFormatted((time) => new Date(time).toISOString())

export const timestamptz: ColumnType<Date> = {
  sqlType: 'timestamptz',
  mutable: true,
  check: (v) => {
    if (!(v instanceof Date) || Number.isNaN(v.getTime())) return 'expected a valid Date'
    const time = v.getTime()
    return time >= TIMESTAMP_MIN && time <= TIMESTAMP_MAX ? undefined : 'expected a Date from year 1 to 9999 (UTC)'
  },
  toText: isoText,
  fromDb: (raw) => (raw instanceof Date ? raw : new Date(timeOf(raw))),
  fromTime: (ms) => new Date(ms),
  timeFromDb: (raw) => (raw instanceof Date ? raw.getTime() : timeOf(raw)),
  wire: epochMilliseconds,
  // Epoch milliseconds, exact (extract gives numeric since PostgreSQL 14) and whatever the
  // session's DateStyle and TimeZone: for the server a fraction of the cost of formatting the time
  // as text (to_json), and for the client a number to read, not a date to parse.
  selectExpr: (c) => `floor(extract(epoch from ${c}) * 1000)`,
}

/** The time of a timestamptz read: epoch milliseconds (selectExpr's), or ISO 8601 text (a page cursor's, toText's). */
function timeOf(raw: unknown): number {
  if (typeof raw === 'number') return raw
  const text = String(raw)
  const ms = Number(text)
  // Infinity ('infinity' read) stays what it was as a Date: an invalid one.
  return Number.isNaN(ms) || text === '' ? isoTime(text) : Number.isFinite(ms) ? ms : NaN
}

export const uuid: ColumnType<string> = {
  sqlType: 'uuid',
  check: (v) => (typeof v === 'string' && UUID.test(v) ? undefined : 'expected a UUID string'),
  toText: (v) => v,
  fromDb: (raw) => String(raw),
  selectExpr: plain,
}

/**
 * Why PostgreSQL's numeric cannot take this decimal string exactly as it is written (the server
 * would refuse it, after the flush was sent), or undefined.
 */
function numericProblem(s: string): string | undefined {
  const m = NUMERIC.exec(s)
  if (!m) return 'expected a decimal string or a finite number'
  const integer = m[1] ?? ''
  const fraction = m[2] ?? m[3] ?? ''
  const exponent = m[4] === undefined ? 0 : Number(m[4])
  if (!(Math.abs(exponent) <= NUMERIC_MAX_EXPONENT)) return 'the exponent is out of the range of numeric'
  if (fraction.length - exponent > NUMERIC_MAX_SCALE) return `numeric has at most ${NUMERIC_MAX_SCALE} digits after the decimal point`
  const first = (integer + fraction).search(/[1-9]/)
  if (first >= 0 && integer.length + exponent - first > NUMERIC_MAX_INTEGER_DIGITS) {
    return `numeric has at most ${NUMERIC_MAX_INTEGER_DIGITS} digits before the decimal point`
  }
  return undefined
}

export function jsonb<T>(): ColumnType<T> {
  return {
    sqlType: 'jsonb',
    mutable: true,
    check: (v) => {
      try {
        // JSON.stringify writes NaN and ±Infinity as null: refuse them rather than store something else.
        let nonFinite: number | undefined
        const json = JSON.stringify(v, (_key, value: unknown) => {
          if (typeof value === 'number' && !Number.isFinite(value)) nonFinite ??= value
          return value
        }) as string | undefined
        if (json === undefined) return 'expected a JSON value'
        if (nonFinite !== undefined) return `JSON has no ${nonFinite} (JSON.stringify would write null)`
        // JSON.stringify escapes NUL and lone surrogates (\u0000, \ud800): PostgreSQL's jsonb rejects both.
        const escape = UNSTORABLE_JSON_ESCAPE.exec(json)?.[1]?.toLowerCase()
        if (escape === '0000') return 'JSON strings cannot contain NUL (\\u0000) characters'
        if (escape) return `JSON strings cannot contain a lone surrogate (\\u${escape})`
        return undefined
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
