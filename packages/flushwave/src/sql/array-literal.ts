import type { Text } from '../plan/changes.js'

/**
 * Element types whose text, as Flushwave writes it (checked integers and booleans, UUIDs, ids,
 * epoch milliseconds), is never empty, never the word NULL and never holds a character that an
 * array literal must quote: their elements go bare, two bytes fewer each.
 */
const BARE = new Set(['int2', 'int4', 'int8', 'bool', 'uuid'])

/**
 * A PostgreSQL array literal of text-form elements: `{"a","b\"c",NULL}`. Every element is quoted,
 * so no element text (commas, braces, the word NULL) can change the array's shape; elements of a
 * type in BARE, named by `elementType`, go unquoted: `{1,2,NULL}`.
 */
export function arrayLiteral(values: readonly Text[], elementType?: string): string {
  const bare = elementType !== undefined && BARE.has(elementType)
  let out = '{'
  for (let i = 0; i < values.length; i++) {
    if (i > 0) out += ','
    const v = values[i]
    out += v === null || v === undefined ? 'NULL' : bare ? v : '"' + escape(v) + '"'
  }
  return out + '}'
}

export function boolArrayLiteral(values: readonly boolean[]): string {
  let out = '{'
  for (let i = 0; i < values.length; i++) out += (i > 0 ? ',' : '') + (values[i] ? 't' : 'f')
  return out + '}'
}

/** Backslash-escapes quotes and backslashes; most values have neither, so look before replacing. */
function escape(v: string): string {
  return v.indexOf('"') < 0 && v.indexOf('\\') < 0 ? v : v.replace(/[\\"]/g, '\\$&')
}
