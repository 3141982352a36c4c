import { EntityStateError } from '../errors.js'
import type { OneToManyMeta } from '../schema/meta.js'
import { CollectionBase } from './collection.js'
import { isGone, label, STATE, stateOf, type HasState } from './entity-state.js'
import type { Referrers } from './referrers.js'

/**
 * The inverse side of a many-to-one. It stores nothing: its items are the tracked entities whose
 * many-to-one points at the owner, so it always agrees with unflushed changes on either side.
 */
export class OneToManyCollection extends CollectionBase<HasState> {
  loaded: boolean

  constructor(
    private readonly referrers: Referrers,
    private readonly owner: HasState,
    readonly meta: OneToManyMeta,
  ) {
    super()
    // An entity created here has no children but the ones made here, before or after its flush.
    this.loaded = owner[STATE].createdHere
  }

  get isLoaded(): boolean {
    return this.loaded
  }

  protected current(): HasState[] {
    const items: HasState[] = []
    for (const entity of this.referrers.of(this.meta.target, this.meta.inverse, this.owner)) {
      const state = entity[STATE]
      if (state.values[this.meta.inverse.prop] !== this.owner) continue
      if (isGone(state)) continue
      items.push(entity)
    }
    return items
  }

  /** Whether `item` is in `items`, without making them: a loop of has() checks stays linear. */
  override has(item: HasState): boolean {
    if (!this.loaded) return super.has(item) // throws, as `items` does
    const state = stateOf(item)
    if (state === undefined || state.values[this.meta.inverse.prop] !== this.owner) return false
    if (isGone(state)) return false
    return this.referrers.of(this.meta.target, this.meta.inverse, this.owner).has(item)
  }

  add(item: HasState): void {
    this.check(item)
    ;(item as unknown as Record<string, unknown>)[this.meta.inverse.prop] = this.owner
  }

  remove(item: HasState): void {
    this.check(item)
    if (item[STATE].values[this.meta.inverse.prop] !== this.owner) return
    if (!this.meta.inverse.nullable) {
      throw new EntityStateError(
        `${label(item[STATE])} cannot leave ${this.describe()}: ${this.meta.target.name}.${this.meta.inverse.prop} is not nullable; em.remove() it or move it to another ${this.owner[STATE].meta.name}`,
      )
    }
    ;(item as unknown as Record<string, unknown>)[this.meta.inverse.prop] = null
  }

  protected describe(): string {
    return `${label(this.owner[STATE])}.${this.meta.prop}`
  }

  /** Only entities of the target type and of this EntityManager (a plain object would be silently changed). */
  private check(item: unknown): void {
    const state = stateOf(item)
    if (!state || state.meta !== this.meta.target) throw new EntityStateError(`${this.describe()} takes ${this.meta.target.name} entities`)
    if (state.owner !== this.owner[STATE].owner) throw new EntityStateError(`${this.describe()}: the entity belongs to another EntityManager`)
  }
}
