import { SchemaError } from '../errors.js'
import type { EntityMeta, FieldMeta } from './meta.js'

/**
 * Kahn's topological sort over many-to-one edges: every entity comes after the entities its foreign
 * keys point at, so inserts run in this order and deletes in its reverse. Ties keep declaration
 * order, so the plan is deterministic. Edges that need no order are left out:
 * - self-references (PostgreSQL checks a non-deferred FK at the end of each statement, and one
 *   statement writes a whole table's rows);
 * - deferrable references (checked at COMMIT).
 * A cycle that remains is broken at a nullable reference, which is marked `fixUp` (NULL on insert,
 * set by an UPDATE later in the same pipeline); a cycle of non-null immediate references is refused.
 */
export function tableOrder(entities: readonly EntityMeta[]): EntityMeta[] {
  const broken = new Set<FieldMeta>()
  for (;;) {
    const cycle = sort(entities, broken)
    if (Array.isArray(cycle)) return cycle
    const edge = entities
      .filter((e) => cycle.has(e))
      .flatMap((e) => e.fields.filter((f) => f.nullable && ordering(e, f) && cycle.has(f.ref!.target) && !broken.has(f)))[0]
    if (!edge) {
      const names = entities.filter((e) => cycle.has(e)).map((e) => e.name).join(', ')
      throw new SchemaError(
        `foreign keys form a cycle of non-null references between ${names}: make one reference nullable, or .deferrable()`,
      )
    }
    broken.add(edge)
    ;(edge.ref as { fixUp: boolean }).fixUp = true
  }
}

/** The order, or the entities left in a cycle. */
function sort(entities: readonly EntityMeta[], broken: ReadonlySet<FieldMeta>): EntityMeta[] | Set<EntityMeta> {
  const pending = new Map(entities.map((e) => [e, new Set(e.fields.filter((f) => ordering(e, f) && !broken.has(f)).map((f) => f.ref!.target))]))
  const order: EntityMeta[] = []
  while (pending.size > 0) {
    const ready = [...pending].find(([, deps]) => [...deps].every((d) => !pending.has(d)))
    if (!ready) return new Set(pending.keys())
    order.push(ready[0])
    pending.delete(ready[0])
  }
  return order
}

/** Whether a field constrains insert order. */
function ordering(entity: EntityMeta, field: FieldMeta): boolean {
  return !!field.ref && field.ref.target !== entity && !field.ref.deferrable
}
