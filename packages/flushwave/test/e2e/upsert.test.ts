import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import { defineSchema, entity, EntityStateError, InvalidValueError, t } from '../../src/index.js'
import { IdentityMap } from '../../src/entities/identity-map.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { ALL_EXECUTORS } from '../support/executors.js'

/**
 * `em.upsert`: an INSERT … ON CONFLICT (key) DO UPDATE … RETURNING in the flush's one pipeline,
 * batched per table; the entity takes the row's id and columns, and joins the identity map.
 */
const schema = defineSchema({
  Customer: entity('customer', { id: t.id(), email: t.text().unique(), name: t.text(), visits: t.integer().default(0), version: t.version() }),
  Cart: entity('cart', { id: t.id(), label: t.text(), lines: t.oneToMany('Line', 'cart') }),
  Line: entity('line', { id: t.id(), cart: t.manyToOne('Cart'), sku: t.text(), quantity: t.integer() }, { unique: [['cart', 'sku']] }),
  Code: entity('code', { id: t.providedId(), value: t.text() }),
  Visit: entity('visit', { id: t.id(), customer: t.manyToOne('Customer') }),
  Slot: entity('slot', { id: t.id(), at: t.timestamptz().unique(), label: t.text() }),
})
let db: TestDatabase<typeof schema.defs>
const writes = () => db.writes().map((q) => q.text)

