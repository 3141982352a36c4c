import type { Executor } from '../drivers/executor.js'
import { STATE, type HasState } from '../entities/entity-state.js'
import type { ManyToManyCollection } from '../entities/many-to-many.js'
import type { OneToManyCollection } from '../entities/one-to-many.js'
import type { UnitOfWork } from '../entities/unit-of-work.js'
import type { EntityMeta } from '../schema/meta.js'
import type { Condition } from '../sql/conditions.js'
import {
  foundBranch,
  foundRows,
  manyToManyBranch,
  manyToManyIds,
  manyToOneIds,
  oneToManyBranch,
  oneToManyIds,
  referenceBranch,
  renderBranches,
  type Branch,
  type IdSet,
} from '../sql/render-populate.js'
import type { SelectOptions } from '../sql/render-select.js'
import type { PathTree } from './loader.js'

/** One relation of one level: whose it is and what its rows are. */
interface Step {
  readonly owner: EntityMeta
  readonly relation: string
  readonly kind: 'reference' | 'oneToMany' | 'manyToMany'
  readonly target: EntityMeta
}

/**
 * A find and its populate in one statement (see sql/render-populate): the rows found and those of
 * every relation of the tree, in one snapshot. A collection is marked loaded for the owners the
 * statement read it for; what it could not cover (an owner whose reference or collection differs
 * here, unflushed) is left to the usual populate that follows, which then finds the rest loaded.
 * Returns the entities found, in order.
 */
export async function findAlong(uow: UnitOfWork, executor: Executor, meta: EntityMeta, where: Condition, options: SelectOptions, tree: PathTree): Promise<HasState[]> {
  const found = foundRows(meta, where, options)
  const steps: Step[] = []
  const branches: Branch[] = [foundBranch(meta, found)]
  let width = 1 + meta.fields.length
  // Steps in tree order: an owner's rows are merged before the rows of its relations.
  const plan = (owner: EntityMeta, tree: PathTree, owners: IdSet) => {
    for (const [relation, below] of tree) {
      const k = steps.length + 1
      const field = owner.fieldByProp.get(relation)
      const many = field?.ref ? undefined : owner.oneToMany.find((r) => r.prop === relation)
      const link = field?.ref || many ? undefined : owner.manyToMany.find((r) => r.prop === relation)!
      const target = field?.ref?.target ?? many?.target ?? link!.target
      let ids: IdSet
      if (field?.ref) {
        ids = manyToOneIds(owner, field, owners)
        branches.push(referenceBranch(k, target, ids))
      } else if (many) {
        ids = oneToManyIds(many, owners)
        branches.push(oneToManyBranch(k, owner, many, owners))
      } else {
        ids = manyToManyIds(link!, owners)
        branches.push(manyToManyBranch(k, link!, owners))
      }
      steps.push({ owner, relation, kind: field?.ref ? 'reference' : many ? 'oneToMany' : 'manyToMany', target })
      width = Math.max(width, 1 + target.fields.length)
      if (below.size > 0) plan(target, below, ids)
    }
  }
  plan(meta, tree, found)
  const rows = await executor.read(renderBranches(branches, width))

  const byStep: unknown[][][] = steps.map(() => [])
  const first: unknown[][] = []
  let ordered = true
  for (const row of rows) {
    const k = Number(row[0])
    if (k === 0) {
      if (first.length > 0 && Number(first[first.length - 1]![1]) > Number(row[1])) ordered = false
      first.push(row)
    } else byStep[k - 1]!.push(row)
  }
  // A UNION ALL returns its branches in turn unless the planner runs them in parallel: the position decides.
  if (!ordered) first.sort((a, b) => Number(a[1]) - Number(b[1]))
  const entities: HasState[] = []
  for (const row of first) entities.push(uow.hydrate(meta, row, false, AT))
  steps.forEach((step, i) => merge(uow, step, byStep[i]!))
  return entities
}

/** Where the entity's row starts within a branch row: after the branch and the key (its padding is never read). */
const AT = 2

function merge(uow: UnitOfWork, step: Step, rows: readonly unknown[][]): void {
  const { owner, relation, target } = step
  if (step.kind === 'reference') {
    for (const row of rows) uow.hydrate(target, row, false, AT)
    return
  }
  // The owners this statement read the collection of, that are here with the collection not loaded
  // yet; as em.populate, a loaded collection is not read again (its unflushed changes stay).
  const pending = new Map<HasState, HasState[]>()
  const ownerOf: (HasState[] | undefined)[] = new Array(rows.length)
  for (let i = 0; i < rows.length; i++) {
    const entity = uow.map.get(owner, owner.id.type.fromDb(rows[i]![1]))
    if (entity === undefined || entity[STATE].status === 'new') continue
    let items = pending.get(entity)
    if (items === undefined && !(uow.collection(entity, relation) as { isLoaded: boolean }).isLoaded) pending.set(entity, (items = []))
    ownerOf[i] = items
  }
  for (const entity of pending.keys()) uow.changing(entity) // marking the collection loaded is a change
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!
    if (row[AT] !== null) ownerOf[i]?.push(uow.hydrate(target, row, false, AT)) // NULLs: an owner with none
  }
  for (const [entity, items] of pending) {
    const collection = uow.collection(entity, relation)
    if (step.kind === 'oneToMany') (collection as OneToManyCollection).loaded = true
    else (collection as ManyToManyCollection).persisted = new Set(items)
  }
}
