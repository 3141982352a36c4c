import { createTestSchema, type TestSchema } from 'devdb'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { createTablesSql, flushwave, type Flushwave } from '../../src/index.js'
import { bookstoreUuid } from '../support/bookstore-uuid.js'

/**
 * postgres.js 3.4.9 reopens a closed connection for the request at the head of its pool's queue; a
 * reservation reopened that way is dropped once the new session has fetched its array types, and
 * its promise never settles. A flush queued for a connection whose backend is then terminated
 * waited its whole flush timeout; it must get the reopened connection instead (hedged-reserve.ts).
 */
const schema = bookstoreUuid
const FLUSH_TIMEOUT = 20_000

describe('postgres.js: a reservation queued while the pool reopens a connection', () => {
  let ns: TestSchema
  let sql: postgres.Sql
  let admin: postgres.Sql
  let orm: Flushwave<typeof schema.defs>
  beforeAll(async () => {
    ns = await createTestSchema(inject('databaseUrl'), 'lost_reservation')
    sql = postgres(inject('databaseUrl'), { max: 1, onnotice: () => {}, connection: { search_path: `"${ns.name}"` } })
    admin = postgres(inject('databaseUrl'), { max: 1, onnotice: () => {} })
    for (const statement of createTablesSql(schema)) await sql.unsafe(statement)
    orm = flushwave({ schema, sql, flushTimeoutMs: FLUSH_TIMEOUT })
  })
  afterAll(async () => {
    await sql?.end({ timeout: 1 })
    await admin?.end({ timeout: 1 })
    await ns?.drop()
  })

  it('gets the reopened connection, long before the flush timeout', { timeout: FLUSH_TIMEOUT + 10_000 }, async () => {
    for (let round = 0; round < 3; round++) {
      // The pool's one connection is held by the application; the flush queues for it.
      const held = await sql.reserve()
      const [{ pid }] = (await held`select pg_backend_pid() as pid`) as unknown as [{ pid: number }]
      const em = orm.em()
      em.create('Author', { name: `queued ${round}` })
      const started = performance.now()
      const flushing = em.flush()
      await new Promise((resolve) => setTimeout(resolve, 100))
      await admin`select pg_terminate_backend(${pid})`
      const result = await flushing
      const ms = performance.now() - started
      expect(result.roundTrips).toBeGreaterThanOrEqual(1)
      // Without the hedge the flush waited FLUSH_TIMEOUT and failed; with it, about a second.
      expect(ms).toBeLessThan(FLUSH_TIMEOUT / 2)
      expect((await sql`select count(*)::int as n from author where name = ${`queued ${round}`}`)[0]!.n).toBe(1)
    }
  })
})
