import { createTestSchema, searchPathOptions, type TestSchema } from 'devdb'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { createTablesSql, defineSchema, entity, flushwave, t } from '../../src/index.js'

/**
 * postgres.js 3.4.9 keeps a connection's row counter when a query fails while its rows stream in,
 * and the next query on that connection resolves with leading holes (porsager/postgres#1119,
 * #1181). The same pool serves the application's own queries and Flushwave's: whatever failed
 * before on a connection, Flushwave's reads, id allocation and flushes get exactly their rows.
 */
const schema = defineSchema({ Note: entity('note', { id: t.id(), text: t.text() }) })

describe('postgres.js: a connection whose previous query failed mid-result', () => {
  let ns: TestSchema
  let sql: postgres.Sql
  let admin: postgres.Sql
  beforeAll(async () => {
    ns = await createTestSchema(inject('databaseUrl'), 'sparse_rows')
    // One connection: the failing query and Flushwave's next one share it.
    sql = postgres(inject('databaseUrl'), { max: 1, onnotice: () => {}, ...searchPathOptions(ns.name), connection: { application_name: `fw-sparse-${process.pid}` } })
    admin = postgres(inject('databaseUrl'), { max: 1, onnotice: () => {} })
    for (const statement of createTablesSql(schema)) await sql.unsafe(statement)
    await sql`insert into note (text) select 'seed ' || i from generate_series(1, 5) as i`
  })
  afterAll(async () => {
    await sql?.end({ timeout: 1 })
    await admin?.end()
    await ns?.drop()
  })

  /** Three rows stream in, then the fourth fails: postgres.js's row counter is left at 3. */
  const failMidResult = () => sql`select i, 1 / (4 - i) as boom from generate_series(1, 10) as i`.catch(() => undefined)

  it('the driver itself answers the next query with leading holes (if this fails, postgres.js fixed it)', async () => {
    await failMidResult()
    const rows = await sql`select 1 as a union all select 2`.values()
    expect(rows.length).toBe(5)
    expect(0 in rows).toBe(false)
  })

  it('a find, a load, the id allocation and the flush after it get exactly their rows', async () => {
    const orm = flushwave({ schema, sql, outcomeLedger: false })
    await failMidResult()
    const em = orm.em()
    const notes = await em.find('Note', { text: { like: 'seed%' } })
    expect(notes.map((n) => n.text).sort()).toEqual(['seed 1', 'seed 2', 'seed 3', 'seed 4', 'seed 5'])
    await failMidResult()
    expect(await orm.em().load('Note', 2)).toMatchObject({ text: 'seed 2' })
    await failMidResult()
    const created = em.create('Note', { text: 'after' })
    const result = await em.flush() // the id allocation runs first, on the same connection
    expect(result.inserted).toEqual({ note: 1 })
    const id = em.idOf(created)
    expect(await sql`select text from note where id = ${String(id)}`).toEqual([{ text: 'after' }])
  })

  it('after its server process was terminated while rows streamed in, a read gets exactly its rows', async () => {
    const orm = flushwave({ schema, sql, outcomeLedger: false })
    const [{ pid }] = (await sql`select pg_backend_pid() as pid`) as unknown as [{ pid: number }]
    // More rows than PostgreSQL's 8 kB output buffer holds, then a stall: many rows arrive first.
    const streaming = sql`select i, case when i = 20000 then pg_sleep(10) end from generate_series(1, 20000) as i`.catch(() => undefined)
    await new Promise((resolve) => setTimeout(resolve, 500))
    await admin`select pg_terminate_backend(${pid})`
    await streaming
    const notes = await orm.em().find('Note', { text: { like: 'seed%' } })
    expect(notes.map((n) => n.text).sort()).toEqual(['seed 1', 'seed 2', 'seed 3', 'seed 4', 'seed 5'])
  })
})
