import { EntityStateError } from '../errors.js'
import type { ManyToManyMeta } from '../schema/meta.js'
import { CollectionBase } from './collection.js'
import type { CollectionFactory } from './entity-class.js'
import { isGone, label, STATE, stateOf, type HasState } from './entity-state.js'

/** Links through a join table: the loaded links plus pending additions and removals. */
export class ManyToManyCollection extends CollectionBase<HasState> {
  /** The linked entities as last read or written; undefined while not loaded. */
  persisted: Set<HasState> | undefined
  readonly added = new Set<HasState>()
  readonly removed = new Set<HasState>()

  constructor(
    readonly owner: HasState,
    readonly meta: ManyToManyMeta,
  ) {
    super()
    // Links of an entity created here can only have been made through this collection.
    this.persisted = owner[STATE].createdHere ? new Set() : undefined
  }

  get isLoaded(): boolean {
    return this.persisted !== undefined
  }

  protected current(): HasState[] {
    const items = [...(this.persisted ?? [])].filter((x) => !this.removed.has(x))
    for (const x of this.added) if (!this.persisted?.has(x)) items.push(x)
    return items.filter((x) => !isGone(x[STATE]))
  }

  /** Whether `item` is in `items`, without making them: a loop of has() checks stays linear. */
  override has(item: HasState): boolean {
    if (this.persisted === undefined) return super.has(item) // not loaded: throws, as `items` does
    const state = stateOf(item)
    if (state === undefined || isGone(state)) return false
    // add() takes an item out of `removed` and remove() out of `added`: the two never share one.
    return this.added.has(item) || (this.persisted.has(item) && !this.removed.has(item))
  }

  add(item: HasState): void {
    this.check(item)
    ;(this.owner[STATE].owner as CollectionFactory).changing(this.owner)
    // Not loaded, the link may or may not be in the table: a pending removal cancelled by add()
    // must still insert it (the insert is a no-op when the link is there).
    this.removed.delete(item)
    if (!this.persisted?.has(item)) this.added.add(item)
    ;(this.owner[STATE].owner as CollectionFactory).touch(this.owner)
  }

  remove(item: HasState): void {
    this.check(item)
    ;(this.owner[STATE].owner as CollectionFactory).changing(this.owner)
    // Likewise, add() then remove() must delete a link that was there all along.
    this.added.delete(item)
    if (this.persisted === undefined || this.persisted.has(item)) this.removed.add(item)
    ;(this.owner[STATE].owner as CollectionFactory).touch(this.owner)
  }

  /** Called once a flush that wrote the pending links has committed. */
  committed(): void {
    if (this.persisted) this.persisted = new Set(this.current())
    this.added.clear()
    this.removed.clear()
  }

  protected describe(): string {
    return `${label(this.owner[STATE])}.${this.meta.prop}`
  }

  private check(item: HasState): void {
    const state = stateOf(item)
    const owner = this.owner[STATE]
    if (!state || state.meta !== this.meta.target) {
      throw new EntityStateError(`${this.describe()} takes ${this.meta.target.name} entities`)
    }
    if (state.owner !== owner.owner) throw new EntityStateError(`${this.describe()}: the entity belongs to another EntityManager`)
    if (state.status === 'removed' || state.status === 'detached') {
      throw new EntityStateError(`${this.describe()}: ${label(state)} is ${state.status}`)
    }
    if (owner.status === 'removed' || owner.status === 'detached') {
      throw new EntityStateError(`${label(owner)} is ${owner.status} and cannot be changed`)
    }
  }
}
