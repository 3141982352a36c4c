import type { Executor } from '../drivers/executor.js'
import { InvalidValueError } from '../errors.js'
import type { EntityMeta } from '../schema/meta.js'
import { renderFind, renderLoadByIds, renderLoadByReference, renderLoadLinks, type RowLock, type SelectOptions } from '../sql/render-select.js'
import { STATE, type HasState } from '../entities/entity-state.js'
import type { ManyToManyCollection } from '../entities/many-to-many.js'
import type { OneToManyCollection } from '../entities/one-to-many.js'
import type { UnitOfWork } from '../entities/unit-of-work.js'
import type { Condition } from '../sql/conditions.js'

interface Waiting {
  readonly resolve: (entity: HasState | undefined) => void
  readonly reject: (error: unknown) => void
}

/**
 * Reads rows into the unit of work. Loads by id issued in the same tick are batched into one
 * `= any($1)` query per entity, so loading N references costs one query, not N.
 */
export class Loader {
  private pending = new Map<EntityMeta, Map<string, Waiting[]>>()
  private scheduled = false

  constructor(
    private readonly uow: UnitOfWork,
    /** The EntityManager's executor at the time of each read (it changes inside a transaction). */
    private readonly executor: () => Executor,
  ) {}

  /** The entity with this id, or undefined when no row has it. Loaded entities come from the identity map. */
  byId(meta: EntityMeta, id: unknown): Promise<HasState | undefined> {
    const known = this.uow.map.get(meta, id)
    if (known && known[STATE].status !== 'stub') return Promise.resolve(known[STATE].status === 'detached' ? undefined : known)
    return new Promise((resolve, reject) => {
      let ids = this.pending.get(meta)
      if (!ids) this.pending.set(meta, (ids = new Map()))
      const key = meta.id.type.toText(id)
      const list = ids.get(key) ?? []
      list.push({ resolve, reject })
      ids.set(key, list)
      this.schedule()
    })
  }

  async find(meta: EntityMeta, where: Condition, options: SelectOptions): Promise<HasState[]> {
    const rows = await this.executor().read(renderFind(meta, where, options))
    // A locking read returns the rows as they are now: entities already here take their values.
    const entities: HasState[] = []
    for (const row of rows) entities.push(this.uow.hydrate(meta, row, options.lock !== undefined))
    return entities
  }

  /** Reads and locks one row, never batched (the lock is the point), refreshing the entity if it is here. */
  async byIdLocked(meta: EntityMeta, id: unknown, lock: RowLock): Promise<HasState | undefined> {
    const known = this.uow.map.get(meta, id)
    if (known && known[STATE].status === 'detached') return undefined
    const [row] = await this.executor().read(renderLoadByIds(meta, [meta.id.type.toText(id)], lock))
    return row === undefined ? undefined : this.uow.hydrate(meta, row, true)
  }

  async oneToMany(collections: readonly OneToManyCollection[], owners: readonly HasState[]): Promise<void> {
    const first = collections[0]
    if (!first) return
    const meta = first.meta
    const ids = owners.map((o) => o[STATE].meta.id.type.toText(o[STATE].id))
    const rows = await this.executor().read(renderLoadByReference(meta.target, meta.inverse, ids))
    for (const row of rows) this.uow.hydrate(meta.target, row)
    for (const c of collections) c.loaded = true
  }

  async manyToMany(collections: readonly ManyToManyCollection[], owners: readonly HasState[]): Promise<void> {
    const first = collections[0]
    if (!first) return
    const link = first.meta
    const ids = owners.map((o) => link.owner.id.type.toText(o[STATE].id))
    const rows = await this.executor().read(renderLoadLinks(link, ids))
    const byOwner = new Map<string, Set<HasState>>(ids.map((id) => [id, new Set()]))
    for (const row of rows) {
      const owner = link.owner.id.type.toText(link.owner.id.type.fromDb(row[0]))
      byOwner.get(owner)?.add(this.uow.hydrate(link.target, row.slice(1)))
    }
    collections.forEach((c, i) => {
      c.persisted = byOwner.get(ids[i]!) ?? new Set()
    })
  }

  private schedule(): void {
    if (this.scheduled) return
    this.scheduled = true
    // After the current promise jobs too, so loads started in `.then` callbacks join the batch.
    void Promise.resolve().then(() =>
      process.nextTick(() => {
        this.scheduled = false
        const batch = this.pending
        this.pending = new Map()
        for (const [meta, ids] of batch) void this.run(meta, ids)
      }),
    )
  }

