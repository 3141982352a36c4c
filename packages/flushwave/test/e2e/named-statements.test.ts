import { startEmbeddedDatabase, type EmbeddedDatabase } from 'devdb'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTablesSql, type Flushwave } from '../../src/index.js'
import { bookstore } from '../support/bookstore.js'
import { EXECUTORS, openExecutor, type ExecutorName } from '../support/executors.js'

/**
 * Prepared (named) statements: on node-postgres and knex, a direct connection parses each shape
 * once and then only binds it, as postgres.js does; `warmUp()` prepares them on every connection;
 * `prepare: false` names nothing. On every executor, a connection that lost its statements
 * (`DISCARD ALL`), a new connection and a restarted server never fail a flush: a statement the
 * server no longer has is sent again unnamed in the same flush. Behind PgBouncer in transaction mode
 * (PGBOUNCER_URL, scripts/pgbouncer.sh) nothing is named by default, and `prepare: true` on a
 * pooler that keeps nothing still commits every flush. A server of its own: it is restarted.
 */
type Orm = Flushwave<typeof bookstore.defs>
const bouncer = process.env.PGBOUNCER_URL

let db: EmbeddedDatabase
let admin: postgres.Sql
beforeAll(async () => {
  db = await startEmbeddedDatabase()
  admin = postgres(db.url, { max: 1, onnotice: () => {} })
  for (const statement of createTablesSql(bookstore)) await admin.unsafe(statement)
}, 60_000)
afterAll(async () => {
  await admin?.end({ timeout: 1 })
  await db?.stop()
})

/** An author and two books: three statements and the ledger insert. */
async function write(orm: Orm, tag: string) {
  const em = orm.em()
  const author = em.create('Author', { name: tag })
  for (const title of ['a', 'b']) em.create('Book', { title: `${tag}-${title}`, author })
  return em.flush()
}

/** Statement names the connection the query runs on holds. */
async function names(query: (text: string) => Promise<Record<string, unknown>[]>): Promise<string[]> {
  return (await query("select name from pg_prepared_statements where name like 'flushwave\\_%' order by name")).map((r) => String(r.name))
}

describe.each(EXECUTORS)('prepared statements on %s', (name: ExecutorName) => {
  it('survive DISCARD ALL, a new connection and a server restart: every flush commits', { timeout: 60_000 }, async () => {
    const app = `named-${name.replace(/[^a-z]/g, '')}`
    const opened = openExecutor(name, db.url, bookstore, { max: 1, applicationName: app })
    const orm = opened.orm
    const tags: string[] = []
    const flush = async (tag: string) => {
      tags.push(tag)
      return write(orm, tag)
    }
    /** The same unit of work, retried as an application would (up to 10 runs, rolled back each time). */
    const retried = async (tag: string) => {
      tags.push(tag)
      await orm.unitOfWork(async (em) => {
        const author = em.create('Author', { name: tag })
        for (const title of ['a', 'b']) em.create('Book', { title: `${tag}-${title}`, author })
      }, { attempts: 10 })
    }
    try {
      await flush(`${app}-1`)
      expect(await flush(`${app}-2`)).toMatchObject({ roundTrips: 1, coldStatements: 0 })
      // The session forgets every prepared statement; the next flush commits all the same.
      await opened.query('discard all')
      const afterDiscard = await flush(`${app}-3`)
      expect(afterDiscard.inserted).toEqual({ author: 1, book: 2 })
      // Sent again once, unnamed (node-postgres, knex) or on a new connection (postgres.js).
      expect(afterDiscard.roundTrips).toBeGreaterThanOrEqual(2)
      expect(await flush(`${app}-4`)).toMatchObject({ roundTrips: 1 })
      await opened.query('discard all')
      expect(await orm.em().find('Author', { name: `${app}-1` })).toHaveLength(1)

      // A new connection: its server process terminated, the pool opens another.
      await admin`select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${app}`
      // The pool may hand the dead connection to the first flush: an application retries it (rolled back).
      await retried(`${app}-5`)
      expect(await flush(`${app}-6`)).toMatchObject({ roundTrips: 1 })

      // A restarted server: every connection new, nothing prepared anywhere.
      await db.shutdown()
      await db.restart()
      await retried(`${app}-7`)
      expect(await flush(`${app}-8`)).toMatchObject({ roundTrips: 1 })

      const rows = await admin`select a.name, count(b.id)::int as books from author a left join book b on b.author_id = a.id where a.name = any(${tags}) group by a.name order by a.name`
      expect(rows).toEqual([...tags].sort().map((tag) => ({ name: tag, books: 2 })))
    } finally {
      await opened.close()
    }
  })
})

