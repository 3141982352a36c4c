import type { EntityMeta } from '../schema/meta.js'
import type { NewRows } from './changes.js'

/**
 * A self-referencing table's groups of new rows (rows leaving different server-filled columns
 * unset go in different INSERTs, see NewRows.omit), each after the groups its rows refer to: an
 * immediate foreign key is checked at the end of each statement. Groups that refer to each other
 * keep their order (only a deferrable reference, checked at COMMIT, lets that commit). Other
 * tables' groups stay as they are. Groups are few (mostly one or two): quadratic in them is fine.
 */
export function referencedFirst(entity: EntityMeta, groups: readonly NewRows[]): readonly NewRows[] {
  if (entity.selfReferences.length === 0 || groups.length < 2) return groups
  const self = entity.selfReferences.map((f) => entity.fields.indexOf(f))
  const owner = new Map<string, number>()
  groups.forEach((group, k) => {
    for (const id of group.ids) owner.set(id, k)
  })
  const needs = groups.map((group, k) => {
    const targets = new Set<number>()
    for (const i of self) {
      for (const value of group.columns[i]!) {
        const o = value === null ? undefined : owner.get(value)
        if (o !== undefined && o !== k) targets.add(o)
      }
    }
    return targets
  })
  const done = new Set<number>()
  const out: NewRows[] = []
  while (out.length < groups.length) {
    let next = groups.findIndex((_, k) => !done.has(k) && [...needs[k]!].every((o) => done.has(o)))
    if (next < 0) next = groups.findIndex((_, k) => !done.has(k))
    done.add(next)
    out.push(groups[next]!)
  }
  return out
}
