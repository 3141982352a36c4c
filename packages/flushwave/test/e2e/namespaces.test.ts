/**
 * Tables in several PostgreSQL schemas (namespaces), on every executor: entities in two named
 * schemas and one on the search path, a table name used in two schemas, an enum in a schema,
 * references and a join table across schemas. Every statement names the schema, so the search
 * path does not matter; createTablesSql creates the schemas, and checkSchema checks them.
 * Each executor's run uses schema names of its own (the test database is shared by parallel files).
 */
import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defineSchema, entity, t } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { ALL_EXECUTORS } from '../support/executors.js'

function schemaIn(billing: string, crm: string) {
  return defineSchema({
    Customer: entity('customer', { id: t.id(), name: t.text(), invoices: t.oneToMany('Invoice', 'customer'), notes: t.oneToMany('CustomerNote', 'customer') }, { schema: crm }),
    CustomerNote: entity('note', { id: t.id(), text: t.text(), customer: t.manyToOne('Customer').onDelete('cascade') }, { schema: crm }),
    Invoice: entity(
      'invoice',
      {
        id: t.id(),
        total: t.numeric(),
        status: t.enum('status', ['open', 'paid'], { schema: billing }),
        customer: t.manyToOne('Customer'),
        notes: t.oneToMany('InvoiceNote', 'invoice'),
        tags: t.manyToMany('Tag'),
      },
      { schema: billing },
    ),
    InvoiceNote: entity('note', { id: t.id(), text: t.text(), invoice: t.manyToOne('Invoice').onDelete('cascade') }, { schema: billing }),
    Tag: entity('tag', { id: t.id(), name: t.text().unique() }),
  })
}

describe.each(ALL_EXECUTORS)('tables in PostgreSQL schemas on %s', (executor) => {
  const suffix = randomBytes(3).toString('hex')
  const billing = `billing_${suffix}`
  const crm = `crm ${suffix}` // a name that must be quoted
  const schema = schemaIn(billing, crm)
  let db: TestDatabase<typeof schema.defs>
  beforeAll(async () => {
    db = await testDatabase(schema, { name: 'namespaces', executor })
  })
  afterAll(async () => {
    await db.sql.unsafe(`drop schema if exists "${billing}" cascade; drop schema if exists "${crm}" cascade`)
    await db.close()
  })

  it('createTablesSql made every table in its schema, and checkSchema finds them', async () => {
    const rows = await db.sql`select n.nspname as schema, c.relname as table from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.relkind = 'r' and n.nspname in (${billing}, ${crm}) order by 1, 2`
    expect(rows.map((r) => `${r.schema}.${r.table}`)).toEqual([`${billing}.invoice`, `${billing}.invoice_tag`, `${billing}.note`, `${crm}.customer`, `${crm}.note`])
    expect(await db.orm.checkSchema()).toEqual([])
  })

  it('writes, reads, filters across schemas, populates, updates and deletes with its cascade', async () => {
    const em = db.orm.em()
    const ada = em.create('Customer', { name: 'Ada' })
    em.create('CustomerNote', { text: 'customer note', customer: ada })
    const invoice = em.create('Invoice', { total: '12.50', status: 'open', customer: ada })
    em.create('InvoiceNote', { text: 'invoice note', invoice })
    invoice.tags.add(em.create('Tag', { name: 'urgent' }))
    const created = await em.flush()
    expect(created.inserted).toEqual({ [`${crm}.customer`]: 1, [`${crm}.note`]: 1, [`${billing}.invoice`]: 1, [`${billing}.note`]: 1, tag: 1, [`${billing}.invoice_tag`]: 1 })
    expect(created.roundTrips).toBeLessThanOrEqual(2)

    const em2 = db.orm.em()
    const found = await em2.find('Invoice', { customer: { name: 'Ada' }, tags: { some: { name: 'urgent' } }, notes: { some: { text: 'invoice note' } } }, { populate: ['customer.notes', 'tags'] })
    expect(found.map((i) => i.total)).toEqual(['12.50'])
    expect(found[0]!.customer.notes.items.map((n) => n.text)).toEqual(['customer note'])
    expect(found[0]!.tags.items.map((t) => t.name)).toEqual(['urgent'])
    expect(await em2.count('CustomerNote', {})).toBe(1)
    expect(await em2.count('InvoiceNote', {})).toBe(1)

    found[0]!.status = 'paid'
    await em2.flush()
    const [row] = await db.sql.unsafe(`select status::text from "${billing}".invoice`)
    expect(row!.status).toBe('paid')

    const em3 = db.orm.em()
    em3.remove(await em3.load('Invoice', invoice.id))
    const removed = await em3.flush()
    expect(removed.deleted).toMatchObject({ [`${billing}.invoice`]: 1 })
    const [left] = await db.sql.unsafe(`select (select count(*)::int from "${billing}".note) as notes, (select count(*)::int from "${billing}".invoice_tag) as links, (select count(*)::int from "${crm}".note) as customer_notes`)
    expect(left).toEqual({ notes: 0, links: 0, customer_notes: 1 })
  })

  it('names a missing table with its schema', async () => {
    await db.sql.unsafe(`drop table "${crm}".note`)
    expect(await db.orm.checkSchema()).toEqual([{ table: `${crm}.note`, problem: 'table is missing' }])
  })
})
