/** Exact comparison of decimals written as text, for `.range()` bounds on numeric values. */

/** A decimal as sign × 0.digits × 10^point, digits without leading or trailing zeros ('' for zero). */
export interface DecimalParts {
  readonly sign: -1 | 0 | 1
  readonly digits: string
  readonly point: number
}

/** Parses `-12.5e3` (and what String() makes of a number or a bigint); undefined when it is not a decimal. */
export function decimalParts(text: string): DecimalParts | undefined {
  const m = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(text)
  if (!m || (m[2] ?? '') + (m[3] ?? '') === '') return undefined
  const all = (m[2] ?? '') + (m[3] ?? '')
  const lead = all.search(/[1-9]/)
  if (lead < 0) return { sign: 0, digits: '', point: 0 }
  const digits = all.slice(lead).replace(/0+$/, '')
  return { sign: m[1] === '-' ? -1 : 1, digits, point: (m[2] ?? '').length + Number(m[4] ?? 0) - lead }
}

export function compareDecimals(a: DecimalParts, b: DecimalParts): number {
  if (a.sign !== b.sign) return a.sign - b.sign
  if (a.sign === 0) return 0
  const length = Math.max(a.digits.length, b.digits.length)
  const magnitude = a.point !== b.point ? a.point - b.point : a.digits.padEnd(length, '0') < b.digits.padEnd(length, '0') ? -1 : a.digits === b.digits ? 0 : 1
  return a.sign * Math.sign(magnitude)
}
