import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { defineSchema, entity, t, UniqueViolationError, type EntityManager } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { ALL_EXECUTORS } from '../support/executors.js'

/**
 * Replace by key: a flush that removes an entity and writes another with the same unique value (or
 * the same provided id) deletes the old row first, in the same pipeline, when nothing written
 * needs it. Each case asserts the statements' order and the rows.
 */
const schema = defineSchema({
  Order: entity('order', { id: t.id(), number: t.text().unique(), lines: t.oneToMany('Line', 'order') }),
  Line: entity('order_line', { id: t.id(), order: t.manyToOne('Order'), sku: t.text(), quantity: t.integer() }, { unique: [['order', 'sku']] }),
  Page: entity('page', { id: t.id(), slug: t.text().unique(), title: t.text(), comments: t.oneToMany('Comment', 'page'), codes: t.manyToMany('Code') }),
  Comment: entity('comment', { id: t.id(), page: t.manyToOne('Page'), body: t.text() }),
  Code: entity('code', { id: t.providedId(), value: t.text() }),
})
type Em = EntityManager<typeof schema.defs>
let db: TestDatabase<typeof schema.defs>

/** The kind and table of each write statement since the last reset, e.g. `delete order_line`. */
const written = () =>
  db.writes().map((q) => {
    // The statement's own verb and table (an update or delete by ids starts with its locking CTE).
    const m = /(insert into|update|delete from) "([a-z_]+)"/.exec(q.text)
    if (m) return `${m[1]!.split(' ')[0]} ${m[2]}`
    // Rows locked in id order before updates that go pass by pass.
    const lock = /^select from .* join "([a-z_]+)" .* for no key update of x$/.exec(q.text)
    return lock ? `lock ${lock[1]}` : q.text.slice(0, 30)
  })

