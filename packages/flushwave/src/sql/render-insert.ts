import type { InsertOp } from '../plan/ops.js'
import type { Text, UpsertSpec } from '../plan/changes.js'
import { insertedColumns, upsertColumns } from './returning.js'
import type { EntityMeta } from '../schema/meta.js'
import { arrayLiteral } from './array-literal.js'
import { cached, decoded, isDecoded, scalarText, sharedField, wireEscaped, wireType, writesOneRow } from './write-values.js'

/** INSERT statements: one row with scalar binds, many rows through `unnest`, upserts with their conflict clause. */

export function renderInsert(op: InsertOp, shared: readonly Text[] | undefined) {
  const e = op.entity
  const omit = op.omit ?? NONE
  const oneRow = writesOneRow(op)
  // A composite key's values are fields: its tuple (the op's id) is not sent.
  const params: Text[] = e.key ? [] : [oneRow ? op.ids[0]! : arrayLiteral(op.ids, e.id.type.sqlType)]
  for (let i = 0, o = 0; i < op.columns.length; i++) {
    if (omit[o] === i) {
      o++
      continue
    }
    const f = e.fields[i]!
    if (oneRow) params.push(scalarText(f, op.columns[i]![0] ?? null))
    else params.push(sharedField(f, shared) ? scalarText(f, shared![i] ?? null) : arrayLiteral(op.columns[i]!, wireType(f), wireEscaped(f)))
  }
  const select = () => unnestSelect(e, shared !== undefined, omit)
  if (op.upsert !== undefined) return { text: `insert into ${e.quotedTable} as t (${columnNames(e, omit)}) ${select()} ${onConflict(e, op.upsert)}`, params }
  const form = oneRow ? 'insert-one' : shared ? 'insert-shared' : 'insert'
  if (omit === NONE) return { text: cached(e, form, () => `insert into ${e.quotedTable} (${columnNames(e)}) ${oneRow ? selectOne(e, NONE) : select()}`), params }
  // Columns left to the server (InsertOp.omit: `.serverDefault()` ones not given, `.generated()`
  // ones) are out of the column list and parameters, and come back with each row's id; the texts
  // are cached per set of them.
  const text = () => `insert into ${e.quotedTable} as t (${columnNames(e, omit)}) ${oneRow ? selectOne(e, omit) : select()} returning ${insertedColumns(e, omit)}`
  return { text: cached(e, `${form}|${omit.join(',')}`, text), params }
}

const NONE: readonly number[] = []

const columnNames = (e: EntityMeta, omit = NONE): string => [...(e.key ? [] : [e.id.quoted]), ...e.fields.filter((_, i) => !omit.includes(i)).map((f) => f.quoted)].join(', ')

/** Each written column's parameter, in order after the id's ($1); `where … is not null`: run with nulls (warm-up prepares shapes by running them) it inserts nothing. */
function selectOne(e: EntityMeta, omit: readonly number[]): string {
  const values = e.key ? [] : [`$1::${e.id.type.sqlType}`]
  // A composite key's first column is never null either.
  let key = values[0]
  e.fields.forEach((f, i) => {
    if (omit.includes(i)) return
    values.push(`$${values.length + 1}::${f.type.sqlType}`)
    if (f === e.key?.[0]) key = values[values.length - 1]
  })
  return `select ${values.join(', ')} where ${key!} is not null`
}

/**
 * Each written field's parameter follows the id's ($1) in field order (field i's is $(i + 2) when
 * none is omitted); in the shared form, a decoded field's is a scalar, read once (sharedDecoded).
 */
function unnestSelect(e: EntityMeta, shared: boolean, omit = NONE): string {
  const arrays = e.key ? [] : [`$1::${e.id.type.sqlType}[]`]
  const names = e.key ? [] : ['c0']
  const values = e.key ? [] : ['d.c0']
  let p = arrays.length
  e.fields.forEach((f, i) => {
    if (omit.includes(i)) return
    p++
    if (shared && isDecoded(f)) {
      values.push(`$${p}::${f.type.sqlType}`)
    } else {
      arrays.push(`$${p}::${wireType(f)}[]`)
      names.push(`c${i + 1}`)
      values.push(decoded(f, `d.c${i + 1}`))
    }
  })
  // Columns that travel in another type are decoded by name; without any, the rows pass through.
  if (!e.fields.some((f, i) => f.type.wire && !omit.includes(i))) return `select * from unnest(${arrays.join(', ')})`
  return `select ${values.join(', ')} from unnest(${arrays.join(', ')}) as d(${names.join(', ')})`
}

/**
 * An upsert: on a conflict over its key, the existing row takes the given fields (and advances its
 * version, unchecked); with none given, a no-op update, so that the row still comes back. Every
 * row written returns its id and every column, as text where a driver could parse it otherwise.
 */
function onConflict(e: EntityMeta, spec: UpsertSpec): string {
  const key = spec.key !== 'id' ? spec.key.map((f) => f.quoted) : e.key ? e.key.map((f) => f.quoted) : [e.id.quoted]
  const sets = spec.update.length > 0 ? spec.update.map((f) => `${f.quoted} = excluded.${f.quoted}`) : [`${key[0]} = excluded.${key[0]}`]
  if (e.version) sets.push(`${e.version.quoted} = t.${e.version.quoted} + 1`)
  return `on conflict (${key.join(', ')}) do update set ${sets.join(', ')} returning ${upsertColumns(e)}`
}
