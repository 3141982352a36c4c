import { asText, plain, type ColumnType } from './column-type.js'

/** String.prototype.isWellFormed (ES2024, in every Node.js this package supports). */
const isWellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed()

/**
 * PostgreSQL text cannot hold NUL; and a lone UTF-16 surrogate is no Unicode character: encoded to
 * UTF-8 on its way to the server it would silently become U+FFFD, so the text would not be stored as given.
 */
export function unstorableText(s: string): string | undefined {
  if (s.includes('\0')) return 'text cannot contain NUL (\\0) characters'
  if (!isWellFormed(s)) return 'text cannot contain a lone UTF-16 surrogate (it is not valid Unicode)'
  return undefined
}

/** Characters as PostgreSQL counts them (code points), for well-formed text: a surrogate pair is one. */
export function characters(s: string): number {
  let n = s.length
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c >= 0xd800 && c <= 0xdbff) n--
  }
  return n
}

const checkText = (v: unknown): string | undefined => (typeof v === 'string' ? unstorableText(v) : 'expected a string')

export const text: ColumnType<string> = {
  sqlType: 'text',
  operators: 'text',
  check: checkText,
  toText: (v) => v,
  fromDb: (raw) => String(raw),
  selectExpr: plain,
}

/** A bound the server enforces on varchar(n) and char(n) (1 to 10,485,760 characters). */
function checkLength(n: number, what: string): void {
  if (!(Number.isSafeInteger(n) && n >= 1 && n <= 10_485_760)) throw new TypeError(`${what}(n) takes a length from 1 to 10485760, not ${String(n)}`)
}

/**
 * varchar(n): text of at most n characters, checked before sending. Casts go to plain varchar:
 * an explicit cast to varchar(n) would cut a longer value silently.
 */
export function varchar(n: number): ColumnType<string> {
  checkLength(n, 'varchar')
  return {
    sqlType: 'varchar',
    columnType: `varchar(${n})`,
    operators: 'text',
    check: (v) => checkText(v) ?? (characters(v as string) > n ? `expected at most ${n} characters (varchar(${n}))` : undefined),
    toText: (v) => v,
    fromDb: (raw) => String(raw),
    selectExpr: plain,
  }
}

/**
 * char(n): the server pads a shorter value with spaces and compares without them; reading it as
 * text drops them again. A value that ends in a space would therefore not read back as written,
 * so it is refused.
 */
export function char(n: number): ColumnType<string> {
  checkLength(n, 'char')
  return {
    sqlType: 'bpchar',
    columnType: `char(${n})`,
    operators: 'text',
    check: (v) => {
      const reason = checkText(v)
      if (reason) return reason
      const s = v as string
      if (characters(s) > n) return `expected at most ${n} characters (char(${n}))`
      if (s.endsWith(' ')) return `char(${n}) cannot keep trailing spaces (they read back dropped)`
      return undefined
    },
    toText: (v) => v,
    fromDb: (raw) => String(raw),
    selectExpr: asText,
  }
}

/** citext (the extension's case-insensitive text): compares, sorts and matches patterns ignoring case. */
export const citext: ColumnType<string> = {
  sqlType: 'citext',
  operators: 'text',
  check: checkText,
  toText: (v) => v,
  fromDb: (raw) => String(raw),
  selectExpr: asText,
}
