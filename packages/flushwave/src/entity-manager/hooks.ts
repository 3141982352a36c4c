import { flushCandidates, isDirty } from '../entities/dirty.js'
import { STATE, type HasState } from '../entities/entity-state.js'
import type { IdentityMap } from '../entities/identity-map.js'
import { FlushwaveError } from '../errors.js'
import type { ChangeSet } from '../flush/change-set.js'
import type { FlushResult } from '../flush/flush.js'

/**
 * Runs an EntityManager's lifecycle hooks (their types, `Hooks` and `EntityHooks`, are declared
 * with the EntityManager they receive). Written over any `EM`, so that this file needs nothing
 * of the EntityManager but the object to pass on.
 */
export interface HookTable<EM> {
  readonly entities?: { readonly [name: string]: EntityHookTable<EM> | undefined }
  readonly beforeFlush?: (em: EM) => void | Promise<void>
  readonly afterCommit?: (result: FlushResult, em: EM) => void | Promise<void>
}

interface EntityHookTable<EM> {
  beforeCreate?(entity: never, em: EM): void | Promise<void>
  beforeUpdate?(entity: never, em: EM): void | Promise<void>
  beforeDelete?(entity: never, em: EM): void | Promise<void>
  validate?(entity: never): string | readonly string[] | undefined
  afterCommit?(entity: never, change: 'created' | 'updated' | 'deleted', em: EM): void | Promise<void>
}

/** How many rounds of `before…` hooks one flush may run: hooks that keep creating entities are a bug. */
export const MAX_HOOK_ROUNDS = 10

/** beforeFlush once, then the entity hooks of every new, changed or removed entity, until none is left. */
export async function runBeforeHooks<EM>(hooks: HookTable<EM>, em: EM, map: IdentityMap): Promise<void> {
  if (!hooks.beforeFlush && !hooks.entities) return
  await hooks.beforeFlush?.(em)
  const entities = hooks.entities
  if (!entities) return
  const seen = new Map<HasState, 'create' | 'update' | 'delete'>()
  for (let round = 1; ; round++) {
    let called = 0
    for (const entity of flushCandidates(map)) {
      const state = entity[STATE]
      const kind = state.status === 'new' ? 'create' : state.status === 'removed' ? 'delete' : isDirty(state) ? 'update' : undefined
      if (!kind || seen.get(entity) === kind) continue
      seen.set(entity, kind)
      const own = entities[state.meta.name]
      const hook = kind === 'create' ? own?.beforeCreate : kind === 'update' ? own?.beforeUpdate : own?.beforeDelete
      if (!hook) continue
      called++
      await hook(entity as never, em)
    }
    if (called === 0) return
    if (round === MAX_HOOK_ROUNDS) {
      throw new FlushwaveError(`before-hooks still created or changed entities after ${MAX_HOOK_ROUNDS} rounds; a hook keeps creating work`)
    }
  }
}

/** The afterCommit calls a committed flush owes, in order (entities created, updated, deleted; then the flush's), or undefined for none. */
export function afterCommitCalls<EM>(hooks: HookTable<EM>, em: EM, result: FlushResult, set: ChangeSet): (() => Promise<void>) | undefined {
  const calls: (() => void | Promise<void>)[] = []
  const entities = hooks.entities
  if (entities !== undefined && Object.values(entities).some((h) => h?.afterCommit)) {
    const each = (entity: HasState, change: 'created' | 'updated' | 'deleted') => {
      const hook = entities[entity[STATE].meta.name]?.afterCommit
      if (hook) calls.push(() => hook(entity as never, change, em))
    }
    for (const entity of set.inserted) each(entity, 'created')
    for (const entity of set.written.keys()) each(entity, 'updated')
    for (const entity of set.deleted) each(entity, 'deleted')
  }
  const afterCommit = hooks.afterCommit
  if (afterCommit) calls.push(() => afterCommit(result, em))
  if (calls.length === 0) return undefined
  return async () => {
    for (const call of calls) await call()
  }
}

/** Whether some entity has a validate hook: else, and with no field rules in the schema, a flush validates nothing. */
export function hasValidateHooks<EM>(hooks: HookTable<EM>): boolean {
  const entities = hooks.entities
  if (entities === undefined) return false
  for (const name in entities) if (entities[name]?.validate) return true
  return false
}

/** A validate hook by entity name, for validation.ts. */
export function validateHook<EM>(hooks: HookTable<EM>, name: string): ((entity: never) => string | readonly string[] | undefined) | undefined {
  return hooks.entities?.[name]?.validate
}
