import type { EntityMeta, FieldMeta, ManyToManyMeta } from '../schema/meta.js'
import { arrayLiteral } from './array-literal.js'
import { quoteIdent } from '../schema/quote.js'
import type { Statement } from './statement.js'
import type { Condition } from './conditions.js'
import { Params, Scope, whereClause } from './render-where.js'
import { live } from './live-rows.js'
import { keyIn, keyText } from './keys.js'

export interface SelectOptions {
  /** Columns of the entity's own table, quoted, each with its direction. */
  readonly orderBy?: readonly (readonly [column: string, direction: 'asc' | 'desc'])[]
  readonly limit?: number
  readonly offset?: number
  readonly lock?: RowLock | undefined
}

/** `for update` / `for share` of the entity's rows, with `nowait` or `skip locked`. */
export interface RowLock {
  readonly strength: 'update' | 'share'
  readonly wait?: 'nowait' | 'skip-locked' | undefined
}

/** Locks the rows of alias `t` only: a join never locks the rows it reaches. */
function lockClause(lock: RowLock | undefined): string {
  if (lock === undefined) return ''
  const wait = lock.wait === 'nowait' ? ' nowait' : lock.wait === 'skip-locked' ? ' skip locked' : ''
  return ` for ${lock.strength} of t${wait}`
}

/** `t.id, t.field…`: rows come back as arrays in this order (see `decodeRow`). */
export function selectList(entity: EntityMeta, alias = 't'): string {
  // A composite key's tuple goes first as an id would (keyTupleType reads it), then every field, its columns among them.
  let list = entity.key ? keyText(entity, alias) : entity.id.type.selectExpr(`${alias}.${entity.id.quoted}`)
  for (const f of entity.fields) list += `, ${f.type.selectExpr(`${alias}.${f.quoted}`)}`
  return list
}

export function renderLoadByIds(entity: EntityMeta, ids: readonly string[], lock?: RowLock): Statement {
  return {
    text: `select ${selectList(entity)} from ${entity.quotedTable} as t where ${keyIn(entity, 't', '$1')}${lockClause(lock)}`,
    params: [arrayLiteral(ids)],
  }
}

/** The rows of a one-to-many: children whose foreign key is one of `ownerIds`. */
export function renderLoadByReference(entity: EntityMeta, field: FieldMeta, ownerIds: readonly string[]): Statement {
  return {
    text: `select ${selectList(entity)} from ${entity.quotedTable} as t where t.${field.quoted} = any($1::${field.type.sqlType}[])${live(entity, 't')}`,
    params: [arrayLiteral(ownerIds)],
  }
}

/** Linked rows of a many-to-many, each preceded by the owner id it belongs to. */
export function renderLoadLinks(link: ManyToManyMeta, ownerIds: readonly string[]): Statement {
  const target = link.target
  const own = quoteIdent(link.ownColumn)
  return {
    text:
      `select j.${own}, ${selectList(target)} from ${link.quotedTable} as j ` +
      `join ${target.quotedTable} as t on t.${target.id.quoted} = j.${quoteIdent(link.targetColumn)}${live(target, 't')} ` +
      `where j.${own} = any($1::${link.owner.id.type.sqlType}[])`,
    params: [arrayLiteral(ownerIds)],
  }
}

/** The entity's rows that meet `where`, in select-list order (see selectList). */
export function renderFind(entity: EntityMeta, where: Condition, options: SelectOptions = {}): Statement {
  const scope = new Scope(entity, 't', new Params())
  const params = scope.params
  let text = whereClause(where, scope)
  if (options.orderBy?.length) text += ` order by ${options.orderBy.map(([c, d]) => `t.${c} ${d}`).join(', ')}`
  if (options.limit !== undefined) text += ` limit ${params.bind(String(options.limit), 'int8')}`
  if (options.offset !== undefined && options.offset > 0) text += ` offset ${params.bind(String(options.offset), 'int8')}`
  text += lockClause(options.lock)
  return { text: `select ${selectList(entity)} from ${scope.from()}${text}`, params: params.values }
}

/** How many of the entity's rows meet `where`: one row, one int8. */
export function renderCount(entity: EntityMeta, where: Condition): Statement {
  const scope = new Scope(entity, 't', new Params())
  const clause = whereClause(where, scope)
  return { text: `select count(*)::int8 from ${scope.from()}${clause}`, params: scope.params.values }
}

/** Whether any of the entity's rows meets `where`: one row, one boolean. */
export function renderExists(entity: EntityMeta, where: Condition): Statement {
  const scope = new Scope(entity, 't', new Params())
  const clause = whereClause(where, scope)
  return { text: `select exists (select from ${scope.from()}${clause})`, params: scope.params.values }
}

/** What `renderAggregate` computes: per group of `groupBy` columns (none: one group of every row). */
export interface AggregateSpec {
  readonly groupBy: readonly AggregateColumn[]
  readonly functions: readonly { readonly fn: 'sum' | 'avg' | 'min' | 'max'; readonly column: AggregateColumn }[]
}

export interface AggregateColumn {
  readonly quoted: string
  /** How the column is selected (ColumnType.selectExpr) for a value the client reads exactly. */
  readonly select: (expr: string) => string
}

/**
 * One row per group: the group's columns, `count(*)` as int8, then each function in order; sums and
 * averages as text (exact decimals), minimums and maximums as the column itself is read. Groups come
 * in the order of their columns.
 */
export function renderAggregate(entity: EntityMeta, where: Condition, spec: AggregateSpec): Statement {
  const scope = new Scope(entity, 't', new Params())
  const clause = whereClause(where, scope)
  const groups = spec.groupBy.map((c) => `t.${c.quoted}`)
  const list = [...spec.groupBy.map((c) => c.select(`t.${c.quoted}`)), 'count(*)::int8']
  for (const { fn, column } of spec.functions) list.push(fn === 'sum' || fn === 'avg' ? `${fn}(t.${column.quoted})::text` : column.select(`${fn}(t.${column.quoted})`))
  const grouping = groups.length > 0 ? ` group by ${groups.join(', ')} order by ${groups.join(', ')}` : ''
  return { text: `select ${list.join(', ')} from ${scope.from()}${clause}${grouping}`, params: scope.params.values }
}
