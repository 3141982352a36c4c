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
export function arrayLiteral(values: readonly Text[], elementType?: string, escaped?: boolean): string {
  const bare = elementType !== undefined && BARE.has(elementType)
  if (escaped) return escapedLiteral(values)
  if (values.length > 0 && asTheyAre(values, bare)) return bare ? '{' + values.join(',') + '}' : '{"' + values.join('","') + '"}'
  let out = '{'
  for (let i = 0; i < values.length; i++) {
    if (i > 0) out += ','
    const v = values[i]
    out += v === null || v === undefined ? 'NULL' : bare ? v : '"' + escape(v) + '"'
  }
  return out + '}'
}

/** Elements already escaped (Wire.escaped): quoted as they are, in one join when none is NULL. */
function escapedLiteral(values: readonly Text[]): string {
  if (values.length === 0) return '{}'
  if (values.indexOf(null) < 0 && values.indexOf(undefined as never) < 0) return '{"' + values.join('","') + '"}'
  let out = '{'
  for (let i = 0; i < values.length; i++) {
    const v = values[i]
    out += (i > 0 ? ',' : '') + (v === null || v === undefined ? 'NULL' : '"' + v + '"')
  }
  return out + '}'
}

export function boolArrayLiteral(values: readonly boolean[]): string {
  let out = '{'
  for (let i = 0; i < values.length; i++) out += (i > 0 ? ',' : '') + (values[i] ? 't' : 'f')
  return out + '}'
}

/**
 * Whether every element goes as it is (no NULL, nothing to escape): then `join` makes the literal
 * as one flat string. Appending element by element made two string pieces per element, which the
 * driver flattened into a third copy when it encoded the parameter.
 */
function asTheyAre(values: readonly Text[], bare: boolean): boolean {
  for (let i = 0; i < values.length; i++) {
    const v = values[i]
    if (v === null || v === undefined) return false
    if (!bare && (v.indexOf('"') >= 0 || v.indexOf('\\') >= 0)) return false
  }
  return true
}

/** Backslash-escapes quotes and backslashes; most values have neither, so look before replacing. */
function escape(v: string): string {
  return v.indexOf('"') < 0 && v.indexOf('\\') < 0 ? v : v.replace(/[\\"]/g, '\\$&')
}
