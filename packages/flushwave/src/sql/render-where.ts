import type { Text } from '../plan/changes.js'
import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import { quoteIdent } from '../schema/quote.js'
import { arrayLiteral } from './array-literal.js'
import type { Condition, ColumnRef } from './conditions.js'

/** The parameters of one statement and the aliases of its FROM items, shared by its subqueries. */
export class Params {
  readonly values: Text[] = []
  private aliases = 0

  /** Adds a bind parameter; returns its placeholder, with its cast. */
  bind(value: Text, cast: string): string {
    this.values.push(value)
    return `$${this.values.length}::${cast}`
  }

  /** A new alias, unique in the statement. */
  alias(prefix: string): string {
    return `${prefix}${++this.aliases}`
  }
}

/**
 * One FROM scope: a table under an alias, and the many-to-one joins its conditions need, made on
 * first use and shared by every condition that follows the same references. A many-to-one joins at
 * most one row, so the joins never multiply the rows of the scope.
 */
export class Scope {
  private readonly reached = new Map<string, string>()
  private joined = ''

  constructor(
    readonly entity: EntityMeta,
    readonly alias: string,
    readonly params: Params,
  ) {}

  /** The alias of the row reached from this scope's row through `through`, joined on first use. */
  reach(through: readonly FieldMeta[]): string {
    let alias = this.alias
    for (const field of through) {
      const key = `${alias}.${field.quoted}`
      let next = this.reached.get(key)
      if (next === undefined) {
        const target = field.ref!.target
        next = this.params.alias('j')
        this.reached.set(key, next)
        this.joined += ` left join ${target.quotedTable} as ${next} on ${next}.${target.id.quoted} = ${alias}.${field.quoted}`
      }
      alias = next
    }
    return alias
  }

  /** `table as alias` and its joins, for a FROM clause: call it once every condition is rendered. */
  from(): string {
    return `${this.entity.quotedTable} as ${this.alias}${this.joins()}`
  }

  /** The joins alone (each with its leading space). */
  joins(): string {
    return this.joined
  }

  column(ref: ColumnRef): string {
    return `${this.reach(ref.through)}.${ref.column}`
  }
}

/** ` where …`, or nothing for a condition every row meets. */
export function whereClause(condition: Condition, scope: Scope): string {
  return condition.kind === 'true' ? '' : ` where ${renderCondition(condition, scope)}`
}

/** The condition as SQL over `scope`'s row, its values bound in `scope.params`. */
export function renderCondition(c: Condition, scope: Scope): string {
  const params = scope.params
  switch (c.kind) {
    case 'true':
      return 'true'
    case 'false':
      return 'false'
    case 'and':
    case 'or': {
      if (c.items.length === 0) return c.kind === 'and' ? 'true' : 'false'
      const other = c.kind === 'and' ? 'or' : 'and'
      return c.items.map((item) => (item.kind === other ? `(${renderCondition(item, scope)})` : renderCondition(item, scope))).join(` ${c.kind} `)
    }
    case 'not':
      return `(${renderCondition(c.item, scope)}) is not true`
    case 'compare':
      return `${scope.column(c.column)} ${c.op} ${params.bind(c.value, c.cast)}`
    case 'in':
      return `${scope.column(c.column)} ${c.negated ? '<> all' : '= any'}(${params.bind(arrayLiteral(c.values), `${c.cast}[]`)})`
    case 'null':
      return `${scope.column(c.column)} is ${c.negated ? 'not ' : ''}null`
    case 'between':
      return `${scope.column(c.column)} between ${params.bind(c.low, c.cast)} and ${params.bind(c.high, c.cast)}`
    case 'related':
      return renderRelated(c, scope)
  }
}

/**
 * A to-many relation's condition as an EXISTS subquery on the related rows (through the join table
 * for a many-to-many): `some` is EXISTS of a row that meets it, `none` NOT EXISTS of one, `every`
 * NOT EXISTS of one that does not; rows outside `among` (soft-deleted ones) take no part.
 */
function renderRelated(c: Extract<Condition, { kind: 'related' }>, scope: Scope): string {
  const outer = scope.reach(c.through)
  const params = scope.params
  const target = c.relation.meta.target
  const inner = new Scope(target, params.alias('s'), params)
  const condition = c.where.kind === 'true' ? '' : renderCondition(c.where, inner)
  const grouped = c.where.kind === 'or' ? `(${condition})` : condition
  const meets = c.quantifier === 'every' ? ` and (${condition || 'true'}) is not true` : condition ? ` and ${grouped}` : ''
  const among = c.among.kind === 'true' ? '' : ` and ${renderCondition(c.among, inner)}`
  // The FROM is written once the condition is rendered: its joins are known then.
  let from: string
  let link: string
  if (c.relation.kind === 'one-to-many') {
    const { inverse } = c.relation.meta
    from = inner.from()
    link = `${inner.alias}.${inverse.quoted} = ${outer}.${inverse.ref!.target.id.quoted}`
  } else {
    const m = c.relation.meta
    const l = params.alias('l')
    from = `${m.quotedTable} as ${l} join ${target.quotedTable} as ${inner.alias} on ${inner.alias}.${target.id.quoted} = ${l}.${quoteIdent(m.targetColumn)}${inner.joins()}`
    link = `${l}.${quoteIdent(m.ownColumn)} = ${outer}.${m.owner.id.quoted}`
  }
  return `${c.quantifier === 'some' ? '' : 'not '}exists (select from ${from} where ${link}${among}${meets})`
}
