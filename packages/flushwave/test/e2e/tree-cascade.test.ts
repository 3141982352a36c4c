import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { defineSchema, entity, EntityStateError, flushwave, OptimisticLockError, t, type EntityManager } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { ALL_EXECUTORS } from '../support/executors.js'

/**
 * Self-references that cascade: deleting a node deletes the tree below it, planned by Flushwave
 * (a recursive subquery, in the same pipeline) with the tree's children in other tables and its
 * links, and reflected in the identity map. The database's foreign keys are made plain (no ON
 * DELETE action) before the tests: any row Flushwave forgot would make the flush fail.
 */
const schema = defineSchema({
  Shop: entity('shop', { id: t.id(), name: t.text(), categories: t.oneToMany('Category', 'shop') }),
  Category: entity('category', {
    id: t.id(),
    name: t.text(),
    shop: t.manyToOne('Shop').onDelete('cascade'),
    parent: t.manyToOne('Category').nullable().onDelete('cascade'),
    children: t.oneToMany('Category', 'parent'),
    products: t.oneToMany('Product', 'category'),
    labels: t.manyToMany('Label'),
  }),
  Product: entity('product', { id: t.id(), name: t.text(), category: t.manyToOne('Category').onDelete('cascade') }),
  Label: entity('label', { id: t.id(), name: t.text() }),
  Folder: entity('folder', { id: t.id(), name: t.text(), parent: t.manyToOne('Folder').nullable().onDelete('cascade'), version: t.version() }),
  Person: entity('person', { id: t.id(), name: t.text(), mentor: t.manyToOne('Person').nullable().onDelete('set null') }),
  /** A self-reference with no ON DELETE action: children must go first. */
  Step: entity('step', { id: t.id(), name: t.text(), after: t.manyToOne('Step').nullable() }),
})
type Em = EntityManager<typeof schema.defs>
let db: TestDatabase<typeof schema.defs>

const written = () =>
  db.writes().map((q) => {
    const m = /^(?:with .*?\) )?(insert into|update|delete from) "?([a-z_]+)"?/.exec(q.text)
    return m ? `${m[1]!.split(' ')[0]} ${m[2]}` : q.text.slice(0, 40)
  })
const names = async (table: string) => (await db.sql.unsafe(`select name from ${table} order by name`)).map((r) => r.name as string)

