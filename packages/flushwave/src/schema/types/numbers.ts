import { asText, plain, type ColumnType } from './column-type.js'

const INT2_MIN = -(2 ** 15)
const INT2_MAX = 2 ** 15 - 1
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

function integerType(sqlType: string, min: number, max: number, range: string): ColumnType<number> {
  return {
    sqlType,
    operators: 'ordered',
    check: (v) => (typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max ? undefined : `expected an integer between ${range}`),
    toText: (v) => String(v),
    fromDb: (raw) => Number(raw),
    selectExpr: plain,
    add: (a, b) => a + b,
  }
}

export const smallint = integerType('int2', INT2_MIN, INT2_MAX, '-32768 and 32767')
export const integer = integerType('int4', INT4_MIN, INT4_MAX, '-2^31 and 2^31-1')

export const bigint: ColumnType<bigint> = {
  sqlType: 'int8',
  operators: 'ordered',
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
  operators: 'ordered',
  check: (v) => (typeof v === 'number' && Number.isSafeInteger(v) ? undefined : 'expected a safe integer id'),
  toText: (v) => String(v),
  fromDb: (raw) => {
    const n = Number(raw)
    if (!Number.isSafeInteger(n)) throw new RangeError(`id ${String(raw)} exceeds Number.MAX_SAFE_INTEGER`)
    return n
  },
  selectExpr: plain,
}

/** A JS number as float text: -0 keeps its sign (String(-0) is '0'); NaN and ±Infinity as PostgreSQL spells them. */
const floatText = (v: number): string => (Object.is(v, -0) ? '-0' : String(v))

/**
 * float8: any JS number, NaN, ±Infinity and -0 included. The server writes the shortest text that
 * reads back as the same double (extra_float_digits ≥ 1, the default), so values round-trip exactly.
 */
export const double: ColumnType<number> = {
  sqlType: 'float8',
  operators: 'ordered',
  check: (v) => (typeof v === 'number' ? undefined : 'expected a number'),
  toText: floatText,
  fromDb: (raw) => Number(raw),
  selectExpr: plain,
}

/**
 * The number a float4 column gives back for `v`: the shortest decimal that names the float4
 * nearest to v, as the server writes it, read as a double. NaN when v overflows float4.
 */
export function float4Value(v: number): number {
  const f = Math.fround(v)
  if (!Number.isFinite(f) || f === 0) return Number.isFinite(v) && !Number.isFinite(f) ? NaN : f
  for (let digits = 1; digits < 9; digits++) {
    const shortest = Number(f.toPrecision(digits))
    if (Math.fround(shortest) === f) return shortest
  }
  return Number(f.toPrecision(9))
}

/**
 * Whether float4 keeps `v` (finite) as it is, with at most three toPrecision calls: float4's shortest
 * decimal must be v's own shortest (d significant digits), which float4 then reads as its float f;
 * and no decimal of d - 1 digits may read as f (else that one is shorter). Integers within ±2^24
 * are kept (float4 holds them exactly, and no shorter decimal names the same float).
 */
function keepsAsFloat4(v: number): boolean {
  if (Number.isInteger(v) && Math.abs(v) <= 16_777_216) return true
  const f = Math.fround(v)
  if (!Number.isFinite(f) || f === 0) return false
  const s = String(v)
  let d = 0
  let leading = true
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c === 101 /* e */) break
    if (c < 48 || c > 57) continue
    if (leading && c === 48) continue
    leading = false
    d++
  }
  // Trailing zeros of an integer part are not significant (1200 is 1.2e3).
  const mantissa = s.split('e')[0]!
  if (mantissa.indexOf('.') < 0) for (let i = mantissa.length - 1; i >= 0 && mantissa.charCodeAt(i) === 48 && d > 1; i--) d--
  if (d > 9 || Number(f.toPrecision(d)) !== v) return false
  return d === 1 || Math.fround(Number(f.toPrecision(d - 1))) !== f
}

/**
 * float4: about seven significant digits. A value that float4 would change (0.123456789 reads back
 * as 0.12345679) is refused rather than rounded without a word; 0.1, 21.5 or 1e-10 are kept.
 */
export const real: ColumnType<number> = {
  sqlType: 'float4',
  operators: 'ordered',
  check: (v) => {
    if (typeof v !== 'number') return 'expected a number'
    if (Number.isNaN(v) || !Number.isFinite(v)) return undefined
    if (keepsAsFloat4(v)) return undefined
    const kept = float4Value(v)
    if (Object.is(kept, v) || (kept === 0 && v === 0)) return undefined
    return Number.isNaN(kept) ? 'out of the range of real (float4); use t.double()' : `real (float4) would keep ${kept}; use that value or t.double()`
  },
  toText: floatText,
  fromDb: (raw) => Number(raw),
  selectExpr: plain,
}

/** Exact decimals travel as strings; a finite JS number is accepted on write. */
export const numeric: ColumnType<string> = {
  sqlType: 'numeric',
  operators: 'ordered',
  check: (v) => {
    if (typeof v === 'number') return Number.isFinite(v) ? undefined : 'expected a decimal string or a finite number'
    return typeof v === 'string' ? numericProblem(v) : 'expected a decimal string or a finite number'
  },
  toText: (v) => String(v),
  fromDb: (raw) => String(raw),
  selectExpr: asText,
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

