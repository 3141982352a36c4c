import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defineSchema, entity, flushwave, t } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

/**
 * Results count rows per table, keyed by the table's name. A table may be called anything
 * PostgreSQL accepts, names that objects inherit from Object.prototype among them: each must be a
 * count of its own, not a value inherited from the prototype (or the prototype itself).
 */
const schema = defineSchema({
  Ctor: entity('constructor', { id: t.id(), name: t.text() }),
  Proto: entity('__proto__', { id: t.id(), name: t.text() }),
  Own: entity('hasOwnProperty', { id: t.id(), name: t.text() }),
})
let db: TestDatabase<typeof schema.defs>
beforeAll(async () => {
  db = await testDatabase(schema, { name: 'table_names' })
})
afterAll(() => db.close())

/** The expected counts as own properties (a literal's `__proto__: n` would not make one). */
const counts = (n: number): Record<string, number> => Object.fromEntries(['constructor', '__proto__', 'hasOwnProperty'].map((table) => [table, n]))

describe('tables named like Object.prototype properties', () => {
  it('are counted in a flush result, created, updated and deleted', async () => {
    const em = db.orm.em()
    const rows = [em.create('Ctor', { name: 'a' }), em.create('Proto', { name: 'b' }), em.create('Own', { name: 'c' })]
    const created = await em.flush()
    expect(created.inserted).toEqual(counts(1))
    expect(Object.keys(created.inserted).sort()).toEqual(['__proto__', 'constructor', 'hasOwnProperty'])

    for (const row of rows) row.name += '!'
    expect((await em.flush()).updated).toEqual(counts(1))

    for (const row of rows) em.remove(row)
    expect((await em.flush()).deleted).toEqual(counts(1))
  })

  it('are counted in a warm-up', async () => {
    // A Flushwave whose id pool is empty, so that the warm-up fetches ids for every table.
    const warm = await flushwave({ schema, executor: db.orm.executor }).warmUp()
    expect(Object.keys(warm.idsFetched).sort()).toEqual(['__proto__', 'constructor', 'hasOwnProperty'])
    for (const table of ['constructor', '__proto__', 'hasOwnProperty']) expect(warm.idsFetched[table]).toBeGreaterThan(0)
  })
})