  private async run(meta: EntityMeta, waiting: Map<string, Waiting[]>): Promise<void> {
    try {
      const rows = await this.executor().read(renderLoadByIds(meta, [...waiting.keys()]))
      const found = new Map<string, HasState>()
      for (const row of rows) {
        const entity = this.uow.hydrate(meta, row)
        found.set(meta.id.type.toText(entity[STATE].id), entity)
      }
      for (const [key, list] of waiting) for (const w of list) w.resolve(found.get(key))
    } catch (error) {
      for (const list of waiting.values()) for (const w of list) w.reject(error)
    }
  }

  /** Loads one relation of entities of one type: one query, whatever their number. */
  async populate(list: readonly HasState[], relation: string): Promise<void> {
    const meta = list[0]![STATE].meta
    const field = meta.fieldByProp.get(relation)
    if (field?.ref) {
      const targets = list.map((e) => e[STATE].values[relation]).filter((t): t is HasState => !!t && (t as HasState)[STATE].status === 'stub')
      await Promise.all(targets.map((t) => this.byId(t[STATE].meta, t[STATE].id)))
      return
    }
    const persisted = list.filter((e) => e[STATE].id !== undefined && e[STATE].status !== 'new')
    if (meta.oneToMany.some((r) => r.prop === relation)) {
      const pending = persisted.filter((e) => !(this.uow.collection(e, relation) as OneToManyCollection).isLoaded)
      for (const owner of pending) this.uow.changing(owner) // the load marks their collections loaded
      await this.oneToMany(pending.map((e) => this.uow.collection(e, relation) as OneToManyCollection), pending)
      return
    }
    if (meta.manyToMany.some((r) => r.prop === relation)) {
      const pending = persisted.filter((e) => !(this.uow.collection(e, relation) as ManyToManyCollection).isLoaded)
      for (const owner of pending) this.uow.changing(owner)
      await this.manyToMany(pending.map((e) => this.uow.collection(e, relation) as ManyToManyCollection), pending)
      return
    }
    throw new InvalidValueError(meta.name, relation, undefined, 'is not a relation')
  }

  /**
   * Loads every relation of the tree (see pathTree), level by level: the relations of one level
   * together (one round trip), then those of the entities they reached. What is loaded already is
   * not read again.
   */
  async populateTree(list: readonly HasState[], tree: PathTree): Promise<void> {
    let level: { entities: readonly HasState[]; tree: PathTree }[] = list.length > 0 ? [{ entities: list, tree }] : []
    while (level.length > 0) {
      const next: { entities: readonly HasState[]; tree: PathTree }[] = []
      await Promise.all(
        level.flatMap(({ entities, tree }) =>
          [...tree].map(async ([relation, below]) => {
            await this.populate(entities, relation)
            const reached = below.size > 0 ? related(entities, relation) : []
            if (reached.length > 0) next.push({ entities: reached, tree: below })
          }),
        ),
      )
      level = next
    }
  }
}

/** Relations by name, each with the paths that go on from it. */
export type PathTree = Map<string, PathTree>

/**
 * The relations that populate paths of `root` name (`'books.reviews'`, `'books.tags'`), as a tree
 * in which `books` is one node. Every path is checked here, before anything is read: a bad one sends
 * nothing.
 */
export function pathTree(root: EntityMeta, paths: readonly string[]): PathTree {
  const tree: PathTree = new Map()
  for (const path of paths) {
    let meta = root
    let node = tree
    for (const relation of typeof path === 'string' ? path.split('.') : [path]) {
      const target = relationTarget(meta, relation)
      if (!target) throw new InvalidValueError(root.name, String(path), undefined, `${JSON.stringify(relation)} is not a relation of ${meta.name}`)
      let next = node.get(relation)
      if (!next) node.set(relation, (next = new Map()))
      node = next
      meta = target
    }
  }
  return tree
}

/** The entity a relation property of `meta` leads to, or undefined when it is no relation. */
function relationTarget(meta: EntityMeta, relation: string): EntityMeta | undefined {
  return meta.fieldByProp.get(relation)?.ref?.target ?? meta.oneToMany.find((r) => r.prop === relation)?.target ?? meta.manyToMany.find((r) => r.prop === relation)?.target
}

/** The entities that a loaded relation of `entities` holds, each once (none for a collection not loaded). */
function related(entities: readonly HasState[], relation: string): HasState[] {
  const out = new Set<HasState>()
  for (const entity of entities) {
    const state = entity[STATE]
    if (state.meta.fieldByProp.has(relation)) {
      const target = state.values[relation] as HasState | null | undefined
      if (target && target[STATE].status !== 'stub' && target[STATE].status !== 'detached') out.add(target)
      continue
    }
    const collection = state.collections?.get(relation) as { isLoaded: boolean; items: readonly HasState[] } | undefined
    if (collection?.isLoaded) for (const item of collection.items) out.add(item)
  }
  return [...out]
}
