import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { allShapes } from '../../src/sql/shapes.js'
import { bookstore } from '../support/bookstore.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

let db: TestDatabase<typeof bookstore.defs>
beforeAll(async () => {
  db = await testDatabase(bookstore, { name: 'warm', max: 2 })
})
afterAll(() => db.close())

describe('warmUp', () => {
  it('prepares every shape on every pooled connection, so first flushes are warm', async () => {
    const shapes = allShapes(bookstore)
    expect(shapes.map((s) => s.text.split(' ').slice(0, 3).join(' '))).toContain('insert into "book_tag"')
    const warm = await db.orm.warmUp()
    // On each connection, every shape and the two forms of the ledger insert that follows BEGIN.
    expect(warm).toMatchObject({ connections: 2, prepared: 2 * (shapes.length + 2), prepares: true, roundTrips: 1 })
    // A spare block for every sequence-id table, fetched on the same wave.
    expect(warm.idsFetched).toEqual({ author: 257, book: 257, review: 257, tag: 257 })
    // Again: nothing new to prepare, and the id pool is still full.
    expect(await db.orm.warmUp()).toMatchObject({ connections: 2, prepared: 0, roundTrips: 1, idsFetched: {} })
    // Nothing was written.
    expect(await db.sql`select (select count(*) from author)::int + (select count(*) from book_tag)::int as n`).toEqual([{ n: 0 }])

    // Two flushes at once use both connections; neither describes anything.
    const flushes = [0, 1].map(async (i) => {
      const em = db.orm.em()
      const author = em.create('Author', { name: `warm ${i}` })
      const book = em.create('Book', { title: 't', author })
      const reviews = [5, 4].map((stars) => em.create('Review', { stars, book }))
      book.tags.add(em.create('Tag', { name: `warm tag ${i}` }))
      const created = await em.flush()
      author.name = 'renamed'
      const updated = await em.flush()
      // Several rows, one column each: the multi-row form that names that column alone.
      for (const review of reviews) review.stars = 1
      const bulk = await em.flush()
      return [created, updated, bulk]
    })
    for (const [created, updated, bulk] of await Promise.all(flushes)) {
      // No id allocation either: the ids come from the block warmUp fetched.
      expect(created).toMatchObject({ coldStatements: 0, roundTrips: 1 })
      expect(created!.plan.preparation).toEqual([])
      expect(updated).toMatchObject({ coldStatements: 0, roundTrips: 1 })
      expect(bulk).toMatchObject({ coldStatements: 0, roundTrips: 1, updated: { review: 2 } })
    }
  })

  it('with prepare: false (poolers) says it prepared nothing, and still opens the connections and fills the id pool', async () => {
    const unprepared = await testDatabase(bookstore, { name: 'warm_unprepared', max: 2, prepare: false })
    try {
      const orm = unprepared.orm
      const warm = await orm.warmUp()
      expect(warm).toMatchObject({ connections: 2, prepares: false, prepared: 0, roundTrips: 1 })
      expect(warm.idsFetched).toEqual({ author: 257, book: 257, review: 257, tag: 257 })
      // Unnamed statements, each parsed again, but none waits on a describe: still one round trip.
      const em = orm.em()
      em.create('Review', { stars: 1, book: em.create('Book', { title: 'unprepared', author: em.create('Author', { name: 'unprepared' }) }) })
      const result = await em.flush()
      expect(result).toMatchObject({ statements: 3, roundTrips: 1 })
      expect(result.plan.preparation).toEqual([])
    } finally {
      await unprepared.close()
    }
  })
})
