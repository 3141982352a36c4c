import type { EntityMeta, FieldMeta } from '../schema/meta.js'
import { STATE, type HasState } from './entity-state.js'

/**
 * Who has pointed at whom through each many-to-one, so that a one-to-many collection finds its
 * items without walking every tracked entity of the target type (that walk made
 * `for (const book of books) book.reviews.items` quadratic in the entities loaded). Entries are
 * only ever added: each is a candidate the collection checks against the entity's current value, so
 * reassignments and removals need no upkeep here. A rollback notes the references it puts back
 * (UnitOfWork.restored): the index may have been made after they moved.
 *
 * A field is indexed from the first time a collection asks about it: one walk of the entities of
 * its type then, by their current values, and every assignment after. Until then `note` costs a
 * lookup: most units of work never read a one-to-many, and indexing every new row's references made
 * a Set per parent (docs/design-notes.md, "One-to-many references indexed on first read").
 */
export class Referrers {
  private readonly byField = new Map<FieldMeta, Map<HasState, Set<HasState>>>()

  constructor(private readonly tracked: (meta: EntityMeta) => Iterable<HasState>) {}

  /** `from.field` was set to `to` (an entity, or null). */
  note(field: FieldMeta, from: HasState, to: unknown): void {
    if (to === null || to === undefined) return
    const byTarget = this.byField.get(field)
    if (byTarget) add(byTarget, to as HasState, from)
  }

  /** Drops an entity that leaves the unit of work, as a referrer and as a target. */
  forget(entity: HasState): void {
    const state = entity[STATE]
    for (const [field, byTarget] of this.byField) {
      byTarget.delete(entity)
      if (field.ref && state.meta.fieldByProp.get(field.prop) === field) {
        const target = state.values[field.prop] as HasState | null | undefined
        if (target) byTarget.get(target)?.delete(entity)
      }
    }
  }

  /**
   * Every entity of type `meta` that has pointed at `to` through `field` since the field was
   * indexed, or points at it now: at first in the order they became tracked, then as they did.
   */
  of(meta: EntityMeta, field: FieldMeta, to: HasState): ReadonlySet<HasState> {
    let byTarget = this.byField.get(field)
    if (!byTarget) {
      this.byField.set(field, (byTarget = new Map()))
      for (const entity of this.tracked(meta)) {
        const target = entity[STATE].values[field.prop]
        if (target !== null && target !== undefined) add(byTarget, target as HasState, entity)
      }
    }
    return byTarget.get(to) ?? NONE
  }
}

const NONE: ReadonlySet<HasState> = new Set()

function add(byTarget: Map<HasState, Set<HasState>>, to: HasState, from: HasState): void {
  const set = byTarget.get(to)
  if (set) set.add(from)
  else byTarget.set(to, new Set([from]))
}