describe.each(ALL_EXECUTORS)('em.upsert through %s', (executor) => {
  beforeAll(async () => {
    db = await testDatabase(schema, { name: 'upsert', max: 2, executor })
  })
  afterAll(() => db.close())
  beforeEach(async () => {
    await db.sql`truncate visit, line, cart, code, customer, slot`
  })
  const reset = () => void (db.queries.length = 0)

  async function customer(email: string, name: string, visits = 0) {
    const em = db.orm.em()
    const c = em.create('Customer', { email, name, visits })
    await em.flush()
    return c.id
  }

  it('inserts when no row has the key: one statement, one round trip, and the entity has its id', async () => {
    const em = db.orm.em()
    const ann = em.upsert('Customer', { email: 'ann@x', name: 'Ann' }, { onConflict: 'email' })
    expect(em.idOf(ann)).toBeUndefined() // known once the flush is over
    await em.assignIds() // not even then: it is the row's, maybe an existing one's
    expect(em.idOf(ann)).toBeUndefined()
    reset()
    const result = await em.flush()
    expect(result).toMatchObject({ statements: 1, upserted: { customer: 1 }, inserted: {} })
    expect(result.roundTrips).toBeLessThanOrEqual(2) // an id allocation at most
    expect(writes()[0]).toContain('on conflict ("email") do update set "name" = excluded."name", "version" = t."version" + 1 returning t."id"::text')
    expect(await db.sql`select id::int, email, name, visits, version from customer`).toEqual([{ id: ann.id, email: 'ann@x', name: 'Ann', visits: 0, version: 1 }])
    expect(await em.load('Customer', ann.id)).toBe(ann)
  })

  it("updates the row that has the key: the entity takes that row's id and its other columns", async () => {
    const id = await customer('bob@x', 'old name', 5)
    const em = db.orm.em()
    const bob = em.upsert('Customer', { email: 'bob@x', name: 'Bob' }, { onConflict: 'email' })
    await em.flush()
    expect([bob.id, bob.name, bob.visits, bob.version]).toEqual([id, 'Bob', 5, 2])
    expect(await db.sql`select id::int, name, visits, version from customer`).toEqual([{ id, name: 'Bob', visits: 5, version: 2 }])
    // A managed entity now: a change is a plain versioned update.
    bob.visits += 1
    reset()
    await em.flush()
    expect(writes()[0]).toMatch(/^with a as .*update "customer" as t set/)
  })

  it('batches a table: new and existing keys in one statement', async () => {
    await customer('a@x', 'A')
    await customer('b@x', 'B')
    const em = db.orm.em()
    const list = ['a@x', 'b@x', 'c@x'].map((email) => em.upsert('Customer', { email, name: email.toUpperCase() }, { onConflict: 'email' }))
    reset()
    const result = await em.flush()
    expect(writes()).toHaveLength(1)
    expect(result.upserted).toEqual({ customer: 3 })
    expect(new Set(list.map((c) => c.id)).size).toBe(3)
    expect(await db.sql`select email, name from customer order by email`).toEqual([
      { email: 'a@x', name: 'A@X' },
      { email: 'b@x', name: 'B@X' },
      { email: 'c@x', name: 'C@X' },
    ])
  })

  it('two upserts of one key in a flush are one entity and one row; the later values win', async () => {
    const em = db.orm.em()
    const first = em.upsert('Customer', { email: 'dup@x', name: 'first' }, { onConflict: 'email' })
    const second = em.upsert('Customer', { email: 'dup@x', name: 'second', visits: 3 }, { onConflict: 'email' })
    expect(second).toBe(first)
    await em.flush()
    expect(await db.sql`select name, visits from customer`).toEqual([{ name: 'second', visits: 3 }])
  })

  it('an entity this EntityManager holds with the key is returned with the data assigned: an update', async () => {
    const id = await customer('held@x', 'held')
    const em = db.orm.em()
    const held = await em.load('Customer', id)
    expect(em.upsert('Customer', { email: 'held@x', name: 'renamed' }, { onConflict: 'email' })).toBe(held)
    reset()
    await em.flush()
    expect(writes()[0]).toMatch(/update "customer"/)
    expect(await db.sql`select name from customer`).toEqual([{ name: 'renamed' }])
  })

  it('a key over two columns, and a provided id', async () => {
    const em = db.orm.em()
    const cart = em.create('Cart', { label: 'c' })
    em.create('Line', { cart, sku: 'tea', quantity: 1 })
    await em.flush()
    const again = db.orm.em()
    const ref = again.ref('Cart', cart.id)
    const tea = again.upsert('Line', { cart: ref, sku: 'tea', quantity: 4 }, { onConflict: ['sku', 'cart'] })
    const jam = again.upsert('Line', { cart: ref, sku: 'jam', quantity: 2 }, { onConflict: ['cart', 'sku'] })
    again.upsert('Code', { id: 7, value: 'seven' }, { onConflict: 'id' })
    await again.flush()
    again.upsert('Code', { id: 7, value: 'SEVEN' }, { onConflict: 'id' })
    await again.flush()
    expect([tea.quantity, jam.quantity]).toEqual([4, 2])
    expect(await db.sql`select sku, quantity from line order by sku`).toEqual([
      { sku: 'jam', quantity: 2 },
      { sku: 'tea', quantity: 4 },
    ])
    expect(await db.sql`select id::int, value from code`).toEqual([{ id: 7, value: 'SEVEN' }])
  })

  it('rows of the same flush cannot refer to an upserted entity yet: refused before anything is sent', async () => {
    const em = db.orm.em()
    const ann = em.upsert('Customer', { email: 'ref@x', name: 'Ann' }, { onConflict: 'email' })
    const visit = em.create('Visit', { customer: ann })
    reset()
    await expect(em.flush()).rejects.toThrow(/upserted in this flush/)
    expect(db.writes()).toEqual([])
    em.remove(visit)
    await em.flush()
    em.create('Visit', { customer: ann })
    await em.flush()
    expect(await db.sql`select count(*)::int as n from visit`).toEqual([{ n: 1 }])
  })

  it('refuses an upsert or a create of a key an update in the same flush gives up, before anything is sent', async () => {
    await customer('old@x', 'Ann')
    const em = db.orm.em()
    const [ann] = await em.find('Customer', { email: 'old@x' })
    ann!.email = 'new@x'
    const upserted = em.upsert('Customer', { email: 'old@x', name: 'Bob' }, { onConflict: 'email' })
    reset()
    // Sent, the upsert would update Ann's row (inserts run before updates) and the update would then
    // rename it: one row for two entities, and Bob lost.
    await expect(em.flush()).rejects.toThrow(/takes a unique key that Customer#\d+ gives up in this flush/)
    expect(db.writes()).toEqual([])
    em.remove(upserted)
    await em.flush()
    em.upsert('Customer', { email: 'old@x', name: 'Bob' }, { onConflict: 'email' })
    await em.flush()
    expect(await db.sql`select email, name from customer order by email`).toEqual([
      { email: 'new@x', name: 'Ann' },
      { email: 'old@x', name: 'Bob' },
    ])

    ann!.email = 'newer@x'
    const created = em.create('Customer', { email: 'new@x', name: 'Cy' })
    reset()
    await expect(em.flush()).rejects.toThrow(EntityStateError)
    expect(db.writes()).toEqual([])
    em.remove(created)
    await em.flush()
    expect(await db.sql`select email from customer order by email`).toEqual([{ email: 'newer@x' }, { email: 'old@x' }])
  })

  it('a reference this EntityManager held to the row takes it; the upsert object is detached', async () => {
    const id = await customer('stub@x', 'stub')
    const em = db.orm.em()
    const ref = em.ref('Customer', id)
    const upserted = em.upsert('Customer', { email: 'stub@x', name: 'via upsert' }, { onConflict: 'email' })
    await em.flush()
    expect(ref.name).toBe('via upsert')
    expect(() => (upserted.name = 'x')).toThrow(EntityStateError)
  })

  it('meets a row whose reference is removed in the same flush: the row is gone, the upsert detached', async () => {
    const setup = db.orm.em()
    const cart = setup.create('Cart', { label: 'c' })
    const line = setup.create('Line', { cart, sku: 'tea', quantity: 1 })
    await setup.flush()
    const em = db.orm.em()
    const upserted = em.upsert('Line', { cart: em.ref('Cart', cart.id), sku: 'tea', quantity: 9 }, { onConflict: ['cart', 'sku'] })
    em.remove(em.ref('Line', line.id)) // a reference: its key is unknown here, so the upsert is its own entity
    await em.flush()
    expect(await db.sql`select count(*)::int as n from line`).toEqual([{ n: 0 }])
    expect(() => (upserted.quantity = 1)).toThrow(EntityStateError)
  })

  it('finds what it holds by key without walking the type per call, and follows keys that change', async () => {
    const id = await customer('held@x', 'held')
    const em = db.orm.em()
    const held = await em.load('Customer', id)
    const walk = vi.spyOn(IdentityMap.prototype, 'of')
    let upserted: ReturnType<typeof em.upsert<'Customer'>>[] = []
    try {
      upserted = Array.from({ length: 500 }, (_, i) => em.upsert('Customer', { email: `c${i}@x`, name: 'n' }, { onConflict: 'email' }))
      expect(em.upsert('Customer', { email: 'c7@x', name: 'again' }, { onConflict: 'email' })).toBe(upserted[7])
      expect(em.upsert('Customer', { email: 'held@x', name: 'h' }, { onConflict: 'email' })).toBe(held)
      // 502 upserts of one type, nothing else between them: the type was walked once.
      expect(walk.mock.calls.length).toBe(1)
    } finally {
      walk.mockRestore()
    }
    // A key set through a setter moves the entity to it.
    held.email = 'moved@x'
    expect(em.upsert('Customer', { email: 'moved@x', name: 'moved' }, { onConflict: 'email' })).toBe(held)
    const fresh = em.upsert('Customer', { email: 'held@x', name: 'fresh' }, { onConflict: 'email' })
    expect(fresh).not.toBe(held)
    em.remove(fresh) // its INSERT would meet the held row, which moves off that key only later in the flush
    // A create of that type between two upserts is seen.
    const created = em.create('Customer', { email: 'created@x', name: 'c' })
    expect(() => em.upsert('Customer', { email: 'created@x', name: 'x' }, { onConflict: 'email' })).toThrow(/is new: it will be inserted/)
    em.remove(created)
    await em.flush()
    // After the flush the upserted entities hold their rows, and are found by their keys.
    expect(em.upsert('Customer', { email: 'c3@x', name: 'after' }, { onConflict: 'email' })).toBe(upserted[3])
    expect(em.upsert('Customer', { email: 'moved@x', name: 'after' }, { onConflict: 'email' })).toBe(held)
    expect(await db.sql`select count(*)::int as n from customer`).toEqual([{ n: 501 }])
  })

  it('follows a Date key changed in place, past the setters', async () => {
    const em = db.orm.em()
    const at = new Date('2026-01-01T10:00:00Z')
    const slot = em.upsert('Slot', { at, label: 'ten' }, { onConflict: 'at' })
    expect(em.upsert('Slot', { at: new Date('2026-01-01T10:00:00Z'), label: 'TEN' }, { onConflict: 'at' })).toBe(slot)
    at.setUTCHours(11)
    expect(em.upsert('Slot', { at: new Date('2026-01-01T11:00:00Z'), label: 'eleven' }, { onConflict: 'at' })).toBe(slot)
    await em.flush()
    expect(await db.sql`select label, "at" = '2026-01-01T11:00:00Z' as moved from slot`).toEqual([{ label: 'eleven', moved: true }])
  })

  it('refuses a key that is not unique, a missing key value, and keys already in use here', async () => {
    const em = db.orm.em()
    expect(() => em.upsert('Customer', { email: 'x@x', name: 'x' }, { onConflict: 'name' })).toThrow(InvalidValueError)
    expect(() => em.upsert('Customer', { email: 'x@x', name: 'x' }, { onConflict: 'id' as never })).toThrow(/upsert by a unique key/)
    expect(() => em.upsert('Customer', { name: 'x' } as never, { onConflict: 'email' })).toThrow(/is the upsert's key/)
    const pending = em.upsert('Customer', { email: 'key@x', name: 'x' }, { onConflict: 'email' })
    expect(() => (pending.email = 'other@x')).toThrow(/is the key of its pending upsert/)
    em.remove(pending)
    em.create('Customer', { email: 'new@x', name: 'new' })
    expect(() => em.upsert('Customer', { email: 'new@x', name: 'x' }, { onConflict: 'email' })).toThrow(/is new: it will be inserted/)
    const id = await customer('gone@x', 'gone')
    em.remove(await em.load('Customer', id))
    expect(() => em.upsert('Customer', { email: 'gone@x', name: 'x' }, { onConflict: 'email' })).toThrow(/is removed/)
  })
})
