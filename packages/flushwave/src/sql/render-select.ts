import type { Text } from '../plan/changes.js'
import type { EntityMeta, FieldMeta, ManyToManyMeta } from '../schema/meta.js'
import { arrayLiteral } from './array-literal.js'
import { quoteIdent } from '../schema/quote.js'
import type { Statement } from './statement.js'

/** A checked condition of `em.find`, with its value already in text form. */
export type Condition =
  | { readonly column: string; readonly sqlType: string; readonly op: ComparisonOp; readonly value: string }
  | { readonly column: string; readonly sqlType: string; readonly op: 'in'; readonly values: readonly Text[] }
  | { readonly column: string; readonly op: 'is null' | 'is not null' }

export type ComparisonOp = '=' | '<>' | '>' | '>=' | '<' | '<=' | 'like'

export interface SelectOptions {
  readonly orderBy?: readonly (readonly [column: string, direction: 'asc' | 'desc'])[]
  readonly limit?: number
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
  let list = entity.id.type.selectExpr(`${alias}.${entity.id.quoted}`)
  for (const f of entity.fields) list += `, ${f.type.selectExpr(`${alias}.${f.quoted}`)}`
  return list
}

export function renderLoadByIds(entity: EntityMeta, ids: readonly string[], lock?: RowLock): Statement {
  return {
    text: `select ${selectList(entity)} from ${entity.quotedTable} as t where t.${entity.id.quoted} = any($1::${entity.id.type.sqlType}[])${lockClause(lock)}`,
    params: [arrayLiteral(ids)],
  }
}

/** The rows of a one-to-many: children whose foreign key is one of `ownerIds`. */
export function renderLoadByReference(entity: EntityMeta, field: FieldMeta, ownerIds: readonly string[]): Statement {
  return {
    text: `select ${selectList(entity)} from ${entity.quotedTable} as t where t.${field.quoted} = any($1::${field.type.sqlType}[])`,
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
      `join ${target.quotedTable} as t on t.${target.id.quoted} = j.${quoteIdent(link.targetColumn)} ` +
      `where j.${own} = any($1::${link.owner.id.type.sqlType}[])`,
    params: [arrayLiteral(ownerIds)],
  }
}

export function renderFind(entity: EntityMeta, conditions: readonly Condition[], options: SelectOptions = {}): Statement {
  const params: Text[] = []
  let text = `select ${selectList(entity)} from ${entity.quotedTable} as t`
  for (let i = 0; i < conditions.length; i++) {
    const c = conditions[i]!
    text += `${i === 0 ? ' where' : ' and'} t.${c.column}`
    if ('values' in c) text += ` = any(${bind(params, arrayLiteral(c.values), `${c.sqlType}[]`)})`
    else if ('value' in c) text += ` ${c.op} ${bind(params, c.value, c.sqlType)}`
    else text += ` ${c.op}`
  }
  if (options.orderBy?.length) text += ` order by ${options.orderBy.map(([c, d]) => `t.${c} ${d}`).join(', ')}`
  if (options.limit !== undefined) text += ` limit ${bind(params, String(options.limit), 'int8')}`
  text += lockClause(options.lock)
  return { text, params }
}

/** Adds a bind parameter; returns its placeholder, with its cast. */
function bind(params: Text[], value: Text, cast: string): string {
  params.push(value)
  return `$${params.length}::${cast}`
}