describe.each(ALL_EXECUTORS)('cascading trees through %s', (executor) => {
  beforeAll(async () => {
    db = await testDatabase(schema, { name: 'tree_cascade', max: 2, executor })
    // Plain foreign keys: only what Flushwave deletes (or unlinks) itself is gone.
    await db.sql.unsafe(`do $$ declare r record; begin
      for r in select conrelid::regclass as tbl, conname, pg_get_constraintdef(oid) as def from pg_constraint
               where contype = 'f' and connamespace = current_schema()::regnamespace loop
        execute format('alter table %s drop constraint %I', r.tbl, r.conname);
        execute format('alter table %s add constraint %I %s', r.tbl, r.conname, regexp_replace(r.def, ' ON DELETE (CASCADE|SET NULL)', ''));
      end loop; end $$`)
  })
  afterAll(() => db.close())
  beforeEach(async () => {
    await db.sql`truncate category_label, product, label, category, shop, folder, person, step`
  })
  const reset = () => void (db.queries.length = 0)

  /** shop → A → B → C → D, A → E; products on B and D; C has a label. Returns ids by name. */
  async function tree() {
    const em = db.orm.em()
    const shop = em.create('Shop', { name: 'shop' })
    const node = (name: string, parent: unknown) => em.create('Category', { name, shop, parent: parent as never })
    const a = node('A', null)
    const b = node('B', a)
    const c = node('C', b)
    const d = node('D', c)
    const e = node('E', a)
    em.create('Product', { name: 'on B', category: b })
    em.create('Product', { name: 'on D', category: d })
    c.labels.add(em.create('Label', { name: 'red' }))
    await em.flush()
    return { shop: shop.id, a: a.id, b: b.id, c: c.id, d: d.id, e: e.id }
  }

  it('deletes the tree below a node with its products and links, children first, in one pipeline', async () => {
    const ids = await tree()
    const em: Em = db.orm.em()
    const [a, c] = await Promise.all([em.load('Category', ids.a), em.load('Category', ids.c)])
    const product = (await em.find('Product', { category: ids.d }))[0]!
    em.remove(a)
    reset()
    const result = await em.flush()
    expect(result.roundTrips).toBe(1)
    expect(written()).toEqual(['delete product', 'delete category_label', 'delete product', 'delete category_label', 'delete category'])
    expect(db.writes().filter((q) => q.text.includes('with recursive'))).toHaveLength(3)
    expect(await names('category')).toEqual([])
    expect(await names('product')).toEqual([])
    expect(await db.sql`select count(*)::int as n from category_label`).toEqual([{ n: 0 }])
    expect(await names('label')).toEqual(['red'])
    // Loaded rows of the tree and their children are gone from the identity map too.
    for (const gone of [c, product]) expect(() => ((gone as { name: string }).name = 'x')).toThrow(EntityStateError)
    expect(await em.tryLoad('Category', ids.c)).toBeUndefined()
  })

  it('removes a node and one deep below it, though not the one between', async () => {
    const ids = await tree()
    const em = db.orm.em()
    const [b, d] = await Promise.all([em.load('Category', ids.b), em.load('Category', ids.d)])
    em.remove(d)
    em.remove(b)
    await em.flush()
    expect(await names('category')).toEqual(['A', 'E'])
    expect(await names('product')).toEqual([])
  })

  it('deleting a parent in another table reaches the trees of its rows, across parents', async () => {
    const ids = await tree()
    const em = db.orm.em()
    const other = em.create('Shop', { name: 'other' })
    // A category of another shop under C: it goes with C's tree.
    em.create('Category', { name: 'F', shop: other, parent: em.ref('Category', ids.c) })
    em.create('Category', { name: 'G', shop: other, parent: null })
    await em.flush()
    em.remove(em.ref('Shop', ids.shop))
    await em.flush()
    expect(await names('category')).toEqual(['G'])
    expect(await names('shop')).toEqual(['other'])
  })

  it('checks the versions of removed rows, not of the rows below them', async () => {
    const em = db.orm.em()
    const root = em.create('Folder', { name: 'root', parent: null })
    const mid = em.create('Folder', { name: 'mid', parent: root })
    em.create('Folder', { name: 'leaf', parent: mid })
    await em.flush()
    await db.sql`update folder set version = version + 1 where name = 'leaf'` // below: not checked
    em.remove(root)
    const result = await em.flush()
    expect(result.deleted).toEqual({ folder: 3 }) // the server's count: the tree below too
    expect(await names('folder')).toEqual([])

    const again = db.orm.em()
    const top = again.create('Folder', { name: 'top', parent: null })
    again.create('Folder', { name: 'under', parent: top })
    await again.flush()
    await db.sql`update folder set version = version + 1 where name = 'top'`
    again.remove(top)
    await expect(again.flush()).rejects.toBeInstanceOf(OptimisticLockError)
    expect(await names('folder')).toEqual(['top', 'under'])
  })

  it("'set null' on a self-reference unlinks the children, in the database and in memory", async () => {
    const em = db.orm.em()
    const mentor = em.create('Person', { name: 'mentor', mentor: null })
    const [x, y] = [em.create('Person', { name: 'x', mentor }), em.create('Person', { name: 'y', mentor })]
    await em.flush()
    const other = db.orm.em()
    const loaded = await other.load('Person', x.id)
    other.remove(other.ref('Person', mentor.id))
    reset()
    await other.flush()
    expect(written()).toEqual(['update person', 'delete person'])
    expect(loaded.mentor).toBeNull()
    expect(await db.sql`select name, mentor_id from person order by name`).toEqual([
      { name: 'x', mentor_id: null },
      { name: 'y', mentor_id: null },
    ])
    void y
  })

  it('a removed tree larger than one statement deletes in order, children before their parents', async () => {
    const setup = db.orm.em()
    const shop = setup.create('Shop', { name: 'big' })
    let parent: unknown = null
    const chain = Array.from({ length: 35 }, (_, i) => (parent = setup.create('Category', { name: `n${String(i).padStart(2, '0')}`, shop, parent: parent as never })))
    await setup.flush()
    const orm = flushwave({ schema, executor: db.orm.executor, maxRowsPerStatement: 10 })
    const em = orm.em()
    // Every node removed, in an order that puts parents in earlier chunks than their children.
    for (const node of chain) em.remove(await em.load('Category', (node as { id: number }).id))
    await em.flush()
    expect(await names('category')).toEqual([])
  })

  for (const kind of ['Step', 'Folder'] as const) {
    it(`a removed ${kind === 'Step' ? 'chain with no ON DELETE action' : 'versioned tree'} split into statements goes children first`, async () => {
      // Step: a parent in an earlier chunk than its child fails its foreign key. Folder: an earlier
      // chunk's tree would take rows of a later chunk, whose version check would then fail.
      const setup = db.orm.em()
      let previous: unknown = null
      const chain = Array.from({ length: 35 }, (_, i) => {
        const name = `n${String(i).padStart(2, '0')}`
        previous = kind === 'Step' ? setup.create('Step', { name, after: previous as never }) : setup.create('Folder', { name, parent: previous as never })
        return previous as { id: number }
      })
      await setup.flush()
      const orm = flushwave({ schema, executor: db.orm.executor, maxRowsPerStatement: 10 })
      const em = orm.em()
      const loaded = await em.find(kind, {}, { orderBy: { id: 'asc' } }) // parents first
      expect(loaded).toHaveLength(chain.length)
      for (const row of loaded) em.remove(row as never)
      const result = await em.flush()
      expect(result.statements).toBeGreaterThanOrEqual(4)
      expect(await names(kind.toLowerCase())).toEqual([])
    })
  }
})
