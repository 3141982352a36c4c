import { EntityStateError, NotLoadedError } from '../errors.js'
import type { Collection } from '../schema/infer.js'

/** The part of a collection the unit of work drives; implemented for one-to-many and many-to-many. */
export abstract class CollectionBase<T> implements Collection<T> {
  abstract readonly isLoaded: boolean
  protected abstract current(): readonly T[]
  abstract add(item: T): void
  abstract remove(item: T): void
  protected abstract describe(): string

  get items(): readonly T[] {
    if (!this.isLoaded) {
      throw new NotLoadedError(`${this.describe()} is not loaded: await em.populate(entity, '<relation>') first`)
    }
    return this.current()
  }

  get length(): number {
    return this.items.length
  }

  has(item: T): boolean {
    return this.items.includes(item)
  }

  [Symbol.iterator](): Iterator<T> {
    return this.items[Symbol.iterator]()
  }
}

export function checkSameOwner(ownerLabel: string, ok: boolean): void {
  if (!ok) throw new EntityStateError(`${ownerLabel}: an entity of another EntityManager cannot be linked`)
}
