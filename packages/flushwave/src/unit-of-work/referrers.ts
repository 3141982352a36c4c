import type { FieldMeta } from '../schema/meta.js'
import type { HasState } from './entity-state.js'

/**
 * Who has pointed at whom through each many-to-one, so that a one-to-many collection finds its
 * items without walking every tracked entity of the target type (that walk made
 * `for (const book of books) book.reviews.items` quadratic in the entities loaded). Entries are
 * only ever added: each is a candidate the collection checks against the entity's current value, so
 * reassignments, removals and the values a rolled-back transaction restores need no upkeep here.
 */
export class Referrers {
  private readonly byField = new Map<FieldMeta, Map<HasState, Set<HasState>>>()

  /** `from.field` was set to `to` (an entity, or null). */
  note(field: FieldMeta, from: HasState, to: unknown): void {
    if (to === null || to === undefined) return
    let byTarget = this.byField.get(field)
    if (!byTarget) this.byField.set(field, (byTarget = new Map()))
    let set = byTarget.get(to as HasState)
    if (!set) byTarget.set(to as HasState, (set = new Set()))
    set.add(from)
  }

  /** Every entity that has pointed at `to` through `field`, in the order each first did. */
  of(field: FieldMeta, to: HasState): Iterable<HasState> {
    return this.byField.get(field)?.get(to) ?? []
  }
}