describe.each(['node-postgres', 'knex'] as const)('named statements on %s', (name) => {
  it('are parsed once per direct connection, and warmUp() prepares them on every one', async () => {
    const opened = openExecutor(name, db.url, bookstore, { max: 2 })
    try {
      const warm = await opened.orm.warmUp()
      expect(warm).toMatchObject({ connections: 2, prepares: true })
      expect(warm.prepared).toBeGreaterThanOrEqual(2 * 5)
      const first = await write(opened.orm, `warm-${name}`)
      expect(first).toMatchObject({ roundTrips: 1, coldStatements: 0, inserted: { author: 1, book: 2 } })
      expect((await names(opened.query)).length).toBeGreaterThanOrEqual(5)
    } finally {
      await opened.close()
    }
  })

  it('cold on a new connection, then warm; with prepare: false nothing is named', async () => {
    const named = openExecutor(name, db.url, bookstore, { max: 1 })
    const unnamed = openExecutor(name, db.url, bookstore, { max: 1, orm: { prepare: false } })
    try {
      // The first pipeline on a connection (here the id allocation before the first flush) asks
      // whether it is direct, and goes unnamed; the flush then parses its shapes once.
      await named.select1()
      const cold = await write(named.orm, `cold-${name}-0`)
      expect(cold.coldStatements).toBe(3) // the two inserts' shapes and the ledger insert
      expect(await write(named.orm, `cold-${name}-1`)).toMatchObject({ roundTrips: 1, coldStatements: 0 })
      expect(await names(named.query)).not.toEqual([])

      for (let i = 0; i < 3; i++) expect(await write(unnamed.orm, `unnamed-${name}-${i}`)).toMatchObject({ coldStatements: 0 })
      expect(await names(unnamed.query)).toEqual([])
    } finally {
      await named.close()
      await unnamed.close()
    }
  })
})

describe.runIf(bouncer)('named statements through PgBouncer (transaction mode)', () => {
  const direct = () => postgres(process.env.DATABASE_URL!, { max: 1, onnotice: () => {} })
  const at = (base: string, database: string) => {
    const u = new URL(base)
    u.pathname = `/${database}`
    return u.toString()
  }

  // A database each: PgBouncer pools server connections per database, and the prepared statements
  // one test leaves on them must not be what another finds.
  it.each(['node-postgres', 'knex'] as const)('%s names nothing by default, and commits every flush with prepare: true', async (name) => {
    const database = `named_${name.replace(/[^a-z]/g, '')}_${process.pid}_${Date.now().toString(36)}`
    const admin = direct()
    await admin.unsafe(`create database ${database}`)
    const tables = postgres(at(process.env.DATABASE_URL!, database), { max: 1, onnotice: () => {} })
    const url = at(bouncer!, database)
    const auto = openExecutor(name, url, bookstore, { max: 3 })
    const forced = openExecutor(name, url, bookstore, { max: 3, orm: { prepare: true } })
    try {
      for (const statement of createTablesSql(bookstore)) await tables.unsafe(statement)
      const flushes = await Promise.all(Array.from({ length: 12 }, (_, i) => write(auto.orm, `auto-${i}`)))
      expect(flushes.map((f) => f.inserted)).toEqual(Array(12).fill({ author: 1, book: 2 }))
      expect(await names(auto.query)).toEqual([])
      // Named on a pooler that keeps nothing: a flush that meets a statement its server connection
      // lacks (or has already) is sent again unnamed, and that connection names nothing from then on.
      // (Which flushes meet a missing statement depends on how PgBouncer hands out its server
      // connections; in most runs some do. Each is in the tables once, whichever.)
      await write(forced.orm, 'forced-ids')
      for (let round = 0; round < 4; round++) await Promise.all(Array.from({ length: 6 }, (_, i) => write(forced.orm, `forced-${round}-${i}`)))
      const [counted] = await tables`select count(*)::int as n, count(distinct name)::int as names from author where name like 'forced-%'`
      expect(counted).toEqual({ n: 25, names: 25 })
      const [books] = await tables`select count(*)::int as n from book where title like 'forced-%'`
      expect(books!.n).toBe(50)
    } finally {
      await auto.close()
      await forced.close()
      await tables.end()
      await admin.unsafe(`drop database if exists ${database} with (force)`)
      await admin.end()
    }
  })
})
