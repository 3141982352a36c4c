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
    expect(warm.connections).toBe(2)
    expect(warm.prepared).toBe(2 * shapes.length)
    expect(await db.orm.warmUp()).toMatchObject({ connections: 2, prepared: 0 })
    // Nothing was written.
    expect(await db.sql`select (select count(*) from author)::int + (select count(*) from book_tag)::int as n`).toEqual([{ n: 0 }])

    // Two flushes at once use both connections; neither describes anything.
    const flushes = [0, 1].map(async (i) => {
      const em = db.orm.em()
      const author = em.create('Author', { name: `warm ${i}` })
      const book = em.create('Book', { title: 't', author })
      em.create('Review', { stars: 5, book })
      book.tags.add(em.create('Tag', { name: `warm tag ${i}` }))
      const created = await em.flush()
      author.name = 'renamed'
      const updated = await em.flush()
      return [created, updated]
    })
    for (const [created, updated] of await Promise.all(flushes)) {
      expect(created).toMatchObject({ coldStatements: 0 })
      expect(updated).toMatchObject({ coldStatements: 0, roundTrips: 1 })
    }
  })
})
