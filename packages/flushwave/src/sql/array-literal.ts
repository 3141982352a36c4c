import type { Text } from '../plan/changes.js'

/**
 * A PostgreSQL array literal of text-form elements: `{"a","b\"c",NULL}`. Every element is quoted, so
 * no element text (commas, braces, the word NULL) can change the array's shape.
 */
export function arrayLiteral(values: readonly Text[]): string {
  let out = '{'
  for (let i = 0; i < values.length; i++) {
    if (i > 0) out += ','
    const v = values[i]
    out += v === null || v === undefined ? 'NULL' : '"' + escape(v) + '"'
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
