import { SchemaError } from '../errors.js'
import { isCounter } from './counters.js'

/** Server-filled columns an entity may have (see computeChanges' serverGroup). */
const MAX_SERVER_VALUED = 52
import type { EntityMeta, FieldMeta, FixUp, LinkSide, ManyToManyMeta, Referrer } from './meta.js'

/** What the planner asks of the schema as a whole: every join table, and the tables children first. */
export interface SchemaFacts {
  /** Entities ordered so that each one's foreign-key targets come before it. */
  readonly insertOrder: readonly EntityMeta[]
  readonly links: readonly ManyToManyMeta[]
  /** The insert order reversed: children before their parents. */
  readonly childrenFirst: readonly EntityMeta[]
  /** Some entity has a composite primary key (its new entities' keys may wait for the flush). */
  readonly compositeKeys: boolean
  /** Some field has a validation rule (`.check(…)`): else a flush without validate hooks checks none. */
  readonly fieldRules: boolean
}

type Writable<T> = { -readonly [K in keyof T]: T[K] }

/**
 * Fills the facts every flush would otherwise work out again (EntityMeta's derived fields), once
 * the entities are resolved and ordered (`fixUp` marks come with the order), before they are frozen.
 */
export function deriveFacts(order: readonly EntityMeta[]): Omit<SchemaFacts, 'insertOrder'> {
  const links = order.flatMap((e) => e.manyToMany)
  const childrenFirst = [...order].reverse()
  const referrers = new Map<EntityMeta, Referrer[]>(order.map((e) => [e, []]))
  for (const child of childrenFirst) for (const field of child.fields) if (field.ref) referrers.get(field.ref.target)!.push({ child, field })
  const sides = new Map<EntityMeta, LinkSide[]>(order.map((e) => [e, []]))
  for (const link of links) {
    sides.get(link.owner)!.push({ link, side: 'owner' })
    sides.get(link.target)!.push({ link, side: 'target' })
  }
  for (const meta of order) {
    const m = meta as Writable<EntityMeta>
    const self = meta.fields.filter((f) => f.ref?.target === meta)
    m.counters = meta.fields.filter(isCounter)
    m.selfReferences = self
    m.treeFields = self.filter((f) => f.ref!.onDelete === 'cascade')
    m.mutableFields = meta.fields.filter((f) => !f.ref && f.type.mutable)
    m.serverValued = meta.fields.flatMap((f, i) => (f.serverDefault || f.generated ? [i] : []))
    // The change set groups new rows by a bit per such column, in a number (exact to 2^53).
    if (m.serverValued.length > MAX_SERVER_VALUED) throw new SchemaError(`${meta.name} has ${m.serverValued.length} server-filled columns (serverDefault or generated); at most ${MAX_SERVER_VALUED}`)
    m.generated = meta.fields.filter((f) => f.generated)
    m.creatable = new Set([...(meta.key ? [] : [meta.id.prop]), ...meta.fields.filter((f) => !f.generated).map((f) => f.prop), ...meta.manyToMany.map((l) => l.prop)])
    m.referrers = referrers.get(meta)!
    m.linkSides = sides.get(meta)!
    m.fixUps = meta.fields.flatMap((f: FieldMeta, i): FixUp[] => (f.ref?.fixUp ? [[f, i]] : []))
  }
  return {
    links,
    childrenFirst,
    compositeKeys: order.some((meta) => meta.key !== undefined),
    fieldRules: order.some((meta) => meta.fields.some((f) => f.rules.length > 0)),
  }
}
