import { parseArrayLiteral } from './arrays.js'
import type { ColumnType } from './column-type.js'

/**
 * The id of an entity with a composite primary key, as the unit of work holds it: the text of each
 * part, in key order, as a text-array literal with every element quoted (`{"7","en"}`). One string
 * keys the identity map and travels as one element of a `text[]` parameter, which SQL takes apart
 * again (sql/keys.ts); the server returns a row's key as `array[a::text, b::text]::text`, which
 * `fromDb` brings to this same form. No part is ever NULL.
 */
export function keyTuple(parts: readonly string[]): string {
  let out = '{'
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!
    out += (i > 0 ? ',"' : '"') + (part.indexOf('"') < 0 && part.indexOf('\\') < 0 ? part : part.replace(/[\\"]/g, '\\$&')) + '"'
  }
  return out + '}'
}

/** The part texts of a key tuple (either form: `keyTuple`'s, or the server's array output). */
export function keyParts(tuple: string): string[] {
  return parseArrayLiteral(tuple) as string[]
}

/** The id type of a composite key: its values are key tuples, compared and sent as text. */
export const keyTupleType: ColumnType<string> = {
  sqlType: 'text',
  operators: 'equality',
  check: (v) => (typeof v === 'string' && v.startsWith('{') ? undefined : 'expected a key tuple'),
  toText: (v) => v,
  // The server's text (bare elements where it can) becomes the all-quoted form, which stays as it is.
  fromDb: (raw) => keyTuple(keyParts(String(raw))),
  selectExpr: (c) => c,
}
