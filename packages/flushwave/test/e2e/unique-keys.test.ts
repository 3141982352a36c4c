import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { defineSchema, entity, t, UniqueViolationError } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { ALL_EXECUTORS } from '../support/executors.js'

const shop = defineSchema({
  Order: entity('order', { id: t.id(), number: t.text().unique(), lines: t.oneToMany('Line', 'order') }),
  Line: entity('order_line', { id: t.id(), order: t.manyToOne('Order'), sku: t.text(), quantity: t.integer() }, { unique: [['order', 'sku']] }),
})
let db: TestDatabase<typeof shop.defs>

describe.each(ALL_EXECUTORS)('unique keys over several columns through %s', (executor) => {
  beforeAll(async () => {
    db = await testDatabase(shop, { name: 'uniquekeys', max: 2, executor })
  })
  afterAll(() => db.close())
  beforeEach(() => db.sql`truncate order_line, "order"`)

  it('are created by createTablesSql, hold per pair, and a clash is a UniqueViolationError naming the key', async () => {
    const em = db.orm.em()
    const [a, b] = [em.create('Order', { number: 'A-1' }), em.create('Order', { number: 'B-1' })]
    em.create('Line', { order: a, sku: 'tea', quantity: 1 })
    em.create('Line', { order: b, sku: 'tea', quantity: 1 }) // the same sku on another order: allowed
    await em.flush()
    const clash = em.create('Line', { order: a, sku: 'tea', quantity: 2 })
    const error = await em.flush().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(UniqueViolationError)
    expect(error).toMatchObject({ table: 'order_line', entity: 'Line', constraint: 'order_line_order_id_sku_key' })
    expect(await db.sql`select count(*)::int as n from order_line`).toEqual([{ n: 2 }])
    clash.sku = 'coffee'
    await em.flush()
    expect(await db.sql`select sku, quantity from order_line where order_id = ${a.id} order by sku`).toEqual([
      { sku: 'coffee', quantity: 2 },
      { sku: 'tea', quantity: 1 },
    ])
  })
})
