import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { NotLoadedError } from '../../src/index.js'
import { ManyToManyCollection } from '../../src/entities/many-to-many.js'
import { OneToManyCollection } from '../../src/entities/one-to-many.js'
import { bookstore } from '../support/bookstore.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

/** A collection answers has() from its sets, in agreement with `items`, without making them. */
describe("a collection's has()", () => {
  let db: TestDatabase<typeof bookstore.defs>
  beforeAll(async () => {
    db = await testDatabase(bookstore, { name: 'collection_has' })
  })
  afterAll(() => db.close())

  it('many-to-many: agrees with items for linked, unlinked, added, re-added, removed and other entities, without making items', async () => {
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

  it('one-to-many: agrees with items for kept, moved out, moved in, moved back, removed, created and other books, without making items', async () => {
    const setup = db.orm.em()
    const author = setup.create('Author', { name: 'one-to-many' })
    const other = setup.create('Author', { name: 'elsewhere' })
    const names = ['kept', 'out', 'in', 'back', 'gone', 'made', 'other']
    for (const name of ['kept', 'out', 'back', 'gone']) setup.create('Book', { title: `o2m-${name}`, author })
    for (const name of ['in', 'other']) setup.create('Book', { title: `o2m-${name}`, author: other })
    await setup.flush()

    const em = db.orm.em()
    const [mine, theirs] = [await em.load('Author', author.id), await em.load('Author', other.id)]
    await em.populate(mine, 'books')
    const books: Record<string, ReturnType<typeof em.create<'Book'>>> = {}
    for (const name of names.filter((n) => n !== 'made')) books[name] = (await em.find('Book', { title: `o2m-${name}` }))[0]!
    books.out!.author = theirs
    books.in!.author = mine
    books.back!.author = theirs
    books.back!.author = mine
    em.remove(books.gone!)
    books.made = em.create('Book', { title: 'o2m-made', author: mine })
    const made = vi.spyOn(OneToManyCollection.prototype as unknown as { current(): unknown }, 'current')
    const has = names.map((name) => mine.books.has(books[name]!))
    expect(made).not.toHaveBeenCalled()
    made.mockRestore()
    expect(has).toEqual(names.map((name) => mine.books.items.includes(books[name]!)))
    expect(has).toEqual([true, false, true, true, false, true, false])
  })

  it('throws before it is loaded, as items does', async () => {
    const em = db.orm.em()
    const [book] = await em.find('Book', { title: 'b' })
    const tag = em.create('Tag', { name: 'unloaded' })
    expect(() => book!.tags.has(tag)).toThrow(NotLoadedError)
    const author = await em.load('Author', book!.author.id)
    expect(() => author.books.has(book!)).toThrow(NotLoadedError)
  })
})
