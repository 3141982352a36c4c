import { SchemaError } from '../errors.js'
import type { EntityMeta } from './meta.js'

/**
 * Kahn's topological sort over many-to-one edges: every entity comes after the entities its foreign
 * keys point at, so inserts run in this order and deletes in its reverse. Self-references need no
 * order (PostgreSQL checks a non-deferred FK at the end of each statement, and one statement writes
 * a whole table's rows). Ties keep declaration order, so the plan is deterministic.
 */
export function tableOrder(entities: readonly EntityMeta[]): EntityMeta[] {
  const pending = new Map(entities.map((e) => [e, new Set(targetsOf(e))]))
  const order: EntityMeta[] = []
  while (pending.size > 0) {
    const ready = [...pending].find(([, deps]) => [...deps].every((d) => !pending.has(d)))
    if (!ready) {
      const cycle = [...pending.keys()].map((e) => e.name).join(', ')
      throw new SchemaError(
        `foreign keys form a cycle between ${cycle}; cycles across tables are not supported yet (self-references are)`,
      )
    }
    order.push(ready[0])
    pending.delete(ready[0])
  }
  return order
}

function targetsOf(entity: EntityMeta): EntityMeta[] {
  return entity.fields.flatMap((f) => (f.ref && f.ref.target !== entity ? [f.ref.target] : []))
}
