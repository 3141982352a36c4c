import { asText, declaredType, plain, type ColumnType } from './column-type.js'

/** Backslash-escapes quotes and backslashes for a quoted array element. */
const escape = (v: string): string => (v.indexOf('"') < 0 && v.indexOf('\\') < 0 ? v : v.replace(/[\\"]/g, '\\$&'))

/** Backslash-escapes a whole literal for a quoted element of an outer array literal. */
const escapeOuter = (v: string): string => v.replace(/[\\"]/g, '\\$&')

/**
 * The elements of a one-dimensional array literal as the server writes it (`{a,"b c",NULL}`,
 * perhaps after bounds such as `[0:1]=`): their texts, null for NULL.
 */
export function parseArrayLiteral(text: string): (string | null)[] {
  let i = text.charCodeAt(0) === 91 /* [ */ ? text.indexOf('=') + 1 : 0
  if (text[i] !== '{') throw new SyntaxError(`not an array literal: ${text.slice(0, 40)}`)
  i++
  const out: (string | null)[] = []
  if (text[i] === '}') return out
  for (;;) {
    if (text[i] === '{') throw new SyntaxError('a multidimensional array cannot be read into a one-dimensional array property')
    if (text[i] === '"') {
      let value = ''
      let from = ++i
      for (;;) {
        const c = text[i]
        if (c === undefined) throw new SyntaxError('unterminated array element')
        if (c === '\\') {
          value += text.slice(from, i) + text[i + 1]
          from = i += 2
        } else if (c === '"') break
        else i++
      }
      out.push(value + text.slice(from, i))
      i++
    } else {
      let end = i
      while (text[end] !== ',' && text[end] !== '}' && end < text.length) end++
      const token = text.slice(i, end)
      out.push(token.toUpperCase() === 'NULL' ? null : token)
      i = end
    }
    if (text[i] === '}') return out
    if (text[i] !== ',') throw new SyntaxError(`unexpected ${JSON.stringify(text[i] ?? 'end')} in an array literal`)
    i++
  }
}

/**
 * An array of `element` (one dimension), NULL elements allowed when `nullElements`. In batched
 * writes each row's array travels as its literal in a text array (`unnest` would flatten an array
 * of arrays), cast back by name: the same one statement per table. Read as the array's text when the
 * element type reads its own text output, else each element through its own select expression.
 */
export function array<E>(element: ColumnType<E>, nullElements: boolean): ColumnType<(E | null)[]> {
  if (element.sqlType.endsWith('[]')) throw new TypeError('t.array() takes a scalar element type (arrays of arrays are one array in PostgreSQL)')
  const sqlType = `${element.sqlType}[]`
  const toText = (values: readonly (E | null)[]): string => {
    let out = '{'
    for (let i = 0; i < values.length; i++) {
      const v = values[i]
      out += (i > 0 ? ',' : '') + (v === null ? 'NULL' : '"' + escape(element.toText(v as E)) + '"')
    }
    return out + '}'
  }
  // An element type read as its own text output reads the same inside the array's text, except
  // char(n): a cast to text drops a single value's padding, but not its elements' in an array.
  // Elements whose text never needs quoting (integers, booleans, UUIDs) go bare.
  const bare = element.sqlType === 'int2' || element.sqlType === 'int4' || element.sqlType === 'int8' || element.sqlType === 'bool' || element.sqlType === 'uuid'
  /** toText's literal escaped as a quoted element of the outer text array (Wire.escaped): `{\"a\",\"b\"}`. */
  const encode = (values: readonly (E | null)[]): string => {
    if (bare) {
      let out = '{'
      for (let i = 0; i < values.length; i++) {
        const v = values[i]
        out += (i > 0 ? ',' : '') + (v === null ? 'NULL' : element.toText(v as E))
      }
      return out + '}'
    }
    const texts = new Array<string>(values.length)
    for (let i = 0; i < values.length; i++) {
      const v = values[i]
      if (v === null) return escapeOuter(toText(values))
      const t = element.toText(v as E)
      if (t.indexOf('"') >= 0 || t.indexOf('\\') >= 0) return escapeOuter(toText(values))
      texts[i] = t
    }
    return values.length === 0 ? '{}' : '{\\"' + texts.join('\\",\\"') + '\\"}'
  }
  const probe = element.selectExpr('x')
  const direct = probe === plain('x') || (probe === asText('x') && element.sqlType !== 'bpchar')
  return {
    sqlType,
    ...(element.columnType ? { columnType: `${declaredType(element as ColumnType<unknown>)}[]` } : {}),
    operators: 'array',
    mutable: true,
    check: (v) => {
      if (!Array.isArray(v)) return 'expected an array'
      for (let i = 0; i < v.length; i++) {
        const x: unknown = v[i]
        if (x === null || x === undefined) {
          if (x === null && nullElements) continue
          return `element ${i} is ${String(x)}${x === null ? ': declare the element .nullable() to allow NULL elements' : ''}`
        }
        const reason = element.check(x)
        if (reason) return `element ${i}: ${reason}`
      }
      return undefined
    },
    toText,
    fromDb: (raw) => {
      if (Array.isArray(raw)) return raw.map((x: unknown) => (x === null ? null : element.fromDb(x)))
      return parseArrayLiteral(String(raw)).map((x) => (x === null ? null : element.fromDb(x)))
    },
    wire: { sqlType: 'text', escaped: true, encode, decode: (x) => `${x}::${sqlType}`, toText: (encoded) => encoded.replace(/\\(.)/g, '$1') },
    selectExpr: direct
      ? asText
      : (c) => `case when ${c} is null then null else array(select (${element.selectExpr('u.x')})::text from unnest(${c}) with ordinality as u(x, o) order by o)::text end`,
  }
}
