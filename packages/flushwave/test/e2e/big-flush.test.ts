import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defineSchema, entity, flushwave, t, tcpNoDelay } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

const schema = defineSchema({
  Parent: entity('parent', { id: t.id(), name: t.text() }),
  Child: entity('child', { id: t.id(), n: t.integer(), parent: t.manyToOne('Parent') }),
  Fixed: entity('fixed', { id: t.providedId(), label: t.text() }),
  Node: entity('node', { id: t.id(), n: t.integer(), parent: t.manyToOne('Node').nullable() }),
})

let db: TestDatabase<typeof schema.defs>
beforeAll(async () => {
  db = await testDatabase(schema, { name: 'big' })
})
afterAll(() => db.close())

describe('big flushes', () => {
  it('split statements by rows and pipelines by the driver in-flight limit; round trips grow with chunks, not rows', async () => {
    // A pipeline of 6 queries at most: BEGIN, the transaction id and 4 statements; 6 statements; the rest and COMMIT.
    const sql = postgres(db.sql.options as never)
    const narrow = postgres({ ...(sql.options as object), ...tcpNoDelay, max: 1, max_pipeline: 6 } as never) as postgres.Sql
    await sql.end()
    const orm = flushwave({ schema, sql: narrow, maxRowsPerStatement: 1_000, onQuery: (e) => db.queries.push(e) })
    try {
      const em = orm.em()
      const parents = Array.from({ length: 2_500 }, (_, i) => em.create('Parent', { name: `p${i}` }))
      for (let i = 0; i < 7_500; i++) em.create('Child', { n: i, parent: parents[i % parents.length]! })
      db.queries.length = 0
      const result = await em.flush()
      expect(result.inserted).toEqual({ parent: 2_500, child: 7_500 })
      expect(result.statements).toBe(3 + 8)
      const writes = db.queries.filter((q) => q.phase === 'write')
      expect(writes.map((q) => q.text.split(' (')[0])).toEqual([...Array(3).fill('insert into "parent"'), ...Array(8).fill('insert into "child"')])
      // 11 statements in three pipelines (4, 6, 1), each shape described once on this fresh connection.
      expect(result.coldStatements).toBe(3) // two shapes and the ledger insert
      expect(await db.sql`select count(*)::int as n from child c join parent p on p.id = c.parent_id`).toEqual([{ n: 7_500 }])

      // The same again on the now warm connection: exactly one round trip per pipeline.
      const again = orm.em()
      const more = Array.from({ length: 2_500 }, (_, i) => again.create('Parent', { name: `q${i}` }))
      for (let i = 0; i < 7_500; i++) again.create('Child', { n: i, parent: more[i % more.length]! })
      const warm = await again.flush()
      const allocation = warm.plan.preparation.reduce((n, p) => n + p.roundTrips, 0)
      expect(warm.coldStatements).toBe(0)
      expect(warm.roundTrips - allocation).toBe(3)
    } finally {
      await narrow.end()
    }
  })

  it('leaves room in the last pipeline for COMMIT and a carried id refill: one round trip per pipeline', async () => {
    await db.sql.unsafe('alter table parent alter column id set increment by 100')
    const sql = postgres(db.sql.options as never)
    const narrow = postgres({ ...(sql.options as object), ...tcpNoDelay, max: 1, max_pipeline: 6 } as never) as postgres.Sql
    await sql.end()
    const queries: string[] = []
    const orm = flushwave({ schema, sql: narrow, maxRowsPerStatement: 10, idBlockSize: 16, onQuery: (e) => queries.push(e.phase) })
    const flushParents = async (n: number) => {
      const em = orm.em()
      for (let i = 0; i < n; i++) em.create('Parent', { name: `pooled ${i}` })
      return em.flush()
    }
    try {
      await flushParents(1) // 17 ids asked, a block of 100 fetched
      // Each flush takes 30 ids: within a few, one leaves the pool low and carries the refill.
      const carried: boolean[] = []
      for (let flush = 0; flush < 8; flush++) {
        queries.length = 0
        const result = await flushParents(30)
        const carries = queries.includes('allocate')
        carried.push(carries)
        expect(result.plan.preparation).toEqual([])
        if (!carries) {
          // BEGIN, the transaction id, 3 statements and COMMIT: 6 queries, one pipeline.
          expect(result).toMatchObject({ statements: 3, roundTrips: 1 })
          continue
        }
        // BEGIN, the transaction id and 2 statements; then the third, COMMIT and the refill.
        expect(result).toMatchObject({ inserted: { parent: 30 }, statements: 3, roundTrips: 2 })
        expect(queries).toEqual(['write', 'write', 'write', 'allocate'])
      }
      expect(carried).toContain(true)
      const [{ n }] = (await db.sql`select count(*)::int as n from parent where name like 'pooled %'`) as unknown as [{ n: number }]
      expect(n).toBe(1 + 8 * 30)
    } finally {
      await narrow.end()
    }
  })

  it('splits a self-referencing table with each row after the row it refers to, so no chunk points at a later one', async () => {
    const orm = flushwave({ schema, executor: db.orm.executor, maxRowsPerStatement: 10 })
    const em = orm.em()
    // A chain made child-first: node i points at node i + 1, created after it.
    const nodes = Array.from({ length: 35 }, (_, i) => em.create('Node', { n: i, parent: null }))
    nodes.forEach((node, i) => (node.parent = nodes[i + 1] ?? null))
    const result = await em.flush()
    expect(result).toMatchObject({ inserted: { node: 35 }, statements: 4 })
    const rows = await db.sql`select c.n, p.n as parent from node c left join node p on p.id = c.parent_id order by c.n`
    expect(rows).toEqual(nodes.map((_, i) => ({ n: i, parent: i + 1 < 35 ? i + 1 : null })))
  })

  it('takes ids the application provides, with no allocation', async () => {
    const em = db.orm.em()
    db.queries.length = 0
    const fixed = em.create('Fixed', { id: 42, label: 'the answer' })
    expect(fixed.id).toBe(42)
    expect(() => em.create('Fixed', { label: 'no id' } as never)).toThrow(/id/)
    await em.flush()
    expect(db.queries.map((q) => q.phase)).toEqual(['write'])
    expect(await db.sql`select label from fixed where id = 42`).toEqual([{ label: 'the answer' }])
  })
})
