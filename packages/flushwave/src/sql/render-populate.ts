import type { EntityMeta, FieldMeta, ManyToManyMeta, OneToManyMeta } from '../schema/meta.js'
import { quoteIdent } from '../schema/quote.js'
import type { Condition } from './conditions.js'
import type { SelectOptions } from './render-select.js'
import { keyAmong, keyText } from './keys.js'
import type { Statement } from './statement.js'
import { Params, Scope, whereClause } from './render-where.js'
import { live } from './live-rows.js'

/**
 * A find and its populate as one statement (see entity-manager/populate-along): the rows found, then
 * the rows of every relation of every level, as branches of one UNION ALL over common table
 * expressions. The rows found are computed once (a MATERIALIZED CTE: as a nested `in (subquery)` the
 * planner may run the read again for every row it tests), and so is each set of ids on the way down.
 * One statement is one snapshot: the relations are those of exactly the rows found.
 *
 * Every row is `[branch, key, ...entity row]`, the entity row as text (in select-list order, NULLs
 * after it up to the widest entity): branch 0 is a row found, `key` its position; branch k > 0 is a
 * row of the k-th relation, `key` the id of the owner it belongs to (a collection's rows) or NULL.
 */

/** The common table expressions of one statement and its parameters. */
export class With {
  readonly params = new Params()
  private readonly parts: string[] = []
  private readonly made = new Map<object, string>()

  /** Adds a MATERIALIZED CTE named after `prefix`, with these columns; returns its name. */
  add(prefix: string, columns: readonly string[], select: string): string {
    const name = this.params.alias(prefix)
    this.parts.push(`${name} (${columns.join(', ')}) as materialized (${select})`)
    return name
  }

  /** The CTE that `set` makes, made once per statement however many branches use it. */
  once(set: IdSet): string {
    let name = this.made.get(set)
    if (name === undefined) this.made.set(set, (name = set(this)))
    return name
  }

  clause(): string {
    return this.parts.length > 0 ? `with ${this.parts.join(', ')} ` : ''
  }
}

/** Makes a CTE whose column `id` holds ids of one entity's rows (maybe repeated, maybe NULL); returns its name. */
export type IdSet = (w: With) => string

/** The columns of an entity's row in a CTE: id, then c1… in `fields` order. */
const rowColumns = (entity: EntityMeta) => ['id', ...entity.fields.map((_, i) => `c${i + 1}`)]

/** The rows `renderFind(entity, where, options)` reads, all their columns, in its order. Its `id` column makes it an IdSet. */
export function foundRows(entity: EntityMeta, where: Condition, options: SelectOptions): IdSet {
  return (w) => {
    const scope = new Scope(entity, w.params.alias('r'), w.params)
    const r = scope.alias
    let text = whereClause(where, scope)
    if (options.orderBy?.length) text += ` order by ${options.orderBy.map(([c, d]) => `${r}.${c} ${d}`).join(', ')}`
    if (options.limit !== undefined) text += ` limit ${w.params.bind(String(options.limit), 'int8')}`
    if (options.offset !== undefined && options.offset > 0) text += ` offset ${w.params.bind(String(options.offset), 'int8')}`
    const columns = [entity.key ? keyText(entity, r) : `${r}.${entity.id.quoted}`, ...entity.fields.map((f) => `${r}.${f.quoted}`)].join(', ')
    return w.add('f', rowColumns(entity), `select ${columns} from ${scope.from()}${text}`)
  }
}

/** The ids a many-to-one of the owners refers to. */
export function manyToOneIds(owner: EntityMeta, field: FieldMeta, owners: IdSet): IdSet {
  return (w) => {
    const from = w.once(owners)
    const o = w.params.alias('o')
    return w.add('f', ['id'], `select ${o}.${field.quoted} from ${owner.quotedTable} as ${o} where ${keyAmong(owner, o, 'id', `from ${from}`)}`)
  }
}

/** The ids of the rows of the owners' one-to-many collections. */
export function oneToManyIds(relation: OneToManyMeta, owners: IdSet): IdSet {
  return (w) => {
    const from = w.once(owners)
    const c = w.params.alias('c')
    return w.add('f', ['id'], `select ${keyValueOf(relation.target, c)} from ${relation.target.quotedTable} as ${c} where ${c}.${relation.inverse.quoted} in (select id from ${from})`)
  }
}

