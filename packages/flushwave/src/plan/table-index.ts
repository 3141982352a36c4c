import type { EntityMeta, FieldMeta, ManyToManyMeta } from '../schema/meta.js'
import { addTo } from './groups.js'

/** A many-to-one of `child` that points at some table. */
export interface Referrer {
  readonly child: EntityMeta
  readonly field: FieldMeta
}

/** A cycle-breaking reference (`fixUp`) and its index in its entity's `fields`. */
export type FixUp = readonly [FieldMeta, number]

/** A join table that `entity` is one side of. */
export interface LinkSide {
  readonly link: ManyToManyMeta
  readonly side: 'owner' | 'target'
}

/**
 * What the planner asks of the schema on every flush, made once per table order: every join
 * table, the tables children first, and per table its referrers and link sides. Without it, each
 * deleted table walked every field of every table (a flush deleting one row in each of 10 tables
 * walked the bench schema's 25 tables 10 times).
 */
export interface TableIndex {
  readonly links: readonly ManyToManyMeta[]
  /** `order` reversed: children before their parents. */
  readonly childrenFirst: readonly EntityMeta[]
  /** Per table: the many-to-ones pointing at it, children first, each table's in field order. */
  referrers(entity: EntityMeta): readonly Referrer[]
  /** Per table: the join tables it is a side of, in `links` order (a self-link twice: owner, then target). */
  linkSides(entity: EntityMeta): readonly LinkSide[]
  /** Per table: its cycle-breaking references (`fixUp`), each with its index in `fields`. */
  fixUps(entity: EntityMeta): readonly FixUp[]
}

const indexes = new WeakMap<readonly EntityMeta[], TableIndex>()

export function tableIndex(order: readonly EntityMeta[]): TableIndex {
  let index = indexes.get(order)
  if (index === undefined) indexes.set(order, (index = build(order)))
  return index
}

function build(order: readonly EntityMeta[]): TableIndex {
  const links = order.flatMap((e) => e.manyToMany)
  const childrenFirst = [...order].reverse()
  const referrers = new Map<EntityMeta, Referrer[]>()
  for (const child of childrenFirst) {
    for (const field of child.fields) {
      if (field.ref) addTo(referrers, field.ref.target, { child, field })
    }
  }
  const sides = new Map<EntityMeta, LinkSide[]>()
  for (const link of links) {
    addTo(sides, link.owner, { link, side: 'owner' })
    addTo(sides, link.target, { link, side: 'target' })
  }
  const fixUps = new Map(order.map((e) => [e, e.fields.flatMap((f, i): FixUp[] => (f.ref?.fixUp ? [[f, i]] : []))]))
  return {
    links,
    childrenFirst,
    referrers: (entity) => referrers.get(entity) ?? [],
    linkSides: (entity) => sides.get(entity) ?? [],
    fixUps: (entity) => fixUps.get(entity) ?? [],
  }
}