describe.each(ALL_EXECUTORS)('replace by key through %s', (executor) => {
  beforeAll(async () => {
    db = await testDatabase(schema, { name: 'replace', max: 2, executor })
  })
  afterAll(() => db.close())
  beforeEach(async () => {
    await db.sql`truncate page_code, comment, page, code, order_line, "order"`
  })
  const reset = () => void (db.queries.length = 0)

  it("replaces an order's lines (a key over two columns): deletes first, one pipeline", async () => {
    const setup = db.orm.em()
    const order = setup.create('Order', { number: 'A-1' })
    for (const sku of ['tea', 'jam']) setup.create('Line', { order, sku, quantity: 1 })
    await setup.flush()

    const em: Em = db.orm.em()
    const loaded = await em.load('Order', order.id)
    await em.populate(loaded, 'lines')
    for (const line of loaded.lines.items) em.remove(line)
    for (const [sku, quantity] of [['tea', 3], ['jam', 2], ['oil', 1]] as const) em.create('Line', { order: loaded, sku, quantity })
    reset()
    const result = await em.flush()
    expect(written()).toEqual(['delete order_line', 'insert order_line'])
    expect(result).toMatchObject({ waves: 1, inserted: { order_line: 3 }, deleted: { order_line: 2 } })
    expect(await db.sql`select sku, quantity from order_line order by sku`).toEqual([
      { sku: 'jam', quantity: 2 },
      { sku: 'oil', quantity: 1 },
      { sku: 'tea', quantity: 3 },
    ])
    expect(loaded.lines.items.map((l) => l.sku).sort()).toEqual(['jam', 'oil', 'tea'])
  })

  it('re-slugs: a new page takes the slug of a removed one, and an update may take it too', async () => {
    const setup = db.orm.em()
    const [home, about] = [setup.create('Page', { slug: 'home', title: 'Home' }), setup.create('Page', { slug: 'about', title: 'About' })]
    await setup.flush()

    const em = db.orm.em()
    const [oldHome, oldAbout] = await Promise.all([em.load('Page', home.id), em.load('Page', about.id)])
    em.remove(oldHome)
    const newHome = em.create('Page', { slug: 'home', title: 'Home, again' })
    const renamed = em.create('Page', { slug: 'contact', title: 'Contact' })
    em.remove(oldAbout)
    renamed.slug = 'about' // still new: an insert that takes the removed page's slug
    reset()
    await em.flush()
    expect(written()).toEqual(['delete page_code', 'delete page', 'insert page'])
    expect(await db.sql`select slug, title from page order by slug`).toEqual([
      { slug: 'about', title: 'Contact' },
      { slug: 'home', title: 'Home, again' },
    ])
    expect(em.idOf(newHome)).not.toBe(home.id)
  })

  it('re-creates an entity with the same provided id, and its links with it', async () => {
    const setup = db.orm.em()
    const page = setup.create('Page', { slug: 'p', title: 'P' })
    page.codes.add(setup.create('Code', { id: 7, value: 'old' }))
    await setup.flush()

    const em = db.orm.em()
    const [code, loadedPage] = await Promise.all([em.load('Code', 7), em.load('Page', page.id)])
    em.remove(code) // its link goes with it…
    const again = em.create('Code', { id: 7, value: 'new' })
    loadedPage.codes.add(again) // …and is made again, to the new row
    expect(await em.load('Code', 7)).toBe(again)
    reset()
    await em.flush()
    expect(written()).toEqual(['delete page_code', 'delete code', 'insert code', 'insert page_code'])
    expect(await db.sql`select id::int, value from code`).toEqual([{ id: 7, value: 'new' }])
    expect(await db.sql`select code_id::int as code from page_code`).toEqual([{ code: 7 }])
  })

  it('keeps the delete last when a written row still needs the old one, and the clash fails typed, nothing committed', async () => {
    const setup = db.orm.em()
    const page = setup.create('Page', { slug: 'old', title: 'Old' })
    setup.create('Comment', { page, body: 'first' })
    await setup.flush()

    const em = db.orm.em()
    const oldPage = await em.load('Page', page.id)
    await em.populate(oldPage, 'comments')
    const [comment] = oldPage.comments.items
    em.remove(oldPage)
    const newPage = em.create('Page', { slug: 'old', title: 'New' })
    comment!.page = newPage // moving away from the old page: must run before its delete, after the insert
    reset()
    const error = await em.flush().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(UniqueViolationError)
    expect(error).toMatchObject({ constraint: 'page_slug_key' })
    expect(written().slice(0, 1)).toEqual(['insert page'])
    expect(await db.sql`select slug, title from page`).toEqual([{ slug: 'old', title: 'Old' }])
    // What the application does then: two flushes (or a different slug).
    newPage.slug = 'new'
    await em.flush()
    newPage.slug = 'old'
    await expect(em.flush()).resolves.toMatchObject({ updated: { page: 1 } })
    expect(await db.sql`select p.slug, c.body from comment c join page p on p.id = c.page_id`).toEqual([{ slug: 'old', body: 'first' }])
  })

  it('passes slugs on along a chain, whatever the ids: the row giving one up is updated first', async () => {
    // PostgreSQL checks a unique key row by row: in one UPDATE the chain failed when the row taking
    // a slug came before the row giving it up. Each link of the chain is an UPDATE of its own, after
    // a statement that locks all four rows in id order (lock-order.test.ts).
    for (const lowFirst of [true, false]) {
      await db.sql`truncate page_code, comment, page`
      const setup = db.orm.em()
      const pages = ['a', 'b', 'c', 'd'].map((slug) => setup.create('Page', { slug, title: slug }))
      await setup.flush()
      const em = db.orm.em()
      const loaded = await Promise.all(pages.map((p) => em.load('Page', p.id)))
      // lowFirst: each page takes the slug of the page after it (a lower id takes from a higher one).
      const chain = lowFirst ? loaded : [...loaded].reverse()
      chain.forEach((page, i) => (page.slug = chain[i + 1]?.slug ?? 'e'))
      reset()
      const result = await em.flush()
      expect(written()).toEqual(['lock page', 'update page', 'update page', 'update page', 'update page'])
      expect(result).toMatchObject({ updated: { page: 4 }, statements: 5, roundTrips: 1 })
      const rows = await db.sql`select title, slug from page order by title`
      expect(rows.map((r) => `${r.title}:${r.slug}`)).toEqual(lowFirst ? ['a:b', 'b:c', 'c:d', 'd:e'] : ['a:e', 'b:a', 'c:b', 'd:c'])
    }
  })

  it('keeps a swap in one UPDATE, which the server refuses: typed, nothing committed', async () => {
    const setup = db.orm.em()
    const [x, y] = ['x', 'y'].map((slug) => setup.create('Page', { slug, title: slug }))
    await setup.flush()
    const em = db.orm.em()
    const [lx, ly] = [await em.load('Page', x!.id), await em.load('Page', y!.id)]
    lx.slug = 'y'
    ly.slug = 'x'
    reset()
    await expect(em.flush()).rejects.toBeInstanceOf(UniqueViolationError)
    expect(written()).toEqual(['update page'])
    expect(await db.sql`select title, slug from page order by title`).toEqual([
      { title: 'x', slug: 'x' },
      { title: 'y', slug: 'y' },
    ])
  })
})
