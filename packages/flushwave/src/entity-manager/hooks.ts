import type { SchemaDefs } from '../schema/define.js'
import type { Entity, EntityName } from '../schema/infer.js'
import type { EntityManager } from './entity-manager.js'
import type { FlushResult } from '../flush/flush.js'

/**
 * Lifecycle hooks of one entity. The `before…` hooks run at `flush()`, before anything is sent, and
 * may be async: they may load data, change entities, create or remove others, and those changes
 * join the same flush. `validate` reports problems; `afterCommit` runs once the data is committed.
 */
export interface EntityHooks<D extends SchemaDefs, K extends EntityName<D>> {
  beforeCreate?(entity: Entity<D, K>, em: EntityManager<D>): void | Promise<void>
  beforeUpdate?(entity: Entity<D, K>, em: EntityManager<D>): void | Promise<void>
  beforeDelete?(entity: Entity<D, K>, em: EntityManager<D>): void | Promise<void>
  /** Whole-entity rules for new and changed entities: a message, several, or nothing. */
  validate?(entity: Entity<D, K>): string | readonly string[] | undefined
  afterCommit?(entity: Entity<D, K>, change: 'created' | 'updated' | 'deleted', em: EntityManager<D>): void | Promise<void>
}

export interface Hooks<D extends SchemaDefs> {
  /** Per entity name. */
  readonly entities?: { readonly [K in EntityName<D>]?: EntityHooks<D, K> }
  /** Once per flush, first: may change anything. */
  readonly beforeFlush?: (em: EntityManager<D>) => void | Promise<void>
  /** Once per committed flush (after `em.transaction()` commits, for flushes inside it). */
  readonly afterCommit?: (result: FlushResult, em: EntityManager<D>) => void | Promise<void>
}

/** How many rounds of `before…` hooks one flush may run: hooks that keep creating entities are a bug. */
export const MAX_HOOK_ROUNDS = 10