/** The ids of the rows the owners' many-to-many links reach. */
export function manyToManyIds(link: ManyToManyMeta, owners: IdSet): IdSet {
  return (w) => {
    const from = w.once(owners)
    const l = w.params.alias('l')
    return w.add('f', ['id'], `select ${l}.${quoteIdent(link.targetColumn)} from ${link.quotedTable} as ${l} where ${l}.${quoteIdent(link.ownColumn)} in (select id from ${from})`)
  }
}

/** The owners of a collection branch, each once: its rows are those of the owners' ids (a foreign key or a row read says they exist). */
const distinctIds = (ids: string) => `(select distinct id from ${ids} where id is not null)`

/** One branch of the UNION ALL, rendered once the width (the widest entity's column count) is known. */
export type Branch = (w: With, width: number) => string

/** The entity's row from `alias` as text, padded with NULLs to `width` columns. */
function textRow(entity: EntityMeta, column: (field: { readonly quoted: string }, i: number) => string, width: number): string {
  const list = [entity.id, ...entity.fields].map((f, i) => `(${f.type.selectExpr(column(f, i))})::text`)
  while (list.length < width) list.push('null::text')
  return list.join(', ')
}

/** A column of `entity`'s row `alias` for textRow: a composite key's id is its tuple. */
const columnOf = (entity: EntityMeta, alias: string) => (field: { readonly quoted: string }): string =>
  field === entity.id && entity.key ? keyText(entity, alias) : `${alias}.${field.quoted}`

/** An IdSet's `id` of `entity`'s row `alias`: its id column, or its key tuple. */
const keyValueOf = (entity: EntityMeta, alias: string): string => (entity.key ? keyText(entity, alias) : `${alias}.${entity.id.quoted}`)

/** Branch 0: the rows found, each with its position. */
export function foundBranch(entity: EntityMeta, found: IdSet): Branch {
  return (w, width) => {
    const name = w.once(found)
    const columns = rowColumns(entity)
    return `select 0, (row_number() over ())::text, ${textRow(entity, (_, i) => `${name}.${columns[i]}`, width)} from ${name}`
  }
}

/** The rows of `target` whose ids `ids` holds (a many-to-one's targets: see manyToOneIds). */
export function referenceBranch(k: number, target: EntityMeta, ids: IdSet): Branch {
  return (w, width) => {
    const from = w.once(ids)
    const t = w.params.alias('t')
    return `select ${k}, null::text, ${textRow(target, columnOf(target, t), width)} from ${target.quotedTable} as ${t} where ${t}.${target.id.quoted} in (select id from ${from})`
  }
}

/**
 * Per owner, the rows of its one-to-many collection; an owner with none has one row of NULLs. Every
 * owner the statement saw has a row, so which collections it read whole is in its result.
 */
export function oneToManyBranch(k: number, owner: EntityMeta, relation: OneToManyMeta, owners: IdSet): Branch {
  return (w, width) => {
    const ids = w.once(owners)
    const [p, t] = [w.params.alias('p'), w.params.alias('t')]
    const target = relation.target
    return (
      `select ${k}, (${owner.id.type.selectExpr(`${p}.id`)})::text, ${textRow(target, columnOf(target, t), width)} from ${distinctIds(ids)} as ${p} ` +
      `left join ${target.quotedTable} as ${t} on ${t}.${relation.inverse.quoted} = ${p}.id${live(target, t)}`
    )
  }
}

/** Per owner, the rows its many-to-many links reach (a row of NULLs for none, as above). */
export function manyToManyBranch(k: number, link: ManyToManyMeta, owners: IdSet): Branch {
  return (w, width) => {
    const ids = w.once(owners)
    const [p, l, t] = [w.params.alias('p'), w.params.alias('l'), w.params.alias('t')]
    const { owner, target } = link
    return (
      `select ${k}, (${owner.id.type.selectExpr(`${p}.id`)})::text, ${textRow(target, (f) => `${t}.${f.quoted}`, width)} from ${distinctIds(ids)} as ${p} ` +
      // Link and target joined first, so that a link to a soft-deleted target drops out whole.
      `left join (${link.quotedTable} as ${l} join ${target.quotedTable} as ${t} on ${t}.${target.id.quoted} = ${l}.${quoteIdent(link.targetColumn)}${live(target, t)}) ` +
      `on ${l}.${quoteIdent(link.ownColumn)} = ${p}.id`
    )
  }
}

/** The branches as one statement, `width` columns of entity row each. */
export function renderBranches(branches: readonly Branch[], width: number): Statement {
  const w = new With()
  const union = branches.map((b) => b(w, width)).join(' union all ')
  return { text: w.clause() + union, params: w.params.values }
}
