/**
 * Columns the server fills, on every executor: `.serverDefault()` ones that `create` leaves unset
 * are left out of the INSERT and read back by it (RETURNING, in the flush's one pipeline), and
 * `.generated()` ones are never written and read back too; rows that leave different columns unset
 * go in different INSERTs. In memory afterwards: the rows' values, with snapshots that make the next
 * flush write nothing.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { createTablesSql, defineSchema, entity, EntityStateError, InvalidValueError, NotLoadedError, t, type FlushResult } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { ALL_EXECUTORS } from '../support/executors.js'

const schema = defineSchema({
  Order: entity('order_row', {
    id: t.id(),
    label: t.text(),
    createdAt: t.timestamptz().serverDefault('now()'),
    code: t.integer().serverDefault("nextval('order_code_seq')").unique(),
    status: t.text().serverDefault("'open'"),
    note: t.text().nullable().serverDefault("'none'"),
    price: t.numeric(),
    quantity: t.integer(),
    total: t.numeric().generated('price * quantity'),
    parent: t.manyToOne('Order').nullable(),
  }),
  Line: entity('line', { id: t.uuidId(), sku: t.text(), upper: t.text().generated('upper(sku)'), order: t.manyToOne('Order') }),
})

describe('server-filled columns in the schema', () => {
  it('writes the default and the generation expression in createTablesSql', () => {
    const ddl = createTablesSql(schema).join(';\n')
    expect(ddl).toContain(`"created_at" timestamptz not null default now()`)
    expect(ddl).toContain(`"total" numeric not null generated always as (price * quantity) stored`)
    expect(ddl).toContain(`"note" text default 'none'`)
  })

  it('refuses a column that is both, or a default besides, or a version or id that is either', () => {
    expect(() => t.text().default('a').serverDefault("'b'")).toThrow(TypeError)
    expect(() => t.text().serverDefault("'b'").default('a')).toThrow(TypeError)
    expect(() => t.text().serverDefault().generated('1')).toThrow(TypeError)
    expect(() => t.text().generated("'a'").serverDefault()).toThrow(TypeError)
    expect(() => (t.timestamptz().serverDefault() as never as ReturnType<typeof t.timestamptz>).defaultNow()).toThrow(TypeError)
    expect(() => t.version().serverDefault()).toThrow(TypeError)
    expect(() => t.version().generated('1')).toThrow(TypeError)
    expect(() => t.text().generated('')).toThrow(TypeError)
    expect(() => t.providedId(t.integer().serverDefault('1') as never)).toThrow(TypeError)
    expect(() => t.id(t.integer().generated('1') as never)).toThrow(TypeError)
  })
})

describe.each(ALL_EXECUTORS)('server-filled columns on %s', (executor) => {
  let db: TestDatabase<typeof schema.defs>
  beforeAll(async () => {
    // The sequence that the code column's default reads exists before the table.
    db = await testDatabase(schema, { name: 'servervalues', executor, before: ['create sequence order_code_seq'] })
  })
  afterAll(() => db?.close())
  beforeEach(async () => {
    for (const table of ['line', 'order_row']) await db.sql.unsafe(`delete from ${table}`)
    db.queries.length = 0
  })

  const rowsOf = async () =>
    (await db.sql.unsafe(`select id::text, label, created_at, code, status, note, price::text, quantity, total::text from order_row order by id`)) as unknown as {
      id: string
      label: string
      created_at: Date
      code: number
      status: string
      note: string | null
      price: string
      quantity: number
      total: string
    }[]

  it('omits the unset columns, reads them back in the same round trip, and writes nothing more', async () => {
    const em = db.orm.em()
    const a = em.create('Order', { label: 'a', price: '2.50', quantity: 4 })
    const b = em.create('Order', { label: 'b', price: '1', quantity: 3, parent: a })
    const lines = [em.create('Line', { sku: 'ab-1', order: a }), em.create('Line', { sku: 'cd-2', order: b })]
    expect(() => a.createdAt).toThrow(EntityStateError)
    expect(() => a.total).toThrow(/is set by the server: read it after the flush/)
    expect(() => lines[0]!.upper).toThrow(EntityStateError)
    const result = await em.flush()
    expect(result).toMatchObject({ statements: 2, inserted: { order_row: 2, line: 2 } })
    expect(writeRoundTrips(result)).toBe(1)
    const insert = db.writes().find((q) => q.text.startsWith('insert into "order_row"'))!
    expect(insert.text).toBe(
      'insert into "order_row" as t ("id", "label", "price", "quantity", "parent_id") ' +
        'select * from unnest($1::int8[], $2::text[], $3::numeric[], $4::int4[], $5::int8[]) ' +
        'returning t."id"::text, floor(extract(epoch from t."created_at") * 1000), t."code", t."status", t."note", t."total"::text',
    )
    const rows = await rowsOf()
    for (const [entity, row] of [[a, rows[0]!], [b, rows[1]!]] as const) {
      expect(String(entity.id)).toBe(row.id)
      expect(entity.createdAt.getTime()).toBe(row.created_at.getTime())
      expect(entity.code).toBe(row.code)
      expect(entity.status).toBe('open')
      expect(entity.note).toBe('none')
      expect(entity.total).toBe(row.total)
    }
    expect(a.total).toBe('10.00')
    expect(lines.map((l) => l.upper)).toEqual(['AB-1', 'CD-2'])
    db.queries.length = 0
    expect(await em.flush()).toMatchObject({ statements: 0, roundTrips: 0 })
    expect(db.writes()).toEqual([])
    // A later load reads the same values.
    const again = await db.orm.em().load('Order', a.id)
    expect([again.code, again.createdAt.getTime(), again.total]).toEqual([a.code, a.createdAt.getTime(), a.total])
  })

  it('sends rows that leave different columns unset in different INSERTs, in one pipeline', async () => {
    const em = db.orm.em()
    const given = new Date('2020-01-02T03:04:05.678Z')
    const plain = em.create('Order', { label: 'plain', price: '1', quantity: 1 })
    const dated = em.create('Order', { label: 'dated', price: '2', quantity: 2, createdAt: given, note: null })
    const dated2 = em.create('Order', { label: 'dated2', price: '3', quantity: 3, createdAt: given, note: null, parent: plain })
    const all = em.create('Order', { label: 'all', price: '4', quantity: 4, createdAt: given, code: 900, status: 'closed', note: 'n' })
    const result = await em.flush()
    expect(result).toMatchObject({ statements: 3, inserted: { order_row: 4 } })
    expect(writeRoundTrips(result)).toBe(1)
    // By the set of columns left unset (`all` leaves the fewest), but `plain` before the group of
    // `dated2`, which refers to it: a foreign key is checked at the end of each INSERT.
    const inserts = result.plan.waves[0]!.ops.filter((op) => op.kind === 'insert')
    expect(inserts.map((op) => (op.kind === 'insert' ? op.ids.length : 0))).toEqual([1, 1, 2])
    expect(inserts.map((op) => (op.kind === 'insert' ? op.omit?.length : 0))).toEqual([1, 5, 3])
    const rows = await rowsOf()
    expect(rows.map((r) => [r.label, r.status, r.note, r.total])).toEqual([
      ['plain', 'open', 'none', '1'],
      ['dated', 'open', null, '4'],
      ['dated2', 'open', null, '9'],
      ['all', 'closed', 'n', '16'],
    ])
    expect(rows[1]!.created_at.getTime()).toBe(given.getTime())
    expect(rows[3]!.code).toBe(900)
    for (const [entity, row] of [[plain, rows[0]!], [dated, rows[1]!], [dated2, rows[2]!], [all, rows[3]!]] as const) {
      expect([entity.createdAt.getTime(), entity.code, entity.status, entity.note, entity.total]).toEqual([row.created_at.getTime(), row.code, row.status, row.note, row.total])
    }
    expect(await em.flush()).toMatchObject({ statements: 0 })
  })

  it('writes a server-filled column that was changed after the flush, and reads back the generated ones an update changes', async () => {
    const em = db.orm.em()
    const order = em.create('Order', { label: 'x', price: '2', quantity: 2 })
    await em.flush()
    expect(order.total).toBe('4')
    order.status = 'paid'
    order.price = '5'
    db.queries.length = 0
    const one = await em.flush()
    expect(one.roundTrips).toBe(1)
    expect(db.writes()).toHaveLength(1)
    // Never written, but returned by the UPDATE: the row's total changed with its price.
    expect(db.writes()[0]!.text).not.toMatch(/set[^]*"total" =/)
    expect(db.writes()[0]!.text).toContain('returning')
    expect(order.total).toBe('10')
    expect(order.status).toBe('paid')
    expect(await em.flush()).toMatchObject({ statements: 0 })

    // Several rows, and a counter added on the server: each form returns them (a versioned one:
    // composite-keys.test.ts).
    const em2 = db.orm.em()
    const orders = [order, em.create('Order', { label: 'y', price: '1', quantity: 1 })]
    await em.flush()
    const again = await em2.find('Order', { id: { in: orders.map((o) => o.id) } }, { orderBy: { id: 'asc' } })
    for (const o of again) o.price = '3'
    await em2.flush()
    expect(again.map((o) => o.total)).toEqual(['6', '3'])
    em2.increment(again[1]!, 'quantity', 4)
    again[0]!.quantity = 7
    await em2.flush()
    expect(again.map((o) => o.total)).toEqual(['21', '15'])
    expect((await db.sql`select total::text from order_row where id in (${orders[0]!.id}, ${orders[1]!.id}) order by id`).map((r) => r.total)).toEqual(['21', '15'])
    // A row updated without being read (a reference) takes its generated values too.
    const em3 = db.orm.em()
    const ref = em3.ref('Order', orders[0]!.id)
    ref.price = '1'
    await em3.flush()
    expect(ref.total).toBe('7')
  })

  it('refuses a value for a generated column, in create, assignments and assign', async () => {
    const em = db.orm.em()
    expect(() => em.create('Order', { label: 'x', price: '1', quantity: 1, total: '1' } as never)).toThrow(InvalidValueError)
    expect(() => em.create('Order', { label: 'x', price: '1', quantity: 1, total: '1' } as never)).toThrow(/generated by the database/)
    const order = em.create('Order', { label: 'x', price: '1', quantity: 1 })
    expect(() => ((order as unknown as { total: string }).total = '2')).toThrow(InvalidValueError)
    expect(() => em.assign(order, { label: 'y', total: '2' } as never)).toThrow(InvalidValueError)
    expect(order.label).toBe('x')
    expect(() => em.increment(order, 'total' as never, 1)).toThrow(InvalidValueError)
    await em.flush()
    expect(order.total).toBe('1')
  })

  it('upserts leave unset columns to the server and take the row', async () => {
    const em = db.orm.em()
    const first = em.upsert('Order', { label: 'u', price: '3', quantity: 3, code: 41 }, { onConflict: 'code' })
    await em.flush()
    expect([first.status, first.total, first.note]).toEqual(['open', '9', 'none'])
    const em2 = db.orm.em()
    const second = em2.upsert('Order', { label: 'v', price: '1', quantity: 1, code: 41 }, { onConflict: 'code' })
    await em2.flush()
    expect(second.id).toBe(first.id)
    expect([second.label, second.total, second.createdAt.getTime()]).toEqual(['v', '1', first.createdAt.getTime()])
  })

  it('warms up the shapes of inserts that leave every server-filled column unset, or only generated ones', async () => {
    await db.orm.warmUp()
    const em = db.orm.em()
    em.create('Order', { label: 'w', price: '1', quantity: 1 })
    em.create('Line', { sku: 's', order: em.create('Order', { label: 'v', price: '1', quantity: 1, createdAt: new Date(), code: 5, status: 's', note: null }) })
    // Nothing unprepared where statements are prepared (postgres.js); the others parse every statement anyway.
    const result = await em.flush()
    if (executor === 'postgres.js') expect(result.coldStatements).toBe(0)
    expect(result.inserted).toEqual({ order_row: 2, line: 1 })
  })

  it('checkSchema reports a missing default and a column that is not generated', async () => {
    expect(await db.orm.checkSchema()).toEqual([])
    await db.sql.unsafe('alter table order_row alter column status drop default')
    await db.sql.unsafe('alter table line drop column upper')
    await db.sql.unsafe("alter table line add column upper text not null default ''")
    try {
      expect(await db.orm.checkSchema()).toEqual([
        { table: 'order_row', column: 'status', problem: 'has no default; the schema says .serverDefault()' },
        { table: 'line', column: 'upper', problem: 'is not a stored generated column; the schema says .generated()' },
      ])
    } finally {
      await db.sql.unsafe("alter table order_row alter column status set default 'open'")
      await db.sql.unsafe('alter table line drop column upper')
      await db.sql.unsafe('alter table line add column upper text not null generated always as (upper(sku)) stored')
    }
  })
})

/** The flush's own round trips: a cold id pool's fetch before it (FlushResult.plan.preparation) aside. */
function writeRoundTrips(result: FlushResult): number {
  return result.roundTrips - result.plan.preparation.reduce((n, p) => n + p.roundTrips, 0)
}
