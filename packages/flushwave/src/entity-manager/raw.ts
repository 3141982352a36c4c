import { InvalidValueError } from '../errors.js'
import type { EntityMeta } from '../schema/meta.js'
import { arrayLiteral } from '../sql/array-literal.js'
import { selectList } from '../sql/render-select.js'
import type { Statement } from '../sql/statement.js'
import { text as textType } from '../schema/column-types.js'

/**
 * Hand-written SQL and its values, kept apart: `` raw`select * from book where id = ${id}` `` makes
 * `select * from book where id = $1` with the value bound, never spliced into the text.
 */
export class RawSql {
  constructor(
    readonly text: string,
    readonly values: readonly unknown[],
  ) {}
}

/** The tag: each `${value}` becomes a bind parameter. */
export function raw(strings: TemplateStringsArray, ...values: unknown[]): RawSql {
  let text = strings[0]!
  for (let i = 1; i < strings.length; i++) text += `$${i}${strings[i]}`
  return new RawSql(text, values)
}

/** Text and values given as `(text, params)` or as one RawSql, checked, the values in text form. */
export function rawStatement(what: string, text: unknown, params: unknown): Statement {
  const given = text instanceof RawSql ? text : { text, values: params ?? [] }
  if (typeof given.text !== 'string' || given.text.trim() === '') throw new InvalidValueError(what, 'sql', given.text, 'expected the text of a statement')
  const reason = textType.check(given.text)
  if (reason) throw new InvalidValueError(what, 'sql', given.text, reason)
  if (!Array.isArray(given.values)) throw new InvalidValueError(what, 'params', given.values, 'expected an array of values')
  return { text: given.text.replace(/[\s;]+$/, ''), params: given.values.map((v: unknown, i: number) => paramText(what, i + 1, v)) }
}

/**
 * A value as PostgreSQL's text input reads it; its type comes from where the statement uses it
 * (write `$1::int8[]` where the server cannot tell).
 */
function paramText(what: string, n: number, value: unknown): string | null {
  if (value === null || value === undefined) return null
  if (typeof value === 'string') {
    const reason = textType.check(value)
    if (reason) throw new InvalidValueError(what, `$${n}`, value, reason)
    return value
  }
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new InvalidValueError(what, `$${n}`, value, 'expected a finite number')
    return String(value)
  }
  if (typeof value === 'bigint') return value.toString()
  if (typeof value === 'boolean') return value ? 't' : 'f'
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new InvalidValueError(what, `$${n}`, value, 'expected a valid Date')
    return value.toISOString()
  }
  if (value instanceof Uint8Array) return '\\x' + Buffer.from(value).toString('hex')
  if (Array.isArray(value)) return arrayLiteral(value.map((v: unknown) => paramText(what, n, v)))
  if (typeof value === 'object') return JSON.stringify(value)
  throw new InvalidValueError(what, `$${n}`, value, 'cannot be sent as a parameter')
}

/**
 * The user's statement, wrapped so that its rows come back as the entity's rows are read (its
 * columns by name, in select-list order, each as the column type reads it), plus the columns the
 * entity does not have (`{}` when none): those are an error, as a column it lacks is one.
 */
export function entityRows(meta: EntityMeta, statement: Statement): Statement {
  const known = [...(meta.key ? [] : [meta.id.column]), ...meta.fields.map((f) => f.column)]
  return {
    text: `with r as (${statement.text}) select ${selectList(meta, 'r')}, (to_jsonb(r) - $${statement.params.length + 1}::text[])::text from r`,
    params: [...statement.params, arrayLiteral(known)],
  }
}

/** Checks the extra column `entityRows` adds, and takes it off each row. */
export function withoutExtra(meta: EntityMeta, rows: unknown[][]): unknown[][] {
  const width = meta.fields.length + 1
  for (const row of rows) {
    const extra = row[width]
    if (extra !== '{}' && extra !== null && extra !== undefined) {
      const names = Object.keys(JSON.parse(String(extra)) as object)
      throw new InvalidValueError(meta.name, 'sql', names, `its rows have columns ${meta.name} has not: ${names.join(', ')}`)
    }
    row.length = width
  }
  return rows
}
