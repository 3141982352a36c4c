import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { NotLoadedError } from '../../src/index.js'
import { ManyToManyCollection } from '../../src/unit-of-work/many-to-many.js'
import { bookstore } from '../support/bookstore.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

/** A many-to-many collection answers has() from its sets, in agreement with `items`, without making them. */
describe("a many-to-many collection's has()", () => {
  let db: TestDatabase<typeof bookstore.defs>
  beforeAll(async () => {
    db = await testDatabase(bookstore, { name: 'collection_has' })
  })
  afterAll(() => db.close())

  it('agrees with items for linked, unlinked, added, re-added, removed and other entities, without making items', async () => {
    const setup = db.orm.em()
    const author = setup.create('Author', { name: 'a' })
    const book = setup.create('Book', { title: 'b', author })
    const names = ['kept', 'unlinked', 'relinked', 'gone', 'added', 'other']
    for (const name of names.slice(0, 4)) book.tags.add(setup.create('Tag', { name: `${name}-${book.title}` }))
    for (const name of names.slice(4)) setup.create('Tag', { name: `${name}-${book.title}` })
    await setup.flush()

    const em = db.orm.em()
    const loaded = await em.load('Book', book.id)
    await em.populate(loaded, 'tags')
    const tags = Object.fromEntries(await Promise.all(names.map(async (name) => [name, (await em.find('Tag', { name: `${name}-b` }))[0]!] as const)))
    loaded.tags.remove(tags.unlinked!)
    loaded.tags.remove(tags.relinked!)
    loaded.tags.add(tags.relinked!)
    em.remove(tags.gone!)
    loaded.tags.add(tags.added!)
    const made = vi.spyOn(ManyToManyCollection.prototype as unknown as { current(): unknown }, 'current')
    const has = names.map((name) => loaded.tags.has(tags[name]!))
    expect(made).not.toHaveBeenCalled()
    made.mockRestore()
    expect(has).toEqual(names.map((name) => loaded.tags.items.includes(tags[name]!)))
    expect(has).toEqual([true, false, true, false, true, false])
  })

  it('throws before it is loaded, as items does', async () => {
    const em = db.orm.em()
    const [book] = await em.find('Book', { title: 'b' })
    const tag = em.create('Tag', { name: 'unloaded' })
    expect(() => book!.tags.has(tag)).toThrow(NotLoadedError)
  })
})
